"""``accelgen explore``: search a design space for the Pareto-optimal accelerators of a model
(``docs/dse.md``)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from costmodel.analysis import PRESETS
from costmodel.base import AccelgenError

from .options import (add_fpga_arguments, add_model_arguments, fpga_from_args, model_from_args, non_negative_int,
                      note, positive_int, stdout_console)

__all__ = ["explore_arguments", "run_explore", "search_with_progress"]


def explore_arguments(parser: argparse.ArgumentParser, *, flow: bool = False) -> None:
    """``explore``'s options; with ``flow`` those ``accelgen flow`` shares (its preset is ``hwgen``,
    one dataflow per layer kind, and it writes its own output folder)."""
    group = parser.add_argument_group("what to search")
    add_model_arguments(group, "search for this one layer of the model only")
    group.add_argument("--space", required=True, metavar="FILE.yaml", help="a design space (configs/space/)")
    group.add_argument("--objectives", default="runtime,energy", metavar="A,B[,C]",
                       help="objectives to minimise: runtime, energy, edp, area, power, or the FPGA figures luts, ffs, "
                            "dsps, brams (default: runtime,energy)")
    group.add_argument("--constraint", action="append", default=[], metavar="METRIC<=X",
                       help="e.g. area_mm2<=2, power_mw<=500, l2_bytes<=262144, noc_bw_words_per_cycle<=32, "
                            "luts<=24000 (repeatable; adds to the space file's)")
    if not flow:
        group.add_argument("--preset", default="maestro", metavar="NAME", help="timing preset (default: maestro)")
        group.add_argument("--per-layer-dataflow", action="store_true", default=None,
                           help="every layer takes its own best dataflow (one hardware for all layers)")
    group.add_argument("--seed", type=non_negative_int, metavar="N", help="random search: the seed")
    group.add_argument("--samples", type=positive_int, metavar="N",
                       help="sample N random points instead of enumerating the space")
    add_fpga_arguments(parser.add_argument_group("FPGA figures (docs/fpga.md: the resource model)"))
    run = parser.add_argument_group("how to search")
    run.add_argument("--backend", default="local", choices=("local", "ray"),
                     help="local processes (default) or a Ray cluster")
    run.add_argument("--workers", type=positive_int, metavar="N", help="local worker processes (default: CPUs)")
    run.add_argument("--ray-address", metavar="ADDR", help="Ray cluster address (default: start a local one)")
    run.add_argument("--max-points", type=positive_int, metavar="N", help="stop after N points")
    run.add_argument("--time-budget", type=float, metavar="SECONDS", help="stop after about this long")
    if not flow:
        run.add_argument("--resume", action="store_true", help="continue the search checkpointed in --out")
        run.add_argument("--out", metavar="DIR", help="output folder (default: out/explore-SPACE-MODEL)")
        run.add_argument("--no-progress", action="store_true", help="no progress bar")


def plan_from_args(args: argparse.Namespace, preset: str, per_layer_dataflow: bool | None = None) -> Any:
    """The search plan of ``explore_arguments``' options (space, model, objectives, constraints,
    sampling) under ``preset``."""
    from dataclasses import replace

    from costmodel.dse import load_space, make_plan, parse_constraint, parse_objectives

    if args.time_budget is not None and not (args.time_budget > 0 and math.isfinite(args.time_budget)):
        raise AccelgenError(f"expected a positive number of seconds, not {args.time_budget!r}", where="--time-budget")
    objectives = parse_objectives(args.objectives)
    space = load_space(args.space)
    constraints = tuple(parse_constraint(c, where=f"{space.source}: constraints") for c in space.constraints)
    constraints += tuple(parse_constraint(c) for c in args.constraint)
    fpga_target, part_limits = fpga_from_args(args)
    constraints += part_limits
    if args.samples is not None or args.seed is not None:
        space = replace(space, mode="random" if args.samples is not None else space.mode,
                        samples=args.samples or space.samples, seed=space.seed if args.seed is None else args.seed)
    model = model_from_args(args)
    plan = make_plan(space, model, objectives, constraints, preset, per_layer_dataflow, fpga_target)
    if part_limits:
        note(f"--part {args.part}: " + ", ".join(str(c) for c in part_limits))
    return plan


def run_explore(args: argparse.Namespace) -> int:
    from costmodel.dse import evaluator_for
    from costmodel.dse.output import front_rows, print_front, write_outputs
    from costmodel.dse.search import CHECKPOINT

    if args.preset not in PRESETS:
        raise AccelgenError(f"unknown preset {args.preset!r}; expected one of {', '.join(PRESETS)}", where="--preset")
    plan = plan_from_args(args, args.preset, args.per_layer_dataflow)
    space, model = plan.space, plan.model
    out_dir = Path(args.out or f"out/explore-{space.name}-{model.name}")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AccelgenError(f"cannot create the output folder ({exc.strerror or exc})", where=str(out_dir)) from None
    if not args.resume and (out_dir / CHECKPOINT).exists():
        note(f"starting afresh; the checkpoint in {out_dir} is replaced (use --resume to continue it)")
    state, elapsed = search_with_progress(plan, out_dir, backend=args.backend, workers=args.workers,
                                          ray_address=args.ray_address, max_points=args.max_points,
                                          time_budget_s=args.time_budget, resume=args.resume,
                                          show_progress=not args.no_progress)
    rows = front_rows(plan, state.front, evaluator_for(plan))
    write_outputs(out_dir, plan, state, rows, args.model)
    print_front(stdout_console(), plan, state, rows)
    rate = state.evaluated / elapsed if elapsed > 0 else 0.0
    note(f"{state.evaluated:,} points in {elapsed:.1f} s ({rate:,.0f} designs/s), {state.valid:,} valid, "
          f"{state.feasible:,} feasible; {len(rows)} on the front; wrote {out_dir}/pareto.csv, points/, pareto.png, "
          "pareto.svg")
    if state.stopped:
        note(f"stopped by the {'time' if state.stopped == 'time' else 'point'} budget at point "
              f"{state.next_point:,} of {plan.total_points:,}; --resume continues")
    return 0


def search_with_progress(plan: Any, out_dir: Path, *, backend: str = "local", workers: int | None = None,
                         ray_address: str | None = None, max_points: int | None = None,
                         time_budget_s: float | None = None, resume: bool = False,
                         show_progress: bool = True, label: str = "exploring") -> tuple[Any, float]:
    """:func:`costmodel.dse.run_search` checkpointed in ``out_dir``, with a progress bar on a
    terminal (points, designs/s, front size); an interrupt keeps the checkpoint and says how to
    go on.  Returns the search state and its wall seconds."""
    import time

    from costmodel.dse import run_search

    err = Console(file=sys.stderr, highlight=False, emoji=False)
    total = plan.total_points if max_points is None else min(plan.total_points, max_points)
    start = time.monotonic()
    progress = None
    if show_progress and err.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[rate]} designs/s, front {task.fields[front]}"),
                            TimeElapsedColumn(), console=err, transient=True)
        task = progress.add_task("explore", total=total, rate="-", front=0)

    def on_chunk(state: Any) -> None:
        if progress is not None:
            rate = state.evaluated / max(time.monotonic() - start, 1e-9)
            progress.update(task, completed=state.next_point, rate=f"{rate:,.0f}", front=len(state.front))

    try:
        if progress is not None:
            progress.start()
        state = run_search(plan, out_dir=out_dir, backend=backend, workers=workers, ray_address=ray_address,
                           max_points=max_points, time_budget_s=time_budget_s, resume=resume, on_chunk=on_chunk)
    except KeyboardInterrupt:
        note(f"checkpoint saved in {out_dir}; continue with the same command and --resume")
        raise
    finally:
        if progress is not None:
            progress.stop()
    return state, time.monotonic() - start

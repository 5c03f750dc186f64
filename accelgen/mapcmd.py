"""``accelgen map``: the best tile sizes and loop order of a library dataflow for each layer of a
model on one hardware (``costmodel.dse.mapping``, ``docs/dse.md``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from costmodel.base import AccelgenError
from costmodel.dse.mapping import (MAPPING_OBJECTIVES, MappingSearch, family_kind, mapping_space, rank_key,
                                   search_mappings)
from costmodel.workload import GEMM
from costmodel.workload.layers import analysed_layer

from .options import (add_hardware_arguments, add_model_arguments, add_output_arguments, emit_output,
                      hardware_from_args, model_from_args, non_negative_int, note, positive_int)

__all__ = ["map_arguments", "run_map"]


def map_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("what to map")
    add_model_arguments(group, "map this one layer of the model only (shows the best --top)")
    group.add_argument("--dataflow", metavar="FAMILY[,FAMILY]",
                       help="library dataflows whose tiles and orders to search (default: kcp for convolutions, "
                            "nmk for GEMMs; a layer takes the families of its kind)")
    search = parser.add_argument_group("how to search")
    search.add_argument("--objective", default="runtime", choices=tuple(MAPPING_OBJECTIVES),
                        help="what the best mapping minimises (default: runtime)")
    search.add_argument("--budget", type=positive_int, default=2000, metavar="N",
                        help="mappings analysed per layer and family: a larger space is sampled until the preset "
                             "has accepted N (refused ones, whose tiles the hardware cannot hold, do not count; at "
                             "most 20 N drawn) (default: 2000)")
    search.add_argument("--seed", type=non_negative_int, default=0, metavar="N", help="the sampling seed (default: 0)")
    search.add_argument("--top", type=positive_int, default=5, metavar="K",
                        help="mappings shown with --layer (default: 5)")
    search.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_hardware_arguments(parser)
    parser.set_defaults(preset="hwgen")
    add_output_arguments(parser)


def _families(args: argparse.Namespace, kind: str) -> list[str]:
    named = [f.strip() for f in (args.dataflow or "").split(",") if f.strip()]
    if not named:
        return ["nmk" if kind == "gemm" else "kcp"]
    return named


def run_map(args: argparse.Namespace) -> int:
    if args.format == "csv":
        raise AccelgenError("a mapping search prints a table or JSON; expected --format table or json",
                            where="--format")
    hw, overrides = hardware_from_args(args)
    model = model_from_args(args)
    # (every family checked against every layer of its kind before the first evaluation)
    jobs = []
    defaulted: set[str] = set()
    for layer in model.layers:
        kind = "gemm" if isinstance(analysed_layer(layer), GEMM) else "conv2d"
        fams = [f for f in _families(args, kind) if family_kind(f) == kind]
        if not fams and args.layer is not None:
            raise AccelgenError(f"no dataflow of --dataflow is for {kind} layers like {layer.name!r}; expected "
                                f"one of {'nmk' if kind == 'gemm' else 'kcp, yrp, yxp, xp, cp'}", where="--dataflow")
        if not fams:                    # (a CNN's classifier under --dataflow kcp,cp: the GEMM's default)
            fams = ["nmk" if kind == "gemm" else "kcp"]
            if kind not in defaulted:
                defaulted.add(kind)
                note(f"--dataflow names no {kind} family; {layer.name!r} and the model's other {kind} layers "
                     f"are mapped with {fams[0]}")
        for family in fams:
            jobs.append((layer, family, mapping_space(layer, family, hw.num_pes).size))
    total = sum(min(size, args.budget) for _, _, size in jobs)
    err = Console(file=sys.stderr, highlight=False, emoji=False)
    progress = None
    if not args.no_progress and err.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(TextColumn("mapping {task.fields[layer]}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[rate]} mappings/s"), TimeElapsedColumn(), console=err,
                            transient=True)
        task = progress.add_task("map", total=total, layer="", rate="-")
    done, drawn = [0], [0]
    start = time.monotonic()
    results: list[MappingSearch] = []
    try:
        if progress is not None:
            progress.start()
        for layer, family, _ in jobs:
            def on_progress(found: MappingSearch) -> None:
                if progress is not None:      # (the bar counts accepted mappings, the budget's; the rate all drawn)
                    n = drawn[0] + found.evaluated
                    progress.update(task, completed=done[0] + found.accepted, layer=f"{layer.name} ({family})",
                                    rate=f"{n / max(time.monotonic() - start, 1e-9):,.0f}")
            found = search_mappings(layer, family, hw, preset=args.preset, objective=args.objective,
                                    budget=args.budget, seed=args.seed, keep=args.top, on_progress=on_progress)
            done[0] += min(found.space_size, args.budget)
            drawn[0] += found.evaluated
            results.append(found)
            if found.interrupted:
                break
    finally:
        if progress is not None:
            progress.stop()
    elapsed = time.monotonic() - start
    interrupted = bool(results) and results[-1].interrupted
    if args.format == "json":
        emit_output(args, json.dumps(_as_json(results, hw.name, args), indent=2) + "\n")
    else:
        emit_output(args, lambda console: _print(console, results, hw.name, args, overrides))
    evaluated = sum(r.evaluated for r in results)
    note(f"{evaluated} mappings in {elapsed:.1f} s ({evaluated / max(elapsed, 1e-9):,.0f} mappings/s): "
         f"{sum(r.accepted for r in results)} analysed, {sum(r.refused for r in results)} refused by the "
         f"{args.preset} preset"
         + ("; interrupted: the best found so far" if interrupted else ""))
    return 130 if interrupted else 0


def _row(m) -> dict[str, Any]:
    r = m.result
    return {"dataflow": m.label, "params": m.params, "runtime_cycles": r.runtime_cycles,
            "energy_pj": r.energy_pj["total"], "utilization": r.utilization, "bound": r.bound,
            "feasible": r.feasible, "infeasible_reasons": list(r.infeasible_reasons)}


def _as_json(results: list[MappingSearch], hw_name: str, args: argparse.Namespace) -> dict[str, Any]:
    return {"hardware": hw_name, "preset": args.preset, "objective": args.objective, "budget": args.budget,
            "seed": args.seed,
            "layers": [{"layer": r.layer.name, "shape": r.layer.describe(), "family": r.family,
                        "space": r.space_size, "evaluated": r.evaluated, "accepted": r.accepted, "refused": r.refused,
                        "interrupted": r.interrupted, "best": [_row(m) for m in r.best]} for r in results]}


def _print(console: Console, results: list[MappingSearch], hw_name: str, args: argparse.Namespace,
           overrides: tuple[str, ...]) -> None:
    one = args.layer is not None
    title = (f"Mappings of {results[0].layer.name if results else '?'}" if one else "Best mapping per layer") + \
        f" on {hw_name}{' (' + ', '.join(overrides) + ')' if overrides else ''}, {args.preset} preset, " \
        f"by {args.objective}"
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    for name, justify in (("layer", "left"), ("#", "right"), ("mapping (--dataflow)", "left"),
                          ("cycles", "right"), ("util.", "right"), ("energy (pJ)", "right"), ("bound", "left"),
                          ("fits", "left"), ("searched", "right")):
        # (the mapping whole, folded if need be: it is what --dataflow takes)
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    # (per layer, its families' best mappings, the best first)
    by_layer: dict[str, list[MappingSearch]] = {}
    for r in results:
        by_layer.setdefault(r.layer.name, []).append(r)
    order = [r for rs in by_layer.values() for r in sorted(rs, key=lambda r: rank_key(r.best[0]) if r.best
                                                            else (True, float("inf"), 0))]
    for r in order:
        shown = r.best if one else r.best[:1]
        if not shown:
            table.add_row(r.layer.name, "", f"{r.family}: every mapping refused ({r.first_refusal})", "", "", "",
                          "", "", f"{r.evaluated}/{r.space_size}")
        for rank, m in enumerate(shown, 1):
            res = m.result
            table.add_row(r.layer.name, str(rank), m.label, f"{res.runtime_cycles:,}", f"{res.utilization:.1%}",
                          f"{res.energy_pj['total']:.4g}", res.bound, "yes" if res.feasible else "no",
                          f"{r.evaluated}/{r.space_size}")
    console.print(table)

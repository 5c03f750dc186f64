"""What a search leaves behind: ``pareto.csv``, one design-point YAML per front point
(``points/point_NNNN.yaml``, read by ``accelgen analyze --design``), the plot, and the table."""

from __future__ import annotations

import csv
import io
import math
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from rich import box
from rich.console import Console
from rich.table import Table

from ..base import write_atomically
from ..fpga import FPGA_METRICS
from ..hardware.hardware import hardware_to_dict
from .evaluate import Evaluator, metric
from .pareto import Front
from .plan import METRICS, Plan
from .search import SearchState

__all__ = ["front_rows", "write_outputs", "print_front"]

_SHOWN = ("runtime_cycles", "energy_pj", "edp_pj_cycles", "area_mm2", "power_mw")


def front_rows(plan: Plan, front: Front, evaluator: Evaluator) -> list[dict[str, Any]]:
    """Per front point (in front order): its metrics, hardware and dataflows, and its design
    document."""
    rows = []
    if not len(front):
        return rows
    m = evaluator.evaluate(front.flat)
    values = {name: metric(plan, m, name) for name in (*_SHOWN, *_fpga_shown(plan))}
    for rank, flat in enumerate(front.flat.tolist(), start=1):
        i = rank - 1
        hw = plan.hardware(flat)
        hw = replace(hw, name=f"{plan.space.name}-{rank:04d}")
        choices = evaluator.layer_choices(flat)
        if choices is None:
            shared = plan.point_dataflows(flat)
            dataflows = {kind: c.as_dict() for kind, c in shared.items()}
            label = " / ".join(c.label() for c in shared.values())
            short = "+".join(c.short() for c in shared.values())
            per_layer: dict[str, Any] = {}
        else:
            dataflows = {}
            per_layer = {layer.name: plan.choices("gemm" if layer.kind == "gemm" else "conv2d")[c].as_dict()
                         for layer, c in zip(plan.model.layers, choices)}
            families = sorted({d["family"] for d in per_layer.values()})
            label = "per layer: " + ",".join(families)
            short = label
        objectives = {name: _plain(values[name][i]) for name in plan.objectives}
        doc: dict[str, Any] = {
            "design_point": {"search": plan.space.name, "model": plan.model.name, "preset": plan.preset,
                             "point": flat, "rank": rank, "objectives": objectives},
            "hardware": hardware_to_dict(hw), "dataflows": dataflows}
        if per_layer:
            doc["layers"] = per_layer
        row = {"rank": rank, "point": flat, **{n: _plain(values[n][i]) for n in _SHOWN},
               "num_pes": hw.num_pes, "simd_lanes": hw.simd_lanes, "l1_bytes_per_pe": hw.l1_bytes_per_pe,
               "l2_bytes": hw.l2_bytes,
               "noc_bw_words_per_cycle": "/".join(_num(lvl.bandwidth_words_per_cycle) for lvl in hw.noc),
               "noc_latency_cycles": "/".join(str(lvl.latency_cycles) for lvl in hw.noc),
               "offchip_bw_words_per_cycle": _num(hw.offchip_bw_words_per_cycle),
               **{name: _cells(values[name][i]) for name in _fpga_shown(plan)},
               "dataflow": label, "dataflow_short": short, "file": f"points/point_{rank:04d}.yaml", "doc": doc}
        rows.append(row)
    return rows


def _fpga_shown(plan: Plan) -> tuple[str, ...]:
    """The FPGA figures a search minimises or bounds: its table and CSV show them."""
    used = {*plan.objectives, *(c.metric for c in plan.constraints)}
    return tuple(name for name in FPGA_METRICS if name in used)


def _cells(value: Any) -> int | float:
    """An FPGA figure: whole cells (an unlimited NoC width: inf)."""
    value = float(value)
    return int(value) if math.isfinite(value) else value


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _num(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:g}"


def write_outputs(out_dir: Path, plan: Plan, state: SearchState, rows: list[dict[str, Any]],
                  model_spec: str | None = None) -> list[Path]:
    """pareto.csv, points/ and the plot, each written to a temporary name and renamed into place."""

    out_dir.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    columns = [c for c in rows[0] if c not in ("doc", "dataflow_short")] if rows else ["rank", "point", *_SHOWN]
    writer = csv.DictWriter(buffer, columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in row.items() if k != "doc"})
    write_atomically(str(out_dir / "pareto.csv"), buffer.getvalue())
    staging = Path(tempfile.mkdtemp(dir=out_dir, prefix=".points."))
    try:
        for row in rows:
            header = (f"# accelgen design point {row['rank']} of {len(rows)} on the Pareto front of {plan.space.name}\n"
                      f"# accelgen analyze --model {model_spec or plan.model.name} --design {row['file']}\n")
            (staging / Path(row["file"]).name).write_text(
                header + yaml.safe_dump(row["doc"], sort_keys=False, allow_unicode=True), encoding="utf-8")
        staging.chmod(0o755)
        target = out_dir / "points"
        old = out_dir / ".points.old"
        if target.exists():
            shutil.rmtree(old, ignore_errors=True)
            target.rename(old)
        staging.rename(target)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    written = [out_dir / "pareto.csv", out_dir / "points"]
    if rows and len(plan.objectives) >= 2:
        from .plot import plot_front

        values = [np.array([row[name] for row in rows]) for name in plan.objectives]
        title = f"{plan.model.name} on {plan.space.name}: {len(rows)} Pareto points of {state.feasible:,} feasible"
        written += plot_front(plan.objectives, values, title, out_dir)
    return written


def print_front(console: Console, plan: Plan, state: SearchState, rows: list[dict[str, Any]], limit: int = 40) -> None:
    fpga = f", {plan.fpga_target} resources" if _fpga_shown(plan) else ""
    table = Table(title=f"Pareto front: {plan.model.name} on {plan.space.name} ({plan.preset}{fpga}), "
                        f"{len(rows)} of {state.feasible:,} feasible points ({state.evaluated:,} evaluated)",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, header_style="bold")
    names = {"runtime_cycles": "runtime", "energy_pj": "energy", "edp_pj_cycles": "EDP", "area_mm2": "area",
             "power_mw": "power"}
    # (area in mm² is the ASIC model's: with FPGA figures it is shown only as an objective)
    always = ("runtime_cycles", "energy_pj") + (() if _fpga_shown(plan) else ("area_mm2",))
    heads = [("#", "rank"), *((f"{names[n]} ({METRICS[n]})", n) for n in _SHOWN if n in plan.objectives or n in always),
             ("PEs", "num_pes"), ("lanes", "simd_lanes"), ("L1/PE B", "l1_bytes_per_pe"), ("L2 B", "l2_bytes"),
             ("NoC w/c", "noc_bw_words_per_cycle"), ("DRAM w/c", "offchip_bw_words_per_cycle"),
             *((FPGA_METRICS[n], n) for n in _fpga_shown(plan)),
             ("dataflow", "dataflow_short")]
    for head, _ in heads:
        table.add_column(head, justify="left" if head == "dataflow" else "right", no_wrap=head == "dataflow")
    for row in rows[:limit]:
        table.add_row(*(_cell(row[key]) for _, key in heads))
    console.print(table)
    if len(rows) > limit:
        console.print(f"... {len(rows) - limit} more in pareto.csv")


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.5g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)

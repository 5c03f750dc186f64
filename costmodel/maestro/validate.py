"""``make validate-maestro``: the ``maestro`` preset against figures printed by MAESTRO itself.

Every row of ``costmodel/maestro/data/maestro_reference.csv`` (MAESTRO @4eb08d1 on layers of VGG16,
MobileNetV2 and GNMT under its shipped dataflows, 64/256/1024 PEs) is re-analysed with the same
hardware, and every column both tools print is compared.  The table says, per column, on how many
rows the figures agree exactly and how far apart the others are; ``docs/costmodel.md`` explains
each remaining difference.

    python -m costmodel.validate_maestro [--csv FILE] [--rows] [--format table|json]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..analysis import LayerResult, analyze_layer
from ..base import AccelgenError
from ..dataflow.directives import parse_dataflow
from ..hardware.hardware import builtin_hardware
from ..workload.layers import GEMM, Conv2D, Layer
from ..workload.problem import problem_of
from .engine import analyze_maestro

__all__ = ["REFERENCE_CSV", "reference_rows", "reference_layer", "reference_hardware", "compare", "main"]

REFERENCE_CSV = Path(__file__).resolve().parent / "data" / "maestro_reference.csv"


def reference_rows(path: Path = REFERENCE_CSV) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def reference_layer(row: dict[str, str]) -> Layer:
    """The layer of a reference row (MAESTRO's Y/X are unpadded input sizes)."""
    name = f"{row['model']}.{row['layer']}"
    if row["layer_type"] == "GEMM":
        return GEMM(name, M=int(row["M_gemm"]), N=int(row["N_gemm"]), K=int(row["K"]))
    dims = {k: int(row[k]) for k in ("C", "Y", "X", "R", "S")}
    stride = int(row["stride"] or 1)
    if row["layer_type"] == "DSCONV":
        return Conv2D(name, K=dims["C"], groups=dims["C"], stride=stride, **dims)
    return Conv2D(name, K=int(row["K"]), stride=stride, **dims)


def reference_hardware(row: dict[str, str], *, ideal_noc: bool):
    """MAESTRO's run settings: NoC 64 words/cycle and 1-cycle hops at every level (ideal: an
    unlimited NoC with no latency), L1 512, L2 1 MiB, off-chip unconstrained, its energy ratios."""
    hw = builtin_hardware("maestro_ref").with_overrides(
        num_pes=int(row["num_pes"]), l1_bytes_per_pe=int(row["l1_size_given_B"]),
        l2_bytes=int(row["l2_size_given_B"]), offchip_bw=float(row["offchip_bw"]))
    if ideal_noc:
        return hw.with_overrides(noc_bw="inf", noc_latency=0)
    return hw.with_overrides(noc_bw=float(row["noc_bw"]), noc_latency=int(row["noc_hop_latency"]))


@dataclass(frozen=True)
class _Column:
    name: str                          # the reference column
    ours: Callable[[dict[str, Any]], float]
    note: str
    floor: bool = False                # MAESTRO prints this one truncated to an integer
    real: bool = False                 # a real number MAESTRO prints to 6 significant digits
    abs_tol: float = 0.0               # or to a fixed number of decimals


def _t(result: LayerResult, field: str, tensor: str) -> int:
    return getattr(result, field)[tensor]


_COLUMNS = [
    _Column("true_macs", lambda o: o["r"].macs, "exact MACs, K*C*R*S*Y'*X'"),
    _Column("num_macs", lambda o: o["r"].step_macs, "MAESTRO's own count; wrong on strided layers"),
    _Column("runtime_cycles_ideal_noc", lambda o: o["ideal"].runtime_cycles, "ideal NoC: must agree exactly"),
    _Column("runtime_cycles", lambda o: o["r"].runtime_cycles, "NoC 64 words/cycle, 1-cycle hops"),
    _Column("throughput_macs_per_cycle", lambda o: o["r"].throughput_macs_per_cycle, "MACs / runtime", real=True),
    _Column("avg_utilized_pes", lambda o: o["r"].avg_active_pes, "PEs active, step-weighted", real=True),
    _Column("utilization", lambda o: o["r"].avg_active_pes / o["r"].num_pes,
            "active PEs / PEs, printed to 4 decimals (our `utilization` is MACs / (PEs x cycles))",
            real=True, abs_tol=5e-5),
    _Column("pes_usable_by_mapping", lambda o: o["r"].used_pes, "cluster structure"),
    *[_Column(f"{t2}_l2_read", (lambda t: lambda o: _t(o["r"], "l2_reads", t))(t),
              "L2 reads") for t, t2 in (("input", "input"), ("weight", "filter"), ("output", "output"))],
    *[_Column(f"{t2}_l2_write", (lambda t: lambda o: _t(o["r"], "l2_writes", t))(t), "L2 writes")
      for t, t2 in (("input", "input"), ("weight", "filter"), ("output", "output"))],
    *[_Column(f"{t2}_l1_read", (lambda t: lambda o: _t(o["r"], "l1_reads", t))(t), "L1 reads")
      for t, t2 in (("input", "input"), ("weight", "filter"), ("output", "output"))],
    *[_Column(f"{t2}_l1_write", (lambda t: lambda o: _t(o["r"], "l1_writes", t))(t), "L1 writes")
      for t, t2 in (("input", "input"), ("weight", "filter"), ("output", "output"))],
    *[_Column(f"{t2}_l2_size_req", (lambda t: lambda o: _t(o["r"], "l2_words", t))(t), "L2 words needed")
      for t, t2 in (("input", "input"), ("weight", "filter"), ("output", "output"))],
    _Column("input_l1_size_req", lambda o: _t(o["r"], "l1_words_per_pe", "input"), "L1 words per PE"),
    _Column("filter_l1_size_req", lambda o: _t(o["r"], "l1_words_per_pe", "weight"), "L1 words per PE"),
    _Column("output_l1_size_req", lambda o: _t(o["r"], "l1_words_per_pe", "output"),
            "ours in output coordinates; MAESTRO's in input coordinates (a defect)"),
    _Column("l1_size_req_total", lambda o: sum(o["r"].l1_words_per_pe.values()),
            "L1 words per PE, all tensors (output in output coordinates)"),
    _Column("l2_size_req_total", lambda o: sum(o["r"].l2_words.values()), "L2 words, all tensors"),
    _Column("noc_bw_req_peak", lambda o: o["r"].noc_bw_peak_words_per_cycle, "words/cycle"),
    _Column("noc_bw_req_avg", lambda o: o["r"].noc_bw_avg_words_per_cycle, "words/cycle", real=True),
    _Column("energy_total_xMAC", lambda o: o["r"].energy_pj["mac"] + o["r"].energy_pj["l1"] + o["r"].energy_pj["l2"],
            "18.61 x L2 + 1.68 x L1 + MACs (MAESTRO's ratios)", real=True),
    _Column("input_reuse_factor", lambda o: o["r"].reuse_factor["input"], "L1 reads / L1 writes", real=True),
    _Column("filter_reuse_factor", lambda o: o["r"].reuse_factor["weight"], "L1 reads / L1 writes", real=True),
    _Column("mcast_factor_input", lambda o: o["r"].multicast_factor["input"],
            "MAESTRO divides L1 writes by L2 reads (always 1); ours counts a word landing in k PEs k times",
            real=True),
    _Column("mcast_factor_weight", lambda o: o["r"].multicast_factor["weight"], "as above", real=True),
    _Column("ingress_delay_avg", lambda o: o["eng"].top.ingress_delay_avg, "cycles; MAESTRO truncates", floor=True),
    _Column("egress_delay_avg", lambda o: o["eng"].top.egress_delay_avg, "cycles; MAESTRO truncates", floor=True),
    _Column("compute_delay_min", lambda o: o["eng"].top.compute_delay_min, "cycles"),
    _Column("compute_delay_max", lambda o: o["eng"].top.compute_delay_max, "cycles"),
    _Column("compute_delay_avg", lambda o: o["eng"].top.compute_delay_avg, "cycles; MAESTRO truncates", floor=True),
]


def _evaluate(row: dict[str, str]) -> dict[str, Any]:
    layer = reference_layer(row)
    dataflow = parse_dataflow(row["dataflow_directives"], name=row["dataflow"])
    hw = reference_hardware(row, ideal_noc=False)
    result = analyze_layer(layer, dataflow, hw, "maestro")
    ideal = analyze_layer(layer, dataflow, reference_hardware(row, ideal_noc=True), "maestro")
    problem = problem_of(layer)
    engine = analyze_maestro(problem, dataflow.resolve(problem.dims, kind=problem.kind, allowed=problem.allowed_dims),
                             num_pes=hw.num_pes, simd_lanes=hw.simd_lanes,
                             noc=[(n.bandwidth_words_per_cycle, n.latency_cycles, n.hops) for n in hw.noc])
    return {"r": result, "ideal": ideal, "eng": engine}


def _close(ours: float, ref: float, column: _Column) -> bool:
    """Counts must be equal; reals agree to the 6 significant digits MAESTRO prints."""
    if column.floor:
        ours = math.floor(ours + 1e-9)
    if not column.real:
        return ours == ref
    return abs(ours - ref) <= max(5e-6 * abs(ref), column.abs_tol)


def compare(rows: list[dict[str, str]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per-column agreement and per-row differences.  A row MAESTRO could not run is reported
    as such; ours either runs it or says why not."""
    stats = {c.name: {"column": c.name, "rows": 0, "exact": 0, "max_rel_diff": 0.0, "note": c.note} for c in _COLUMNS}
    diffs: list[dict[str, Any]] = []
    for row in rows:
        label = f"{row['model']}.{row['layer']} {row['dataflow']} {row['num_pes']} PEs"
        if row["status"] != "ok":
            try:
                _evaluate(row)
                ours = "ran"
            except AccelgenError as err:
                ours = f"refused: {err}"
            diffs.append({"row": label, "column": "status", "maestro": row["status"], "ours": ours})
            continue
        out = _evaluate(row)
        for c in _COLUMNS:
            if row.get(c.name, "") == "":
                continue
            ref, ours = float(row[c.name]), float(c.ours(out))
            s = stats[c.name]
            s["rows"] += 1
            if _close(ours, ref, c):
                s["exact"] += 1
            else:
                rel = abs(ours - ref) / max(abs(ref), 1e-12)
                s["max_rel_diff"] = max(s["max_rel_diff"], rel)
                diffs.append({"row": label, "column": c.name, "maestro": ref, "ours": ours})
    return list(stats.values()), diffs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="validate-maestro", description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=REFERENCE_CSV, help="reference CSV (default: the shipped one)")
    parser.add_argument("--rows", action="store_true", help="also list every differing row")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    try:
        rows = reference_rows(args.csv)
        columns, diffs = compare(rows)
    except (AccelgenError, OSError, KeyError, ValueError) as err:
        print(f"validate-maestro: error: {args.csv}: {err}", file=sys.stderr)
        return 1
    if args.format == "json":
        print(json.dumps({"columns": columns, "differences": diffs}, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 132)
    ok_rows = sum(1 for r in rows if r["status"] == "ok")
    table = Table(title=f"accelgen 'maestro' preset vs MAESTRO: {ok_rows} rows ({len(rows) - ok_rows} MAESTRO could not run)")
    for head, justify in (("column", "left"), ("rows", "right"), ("exact", "right"), ("agree", "right"),
                          ("max rel. diff", "right"), ("note", "left")):
        table.add_column(head, justify=justify)  # type: ignore[arg-type]
    for c in columns:
        if not c["rows"]:
            continue
        share = c["exact"] / c["rows"]
        style = "green" if share == 1 else ("yellow" if share > 0.5 else "red")
        table.add_row(c["column"], str(c["rows"]), str(c["exact"]), f"[{style}]{share:.0%}[/{style}]",
                      f"{c['max_rel_diff']:.2%}" if c["max_rel_diff"] else "-", c["note"])
    console.print(table)
    for d in diffs:
        if d["column"] == "status":
            console.print(f"  {d['row']}: MAESTRO {d['maestro']}; accelgen {d['ours']}")
    if args.rows:
        for d in diffs:
            if d["column"] != "status":
                console.print(f"  {d['row']:45s} {d['column']:26s} maestro {d['maestro']:>14g}  ours {d['ours']:>14g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

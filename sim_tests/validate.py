"""``make validate-rtl``: run the RTL matrix (and the efficiency cases) on Icarus and Verilator
and write ``docs/validation.md``: one row per case, predicted and measured cycles, difference.

    python -m sim_tests.validate [--sim icarus|verilator|both] [--out docs/validation.md]
"""

from __future__ import annotations

import argparse
import datetime
import sys
from dataclasses import replace
from pathlib import Path

from costmodel.analysis import analyze_layer
from costmodel.base import AccelgenError, write_atomically
from costmodel.hardware import NoCLevel
from costmodel.workload import parse_layer_spec

from . import matrix
from .runner import verify_layer


#: The widest NoC the efficiency table looks at for a NoC-bound case.
WIDEST_NOC = 4096


def compute_bound_width(dataflow: str, hw, layer) -> int | None:
    """The narrowest NoC (words a cycle, a power of two) at which the ``hwgen`` preset says the
    layer is compute-bound, or ``None`` if none up to :data:`WIDEST_NOC` is (a wider NoC does not
    shorten the drain's group-by-group walk, nor the compute)."""
    w = hw.noc_at(0).bandwidth_words_per_cycle
    while w <= WIDEST_NOC:
        wide = replace(hw, noc=(NoCLevel(w, hw.noc_at(0).latency_cycles),))
        if analyze_layer(layer, matrix.dataflow_spec(dataflow), wide, preset="hwgen").bound == "compute":
            return int(w)
        w *= 2
    return None


def efficiency_rows(sim: str) -> list[dict]:
    rows = []
    for dataflow, hw_name, spec, sims in matrix.EFFICIENCY:
        if sim not in sims:
            continue
        hw = matrix.array(hw_name)
        layer = parse_layer_spec(spec, name="fill")
        model = analyze_layer(layer, matrix.dataflow_spec(dataflow), hw, preset="hwgen")
        got = verify_layer(matrix.dataflow_spec(dataflow), hw, layer, sim, seed=0, label=dataflow, reuse=True)
        rows.append({"dataflow": dataflow, "array": hw_name, "layer": spec, "sim": sim,
                     "predicted_cycles": got["predicted_cycles"], "measured_cycles": got["measured_cycles"],
                     "difference": got["cycle_difference"], "bit_exact": got["bit_exact"],
                     "rtl_utilization": got["rtl_utilization"], "bound": model.bound,
                     "compute_bound_at": (int(hw.noc_at(0).bandwidth_words_per_cycle) if model.bound == "compute"
                                          else compute_bound_width(dataflow, hw, layer))})
        print(f"{sim:9} efficiency {dataflow} {hw_name} {spec}: {got['rtl_utilization']:.3f}", flush=True)
    return rows


def write_report(rows: list[dict], eff: list[dict], out: Path) -> None:
    lines = [
        "# RTL validation: predicted vs measured cycles",
        "",
        "Written by `make validate-rtl` (`python -m sim_tests.validate`) on "
        f"{datetime.date.today().isoformat()}. Every case generates the accelerator for the dataflow and the "
        "array, runs the layer on random int8 data in the simulator, compares the outputs with numpy "
        "(`bit_exact`) and the cycle counter with the `hwgen` preset's prediction (`docs/timing.md`).",
        "",
        f"**{len(rows) + len(eff)} cases, {sum(r['difference'] == 0 for r in rows + eff)} with difference 0, "
        f"{sum(bool(r['bit_exact']) for r in rows + eff)} bit-exact.**",
        "",
        "Arrays: `tiny8` = `configs/hw/tiny.yaml` (8 PEs, NoC 4 words/cycle); `tiny4` = 4 PEs, NoC 2 "
        "words/cycle, 2 SIMD lanes per PE; `tiny4-s3` = tiny4 with 3 SIMD lanes; `tiny8-w8` = tiny8 with an 8-word NoC; `tiny8-l1k` = tiny8 with 2 "
        "KiB of L1 a PE; `small-d2`, `small-d4` = `configs/hw/small.yaml` with `pe_drain_words` 2, 4 (the "
        "drain reads that many partial sums of a PE a cycle, `docs/timing.md`). Dataflow `kcp_x2` is "
        "`configs/dataflows/kcp_x2.yaml` (kcp's shape, other tiles, order and cluster size). Shapes `R*` "
        "are random (seeded).",
        "",
        "| sim | dataflow | array | layer | predicted | measured | difference | bit-exact | RTL util. |",
        "|---|---|---|---|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['sim']} | {r['dataflow']} | {r['array']} | `{r['layer']}` | {r['predicted_cycles']} | "
                     f"{r['measured_cycles']} | {r['difference']} | {'yes' if r['bit_exact'] else 'NO'} | "
                     f"{r['rtl_utilization']:.3f} |")
    lines += [
        "",
        "## Efficiency: layers that fill the array",
        "",
        "RTL utilisation = MACs / (PEs x SIMD lanes x measured cycles). `bound` is what the `hwgen` preset says holds "
        "the run back (the engine longest in the slots that hold most of the cycles); `compute-bound at` is the "
        "narrowest NoC (words/cycle) at which the preset says the layer becomes compute-bound (`-`: no NoC "
        f"up to {WIDEST_NOC} words makes it so). The `small` cases run on Verilator only (Icarus takes too "
        "long on 64 PEs for 10^5 cycles); their template tiles are the best the `hwgen` preset found for the "
        "layer within the PE's 512 B of L1.",
        "",
        "| sim | dataflow | array | layer | predicted | measured | difference | bit-exact | RTL util. | model: bound "
        "| compute-bound at |",
        "|---|---|---|---|---:|---:|---:|---|---:|---|---:|",
    ]
    for r in eff:
        lines.append(f"| {r['sim']} | {r['dataflow']} | {r['array']} | `{r['layer']}` | {r['predicted_cycles']} | "
                     f"{r['measured_cycles']} | {r['difference']} | {'yes' if r['bit_exact'] else 'NO'} | "
                     f"{r['rtl_utilization']:.3f} | {r['bound']} | {r['compute_bound_at'] or '-'} |")
    lines += [
        "",
        "Reading the efficiency table: with the template tiles the model picks, `kcp`, `cp`, `xp` and the GEMM "
        "(`nmk`) keep the 64 PEs of `small` busy: each PE's tile holds a whole output row (or, for `xp`, a C "
        "tile inside the output tile), so a step's MACs outlast its loads; whole filters and whole-width input "
        "rows load as single runs of the NoC, L2 holds each tensor with the PEs' classes innermost so that one "
        "chunk feeds many PEs (`cp` on the 1x1 layer: a chunk carries a word of the row for each of the 64 "
        "PEs' channels), and the MAC pipeline's tail overlaps the next step. Their PEs keep the partial sums "
        "in LUT RAM and the drain reads a word or two of a PE a cycle; the 1x1 `kcp` layer, whose every "
        "step ends an output tile, and the GEMM, with 64 groups to drain, run with a wider drain "
        "(`pe_drain_words` 2 and 4). The `tiny` rows use the library "
        "defaults. `kcp`'s windows slide along X in L1: after a row's first output, a step loads one new "
        "column of its 3 rows (6,794 cycles when every window was loaded whole, 3,917 now). With those small "
        "tiles `cp` (whose channel loop is innermost, so its windows never slide) and `nmk` stay ingress-bound "
        "on `tiny8` at any NoC width (`-`: a PE takes at most 4 words of a chunk, and every load pays its "
        "latency).",
        "",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(out, "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim_tests.validate", description=__doc__.splitlines()[0])
    parser.add_argument("--sim", default="both", choices=("icarus", "verilator", "both"))
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "validation.md"))
    args = parser.parse_args(argv)
    sims = ("icarus", "verilator") if args.sim == "both" else (args.sim,)
    rows, eff = [], []
    try:
        for sim in sims:
            for dataflow, arr in matrix.CASES:
                extra = (matrix.random_layers(dataflow, seed=7, count=matrix.RANDOM_PER_CASE)
                         if arr == matrix.random_array(dataflow) else ())
                got = matrix.run_case(dataflow, arr, sim, extra, reuse=True)
                rows += got
                bad = [r for r in got if r["difference"] != 0 or not r["bit_exact"]]
                print(f"{sim:9} {dataflow:4} {arr:6} {len(got)} cases"
                      f"{'' if not bad else f', {len(bad)} FAILED'}", flush=True)
            eff += efficiency_rows(sim)
    except AccelgenError as err:
        print(f"accelgen: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("accelgen: interrupted; nothing written (the cases that finished are kept: run again to go on)", file=sys.stderr)
        return 130
    write_report(rows, eff, Path(args.out))
    failed = [r for r in rows + eff if r["difference"] != 0 or not r["bit_exact"]]
    print(f"wrote {args.out}: {len(rows) + len(eff)} cases, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

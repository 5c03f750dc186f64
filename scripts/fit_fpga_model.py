#!/usr/bin/env python3
"""Fit the FPGA resource model (:mod:`costmodel.fpga`) from Yosys synthesis of generated designs
and write it, with its provenance, to ``costmodel/configs/fpga/<target>.yaml``.

    python scripts/fit_fpga_model.py [--target ecp5] [--jobs 2] [--work build/fpga-fit]

The designs (:data:`FIT`, :data:`CHECKS`) are the ``kcp`` accelerator for one 3x3 convolution on
``tiny``, with the PE count, SIMD lanes, NoC width and L2 size varied one or two at a time.  Each
is synthesised as :func:`accelgen.synth.synthesize_design` does: its PE (once per distinct PE
module) and its shared parts with the PE as a black box.  Measurements are kept in ``--work``
(one JSON file, reused while the generator, the target and Yosys are the same), so a rerun only
fits.  The fit: the PE's LUTs and FFs against ``[1, lanes]`` over the distinct PEs, the shared
parts' LUTs and FFs against ``[1, PEs, W, row bits]`` over the designs (numpy ``lstsq``);
multipliers and LUT RAM are counted (the PEs' median per lane, the shared parts' median count);
all combined into the model's terms and rounded to whole cells.  Block RAMs are the L2 banks'
geometry, checked against every design's count.  The held-out designs (:data:`CHECKS`: another
size, and the other dataflow families at tiny's size) are synthesised and reported, not fitted.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import re
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from costmodel.base import CONFIGS, AccelgenError, write_atomically  # noqa: E402

BASE = "tiny"
LAYER = "conv2d:K=8,C=8,Y=8,X=8,R=3,S=3"
GEMM_LAYER = "gemm:M=8,N=8,K=8"
DATAFLOW = "kcp"


@dataclass(frozen=True)
class Design:
    name: str
    num_pes: int
    simd_lanes: int
    noc_words: int
    l2_bytes: int
    dataflow: str = DATAFLOW
    layer: str = LAYER


#: Fitted: around tiny (8 PEs, 1 lane, W = 4, 16 KiB), one or two parameters moved at a time.
FIT = (
    Design("p8_w4_l16k_s1", 8, 1, 4, 16384),
    Design("p4_w4_l16k_s1", 4, 1, 4, 16384),
    Design("p16_w4_l16k_s1", 16, 1, 4, 16384),
    Design("p8_w1_l16k_s1", 8, 1, 1, 16384),
    Design("p8_w8_l16k_s1", 8, 1, 8, 16384),
    Design("p8_w4_l4k_s1", 8, 1, 4, 4096),
    Design("p8_w4_l64k_s1", 8, 1, 4, 65536),
    Design("p8_w4_l16k_s2", 8, 2, 4, 16384),
    Design("p4_w8_l64k_s2", 4, 2, 8, 65536),
    Design("p4_w1_l4k_s4", 4, 4, 1, 4096),
    Design("p16_w2_l32k_s1", 16, 1, 2, 32768),
)
#: Held out: a size the fit did not see (tests/test_fpga_model.py synthesises it afresh), and
#: tiny's size with the other families (their PEs and controllers differ from kcp's).
CHECKS = (
    Design("p4_w2_l32k_s2", 4, 2, 2, 32768),
    Design("cp_p8_w4_l16k_s1", 8, 1, 4, 16384, dataflow="cp"),
    Design("xp_p8_w4_l16k_s1", 8, 1, 4, 16384, dataflow="xp"),
    Design("nmk_p8_w4_l16k_s1", 8, 1, 4, 16384, dataflow="nmk", layer=GEMM_LAYER),
)
#: The block RAM a bank's memory takes, per word width: rows a block holds and blocks side by
#: side (ECP5 DP16KD 2048x9 and 512x36; iCE40 SB_RAM40_4K 512x8 and 256x16; 7-series RAMB18E1
#: like the ECP5's).
BRAM_BLOCKS = {"ecp5": {8: {"rows": 2048, "blocks": 1}, 32: {"rows": 512, "blocks": 1}},
               "ice40": {8: {"rows": 512, "blocks": 1}, 32: {"rows": 256, "blocks": 2}},
               "xilinx": {8: {"rows": 2048, "blocks": 1}, 32: {"rows": 512, "blocks": 1}}}
#: LUTs one LUT-RAM cell takes: ECP5 TRELLIS_DPR16X4 three slices (two in RAM mode and one for
#: the write port: the data sheet's "slices required for distributed RAM", nextpnr's packing), six
#: LUT4s; 7-series RAM32M (the one LUT-RAM cell Yosys makes of the PE's memories) a SLICEM's four
#: LUT6s; iCE40 has no LUT RAM.
LUTRAM_LUTS = {"ecp5": 6, "ice40": 0, "xilinx": 4}
_PE_FEATURES = ("fixed", "lanes")
_SHARED_FEATURES = ("fixed", "pes", "words", "row_bits")
#: Resources of whole cells counted rather than fitted: a PE's multipliers and LUT RAM are so
#: many a lane, the shared parts' (products of configuration registers; no LUT RAM) the same in
#: nearly every design.
_COUNTED = ("dsp", "lutram")


def _say(message: str) -> None:
    print(f"fit_fpga_model: {message}", file=sys.stderr)


def _hardware(d: Design):
    from costmodel import builtin_hardware
    return builtin_hardware(BASE).with_overrides(name=d.name, num_pes=d.num_pes, simd_lanes=d.simd_lanes,
                                                 noc_bw=d.noc_words, l2_bytes=d.l2_bytes)


def _emit(d: Design, folder: Path) -> tuple[Path, str, dict]:
    """Write the design's Verilog; its file, its PE module's digest and its structure."""
    from costmodel.dataflow.spec import resolve_dataflow
    from costmodel.hwgen_preset.preset import hwgen_structure, l2_split
    from costmodel.workload import parse_layer_spec
    from hwgen.emit import write_verilog
    from hwgen.pe import PE_MODULE
    hw = _hardware(d)
    layer = parse_layer_spec(d.layer, name="fit")
    structure = hwgen_structure(resolve_dataflow(d.dataflow, layer, hw), layer, hw, fit=[layer])
    path = write_verilog(structure, l2_split(hw), folder / d.name / "accelgen_top.v")
    modules = re.split(r"(?m)^(?=module )", path.read_text())
    pe_text = next(m for m in modules if m.startswith(f"module {PE_MODULE}("))
    return path, hashlib.sha256(pe_text.encode()).hexdigest()[:16], structure.as_dict()


def _synth(verilog: Path, top: str, target: str, blackbox: tuple[str, ...]) -> dict:
    from accelgen.synth import synthesize_module
    start = time.perf_counter()
    r = synthesize_module(verilog, top, target, blackbox=blackbox)  # type: ignore[arg-type]
    return {**r.as_dict(), "cells": dict(sorted(r.cells.items())), "seconds": round(time.perf_counter() - start, 1)}


def _yosys_version() -> str:
    out = subprocess.run(["yosys", "-V"], capture_output=True, text=True, check=False).stdout.strip()
    return out or "unknown"


def _git(*args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def measure(designs: tuple[Design, ...], target: str, work: Path, jobs: int) -> dict[str, dict]:
    """Every design's PE and shared resources, from the cache in ``work`` or synthesised."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from accelgen.synth import TARGETS
    from hwgen.emit import TOP, generator_digest
    from hwgen.pe import PE_MODULE
    key = {"target": target, "script": TARGETS[target], "yosys": _yosys_version(), "generator": generator_digest()}
    cache_path = work / f"measurements-{target}.json"
    cache: dict[str, Any] = {}
    if cache_path.exists():
        doc = json.loads(cache_path.read_text())
        if doc.get("key") == key:
            cache = doc["designs"]
    results: dict[str, dict] = {}
    todo = [d for d in designs if cache.get(d.name, {}).get("design") != asdict(d)]
    for d in designs:
        if d not in todo:
            results[d.name] = cache[d.name]
    if todo:
        _say(f"{len(designs) - len(todo)} designs from {cache_path}; synthesising {len(todo)} with "
             f"{key['script']} ({key['yosys']}), {jobs} at a time")
    err = Console(file=sys.stderr, highlight=False, emoji=False)
    pe_runs: dict[str, Future] = {}
    runs: list[tuple[Design, dict, Future, Future]] = []
    start = time.perf_counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=False, disable=not todo) as progress, \
            ThreadPoolExecutor(max_workers=jobs) as pool:
        emitting = progress.add_task("emitting", total=len(todo))
        synthesising = progress.add_task("synthesising", total=0)

        def submit(fn, *args) -> Future:
            progress.update(synthesising, total=progress.tasks[synthesising].total + 1)
            future = pool.submit(fn, *args)
            future.add_done_callback(lambda _: progress.advance(synthesising))
            return future

        for d in todo:
            progress.update(emitting, description=f"emitting {d.name}")
            t0 = time.perf_counter()
            verilog, pe_key, structure = _emit(d, work / "designs")
            emit_s = round(time.perf_counter() - t0, 1)
            progress.advance(emitting)
            if pe_key not in pe_runs:
                pe_runs[pe_key] = submit(_synth, verilog, PE_MODULE, target, ())
            shared = submit(_synth, verilog, TOP, target, (PE_MODULE,))
            runs.append((d, {"pe_key": pe_key, "structure": structure, "emit_seconds": emit_s},
                         pe_runs[pe_key], shared))
        progress.update(emitting, description="emitted")
        for d, info, pe, shared in runs:
            results[d.name] = {"design": asdict(d), **info, "pe": pe.result(), "shared": shared.result()}
            write_atomically(str(cache_path), json.dumps({"key": key, "designs": {**cache, **results}}, indent=1))
    if todo:
        _say(f"synthesised {len(todo)} designs in {time.perf_counter() - start:.0f} s")
    return {d.name: results[d.name] for d in designs}


def _features(rows: list[dict], names: tuple[str, ...]) -> np.ndarray:
    from costmodel.fpga import l2_rows
    out = []
    for r in rows:
        d = r["design"]
        operand, _ = l2_rows(d["l2_bytes"], d["noc_words"])
        values = {"fixed": 1, "lanes": d["simd_lanes"], "pes": d["num_pes"], "words": d["noc_words"],
                  "row_bits": (operand - 1).bit_length()}
        out.append([values[n] for n in names])
    return np.array(out, dtype=np.float64)


def fit(measured: dict[str, dict], target: str) -> tuple[dict, dict]:
    """The model's coefficients (rounded) and the raw least-squares solutions."""
    fitted = [measured[d.name] for d in FIT]
    pes = list({r["pe_key"]: r for r in fitted}.values())          # each distinct PE once
    model: dict[str, Any] = {}
    raw: dict[str, Any] = {}
    for resource in ("lut", "ff", "dsp", "lutram"):
        per_pe = np.array([r["pe"][resource] for r in pes], float)
        shared = np.array([r["shared"][resource] for r in fitted], float)
        if resource in _COUNTED:
            # whole cells: a PE's per lane (a multiplier and its operands' memories a lane), the
            # shared parts' the same in nearly every design: medians, nothing else per unit
            lanes = np.array([r["design"]["simd_lanes"] for r in pes], float)
            a_pe = np.array([0.0, np.median(per_pe / lanes)])
            a_sh = np.array([np.median(shared), 0.0, 0.0, 0.0])
        else:
            a_pe, *_ = np.linalg.lstsq(_features(pes, _PE_FEATURES), per_pe, rcond=None)
            a_sh, *_ = np.linalg.lstsq(_features(fitted, _SHARED_FEATURES), shared, rcond=None)
        terms = {"fixed": a_sh[0], "per_pe": a_pe[0] + a_sh[1], "per_pe_lane": a_pe[1], "per_noc_word": a_sh[2],
                 "per_l2_row_bit": a_sh[3]}
        raw[resource] = {k: float(v) for k, v in terms.items()}
        model[resource] = {k: int(round(v)) for k, v in terms.items()}
    model["bram_blocks"] = BRAM_BLOCKS[target]
    model["lutram_luts"] = LUTRAM_LUTS[target]
    return model, raw


def _predict(model_doc: dict, target: str, d: dict) -> dict:
    from costmodel.fpga import estimate, model_from_dict
    model = model_from_dict({"target": target, "model": model_doc}, "fit")
    import costmodel.fpga as fpga
    saved = fpga.load_model
    fpga.load_model = lambda _t: model       # type: ignore[assignment]  # the model being fitted
    try:
        return estimate(_hardware(Design(**d)), target)
    finally:
        fpga.load_model = saved             # type: ignore[assignment]


def _measured(r: dict, lutram_luts: int) -> dict:
    n = r["design"]["num_pes"]
    total = {k: r["pe"][k] * n + r["shared"][k] for k in ("lut", "ff", "dsp", "bram", "lutram")}
    return {"luts": total["lut"] + lutram_luts * total["lutram"], "ffs": total["ff"], "dsps": total["dsp"],
            "brams": total["bram"], "lut_logic": total["lut"], "lutram_cells": total["lutram"]}


def report(measured: dict[str, dict], model_doc: dict, raw: dict, target: str) -> dict:
    from accelgen.synth import TARGETS
    from hwgen.emit import generator_digest
    designs, residuals = [], {}
    for group in (FIT, CHECKS):
        for d in group:
            role = "fit" if group is FIT else "held_out" if d.dataflow == DATAFLOW else "other_family"
            r = measured[d.name]
            got = _measured(r, model_doc["lutram_luts"])
            want = _predict(model_doc, target, r["design"])
            errors = {k: {"model": int(want[k]), "error_pct": round(100 * (want[k] - got[k]) / got[k], 1) if got[k]
                          else (0.0 if want[k] == 0 else None)} for k in want}
            designs.append({"name": d.name, "role": role, **asdict(d), "pe_module": r["pe_key"],
                            "synthesis_seconds": {"emit": r["emit_seconds"], "pe": r["pe"]["seconds"],
                                                  "shared": r["shared"]["seconds"]},
                            "pe": {k: r["pe"][k] for k in ("lut", "ff", "dsp", "bram", "lutram")},
                            "shared": {k: r["shared"][k] for k in ("lut", "ff", "dsp", "bram", "lutram")},
                            "measured": got, "model": {k: int(want[k]) for k in want},
                            "error_pct": {k: v["error_pct"] for k, v in errors.items()}})
    for role in ("fit", "held_out", "other_family"):
        rows = [x for x in designs if x["role"] == role]
        residuals[role] = {k: {"max_abs": int(max(abs(x["model"][k] - x["measured"][k]) for x in rows)),
                               "max_pct": max(abs(x["error_pct"][k] or 0.0) for x in rows),
                               "rms": round(float(np.sqrt(np.mean([(x["model"][k] - x["measured"][k]) ** 2
                                                                   for x in rows]))), 1)}
                           for k in ("luts", "ffs", "dsps", "brams")}
    commit = _git("rev-parse", "HEAD")
    dirty = _git("status", "--porcelain", "--", "hwgen", "costmodel/hwgen_preset", "accelgen/synth.py")
    return {
        "target": target,
        "model": model_doc,
        "provenance": {
            "date": datetime.date.today().isoformat(),
            "yosys": _yosys_version(),
            "synthesis": {"script": TARGETS[target], "flow": "accelgen.synth.synthesize_module: the PE alone, and "
                          "the top with the PE black-boxed; stat -json; LUTs = LUT4 + 2 x CCU2C on ecp5"},
            "accelgen_commit": commit + (" (generator files modified in the working tree)" if dirty else ""),
            "generator_digest": generator_digest(),
            "fit": {"base": BASE, "layer": LAYER, "dataflow": DATAFLOW,
                    "pe": f"least squares on {list(_PE_FEATURES)} over the distinct PE modules",
                    "shared": f"least squares on {list(_SHARED_FEATURES)} over the fitted designs",
                    "counted": f"{' and '.join(_COUNTED)}: the PEs' median count per lane, the shared parts' "
                               "median count",
                    "combined": "fixed = shared fixed; per_pe = PE fixed + shared per PE; per_pe_lane = PE per "
                                "lane; per_noc_word, per_l2_row_bit = the shared parts'",
                    "unrounded": raw, "rounding": "each coefficient to a whole number"},
            "refit": f"python scripts/fit_fpga_model.py --target {target}",
            "residuals": residuals,
            "designs": designs,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="ecp5", choices=sorted(BRAM_BLOCKS),
                        help="synthesis target (default: ecp5)")
    parser.add_argument("--jobs", type=int, default=2, help="Yosys runs at a time (default: 2)")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "fpga-fit",
                        help="designs and the measurement cache (default: build/fpga-fit)")
    parser.add_argument("--out", type=Path, help="the model file (default: costmodel/configs/fpga/TARGET.yaml)")
    args = parser.parse_args(argv)
    from accelgen.synth import yosys_missing
    missing = yosys_missing()
    if missing:
        _say(f"error: {missing}")
        return 1
    out = args.out or CONFIGS / "fpga" / f"{args.target}.yaml"
    try:
        args.work.mkdir(parents=True, exist_ok=True)
        measured = measure(FIT + CHECKS, args.target, args.work, max(1, args.jobs))
        model_doc, raw = fit(measured, args.target)
        doc = report(measured, model_doc, raw, args.target)
    except AccelgenError as exc:
        _say(f"error: {exc}")
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# FPGA resource model of the generated accelerator on {args.target} (costmodel.fpga, docs/fpga.md).\n"
              f"# Written by scripts/fit_fpga_model.py; do not edit by hand: refit with\n"
              f"#   python scripts/fit_fpga_model.py --target {args.target}\n")
    write_atomically(str(out), header + yaml.safe_dump(doc, sort_keys=False, width=120))
    for role, res in doc["provenance"]["residuals"].items():
        _say(f"{role}: " + ", ".join(f"{k} max {v['max_pct']} % (rms {v['rms']})" for k, v in res.items()))
    _say(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

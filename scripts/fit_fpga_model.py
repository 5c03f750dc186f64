#!/usr/bin/env python3
"""Fit the FPGA resource model (:mod:`costmodel.fpga`) from Yosys synthesis of generated designs
and write it, with its provenance, to ``costmodel/configs/fpga/<target>.yaml``.

    python scripts/fit_fpga_model.py [--target ecp5] [--jobs 2] [--work build/fpga-fit]

The model has terms of its own for every dataflow family the generator builds (:data:`FAMILIES`):
their PEs and controllers differ.  The designs (:data:`FIT`, :data:`CHECKS`) are each family's
accelerator on ``tiny`` with the PE count, SIMD lanes, NoC width and L2 size varied, made for a
small network's layers (:data:`CONV_LAYERS`: 3x3 filters at stride 1 and 2, and 1x1; the
buffers are sized to the largest filter and stride of the layers a design is made for); ``nmk``
for a GEMM.  Each is synthesised as :func:`accelgen.synth.synthesize_design` does: its PE (once
per distinct PE module) and its shared parts with the PE as a black box.  Measurements are kept
in ``--work`` (one JSON file, reused while the generator, the target and Yosys are the same), so
a rerun only fits.

The fit, per family: the PE's LUTs, FFs, multipliers and LUT RAM against ``[1, lanes, W]`` over
its distinct PE modules (``W`` only where its PEs change with it); the shared parts' LUTs and FFs
against each family's ``[1, PEs, W, V]`` (``V`` the output region's banks) and one L2 row-bit
term common to every family (the L2 is the same module in all, and each family's fitted alone
agrees within the mapping's spread: the
file keeps those), over every design at once (numpy ``lstsq``); the shared parts' multipliers
and LUT RAM counted (the family's median, beside the LUT RAM of small L2 banks); all combined
into the model's terms and rounded to whole cells.  Block RAMs (and a small bank's LUT RAM) are
the L2 banks' geometry, checked against every design's count.  The held-out designs are synthesised and
reported, not fitted; ``xp``'s is the design ``accelgen flow`` picked for the demo network
(``--objectives runtime,luts``), made for its layers.
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
from costmodel.dataflow.library import LIBRARY  # noqa: E402
from costmodel.fpga import FAMILIES  # noqa: E402

BASE = "tiny"
#: The layers a convolution design is made for (the first fixes the dataflow's shape, all of them
#: its buffers): a 3x3 filter at stride 1 and at stride 2, and a 1x1, as in a small CNN.
CONV_LAYERS = ("conv2d:K=8,C=8,Y=8,X=8,R=3,S=3",
               "conv2d:K=16,C=8,Y=16,X=16,R=3,S=3,stride=2,padding=1",
               "conv2d:K=16,C=16,Y=8,X=8,R=1,S=1")
GEMM_LAYERS = ("gemm:M=8,N=8,K=8",)
#: configs/workloads/demo_cnn.yaml's layers: the demo network's design is made for these.
DEMO_LAYERS = ("conv2d:K=8,C=3,Y=16,X=16,R=3,S=3,padding=1",
               "conv2d:K=16,C=8,Y=16,X=16,R=3,S=3,stride=2,padding=1",
               "conv2d:K=32,C=16,Y=8,X=8,R=1,S=1",
               "conv2d:K=10,C=32,Y=8,X=8,R=1,S=1")
#: The layers each family's designs are made for (the families the generator builds).
FAMILY_LAYERS = {f: GEMM_LAYERS if LIBRARY[f].layer_kind == "gemm" else CONV_LAYERS for f in FAMILIES}


@dataclass(frozen=True)
class Design:
    name: str
    dataflow: str
    num_pes: int
    simd_lanes: int
    noc_words: int
    l2_bytes: int
    layers: tuple[str, ...]


#: Each family's fitted sizes (PEs, lanes, W, L2 bytes): around tiny (8 PEs, 1 lane, W = 4,
#: 16 KiB), with PEs 4-16, lanes 1-4, W 1-8 and L2 4-128 KiB, and an operand bank's row bits 7-14;
#: at W = 8, 1, 4 and 8 output banks (the drain's one word a cycle, or more where a bank would
#: hold more than 2,048 rows: 4 KiB, 64 KiB, 128 KiB), so that the output banks' term is told apart
#: from the NoC width's.  (Not W = 16: its PEs align their rows with shifters, a step no linear term
#: in W follows.)
FIT_SIZES = ((8, 1, 4, 16384), (4, 1, 4, 16384), (16, 1, 2, 32768), (8, 2, 1, 4096), (8, 1, 8, 65536),
             (4, 4, 2, 16384), (4, 1, 1, 65536), (8, 1, 8, 4096), (8, 1, 8, 131072))
#: Held out, per family: a size the fit did not see; ``xp``'s is the demo network's design (8 PEs,
#: W = 8, 32 KiB: what ``accelgen flow --objectives runtime,luts`` picked with the kcp-only model).
CHECK_SIZES = {"kcp": (4, 2, 2, 32768), "cp": (4, 2, 2, 32768), "xp": (8, 1, 8, 32768), "yxp": (4, 2, 2, 32768),
               "nmk": (4, 2, 2, 32768)}


def _name(family: str, p: int, s: int, w: int, l2: int, demo: bool = False) -> str:
    return f"{family}_p{p}_w{w}_l{l2 // 1024}k_s{s}" + ("_demo" if demo else "")


FIT = tuple(Design(_name(f, *size), f, *size, layers) for f, layers in FAMILY_LAYERS.items() for size in FIT_SIZES)
CHECKS = tuple(Design(_name(f, *size, demo=f == "xp"), f, *size, DEMO_LAYERS if f == "xp" else FAMILY_LAYERS[f])
               for f, size in CHECK_SIZES.items())
#: The block RAM a bank's memory takes, per word width: rows a block holds and blocks side by
#: side (ECP5 DP16KD 2048x9 and 512x36; iCE40 SB_RAM40_4K 512x8 and 256x16; 7-series RAMB18E1
#: like the ECP5's).
BRAM_BLOCKS = {"ecp5": {8: {"rows": 2048, "blocks": 1}, 32: {"rows": 512, "blocks": 1}},
               "ice40": {8: {"rows": 512, "blocks": 1}, 32: {"rows": 256, "blocks": 2}},
               "xilinx": {8: {"rows": 2048, "blocks": 1}, 32: {"rows": 512, "blocks": 1}}}
#: How Yosys's memory map weighs a bank: a block RAM's cost, and the LUT-RAM cells it may use
#: instead with theirs (techlibs ecp5/brams.txt and lutrams.txt: DP16KD 128, TRELLIS_DPR16X4
#: 16x4 at 4; xilinx/brams_xc4v.txt and lutrams_xc5v.txt: RAMB18 129, a RAM64M as 64x3 or a
#: RAM32M as 32x6 at 8; ice40/brams.txt: SB_RAM40_4K 64, no LUT RAM).  Measured on hwgen/ram.py's
#: module alone: an ECP5 keeps 8-bit banks of up to 128 rows and 32-bit ones of up to 32 in LUT
#: RAM, a 7-series 320 and 64.
BRAM_COST = {"ecp5": 128, "ice40": 64, "xilinx": 129}
LUTRAM_CELLS = {"ecp5": [{"rows": 16, "bits": 4, "cost": 4}], "ice40": [],
                "xilinx": [{"rows": 64, "bits": 3, "cost": 8}, {"rows": 32, "bits": 6, "cost": 8}]}
#: LUTs one LUT-RAM cell takes: ECP5 TRELLIS_DPR16X4 three slices (two in RAM mode and one for
#: the write port: the data sheet's "slices required for distributed RAM", nextpnr's packing), six
#: LUT4s; 7-series RAM32M and RAM64M (the LUT-RAM cells Yosys makes of the PE's memories and of
#: small L2 banks) a SLICEM's four LUT6s; iCE40 has no LUT RAM.
LUTRAM_LUTS = {"ecp5": 6, "ice40": 0, "xilinx": 4}
_PE_FEATURES = ("fixed", "lanes", "words")
_SHARED_FEATURES = ("fixed", "pes", "words", "out_banks")
#: Resources of whole cells the shared parts have the same number of in nearly every design of a
#: family (products of configuration registers; no LUT RAM): counted, not fitted.
_COUNTED = ("dsp", "lutram")
_RESOURCES = ("lut", "ff", "dsp", "lutram")
_FIGURES = ("luts", "ffs", "dsps", "brams")


def _say(message: str) -> None:
    print(f"fit_fpga_model: {message}", file=sys.stderr)


def _hardware(d: Design):
    from costmodel import builtin_hardware
    return builtin_hardware(BASE).with_overrides(name=d.name, num_pes=d.num_pes, simd_lanes=d.simd_lanes,
                                                 noc_bw=d.noc_words, l2_bytes=d.l2_bytes)


def design_from_dict(d: dict) -> Design:
    return Design(**{**d, "layers": tuple(d["layers"])})


def _emit(d: Design, folder: Path) -> tuple[Path, str, dict]:
    """Write the design's Verilog; its file, its PE module's digest and its structure."""
    from costmodel.dataflow.spec import resolve_dataflow
    from costmodel.hwgen_preset.preset import hwgen_structure, l2_split
    from costmodel.workload import parse_layer_spec
    from hwgen.emit import write_verilog
    from hwgen.pe import PE_MODULE
    hw = _hardware(d)
    layers = [parse_layer_spec(spec, name=f"layer{i}") for i, spec in enumerate(d.layers)]
    structure = hwgen_structure(resolve_dataflow(d.dataflow, layers[0], hw), layers[0], hw, fit=layers)
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
    todo = [d for d in designs if cache.get(d.name, {}).get("design") != json.loads(json.dumps(asdict(d)))]
    for d in designs:
        if d not in todo:
            results[d.name] = cache[d.name]
    # a PE module already measured (the same text in another design) is not synthesised again
    pe_known = {r["pe_key"]: r["pe"] for r in cache.values()}
    if todo:
        _say(f"{len(designs) - len(todo)} designs from {cache_path}; synthesising {len(todo)} with "
             f"{key['script']} ({key['yosys']}), {jobs} at a time")
    err = Console(file=sys.stderr, highlight=False, emoji=False)
    pe_runs: dict[str, Future] = {}
    runs: list[tuple[Design, dict, Future | dict, Future]] = []
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
            if pe_key not in pe_runs and pe_key not in pe_known:
                pe_runs[pe_key] = submit(_synth, verilog, PE_MODULE, target, ())
            shared = submit(_synth, verilog, TOP, target, (PE_MODULE,))
            runs.append((d, {"pe_key": pe_key, "structure": structure, "emit_seconds": emit_s},
                         pe_runs.get(pe_key) or pe_known[pe_key], shared))
        progress.update(emitting, description="emitted")
        for d, info, pe, shared in runs:
            results[d.name] = {"design": json.loads(json.dumps(asdict(d))), **info,
                               "pe": pe.result() if isinstance(pe, Future) else pe, "shared": shared.result()}
            write_atomically(str(cache_path), json.dumps({"key": key, "designs": {**cache, **results}}, indent=1))
    if todo:
        _say(f"synthesised {len(todo)} designs in {time.perf_counter() - start:.0f} s")
    return {d.name: results[d.name] for d in designs}


def _features(rows: list[dict], names: tuple[str, ...]) -> np.ndarray:
    from costmodel.fpga import drain_run, l2_rows, output_banks
    out = []
    for r in rows:
        d = r["design"]
        operand, _ = l2_rows(d["l2_bytes"], d["noc_words"])
        banks = output_banks(drain_run(d["dataflow"], d["num_pes"], d["noc_words"]), d["l2_bytes"], d["noc_words"])
        values = {"fixed": 1, "lanes": d["simd_lanes"], "pes": d["num_pes"], "words": d["noc_words"],
                  "out_banks": float(banks), "row_bits": (operand - 1).bit_length()}
        out.append([values[n] for n in names])
    return np.array(out, dtype=np.float64)


def _shared_fit(rows: list[dict], resource: str, families: tuple[str, ...]) -> tuple[dict[str, np.ndarray], float]:
    """The shared parts' ``resource`` over ``rows`` (designs of ``families``): each family's own
    ``[1, PEs, W, V]`` and one row-bit term common to all (columns: the families' blocks side by
    side, then the row bits)."""
    k = len(_SHARED_FEATURES)
    x = np.zeros((len(rows), k * len(families) + 1))
    for i, r in enumerate(rows):
        j = families.index(r["design"]["dataflow"])
        x[i, k * j:k * (j + 1)] = _features([r], _SHARED_FEATURES)[0]
        x[i, -1] = _features([r], ("row_bits",))[0, 0]
    y = np.array([r["shared"][resource] for r in rows], float)
    a, *_ = np.linalg.lstsq(x, y, rcond=None)
    return {f: a[k * j:k * (j + 1)] for j, f in enumerate(families)}, float(a[-1])


def _pe_features(pes: list[dict]) -> tuple[str, ...]:
    """A family's PE terms: ``W`` only where two of its PEs with the same lanes differ with it (in
    ``xp`` and ``yxp`` a PE aligns its input window off the ``W`` lanes; the others' PEs are the
    same at every width)."""
    by_lanes: dict[int, set] = {}
    for r in pes:
        by_lanes.setdefault(r["design"]["simd_lanes"], set()).add(tuple(r["pe"][k] for k in _RESOURCES))
    return _PE_FEATURES if any(len(v) > 1 for v in by_lanes.values()) else _PE_FEATURES[:2]


def fit(measured: dict[str, dict], target: str) -> tuple[dict, dict, dict]:
    """The model's coefficients (rounded), the raw least-squares solutions, and each family's
    shared parts fitted alone (with a row-bit term of its own: what the common one rests on)."""
    families = FAMILIES
    fitted = [measured[d.name] for d in FIT]
    coefficients: dict[str, Any] = {f: {} for f in families}
    raw: dict[str, Any] = {f: {} for f in families}
    alone: dict[str, Any] = {f: {} for f in families}
    for resource in _RESOURCES:
        if resource not in _COUNTED:
            shared, row_bit = _shared_fit(fitted, resource, families)
        for f in families:
            rows = [r for r in fitted if r["design"]["dataflow"] == f]
            pes = list({r["pe_key"]: r for r in rows}.values())          # each distinct PE once
            per_pe = np.array([r["pe"][resource] for r in pes], float)
            names = _pe_features(pes)
            a_pe, *_ = np.linalg.lstsq(_features(pes, names), per_pe, rcond=None)
            a_pe = np.append(a_pe, [0.0] * (len(_PE_FEATURES) - len(names)))
            if resource in _COUNTED:
                # whole cells the shared parts hold the same number of in nearly every design (but
                # the LUT RAM of small L2 banks, which the model counts from their geometry)
                counts = [r["shared"][resource] - (_l2_lutram_cells(target, r["design"]) if resource == "lutram" else 0)
                          for r in rows]
                a_sh, b = np.array([np.median(counts), 0.0, 0.0, 0.0]), 0.0
            else:
                a_sh, b = shared[f], row_bit
                own, *_ = np.linalg.lstsq(_features(rows, (*_SHARED_FEATURES, "row_bits")),
                                          np.array([r["shared"][resource] for r in rows], float), rcond=None)
                alone[f][resource] = {t: round(float(v), 1) for t, v in zip(
                    ("fixed", "per_pe", "per_noc_word", "per_output_bank", "per_l2_row_bit"), own)}
            terms = {"fixed": a_sh[0], "per_pe": a_pe[0] + a_sh[1], "per_pe_lane": a_pe[1],
                     "per_pe_noc_word": a_pe[2], "per_noc_word": a_sh[2], "per_output_bank": a_sh[3],
                     "per_l2_row_bit": b}
            raw[f][resource] = {k: float(v) for k, v in terms.items()}
            coefficients[f][resource] = {k: int(round(v)) for k, v in terms.items()}
    return _model_doc(target, coefficients), raw, alone


def _model_doc(target: str, coefficients: dict) -> dict:
    return {"families": coefficients, "bram_blocks": BRAM_BLOCKS[target], "bram_cost": BRAM_COST[target],
            "lutram_cells": LUTRAM_CELLS[target], "lutram_luts": LUTRAM_LUTS[target]}


def _l2_lutram_cells(target: str, d: dict) -> float:
    """The LUT-RAM cells of a design's L2 banks (small banks: :func:`costmodel.fpga.l2_memories`)."""
    from costmodel.fpga import drain_run, l2_memories, model_from_dict
    zero = {r: {} for r in _RESOURCES}
    geometry = model_from_dict({"target": target, "model": _model_doc(target, {f: zero for f in FAMILIES})}, "fit")
    run = drain_run(d["dataflow"], d["num_pes"], d["noc_words"])
    return float(l2_memories(geometry, np.asarray(d["l2_bytes"]), np.asarray(d["noc_words"]), run)["lutram_cells"])


def _predict(model_doc: dict, target: str, d: Design) -> dict:
    from costmodel.fpga import estimate, model_from_dict
    model = model_from_dict({"target": target, "model": model_doc}, "fit")
    return estimate(_hardware(d), target, family=d.dataflow, model=model)


def _measured(r: dict, lutram_luts: int) -> dict:
    n = r["design"]["num_pes"]
    total = {k: r["pe"][k] * n + r["shared"][k] for k in ("lut", "ff", "dsp", "bram", "lutram")}
    return {"luts": total["lut"] + lutram_luts * total["lutram"], "ffs": total["ff"], "dsps": total["dsp"],
            "brams": total["bram"], "lut_logic": total["lut"], "lutram_cells": total["lutram"]}


def _residuals(rows: list[dict]) -> dict:
    return {k: {"max_abs": int(max(abs(x["model"][k] - x["measured"][k]) for x in rows)),
                "max_pct": max(abs(x["error_pct"][k] or 0.0) for x in rows),
                "rms": round(float(np.sqrt(np.mean([(x["model"][k] - x["measured"][k]) ** 2 for x in rows]))), 1)}
            for k in _FIGURES}


def report(measured: dict[str, dict], model_doc: dict, raw: dict, alone: dict, target: str) -> dict:
    from accelgen.synth import TARGETS
    from hwgen.emit import generator_digest
    families: dict[str, Any] = {}
    for f in FAMILIES:
        designs = []
        for role, group in (("fit", FIT), ("held_out", CHECKS)):
            for d in (d for d in group if d.dataflow == f):
                r = measured[d.name]
                got = _measured(r, model_doc["lutram_luts"])
                want = _predict(model_doc, target, d)
                error = {k: round(100 * (want[k] - got[k]) / got[k], 1) if got[k] else (0.0 if want[k] == 0 else None)
                         for k in want}
                designs.append({"name": d.name, "role": role, **asdict(d), "layers": list(d.layers),
                                "pe_module": r["pe_key"],
                                "synthesis_seconds": {"emit": r["emit_seconds"], "pe": r["pe"]["seconds"],
                                                      "shared": r["shared"]["seconds"]},
                                "pe": {k: r["pe"][k] for k in ("lut", "ff", "dsp", "bram", "lutram")},
                                "shared": {k: r["shared"][k] for k in ("lut", "ff", "dsp", "bram", "lutram")},
                                "measured": got, "model": {k: int(want[k]) for k in want}, "error_pct": error})
        families[f] = {"layers": list(FAMILY_LAYERS[f]), "unrounded": raw[f], "shared_fitted_alone": alone[f],
                       "residuals": {role: _residuals([x for x in designs if x["role"] == role])
                                     for role in ("fit", "held_out")},
                       "designs": designs}
    every = [x for fam in families.values() for x in fam["designs"]]
    commit = _git("rev-parse", "HEAD")
    dirty = _git("status", "--porcelain", "--", "hwgen", "costmodel/hwgen_preset", "accelgen/synth.py")
    recorded = [x["synthesis_seconds"]["shared"] for x in every]
    pe_seconds = {x["pe_module"]: x["synthesis_seconds"]["pe"] for x in every}
    return {
        "target": target,
        "model": model_doc,
        "provenance": {
            "date": datetime.date.today().isoformat(),
            "yosys": _yosys_version(),
            "synthesis": {"script": TARGETS[target], "flow": "accelgen.synth.synthesize_module: the PE alone, and "
                          "the top with the PE black-boxed; stat -json; LUTs as accelgen.synth counts them (ecp5: "
                          "LUT4 + 2 x CCU2C), LUT RAM apart",
                          "designs": len(every), "pe_modules": len(pe_seconds),
                          "yosys_seconds": round(sum(recorded) + sum(pe_seconds.values())),
                          "emit_seconds": round(sum(x["synthesis_seconds"]["emit"] for x in every))},
            "accelgen_commit": commit + (" (generator files modified in the working tree)" if dirty else ""),
            "generator_digest": generator_digest(),
            "fit": {"base": BASE,
                    "pe": f"per family, least squares on {list(_PE_FEATURES)} over its distinct PE modules ('words' "
                          "only where its PEs of the same lanes differ with W)",
                    "shared": f"least squares on each family's {list(_SHARED_FEATURES)} and row bits common to "
                              "all, over every fitted design",
                    "common": ["per_l2_row_bit"],
                    "counted": f"{' and '.join(_COUNTED)} of the shared parts: the family's median count (LUT RAM "
                               "beside the L2 banks', which their geometry gives)",
                    "combined": "fixed = shared fixed; per_pe = PE fixed + shared per PE; per_pe_lane = PE per "
                                "lane; per_pe_noc_word = PE per word; per_noc_word, per_output_bank, "
                                "per_l2_row_bit = the shared parts'",
                    "rounding": "each coefficient to a whole number"},
            "refit": f"python scripts/fit_fpga_model.py --target {target}",
            "residuals": {role: _residuals([x for x in every if x["role"] == role]) for role in ("fit", "held_out")},
            "families": families,
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
    parser.add_argument("--measure-only", action="store_true", help="synthesise (or read the cache) and stop")
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
        if args.measure_only:
            return 0
        model_doc, raw, alone = fit(measured, args.target)
        doc = report(measured, model_doc, raw, alone, args.target)
    except AccelgenError as exc:
        _say(f"error: {exc}")
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# FPGA resource model of the generated accelerator on {args.target} (costmodel.fpga, docs/fpga.md).\n"
              f"# Written by scripts/fit_fpga_model.py; do not edit by hand: refit with\n"
              f"#   python scripts/fit_fpga_model.py --target {args.target}\n")
    write_atomically(str(out), header + yaml.safe_dump(doc, sort_keys=False, width=120))
    for f, fam in doc["provenance"]["families"].items():
        for role, res in fam["residuals"].items():
            _say(f"{f} {role}: " + ", ".join(f"{k} max {v['max_pct']} % (rms {v['rms']})" for k, v in res.items()))
    _say(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

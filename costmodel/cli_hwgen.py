"""``accelgen emit`` and ``accelgen verify``: generate the accelerator for a dataflow and a
hardware description, and run a layer on it in a simulator against numpy and the ``hwgen``
preset."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from ._errors import AccelgenError
from .hardware import hardware_to_dict
from .hwgen_model import hwgen_structure, l2_split
from .hwgen_schedule import hwgen_cycles, tiles_of
from .workload import GEMM, Layer
from .workload_yaml import parse_layer_spec

__all__ = ["emit_arguments", "run_emit", "verify_arguments", "run_verify"]

WAIVERS = ("-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-CASEINCOMPLETE")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataflow", required=True, metavar="NAME|FILE",
                        help="kcp, cp, xp, nmk (GEMM) or a dataflow file of the same shapes")
    parser.add_argument("--hw", default="tiny", metavar="NAME|FILE", help="hardware (default: tiny)")


def emit_arguments(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    parser.add_argument("--model", metavar="NAME|FILE|SPEC",
                        help="layers whose predicted cycles go into the manifest (the first one also "
                             "fixes the dataflow's shape; default: a 3x3 convolution or a GEMM)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")


def _hardware(spec: str):
    from .hardware import builtin_hardware
    return builtin_hardware(spec)


def _layers(spec: str | None, gemm: bool) -> list[Layer]:
    if spec is None:
        return [parse_layer_spec("gemm:M=8,N=8,K=8" if gemm else "conv2d:K=8,C=8,Y=8,X=8,R=3,S=3",
                                 name="default")]
    if ":" in spec and spec.split(":", 1)[0].lower() in ("conv2d", "gemm"):
        return [parse_layer_spec(spec, name="layer")]
    from .cli import workload_from_spec
    return list(workload_from_spec(spec).model.layers)


def _dataflow(spec: str, layer: Layer, hw):
    from .cli import dataflow_from_spec
    from .analysis import resolve_dataflow
    return resolve_dataflow(dataflow_from_spec(spec), layer, hw)


def _is_gemm_dataflow(spec: str) -> bool:
    return spec.lower() == "nmk"


def run_emit(args: argparse.Namespace) -> int:
    from hwgen.sim import TOP, design_id, write_verilog
    hw = _hardware(args.hw)
    layers = _layers(args.model, _is_gemm_dataflow(args.dataflow))
    first = layers[0]
    df = _dataflow(args.dataflow, first, hw)
    structure = hwgen_structure(df, first, hw)
    l2 = l2_split(hw)
    predicted = []
    for layer in layers:
        try:
            tiles = tiles_of(structure, _dataflow(args.dataflow, layer, hw), layer)
            predicted.append({"layer": layer.name, "shape": layer.describe(), "runs": tiles.repeat,
                              "predicted_cycles_per_run": hwgen_cycles(structure, tiles),
                              "config": tiles.as_dict()})
        except AccelgenError as err:
            predicted.append({"layer": layer.name, "shape": layer.describe(), "refused": str(err)})
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".emit-", dir=out.parent))
    try:
        write_verilog(structure, l2, tmp / f"{TOP}.v")
        (tmp / "files.f").write_text(f"{TOP}.v\n")
        from hwgen.accelerator import CONFIG_REGS, CTRL, REGION
        manifest = {
            "design": design_id(structure, l2), "top": TOP, "dataflow": str(df), "hardware": hardware_to_dict(hw),
            "structure": structure.as_dict(), "l2_words": l2,
            "ports": {"clk": 1, "rst": 1, "bus_addr": 24, "bus_wdata": 32, "bus_we": 1, "bus_re": 1,
                      "bus_rdata": 32, "busy": 1, "done": 1},
            "bus": {"regions": REGION, "ctrl": CTRL, "config_registers": list(CONFIG_REGS)},
            "verilator_lint_waivers": list(WAIVERS), "layers": predicted,
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.replace(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {out}/{TOP}.v, files.f, manifest.json ({structure.used_pes} PEs, "
          f"NoC {structure.noc_words_per_cycle} words/cycle)")
    return 0


def verify_arguments(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    parser.add_argument("--layer", required=True, metavar="SPEC",
                        help="e.g. conv2d:K=8,C=4,Y=6,X=6,R=3,S=3,stride=1 or gemm:M=4,N=8,K=16")
    parser.add_argument("--sim", default="icarus", choices=("icarus", "verilator"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--format", default="table", choices=("table", "json"))


def verify_layer(dataflow_spec: str, hw, layer: Layer, sim: str, seed: int) -> dict:
    """Generate (or reuse) the design, run ``layer`` on random int8 data, compare."""
    from hwgen.host import make_job, random_operands
    from hwgen.sim import run_jobs
    df = _dataflow(dataflow_spec, layer, hw)
    structure = hwgen_structure(df, layer, hw)
    l2 = l2_split(hw)
    tiles = tiles_of(structure, df, layer)
    a, b = random_operands(layer, seed)
    job = make_job(structure, tiles, layer, a, b, l2)
    predicted = hwgen_cycles(structure, tiles)
    result = run_jobs(structure, l2, [(layer.name, job, 2 * predicted + 1000)], sim)[0]
    macs = layer.macs
    measured = result["measured_cycles"]
    return {"layer": layer.describe(), "dataflow": dataflow_spec, "hardware": hw.name, "sim": sim,
            "seed": seed, "predicted_cycles": predicted, "measured_cycles": measured,
            "cycle_difference": measured - predicted if result["finished"] else None,
            "bit_exact": result["finished"] and result["outputs"] == job.expected,
            "rtl_utilization": macs / (structure.num_pes * measured) if measured > 0 else 0.0}


def run_verify(args: argparse.Namespace) -> int:
    hw = _hardware(args.hw)
    layer = parse_layer_spec(args.layer, name="layer")
    if isinstance(layer, GEMM) != _is_gemm_dataflow(args.dataflow) and args.dataflow.lower() in ("kcp", "cp", "xp", "nmk"):
        raise AccelgenError(f"dataflow {args.dataflow} does not apply to {layer.describe()}", where="--dataflow")
    report = verify_layer(args.dataflow, hw, layer, args.sim, args.seed)
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            print(f"{key:>18}: {value}")
    ok = report["bit_exact"] and report["cycle_difference"] == 0
    return 0 if ok else 1

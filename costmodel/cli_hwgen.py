"""``accelgen emit`` and ``accelgen verify``: generate the accelerator for a dataflow and a
hardware description, and run a layer on it in a simulator against numpy and the ``hwgen``
preset."""

from __future__ import annotations

import argparse
import json
import shutil
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
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataflow", metavar="NAME|FILE",
                        help="kcp, cp, xp, nmk (GEMM) or a dataflow file of the same shapes")
    source.add_argument("--design", metavar="FILE.yaml",
                        help="a design point written by `accelgen explore` (its hardware and dataflows; "
                             "one accelerator per dataflow, in DIR/conv2d and DIR/gemm)")
    parser.add_argument("--hw", default="tiny", metavar="NAME|FILE", help="hardware (default: tiny)")
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
    from .cli import workload_from_spec       # zoo names, files and inline layer specs
    return list(workload_from_spec(spec).model.layers)


def _dataflow(spec: str, layer: Layer, hw):
    from .analysis import resolve_dataflow
    from .cli import dataflow_from_spec
    return resolve_dataflow(dataflow_from_spec(spec), layer, hw)


def _is_gemm_dataflow(spec: str) -> bool:
    return spec.lower() == "nmk"


def _emit_one(hw, dataflow_for, layers: list[Layer], out: Path) -> str:
    """Generate the accelerator for ``layers[0]``'s dataflow into ``out`` (atomically)."""
    from hwgen.accelerator import CONFIG_REGS, CTRL, REGION
    from hwgen.sim import TOP, design_id, write_verilog
    first = layers[0]
    df = dataflow_for(first)
    structure = hwgen_structure(df, first, hw, fit=layers)
    l2 = l2_split(hw)
    predicted = []
    for layer in layers:
        try:
            tiles = tiles_of(structure, dataflow_for(layer), layer)
            predicted.append({"layer": layer.name, "shape": layer.describe(), "runs": tiles.repeat,
                              "predicted_cycles_per_run": hwgen_cycles(structure, tiles),
                              "config": tiles.as_dict()})
        except AccelgenError as err:
            predicted.append({"layer": layer.name, "shape": layer.describe(), "refused": str(err)})
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".emit-", dir=out.parent))
    try:
        write_verilog(structure, l2, tmp / f"{TOP}.v")
        (tmp / "files.f").write_text(f"{TOP}.v\n")
        manifest = {
            "design": design_id(structure, l2), "top": TOP, "dataflow": str(df),
            "hardware": hardware_to_dict(hw), "structure": structure.as_dict(), "l2_words": l2,
            "ports": {"clk": 1, "rst": 1, "bus_addr": 24, "bus_wdata": 32, "bus_we": 1, "bus_re": 1,
                      "bus_rdata": 32, "busy": 1, "done": 1},
            "bus": {"regions": REGION, "ctrl": CTRL, "config_registers": list(CONFIG_REGS)},
            "timing": "docs/timing.md", "verilator_lint_waivers": list(WAIVERS), "layers": predicted,
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.replace(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return (f"wrote {out}/{TOP}.v, files.f, manifest.json ({structure.used_pes} PEs, "
            f"NoC {structure.noc_words_per_cycle} words/cycle, {df.name})")


def run_emit(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if args.design is None:
        hw = _hardware(args.hw)
        layers = _layers(args.model, _is_gemm_dataflow(args.dataflow))
        print(_emit_one(hw, lambda layer: _dataflow(args.dataflow, layer, hw), layers, out))
        return 0
    from .design import load_design
    design = load_design(args.design)
    hw = design.hardware
    for kind in ("conv2d", "gemm"):
        if kind not in design.dataflows:
            continue
        layers = [l for l in _layers(args.model, kind == "gemm") if isinstance(l, GEMM) == (kind == "gemm")]
        if not layers:
            layers = _layers(None, kind == "gemm")
        print(_emit_one(hw, design.dataflow_for, layers, out / kind))
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
    structure = hwgen_structure(df, layer, hw, fit=[layer])
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
            "rtl_utilization": macs / (structure.num_pes * structure.simd_lanes * measured) if measured > 0 else 0.0}


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

"""``accelgen emit`` and ``accelgen verify``: generate the accelerator for a dataflow and a
hardware description, and run a layer on it in a simulator against numpy and the ``hwgen``
preset."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from costmodel.base import AccelgenError
from costmodel.dataflow.spec import dataflow_from_spec, dataflow_kind, resolve_dataflow
from costmodel.hardware import builtin_hardware
from costmodel.workload import GEMM, Layer, parse_layer_spec, workload_from_spec

from .options import add_input_shape_argument, input_shapes

__all__ = ["emit_arguments", "run_emit", "verify_arguments", "run_verify"]

_DATAFLOW_HELP = "kcp, cp, xp, nmk (GEMM) or a dataflow file of the same shapes"


def emit_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataflow", metavar="NAME|FILE", help=_DATAFLOW_HELP)
    source.add_argument("--design", metavar="FILE.yaml",
                        help="a design point written by `accelgen explore` (its hardware and dataflows; "
                             "one accelerator per dataflow, in DIR/conv2d and DIR/gemm)")
    parser.add_argument("--hw", default="tiny", metavar="NAME|FILE", help="hardware (default: tiny)")
    parser.add_argument("--model", metavar="NAME|FILE|SPEC",
                        help="layers whose predicted cycles go into the manifest (the first one also "
                             "fixes the dataflow's shape; default: a 3x3 convolution or a GEMM)")
    add_input_shape_argument(parser)
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")


def _layers(spec: str | None, gemm: bool, shapes: dict[str, tuple[int, ...]] | None = None) -> list[Layer]:
    if spec is None:
        if shapes:
            raise AccelgenError("--input-shape needs --model FILE.onnx", where="--input-shape")
        return [parse_layer_spec("gemm:M=8,N=8,K=8" if gemm else "conv2d:K=8,C=8,Y=8,X=8,R=3,S=3",
                                 name="default")]
    return list(workload_from_spec(spec, input_shapes=shapes).model.layers)


def run_emit(args: argparse.Namespace) -> int:
    from hwgen.emit import emit_design
    out = Path(args.out)
    if args.design is None:
        hw = builtin_hardware(args.hw)
        spec = dataflow_from_spec(args.dataflow)
        layers = _layers(args.model, dataflow_kind(spec) == "gemm", input_shapes(args))
        print(emit_design(hw, lambda layer: resolve_dataflow(spec, layer, hw), layers, out, args.dataflow))
        return 0
    from costmodel.design import load_design
    design = load_design(args.design)
    hw = design.hardware
    for kind in ("conv2d", "gemm"):
        if kind not in design.dataflows:
            continue
        layers = [l for l in _layers(args.model, kind == "gemm", input_shapes(args)) if isinstance(l, GEMM) == (kind == "gemm")]
        if not layers:
            layers = _layers(None, kind == "gemm")
        print(emit_design(hw, design.dataflow_for, layers, out / kind))
    return 0


def verify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataflow", required=True, metavar="NAME|FILE", help=_DATAFLOW_HELP)
    parser.add_argument("--hw", default="tiny", metavar="NAME|FILE", help="hardware (default: tiny)")
    parser.add_argument("--layer", required=True, metavar="SPEC",
                        help="e.g. conv2d:K=8,C=4,Y=6,X=6,R=3,S=3,stride=1 or gemm:M=4,N=8,K=16")
    parser.add_argument("--sim", default="icarus", choices=("icarus", "verilator"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--format", default="table", choices=("table", "json"))


def run_verify(args: argparse.Namespace) -> int:
    from sim_tests.runner import verify_layer
    hw = builtin_hardware(args.hw)
    layer = parse_layer_spec(args.layer, name="layer")
    spec = dataflow_from_spec(args.dataflow)
    if isinstance(spec, str) and (dataflow_kind(spec) == "gemm") != isinstance(layer, GEMM):
        raise AccelgenError(f"dataflow {args.dataflow} does not apply to {layer.describe()}", where="--dataflow")
    report = verify_layer(spec, hw, layer, args.sim, args.seed, label=args.dataflow)
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            print(f"{key:>18}: {value}")
    ok = report["bit_exact"] and report["cycle_difference"] == 0
    return 0 if ok else 1

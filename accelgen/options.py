"""Argument groups and types shared by the subcommands, and where their output goes.

Every option is checked at the door (a bad value is one line naming the option); output goes to
stdout, or with ``--out FILE`` to a temporary file renamed into place.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
from typing import Any, Callable

from rich.console import Console

from costmodel.analysis import PRESETS
from costmodel.base import AccelgenError, write_atomically
from costmodel.design import load_design
from costmodel.hardware import BUILTIN_HARDWARE, Hardware, builtin_hardware
from costmodel.workload.spec import input_shapes_from_texts

__all__ = ["PROG", "FORMATS", "positive_int", "non_negative_int", "bandwidth", "add_input_shape_argument",
           "input_shapes", "add_model_arguments", "model_from_args", "add_hardware_arguments",
           "hardware_from_args", "add_fpga_arguments", "fpga_from_args", "add_output_arguments", "stdout_console",
           "emit_output", "note"]

PROG = "accelgen"
FORMATS = ("table", "json", "csv")


# --- argument types: reject bad values at the door, naming the option -----------------------------

def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, not {text!r}")
    return value


def bandwidth(text: str) -> float:
    if text.strip().lower() in ("inf", "unlimited"):
        return math.inf
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of words/cycle or 'inf', not {text!r}")
    return int(value) if value.is_integer() else value


# --- hardware -------------------------------------------------------------------------------------

_HW_OVERRIDES = (  # (option, attribute of args, with_overrides keyword)
    ("--num-pes", "num_pes", "num_pes"),
    ("--simd-lanes", "simd_lanes", "simd_lanes"),
    ("--noc-bw", "noc_bw", "noc_bw"),
    ("--noc-latency", "noc_latency", "noc_latency"),
    ("--pe-drain-words", "pe_drain_words", "pe_drain_words"),
)


def add_input_shape_argument(group: Any) -> None:
    """``--input-shape NAME=D0,D1,...`` beside every ``--model`` that may be an ONNX file."""
    group.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                       help="the shape of an ONNX model's input with dynamic sizes, e.g. x=1,3,640,640 "
                            "(repeatable; a dynamic batch alone defaults to 1)")


def input_shapes(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    return input_shapes_from_texts(getattr(args, "input_shape", None) or [])


def add_model_arguments(group: Any, layer_help: str) -> None:
    """``--model`` (required), ``--input-shape`` and ``--layer`` (one layer of the model only)."""
    from costmodel.workload import ZOO
    group.add_argument("--model", required=True, metavar="NAME|FILE",
                       help=f"a built-in model ({', '.join(ZOO)}), a workload .yaml, a MAESTRO .m or an .onnx file")
    add_input_shape_argument(group)
    group.add_argument("--layer", metavar="NAME", help=layer_help)


def model_from_args(args: argparse.Namespace) -> Any:
    """The model of ``--model``, or with ``--layer`` its one layer (a model named ``MODEL.LAYER``)."""
    from costmodel.workload import Model, workload_from_spec
    model = workload_from_spec(args.model, input_shapes=input_shapes(args)).model
    if args.layer is None:
        return model
    layer = next((l for l in model.layers if l.name == args.layer), None)
    if layer is None:
        names = ", ".join(l.name for l in model.layers[:8]) + (", ..." if len(model.layers) > 8 else "")
        raise AccelgenError(f"{model.name} has no layer {args.layer!r} (it has {names})", where="--layer")
    return Model(f"{model.name}.{layer.name}", (layer,))


def add_hardware_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("hardware")
    group.add_argument("--hw", default=None, metavar="NAME|FILE",
                       help=f"built-in hardware ({', '.join(BUILTIN_HARDWARE)}) or a hardware .yaml file "
                            "(default: small)")
    group.add_argument("--preset", default="maestro", choices=PRESETS, help="timing preset (default: maestro)")
    group.add_argument("--num-pes", type=positive_int, metavar="N", help="override the number of PEs")
    group.add_argument("--simd-lanes", type=positive_int, metavar="N", help="override the SIMD lanes per PE")
    group.add_argument("--noc-bw", type=bandwidth, metavar="X|inf",
                       help="override the NoC bandwidth of every level, in words/cycle")
    group.add_argument("--noc-latency", type=non_negative_int, metavar="N",
                       help="override the NoC latency of every level, in cycles per hop")
    group.add_argument("--pe-drain-words", type=non_negative_int, metavar="N",
                       help="(hwgen) partial sums the drain reads from a PE a cycle, at most; 0: the generator's "
                            "choice, few, so they sit in LUT RAM (docs/timing.md)")


def hardware_from_args(args: argparse.Namespace) -> tuple[Hardware, tuple[str, ...]]:
    """The hardware named by ``--hw`` with the override options applied, and those options as
    written (for the report)."""
    design = getattr(args, "design", None)
    if design is not None:
        if args.hw is not None:
            raise AccelgenError("--hw does not combine with --design, which carries its own hardware", where="--hw")
        hw = load_design(design).hardware
    else:
        hw = builtin_hardware(args.hw or "small")
    changes: dict[str, Any] = {}
    shown: list[str] = []
    for option, attribute, keyword in _HW_OVERRIDES:
        value = getattr(args, attribute)
        if value is not None:
            changes[keyword] = value
            shown.append(f"{option} {value}")
    return (hw.with_overrides(**changes) if changes else hw), tuple(shown)


# --- FPGA figures (explore, flow) ------------------------------------------------------------------

def add_fpga_arguments(group: Any) -> None:
    """``--fpga-target`` (the resource model of the metrics luts, ffs, dsps, brams) and ``--part``
    (a device whose limits become constraints)."""
    from costmodel.fpga import FPGA_TARGETS, PARTS
    group.add_argument("--fpga-target", choices=FPGA_TARGETS, metavar="TARGET",
                       help=f"the FPGA whose resource model gives luts, ffs, dsps and brams: {', '.join(FPGA_TARGETS)} "
                            "(default: ecp5, or the family of --part)")
    group.add_argument("--part", metavar="NAME",
                       help=f"an FPGA the design must fit: its LUTs, FFs, DSPs and block RAMs become constraints "
                            f"({', '.join(PARTS)})")


def fpga_from_args(args: argparse.Namespace) -> tuple[str, tuple[Any, ...]]:
    """The FPGA target and the part's constraints (none without ``--part``) of
    :func:`add_fpga_arguments`' options."""
    from costmodel.dse.plan import part_constraints
    from costmodel.fpga import find_part
    target = getattr(args, "fpga_target", None)
    name = getattr(args, "part", None)
    if name is None:
        return target or "ecp5", ()
    part = find_part(name)
    if target is not None and target != part.target:
        raise AccelgenError(f"{part.name} is a part of target {part.target!r}, not {target!r}", where="--fpga-target")
    return part.target, part_constraints(part.name)


# --- output ---------------------------------------------------------------------------------------

def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("output")
    group.add_argument("--format", default="table", choices=FORMATS, help="output format (default: table)")
    group.add_argument("--out", metavar="FILE", help="write to FILE (atomically) instead of stdout")


def stdout_console() -> Console:
    """A console on stdout: the terminal's width, or 120 columns (``$COLUMNS``) when piped."""
    stream = sys.stdout
    is_tty = hasattr(stream, "isatty") and stream.isatty()
    width = None if is_tty else (_env_int("COLUMNS") or 120)
    return Console(file=stream, width=width, highlight=False, emoji=False)


def _env_int(name: str) -> int:
    try:
        return max(0, int(os.environ.get(name, "")))
    except ValueError:
        return 0


def emit_output(args: argparse.Namespace, render: Callable[[Console], None] | str) -> None:
    """Text (or a rich rendering) to ``--out`` or stdout."""
    if args.out is None:
        if isinstance(render, str):
            sys.stdout.write(render)
        else:
            render(stdout_console())
        sys.stdout.flush()
        return
    if not isinstance(render, str):
        buffer = io.StringIO()
        render(Console(file=buffer, width=_env_int("COLUMNS") or 120, color_system=None, highlight=False,
                       emoji=False, force_terminal=False))
        render = buffer.getvalue()
    write_atomically(args.out, render)


def note(message: str) -> None:
    print(f"{PROG}: note: {' '.join(message.split())}", file=sys.stderr)

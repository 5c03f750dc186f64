"""The ``accelgen`` command line.

    accelgen analyze --model resnet50 --dataflow kcp --hw small
    accelgen analyze --mapping tests/data/maestro/small_cnn_kcp.m --format json
    accelgen analyze --model my_net.onnx --dataflow kcp --hw configs/hw/small.yaml
    accelgen list

Each subcommand is one entry of :data:`_COMMANDS` (its arguments and its run function); the
argument groups and their resolvers (:func:`hardware_from_args`, :func:`workload_from_spec`,
:func:`dataflow_from_spec`) are shared so that later subcommands take the same options.

Every user error is one line on stderr, ``accelgen: error: <message>``, exit status 1 (2 for a
command-line usage error); never a traceback.  Output goes to stdout, or with ``--out FILE`` to a
temporary file renamed into place, so no output file is ever half written.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

from rich import box
from rich.console import Console
from rich.table import Table

from ._errors import AccelgenError
from .analysis import PRESETS, DataflowSpec, analyze_model
from .dataflow import GEMM_DIMS, Dataflow, parse_dataflow
from .dataflow_io import DATAFLOW_SUFFIXES, load_dataflow
from .design import load_design
from .hardware import BUILTIN_HARDWARE, Hardware, builtin_hardware
from .library import LIBRARY, canonical_name, describe_library, is_library_name
from .maestro_files import load_maestro_file
from .onnx_import import ImportReport, load_onnx
from .report import ReportContext, humanize_bytes, infeasible_summary, print_table, result_csv, result_json
from .workload import GEMM, Model
from .workload_yaml import parse_layer_spec, load_workload_yaml
from .zoo import ZOO, get_model

__all__ = ["main", "hardware_from_args", "workload_from_spec", "dataflow_from_spec", "Workload"]

PROG = "accelgen"
FORMATS = ("table", "json", "csv")
PRESET_NOTES = {"maestro": "MAESTRO's timing assumptions; reproduces its published figures",
                "hwgen": "the generated RTL's exact timing (docs/timing.md); equals simulation to the cycle"}
_WORKLOAD_SUFFIXES = (".yaml", ".yml", ".m", ".onnx")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line like every other error (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{PROG}: error: {' '.join(message.split())} (see '{self.prog} --help')\n")


# --- argument types: reject bad values at the door, naming the option -----------------------------

def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, not {text!r}")
    return value


def _bandwidth(text: str) -> float:
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
)


def add_hardware_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("hardware")
    group.add_argument("--hw", default=None, metavar="NAME|FILE",
                       help=f"built-in hardware ({', '.join(BUILTIN_HARDWARE)}) or a hardware .yaml file "
                            "(default: small)")
    group.add_argument("--preset", default="maestro", choices=PRESETS, help="timing preset (default: maestro)")
    group.add_argument("--num-pes", type=_positive_int, metavar="N", help="override the number of PEs")
    group.add_argument("--simd-lanes", type=_positive_int, metavar="N", help="override the SIMD lanes per PE")
    group.add_argument("--noc-bw", type=_bandwidth, metavar="X|inf",
                       help="override the NoC bandwidth of every level, in words/cycle")
    group.add_argument("--noc-latency", type=_non_negative_int, metavar="N",
                       help="override the NoC latency of every level, in cycles per hop")


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


# --- workloads and dataflows ----------------------------------------------------------------------

@dataclass(frozen=True)
class Workload:
    """A model and where it came from; a MAESTRO ``.m`` file also gives each layer's Dataflow text,
    an ONNX file the report of the nodes that were not modelled."""

    model: Model
    source: str                                   # "zoo" or the file's path
    layer_dataflows: tuple[str | None, ...] | None = None
    import_report: ImportReport | None = None


def workload_from_spec(spec: str, option: str = "--model") -> Workload:
    """A zoo name, a workload ``.yaml``/``.yml`` file, a MAESTRO ``.m`` file or an ONNX model."""
    if spec in ZOO:
        return Workload(get_model(spec), "zoo")
    if spec.split(":", 1)[0].lower() in ("conv2d", "gemm") and ":" in spec:
        return Workload(Model("layer", (parse_layer_spec(spec, name="layer"),)), "inline")
    suffix = Path(spec).suffix.lower()
    if suffix in (".yaml", ".yml"):
        return Workload(load_workload_yaml(spec), spec)
    if suffix == ".m":
        model, dataflows = load_maestro_file(spec)
        return Workload(model, spec, tuple(dataflows))
    if suffix == ".onnx":
        model, report = load_onnx(spec)
        return Workload(model, spec, import_report=report)
    if Path(spec).exists():
        raise AccelgenError("is not a workload file; expected a built-in model name or a file ending in "
                            f"{', '.join(_WORKLOAD_SUFFIXES)}", where=spec)
    raise AccelgenError(f"unknown model {spec!r}; built-in models: {', '.join(ZOO)} (or give a workload "
                        ".yaml, a MAESTRO .m or an .onnx file)", where=option)


def dataflow_from_spec(spec: str, option: str = "--dataflow") -> DataflowSpec:
    """A library name (canonical, lower case) or a parsed dataflow file."""
    if is_library_name(spec):
        return canonical_name(spec)
    if Path(spec).suffix.lower() in DATAFLOW_SUFFIXES or Path(spec).exists():
        return load_dataflow(spec)
    raise AccelgenError(f"unknown dataflow {spec!r}; the library has {', '.join(LIBRARY)} (or give a "
                        f"{', '.join(DATAFLOW_SUFFIXES)} dataflow file)", where=option)


def _kind(spec: DataflowSpec) -> str:
    """``gemm`` or ``conv2d``: which layers a dataflow is written for."""
    if isinstance(spec, str):
        return LIBRARY[spec].layer_kind
    assert isinstance(spec, Dataflow)
    dims = spec.dims()
    return "gemm" if "M" in dims and dims <= set(GEMM_DIMS) else "conv2d"


def _label(spec: DataflowSpec) -> str:
    return spec if isinstance(spec, str) else spec.name if isinstance(spec, Dataflow) else "?"


@dataclass(frozen=True)
class _Plan:
    workload: Workload
    specs: tuple[DataflowSpec, ...]   # one per layer; None = the library default for its kind
    description: str                  # for the report header
    notes: tuple[str, ...] = ()


def _plan(args: argparse.Namespace, hw: Hardware | None = None) -> _Plan:
    """Which dataflow each layer is analysed with."""
    if getattr(args, "design", None) is not None:
        for option, value in (("--dataflow", args.dataflow), ("--gemm-dataflow", args.gemm_dataflow),
                              ("--mapping", args.mapping)):
            if value is not None:
                raise AccelgenError(f"{option} does not combine with --design, which carries its own dataflows",
                                    where=option)
        design = load_design(args.design)
        workload = workload_from_spec(args.model)
        num_pes = hw.num_pes if hw is not None else design.hardware.num_pes
        specs = tuple(design.dataflow_for(layer, num_pes) for layer in workload.model.layers)
        return _Plan(workload, specs, f"from {args.design}")
    if args.mapping is not None:
        for option, value in (("--dataflow", args.dataflow), ("--gemm-dataflow", args.gemm_dataflow)):
            if value is not None:
                raise AccelgenError(f"{option} does not combine with --mapping, whose layers carry their own "
                                    f"dataflows; to replace those, give --model FILE.m {option} ...")
        workload = workload_from_spec(args.mapping, "--mapping")
        if workload.layer_dataflows is None:
            raise AccelgenError("expected a MAESTRO .m mapping file", where=args.mapping)
        return _file_plan(workload)

    workload = workload_from_spec(args.model)
    conv = dataflow_from_spec(args.dataflow) if args.dataflow is not None else None
    gemm = dataflow_from_spec(args.gemm_dataflow, "--gemm-dataflow") if args.gemm_dataflow is not None else None
    if conv is None and gemm is None and workload.layer_dataflows is not None:
        return _file_plan(workload)
    if conv is not None and _kind(conv) == "gemm":
        if gemm is not None:
            raise AccelgenError(f"{_label(conv)!r} is a GEMM dataflow; with --gemm-dataflow given, "
                                "--dataflow takes a convolution dataflow", where="--dataflow")
        conv, gemm = None, conv            # a GEMM dataflow given as --dataflow: it is meant for GEMMs
    if gemm is not None and _kind(gemm) != "gemm":
        raise AccelgenError(f"{_label(gemm)!r} is a convolution dataflow; expected a GEMM dataflow (nmk, "
                            "or a file that maps M, N and K)", where="--gemm-dataflow")
    notes = []
    if workload.layer_dataflows is not None and any(workload.layer_dataflows):
        notes.append(f"the Dataflow blocks of {workload.source} are ignored (a dataflow option is given)")
    layers = workload.model.layers
    has_gemm = any(isinstance(layer, GEMM) for layer in layers)
    has_conv = any(not isinstance(layer, GEMM) for layer in layers)
    for spec, present, what in ((conv, has_conv, "convolution"), (gemm, has_gemm, "GEMM")):
        if spec is not None and not present:
            notes.append(f"dataflow {_label(spec)!r} is unused: {workload.model.name} has no {what} layers")
    parts = []
    if has_conv:
        parts.append(f"conv: {_label(conv)}" if conv is not None else "conv: kcp (library default)")
    if has_gemm:
        parts.append(f"GEMM: {_label(gemm)}" if gemm is not None else "GEMM: nmk (library default)")
    specs = tuple(gemm if isinstance(layer, GEMM) else conv for layer in layers)
    return _Plan(workload, specs, "; ".join(parts), tuple(notes))


def _file_plan(workload: Workload) -> _Plan:
    """Each layer with its own Dataflow block from the ``.m`` file, else the library default."""
    assert workload.layer_dataflows is not None
    stem = Path(workload.source).name
    specs: list[DataflowSpec] = []
    previous: tuple[str | None, Dataflow | None] = (None, None)
    for layer, text in zip(workload.model.layers, workload.layer_dataflows):
        if text is None:
            specs.append(None)
        elif text == previous[0]:  # MAESTRO's rule: a layer without a block reuses the one before
            specs.append(previous[1])
        else:
            dataflow = parse_dataflow(text, name=f"{stem}:{layer.name}")
            previous = (text, dataflow)
            specs.append(dataflow)
    missing = sum(spec is None for spec in specs)
    description = f"from {workload.source}"
    if missing:
        description += f" (library default for {missing} layer{'s' if missing > 1 else ''} without one)"
    return _Plan(workload, tuple(specs), description)


# --- output ---------------------------------------------------------------------------------------

def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("output")
    group.add_argument("--format", default="table", choices=FORMATS, help="output format (default: table)")
    group.add_argument("--out", metavar="FILE", help="write to FILE (atomically) instead of stdout")


def _stdout_console() -> Console:
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


def write_atomically(path: str, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it into place."""
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise AccelgenError(f"cannot write ({exc.strerror or exc})", where=path) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise AccelgenError(f"cannot write ({exc.strerror or exc})", where=path) from None
        raise


def _emit(args: argparse.Namespace, render: Callable[[Console], None] | str) -> None:
    """Text (or a rich rendering) to ``--out`` or stdout."""
    if args.out is None:
        if isinstance(render, str):
            sys.stdout.write(render)
        else:
            render(_stdout_console())
        sys.stdout.flush()
        return
    if not isinstance(render, str):
        buffer = io.StringIO()
        render(Console(file=buffer, width=_env_int("COLUMNS") or 120, color_system=None, highlight=False,
                       emoji=False, force_terminal=False))
        render = buffer.getvalue()
    write_atomically(args.out, render)


def _note(message: str) -> None:
    print(f"{PROG}: note: {' '.join(message.split())}", file=sys.stderr)


# --- analyze --------------------------------------------------------------------------------------

def _analyze_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("workload and dataflow (give --mapping or --model)")
    source = group.add_mutually_exclusive_group(required=True)
    source.add_argument("--mapping", metavar="FILE.m",
                        help="a MAESTRO mapping file: each layer with its own Dataflow block "
                             "(a layer without one takes the library default)")
    source.add_argument("--model", metavar="NAME|FILE",
                        help=f"a built-in model ({', '.join(ZOO)}), a workload .yaml, an .onnx model or a "
                             "MAESTRO .m file (whose Dataflow blocks are used only when no dataflow option is "
                             "given)")
    group.add_argument("--dataflow", metavar="NAME|FILE",
                       help=f"dataflow of the convolutions: {', '.join(LIBRARY)}, or a .yaml or .m file "
                            "(default: kcp; a GEMM dataflow here applies to the GEMMs)")
    group.add_argument("--gemm-dataflow", metavar="NAME|FILE",
                       help="dataflow of the GEMM layers: nmk or a file (default: nmk)")
    group.add_argument("--design", metavar="FILE.yaml",
                       help="a design point written by 'accelgen explore' (points/*.yaml): its hardware and "
                            "dataflows (instead of --hw and --dataflow)")
    add_hardware_arguments(parser)
    add_output_arguments(parser)


def _run_analyze(args: argparse.Namespace) -> int:
    hw, overrides = hardware_from_args(args)
    plan = _plan(args, hw)
    for message in plan.notes:
        _note(message)
    result = analyze_model(plan.workload.model, hw, per_layer=plan.specs, preset=args.preset)
    imported = plan.workload.import_report
    if args.format == "json":
        _emit(args, result_json(result, imported.to_dict() if imported else None))
    elif args.format == "csv":
        _emit(args, result_csv(result))
    else:
        context = ReportContext(hw, plan.workload.source, overrides, plan.description,
                                _import_lines(imported) if imported else ())
        _emit(args, lambda console: print_table(result, context, console))
    if imported and (args.format == "csv" or args.out is not None):  # else already on the terminal
        for line in _import_lines(imported):
            _note(f"{plan.workload.source}: {line}")
    bad = [r for r in result.layers if not r.feasible]
    if bad:
        _note(f"{len(bad)} layer(s) do not fit: {infeasible_summary(bad)}")
    return 0


def _import_lines(report: ImportReport) -> tuple[str, ...]:
    """What an ONNX import left out, then how it mapped odd cases: one line each."""
    return (report.summary(), *report.notes)


# --- list -----------------------------------------------------------------------------------------

def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument_group("output").add_argument("--out", metavar="FILE",
                                                     help="write to FILE instead of stdout")


def _print_catalogue(console: Console) -> None:
    def table(title: str, *columns: str) -> Table:
        t = Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD,
                  pad_edge=False, show_edge=False, header_style="bold")
        for column in columns:
            t.add_column(column, justify="right" if column in ("layers", "MACs", "PEs", "lanes") else "left")
        return t

    models = table("Built-in models (--model NAME)", "name", "layers", "MACs", "layer kinds")
    for name, factory in ZOO.items():
        model = factory()
        kinds: dict[str, int] = {}
        for layer in model.layers:
            kind = "gemm" if isinstance(layer, GEMM) else "depthwise conv" if layer.depthwise else "conv"
            kinds[kind] = kinds.get(kind, 0) + 1
        models.add_row(name, str(len(model.layers)), f"{model.macs:,}",
                       ", ".join(f"{count} {kind}" for kind, count in kinds.items()))
    dataflows = table("Library dataflows (--dataflow NAME)", "name", "for", "description", "filled in")
    for name, kind, title, params in describe_library():
        dataflows.add_row(name, kind, title, params)
    hardware = table("Built-in hardware (--hw NAME)", "name", "PEs", "lanes", "L1/PE", "L2", "NoC", "clock")
    for name in BUILTIN_HARDWARE:
        hw = builtin_hardware(name)
        bandwidths = " / ".join("inf" if math.isinf(level.bandwidth_words_per_cycle)
                                else f"{level.bandwidth_words_per_cycle:g}" for level in hw.noc)
        latencies = " / ".join(str(level.latency_cycles) for level in hw.noc)
        noc = f"{bandwidths} words/cycle, latency {latencies}"
        hardware.add_row(name, f"{hw.num_pes:,}", str(hw.simd_lanes), humanize_bytes(hw.l1_bytes_per_pe),
                         humanize_bytes(hw.l2_bytes), noc, f"{hw.clock_mhz:g} MHz")
    presets = table("Timing presets (--preset NAME)", "name", "description")
    for name in PRESETS:
        presets.add_row(name, PRESET_NOTES.get(name, ""))
    for index, t in enumerate((models, dataflows, hardware, presets)):
        if index:
            console.print()
        console.print(t)


def _run_list(args: argparse.Namespace) -> int:
    _emit(args, _print_catalogue)
    return 0


def _emit_arguments(parser: argparse.ArgumentParser) -> None:
    from .cli_hwgen import emit_arguments
    emit_arguments(parser)


def _run_emit(args: argparse.Namespace) -> int:
    from .cli_hwgen import run_emit
    return run_emit(args)


def _verify_arguments(parser: argparse.ArgumentParser) -> None:
    from .cli_hwgen import verify_arguments
    verify_arguments(parser)


def _run_verify(args: argparse.Namespace) -> int:
    from .cli_hwgen import run_verify
    return run_verify(args)

# --- explore (costmodel/cli_explore.py) and emit / verify (costmodel/cli_hwgen.py) ---------------

def _explore_arguments(parser: argparse.ArgumentParser) -> None:
    from .cli_explore import explore_arguments
    explore_arguments(parser)


def _run_explore(args: argparse.Namespace) -> int:
    from .cli_explore import run_explore
    return run_explore(args)


# --- the command line -----------------------------------------------------------------------------

@dataclass(frozen=True)
class _Command:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


_COMMANDS: tuple[_Command, ...] = (
    _Command("analyze", "analyse a model layer by layer on one hardware and dataflow",
             _analyze_arguments, _run_analyze),
    _Command("explore", "search a design space for the Pareto-optimal accelerators of a model",
             _explore_arguments, _run_explore),
    _Command("list", "list the built-in models, dataflows, hardware and presets", _list_arguments, _run_list),
    _Command("emit", "generate the accelerator's Verilog, file list and manifest", _emit_arguments, _run_emit),
    _Command("verify", "run a layer on the generated RTL in a simulator: cycles and numerics",
             _verify_arguments, _run_verify),
)



def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="accelgen: analytical cost model of DNN accelerators.")
    commands = parser.add_subparsers(title="commands", dest="command", required=True, metavar="COMMAND")
    for command in _COMMANDS:
        sub = commands.add_parser(command.name, help=command.help, description=command.help)
        command.add_arguments(sub)
        sub.set_defaults(run=command.run)
    return parser


def _error(message: str) -> None:
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        _error("interrupted")
    except BrokenPipeError:  # e.g. `accelgen analyze ... | head`: the reader left; say nothing
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
    except AccelgenError as exc:
        _error(str(exc))
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        _error(f"{where}{exc.strerror or exc}")
    return 1


if __name__ == "__main__":
    sys.exit(main())

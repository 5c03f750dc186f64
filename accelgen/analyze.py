"""``accelgen analyze`` (a model layer by layer on one hardware and dataflow) and ``accelgen list``
(the built-in models, dataflows, hardware and presets)."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from costmodel.analysis import PRESETS, analyze_model
from costmodel.base import AccelgenError
from costmodel.dataflow import LIBRARY, Dataflow, parse_dataflow
from costmodel.dataflow.library import describe_library
from costmodel.dataflow.spec import DataflowSpec, dataflow_from_spec, dataflow_kind, dataflow_label
from costmodel.design import load_design
from costmodel.hardware import BUILTIN_HARDWARE, Hardware, builtin_hardware
from costmodel.workload import GEMM, ZOO, ImportReport, Workload, workload_from_spec

from .options import (
    add_hardware_arguments,
    add_input_shape_argument,
    add_output_arguments,
    emit_output,
    hardware_from_args,
    input_shapes,
    note,
)
from .report import ReportContext, humanize_bytes, infeasible_summary, print_table, result_csv, result_json

__all__ = ["analyze_arguments", "run_analyze", "list_arguments", "run_list", "PRESET_NOTES"]

PRESET_NOTES = {"maestro": "MAESTRO's timing assumptions; reproduces its published figures",
                "hwgen": "the generated RTL's exact timing (docs/timing.md); equals simulation to the cycle"}


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
        workload = workload_from_spec(args.model, input_shapes=input_shapes(args))
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

    workload = workload_from_spec(args.model, input_shapes=input_shapes(args))
    conv = dataflow_from_spec(args.dataflow) if args.dataflow is not None else None
    gemm = dataflow_from_spec(args.gemm_dataflow, "--gemm-dataflow") if args.gemm_dataflow is not None else None
    if conv is None and gemm is None and workload.layer_dataflows is not None:
        return _file_plan(workload)
    if conv is not None and dataflow_kind(conv) == "gemm":
        if gemm is not None:
            raise AccelgenError(f"{dataflow_label(conv)!r} is a GEMM dataflow; with --gemm-dataflow given, "
                                "--dataflow takes a convolution dataflow", where="--dataflow")
        conv, gemm = None, conv            # a GEMM dataflow given as --dataflow: it is meant for GEMMs
    if gemm is not None and dataflow_kind(gemm) != "gemm":
        raise AccelgenError(f"{dataflow_label(gemm)!r} is a convolution dataflow; expected a GEMM dataflow (nmk, "
                            "or a file that maps M, N and K)", where="--gemm-dataflow")
    notes = []
    if workload.layer_dataflows is not None and any(workload.layer_dataflows):
        notes.append(f"the Dataflow blocks of {workload.source} are ignored (a dataflow option is given)")
    layers = workload.model.layers
    has_gemm = any(isinstance(layer, GEMM) for layer in layers)
    has_conv = any(not isinstance(layer, GEMM) for layer in layers)
    for spec, present, what in ((conv, has_conv, "convolution"), (gemm, has_gemm, "GEMM")):
        if spec is not None and not present:
            notes.append(f"dataflow {dataflow_label(spec)!r} is unused: {workload.model.name} has no {what} layers")
    parts = []
    if has_conv:
        parts.append(f"conv: {dataflow_label(conv)}" if conv is not None else "conv: kcp (library default)")
    if has_gemm:
        parts.append(f"GEMM: {dataflow_label(gemm)}" if gemm is not None else "GEMM: nmk (library default)")
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


# --- analyze --------------------------------------------------------------------------------------

def analyze_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("workload and dataflow (give --mapping or --model)")
    source = group.add_mutually_exclusive_group(required=True)
    source.add_argument("--mapping", metavar="FILE.m",
                        help="a MAESTRO mapping file: each layer with its own Dataflow block "
                             "(a layer without one takes the library default)")
    source.add_argument("--model", metavar="NAME|FILE",
                        help=f"a built-in model ({', '.join(ZOO)}), a workload .yaml, an .onnx model or a "
                             "MAESTRO .m file (whose Dataflow blocks are used only when no dataflow option is "
                             "given)")
    add_input_shape_argument(group)
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


def run_analyze(args: argparse.Namespace) -> int:
    hw, overrides = hardware_from_args(args)
    plan = _plan(args, hw)
    for message in plan.notes:
        note(message)
    result = analyze_model(plan.workload.model, hw, per_layer=plan.specs, preset=args.preset)
    imported = plan.workload.import_report
    if args.format == "json":
        emit_output(args, result_json(result, imported.to_dict() if imported else None))
    elif args.format == "csv":
        emit_output(args, result_csv(result))
    else:
        context = ReportContext(hw, plan.workload.source, overrides, plan.description,
                                _import_lines(imported) if imported else ())
        emit_output(args, lambda console: print_table(result, context, console))
    if imported and (args.format == "csv" or args.out is not None):  # else already on the terminal
        for line in _import_lines(imported):
            note(f"{plan.workload.source}: {line}")
    bad = [r for r in result.layers if not r.feasible]
    if bad:
        note(f"{len(bad)} layer(s) do not fit: {infeasible_summary(bad)}")
    return 0


def _import_lines(report: ImportReport) -> tuple[str, ...]:
    """What an ONNX import left out, then how it mapped odd cases: one line each."""
    return (report.summary(), *report.notes)


# --- list -----------------------------------------------------------------------------------------

def list_arguments(parser: argparse.ArgumentParser) -> None:
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


def run_list(args: argparse.Namespace) -> int:
    emit_output(args, _print_catalogue)
    return 0

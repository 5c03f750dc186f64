"""The analysis: one layer (or a whole model) x a dataflow x a hardware description -> cycles,
traffic, buffer needs, NoC bandwidth, reuse, energy and area, and whether the design fits.

Runtimes come from a timing *preset*.  ``maestro`` follows MAESTRO's assumptions (free multicast
and spatial reduction, double-buffered ``max(ingress, compute, egress)`` steps, each sub-cluster
problem's first fill not overlapped, NoC delay ``hops*latency + ceil(words/bandwidth) - 1``) and
reproduces MAESTRO's published figures; see ``docs/costmodel.md``.  The ``hwgen`` preset, the
exact timing of the generated RTL, arrives with the RTL generator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence

from .base import AccelgenError
from .dataflow.directives import Dataflow
from .dataflow.spec import DataflowSpec, resolve_dataflow
from .hardware.hardware import Hardware, hardware_to_dict
from .hwgen_preset.preset import analyze_hwgen
from .maestro.engine import MaestroAnalysis, MaestroStructure, maestro_structure, timed_analysis
from .maestro.timing import CompiledLayer, Timing
from .results import TENSORS as _TENSORS
from .results import LayerResult, ModelResult, model_totals
from .workload.layers import GEMM, Layer, Model
from .workload.problem import Problem, problems_of

__all__ = ["Preset", "PRESETS", "LayerResult", "ModelResult", "LayerStructure", "PartStructure", "analyze_layer",
           "analyze_model", "layer_structure", "layer_result", "model_totals", "resolve_dataflow",
           "check_preset"]

Preset = Literal["maestro", "hwgen"]
PRESETS: tuple[str, ...] = ("maestro", "hwgen")


def check_preset(preset: str) -> None:
    if preset not in PRESETS:
        raise AccelgenError(f"unknown preset {preset!r}; expected one of {', '.join(PRESETS)}",
                            where="--preset")


@dataclass(frozen=True)
class PartStructure:
    """One analysed problem of a layer under the filled-in dataflow: the step model's case tables."""

    problem: Problem
    resolved: Dataflow                     # the filled-in directives analysed
    engine: MaestroStructure
    compiled: CompiledLayer

    @property
    def repeat(self) -> int:
        return self.problem.repeat


@dataclass(frozen=True)
class LayerStructure:
    """Everything about one layer under one filled-in dataflow that does not depend on the
    hardware's numbers — only on its PE count and its multicast / spatial-reduction support:
    the step model's case tables and the traffic and buffer counts (words).  The design-space
    search computes one per distinct (layer, dataflow, PEs) and evaluates it for many hardware
    points; :func:`layer_result` turns it into a :class:`LayerResult` for one.

    A layer is one analysed problem but for a dilated convolution whose interleaved phases differ
    in length (:func:`~costmodel.workload.problem.problems_of`): its ``parts`` run one after
    another, so their cycles and traffic add and each tensor's buffers hold the largest part's tiles."""

    layer: Layer
    dataflow: Dataflow                     # as given (library name resolved)
    parts: tuple[PartStructure, ...]
    num_pes: int
    l1_reads: dict[str, int]               # scaled by the problems' repeat counts
    l1_writes: dict[str, int]
    l2_reads: dict[str, int]
    l2_writes: dict[str, int]
    l1_words: dict[str, int]               # per PE, double-buffered (of each tensor, the largest part's)
    l2_words: dict[str, int]
    noc_words: int                         # words across the top level's NoC, every repeat

    @property
    def problem(self) -> Problem:
        return self.parts[0].problem

    @property
    def resolved(self) -> Dataflow:
        return self.parts[0].resolved


def layer_structure(layer: Layer, dataflow: DataflowSpec, num_pes: int, *, multicast: bool = True,
                    spatial_reduction: bool = True) -> LayerStructure:
    """The hardware-number-free half of :func:`analyze_layer`.  Raises :class:`AccelgenError`
    for a dataflow that does not apply to the layer or the PE count."""
    df = resolve_dataflow(dataflow, layer, num_pes)
    batch_dim = "B" if isinstance(layer, GEMM) else "N"
    parts, tops, inners = [], [], []
    for problem in problems_of(layer, with_batch=batch_dim in df.dims()):
        resolved = df.resolve(problem.dims, kind=problem.kind, allowed=problem.allowed_dims)
        engine = maestro_structure(problem, resolved, num_pes=num_pes, multicast=multicast,
                                   spatial_reduction=spatial_reduction)
        parts.append(PartStructure(problem, resolved, engine, engine.compiled()))
        tops.append((engine.top.stats, problem.repeat))
        inners.append(engine.innermost.stats)

    def scaled(field: str) -> dict[str, int]:
        return {t: sum(getattr(top, field).get(t, 0) * rep for top, rep in tops) for t in _TENSORS}

    def largest(stats: list[Any], field: str) -> dict[str, int]:
        return {t: max(getattr(s, field).get(t, 0) for s in stats) for t in _TENSORS}

    return LayerStructure(
        layer, df, tuple(parts), num_pes,
        scaled("l1_reads"), scaled("l1_writes"), scaled("l2_reads"), scaled("l2_writes"),
        largest(inners, "l1_size_words"), largest([top for top, _ in tops], "l2_size_words"),
        sum((sum(top.l2_reads.get(t, 0) for t in ("input", "weight")) + top.l2_writes.get("output", 0)) * rep
            for top, rep in tops))


def analyze_layer(layer: Layer, dataflow: DataflowSpec, hw: Hardware, preset: str = "maestro") -> LayerResult:
    """Analyse one layer.  Raises :class:`AccelgenError` for a dataflow that does not apply to
    the layer or the hardware (unknown dimension, clusters larger than the array)."""
    check_preset(preset)
    if preset == "hwgen":
        return analyze_hwgen(layer, resolve_dataflow(dataflow, layer, hw), hw)
    structure = layer_structure(layer, dataflow, hw.num_pes, multicast=hw.multicast,
                                spatial_reduction=hw.spatial_reduction)
    return layer_result(structure, hw, preset)


def hardware_timing(hw: Hardware) -> Timing:
    return Timing.single(hw.simd_lanes, [(lvl.bandwidth_words_per_cycle, lvl.latency_cycles, lvl.hops)
                                         for lvl in hw.noc])


def buffer_bytes(structure: LayerStructure, hw: Hardware) -> tuple[int, int]:
    """L1 bytes per PE and L2 bytes the layer needs at the hardware's data widths."""
    bits = {t: hw.bits(t) for t in _TENSORS}   # type: ignore[arg-type]
    l1_bytes = sum(-(-structure.l1_words[t] * bits[t] // 8) for t in _TENSORS)
    l2_bytes = sum(-(-structure.l2_words[t] * bits[t] // 8) for t in _TENSORS)
    return l1_bytes, l2_bytes


def energy_terms(structure: LayerStructure, hw: Hardware) -> tuple[dict[str, float], float]:
    """The energy components (pJ) but the NoC's, and the NoC's per hop of the top level: the
    NoC term is ``noc_words * repeat * hops * per_word`` (kept apart: the search varies hops)."""
    bits = {t: hw.bits(t) for t in _TENSORS}   # type: ignore[arg-type]
    per_word = hw.energy.per_word_pj
    l1r, l1w, l2r, l2w = structure.l1_reads, structure.l1_writes, structure.l2_reads, structure.l2_writes
    terms = {
        "mac": structure.layer.macs * hw.energy.mac_pj,
        "l1": sum(l1r[t] * per_word("l1_read_pj", bits[t]) + l1w[t] * per_word("l1_write_pj", bits[t])
                  for t in _TENSORS),
        "l2": sum(l2r[t] * per_word("l2_read_pj", bits[t]) + l2w[t] * per_word("l2_write_pj", bits[t])
                  for t in _TENSORS),
        "dram": (l2w["input"] * per_word("dram_pj_per_word", bits["input"])
                 + l2w["weight"] * per_word("dram_pj_per_word", bits["weight"])
                 + l2r["output"] * per_word("dram_pj_per_word", bits["output"])),
    }
    return terms, per_word("noc_pj_per_word_hop", hw.input_bits)


def layer_result(structure: LayerStructure, hw: Hardware, preset: str = "maestro",
                 runs: Sequence[MaestroAnalysis] | None = None) -> LayerResult:
    """Every figure of the layer on ``hw`` (whose PE count and flags the structure was built
    for); ``runs``: the timed analysis of each part, if already computed."""
    if runs is None:
        runs = [timed_analysis(p.engine, p.compiled, hardware_timing(hw)) for p in structure.parts]
    layer, problem = structure.layer, structure.problem
    reps = [p.repeat for p in structure.parts]
    tops = [run.top for run in runs]
    macs = layer.macs
    cycles = [top.runtime_cycles * rep for top, rep in zip(tops, reps)]
    runtime = sum(cycles)
    if min(cycles) <= 0:
        raise AccelgenError(f"the dataflow maps no work onto the array (runtime {min(cycles)})",
                            where=f"layer {layer.name!r}")
    l1r, l1w, l2r, l2w = structure.l1_reads, structure.l1_writes, structure.l2_reads, structure.l2_writes
    # Off-chip: every input and weight word enters L2 once, every output word leaves once.
    dram_reads = l2w["input"] + l2w["weight"]
    dram_writes = l2r["output"]
    l1_bytes, l2_bytes = buffer_bytes(structure, hw)
    terms, noc_per_word_hop = energy_terms(structure, hw)
    energy = {"mac": terms["mac"], "l1": terms["l1"], "l2": terms["l2"],
              "noc": structure.noc_words * hw.noc_at(0).hops * noc_per_word_hop, "dram": terms["dram"]}
    energy["total"] = sum(energy.values())

    bound = _bound(tops, reps)
    if bound == "compute" and runs[0].innermost is not runs[0].top:
        # The top level waits on its clusters: what do they wait on?
        bound = _bound([run.innermost for run in runs], reps)
    offchip = (dram_reads + dram_writes) / runtime

    reasons = []
    if l1_bytes > hw.l1_bytes_per_pe:
        reasons.append(f"L1 needs {l1_bytes} B per PE, the hardware has {hw.l1_bytes_per_pe} B")
    if l2_bytes > hw.l2_bytes:
        reasons.append(f"L2 needs {l2_bytes} B, the hardware has {hw.l2_bytes} B")
    if offchip > hw.offchip_bw_words_per_cycle:
        reasons.append(f"off-chip traffic needs {offchip:.6g} words/cycle on average, the hardware "
                       f"has {hw.offchip_bw_words_per_cycle:g}")

    def ratio(a: int, b: int) -> float:
        return a / b if b else 0.0

    df, resolved = structure.dataflow, structure.resolved
    return LayerResult(
        layer=layer.name, layer_type=problem.layer_type, shape=layer.describe(), preset=preset,
        dataflow_name=df.name, dataflow=str(resolved), num_pes=hw.num_pes, used_pes=max(r.used_pes for r in runs),
        macs=macs, step_macs=sum(top.macs * rep for top, rep in zip(tops, reps)), runtime_cycles=runtime,
        runtime_us=runtime / hw.clock_mhz,
        throughput_macs_per_cycle=macs / runtime,
        utilization=macs / (hw.num_pes * hw.simd_lanes * runtime),
        avg_active_pes=_over_time([top.active_units_avg for top in tops], cycles), bound=bound,
        l1_reads=dict(l1r), l1_writes=dict(l1w), l2_reads=dict(l2r), l2_writes=dict(l2w),
        dram_reads=dram_reads, dram_writes=dram_writes,
        l1_words_per_pe=dict(structure.l1_words), l2_words=dict(structure.l2_words),
        l1_bytes_per_pe=l1_bytes, l2_bytes=l2_bytes,
        noc_bw_peak_words_per_cycle=float(max(top.noc_peak_words_per_cycle for top in tops)),
        noc_bw_avg_words_per_cycle=_over_time([top.noc_avg_words_per_cycle for top in tops], cycles),
        offchip_bw_avg_words_per_cycle=offchip,
        reuse_factor={t: ratio(l1r[t], l1w[t]) for t in _TENSORS},
        multicast_factor={t: ratio(sum(top.l1_fills.get(t, 0) * rep for top, rep in zip(tops, reps)),
                                   sum(top.l2_reads.get(t, 0) * rep for top, rep in zip(tops, reps)))
                          for t in ("input", "weight")},
        energy_pj=energy, area_mm2=hw.area_mm2(),
        feasible=not reasons, infeasible_reasons=tuple(reasons),
    )


def _bound(stats: Sequence[Any], reps: Sequence[int]) -> str:
    """What most steps of the parts' runs wait on."""
    steps = {"compute": 0, "noc-ingress": 0, "noc-egress": 0}
    for s, rep in zip(stats, reps):
        for key, count in (("compute", s.compute_bound_steps), ("noc-ingress", s.ingress_bound_steps),
                           ("noc-egress", s.egress_bound_steps)):
            steps[key] += count * rep
    return max(steps, key=lambda k: (steps[k], k == "compute"))


def _over_time(values: Sequence[float], cycles: Sequence[int]) -> float:
    """A per-cycle average over parts run one after another (one part: its own, unchanged)."""
    if len(values) == 1:
        return values[0]
    return sum(v * c for v, c in zip(values, cycles)) / sum(cycles)


def analyze_model(model: Model, hw: Hardware, *, dataflow: DataflowSpec = None,
                  gemm_dataflow: DataflowSpec = None, per_layer: Sequence[DataflowSpec] | None = None,
                  preset: str = "maestro", progress: Any = None) -> ModelResult:
    """Analyse every layer.  ``dataflow`` applies to convolutions, ``gemm_dataflow`` to GEMMs;
    a layer whose kind has none given takes the library default (``kcp`` / ``nmk``).
    ``per_layer`` gives each layer its own instead (a MAESTRO mapping file)."""
    if per_layer is None:
        per_layer = [gemm_dataflow if isinstance(layer, GEMM) else dataflow for layer in model.layers]
    results = []
    for layer, spec in zip(model.layers, per_layer, strict=True):
        try:
            results.append(analyze_layer(layer, spec, hw, preset))
        except AccelgenError as err:
            if str(err).startswith("layer "):
                raise
            raise AccelgenError(str(err), where=f"layer {layer.name!r}") from None
        if progress is not None:
            progress()
    return ModelResult(model.name, hw.name, preset, tuple(results), model_totals(results, hw),
                       hardware_to_dict(hw))

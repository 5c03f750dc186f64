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
from functools import cached_property, lru_cache
from typing import Any, Literal, Sequence

from .base import AccelgenError
from .dataflow.directives import Dataflow
from .dataflow.spec import DataflowSpec, resolve_dataflow
from .hardware.hardware import Hardware, hardware_to_dict
from .hardware.tables import EnergyTable
from .hwgen_preset.preset import analyze_hwgen
from .maestro.engine import MaestroAnalysis, MaestroStructure, maestro_structure, timed_analysis
from .maestro.timing import CompiledLayer
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

    @property
    def repeat(self) -> int:
        return self.problem.repeat

    @cached_property
    def compiled(self) -> CompiledLayer:
        """The case tables ready for arrays of hardware points (the design-space search), built on
        first use: one hardware's analysis times the tables directly (:func:`timed_analysis`)."""
        return self.engine.compiled()


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
    parts = []
    l1r, l1w, l2r, l2w, l1_words, l2_words = ({t: 0 for t in _TENSORS} for _ in range(6))
    noc_words = 0
    for problem in problems_of(layer, with_batch=batch_dim in df.dims()):
        resolved = df.resolve(problem.dims, kind=problem.kind, allowed=problem.allowed_dims)
        engine = maestro_structure(problem, resolved, num_pes=num_pes, multicast=multicast,
                                   spatial_reduction=spatial_reduction)
        parts.append(PartStructure(problem, resolved, engine))
        top, inner, rep = engine.top.stats, engine.innermost.stats, problem.repeat
        for t in _TENSORS:
            l1r[t] += top.l1_reads.get(t, 0) * rep
            l1w[t] += top.l1_writes.get(t, 0) * rep
            l2r[t] += top.l2_reads.get(t, 0) * rep
            l2w[t] += top.l2_writes.get(t, 0) * rep
            l1_words[t] = max(l1_words[t], inner.l1_size_words.get(t, 0))
            l2_words[t] = max(l2_words[t], top.l2_size_words.get(t, 0))
        noc_words += (top.l2_reads.get("input", 0) + top.l2_reads.get("weight", 0)
                      + top.l2_writes.get("output", 0)) * rep
    return LayerStructure(layer, df, tuple(parts), num_pes, l1r, l1w, l2r, l2w, l1_words, l2_words, noc_words)


def analyze_layer(layer: Layer, dataflow: DataflowSpec, hw: Hardware, preset: str = "maestro") -> LayerResult:
    """Analyse one layer.  Raises :class:`AccelgenError` for a dataflow that does not apply to
    the layer or the hardware (unknown dimension, clusters larger than the array)."""
    check_preset(preset)
    if preset == "hwgen":
        return analyze_hwgen(layer, resolve_dataflow(dataflow, layer, hw), hw)
    structure = layer_structure(layer, dataflow, hw.num_pes, multicast=hw.multicast,
                                spatial_reduction=hw.spatial_reduction)
    return layer_result(structure, hw, preset)


def buffer_bytes(structure: LayerStructure, hw: Hardware) -> tuple[int, int]:
    """L1 bytes per PE and L2 bytes the layer needs at the hardware's data widths."""
    l1, l2 = structure.l1_words, structure.l2_words
    l1_bytes = l2_bytes = 0
    for t, bits in zip(_TENSORS, (hw.input_bits, hw.weight_bits, hw.psum_bits)):   # hw.bits(t)
        l1_bytes += -(-l1[t] * bits // 8)
        l2_bytes += -(-l2[t] * bits // 8)
    return l1_bytes, l2_bytes


@lru_cache(maxsize=64)
def _per_word_pj(energy: EnergyTable, bits: tuple[int, int, int]) -> tuple[dict[str, tuple[float, ...]], float]:
    """Per coefficient, the pJ of one word of each tensor (``bits``: their widths, in
    ``_TENSORS`` order), and the NoC's per word and hop: a function of the hardware's energy
    table and widths alone (a handful of them in a search), so computed once each."""
    table = {c: tuple(energy.per_word_pj(c, b) for b in bits)       # type: ignore[arg-type]
             for c in ("l1_read_pj", "l1_write_pj", "l2_read_pj", "l2_write_pj", "dram_pj_per_word")}
    return table, energy.per_word_pj("noc_pj_per_word_hop", bits[0])


def energy_terms(structure: LayerStructure, hw: Hardware) -> tuple[dict[str, float], float]:
    """The energy components (pJ) but the NoC's, and the NoC's per hop of the top level: the
    NoC term is ``noc_words * repeat * hops * per_word`` (kept apart: the search varies hops)."""
    pj, noc = _per_word_pj(hw.energy, (hw.input_bits, hw.weight_bits, hw.psum_bits))
    l1r, l1w, l2r, l2w = structure.l1_reads, structure.l1_writes, structure.l2_reads, structure.l2_writes
    terms = {
        "mac": structure.layer.macs * hw.energy.mac_pj,
        "l1": sum(l1r[t] * pj["l1_read_pj"][i] + l1w[t] * pj["l1_write_pj"][i] for i, t in enumerate(_TENSORS)),
        "l2": sum(l2r[t] * pj["l2_read_pj"][i] + l2w[t] * pj["l2_write_pj"][i] for i, t in enumerate(_TENSORS)),
        "dram": (l2w["input"] * pj["dram_pj_per_word"][0] + l2w["weight"] * pj["dram_pj_per_word"][1]
                 + l2r["output"] * pj["dram_pj_per_word"][2]),
    }
    return terms, noc


def layer_result(structure: LayerStructure, hw: Hardware, preset: str = "maestro",
                 runs: Sequence[MaestroAnalysis] | None = None) -> LayerResult:
    """Every figure of the layer on ``hw`` (whose PE count and flags the structure was built
    for); ``runs``: the timed analysis of each part, if already computed."""
    if runs is None:
        noc = [(lvl.bandwidth_words_per_cycle, lvl.latency_cycles, lvl.hops) for lvl in hw.noc]
        runs = [timed_analysis(p.engine, hw.simd_lanes, noc) for p in structure.parts]
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
              "noc": structure.noc_words * hw.noc[0].hops * noc_per_word_hop, "dram": terms["dram"]}
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

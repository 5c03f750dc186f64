"""The ``hwgen`` preset: the exact timing, traffic and buffers of the accelerator that
:mod:`hwgen` generates for a dataflow and a hardware description (``docs/timing.md``)."""

from __future__ import annotations

from typing import Iterator, NamedTuple, Sequence

from ..base import AccelgenError
from ..dataflow.directives import Dataflow
from ..hardware.hardware import Hardware
from ..results import TENSORS, LayerResult
from ..workload.layers import Conv2D, Layer
from ..workload.problem import problem_of
from .closed import closed_summary
from .rules import bounding_engine, l1_bytes, l2_layout_words, l1_words as tile_words
from .structure import HwStructure, LayerTiles, check_layer, structure_key, structure_of, tiles_of, with_slides

__all__ = ["TilesExceedL1", "hwgen_structure", "l1_candidates", "l2_split", "hwgen_layer", "check_generatable",
           "analyze_hwgen", "hwgen_figures", "HwgenFigures"]


def check_generatable(hw: Hardware) -> int:
    """The distribution bus width ``W`` the hardware asks for; refuse what hwgen cannot build."""
    bw = hw.noc_at(0).bandwidth_words_per_cycle
    where = f"hardware {hw.name!r}"
    if bw != int(bw) or int(bw) < 1 or int(bw) & (int(bw) - 1):
        raise AccelgenError(f"noc[0].bandwidth_words_per_cycle is {bw!r}; the generated NoC needs a power "
                            "of two words per cycle (1, 2, 4, ...)", where=where)
    if not (hw.multicast and hw.spatial_reduction):
        raise AccelgenError("the generated NoC always multicasts and reduces spatially; expected "
                            "multicast: true and spatial_reduction: true", where=where)
    if (hw.input_bits, hw.weight_bits, hw.psum_bits) != (8, 8, 32):
        raise AccelgenError("the generated PEs are int8 x int8 -> int32; expected data_widths 8/8/32",
                            where=where)
    return int(bw)


def l2_split(hw: Hardware) -> dict[str, int]:
    """Words of each L2 region: a quarter of the bytes for inputs, a quarter for weights (int8),
    half for int32 outputs."""
    return {"input": hw.l2_bytes // 4, "weight": hw.l2_bytes // 4, "output": hw.l2_bytes // 8}


def _generatable(layer: Layer) -> bool:
    try:
        check_layer(layer)
    except AccelgenError:
        return False
    return True


class TilesExceedL1(AccelgenError):
    """:func:`hwgen_structure`'s refusal of tiles whose own words exceed the PE's L1: it depends
    on the PE tiles alone, so every loop order of the same tiles is refused alike."""


def hwgen_structure(dataflow: Dataflow, layer: Layer, hw: Hardware, *,
                    fit: Sequence[Layer] = ()) -> HwStructure:
    """The generated design's structure: its buffers hold the largest filter and stride of
    ``layer`` and of the layers of ``fit`` (the design made to run those layers), and no more:
    every word of a PE's L1 costs registers and the lane aligner that fills it, so a design for
    1x1 or stride-1 layers is not sized for 3x3 filters or stride 2 (a layer beyond them is
    refused by name when its tiles are taken, :func:`tiles_of`).  The first of its
    :func:`l1_candidates` whose L1 the hardware holds."""
    candidates = l1_candidates(dataflow, layer, hw, fit=fit)
    first = s = next(candidates)
    # (the tiles' own words bound every candidate's L1 from below, whatever its banks' rows and
    # windows add: a mapping search draws mostly tiles too large for L1, refused here at once)
    bound = l1_bytes(tile_words(s.pe_tile_max, s.max_stride))
    if bound > hw.l1_bytes_per_pe:
        raise TilesExceedL1(f"the PE tiles need at least {bound} B of L1 (double-buffered), the hardware has "
                            f"{hw.l1_bytes_per_pe} B", where=f"hardware {hw.name!r}")
    while l1_bytes(s.l1_words()) > hw.l1_bytes_per_pe:
        s = next(candidates, None)
        if s is None:
            raise AccelgenError(f"the PE tiles need {l1_bytes(first.l1_words())} B of L1 (double-buffered), the "
                                f"hardware has {hw.l1_bytes_per_pe} B", where=f"hardware {hw.name!r}")
    return s


def l1_candidates(dataflow: Dataflow, layer: Layer, hw: Hardware, *,
                  fit: Sequence[Layer] = ()) -> Iterator[HwStructure]:
    """The distinct structures :func:`hwgen_structure` chooses from, best first, made as they
    are asked for: everything of the hardware but its L1 decides them, and its L1 which one is
    built.  A sliding input's rows, or channels, hold two windows: where they do not fit, it
    slides along fewer axes, X before Y, or none."""
    w = check_generatable(hw)
    # (each layer once: the caller's own layer is usually among fit; the others are refused per layer)
    convs = [l for l in {id(l): l for l in (layer, *fit)}.values() if isinstance(l, Conv2D) and _generatable(l)]
    max_filter = max([1] + [max(l.R, l.S) for l in convs])
    max_stride = max([1] + [max(problem_of(l).strides.values()) for l in convs])   # as laid out in L2
    s = structure_of(dataflow, layer, hw.num_pes, noc_words_per_cycle=w, max_filter=max_filter,
                     max_stride=max_stride, simd_lanes=hw.simd_lanes, drain_words=hw.pe_drain_words)
    yield s
    for x, y in dict.fromkeys(((s.slide_x, False), (False, s.slide_y), (False, False))):
        if (x, y) != (s.slide_x, s.slide_y):
            yield with_slides(s, x, y)


def hwgen_layer(dataflow: Dataflow, layer: Layer, hw: Hardware,
                structure: HwStructure | None = None) -> tuple[HwStructure, LayerTiles, dict]:
    """Structure, tiles and the figures of one run: cycles, engine totals and word traffic
    (timing does not depend on the filter and stride maxima the buffers are sized for).
    ``structure``: the design's structure if the caller has it (``hwgen_structure(dataflow,
    layer, hw, fit=[layer])``'s, as a search that shares it between points has)."""
    s = hwgen_structure(dataflow, layer, hw, fit=[layer]) if structure is None else structure
    t = tiles_of(s, dataflow, layer)
    return s, t, _summary(s, t)


_SUMMARIES: dict[tuple, dict] = {}
_MAX_SUMMARIES = 4096


def _summary(s: HwStructure, t: LayerTiles) -> dict:
    """The figures of (structure, tiles), computed once: a design-space search asks for the same
    ones for every point that differs only in what the schedule ignores (L2, off-chip, energy)."""
    key = (structure_key(s), tuple(sorted(t.dims.items())), t.stride_y, t.stride_x, t.in_rows, t.in_cols,
           tuple(sorted(t.t0.items())), tuple(sorted(t.t1.items())), t.repeat)
    out = _SUMMARIES.get(key)
    if out is None:
        if len(_SUMMARIES) >= _MAX_SUMMARIES:
            _SUMMARIES.clear()
        out = _SUMMARIES[key] = closed_summary(s, t)
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in out.items()}


class HwgenFigures(NamedTuple):
    """What a design-space search needs of one layer (:func:`hwgen_figures`): the figures
    :func:`analyze_hwgen` reports, without the rest of its :class:`LayerResult`."""

    s: HwStructure
    t: LayerTiles
    f: dict                       # :func:`hwgen_layer`'s figures of one run
    sizes: dict[str, int]         # words of each L2 region
    traffic: tuple                # L1 reads, L1 writes, L2 reads, L2 writes: per tensor, all runs
    energy: dict[str, float]      # pJ per component and ``total``

    @property
    def runtime_cycles(self) -> int:
        return self.f["cycles"] * self.t.repeat


def hwgen_figures(layer: Layer, df: Dataflow, hw: Hardware, structure: HwStructure | None = None) -> HwgenFigures:
    """Cycles of all runs, word traffic and energy of ``layer`` on the generated accelerator:
    what :func:`analyze_hwgen` reports them from (a search reads these alone)."""
    s, t, f = hwgen_layer(df, layer, hw, structure)
    rep = t.repeat

    def scaled(d: dict[str, int]) -> dict[str, int]:
        return {k: d.get(k, 0) * rep for k in TENSORS}

    l1r, l1w, l2r = scaled(f["l1_reads"]), scaled(f["l1_writes"]), scaled(f["l2_reads"])
    sizes = l2_layout_words(s, t)
    l2w = {"input": sizes["input"] * rep, "weight": sizes["weight"] * rep, "output": f["l2_writes"]["output"] * rep}
    per_word = _per_word(hw)
    noc_words = l2r["input"] + l2r["weight"] + l2w["output"]
    energy = {
        "mac": layer.macs * hw.energy.mac_pj,
        "l1": sum(l1r[k] * per_word[k, "l1_read_pj"] + l1w[k] * per_word[k, "l1_write_pj"] for k in TENSORS),
        "l2": sum(l2r[k] * per_word[k, "l2_read_pj"] + l2w[k] * per_word[k, "l2_write_pj"] for k in TENSORS),
        "noc": noc_words * hw.noc_at(0).hops * per_word["noc"],
        "dram": sum(l2w[k] * per_word[k, "dram_pj_per_word"] for k in ("input", "weight"))
        + sizes["output"] * rep * per_word["output", "dram_pj_per_word"],
    }
    energy["total"] = sum(energy.values())
    return HwgenFigures(s, t, f, sizes, (l1r, l1w, l2r, l2w), energy)


def _per_word(hw: Hardware) -> dict:
    """``hw.energy.per_word_pj`` of every (tensor, coefficient) the preset reads, and the NoC's
    per word and hop."""
    e = hw.energy
    table: dict = {(k, c): e.per_word_pj(c, hw.bits(k))      # type: ignore[arg-type]
                   for k in TENSORS for c in ("l1_read_pj", "l1_write_pj", "l2_read_pj", "l2_write_pj",
                                              "dram_pj_per_word")}
    table["noc"] = e.per_word_pj("noc_pj_per_word_hop", hw.input_bits)
    return table


def analyze_hwgen(layer: Layer, df: Dataflow, hw: Hardware, structure: HwStructure | None = None) -> LayerResult:
    """The generated accelerator's own figures (``docs/timing.md``): exact cycles of one run times
    the runs (groups, batch), its word traffic, its buffers (``structure``: :func:`hwgen_layer`'s)."""
    s, t, f, sizes, (l1r, l1w, l2r, l2w), energy = hwgen_figures(layer, df, hw, structure)
    rep = t.repeat
    runtime = f["cycles"] * rep
    macs = layer.macs
    bits = {k: hw.bits(k) for k in TENSORS}   # type: ignore[arg-type]
    l1_words = {k: 2 * v for k, v in s.l1_words().items()}
    l2_bytes = sum(-(-sizes[k] * bits[k] // 8) for k in TENSORS)
    split = l2_split(hw)
    reasons = [f"{k} needs {sizes[k]} L2 words, the generated L2 region holds {split[k]}"
               for k in TENSORS if sizes[k] > split[k]]
    noc_words = l2r["input"] + l2r["weight"] + l2w["output"]
    slots = f["bound_cycles"]
    bound = {"load": "noc-ingress", "compute": "compute", "drain": "noc-egress"}[bounding_engine(slots)]
    offchip = (sum(sizes.values()) * rep) / runtime
    ratio = (lambda a, b: a / b if b else 0.0)
    return LayerResult(
        layer=layer.name, layer_type=layer.layer_type, shape=layer.describe(), preset="hwgen",
        dataflow_name=df.name, dataflow=str(df), num_pes=hw.num_pes, used_pes=s.used_pes,
        macs=macs, step_macs=f["step_macs"] * rep, runtime_cycles=runtime, runtime_us=runtime / hw.clock_mhz,
        throughput_macs_per_cycle=macs / runtime, utilization=macs / (hw.num_pes * hw.simd_lanes * runtime),
        avg_active_pes=f["step_macs"] / max(1, f["compute_cycles"]), bound=bound,
        l1_reads=l1r, l1_writes=l1w, l2_reads=l2r, l2_writes=l2w,
        dram_reads=l2w["input"] + l2w["weight"], dram_writes=sizes["output"] * rep,
        l1_words_per_pe=l1_words, l2_words=sizes, l1_bytes_per_pe=l1_bytes(s.l1_words()), l2_bytes=l2_bytes,
        noc_bw_peak_words_per_cycle=float(s.noc_words_per_cycle),
        noc_bw_avg_words_per_cycle=noc_words / runtime, offchip_bw_avg_words_per_cycle=offchip,
        reuse_factor={k: ratio(l1r[k], l1w[k]) for k in TENSORS},
        multicast_factor={k: ratio(l1w[k], l2r[k]) for k in ("input", "weight")},
        energy_pj=energy, area_mm2=hw.area_mm2(), feasible=not reasons, infeasible_reasons=tuple(reasons),
    )

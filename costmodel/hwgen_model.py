"""The ``hwgen`` preset: the exact timing, traffic and buffers of the accelerator that
:mod:`hwgen` generates for a dataflow and a hardware description (``docs/timing.md``)."""

from __future__ import annotations

from typing import Sequence

from ._errors import AccelgenError
from ._hwgen_fast import fast_summary
from .dataflow import Dataflow
from .hardware import Hardware
from .hwgen_schedule import HwStructure, LayerTiles, structure_key, structure_of, tiles_of
from .workload import Conv2D, Layer

__all__ = ["hwgen_structure", "l2_split", "hwgen_layer", "check_generatable"]


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


def hwgen_structure(dataflow: Dataflow, layer: Layer, hw: Hardware, *,
                    fit: Sequence[Layer] = ()) -> HwStructure:
    """The generated design's structure: its buffers hold filters up to 3x3 and strides up to 2,
    or more where a layer of ``fit`` needs it (the design made to run those layers)."""
    w = check_generatable(hw)
    convs = [l for l in fit if isinstance(l, Conv2D)]
    max_filter = max([3] + [max(l.R, l.S) for l in convs])
    max_stride = max([2] + [l.stride for l in convs])
    s = structure_of(dataflow, layer, hw.num_pes, noc_words_per_cycle=w, max_filter=max_filter,
                     max_stride=max_stride, simd_lanes=hw.simd_lanes)
    l1 = s.l1_words()
    need = 2 * (l1["input"] + l1["weight"]) + 2 * 4 * l1["output"]
    if need > hw.l1_bytes_per_pe:
        raise AccelgenError(f"the PE tiles need {need} B of L1 (double-buffered), the hardware has "
                            f"{hw.l1_bytes_per_pe} B", where=f"hardware {hw.name!r}")
    return s


def hwgen_layer(dataflow: Dataflow, layer: Layer, hw: Hardware) -> tuple[HwStructure, LayerTiles, dict]:
    """Structure, tiles and the figures of one run: cycles, engine totals and word traffic
    (timing does not depend on the filter and stride maxima the buffers are sized for)."""
    s = hwgen_structure(dataflow, layer, hw, fit=[layer])
    t = tiles_of(s, dataflow, layer)
    return s, t, _summary(s, t)


_SUMMARIES: dict[tuple, dict] = {}
_MAX_SUMMARIES = 4096


def _summary(s: HwStructure, t: LayerTiles) -> dict:
    """The figures of (structure, tiles), computed once: a design-space search asks for the same
    ones for every point that differs only in what the schedule ignores (L2, off-chip, energy)."""
    key = (structure_key(s), tuple(sorted(t.dims.items())), t.stride, t.in_rows, t.in_cols,
           tuple(sorted(t.t0.items())), tuple(sorted(t.t1.items())), t.repeat)
    out = _SUMMARIES.get(key)
    if out is None:
        if len(_SUMMARIES) >= _MAX_SUMMARIES:
            _SUMMARIES.clear()
        out = _SUMMARIES[key] = fast_summary(s, t)
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in out.items()}

"""Properties of convolutions whose window is given per axis: ``stride_y``, ``stride_x``,
``dilation_y``, ``dilation_x`` and the four pads drawn independently, under every library dataflow
and both presets.  Each accepted analysis conserves MACs exactly, against a count made here by
enumerating the output positions; the maestro preset accepts every one (a dilated axis of any
output size), the hwgen preset's refusals are one line, and only for a stated reason.
Transposed convolutions: their MACs (the scatter form's) and the executed ones of their direct
equivalent, whose output is as large as theirs."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import LIBRARY, AccelgenError, Conv2D, Hardware, LayerResult, analyze_layer, builtin_hardware
from costmodel.dataflow.library import library_dataflow
from costmodel.workload.layers import ConvTranspose2D
from costmodel.workload.problem import problems_of

CONV_TEMPLATES = tuple(name for name, t in LIBRARY.items() if t.layer_kind == "conv2d")

# The generated hardware: no dilation, no depthwise layers, one SpatialMap per level (not yrp).
HWGEN_REFUSALS = re.compile(r"dilation_[yx]=\d+: the generated PEs read windows of adjacent rows|"
                            r"depthwise layers are not generated|level 1 has 2 SpatialMaps; expected exactly one")


def _settings(examples: int) -> Callable[[Any], Any]:
    return settings(derandomize=True, database=None, max_examples=examples, deadline=None)


def outputs_along(size: int, before: int, after: int, taps: int, stride: int, dilation: int) -> int:
    """Output positions along one axis, counted one by one: a window starts every ``stride``
    rows of the padded input and its last tap must land inside it."""
    padded = before + size + after
    return sum(1 for start in range(0, padded, stride) if start + (taps - 1) * dilation < padded)


def counted_macs(layer: Conv2D) -> int:
    yo = outputs_along(layer.Y, layer.pad_top, layer.pad_bottom, layer.R, layer.stride_y, layer.dilation_y)
    xo = outputs_along(layer.X, layer.pad_left, layer.pad_right, layer.S, layer.stride_x, layer.dilation_x)
    return layer.N * layer.K * (layer.C // layer.groups) * layer.R * layer.S * yo * xo


ANY_DILATION = st.integers(1, 4)


@st.composite
def window_convs(draw: st.DrawFn, dilations: st.SearchStrategy[int] = ANY_DILATION) -> Conv2D:
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sy, sx = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dy, dx = draw(dilations), draw(dilations)
    top, bottom, left, right = (draw(st.integers(0, 2)) for _ in range(4))
    y = draw(st.integers(max(1, dy * (r - 1) + 1 - top - bottom), 13))
    x = draw(st.integers(max(1, dx * (s - 1) + 1 - left - right), 13))
    c = draw(st.integers(1, 6))
    groups = draw(st.sampled_from([1, 1, 1, c]))               # sometimes depthwise
    k = c if groups > 1 else draw(st.integers(1, 6))
    return Conv2D("w", K=k, C=c, Y=y, X=x, R=r, S=s, N=draw(st.sampled_from([1, 1, 1, 2])), groups=groups,
                  stride_y=sy, stride_x=sx, dilation_y=dy, dilation_x=dx,
                  pad_top=top, pad_bottom=bottom, pad_left=left, pad_right=right)


def _kind(layer: Conv2D) -> str:
    """What the case exercises, for the counts that show the properties are not vacuous."""
    kinds = []
    if layer.stride_y != layer.stride_x:
        kinds.append("strides")
    if layer.dilation_y != 1 or layer.dilation_x != 1:
        kinds.append("dilation")
    if len(problems_of(layer)) > 1:
        kinds.append("unequal-phases")      # a dilated axis whose interleaved phases differ in length
    if len({layer.pad_top, layer.pad_bottom, layer.pad_left, layer.pad_right}) > 1:
        kinds.append("pads")
    return "+".join(kinds) or "plain"


def analyse(layer: Conv2D, template: str, hw: Hardware, preset: str,
            refusals: re.Pattern | None = None) -> LayerResult | None:
    """The analysis, or None for a refusal ``refusals`` allows (none when it is None)."""
    try:
        df = library_dataflow(template, layer, hw.num_pes)
        return analyze_layer(layer, df, hw, preset=preset)
    except AccelgenError as err:
        text = str(err)
        assert refusals is not None and "\n" not in text and refusals.search(text), (template, text)
        return None


def check_conserved(r: LayerResult, layer: Conv2D, hw: Hardware) -> None:
    assert r.step_macs == r.macs == layer.macs == counted_macs(layer), (r.step_macs, r.macs, layer, r.dataflow)
    assert 0 < r.utilization <= 1
    assert r.runtime_cycles * hw.num_pes * hw.simd_lanes >= r.macs


def test_maestro_preset_conserves_macs_under_every_library_dataflow() -> None:
    accepted: Counter[tuple[str, str]] = Counter()
    hw = builtin_hardware("small").with_overrides(num_pes=16, noc_bw=4, noc_latency=1)

    @_settings(300)
    @given(window_convs())
    def check(layer: Conv2D) -> None:
        for template in CONV_TEMPLATES:
            r = analyse(layer, template, hw, "maestro")
            assert r is not None
            check_conserved(r, layer, hw)
            for kind in _kind(layer).split("+"):
                accepted[template, kind] += 1

    check()
    for template in CONV_TEMPLATES:               # every template met every feature, accepted
        for kind in ("strides", "dilation", "unequal-phases", "pads"):
            assert accepted[template, kind] >= 5, (template, kind, accepted)


def test_hwgen_preset_conserves_macs_or_refuses_in_one_line() -> None:
    accepted: Counter[tuple[str, str]] = Counter()
    tiny = builtin_hardware("tiny")
    hw = replace(tiny, l1_bytes_per_pe=1 << 16)

    @_settings(200)
    @given(window_convs(dilations=st.sampled_from([1, 1, 1, 1, 2, 3])))
    def check(layer: Conv2D) -> None:
        for template in CONV_TEMPLATES:
            r = analyse(layer, template, hw, "hwgen", HWGEN_REFUSALS)
            if r is None:
                continue
            check_conserved(r, layer, hw)
            assert layer.dilation_y == layer.dilation_x == 1 and not layer.depthwise
            for kind in _kind(layer).split("+"):
                accepted[template, kind] += 1

    check()
    for template in ("kcp", "cp", "xp", "yxp"):    # every template but yrp (two SpatialMaps in a level)
        for kind in ("strides", "pads"):
            assert accepted[template, kind] >= 15, (template, kind, accepted)


@st.composite
def transposed_convs(draw: st.DrawFn) -> ConvTranspose2D:
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    c = draw(st.integers(1, 4))
    groups = draw(st.sampled_from([1, 1, c]))
    axes = {}
    for axis, taps in (("y", r), ("x", s)):
        size, stride, dilation = draw(st.integers(2, 8)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
        extra = draw(st.integers(0, max(stride, dilation) - 1))
        full = stride * (size - 1) + dilation * (taps - 1) + 1 + extra       # before the pads crop it
        first = draw(st.integers(0, min(2, full - 1)))
        axes[axis] = (size, stride, dilation, extra, first, draw(st.integers(0, min(2, full - 1 - first))))
    (y, sy, dy, ey, top, bottom), (x, sx, dx, ex, left, right) = axes["y"], axes["x"]
    return ConvTranspose2D("t", K=c if groups > 1 else draw(st.integers(1, 4)), C=c, Y=y, X=x, R=r, S=s,
                           groups=groups, stride_y=sy, stride_x=sx, dilation_y=dy, dilation_x=dx, pad_top=top,
                           pad_bottom=bottom, pad_left=left, pad_right=right, output_pad_y=ey, output_pad_x=ex)


def scatter_macs(layer: ConvTranspose2D) -> int:
    """Every input element times every tap of its group's filters (cropped products included)."""
    return layer.N * layer.C * (layer.K // layer.groups) * layer.R * layer.S * layer.Y * layer.X


def test_transposed_convolutions_keep_their_macs_and_run_as_their_equivalent() -> None:
    accepted: Counter[str] = Counter()
    hw = builtin_hardware("small").with_overrides(num_pes=16)

    @_settings(150)
    @given(transposed_convs())
    def check(layer: ConvTranspose2D) -> None:
        direct = layer.equivalent_conv()
        assert (direct.Yo, direct.Xo) == (layer.Yo, layer.Xo)
        for template in CONV_TEMPLATES:
            r = analyze_layer(layer, template, hw)
            assert r.macs == layer.macs == scatter_macs(layer)
            assert r.step_macs == direct.macs == counted_macs(direct)     # the zeros it multiplies too
            accepted[template] += 1

    check()
    assert all(accepted[t] >= 20 for t in CONV_TEMPLATES), accepted

"""Dilated convolutions under the maestro preset, for every output size: a dilated axis is the
sum of its interleaved undilated phases, counted here by enumerating which rows each output reads.
The analysis equals the sum of the undilated sub-layers' analyses (cycles, MACs and traffic add,
buffers are the largest part's), and where the phases are equally long it gives the figures the
earlier path (one phase run as many times as there are phases) gave."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from test_properties_window import counted_macs, window_convs

from costmodel import LIBRARY, Conv2D, analyze_layer, builtin_hardware
from costmodel.dataflow.library import library_dataflow
from costmodel.workload.layers import ConvTranspose2D
from costmodel.workload.problem import problems_of

CONV_TEMPLATES = tuple(name for name, t in LIBRARY.items() if t.layer_kind == "conv2d")
HW = builtin_hardware("small").with_overrides(num_pes=16, noc_bw=4, noc_latency=1)


def phases_along(outputs: int, stride: int, dilation: int, taps: int) -> list[set[int]]:
    """Per phase, the padded input rows its outputs read, found by enumeration: two outputs are
    in one phase when the rows they read are congruent modulo the dilation."""
    by_residue: dict[int, set[int]] = {}
    for y in range(outputs):
        rows = {y * stride + r * dilation for r in range(taps)}
        by_residue.setdefault(y * stride % dilation, set()).update(rows)
    return list(by_residue.values())


def phase_lengths(outputs: int, stride: int, dilation: int) -> Counter[int]:
    """How many phases have each number of outputs (enumerated, not divided)."""
    return Counter(Counter(y * stride % dilation for y in range(outputs)).values())


def sub_layers(layer: Conv2D) -> list[tuple[int, Conv2D]]:
    """The undilated convolutions a dilated layer is the sum of, with how many of each.  An
    undilated axis stays as it is (its rows and pads)."""
    axes: list[list[tuple[int, dict[str, int]]]] = []
    for ref, taps, outputs, stride, dilation in (("y", layer.R, layer.Yo, layer.stride_y, layer.dilation_y),
                                                 ("x", layer.S, layer.Xo, layer.stride_x, layer.dilation_x)):
        size, before, after = ("Y", "pad_top", "pad_bottom") if ref == "y" else ("X", "pad_left", "pad_right")
        if dilation == 1:
            axes.append([(1, {size: getattr(layer, size), before: getattr(layer, before),
                              after: getattr(layer, after), f"stride_{ref}": stride})])
            continue
        step = stride // math.gcd(stride, dilation)
        axes.append([(count, {size: (n - 1) * step + taps, f"stride_{ref}": step})
                     for n, count in sorted(phase_lengths(outputs, stride, dilation).items(), reverse=True)])
    return [(cy * cx, Conv2D("sub", K=layer.K, C=layer.C, groups=layer.groups, N=layer.N, R=layer.R, S=layer.S,
                             **fy, **fx))
            for cy, fy in axes[0] for cx, fx in axes[1]]


def test_a_worked_example_of_unequal_phases() -> None:
    """7 output rows of a 3-tap filter dilated by 2: phases of 4 and 3 rows; 8 columns: 2 of 4."""
    layer = Conv2D("dil", K=4, C=4, Y=7, X=8, R=3, S=3, dilation=2, padding=2)
    assert (layer.Yo, layer.Xo) == (7, 8)
    parts = problems_of(layer)
    assert [(p.dims["Y'"], p.dims["X'"], p.dims["Y"], p.dims["X"], p.strides, p.repeat) for p in parts] == [
        (4, 4, 6, 6, {"Y": 1, "X": 1}, 2), (3, 4, 5, 6, {"Y": 1, "X": 1}, 2)]
    assert sum(p.repeat * p.dims["Y'"] * p.dims["X'"] for p in parts) == 7 * 8
    r = analyze_layer(layer, "kcp", HW)
    assert r.step_macs == r.macs == counted_macs(layer) == 4 * 4 * 9 * 7 * 8


@settings(derandomize=True, database=None, max_examples=150, deadline=None)
@given(window_convs())
def test_phases_are_disjoint_and_cover_exactly_the_rows_analysed(layer: Conv2D) -> None:
    parts = problems_of(layer)
    assert 1 <= len(parts) <= 4
    loops = ("N", "K", "C", "R", "S", "Y'", "X'")
    assert sum(p.repeat * math.prod(p.dims.get(d, 1) for d in loops) for p in parts) == counted_macs(layer)
    for ref, taps, outputs, stride, dilation in (("Y", layer.R, layer.Yo, layer.stride_y, layer.dilation_y),
                                                 ("X", layer.S, layer.Xo, layer.stride_x, layer.dilation_x)):
        if dilation == 1:
            continue
        phases = phases_along(outputs, stride, dilation, taps)
        assert sum(len(rows) for rows in phases) == len(set().union(*phases))        # disjoint
        analysed = Counter()
        for p in parts:
            analysed[p.dims[ref + "'"], p.dims[ref]] += 1
        for rows in phases:          # each phase reads exactly the rows its part analyses
            n = sum(1 for y in range(outputs) if y * stride % dilation == min(rows) % dilation)
            assert any(out == n and size == len(rows) for out, size in analysed), (ref, n, len(rows), analysed)


def test_a_dilated_layer_analyses_as_the_sum_of_its_undilated_sub_layers() -> None:
    seen: Counter[int] = Counter()

    @settings(derandomize=True, database=None, max_examples=150, deadline=None)
    @given(window_convs())
    def check(layer: Conv2D) -> None:
        subs_of = sub_layers(layer)
        seen[len(subs_of)] += 1
        for template in CONV_TEMPLATES:
            df = library_dataflow(template, layer, HW.num_pes)
            r = analyze_layer(layer, df, HW)
            subs = [(count, analyze_layer(sub, df, HW)) for count, sub in subs_of]
            assert r.step_macs == r.macs == counted_macs(layer) == sum(c * s.step_macs for c, s in subs)
            assert r.runtime_cycles == sum(c * s.runtime_cycles for c, s in subs)
            for field in ("l1_reads", "l1_writes", "l2_reads", "l2_writes"):
                got = getattr(r, field)
                assert got == {t: sum(c * getattr(s, field)[t] for c, s in subs) for t in got}, field
            assert r.l1_words_per_pe == {t: max(s.l1_words_per_pe[t] for _, s in subs) for t in r.l1_words_per_pe}
            assert r.l2_words == {t: max(s.l2_words[t] for _, s in subs) for t in r.l2_words}
            assert r.energy_pj["total"] == pytest.approx(sum(c * s.energy_pj["total"] for c, s in subs), rel=1e-12)
            if len(subs) == 1:       # equally long phases: one of them, run as many times as there are
                (count, s), = subs
                assert r.runtime_cycles == count * s.runtime_cycles and r.bound == s.bound

    check()
    assert seen[2] >= 10 and seen[4] >= 2, seen          # unequal phases along one axis and along both


GOLDEN = yaml.safe_load((Path(__file__).parent / "data" / "dilation_even_golden.yaml").read_text())
EVEN_CASES = {
    "d2": dict(K=4, C=3, Y=8, X=8, R=3, S=3, dilation=2, padding=2),
    "d3_s2": dict(K=5, C=2, Y=13, X=11, R=2, S=3, dilation_y=3, dilation_x=1, stride_y=2, stride_x=1, pad_top=1,
                  pad_bottom=1),
    "dw_d2x4": dict(K=6, C=6, groups=6, Y=11, X=14, R=3, S=2, dilation_y=2, dilation_x=4, pad_top=0, pad_bottom=1,
                    pad_left=2, pad_right=0),
    "d4_s4": dict(K=3, C=4, Y=12, X=10, R=2, S=2, dilation=4, stride_y=4, stride_x=1, N=2, padding=1),
    "d2_s3": dict(K=4, C=4, Y=16, X=14, R=3, S=2, dilation_y=2, dilation_x=3, stride_y=3, stride_x=2),
}


@pytest.mark.parametrize("case", GOLDEN, ids=[f"{c['case']}-{c['dataflow']}" for c in GOLDEN])
def test_equal_phases_give_the_earlier_paths_figures(case: dict) -> None:
    layer = Conv2D(case["case"], **EVEN_CASES[case["case"]])
    assert len(problems_of(layer)) == 1
    r = analyze_layer(layer, library_dataflow(case["dataflow"], layer, HW.num_pes), HW)
    got = {k: getattr(r, k) for k in case if k not in ("case", "dataflow", "energy_pj")}
    assert got == {k: v for k, v in case.items() if k in got}
    assert r.energy_pj["total"] == case["energy_pj"]          # bit-identical, not close


def test_a_transposed_convolution_whose_pads_crop_every_input_row() -> None:
    """Its one kept output row is the output padding: the direct equivalent reads one zero row."""
    layer = ConvTranspose2D("t", K=1, C=1, Y=2, X=2, R=1, S=1, stride=1, pad_top=2, dilation_y=2, output_pad_y=1)
    direct = layer.equivalent_conv()
    assert (layer.Yo, layer.Xo) == (direct.Yo, direct.Xo) == (1, 2)
    assert (direct.Y, direct.pad_top, direct.pad_bottom) == (1, 0, 0)
    r = analyze_layer(layer, "kcp", HW)
    assert (r.macs, r.step_macs) == (layer.macs, direct.macs) == (4, 2)

"""The L2 layout the host writes (``hwgen.layout.interleaved``) is the one the loader walks: in
every step, every PE's tile word sits where the layout's coefficients put it (the class box's
first word, the PE's class innermost, the runs' strides), for every dataflow, with every
dimension drawn on its own; and its size is what the cost model charges."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.analysis import resolve_dataflow
from costmodel.base import AccelgenError
from costmodel.hwgen_preset.preset import hwgen_layer
from costmodel.hwgen_preset.rules import LOOP_DIMS, ingress, input_span, l2_coefficients, l2_layout_words
from costmodel.hwgen_preset.walk import _extent, steps
from costmodel.workload.layers import GEMM, Conv2D
from hwgen.layout import interleaved
from sim_tests.matrix import array, dataflow_spec


def _class(s, ing, u0: int, u1: int) -> int:
    u = 0
    for d, n, k in zip(s.spatial, (s.n0, s.n1), (u0, u1)):
        if d in ing.interleaved:
            u = u * n + k
    return u


def _check(dataflow: str, array_name: str, layer) -> None:
    hw = array(array_name)
    try:
        s, t, _ = hwgen_layer(resolve_dataflow(dataflow_spec(dataflow), layer, hw), layer, hw)
    except AccelgenError:
        return                                   # refused with a message (tested elsewhere)
    sizes = l2_layout_words(s, t)
    for name in ("input", "weight"):
        ing = ingress(s, name)
        dims = ("C", "Y", "X") if name == "input" else ("K", "C", "R", "S")
        shape = (t.dims["C"], t.in_rows, t.in_cols) if name == "input" else tuple(t.dims[d] for d in dims)
        x = np.arange(1, int(np.prod(shape)) + 1).reshape(shape)
        held = interleaved(s, t, name, x)
        assert held.size == sizes[name]
        co = l2_coefficients(s, t, ing)
        R, S, sy, sx = t.dims["R"], t.dims["S"], t.stride_y, t.stride_x
        for step in steps(s, t):
            first = {d: _extent(s, t, step, di, (0, 0))[0] for di, d in enumerate(LOOP_DIMS)}
            start = {"K": first["K"], "C": first["C"], "Y": first["Y"] * sy, "X": first["X"] * sx}
            base = sum(start[d] * co[d] for d in dims if d in start)
            for u0 in range(s.n0):
                for u1 in range(s.n1):
                    ext = {d: _extent(s, t, step, di, (u0, u1)) for di, d in enumerate(LOOP_DIMS)}
                    if any(n == 0 for _, n in ext.values()):
                        continue
                    u = _class(s, ing, u0, u1)

                    def offset(d, i, scale=1):
                        # a word's place along d in the class box: from the PE's own tile
                        # start where d is interleaved, else from PE (0, 0)'s
                        own = 0 if d in ing.interleaved else (ext[d][0] - first[d]) * scale
                        return (own + i) * co[f"run_{d}"]
                    if name == "input":
                        rows = input_span(ext["Y"][1], sy, R)
                        cols = input_span(ext["X"][1], sx, S)
                        for c in range(ext["C"][1]):
                            for y in range(rows):
                                for xx in range(cols):
                                    at = base + offset("C", c) + offset("Y", y, sy) + offset("X", xx, sx) + u
                                    want = x[ext["C"][0] + c, ext["Y"][0] * sy + y, ext["X"][0] * sx + xx]
                                    assert held[at] == want, (dataflow, array_name, layer, name, step, u0, u1)
                    else:
                        for k in range(ext["K"][1]):
                            for c in range(ext["C"][1]):
                                for r in range(R):
                                    for ss in range(S):
                                        at = (base + offset("K", k) + offset("C", c) + r * co["run_R"]
                                              + ss * co["run_S"] + u)
                                        want = x[ext["K"][0] + k, ext["C"][0] + c, r, ss]
                                        assert held[at] == want, (dataflow, array_name, layer, name, step, u0, u1)


@settings(max_examples=60, deadline=None)
@given(dataflow=st.sampled_from(["kcp", "cp", "xp", "yxp(x_tile=4)", "kcp_x2", "xp(k_tile=2)", "kcp(x_tile=3)"]),
       array_name=st.sampled_from(["tiny8", "tiny4", "tiny8-w16"]),
       k=st.integers(1, 9), c=st.integers(1, 12), y=st.integers(1, 8), x=st.integers(1, 8),
       r=st.integers(1, 3), s=st.integers(1, 3), stride_y=st.integers(1, 3), stride_x=st.integers(1, 3),
       pads=st.tuples(*[st.integers(0, 1)] * 4))
def test_every_pe_tile_word_is_where_the_loader_reads_it(dataflow, array_name, k, c, y, x, r, s, stride_y,
                                                         stride_x, pads):
    top, bottom, left, right = pads
    if y + top + bottom < r or x + left + right < s:
        return
    _check(dataflow, array_name, Conv2D("l", K=k, C=c, Y=y, X=x, R=r, S=s, stride_y=stride_y, stride_x=stride_x,
                                        pad_top=top, pad_bottom=bottom, pad_left=left, pad_right=right))


@settings(max_examples=30, deadline=None)
@given(array_name=st.sampled_from(["tiny8", "tiny4", "tiny8-w16"]), m=st.integers(1, 12), n=st.integers(1, 12),
       kk=st.integers(1, 40))
def test_gemm_layout(array_name, m, n, kk):
    _check("nmk", array_name, GEMM("g", M=m, N=n, K=kk))


def test_small_layers_of_the_efficiency_table():
    """`small`'s 64 classes (K and C interleaved together, or M and K of a GEMM) and a 1x1
    design that interleaves X."""
    _check("kcp(cluster=8,c_tile=2,x_tile=14)", "small", Conv2D("a", K=16, C=20, Y=3, X=5, R=1, S=1))
    _check("nmk(k_tile=8,m_tile=8,n_tile=4)", "small", GEMM("b", M=20, N=6, K=40))
    _check("xp(k_tile=4,c_tile=4)", "small", Conv2D("c", K=8, C=8, Y=2, X=70, R=1, S=1))

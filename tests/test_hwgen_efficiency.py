"""The rules that keep the generated array busy: coalesced loads (a box sent as its maximal runs
of consecutive L2 addresses), the drain across one-column groups, and template tiles given on
the command line; and the closed-form schedule equal to the step walk with every template
parameter drawn."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import AccelgenError
from costmodel.analysis import analyze_layer
from costmodel.dataflow.library import library_dataflow, parse_library_call
from costmodel.dataflow.spec import dataflow_from_spec, resolve_dataflow
from costmodel.hardware.hardware import NoCLevel, builtin_hardware
from costmodel.hwgen_preset.closed import closed_summary
from costmodel.hwgen_preset.preset import hwgen_structure
from costmodel.hwgen_preset.rules import TIMING, input_runs, load_issue_cycles, weight_runs
from costmodel.hwgen_preset.structure import tiles_of
from costmodel.hwgen_preset.walk import reference_summary
from costmodel.workload.layers import GEMM, Conv2D

TINY = builtin_hardware("tiny")
SMALL = builtin_hardware("small")


def _maximal_runs(addresses: list[int]) -> list[int]:
    """Lengths of the maximal runs of consecutive addresses, in order."""
    runs = [1]
    for a, b in zip(addresses, addresses[1:]):
        if b == a + 1:
            runs[-1] += 1
        else:
            runs.append(1)
    return runs


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 5), st.integers(1, 6), st.integers(1, 6), st.data())
def test_input_boxes_load_as_their_maximal_runs(channels, in_rows, in_cols, data):
    c0 = data.draw(st.integers(0, channels - 1))
    c = data.draw(st.integers(1, channels - c0))
    y0 = data.draw(st.integers(0, in_rows - 1))
    rows = data.draw(st.integers(1, in_rows - y0))
    x0 = data.draw(st.integers(0, in_cols - 1))
    cols = data.draw(st.integers(1, in_cols - x0))
    addresses = [(ci * in_rows + y) * in_cols + x for ci in range(c0, c0 + c)
                 for y in range(y0, y0 + rows) for x in range(x0, x0 + cols)]
    runs = _maximal_runs(addresses)
    n, length = (int(v) for v in input_runs(c, rows, cols, in_rows, in_cols))
    assert runs == [length] * n
    w = data.draw(st.sampled_from([1, 2, 4, 8, 64]))
    assert load_issue_cycles(n, length, w) == sum(-(-r // w) for r in runs)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 3), st.integers(1, 3), st.data())
def test_weight_boxes_load_as_their_maximal_runs(filters, channels, R, S, data):
    k0 = data.draw(st.integers(0, filters - 1))
    k = data.draw(st.integers(1, filters - k0))
    c0 = data.draw(st.integers(0, channels - 1))
    c = data.draw(st.integers(1, channels - c0))
    addresses = [((ki * channels + ci) * R + r) * S + s for ki in range(k0, k0 + k) for ci in range(c0, c0 + c)
                 for r in range(R) for s in range(S)]
    n, length = (int(v) for v in weight_runs(k, c, channels, R, S))
    assert _maximal_runs(addresses) == [length] * n


def test_runs_rules_take_numpy_arrays():
    # rows of whole width merge per channel; whole channels merge into one run; else a run a row
    n, length = input_runs(np.array([2, 2, 2]), np.array([3, 4, 4]), np.array([5, 5, 4]), 4, 5)
    assert n.tolist() == [2, 1, 8] and length.tolist() == [15, 40, 4]
    n, length = weight_runs(np.array([3, 3]), np.array([4, 2]), 4, 3, 3)
    assert n.tolist() == [1, 3] and length.tolist() == [108, 18]


def _random_case(rng: random.Random):
    hw = replace(TINY, num_pes=rng.choice([4, 8, 16]), simd_lanes=rng.choice([1, 2]), l1_bytes_per_pe=4096,
                 noc=(NoCLevel(rng.choice([1, 2, 4, 8, 16]), 1),), pe_drain_words=rng.choice([0, 0, 0, 1, 2, 3]))
    name = rng.choice(["kcp", "cp", "xp", "nmk"])
    if name == "nmk":
        layer = GEMM("g", M=rng.randint(1, 12), N=rng.randint(1, 12), K=rng.randint(1, 40))
        params = {"k_tile": rng.choice([1, 2, 4, 64]), "m_tile": rng.choice([1, 2, 3]),
                  "n_tile": rng.choice([1, 2, 3]), "order": rng.choice(["NMK", "KNM", "MKN"])}
    else:
        r, s = rng.choice([1, 2, 3]), rng.choice([1, 2, 3])
        layer = Conv2D("c", K=rng.randint(1, 10), C=rng.randint(1, 20), Y=rng.randint(3, 9), X=rng.randint(3, 9),
                       R=r, S=s, stride_y=rng.randint(1, 3), stride_x=rng.randint(1, 3),
                       pad_top=rng.randint(0, 1), pad_left=rng.randint(0, 1))
        params = {"kcp": lambda: {"cluster": rng.choice([1, 2, 4, 64]), "k_tile": rng.choice([1, 2, 3]),
                                  "c_tile": rng.choice([1, 2]), "x_tile": rng.choice([1, 2, 3, 7, 12])},
                  "cp": lambda: {"k_tile": rng.choice([1, 2, 3]), "x_tile": rng.choice([1, 2, 5, 8])},
                  "xp": lambda: {"k_tile": rng.choice([1, 2, 3]), "c_tile": rng.choice([1, 2, 4])}}[name]()
        params["order"] = rng.choice(["KCYX", "YXKC", "KYXC", "CKYX"])
    return hw, name, layer, params


def test_closed_schedule_equals_the_step_walk_with_every_template_parameter():
    """Tiles, loop orders, cluster sizes, NoC widths, per-axis strides and filter shapes drawn on
    their own: the closed-form schedule and the step walk agree on every figure."""
    rng = random.Random(11)
    checked = across = narrowed = 0
    for _ in range(300):
        hw, name, layer, params = _random_case(rng)
        try:
            df = library_dataflow(name, layer, hw.num_pes, **params)
            s = hwgen_structure(df, layer, hw)
            t = tiles_of(s, df, layer)
        except AccelgenError:
            continue                      # a tile the structure cannot hold: refused, fine
        assert closed_summary(s, t) == reference_summary(s, t), (name, params, layer, hw.num_pes)
        checked += 1
        across += s.drain_across_groups is not None
        narrowed += s.drain_lanes < min(s.noc_words_per_cycle, s.pe_tile_max["X"])
    assert checked >= 120 and across >= 15 and narrowed >= 15, (checked, across, narrowed)


def test_xp_drains_across_groups_and_the_others_group_by_group():
    layer = Conv2D("c", K=4, C=4, Y=6, X=20, R=3, S=3)
    for name, expected in (("xp", 0), ("kcp", None), ("cp", None)):
        df = library_dataflow(name, layer, TINY.num_pes)
        assert hwgen_structure(df, layer, TINY).drain_across_groups == expected, name


def test_a_wider_noc_drains_xp_faster():
    """xp's outputs of one step sit in 8 one-column groups: a W-word drain takes them W at a time."""
    layer = Conv2D("c", K=8, C=1, Y=4, X=16, R=1, S=1)

    def drain(words):
        hw = replace(TINY, noc=(NoCLevel(words, 1),))
        df = resolve_dataflow("xp", layer, hw)
        s = hwgen_structure(df, layer, hw)
        return closed_summary(s, tiles_of(s, df, layer))["drain_cycles"]
    # 8 groups x (K=1, Y=1) per step, 64 steps: 8 / W runs each after the drain's wait for the
    # step's last partial sums (its pipeline's tail overlaps the next slot)
    assert [drain(w) for w in (1, 2, 4, 8)] == [64 * (8 // w + TIMING.drain_wait_cycles) for w in (1, 2, 4, 8)]


def test_template_tiles_on_the_command_line():
    assert dataflow_from_spec("kcp( cluster = 8 , x_tile=14 )") == "kcp(cluster=8,x_tile=14)"
    assert dataflow_from_spec("KC-P") == "kcp"
    assert parse_library_call("xp(k_tile=2,c_tile=4,order=KYC)") == ("xp", {"k_tile": 2, "c_tile": 4, "order": "KYC"})
    assert parse_library_call("SpatialMap(1,1) K") is None
    layer = Conv2D("c", K=64, C=64, Y=14, X=14, R=3, S=3, padding=1)
    df = resolve_dataflow(dataflow_from_spec("kcp(cluster=8,x_tile=14)"), layer, SMALL)
    assert "TemporalMap(16,14) X" in str(df) and "Cluster(8,P)" in str(df)
    # the defaults render MAESTRO's own strings
    assert str(resolve_dataflow("kcp(cluster=64)", layer, SMALL)) == str(resolve_dataflow("kcp", layer, SMALL))


@pytest.mark.parametrize("spec,message", [
    ("kcp(foo=1)", "kcp has no parameter 'foo'; expected one of cluster, k_tile, c_tile, x_tile, order"),
    ("kcp(x_tile=0)", "x_tile must be a positive integer, not 0"),
    ("kcp(x_tile=two)", "x_tile must be a positive integer, not 'two'"),
    ("kcp(x_tile)", "'x_tile' is not name=value"),
    ("cp(k_tile=1,k_tile=2)", "sets 'k_tile' twice"),
    ("xp(order=KQ)", "names 'Q', not a dimension"),
])
def test_bad_template_tiles_are_one_line(spec, message):
    with pytest.raises(AccelgenError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        dataflow_from_spec(spec)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name,layer", [
    ("kcp(cluster=8,x_tile=14)", Conv2D("r3", K=64, C=64, Y=14, X=14, R=3, S=3, padding=1)),
    ("cp(x_tile=14)", Conv2D("r3", K=64, C=64, Y=14, X=14, R=3, S=3, padding=1)),
    ("xp(k_tile=4,c_tile=4)", Conv2D("w1", K=32, C=64, Y=32, X=64, R=1, S=1)),
    ("nmk(k_tile=8,m_tile=8,n_tile=4)", GEMM("bert", M=64, N=256, K=256)),
])
def test_filled_layers_are_compute_bound_on_small(name, layer):
    """The efficiency cases of make validate-rtl: the model (exact to the RTL) says these keep
    the 64 PEs of small at least 90 % busy."""
    r = analyze_layer(layer, dataflow_from_spec(name), SMALL, preset="hwgen")
    assert r.bound == "compute" and r.utilization >= 0.9, (r.bound, r.utilization)


@pytest.mark.parametrize("x,k,w,given,lanes", [
    (14, 1, 64, 0, 1),      # a 14-word row: 14 runs of one word, a memory 16 deep
    (16, 1, 64, 0, 1),      # 16 words: 16 runs
    (14, 2, 64, 0, 2),      # 28 words: 14 runs of 2 (2 divides 14)
    (8, 4, 64, 0, 2),       # 32 words in 4 rows of 8: 16 runs of 2
    (9, 4, 64, 0, 1),       # 36 words, rows of 9 (odd): 36 runs of 1, two memory cells deep
    (12, 4, 2, 0, 2),       # 48 words: 2 lanes at most (W), 24 runs
    (5, 1, 4, 0, 4),        # 5 words: below PSUM_RAM_MIN_WORDS, registers, the widest drain
    (14, 1, 64, 16, 14),    # pe_drain_words given: min(W, X, it)
    (14, 1, 64, 4, 4),
])
def test_drain_lanes_rule(x, k, w, given, lanes):
    from costmodel.hwgen_preset.structure import HwStructure
    s = HwStructure(8, 8, 1, ("K", None), ((0, "K"), (0, "X")), w, {"K": k, "C": 1, "Y": 1, "X": x, "R": 1, "S": 1},
                    1, drain_words=given)
    assert s.drain_across_groups is None and s.drain_lanes == lanes


def test_pe_drain_words_sets_the_drain_and_its_cycles():
    """The hardware's pe_drain_words reaches the structure, the manifest's structure and the
    cycles: a row of 14 outputs drained a word a cycle (the rule) or 14 (given)."""
    from hwgen.host import structure_from_dict
    layer = Conv2D("c", K=64, C=256, Y=14, X=14, R=1, S=1)
    spec = dataflow_from_spec("kcp(cluster=8,c_tile=2,x_tile=14)")
    narrow = hwgen_structure(resolve_dataflow(spec, layer, SMALL), layer, SMALL)
    wide_hw = replace(SMALL, pe_drain_words=64)
    wide = hwgen_structure(resolve_dataflow(spec, layer, wide_hw), layer, wide_hw)
    assert (narrow.drain_lanes, wide.drain_lanes) == (1, 14)
    assert structure_from_dict(wide.as_dict()) == wide and structure_from_dict(narrow.as_dict()) == narrow
    a, b = (analyze_layer(layer, spec, hw, preset="hwgen") for hw in (SMALL, wide_hw))
    # every step ends an output tile here (C outermost): 8 groups x 14 runs outlast 28 MACs a step
    assert a.bound == "noc-egress" and b.bound == "compute" and a.runtime_cycles > b.runtime_cycles

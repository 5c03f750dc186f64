"""The ``hwgen`` schedule in closed form (:mod:`costmodel.hwgen_preset.closed`) against the
step walk (:func:`costmodel.hwgen_preset.walk.reference_summary`), figure for figure: cycles,
steps, every engine's total, which engine bounds each slot, and every traffic count.

Every dimension is drawn on its own (filter rows and columns, each axis's stride, each side's
padding, sizes, the array, its SIMD lanes and NoC width, the drain's width, every template
parameter and the loop order), so no class of layer hides between hand-picked cases."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from costmodel import AccelgenError
from costmodel.analysis import resolve_dataflow
from costmodel.dataflow.library import library_dataflow
from costmodel.hardware.hardware import NoCLevel, builtin_hardware
from costmodel.hwgen_preset.closed import _Closed, closed_summary
from costmodel.hwgen_preset.preset import hwgen_structure, l1_candidates
from costmodel.hwgen_preset.rules import TIMING, ingress, l1_bytes, l1_words, slides, tensor_load
from costmodel.hwgen_preset.structure import tiles_of
from costmodel.hwgen_preset.walk import reference_summary
from costmodel.workload.layers import GEMM, Conv2D
from costmodel.workload.zoo import get_model

TINY = builtin_hardware("tiny")
SMALL = builtin_hardware("small")
CASES_PER_SEED = 250
SEEDS = range(5)                     # 1,250 cases


def _draw(rng: random.Random):
    """A random (hardware, dataflow name, layer, template parameters); the layer may be one
    that Conv2D refuses (a filter wider than its padded input), which the caller skips."""
    hw = replace(TINY, num_pes=rng.choice([2, 4, 8, 16]), simd_lanes=rng.randint(1, 3), l1_bytes_per_pe=1 << 16,
                 noc=(NoCLevel(rng.choice([1, 2, 4, 8, 16]), 1),), pe_drain_words=rng.choice([0, 0, 1, 2, 3]))
    name = rng.choice(["kcp", "cp", "xp", "yxp", "nmk"])
    if name == "nmk":
        layer = GEMM("g", M=rng.randint(1, 14), N=rng.randint(1, 14), K=rng.randint(1, 40))
        params = {"k_tile": rng.randint(1, 9), "m_tile": rng.randint(1, 4), "n_tile": rng.randint(1, 4),
                  "order": "".join(rng.sample("NMK", 3))}
        return hw, name, layer, params
    layer = dict(K=rng.randint(1, 10), C=rng.randint(1, 20), Y=rng.randint(1, 11), X=rng.randint(1, 11),
                   R=rng.randint(1, 4), S=rng.randint(1, 4), stride_y=rng.randint(1, 4), stride_x=rng.randint(1, 4),
                   pad_top=rng.randint(0, 2), pad_bottom=rng.randint(0, 2), pad_left=rng.randint(0, 2),
                   pad_right=rng.randint(0, 2))
    params = {"kcp": lambda: {"cluster": rng.choice([1, 2, 4, 8, 64]), "k_tile": rng.randint(1, 4),
                              "c_tile": rng.randint(1, 3), "x_tile": rng.randint(1, 12)},
              "cp": lambda: {"k_tile": rng.randint(1, 4), "x_tile": rng.randint(1, 9)},
              "xp": lambda: {"k_tile": rng.randint(1, 4), "c_tile": rng.randint(1, 4)},
              "yxp": lambda: {"x_tile": rng.randint(1, 9)}}[name]()
    if rng.random() < 0.7:
        params["order"] = "".join(rng.sample("KCYX", 4))
    return hw, name, layer, params


def _rendered(rng: random.Random):
    """Endless random cases of :func:`_draw`, the layer made and the dataflow rendered: ``(hw,
    name, layer, params, dataflow)`` (a layer Conv2D refuses, or parameters the library does, skipped)."""
    while True:
        hw, name, layer, params = _draw(rng)
        try:
            if isinstance(layer, dict):
                layer = Conv2D("c", **layer)
            df = library_dataflow(name, layer, hw.num_pes, **params)
        except AccelgenError:
            continue
        yield hw, name, layer, params, df


@pytest.mark.parametrize("seed", SEEDS)
def test_closed_form_equals_the_step_walk(seed):
    rng = random.Random(seed)
    checked = long_loops = 0
    for _ in range(20 * CASES_PER_SEED):
        hw, name, layer, params = _draw(rng)
        try:
            if isinstance(layer, dict):
                layer = Conv2D("c", **layer)               # (refused when it has no output)
            df = library_dataflow(name, layer, hw.num_pes, **params)
            s = hwgen_structure(df, layer, hw)
            t = tiles_of(s, df, layer)
        except AccelgenError:
            continue                                       # no output, or a tile the structure cannot hold
        walk = reference_summary(s, t)
        assert closed_summary(s, t) == walk, (name, params, layer, hw.num_pes, hw.simd_lanes, s.noc_words_per_cycle)
        checked += 1
        # (a loop of four or more iterations: its middle ones are the repeated third)
        long_loops += any(c >= 4 for c in _trip_counts(s, t))
        if checked == CASES_PER_SEED:
            break
    assert checked == CASES_PER_SEED and long_loops >= CASES_PER_SEED // 4, (checked, long_loops)


def _trip_counts(s, t):
    c = _Closed(s, t, TIMING)
    return [c.trips(j, (0,) * j) for j in range(c.L)]


def test_the_closed_form_costs_a_few_edge_situations_per_loop():
    """On ResNet-50's layers on ``small`` (up to millions of steps a layer) the closed form
    evaluates at most two sub-walks per loop and edge situation: its work does not grow with
    the steps.  (Its speed is measured by ``make bench``, not here.)"""
    for layer in get_model("resnet50").layers[:20]:
        df = resolve_dataflow("nmk" if layer.kind == "gemm" else "kcp", layer, SMALL)
        s = hwgen_structure(df, layer, SMALL, fit=[layer])
        t = tiles_of(s, df, layer)
        c = _Closed(s, t, TIMING)
        summary = c.summary()
        assert summary["steps"] > 1000
        # (each loop's sub-walks: its full iterations' and its last's, per edge situation of
        # the loops outside it, and a dimension's edge is one of two: so at most 2 ** (loops + 1))
        assert len(c.memo) <= 2 ** (c.L + 1), (layer.name, len(c.memo))
        assert len(c.memo) <= 64, (layer.name, len(c.memo))


def test_the_load_rules_agree_on_scalars_and_arrays():
    """The rules the closed form asks one step at a time (plain integers, no numpy call) give
    what they give vectorised callers over arrays, figure for figure: every load of the steps
    of random layers, dataflows and arrays, each tensor, slid or not."""
    checked = 0
    for hw, name, layer, params, df in _rendered(random.Random(11)):
        if checked == 150:
            break
        try:
            s = hwgen_structure(df, layer, hw)
            t = tiles_of(s, df, layer)
        except AccelgenError:
            continue
        c = _Closed(s, t, TIMING)
        c.summary()
        for g in c.geometries.values():
            ext = {d: np.array([v, v]) for d, v in g.ext.items()}
            union = {d: np.array([v, v]) for d, v in g.union.items()}
            for tensor in ("input", "weight"):
                for slid in ((False, False), (True, False), (False, True), (True, True)):
                    one = tensor_load(s, t, ingress(s, tensor), g.ext, g.union, *slid)
                    many = tensor_load(s, t, ingress(s, tensor), ext, union, *(np.array([x, x]) for x in slid))
                    assert [int(v) for v in one] == [int(np.broadcast_to(v, 2)[0]) for v in many], (tensor, slid)
        for d in "XY":
            for same, prev, now in ((True, 0, 2), (True, 2, 2), (False, 0, 2)):
                got = slides(s, t, d, np.array([same]), np.array([prev]), np.array([now]))
                assert bool(slides(s, t, d, same, prev, now)) == bool(got[0])
        checked += 1


def test_the_tiles_words_bound_every_l1_candidate_from_below():
    """``hwgen_structure`` refuses a mapping at once when its tiles' own words do not fit L1
    (a mapping search draws mostly such tiles): every structure it could pick (each of
    :func:`l1_candidates`, its banks' rows rounded up, its input holding two windows where it
    slides) needs at least that much, so the refusals are the ones trying each would give."""
    checked = 0
    for hw, name, layer, params, df in _rendered(random.Random(7)):
        if checked == 400:
            break
        try:
            candidates = list(l1_candidates(df, layer, hw, fit=[layer]))
            needs = [l1_bytes(c.l1_words()) for c in candidates]
        except AccelgenError:
            continue                            # (no output, or a tile the NoC cannot carry)
        bound = l1_bytes(l1_words(candidates[0].pe_tile_max, candidates[0].max_stride))
        assert min(needs) >= bound, (name, params, layer)
        # an L1 just under the bound is refused, naming it; the smallest candidate's L1 is taken
        with pytest.raises(AccelgenError, match=f"need at least {bound} B of L1"):
            hwgen_structure(df, layer, replace(hw, l1_bytes_per_pe=bound - 1), fit=[layer])
        s = hwgen_structure(df, layer, replace(hw, l1_bytes_per_pe=min(needs)), fit=[layer])
        assert l1_bytes(s.l1_words()) == min(needs)
        assert s == candidates[needs.index(min(needs))]
        checked += 1


def test_the_output_banks_are_the_fewest_the_drain_and_the_bank_depth_allow():
    """The output region's banks (``HwStructure.output_banks``): a power of two, no more than
    ``W``, at least the drain's words a cycle (its run is then one access of each bank), no bank
    deeper than ``OUTPUT_BANK_ROWS`` unless ``W`` caps them, and no fewer would do."""
    from costmodel.hwgen_preset.structure import OUTPUT_BANK_ROWS
    checked = 0
    rng = random.Random(11)
    for hw, name, layer, params, df in _rendered(rng):
        if checked == 300:
            break
        try:
            s = hwgen_structure(df, layer, hw, fit=[layer])
        except AccelgenError:
            continue
        words = rng.choice([1, 7, 512, 2048, 2049, 8192, 65536, 1 << 20])
        v, w = s.output_banks(words), s.noc_words_per_cycle

        def fits(n):
            return n >= s.collection_lanes and (-(-words // n) <= OUTPUT_BANK_ROWS or n == w)
        assert v & (v - 1) == 0 and 1 <= v <= w and fits(v), (name, params, words, v)
        assert v == 1 or not fits(v // 2), (name, params, words, v)
        checked += 1

"""Properties of the analysis over random layers, hardware and dataflows, plus hand-derived examples.

Every accepted (layer, dataflow, hardware) must conserve MACs exactly, keep ``0 < utilization <= 1``,
get no slower as the NoC gets faster, and give the same answer twice; every rejection, and every
failure of the text parsers, must be one :class:`AccelgenError` line.  Hypothesis runs derandomized
so that the examples (and the acceptance counts below) are the same on every run.  Convolutions
draw each axis's stride and each side's padding on their own; dilation and transposed convolutions
under both presets are in ``test_properties_window.py``.
"""

from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache
from typing import Any, Callable

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import (
    GEMM,
    LIBRARY,
    AccelgenError,
    Cluster,
    Conv2D,
    Dataflow,
    Hardware,
    Layer,
    LayerResult,
    SpatialMap,
    Sz,
    TemporalMap,
    analyze_layer,
    builtin_hardware,
    library_dataflow,
    parse_dataflow,
)
from costmodel.dataflow.directives import CONV_DIMS, GEMM_DIMS
from costmodel.hardware.hardware import hardware_from_yaml
from costmodel.workload.problem import problem_of
from costmodel.workload.yaml_io import parse_workload_yaml


def _settings(examples: int) -> Callable[[Any], Any]:
    """Derandomized (the same examples every run) and no example database (nothing carried over)."""
    return settings(derandomize=True, database=None, max_examples=examples, deadline=None)


@lru_cache(maxsize=None)
def _base_hardware() -> Hardware:
    return builtin_hardware("small")


def make_hw(num_pes: int, *, simd_lanes: int = 1, noc_bw: float | str = "inf",
            noc_latency: int = 0) -> Hardware:
    return _base_hardware().with_overrides(num_pes=num_pes, simd_lanes=simd_lanes, noc_bw=noc_bw,
                                           noc_latency=noc_latency)


def assert_one_line(err: AccelgenError) -> None:
    text = str(err)
    assert text and "\n" not in text and text.splitlines() == [text], repr(text)


def assert_deterministic(first: LayerResult, layer: Layer, df: Dataflow, hw: Hardware) -> None:
    """Property 4: the same question asked again, with equal but fresh objects, gives the same
    answer in the same order (``repr`` also tells NaN from NaN and keeps key order)."""
    again = analyze_layer(layer, parse_dataflow(str(df), name=df.name), hw.with_overrides())
    assert repr(again.to_dict()) == repr(first.to_dict())


def check_result(r: LayerResult, layer: Layer, hw: Hardware) -> None:
    """Properties 1 and 2: exact MAC conservation, utilization in (0, 1], runtime >= ideal."""
    assert r.step_macs == r.macs == layer.macs, (r.step_macs, r.macs, layer.macs, r.dataflow)
    assert 0 < r.utilization <= 1, (r.utilization, r.dataflow)
    assert r.runtime_cycles * hw.num_pes * hw.simd_lanes >= r.macs, (r.runtime_cycles, r.dataflow)


def analyze_or_reject(layer: Layer, df: Dataflow | str, hw: Hardware) -> LayerResult | None:
    """The result, or ``None`` when the analysis rejects the dataflow (with one line)."""
    try:
        return analyze_layer(layer, df, hw)
    except AccelgenError as err:
        assert_one_line(err)
        return None


# --- strategies -----------------------------------------------------------------------------------

_BATCHES = st.sampled_from([1, 1, 1, 1, 1, 2, 3])       # mostly 1; sometimes a repeated problem


@st.composite
def conv_layers(draw: st.DrawFn) -> Conv2D:
    r = draw(st.sampled_from([1, 2, 3, 5]))
    c = draw(st.integers(1, 8))
    depthwise = c > 1 and draw(st.booleans())
    pads = {side: draw(st.integers(0, 1)) for side in ("pad_top", "pad_bottom", "pad_left", "pad_right")}
    return Conv2D("conv", K=c if depthwise else draw(st.integers(1, 8)), C=c,
                  Y=draw(st.integers(r, 12)), X=draw(st.integers(r, 12)), R=r, S=r,
                  stride_y=draw(st.integers(1, 3)), stride_x=draw(st.integers(1, 3)), **pads,
                  groups=c if depthwise else 1, N=draw(_BATCHES))


def gemm_layers() -> st.SearchStrategy[GEMM]:
    side = st.integers(1, 40)
    return st.builds(GEMM, st.just("gemm"), M=side, N=side, K=side, batch=_BATCHES)


def layers() -> st.SearchStrategy[Layer]:
    return st.one_of(conv_layers(), gemm_layers())


def hardware() -> st.SearchStrategy[Hardware]:
    return st.builds(make_hw, st.sampled_from([1, 2, 3, 4, 6, 8, 16, 64]),
                     simd_lanes=st.sampled_from([1, 2, 4]),
                     noc_bw=st.sampled_from([1, 2, 4, 64, math.inf]), noc_latency=st.integers(0, 2))


@st.composite
def random_dataflows(draw: st.DrawFn, layer: Layer, num_pes: int) -> Dataflow:
    """Directive lists a user could write: 1 or 2 levels, each a random subset and order of the
    layer's dims, 1 or 2 SpatialMaps, non-overlapping tiles, whole filters or row-stationary
    ``SpatialMap(1,1) R`` beside ``SpatialMap(1,1) Y``, sliding windows of t outputs."""
    conv = isinstance(layer, Conv2D)
    full = problem_of(layer).dims
    names = ("K", "C", "Y", "X", "R", "S") if conv else ("M", "N", "K")
    extent = {d: full[d] for d in names}                     # the dim as this level sees it
    outputs = {"Y": full["Y'"], "X": full["X'"]} if conv else {}
    directives: list[Any] = []
    for level in range(draw(st.integers(1, 2))):
        if level:
            directives.append(Cluster(draw(st.integers(1, num_pes))))
        chosen = draw(st.permutations(names))[:draw(st.integers(1, len(names)))]
        pair: tuple[str, ...] = ()
        if conv and draw(st.integers(0, 3)) == 0:       # a quarter of conv levels: row stationary
            pair = draw(st.sampled_from([("R", "Y"), ("S", "X")]))
            chosen += tuple(d for d in pair if d not in chosen)
            chosen = draw(st.permutations(chosen))
        spatial = set(pair) or set(draw(st.permutations(chosen))[:draw(st.sampled_from([1, 1, 1, 2]))])
        filt = {"Y": 1 if "R" in pair else extent.get("R", 1), "X": 1 if "S" in pair else extent.get("S", 1)}
        next_outputs = dict(outputs)
        for d in chosen:
            cls = SpatialMap if d in spatial else TemporalMap
            size: int | Sz
            if d in pair:
                size = ofs = 1
                if d in outputs:
                    next_outputs[d] = 1
            elif d in ("R", "S"):
                size = ofs = extent[d]
                if level == 0 and draw(st.booleans()):
                    size = ofs = Sz(d)
            elif d in ("Y", "X"):
                t = draw(st.integers(1, max(outputs[d], 1)))
                size, ofs = t + filt[d] - 1, t
                next_outputs[d] = t
            else:
                t = draw(st.integers(1, extent[d]))
                size = ofs = t
                if level == 0 and t == extent[d] and draw(st.booleans()):
                    size = ofs = Sz(d)
            directives.append(cls(size, ofs, d))
            extent[d] = min(extent[d], full[d] if isinstance(size, Sz) else size)
        outputs = next_outputs
    return Dataflow(tuple(directives), name="random")


@st.composite
def layer_hw_and_dataflow(draw: st.DrawFn) -> tuple[Layer, Hardware, Dataflow]:
    layer, hw = draw(layers()), draw(hardware())
    return layer, hw, draw(random_dataflows(layer, hw.num_pes))


def library_dataflows(layer: Layer, num_pes: int) -> list[Dataflow]:
    kind = "gemm" if isinstance(layer, GEMM) else "conv2d"
    out = []
    for name, template in LIBRARY.items():
        if template.layer_kind != kind:
            continue
        try:
            out.append(library_dataflow(name, layer, num_pes))
        except AccelgenError as err:       # e.g. yrp's Cluster(Sz(R)) larger than the array
            assert_one_line(err)
    return out


# --- 1, 2, 4: library templates -------------------------------------------------------------------

@_settings(150)
@given(layers(), hardware())
def test_library_dataflows_conserve_macs_and_are_deterministic(layer: Layer, hw: Hardware) -> None:
    for df in library_dataflows(layer, hw.num_pes):
        first = analyze_or_reject(layer, df, hw)
        if first is None:
            continue
        check_result(first, layer, hw)
        assert parse_dataflow(str(df), name=df.name) == df
        assert_deterministic(first, layer, df, hw)


def test_every_library_template_is_exercised() -> None:
    """Not vacuous: each template is accepted on a plain layer of its kind."""
    hw = make_hw(64)
    conv, gemm = Conv2D("c", K=4, C=4, Y=6, X=6, R=3, S=3), GEMM("g", M=8, N=8, K=8)
    for name, template in LIBRARY.items():
        layer = gemm if template.layer_kind == "gemm" else conv
        check_result(analyze_layer(layer, name, hw), layer, hw)


# --- 1, 2, 4: random user-written dataflows -------------------------------------------------------

RANDOM_EXAMPLES = 600


def test_random_dataflows_conserve_macs_and_are_deterministic() -> None:
    outcome: Counter[str] = Counter()

    @_settings(RANDOM_EXAMPLES)
    @given(layer_hw_and_dataflow())
    def check(case: tuple[Layer, Hardware, Dataflow]) -> None:
        layer, hw, df = case
        assert parse_dataflow(str(df), name=df.name) == df
        first = analyze_or_reject(layer, df, hw)
        outcome["accepted" if first is not None else "rejected"] += 1
        if first is None:
            return
        check_result(first, layer, hw)
        assert_deterministic(first, layer, df, hw)

    check()
    total = outcome["accepted"] + outcome["rejected"]
    assert total >= RANDOM_EXAMPLES // 2
    # The generator writes tilings the checks should accept: most must get through.
    assert outcome["accepted"] >= 0.5 * total, outcome


# --- 3: runtime never grows as the NoC gets faster ------------------------------------------------

_BANDWIDTHS: tuple[float, ...] = (1, 2, 8, 64, math.inf)
_LATENCIES = (2, 1, 0)


def assert_noc_monotone(layer: Layer, hw: Hardware, df: Dataflow) -> bool:
    """Runtimes over growing bandwidth (at ``hw``'s latency) and shrinking latency (at its
    bandwidth) never increase.  False when the dataflow is rejected."""
    noc = hw.noc[0]
    for sweep in ([{"noc_bw": bw} for bw in _BANDWIDTHS], [{"noc_latency": lat} for lat in _LATENCIES]):
        runtimes = []
        for change in sweep:
            r = analyze_or_reject(layer, df, hw.with_overrides(**change))
            if r is None:
                return False
            runtimes.append(r.runtime_cycles)
        assert runtimes == sorted(runtimes, reverse=True), (
            sweep, runtimes, noc.latency_cycles, noc.bandwidth_words_per_cycle, str(df))
    return True


def test_library_runtime_non_increasing_with_faster_noc() -> None:
    checked = Counter[bool]()      # a dataflow the analysis rejects checks nothing: count them

    @_settings(60)
    @given(layers(), hardware())
    def check(layer: Layer, hw: Hardware) -> None:
        for df in library_dataflows(layer, hw.num_pes):
            checked[assert_noc_monotone(layer, hw, df)] += 1

    check()
    assert checked[True] >= 60 and checked[True] >= checked[False], checked


def test_random_runtime_non_increasing_with_faster_noc() -> None:
    accepted = Counter[bool]()

    @_settings(200)
    @given(layer_hw_and_dataflow())
    def check(case: tuple[Layer, Hardware, Dataflow]) -> None:
        accepted[assert_noc_monotone(*case)] += 1

    check()
    assert accepted[True] >= accepted[False], accepted


# --- 5: parsers and analysis fail with one AccelgenError line and nothing else ---------------------

_TOKENS = ("TemporalMap", "SpatialMap", "Cluster", "Sz(", "(", ")", ",", ";", "-1", "0", "1", "2",
           "3", "16", "P", "L", "K", "C", "Y", "X", "R", "S", "Y'", "X'", "M", "N", "B", "Q", "k", "'",
           "\n", "// note", "//", " ", "\t", "Sz(R)", "Sz(Q)", "Cluster(4,P)", "Cluster(2, l)",
           "SpatialMap(1,1)", "TemporalMap(3,1)", "TemporalMap(Sz(S),Sz(S))")
_PROBE_LAYERS = (Conv2D("soup", K=4, C=3, Y=6, X=5, R=3, S=3), GEMM("soup_gemm", M=5, N=4, K=6))


def assert_parses_or_one_line(text: str) -> Dataflow | None:
    try:
        return parse_dataflow(text)
    except AccelgenError as err:
        assert_one_line(err)
        return None


@_settings(300)
@given(st.text())
def test_parse_dataflow_random_text(text: str) -> None:
    assert_parses_or_one_line(text)


@_settings(600)
@given(st.lists(st.sampled_from(_TOKENS), max_size=40), st.sampled_from(["", " ", "\n", "; "]))
def test_parse_dataflow_token_soup(tokens: list[str], sep: str) -> None:
    df = assert_parses_or_one_line(sep.join(tokens))
    if df is not None:
        assert parse_dataflow(str(df), name=df.name) == df


# Mostly well-formed pieces, with a few broken ones among them (0, -1, Q, YY, an empty dim).
_SIZES = st.sampled_from(["1", "2", "3", "16", " 2 ", "Sz(R)", "Sz(K)", "Sz(M)", "Sz(y')"] * 8
                         + ["0", "-1", "Sz(Q)"])
_DIM_TOKENS = st.sampled_from(["K", "C", "Y", "X", "R", "S", "Y'", "X'", "M", "N", "B", "k"] * 8
                              + ["Q", "YY", ""])


@st.composite
def directive_text(draw: st.DrawFn) -> str:
    """Directive-shaped lines, rarely broken: most parse, many are wrong for the layer."""
    kind = draw(st.sampled_from(["map"] * 16 + ["cluster"] * 3 + ["soup"]))
    if kind == "map":
        size = draw(_SIZES)
        offset = size if draw(st.booleans()) else draw(_SIZES)
        line = "{}({},{}) {}".format(draw(st.sampled_from(["TemporalMap", "SpatialMap"])), size, offset,
                                     draw(_DIM_TOKENS))
    elif kind == "cluster":
        mode = draw(st.sampled_from(["", ",P", ", L", ",p"] * 4 + [",Q"]))
        line = f"Cluster({draw(_SIZES)}{mode})"
    else:
        line = "".join(draw(st.lists(st.sampled_from(_TOKENS), max_size=6)))
    return line + draw(st.sampled_from(["", "", " // why", ";"]))


@_settings(400)
@given(st.lists(directive_text(), min_size=1, max_size=6), st.sampled_from(["\n", "; "]))
def test_directive_shaped_text_parses_or_fails_with_one_accelgen_line(lines: list[str], sep: str) -> None:
    df = assert_parses_or_one_line(sep.join(lines))
    if df is None:
        return
    assert parse_dataflow(str(df), name=df.name) == df
    hw = make_hw(4, noc_bw=2, noc_latency=1)
    for layer in _PROBE_LAYERS:
        r = analyze_or_reject(layer, df, hw)
        if r is not None:
            check_result(r, layer, hw)


def test_parse_dataflow_huge_integer_is_one_accelgen_line() -> None:
    """Python's int() refuses more than 4300 digits with a plain ValueError."""
    with pytest.raises(AccelgenError) as info:
        parse_dataflow("TemporalMap(" + "9" * 5000 + ",1) K; SpatialMap(1,1) C")
    assert_one_line(info.value)


# Every dim of either kind, and rarely one of neither.
_WILD_DIMS = tuple(dict.fromkeys(CONV_DIMS + GEMM_DIMS)) * 12 + ("Q",)
_WILD_DIM = st.sampled_from(_WILD_DIMS)


@st.composite
def wild_dataflows(draw: st.DrawFn) -> Dataflow:
    """Valid-looking directive lists that are often wrong for the layer: dims of the other kind,
    Sz of a missing dim, clusters larger than the array, overlapping, split or oversized tiles."""
    def size() -> int | Sz:
        return draw(st.one_of(st.integers(1, 14), st.builds(Sz, _WILD_DIM)))

    directives: list[Any] = []
    for level in range(draw(st.integers(1, 3))):
        if level:
            directives.append(Cluster(draw(st.one_of(st.integers(1, 80), st.builds(Sz, _WILD_DIM)))))
        dims = draw(st.lists(_WILD_DIM, min_size=1, max_size=5, unique=True))
        spatial = draw(st.sampled_from([1, 1, 1, 1, 2, 2, 2, 0, 3]))   # 0 and 3 are wrong too
        kinds = draw(st.permutations([SpatialMap] * spatial + [TemporalMap] * max(len(dims) - spatial, 0)))
        for kind, dim in zip(kinds, dims):
            a, b = size(), size()
            if isinstance(a, int) and isinstance(b, int):
                a, b = max(a, b), min(a, b)
            directives.append(kind(a, b, dim))
    return Dataflow(tuple(directives), name="wild")


@_settings(300)
@given(st.data(), layers(), hardware())
def test_wrong_dataflows_fail_with_one_accelgen_line(data: st.DataObject, layer: Layer, hw: Hardware) -> None:
    try:
        df = data.draw(wild_dataflows())
    except AccelgenError as err:           # rejected at construction (e.g. three SpatialMaps)
        assert_one_line(err)
        return
    assert parse_dataflow(str(df), name=df.name) == df
    r = analyze_or_reject(layer, df, hw)
    if r is not None:
        check_result(r, layer, hw)


def _yaml_documents() -> st.SearchStrategy[Any]:
    keys = st.one_of(st.sampled_from(["name", "num_pes", "simd_lanes", "l1_bytes_per_pe", "l2_bytes",
                                      "noc", "offchip_bw_words_per_cycle", "bandwidth_words_per_cycle",
                                      "latency_cycles", "hops", "data_widths", "energy", "area",
                                      "layers", "type", "K", "C", "Y", "X", "R", "S", "M", "N",
                                      "stride", "padding", "groups", "batch"]), st.text(max_size=5))
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 70), st.integers(), st.floats(),
                        st.sampled_from(["inf", "conv2d", "dwconv", "gemm", "small", "x y", ""]),
                        st.text(max_size=8))
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(keys, inner, max_size=6)),
                        max_leaves=20)


def assert_loader_accepts_or_one_line(load: Callable[[str], Any], text: str) -> None:
    try:
        load(text)
    except AccelgenError as err:
        assert_one_line(err)


@_settings(200)
@given(st.one_of(st.text(), st.builds(yaml.safe_dump, _yaml_documents())))
def test_hardware_yaml_fails_with_one_accelgen_line(text: str) -> None:
    assert_loader_accepts_or_one_line(hardware_from_yaml, text)


@_settings(200)
@given(st.one_of(st.text(), st.builds(yaml.safe_dump, _yaml_documents())))
def test_workload_yaml_fails_with_one_accelgen_line(text: str) -> None:
    assert_loader_accepts_or_one_line(parse_workload_yaml, text)


# --- hand-derived examples ------------------------------------------------------------------------

def test_cp_on_a_pointwise_conv_keeps_four_pes_busy() -> None:
    # C-P (K, Y, X temporal; C across the PEs), 1x1 conv K=2 C=4 Y=X=2 on 4 PEs, ideal NoC
    # (unlimited bandwidth, latency 0: every NoC delay is 0 + 1 - 1 = 0 cycles).
    # C=4 fills the 4 PEs with one channel each; every step each PE does 1 MAC (R=S=1) and the
    # spatial reduction sums them for free.  Steps = K * Y' * X' = 2 * 2 * 2 = 8 -> 8 cycles;
    # MACs = 2*4*1*1*2*2 = 32 = 4 PEs * 8 cycles, utilization 1.
    layer, hw = Conv2D("pw", K=2, C=4, Y=2, X=2, R=1, S=1), make_hw(4)
    r = analyze_layer(layer, "cp", hw)
    assert (r.macs, r.step_macs, r.runtime_cycles, r.used_pes, r.utilization) == (32, 32, 8, 4, 1.0)


def test_xp_on_a_3x3_conv_leaves_one_pe_idle() -> None:
    # X-P (SpatialMap(Sz(S),1) X: one output column per PE), K=C=1, 5x5 input, 3x3 filter, 4 PEs,
    # ideal NoC.  X' = 3 output columns -> 3 PEs busy, 1 idle.  Each step a PE does R*S = 9 MACs
    # (R, S whole); Y slides TemporalMap(3,1) over Y' = 3 rows -> 3 steps of 9 cycles = 27 cycles.
    # MACs = 9 * 3 * 3 = 81; utilization 81 / (4 * 27) = 0.75.  With 2 SIMD lanes a step takes
    # ceil(9 / 2) = 5 cycles -> 15 cycles.
    layer, hw = Conv2D("c3", K=1, C=1, Y=5, X=5, R=3, S=3), make_hw(4)
    r = analyze_layer(layer, "xp", hw)
    assert (r.macs, r.step_macs, r.runtime_cycles, r.utilization) == (81, 81, 27, 0.75)
    assert analyze_layer(layer, "xp", make_hw(4, simd_lanes=2)).runtime_cycles == 15


def test_nmk_on_a_small_gemm() -> None:
    # NMK on M=N=K=4, 4 PEs, ideal NoC: the K tile and cluster are min(64, 4) = 4, so one cluster
    # of 4 PEs, each holding one k.  The outer level walks N (4) x M (4, spatially over 1 cluster)
    # = 16 steps; each step the cluster does 4 MACs in 1 cycle -> 16 cycles, 64 MACs, util 1.
    layer, hw = GEMM("g", M=4, N=4, K=4), make_hw(4)
    r = analyze_layer(layer, "nmk", hw)
    assert (r.macs, r.step_macs, r.runtime_cycles, r.used_pes, r.utilization) == (64, 64, 16, 4, 1.0)


def test_single_step_pays_the_whole_noc_delay() -> None:
    # C-P, 1x1 conv K=1 C=4 Y=X=1 on 4 PEs: one step (everything in Init), so nothing overlaps:
    # runtime = ingress delay + compute.  Ingress = 4 inputs + 4 weights = 8 words; at 1 word per
    # cycle and latency 2: 1 hop * 2 + ceil(8 / 1) - 1 = 9 cycles; compute 1 MAC -> 10 cycles.
    # With an ideal NoC the same step takes the 1 compute cycle.
    layer = Conv2D("one", K=1, C=4, Y=1, X=1, R=1, S=1)
    assert analyze_layer(layer, "cp", make_hw(4, noc_bw=1, noc_latency=2)).runtime_cycles == 10
    assert analyze_layer(layer, "cp", make_hw(4)).runtime_cycles == 1


def test_row_stationary_by_hand() -> None:
    # Eyeriss-style, written as a user would: K=C=1, 4x4 input, 3x3 filter -> Y'=X'=2, 36 MACs;
    # 6 PEs = 2 clusters of 3, ideal NoC.  Cluster j takes output row j (input rows j..j+2); its
    # PE i pairs input row j+i with filter row i; X slides 3 columns by 1 over X' = 2 steps, S
    # whole.  A step: every PE does one filter row x 3 columns = 3 MACs -> 2 steps x 3 = 6 cycles;
    # 6 PEs x 3 MACs x 2 steps = 36 MACs, utilization 1.
    layer, hw = Conv2D("rs", K=1, C=1, Y=4, X=4, R=3, S=3), make_hw(6)
    df = Dataflow((SpatialMap(1, 1, "Y'"), Cluster(3), SpatialMap(1, 1, "Y"), SpatialMap(1, 1, "R"),
                   TemporalMap(3, 1, "X"), TemporalMap(3, 3, "S")), name="rs")
    r = analyze_layer(layer, df, hw)
    assert (r.macs, r.step_macs, r.runtime_cycles, r.utilization) == (36, 36, 6, 1.0)


# --- reproducers of what the properties found (minimal cases) -------------------------------------

def assert_exact_or_rejected(layer: Layer, directives: str, num_pes: int, **hw: Any) -> LayerResult | None:
    """A dataflow the step model cannot count must be rejected; one it accepts must be exact."""
    machine = make_hw(num_pes, **hw)
    r = analyze_or_reject(layer, parse_dataflow(directives), machine)
    if r is not None:
        check_result(r, layer, machine)
    return r


def test_two_spatial_maps_of_unrelated_dims_are_exact_or_rejected() -> None:
    # M and N both across 2 PEs: PE i gets (m=i, n=i), the diagonal only; 2 of the 4 MACs.
    assert_exact_or_rejected(GEMM("g", M=2, N=2, K=1), "SpatialMap(1,1) M; SpatialMap(1,1) N", 2)


def test_row_stationary_pair_over_several_output_rows_is_exact_or_rejected() -> None:
    # Y (3 rows) and R (2 rows) paired at one level: Y' = 2 output rows x 2 filter rows = 4 MACs.
    layer = Conv2D("rs", K=1, C=1, Y=3, X=1, R=2, S=1)
    assert_exact_or_rejected(layer, "SpatialMap(1,1) Y; SpatialMap(1,1) R", 2)   # counts 3
    # One output row, but one PE: the pair folds over time as Y x R = 4 steps of a 2-MAC layer.
    layer = Conv2D("rs1", K=1, C=1, Y=2, X=1, R=2, S=1)
    assert_exact_or_rejected(layer, "SpatialMap(1,1) Y; SpatialMap(1,1) R", 1)   # counts 4


def test_filter_tile_larger_than_the_filter_is_exact_or_rejected() -> None:
    # A 3x3 template applied to a 1x1 layer (Y'=X'=3, 9 MACs): counts 1 MAC, utilization 9.
    layer = Conv2D("pw", K=1, C=1, Y=3, X=3, R=1, S=1)
    assert_exact_or_rejected(layer, "SpatialMap(1,1) K; TemporalMap(3,3) R; TemporalMap(3,3) S", 1)


def test_output_and_input_columns_at_one_level_are_exact_or_rejected() -> None:
    # X and X' are one dimension; mapping both at one level counts every MAC twice (4 of 2).
    layer = Conv2D("xx", K=1, C=1, Y=1, X=2, R=1, S=1)
    assert_exact_or_rejected(layer, "SpatialMap(1,1) X; TemporalMap(1,1) X'", 1)


def test_sub_cluster_of_an_edge_tile_is_not_faster_than_its_macs() -> None:
    # N=6 in outer tiles of 4 (4, then an edge of 2), each cut into inner tiles of 3 on 1 PE with an
    # ideal NoC: 1 MAC per cycle and nothing else, so 6 cycles.  The inner level reuses the tile
    # sizes of the full outer tile for the edge one and reports 5 (utilization 1.2).
    layer = GEMM("g", M=1, N=6, K=1)
    assert_exact_or_rejected(layer, "SpatialMap(4,4) N; Cluster(1,P); SpatialMap(3,3) N", 1)


def test_depthwise_k_map_inside_a_cluster_changes_nothing() -> None:
    # Depthwise C=8, 2x2 filter on a 2x2 input (one output pixel, 4 MACs per channel), 8 PEs =
    # 4 clusters of 2: C across the clusters (2 folds), one channel per cluster on one PE ->
    # 2 folds x 4 MACs = 8 cycles.  K is 1 in a depthwise layer, so TemporalMap(1,1) K is a no-op;
    # today the inner level sees K = 0, computes nothing and the layer is rejected as "no work"
    # (with a slower NoC it is accepted at 2 cycles: 32 MACs on 8 PEs, utilization 2).
    layer = Conv2D("dw", K=8, C=8, Y=2, X=2, R=2, S=2, groups=8)
    plain = "SpatialMap(1,1) C; Cluster(2,P); SpatialMap(1,1) C"
    with_k = "SpatialMap(1,1) C; Cluster(2,P); TemporalMap(1,1) K; SpatialMap(1,1) C"
    assert analyze_layer(layer, parse_dataflow(plain), make_hw(8)).runtime_cycles == 8
    assert analyze_layer(layer, parse_dataflow(with_k), make_hw(8)).runtime_cycles == 8
    assert_exact_or_rejected(layer, with_k, 8, noc_bw=64, noc_latency=1)


def test_error_location_with_a_newline_stays_one_line() -> None:
    # A dataflow file name is the error's location; the message body is flattened, the location not.
    with pytest.raises(AccelgenError) as info:
        parse_dataflow("bogus", name="two\nlines.m")
    assert_one_line(info.value)

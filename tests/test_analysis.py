"""The analysis API: exact MACs through the step model, results, constraints, errors."""

from __future__ import annotations

import math

import pytest

from costmodel import (
    GEMM,
    LIBRARY,
    ZOO,
    AccelgenError,
    Conv2D,
    analyze_layer,
    analyze_model,
    builtin_hardware,
    get_model,
    library_dataflow,
    parse_dataflow,
)

SMALL = builtin_hardware("small")


@pytest.mark.parametrize("num_pes", [8, 64, 256])
@pytest.mark.parametrize("model_name", sorted(ZOO))
def test_step_model_counts_exact_macs_for_every_library_dataflow(model_name: str, num_pes: int) -> None:
    hw = SMALL.with_overrides(num_pes=num_pes)
    checked = 0
    for layer in get_model(model_name).layers:
        for name, template in LIBRARY.items():
            if template.layer_kind != layer.kind:
                continue
            try:
                result = analyze_layer(layer, name, hw)
            except AccelgenError as err:
                assert "Cluster(" in str(err)   # only a cluster larger than the array is refused
                continue
            assert result.step_macs == result.macs == layer.macs, (layer.describe(), name)
            assert result.runtime_cycles * hw.num_pes * hw.simd_lanes >= result.macs
            checked += 1
    assert checked >= len(get_model(model_name).layers)


def test_model_totals_add_up() -> None:
    model = get_model("mobilenetv2")
    result = analyze_model(model, SMALL, dataflow="kcp")
    assert len(result.layers) == len(model.layers)
    assert result.total["macs"] == model.macs == sum(r.macs for r in result.layers)
    assert result.total["runtime_cycles"] == sum(r.runtime_cycles for r in result.layers)
    assert math.isclose(result.total["energy_pj"]["total"], sum(r.energy_pj["total"] for r in result.layers))
    assert result.total["runtime_us"] == result.total["runtime_cycles"] / SMALL.clock_mhz


def test_gemm_layers_take_the_gemm_dataflow() -> None:
    model = get_model("resnet50")
    result = analyze_model(model, SMALL, dataflow="xp")
    names = {(r.layer_type, r.dataflow_name) for r in result.layers}
    assert names == {("CONV", "xp"), ("GEMM", "nmk")}
    custom = parse_dataflow("TemporalMap(1,1) N; SpatialMap(1,1) M; TemporalMap(8,8) K; Cluster(8); "
                            "TemporalMap(1,1) N; TemporalMap(1,1) M; SpatialMap(1,1) K", name="mine")
    result = analyze_model(model, SMALL, dataflow="xp", gemm_dataflow=custom)
    assert {r.dataflow_name for r in result.layers if r.layer_type == "GEMM"} == {"mine"}


def test_repeats_scale_groups_and_batches() -> None:
    one = analyze_layer(GEMM("g", M=16, N=32, K=64), "nmk", SMALL)
    four = analyze_layer(GEMM("g", M=16, N=32, K=64, batch=4), "nmk", SMALL)
    assert four.macs == 4 * one.macs and four.runtime_cycles == 4 * one.runtime_cycles
    assert four.l2_reads == {t: 4 * v for t, v in one.l2_reads.items()}
    grouped = analyze_layer(Conv2D("c", K=8, C=8, Y=8, X=8, R=3, S=3, groups=2), "cp", SMALL)
    assert grouped.macs == grouped.step_macs == 2 * 4 * 4 * 9 * 36


def test_results_carry_units_and_directives() -> None:
    r = analyze_layer(Conv2D("c", K=16, C=8, Y=10, X=10, R=3, S=3), "kcp", SMALL)
    assert r.dataflow.startswith("SpatialMap(1,1) K; TemporalMap(64,64) C; TemporalMap(3,3) R")
    assert r.runtime_us == r.runtime_cycles / SMALL.clock_mhz
    assert 0 < r.utilization <= 1
    assert set(r.energy_pj) == {"mac", "l1", "l2", "noc", "dram", "total"}
    assert r.energy_pj["total"] == pytest.approx(sum(v for k, v in r.energy_pj.items() if k != "total"))
    assert r.area_mm2 == SMALL.area_mm2() > 0
    assert r.dram_reads == 8 * 10 * 10 + 16 * 8 * 9 and r.dram_writes == 16 * 8 * 8
    d = r.to_dict()
    assert d["macs"] == r.macs and d["infeasible_reasons"] == []


def test_designs_that_do_not_fit_are_reported_with_reasons() -> None:
    layer = Conv2D("c", K=64, C=64, Y=30, X=30, R=3, S=3)
    tiny_buffers = SMALL.with_overrides(l1_bytes_per_pe=4, l2_bytes=64, offchip_bw=0.001)
    r = analyze_layer(layer, "kcp", tiny_buffers)
    assert not r.feasible
    text = " | ".join(r.infeasible_reasons)
    assert "L1 needs" in text and "has 4 B" in text
    assert "L2 needs" in text and "has 64 B" in text
    assert "off-chip traffic needs" in text
    assert analyze_layer(layer, "kcp", SMALL).feasible


def test_a_faster_noc_never_slows_a_layer_down() -> None:
    layer = Conv2D("c", K=32, C=16, Y=18, X=18, R=3, S=3)
    for name in ("kcp", "yrp", "yxp", "xp", "cp"):
        runtimes = [analyze_layer(layer, name, SMALL.with_overrides(noc_bw=bw)).runtime_cycles
                    for bw in (1, 4, 16, 64, "inf")]
        assert runtimes == sorted(runtimes, reverse=True), name


@pytest.mark.parametrize("text, message", [
    ("TemporalMap(2,1) K; SpatialMap(1,1) C", r"tiles of K overlap \(offset 1 < size 2\)"),
    ("SpatialMap(1,1) K; TemporalMap(5,5) Y; TemporalMap(3,3) R",
     r"a 5-row window under a 3-row filter produces 3 outputs but advances 5: outputs would be skipped"),
    ("SpatialMap(1,1) K; TemporalMap(5,1) Y; TemporalMap(3,3) R",
     r"advances 1: outputs would be recomputed; expected offset 3"),
    ("SpatialMap(1,1) K; TemporalMap(1,1) R", r"the filter's R is split \(1 of 3\)"),
    ("SpatialMap(1,1) K; TemporalMap(1,1) M", r"dimension 'M' is not a dimension of a conv2d layer"),
    ("SpatialMap(1,1) K; Cluster(128); SpatialMap(1,1) C", r"Cluster\(128\) needs 128 PEs .* has 64"),
])
def test_dataflows_the_model_cannot_count_are_refused(text: str, message: str) -> None:
    layer = Conv2D("c", K=8, C=4, Y=9, X=9, R=3, S=3)
    with pytest.raises(AccelgenError, match=message) as info:
        analyze_layer(layer, parse_dataflow(text, name="mine"), SMALL)
    assert "\n" not in str(info.value) and str(info.value).startswith("mine")


def test_library_rejects_the_wrong_layer_kind_and_unknown_names() -> None:
    with pytest.raises(AccelgenError, match="'nmk' is for gemm layers, not the conv2d layer"):
        library_dataflow("nmk", Conv2D("c", K=1, C=1, Y=3, X=3, R=3, S=3), 8)
    with pytest.raises(AccelgenError, match="unknown dataflow 'zz'; the library has kcp, yrp"):
        library_dataflow("zz", GEMM("g", M=1, N=1, K=1), 8)


def test_unknown_preset_says_what_exists() -> None:
    with pytest.raises(AccelgenError, match="unknown preset 'timeloop'; expected one of maestro, hwgen"):
        analyze_layer(GEMM("g", M=4, N=4, K=4), "nmk", SMALL, preset="timeloop")


def test_library_templates_fit_small_arrays() -> None:
    layer = Conv2D("c", K=8, C=8, Y=8, X=8, R=3, S=3)
    tiny = builtin_hardware("tiny")
    for name in ("kcp", "yrp", "yxp", "xp", "cp"):
        r = analyze_layer(layer, name, tiny)
        assert r.step_macs == r.macs and r.used_pes <= tiny.num_pes


def test_the_bottleneck_is_named() -> None:
    # kcp, 1x1 conv on 64 PEs: each cluster step loads 64 inputs + 64 weights (2 NoC cycles at
    # 64 words/cycle) for 1 MAC per PE, so the steps wait on ingress; an ideal NoC makes them
    # compute-bound.
    layer = Conv2D("c", K=64, C=64, Y=8, X=8, R=1, S=1)
    assert analyze_layer(layer, "kcp", SMALL).bound == "noc-ingress"
    assert analyze_layer(layer, "kcp", SMALL.with_overrides(noc_bw="inf", noc_latency=0)).bound == "compute"

"""The hwgen schedule and preset without a simulator: the schedule computes every MAC exactly
once (numerics equal numpy), the preset's figures are consistent, what hwgen cannot build is
refused in one line, and `accelgen emit` writes a design and its manifest."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from accelgen.cli import main
from costmodel import AccelgenError
from costmodel.analysis import analyze_layer, resolve_dataflow
from costmodel.dataflow.library import library_dataflow
from costmodel.hardware.hardware import NoCLevel, builtin_hardware
from costmodel.hwgen_preset.closed import closed_summary, hwgen_cycles
from costmodel.hwgen_preset.preset import hwgen_layer, hwgen_structure, l2_split
from costmodel.hwgen_preset.rules import LOOP_DIMS, TIMING, host_offset_bits, l1_bytes, slide_extent
from costmodel.hwgen_preset.structure import structure_of, tiles_of
from costmodel.hwgen_preset.walk import _extent, reference_summary, steps
from costmodel.workload.layers import GEMM, Conv2D
from costmodel.workload.yaml_io import parse_layer_spec
from hwgen.layout import natural_layout
from sim_tests.driver import make_job, random_operands, reference_output
from sim_tests.matrix import CASES as MATRIX, DATAFLOWS, array, dataflow_spec, layers

TINY = builtin_hardware("tiny")


def schedule_numerics(layer, dataflow: str, hw):
    """Run the schedule in numpy: each PE of each step does the MACs of its tile.  Returns the
    outputs in L2 layout, the expected ones, and how often each (k, c, y, x) was computed."""
    df = resolve_dataflow(dataflow_spec(dataflow), layer, hw)
    s = hwgen_structure(df, layer, hw, fit=[layer])
    t = tiles_of(s, df, layer)
    a, b = random_operands(layer, seed=1)
    x, w, expected = natural_layout(layer, t, a, b)
    K, C, Y, X = (t.dims[d] for d in LOOP_DIMS)
    R, S, sy, sx = t.dims["R"], t.dims["S"], t.stride_y, t.stride_x
    out = np.zeros((K, Y, X), dtype=np.int64)
    count = np.zeros((K, C, Y, X), dtype=np.int64)
    for step in steps(s, t):
        for u0 in range(s.n0):
            for u1 in range(s.n1):
                ext = [_extent(s, t, step, di, (u0, u1)) for di in range(4)]
                if any(n == 0 for _, n in ext):
                    continue
                (k0, kn), (c0, cn), (y0, yn), (x0, xn) = ext
                count[k0:k0 + kn, c0:c0 + cn, y0:y0 + yn, x0:x0 + xn] += 1
                for yy in range(y0, y0 + yn):
                    for xx in range(x0, x0 + xn):
                        patch = x[c0:c0 + cn, yy * sy: yy * sy + R, xx * sx: xx * sx + S]
                        out[k0:k0 + kn, yy, xx] += np.einsum("kcrs,crs->k", w[k0:k0 + kn, c0:c0 + cn], patch)
    return out.reshape(-1), np.array(expected), count


CASES = [(df, arr, spec) for df, arr in MATRIX for spec in DATAFLOWS[df]]


@pytest.mark.parametrize("dataflow,array_name,spec", CASES)
def test_schedule_computes_every_mac_once(dataflow, array_name, spec):
    layer = [l for l in layers(dataflow)][DATAFLOWS[dataflow].index(spec)]
    out, expected, count = schedule_numerics(layer, dataflow, array(array_name))
    assert count.min() == 1 and count.max() == 1
    assert np.array_equal(out, expected)


@settings(max_examples=80, deadline=None)
@given(k=st.integers(1, 9), c=st.integers(1, 12), y=st.integers(1, 9), x=st.integers(1, 9),
       r=st.integers(1, 4), s=st.integers(1, 4), stride_y=st.integers(1, 4), stride_x=st.integers(1, 4),
       pads=st.tuples(*[st.integers(0, 2)] * 4), dataflow=st.sampled_from(["kcp", "cp", "xp"]),
       pes=st.sampled_from([2, 4, 8]), lanes=st.sampled_from([1, 2, 3]))
def test_schedule_numerics_random_shapes(k, c, y, x, r, s, stride_y, stride_x, pads, dataflow, pes, lanes):
    """Every dimension drawn on its own: filter rows and columns, the stride of each axis, each
    side's padding, sizes, the array and its SIMD lanes.  (R and S drawn together hid a
    wrong-output bug when the stride is wider than one filter dimension but not the other.)"""
    top, bottom, left, right = pads
    if y + top + bottom < r or x + left + right < s:
        return                                   # no output: Conv2D refuses it (tested elsewhere)
    layer = Conv2D("r", K=k, C=c, Y=y, X=x, R=r, S=s, stride_y=stride_y, stride_x=stride_x,
                   pad_top=top, pad_bottom=bottom, pad_left=left, pad_right=right)
    hw = replace(TINY, num_pes=pes, simd_lanes=lanes, l1_bytes_per_pe=1 << 16)
    out, expected, count = schedule_numerics(layer, dataflow, hw)
    assert count.min() == 1 and count.max() == 1 and np.array_equal(out, expected)


@pytest.mark.parametrize("r,s,stride", [(3, 1, 2), (1, 3, 2), (3, 2, 3), (2, 3, 3), (1, 1, 3)])
def test_stride_wider_than_one_filter_dimension(r, s, stride):
    """The held-out case: stride 2 with R=3, S=1 compacts the columns only (stride_x = 1)."""
    layer = Conv2D("w", K=3, C=2, Y=7, X=6, R=r, S=s, stride=stride)
    for dataflow in ("kcp", "cp", "xp"):
        out, expected, count = schedule_numerics(layer, dataflow, replace(TINY, l1_bytes_per_pe=1 << 16))
        assert count.min() == 1 and count.max() == 1 and np.array_equal(out, expected), dataflow


def test_reference_output_is_numpy_convolution():
    layer = Conv2D("c", K=2, C=3, Y=5, X=5, R=3, S=3, stride=2, padding=1)
    a, b = random_operands(layer, 3)
    out = reference_output(layer, a, b)
    xp = np.pad(a, ((0, 0), (1, 1), (1, 1)))
    assert out[1, 1, 2] == int((b[1] * xp[:, 2:5, 4:7]).sum())


GOLDEN = yaml.safe_load((Path(__file__).parent / "data" / "hwgen_golden.yaml").read_text())


@pytest.mark.parametrize("case", GOLDEN, ids=[f"{c['dataflow']}-{c['array']}-{c['layer']}" for c in GOLDEN])
def test_preset_predicts_the_cycles_measured_on_the_rtl(case):
    """Golden figures measured in simulation: the preset, the vectorised schedule and the step
    walk all give them."""
    hw = array(case["array"])
    layer = parse_layer_spec(case["layer"], name="golden")
    r = analyze_layer(layer, dataflow_spec(case["dataflow"]), hw, preset="hwgen")
    df = resolve_dataflow(dataflow_spec(case["dataflow"]), layer, hw)
    s, t, _ = hwgen_layer(df, layer, hw)
    assert r.runtime_cycles == case["cycles"]
    assert reference_summary(s, t)["cycles"] == case["cycles"]


def test_preset_is_the_schedule():
    layer = Conv2D("c", K=8, C=4, Y=6, X=6, R=3, S=3)
    r = analyze_layer(layer, "kcp", TINY, preset="hwgen")
    df = resolve_dataflow("kcp", layer, TINY)
    s, t, f = hwgen_layer(df, layer, TINY)
    walk = reference_summary(s, t)                             # the step-by-step reference
    assert r.runtime_cycles == walk["cycles"] and f["cycles"] == walk["cycles"]
    assert r.step_macs == r.macs == layer.macs == walk["step_macs"]               # every MAC once
    assert r.preset == "hwgen" and r.bound in ("compute", "noc-ingress", "noc-egress")
    assert r.l1_reads["input"] == r.l1_reads["weight"] == layer.macs
    # tiny's 4-word NoC keeps this layer compute-bound: its input windows slide along X, a
    # column of each of 3 rows a step; a narrower NoC slows it down, and one wider than a chunk
    # of four words for each of the 8 classes does not help any more
    def at(words):
        return analyze_layer(layer, "kcp", replace(TINY, noc=(NoCLevel(words, 1),)), preset="hwgen")
    assert s.slide_x and r.bound == "compute"
    assert at(1).runtime_cycles > at(2).runtime_cycles > r.runtime_cycles
    assert at(1).bound == at(2).bound == "noc-ingress"
    assert at(64).runtime_cycles == at(128).runtime_cycles < r.runtime_cycles


def test_input_windows_slide_in_l1():
    """A window that moves along X loads only its new columns: on tiny, kcp's 3x3 windows over a
    6x6 input (4x4 outputs) load 3 rows x 3 columns for the first output of each row and 3 x 1
    for the next three, a word of each of the 8 classes a column (C = 4, padded to the 8 PEs);
    along Y, only its new rows."""
    layer = Conv2D("c", K=8, C=4, Y=6, X=6, R=3, S=3)
    df = resolve_dataflow("kcp", layer, TINY)
    s, t, f = hwgen_layer(df, layer, TINY)
    assert s.slide_x and slide_extent(s, "X") == 4         # two windows of 3 columns at stride 1 (or one at 2)
    per_row = 8 * (3 * 3 + 3 * (3 * 1))                 # classes x (first window + three slides)
    assert f["l2_reads"]["input"] == 8 * 4 * per_row    # K x Y rows of windows
    assert f["l1_writes"]["input"] == 8 * 4 * (3 * 3 + 3 * 3) * 4   # K x Y x (first + slides) x the 4 busy PEs
    still = closed_summary(replace(s, slide_x=False), t)
    assert still["l2_reads"]["input"] == 8 * 4 * 4 * 8 * 9 and still["cycles"] > f["cycles"]
    assert reference_summary(s, t)["cycles"] == f["cycles"]
    # a window wider than a slide (stride 3 = S) does not overlap the last one: every step loads it whole
    wide = Conv2D("w", K=8, C=4, Y=12, X=12, R=3, S=3, stride=3)
    s3, t3, f3 = hwgen_layer(resolve_dataflow("kcp", wide, TINY), wide, TINY)
    assert f3["l2_reads"]["input"] == 8 * 4 * 4 * 8 * 9
    # where two windows a row do not fit the PE's L1, the design loads each window whole
    s8 = hwgen_structure(resolve_dataflow("kcp(x_tile=8)", layer, TINY), layer, TINY, fit=[layer])
    assert not s8.slide_x and l1_bytes(replace(s8, slide_x=True).l1_words()) > TINY.l1_bytes_per_pe
    # designs whose PEs spread X, or take several words of a chunk, keep the window a row
    for name, hw in (("xp", TINY), ("kcp", replace(TINY, noc=(NoCLevel(16, 1),)))):
        assert not hwgen_structure(resolve_dataflow(name, layer, hw), layer, hw, fit=[layer]).slide_x
    # xp on tiny: the 5 output columns of a 7-wide input fit the 8 PEs, so the window moves
    # along Y, a row at a time: per (filter, channel), 3 rows of 7 words, then 1 for each of the
    # next three output rows; each of the 5 busy PEs writes its 3 columns of them
    tall = Conv2D("t", K=5, C=3, Y=6, X=7, R=3, S=3)
    sy, ty, fy = hwgen_layer(resolve_dataflow("xp", tall, TINY), tall, TINY)
    assert sy.slide_y and not sy.slide_x and slide_extent(sy, "Y") == 4
    assert fy["l2_reads"]["input"] == 5 * 3 * (3 + 3 * 1) * 7
    assert fy["l1_writes"]["input"] == 5 * 3 * (3 + 3 * 1) * 5 * 3
    whole = closed_summary(replace(sy, slide_y=False), ty)
    assert whole["l2_reads"]["input"] == 5 * 3 * 4 * 3 * 7 and whole["cycles"] > fy["cycles"]
    assert reference_summary(sy, ty)["cycles"] == fy["cycles"]


def test_timing_constants_the_rtl_cannot_build_are_refused():
    layer = Conv2D("c", K=8, C=4, Y=6, X=6, R=3, S=3)
    s, t, _ = hwgen_layer(resolve_dataflow("kcp", layer, TINY), layer, TINY)
    for field, value in (("min_slot_cycles", 1), ("load_latency_cycles", 3), ("slot_overhead_cycles", 1), ("start_cycles", 2)):
        with pytest.raises(AccelgenError, match=f"hwgen timing: {field} is {value}; the generated RTL has"):
            hwgen_cycles(s, t, replace(TIMING, **{field: value}))
        with pytest.raises(AccelgenError, match=f"{field} is {value}"):
            reference_summary(s, t, replace(TIMING, **{field: value}))


def test_simd_lanes_share_the_filter_window():
    layer = Conv2D("c", K=4, C=4, Y=6, X=6, R=3, S=3)
    df = resolve_dataflow("xp", layer, TINY)
    cycles, computing = {}, {}
    for lanes in (1, 2, 3, 9):
        hw = replace(TINY, simd_lanes=lanes, noc=(NoCLevel(8, 1),))
        s, t, f = hwgen_layer(df, layer, hw)
        # one 3x3 window per step, and the MAC's last write (COMPUTE_LATENCY)
        assert f["compute_cycles"] == f["steps"] * (-(-9 // lanes) + TIMING.compute_latency_cycles)
        cycles[lanes], computing[lanes] = f["cycles"], f["compute_cycles"]
    assert computing[1] > computing[2] > computing[3] > computing[9]
    # (from two lanes on, a step's five or fewer issues are shorter than another engine's part
    # of its slot, which then bounds it: the layer takes no longer, and no shorter)
    assert cycles[1] > cycles[2] >= cycles[3] >= cycles[9]


def test_preset_repeats_groups_and_batches():
    g = GEMM("g", M=4, N=6, K=5, batch=3)
    one = analyze_layer(GEMM("g", M=4, N=6, K=5), "nmk", TINY, preset="hwgen")
    assert analyze_layer(g, "nmk", TINY, preset="hwgen").runtime_cycles == 3 * one.runtime_cycles


@pytest.mark.parametrize("layer,dataflow,hw,message", [
    (Conv2D("d", K=8, C=8, Y=6, X=6, R=3, S=3, groups=8), "kcp", TINY, "depthwise layers are not generated"),
    (Conv2D("c", K=8, C=8, Y=6, X=6, R=3, S=3), "yrp", TINY, "level 1 has 2 SpatialMaps; expected exactly one"),
    (Conv2D("c", K=8, C=8, Y=6, X=6, R=3, S=3), "kcp", replace(TINY, noc=(NoCLevel(3, 1),)),
     "power of two words per cycle"),
])
def test_refusals_are_one_line(layer, dataflow, hw, message):
    with pytest.raises(AccelgenError, match=message) as err:
        analyze_layer(layer, dataflow, hw, preset="hwgen")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("layer,message", [
    (Conv2D("c", K=8, C=8, Y=6, X=6, R=5, S=5), "filter R=5 exceeds the generated maximum 3"),
    (Conv2D("c", K=8, C=8, Y=9, X=9, R=3, S=3, stride=2), "stride 2 exceeds the generated maximum 1"),
])
def test_a_design_refuses_layers_beyond_its_buffers(layer, message):
    small = Conv2D("c", K=8, C=8, Y=6, X=6, R=3, S=3)
    s = hwgen_structure(resolve_dataflow("kcp", small, TINY), small, TINY)
    with pytest.raises(AccelgenError, match=message):
        tiles_of(s, resolve_dataflow("kcp", layer, TINY), layer)
    assert analyze_layer(layer, "kcp", TINY, preset="hwgen").runtime_cycles > 0   # a design made for it


def test_closed_schedule_equals_the_step_walk():
    import random

    rng = random.Random(5)
    for _ in range(120):
        hw = replace(TINY, num_pes=rng.choice([4, 8, 16]), simd_lanes=rng.choice([1, 2, 3]),
                     noc=(NoCLevel(rng.choice([1, 2, 4, 8]), 1),))
        dataflow = rng.choice(["kcp", "cp", "xp", "nmk"])
        if dataflow == "nmk":
            layer = GEMM("g", M=rng.randint(1, 12), N=rng.randint(1, 12), K=rng.randint(1, 40))
        else:
            layer = Conv2D("c", K=rng.randint(1, 10), C=rng.randint(1, 20), Y=rng.randint(3, 9), X=rng.randint(3, 9),
                           R=rng.choice([1, 2, 3]), S=rng.choice([1, 2, 3]), stride_y=rng.randint(1, 2),
                           stride_x=rng.randint(1, 2), pad_top=rng.randint(0, 1), pad_left=rng.randint(0, 1))
        df = resolve_dataflow(dataflow, layer, hw)
        s = hwgen_structure(df, layer, hw)
        t = tiles_of(s, df, layer)
        assert closed_summary(s, t) == reference_summary(s, t), (dataflow, layer, hw.num_pes)


def test_driver_refuses_what_the_l2_cannot_hold():
    layer = Conv2D("c", K=8, C=8, Y=20, X=20, R=3, S=3)
    df = resolve_dataflow("kcp", layer, TINY)
    s = hwgen_structure(df, layer, TINY)
    t = tiles_of(s, df, layer)
    a, b = random_operands(layer, 0)
    with pytest.raises(AccelgenError, match="input needs 3200 L2 words, the generated L2 holds 100"):
        make_job(s, t, layer, a, b, {"input": 100, "weight": 10**4, "output": 10**4})


def test_one_design_refuses_a_dataflow_of_another_shape():
    layer = Conv2D("c", K=8, C=8, Y=6, X=6, R=3, S=3)
    s = structure_of(library_dataflow("kcp", layer, 8), layer, 8)
    with pytest.raises(AccelgenError, match="another shape"):
        tiles_of(s, library_dataflow("xp", layer, 8), layer)


def test_library_templates_generate_on_every_array():
    conv, gemm = Conv2D("c", K=8, C=8, Y=8, X=8, R=3, S=3), GEMM("g", M=8, N=8, K=8)
    for name in ("tiny", "small", "large"):
        hw = builtin_hardware(name)
        for df, layer in (("kcp", conv), ("cp", conv), ("xp", conv), ("nmk", gemm)):
            s = hwgen_structure(resolve_dataflow(df, layer, hw), layer, hw)   # L1 fits, NoC buildable
            assert s.used_pes == hw.num_pes


def test_emit_writes_verilog_filelist_and_manifest(tmp_path: Path, capsys):
    out = tmp_path / "design"
    assert main(["emit", "--dataflow", "kcp", "--hw", "tiny", "--out", str(out),
                 "--model", str(Path(__file__).parents[1] / "configs" / "workloads" / "tiny_cnn.yaml")]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert (out / "files.f").read_text().split() == ["accelgen_top.v", "accelgen_axi_top.v"]
    assert "module accelgen_top" in (out / "accelgen_top.v").read_text()
    assert "module accelgen_axi_top" in (out / "accelgen_axi_top.v").read_text()
    assert manifest["structure"]["num_pes"] == 8 and manifest["core"]["ports"]["bus_addr"] == 24
    assert manifest["core"]["psum_clear_cycles"] == 0           # (one output a PE: registers)
    assert manifest["top"] == "accelgen_axi_top" and manifest["ports"]["s_axil_awaddr"]["width"] == 12
    by_name = {entry["layer"]: entry for entry in manifest["layers"]}
    conv1 = Conv2D("conv1", K=8, C=3, Y=16, X=16, R=3, S=3, padding=1)
    df = resolve_dataflow("kcp", conv1, TINY)
    s = hwgen_structure(df, conv1, TINY)
    assert by_name["conv1"]["predicted_cycles_per_run"] == hwgen_cycles(s, tiles_of(s, df, conv1))
    assert "depthwise" in by_name["dw3"]["refused"]


def test_emit_bad_input_is_one_line(tmp_path: Path, capsys):
    assert main(["emit", "--dataflow", "yrp", "--hw", "tiny", "--out", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "2 SpatialMaps" in err and not (tmp_path / "x").exists()


def test_explore_with_hwgen_gives_points_emit_accepts(tmp_path: Path, capsys):
    """Every Pareto point of a hwgen search is a design the generator emits unchanged, and the
    emitted manifest predicts the runtime the search reported."""
    root = Path(__file__).parents[1]
    model = str(root / "configs" / "workloads" / "tiny_dense.yaml")
    out = tmp_path / "search"
    assert main(["explore", "--model", model, "--space", str(root / "configs" / "space" / "hwgen_demo.yaml"),
                 "--preset", "hwgen", "--objectives", "runtime,area", "--out", str(out), "--no-progress"]) == 0
    rows = (out / "pareto.csv").read_text().splitlines()
    header = rows[0].split(",")
    first = dict(zip(header, rows[1].split(",")))
    emitted = tmp_path / "emitted"
    assert main(["emit", "--design", str(out / first["file"]), "--model", model, "--out", str(emitted)]) == 0
    total = 0
    for kind in ("conv2d", "gemm"):
        manifest = json.loads((emitted / kind / "manifest.json").read_text())
        assert all("refused" not in entry for entry in manifest["layers"])
        total += sum(entry["predicted_cycles_per_run"] * entry["runs"] for entry in manifest["layers"])
    assert total == int(first["runtime_cycles"])


def test_the_host_bus_addresses_every_l2_word():
    """A region larger than 2**20 words widens the bus offset (it was silently cut to 20 bits)."""
    from sim_tests.driver import bus_address
    for name in ("tiny", "small", "large"):
        l2 = l2_split(builtin_hardware(name))
        bits = host_offset_bits(l2)
        assert all(words <= 1 << bits for words in l2.values()) and bits >= 20
        last = {region: bus_address(region, l2[region] - 1, bits) for region in ("input", "weight", "output")}
        assert len({a >> bits for a in last.values()}) == 3              # regions stay apart
        assert all(a & ((1 << bits) - 1) == l2[r] - 1 for r, a in last.items())
    assert host_offset_bits(l2_split(builtin_hardware("large"))) == 21   # 2 Mi words of input


@pytest.mark.parametrize("max_stride", [1, 2, 3, 4, 5])
def test_products_by_a_stride_and_input_spans_without_a_multiplier(max_stride):
    """``by_stride`` (a mux over constant multiples) and ``span`` (``n * stride + filt - stride``)
    equal ``x * stride`` and ``(n - 1) * stride + filt`` for every stride the design allows."""
    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator
    from hwgen.common import by_stride, span
    m = Module()
    x, stride, filt, prod, rows = Signal(16), Signal(4), Signal(4), Signal(24), Signal(24)
    m.d.comb += [prod.eq(by_stride(x, stride, max_stride)), rows.eq(span(x, stride, filt, max_stride)[:24])]
    sim = Simulator(m)
    seen = []

    async def bench(ctx):
        for xv in (1, 2, 7, 100, 65535):
            for sv in range(1, max_stride + 1):
                for fv in range(sv, 8):            # (the host makes the stride at most the filter)
                    ctx.set(x, xv)
                    ctx.set(stride, sv)
                    ctx.set(filt, fv)
                    seen.append((ctx.get(prod), ctx.get(rows), xv * sv, ((xv - 1) * sv + fv) % 2 ** 24))
    sim.add_testbench(bench)
    sim.run()
    assert seen and all(p == want_p and r == want_r for p, r, want_p, want_r in seen)


def test_partial_sums_go_to_lut_ram_from_two_drain_runs(tmp_path: Path):
    """A PE tile of two or more drain runs keeps its partial sums in memories (LUT RAM), a
    lane's words one row each; a tile of one run (or runs that do not divide its rows) in
    registers; the manifest gives the cycles after reset in which the PEs clear the memories."""
    from hwgen.emit import write_verilog
    from hwgen.pe import PE, PSUM_RAM_MIN_ROWS

    def pe_of(dataflow, array_name):
        hw = array(array_name)
        todo = layers(dataflow)
        s = hwgen_structure(resolve_dataflow(dataflow_spec(dataflow), todo[0], hw), todo[0], hw, fit=todo)
        pe = PE(s)
        pe._MustUse__silence = True
        return s, pe
    seen = set()
    for dataflow, array_name in MATRIX:
        s, pe = pe_of(dataflow, array_name)
        L, n_out = pe.drain_lanes, pe.words["output"]
        expect = L & (L - 1) == 0 and s.pe_tile_max["X"] % L == 0 and n_out // L >= PSUM_RAM_MIN_ROWS
        assert bool(pe.psum_rows) == expect, (dataflow, array_name)
        if expect:
            assert pe.psum_rows * L == n_out and pe.psum_rows <= pe.psum_clear_cycles < 2 * pe.psum_rows
        seen.add((bool(pe.psum_rows), L > 1))
        # (and the rule's narrower drain, a one-row tile of 8 words or more in two runs or more)
        if L < min(s.noc_words_per_cycle, s.pe_tile_max["X"]):
            seen.add("narrowed")
    assert seen == {(False, False), (False, True), (True, False), (True, True), "narrowed"}   # the matrix has each
    s, pe = pe_of("kcp_x2", "tiny4")
    text = write_verilog(s, l2_split(array("tiny4")), tmp_path / "top.v").read_text()
    body = text[text.index("module accelgen_pe"):]
    body = body[:body.index("endmodule")]
    assert "psum0_1" in body and "output0_0" not in body and "ps_sweeping" in body


@pytest.mark.parametrize("dataflow,pes", [("kcp", 32), ("xp", 16)])
def test_what_every_pe_reads_comes_from_a_copy_for_a_group_of_pes(tmp_path: Path, dataflow: str, pes: int):
    """The registers every PE reads (the loader's chunk, the compute engine's issue, flags and
    partial-sum address, the drain's address and length) reach groups of PEs, each from its own
    kept copy (``common.fanout``), not the whole array from one register: on ``small`` one
    register's wire to a far PE was 13.3 ns.  Read from the emitted Verilog, PE by PE."""
    import re
    from collections import Counter

    from hwgen.common import READERS_PER_COPY
    from hwgen.compute import PES_PER_OPERAND_COPY
    from hwgen.emit import write_verilog

    hw = replace(builtin_hardware("tiny"), num_pes=pes, l2_bytes=16384)
    layer = parse_layer_spec("conv2d:K=8,C=8,Y=6,X=6,R=3,S=3", name="l")
    s = hwgen_structure(resolve_dataflow(dataflow, layer, hw), layer, hw, fit=[layer])
    text = write_verilog(s, l2_split(hw), tmp_path / "top.v").read_text()
    instances = re.findall(r"accelgen_pe (pe_\d+_\d+) \((.*?)\);", text, re.S)
    assert len(instances) == pes
    limits = {"ld_row": READERS_PER_COPY, "ld_count": READERS_PER_COPY, "ld_bank_in": READERS_PER_COPY,
              "ld_bank_w": READERS_PER_COPY, "dr_addr": READERS_PER_COPY, "rd_on": PES_PER_OPERAND_COPY,
              "ps_addr": PES_PER_OPERAND_COPY, "cp_bank_ps": PES_PER_OPERAND_COPY}
    if dataflow != "xp":                # (xp drains across groups: its PEs' run length is 1)
        limits["dr_len"] = READERS_PER_COPY
    for port, limit in limits.items():
        sources = Counter(re.search(rf"\.{port}\(([^)]*)\)", body).group(1) for _, body in instances)
        assert max(sources.values()) <= limit and len(sources) >= pes // limit, (port, sources)

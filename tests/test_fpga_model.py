"""The FPGA resource model (costmodel.fpga): its figures over a search's arrays, each point's
coefficients gathered by its dataflow families (and two accelerators' sum for a model with
GEMMs), equal the scalar estimate point by point; designs the fit never saw, synthesised afresh,
are within 10 % on LUTs and FFs and exact on DSPs and block RAMs; ``accelgen explore`` with
``--part`` or ``luts<=N`` keeps only designs under the limits; bad parts, targets and metrics are
one line."""

from __future__ import annotations

import csv
import importlib.util
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import yaml

from accelgen import synth
from accelgen.cli import main
from costmodel import GEMM, AccelgenError, Conv2D, Model, fpga
from costmodel.dataflow.spec import resolve_dataflow
from costmodel.design import Design, load_design
from costmodel.dse import make_plan, parse_constraint, space_from_dict
from costmodel.dse.evaluate import VectorEvaluator, metric
from costmodel.dse.plan import part_constraints
from costmodel.fpga import FAMILIES, FPGA_METRICS, PARTS, estimate, find_part, load_model
from costmodel.hardware import builtin_hardware
from costmodel.hwgen_preset.preset import hwgen_structure, l2_split
from costmodel.workload import load_workload_yaml, parse_layer_spec
from hwgen.emit import TOP
from hwgen.pe import PE_MODULE

ROOT = Path(__file__).resolve().parents[1]
# (convolutions only: one accelerator a point; a model with GEMMs too is built as two)
DEMO_CNN = str(ROOT / "configs" / "workloads" / "demo_cnn.yaml")

#: Widths the generator builds and others (fractional, odd, unlimited: figures of no design, but
#: the array and scalar paths must still agree), L2 from a block RAM's worth to 1 MiB.
SPACE = {
    "name": "fpga", "base": "tiny",
    "hardware": {"num_pes": [4, 8, 16, 64], "simd_lanes": [1, 2, 4], "l1_bytes_per_pe": [256],
                 "l2_bytes": [1024, 4096, 16384, 40000, 65536, 1048576],
                 "noc": [{"bandwidth_words_per_cycle": [0.5, 1, 2, 3, 4, 8, 16, "inf"], "latency_cycles": 1}]},
    "dataflows": {"kcp": {}},
}
#: Every family, kcp twice (its choices' families are gathered by index), yrp (not generated: no
#: figures), and a GEMM family for the second accelerator.
FAMILY_SPACE = {**SPACE, "hardware": {**SPACE["hardware"], "l2_bytes": [1024, 16384, 40000, 1048576],
                                      "noc": [{"bandwidth_words_per_cycle": [0.5, 1, 3, 8, 16, "inf"],
                                               "latency_cycles": 1}]},
                "dataflows": {"kcp": {"cluster": [4, 64]}, "cp": {}, "xp": {}, "yxp": {}, "yrp": {}, "nmk": {}}}
CONV = Conv2D("c", K=8, C=8, Y=8, X=8, R=3, S=3)


def _fit_script():
    spec = importlib.util.spec_from_file_location("fit_fpga_model", ROOT / "scripts" / "fit_fpga_model.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module          # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def needs_yosys() -> None:
    """Yosys (``make test`` installs it): missing, it fails under CI and skips elsewhere."""
    missing = synth.yosys_missing()
    if missing is None:
        return
    msg = f"the fit check synthesises a design with yosys: {missing}"
    if os.environ.get("CI"):
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


def _scalar(hw, families: list[str], target: str = "ecp5") -> dict[str, float]:
    """The figures of one accelerator per family in ``families``, from the scalar estimate."""
    parts = [estimate(hw, target, family=f) for f in families]
    return {name: sum((p[name] for p in parts), 0.0) for name in FPGA_METRICS}


def test_arrays_equal_the_scalar_estimate_point_by_point() -> None:
    model = Model("one", (CONV,))
    plan = make_plan(space_from_dict(SPACE), model, ("runtime_cycles", "luts"), (), "maestro")
    flat = np.arange(plan.size, dtype=np.int64)
    m = VectorEvaluator(plan).evaluate(flat)
    got = {name: metric(plan, m, name) for name in FPGA_METRICS}
    for f in flat.tolist():
        assert {name: float(got[name][f]) for name in FPGA_METRICS} == _scalar(plan.hardware(f), ["kcp"]), \
            plan.point_axes(f)
    finite = np.isfinite(got["luts"])
    assert finite.sum() == plan.size * 7 // 8 and not np.isfinite(got["brams"][~finite]).any()
    assert np.isfinite(got["dsps"]).all()
    # (points in the order PEs x lanes x NoC width x L2) more PEs or lanes: more LUTs; a larger
    # L2: no fewer block RAMs
    luts = got["luts"].reshape(4, 3, 8, 6)[:, :, :7]
    assert (np.diff(luts, axis=0) > 0).all() and (np.diff(luts, axis=1) > 0).all()
    assert (np.diff(got["brams"].reshape(4, 3, 8, 6)[:, :, :7], axis=3) >= 0).all()


def test_each_family_has_its_own_coefficients_gathered_point_by_point() -> None:
    model = Model("two", (CONV, GEMM("g", M=8, N=8, K=8)))
    plan = make_plan(space_from_dict(FAMILY_SPACE), model, ("runtime_cycles", "luts"), (), "maestro")
    assert plan.accelerators == 2 and [c.family for c in plan.choices("conv2d")] == \
        ["kcp", "kcp", "cp", "xp", "yxp", "yrp"]
    flat = np.arange(plan.size, dtype=np.int64)
    m = VectorEvaluator(plan).evaluate(flat)
    got = {name: metric(plan, m, name) for name in FPGA_METRICS}
    by_family: dict[str, set[float]] = {}
    for f in flat.tolist():
        dataflows = plan.point_dataflows(f)
        families = [dataflows["conv2d"].family, dataflows["gemm"].family]
        hw = plan.hardware(f)
        want = _scalar(hw, families)
        assert {name: float(got[name][f]) for name in FPGA_METRICS} == want, plan.point_axes(f)
        if (hw.num_pes, hw.simd_lanes, hw.noc_at(0).bandwidth_words_per_cycle, hw.l2_bytes) == (8, 1, 8, 16384):
            by_family.setdefault(families[0], set()).add(want["luts"])
    # a family the generator does not build has no design; the others differ, kcp's choices agree
    assert by_family["yrp"] == {np.inf} and len(by_family["kcp"]) == 1
    assert len({v for f, vs in by_family.items() if f != "yrp" for v in vs}) == 4
    with pytest.raises(AccelgenError, match=r"unknown dataflow family 'kcpp'; expected one of kcp, yrp"):
        estimate(plan.hardware(0), "ecp5", family="kcpp")


def test_per_layer_dataflows_take_the_largest_family_of_each_kind() -> None:
    space = {**FAMILY_SPACE, "search": {"per_layer_dataflow": True},
             "dataflows": {"kcp": {}, "xp": {}, "yrp": {}, "nmk": {}}}
    model = Model("two", (CONV, GEMM("g", M=8, N=8, K=8)))
    plan = make_plan(space_from_dict(space), model, ("runtime_cycles", "luts"), (), "maestro")
    assert plan.conv_axis is None and plan.gemm_axis is None
    flat = np.arange(0, plan.size, 7, dtype=np.int64)
    m = VectorEvaluator(plan).evaluate(flat)
    got = metric(plan, m, "luts")
    for i, f in enumerate(flat.tolist()):
        hw = plan.hardware(f)
        conv = max(estimate(hw, "ecp5", family=family)["luts"] for family in ("kcp", "xp"))
        assert got[i] == conv + estimate(hw, "ecp5", family="nmk")["luts"]


@pytest.mark.parametrize("target, l2_bytes, words, run, brams, cells", [
    # (Yosys on hwgen/ram.py's module alone: an ECP5 keeps an 8-bit bank of up to 128 rows and a
    # 32-bit one of up to 32 in TRELLIS_DPR16X4 cells, a 7-series 320 and 64 in RAM64Ms; the
    # 7-series case is the fit's designs of W = 8 and 4 KiB, 184 LUT-RAM cells beside the PEs.
    # ``run``: the drain's words a cycle, W of them (xp) for W output banks)
    ("ecp5", 4096, 16, 16, 0, 16 * (8 * 2 + 2 * 8)),     # operand banks 64 + 64 rows, output 32
    ("ecp5", 8192, 16, 16, 32, 0),                       # 128 + 128 and 64: a tie goes to block RAM
    ("xilinx", 4096, 8, 8, 0, 8 * (4 * 3 + 1 * 11)),     # 128 + 128 and 64
    ("xilinx", 8192, 8, 8, 16, 0),                       # 256 + 256 and 128
    ("ecp5", 32768, 8, 8, 16, 0),                        # the demo network's: 1024 + 1024 and 512
    # a drain of one word a cycle: one output bank of 512 rows (a block RAM), the operands' as above
    ("ecp5", 4096, 16, 1, 1, 16 * 8 * 2),
    # small's kcp with its L2 cut to 256 KiB (scripts/place_design.py): 64 operand banks of
    # 1024 + 1024 rows, 16 output banks of 2,048 (four blocks side by side each)
    ("ecp5", 262144, 64, 1, 64 + 16 * 4, 0),
])
def test_small_l2_banks_are_lut_ram_as_yosys_maps_them(target: str, l2_bytes: int, words: int, run: int, brams: int,
                                                        cells: int) -> None:
    got = fpga.l2_memories(load_model(target), np.asarray(l2_bytes), np.asarray(words), np.asarray(run))
    assert (float(got["brams"]), float(got["lutram_cells"])) == (brams, cells)


def test_output_banks_are_the_generators_for_the_library_templates() -> None:
    """The model's output banks (the drain's run of the family's library template) equal the
    structure's (:meth:`HwStructure.output_banks`) over random hardware and layers wide enough to
    spread ``xp`` over every PE; and every fit and held-out design's."""
    rng = np.random.default_rng(7)
    base = builtin_hardware("tiny")
    cases = []
    for _ in range(60):
        pes, w = int(rng.choice([2, 4, 8, 16, 32, 64])), int(2 ** rng.integers(0, 7))
        l2 = int(2 ** rng.integers(12, 21))
        family = str(rng.choice(FAMILIES))
        hw = base.with_overrides(name="r", num_pes=pes, noc_bw=w, l2_bytes=l2, l1_bytes_per_pe=4096)
        x = int(rng.integers(pes, 2 * pes + 1))
        layer = parse_layer_spec("gemm:M=%d,N=16,K=16" % x if family == "nmk" else
                                 "conv2d:K=8,C=4,Y=%d,X=%d,R=3,S=3" % (int(rng.integers(3, 9)), x + 2), name="l")
        cases.append((family, hw, layer))
    fit = _fit_script()
    for d in (*fit.FIT, *fit.CHECKS):
        cases.append((d.dataflow, fit._hardware(d), parse_layer_spec(d.layers[0], name="l")))
    for family, hw, layer in cases:
        s = hwgen_structure(resolve_dataflow(family, layer, hw), layer, hw)
        words = hw.noc_at(0).bandwidth_words_per_cycle
        model = fpga.output_banks(fpga.drain_run(family, hw.num_pes, words), hw.l2_bytes, words)
        assert float(model) == s.output_banks(l2_split(hw)["output"]), (family, hw.num_pes, words, hw.l2_bytes)


def test_the_flow_report_estimates_each_accelerator_with_its_family() -> None:
    from accelgen.flow_report import _model_estimate
    from costmodel import builtin_hardware
    hw = builtin_hardware("tiny").with_overrides(name="x", num_pes=8, simd_lanes=1, noc_bw=8, l2_bytes=32768)
    design = Design(hw, {"conv2d": ("xp", {}), "gemm": ("nmk", {})})
    got = _model_estimate(design, "ecp5", ["conv2d", "gemm"])
    assert got is not None and got["families"] == {"conv2d": "xp", "gemm": "nmk"}
    assert {k: got[k] for k in FPGA_METRICS} == _scalar(hw, ["xp", "nmk"])
    assert {k: v for k, v in _model_estimate(design, "ecp5", ["conv2d"]).items() if k in FPGA_METRICS} == \
        estimate(hw, "ecp5", family="xp") != estimate(hw, "ecp5", family="kcp")
    assert _model_estimate(design, "generic", ["conv2d"]) is None


@pytest.mark.parametrize("target", ["ecp5", "xilinx"])
def test_model_file_carries_its_provenance(target: str) -> None:
    doc = yaml.safe_load((ROOT / "configs" / "fpga" / f"{target}.yaml").read_text())
    prov = doc["provenance"]
    assert prov["yosys"].startswith("Yosys ") and prov["synthesis"]["script"] == synth.TARGETS[target]
    assert len(prov["generator_digest"]) == 16 and len(prov["accelgen_commit"]) == 40    # (clean: no note)
    assert list(prov["families"]) == list(FAMILIES)
    # the recorded residuals are the model's own: every design's figure is the model's estimate now
    fit = _fit_script()
    for family, record in prov["families"].items():
        fitted = [d for d in record["designs"] if d["role"] == "fit"]
        assert len(fitted) > 4 and all(d["measured"]["luts"] > 0 for d in fitted)
        assert [d["name"] for d in record["designs"] if d["role"] == "held_out"] == \
            [d.name for d in fit.CHECKS if d.dataflow == family]
        for d in record["designs"]:
            assert d["dataflow"] == family
            hw = fit._hardware(fit.design_from_dict({k: d[k] for k in fit.Design.__dataclass_fields__}))
            assert {k: int(v) for k, v in estimate(hw, target, family=family).items()} == d["model"], d["name"]


#: Synthesised afresh: kcp's held-out design and the demo network's (xp, 8 PEs, W = 8, 32 KiB,
#: for demo_cnn's layers); the other families' are in the fit script's report (docs/fpga.md).
FRESH = ("kcp_p4_w2_l32k_s2", "xp_p8_w8_l32k_s1_demo")


@pytest.mark.usefixtures("needs_yosys")
def test_designs_outside_the_fit_are_within_ten_percent_of_fresh_synthesis(tmp_path: Path) -> None:
    fit = _fit_script()
    checks = [d for d in fit.CHECKS if d.name in FRESH]
    assert len(checks) == len(FRESH)
    sizes = {(d.dataflow, d.num_pes, d.simd_lanes, d.noc_words, d.l2_bytes, d.layers) for d in fit.FIT}
    assert not {(d.dataflow, d.num_pes, d.simd_lanes, d.noc_words, d.l2_bytes, d.layers) for d in checks} & sizes
    # (the demo network's design is made for demo_cnn's layers)
    demo = next(d for d in checks if d.dataflow == "xp")
    assert [parse_layer_spec(spec).describe() for spec in demo.layers] == \
        [layer.describe() for layer in load_workload_yaml(DEMO_CNN).layers]
    model = load_model("ecp5")

    # two Yosys runs at a time: both designs' shared parts first, the larger first, then their PEs
    checks.sort(key=lambda d: -d.num_pes * d.noc_words)
    verilog = {d.name: fit._emit(d, tmp_path)[0] for d in checks}
    with ThreadPoolExecutor(2) as pool:
        runs = {(d.name, top): pool.submit(synth.synthesize_module, verilog[d.name], top, "ecp5", blackbox=bb)
                for top, bb in ((TOP, (PE_MODULE,)), (PE_MODULE, ())) for d in checks}
    for d in checks:
        r = synth.DesignResources("ecp5", d.num_pes, runs[d.name, PE_MODULE].result(),
                                  runs[d.name, TOP].result()).total
        measured = {"luts": r.lut + model.lutram_luts * r.lutram, "ffs": r.ff, "dsps": r.dsp, "brams": r.bram}
        predicted = estimate(fit._hardware(d), "ecp5", family=d.dataflow)
        for name in ("luts", "ffs"):
            assert abs(predicted[name] - measured[name]) <= 0.10 * measured[name], (d.name, name, predicted, measured)
        assert (predicted["dsps"], predicted["brams"]) == (measured["dsps"], measured["brams"]), (d.name, predicted,
                                                                                                  measured)


def _space_file(tmp_path: Path, constraints: list[str] | None = None) -> Path:
    doc = {"name": "fpga_small", "base": "tiny",
           "hardware": {"num_pes": [4, 8, 16, 32, 64], "simd_lanes": [1, 2], "l1_bytes_per_pe": [512],
                        "l2_bytes": [16384, 65536, 262144],
                        "noc": [{"bandwidth_words_per_cycle": [2, 4, 8], "latency_cycles": 1}]},
           "dataflows": {"kcp": {}, "cp": {}, "nmk": {}}}
    if constraints:
        doc["constraints"] = constraints
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _explore(tmp_path: Path, out: str, *extra: str, space: Path | None = None) -> list[dict[str, str]]:
    argv = ["explore", "--model", DEMO_CNN, "--space", str(space or _space_file(tmp_path)), "--out",
            str(tmp_path / out), "--workers", "1", "--no-progress", *extra]
    assert main(argv) == 0
    with open(tmp_path / out / "pareto.csv", newline="") as f:
        return list(csv.DictReader(f))


def _figures(tmp_path: Path, out: str, row: dict[str, str]) -> dict[str, float]:
    design: Design = load_design(tmp_path / out / row["file"])
    return _scalar(design.hardware, [family for family, _ in design.dataflows.values()])


def test_explore_with_a_part_keeps_only_designs_that_fit_it(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    part = find_part("lfe5u-25f")
    free = _explore(tmp_path, "free", "--objectives", "runtime,energy,luts")
    assert any(float(r["luts"]) > part.luts for r in free)          # the front leaves the part without it
    rows = _explore(tmp_path, "part", "--objectives", "runtime,energy,luts", "--part", "LFE5U-25F")
    err = capsys.readouterr().err
    assert "--part LFE5U-25F: luts<=24288, ffs<=24288, dsps<=28, brams<=56" in err
    assert rows and set(FPGA_METRICS) <= set(rows[0])
    for r in rows:
        assert all(float(r[name]) <= limit for name, limit in part.limits().items()), r
        assert {name: float(r[name]) for name in FPGA_METRICS} == _figures(tmp_path, "part", r)
    # the fitting part of the free front is on the constrained one
    fits = {r["point"] for r in free
            if all(_figures(tmp_path, "free", r)[n] <= v for n, v in part.limits().items())}
    assert fits
    assert fits <= {r["point"] for r in rows}


def test_luts_constraint_from_the_command_line_and_the_space_file(tmp_path: Path) -> None:
    objectives = ("--objectives", "runtime,energy,area")
    free = _explore(tmp_path, "free", *objectives, "--constraint", "luts<=1e9")
    luts = sorted(float(r["luts"]) for r in free)
    bound = luts[len(luts) // 2]
    assert luts[0] < bound < luts[-1]
    rows = _explore(tmp_path, "cli", *objectives, "--constraint", f"luts<={bound:g}")
    assert rows and all(float(r["luts"]) <= bound for r in rows)
    assert {r["point"] for r in rows} != {r["point"] for r in free}
    in_file = _explore(tmp_path, "file", *objectives, space=_space_file(tmp_path, [f"luts <= {bound:g}"]))
    assert [r["point"] for r in in_file] == [r["point"] for r in rows]
    dsps = _explore(tmp_path, "dsps", "--objectives", "runtime,dsps", "--constraint", "brams<=16")
    assert dsps and all(float(r["brams"]) <= 16 for r in dsps) and "ffs" not in dsps[0]


def test_part_constraints_are_the_parts_limits() -> None:
    for part in PARTS.values():
        assert {c.metric: c.bound for c in part_constraints(part.name)} == part.limits()
        assert all(c.op == "<=" for c in part_constraints(part.name))


@pytest.mark.parametrize("argv, message", [
    (["--part", "LFE5U-99F"], "--part: unknown part 'LFE5U-99F'; expected one of LFE5U-12F, LFE5U-25F, "
                              "LFE5U-45F, LFE5U-85F, iCE40UP5K"),
    (["--part", "xc7a35t", "--fpga-target", "ecp5"], "--fpga-target: xc7a35t is a part of target 'xilinx', not 'ecp5'"),
    (["--constraint", "lut<=5000"], "--constraint: unknown metric 'lut' in 'lut<=5000'; expected one of"),
    (["--objectives", "runtime,lut"], "--objectives: unknown objective 'lut'; expected some of runtime, energy, edp, "
                                      "area, power, luts, ffs, dsps, brams"),
    (["--fpga-target", "virtex"], "argument --fpga-target: invalid choice: 'virtex'"),
    (["--part", "iCE40UP5K"], "--fpga-target: no FPGA resource model for target 'ice40' (fitted: ecp5, xilinx;"),
])
def test_bad_fpga_options_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                       message: str) -> None:
    base = ["explore", "--model", DEMO_CNN, "--space", str(_space_file(tmp_path)), "--out", str(tmp_path / "o"),
            "--no-progress"]
    try:
        status = main(base + argv)
    except SystemExit as exc:            # argparse's own usage errors
        status = exc.code
    assert status in (1, 2)
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not (tmp_path / "o" / "pareto.csv").exists()


def test_a_target_without_a_model_file_is_refused_at_the_door(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fpga").mkdir()
    (tmp_path / "fpga" / "ecp5.yaml").write_text((ROOT / "configs" / "fpga" / "ecp5.yaml").read_text())
    monkeypatch.setattr(fpga, "CONFIGS", tmp_path)
    fpga.load_model.cache_clear()
    model = Model("one", (Conv2D("c", K=8, C=8, Y=8, X=8, R=3, S=3),))
    try:
        with pytest.raises(AccelgenError, match=r"^--fpga-target: no FPGA resource model for target 'xilinx' "
                                                r"\(fitted: ecp5; docs/fpga\.md, 'The resource model', says why "
                                                r"and how to fit one\)$"):
            make_plan(space_from_dict(SPACE), model, ("runtime_cycles",), (parse_constraint("ffs<=9000"),),
                      "maestro", fpga_target="xilinx")
        # not asked for an FPGA figure, the plan does not need a model
        assert make_plan(space_from_dict(SPACE), model, ("runtime_cycles",), (), "maestro", fpga_target="xilinx")
        with pytest.raises(AccelgenError, match=r"^--fpga-target: unknown FPGA target 'generic'; expected one of "
                                                r"ecp5, ice40, xilinx$"):
            make_plan(space_from_dict(SPACE), model, ("runtime_cycles",), (), "maestro", fpga_target="generic")
    finally:
        fpga.load_model.cache_clear()

"""Design-space exploration: vectorised == scalar, exact Pareto fronts, identical fronts from every
backend, resume after an interrupt, and one-line errors for bad space files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from accelgen.cli import main
from costmodel import GEMM, AccelgenError, Conv2D, Model, analyze_model, get_model, load_workload_yaml
from costmodel.design import load_design
from costmodel.dse import (
    HwgenEvaluator,
    ScalarEvaluator,
    VectorEvaluator,
    load_space,
    make_plan,
    nondominated,
    parse_constraint,
    run_search,
    space_from_dict,
)
from costmodel.dse.search import CHECKPOINT
from costmodel.workload.problem import problems_of

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "space" / "demo.yaml"
TINY = load_workload_yaml(ROOT / "configs" / "workloads" / "tiny_cnn.yaml")

#: Fractional and unlimited bandwidths, latencies and hops on two NoC levels: every timing rule.
ODD_SPACE = {
    "name": "odd", "base": "small",
    "hardware": {"num_pes": [8, 16, 64], "simd_lanes": [1, 3], "l1_bytes_per_pe": [64, 512],
                 "l2_bytes": [4096, 65536], "offchip_bw_words_per_cycle": [0.5, 4],
                 "noc": [{"bandwidth_words_per_cycle": [0.75, 3, 64, "inf"], "latency_cycles": [0, 2], "hops": [1, 3]},
                         {"bandwidth_words_per_cycle": [1.5, 16], "latency_cycles": [1]}]},
    "dataflows": {"kcp": {"cluster": [4, 16], "k_tile": [1, 2], "order": ["CRSYX", "YXC"]}, "yrp": {"k_tile": [4]},
                  "yxp": {"x_tile": [2, 8]}, "xp": {}, "cp": {}, "nmk": {"k_tile": [8], "m_tile": [1, 2]}},
}
ONE_LAYER = Model("one", (Conv2D("c", K=12, C=6, Y=9, X=9, R=3, S=3, stride=2, padding=1),))
#: Dilated layers whose interleaved phases differ in length (along one axis, both, with a stride,
#: depthwise), each analysed as up to four undilated problems run one after another.
DILATED = Model("dilated", (
    Conv2D("rows", K=8, C=4, Y=9, X=8, R=3, S=3, dilation_y=2, padding=1),
    Conv2D("both", K=6, C=3, Y=12, X=11, R=2, S=3, dilation_y=3, dilation_x=2, stride_y=2, pad_top=1),
    Conv2D("dw", K=6, C=6, groups=6, Y=10, X=9, R=3, S=3, dilation=4, padding=4),
))
OBJ2 = ("runtime_cycles", "energy_pj")


def _plan(space=None, model=TINY, objectives=OBJ2, constraints=(), per_layer=None):
    space = space if space is not None else load_space(DEMO)
    return make_plan(space, model, objectives, constraints, "maestro", per_layer)


def _same(a, b) -> None:
    assert np.array_equal(a.valid, b.valid)
    v = a.valid
    for name in ("feasible", "runtime_cycles", "energy_pj", "area_mm2"):
        x, y = getattr(a, name)[v], getattr(b, name)[v]
        assert x.dtype == y.dtype and np.array_equal(x, y), name     # bit-identical, not close


@pytest.mark.parametrize("model, points, per_layer", [(ONE_LAYER, 2500, False), (TINY, 400, False), (TINY, 60, True),
                                                    (DILATED, 400, False), (DILATED, 60, True)],
                         ids=["one-layer", "model", "per-layer-dataflow", "dilated-unequal-phases",
                              "dilated-per-layer"])
def test_vectorised_equals_scalar_on_random_points(model: Model, points: int, per_layer: bool) -> None:
    assert model is not DILATED or all(len(problems_of(layer)) > 1 for layer in model.layers)
    plan = _plan(space_from_dict(ODD_SPACE), model, ("energy_pj", "area_mm2"), per_layer=per_layer)
    flat = np.random.default_rng(7).integers(0, plan.size, points)
    vector, scalar = VectorEvaluator(plan), ScalarEvaluator(plan)
    got, want = vector.evaluate(flat), scalar.evaluate(flat)
    _same(got, want)
    assert got.valid.mean() > 0.5 and 0 < got.feasible.mean() < 1
    if per_layer:
        assert [vector.layer_choices(int(f)) for f in flat[:20]] == [scalar.layer_choices(int(f)) for f in flat[:20]]


#: What the generated hardware takes (NoC widths that are powers of two, int8 PEs) with every axis
#: drawn, including those the hwgen preset does not read (NoC latency, the inner level, off-chip).
HWGEN_SPACE = {
    "name": "hwgen-odd", "base": "tiny",
    "hardware": {"num_pes": [4, 8, 16], "simd_lanes": [1, 2, 3], "l1_bytes_per_pe": [128, 256, 4096],
                 "l2_bytes": [2048, 8192, 65536], "offchip_bw_words_per_cycle": [0.5, 4],
                 "noc": [{"bandwidth_words_per_cycle": [1, 2, 4, 8], "latency_cycles": [1, 2], "hops": [1, 3]},
                         {"bandwidth_words_per_cycle": [4, 16], "latency_cycles": [1]}]},
    "dataflows": {"kcp": {"cluster": [2, 4, 8], "x_tile": [1, 4], "order": ["CRSYX", "YXC"]}, "yrp": {"k_tile": [4]},
                  "xp": {"k_tile": [1, 2]}, "cp": {"x_tile": [1, 3]}, "nmk": {"k_tile": [4, 8], "m_tile": [1, 2]}},
}
HWGEN_MODEL = Model("hw", (Conv2D("a", K=8, C=6, Y=7, X=9, R=3, S=3, padding=1),
                           Conv2D("b", K=5, C=8, Y=6, X=6, R=1, S=3, stride_y=1, stride_x=2),
                           GEMM("g", M=6, N=7, K=12), Conv2D("a2", K=8, C=6, Y=7, X=9, R=3, S=3, padding=1)))


@pytest.mark.parametrize("model", [HWGEN_MODEL, Model("one", HWGEN_MODEL.layers[:1])], ids=["model", "one-layer"])
def test_hwgen_vectorised_equals_scalar_on_random_points(model: Model) -> None:
    plan = make_plan(space_from_dict(HWGEN_SPACE), model, OBJ2, (), "hwgen")
    flat = np.random.default_rng(11).integers(0, plan.size, 600)
    vector = HwgenEvaluator(plan)
    got, want = vector.evaluate(flat), ScalarEvaluator(plan).evaluate(flat)
    _same(got, want)
    assert 0.2 < got.valid.mean() < 1 and 0 < got.feasible.sum() < got.valid.sum()
    # each distinct layer analysed once per combination of the axes the preset reads
    idx = plan.decode(flat)
    read = [i for i, a in enumerate(plan.axes) if a.name not in
            ("l2_bytes", "offchip_bw_words_per_cycle", "noc[0].latency_cycles", "noc[1].bandwidth_words_per_cycle")]
    combos = len({tuple(int(idx[i][p]) for i in read) for p in range(len(flat))})
    assert combos < len(flat) and len(vector._cache) <= combos * len({l.describe() for l in model.layers})
    # and its design (its structure for every L1) once per PE count, dataflow, lanes and NoC width
    made = [i for i, a in enumerate(plan.axes) if a.name in
            ("num_pes", "conv2d_dataflow", "gemm_dataflow", "simd_lanes", "noc[0].bandwidth_words_per_cycle")]
    designs = len({tuple(int(idx[i][p]) for i in made) for p in range(len(flat))})
    assert len(vector._designs) <= designs * len({l.describe() for l in model.layers})


def test_a_point_reproduces_analyze_model() -> None:
    plan = _plan(space_from_dict(ODD_SPACE))
    vector = VectorEvaluator(plan)
    for flat in np.random.default_rng(3).integers(0, plan.size, 30).tolist():
        m = vector.evaluate(np.array([flat]))
        if not m.valid[0]:
            continue
        hw, df = plan.hardware(flat), plan.point_dataflows(flat)
        specs = [df["gemm" if l.kind == "gemm" else "conv2d"] for l in TINY.layers]
        from costmodel import library_dataflow
        r = analyze_model(TINY, hw, per_layer=[library_dataflow(s.family, l, hw.num_pes, **dict(s.params))
                                                for s, l in zip(specs, TINY.layers)])
        assert int(m.runtime_cycles[0]) == r.total["runtime_cycles"]
        assert float(m.energy_pj[0]) == r.total["energy_pj"]["total"]
        assert float(m.area_mm2[0]) == r.total["area_mm2"] and bool(m.feasible[0]) == r.total["feasible"]


def _brute_front(ids, objs) -> set[int]:
    pts = list(zip(ids.tolist(), *[o.tolist() for o in objs]))
    out = set()
    for q in pts:
        dominated = False
        for p in pts:
            if p is q:
                continue
            no_worse = all(a <= b for a, b in zip(p[1:], q[1:]))
            if no_worse and (any(a < b for a, b in zip(p[1:], q[1:])) or p[0] < q[0]):
                dominated = True
                break
        if not dominated:
            out.add(q[0])
    return out


@pytest.mark.parametrize("k", [2, 3])
def test_pareto_filter_equals_brute_force(k: int) -> None:
    rng = np.random.default_rng(k)
    for trial in range(25):
        n = int(rng.integers(1, 3000 if trial == 0 else 300))
        ids = rng.permutation(n).astype(np.int64)
        objs = [rng.integers(0, 12, n).astype(np.float64) for _ in range(k)]    # many ties and duplicates
        got = nondominated(ids, objs)
        assert set(ids[got].tolist()) == _brute_front(ids, objs)
        assert len(got) == len(set(got.tolist()))


def test_search_front_equals_brute_force_over_the_space() -> None:
    plan = _plan(objectives=("runtime_cycles", "energy_pj", "area_mm2"), constraints=(parse_constraint("area_mm2<=0.5"),))
    state = run_search(plan, workers=1)
    assert state.evaluated == plan.size and not state.stopped
    flat = np.arange(plan.size)
    m = VectorEvaluator(plan).evaluate(flat)
    ok = m.feasible & (m.area_mm2 <= 0.5)
    brute = _brute_front(flat[ok], [m.runtime_cycles[ok], m.energy_pj[ok], m.area_mm2[ok]])
    assert set(state.front.flat.tolist()) == brute and state.feasible == int(ok.sum())


def _front(state) -> tuple:
    return (state.front.ids.tolist(), state.front.flat.tolist(), [o.tolist() for o in state.front.objectives])


def test_random_search_is_deterministic_and_independent_of_workers() -> None:
    from dataclasses import replace
    space = replace(load_space(DEMO), mode="random", samples=20_000, seed=5, chunk_points=3000)
    plan = _plan(space)
    one = run_search(plan, workers=1)
    assert one.evaluated == 20_000
    assert _front(one) == _front(run_search(plan, workers=1))
    assert _front(one) == _front(run_search(plan, workers=2))       # a local process pool
    other = run_search(_plan(replace(space, seed=6)), workers=1)
    assert other.evaluated == 20_000


def test_ray_backend_returns_the_local_front() -> None:
    from dataclasses import replace

    import ray  # a dependency of the package: never skipped
    plan = _plan(replace(load_space(DEMO), chunk_points=2000), objectives=("energy_pj", "area_mm2"))
    local = run_search(plan, workers=1)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        remote = run_search(plan, backend="ray")
    finally:
        ray.shutdown()
    assert _front(remote) == _front(local) and remote.evaluated == local.evaluated


def test_interrupted_search_resumes_to_the_same_front(tmp_path: Path) -> None:
    from dataclasses import replace
    plan = _plan(replace(load_space(DEMO), chunk_points=1000))
    whole = run_search(plan, workers=1)

    def interrupt(state) -> None:
        if state.next_point >= 3000:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_search(plan, workers=1, out_dir=tmp_path, on_chunk=interrupt)
    saved = json.loads((tmp_path / CHECKPOINT).read_text())
    assert saved["next_point"] == 3000
    resumed = run_search(plan, workers=1, out_dir=tmp_path, resume=True)
    assert _front(resumed) == _front(whole) and resumed.evaluated == whole.evaluated
    # a point budget stops early, at an exact position; resuming with a larger one finishes
    budget = run_search(plan, workers=1, out_dir=tmp_path, max_points=2500)
    assert budget.stopped == "points" and budget.next_point == 2500
    assert _front(run_search(plan, workers=1, out_dir=tmp_path, resume=True)) == _front(whole)
    other = _plan(replace(load_space(DEMO), chunk_points=1000), objectives=("energy_pj", "area_mm2"))
    with pytest.raises(AccelgenError, match="checkpoint is of another search"):
        run_search(other, out_dir=tmp_path, resume=True)


@pytest.mark.parametrize("change, message", [
    ({"hardware": {"num_pes": {"pow2": [16, 100]}}}, r"hardware\.num_pes\.pow2\[1\] must be a power of two, not 100"),
    ({"hardware": {"simd_lanes": [1, 0]}}, r"hardware\.simd_lanes\[1\] must be a positive integer, not 0"),
    ({"hardware": {"l2_bytes": []}}, r"hardware\.l2_bytes must be a non-empty list, not \[\]"),
    ({"hardware": {"l1_bytes_per_pe": {"range": [64, 32, 8]}}}, r"hardware\.l1_bytes_per_pe\.range must have start <= stop"),
    ({"hardware": {"noc": [{"bandwidth_words_per_cycle": [0, 4]}]}},
     r"hardware\.noc\[0\]\.bandwidth_words_per_cycle\[0\] must be a number >= 0.000976562 or 'inf', not 0"),
    ({"hardware": {"noc": [{"latency": 1}]}}, r"unknown field 'latency' in hardware\.noc\[0\]"),
    ({"hardware": {"pes": 4}}, r"unknown field 'pes' in hardware \(allowed: num_pes"),
    ({"dataflows": {"kcp": {"clusters": [4]}}}, r"unknown field 'clusters' in dataflows\.kcp"),
    ({"dataflows": {"kcp": {"order": ["CYX", "CQ"]}}}, r"dataflows\.kcp\.order\[1\]: 'CQ' names 'Q', not a dimension"),
    ({"dataflows": {"zz": {}}}, r"unknown field 'zz' in dataflows"),
    ({"search": {"mode": "grid"}}, r"search\.mode must be one of exhaustive, random, not 'grid'"),
    ({"base": "huge"}, r"huge: no such file"),
])
def test_malformed_space_files_fail_with_one_line_naming_the_field(tmp_path: Path, change: dict, message: str) -> None:
    doc = yaml.safe_load(DEMO.read_text())
    for key, value in change.items():
        doc[key] = {**doc[key], **value} if isinstance(value, dict) and key in ("hardware",) else value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(AccelgenError, match=message) as info:
        load_space(path)
    assert "\n" not in str(info.value)


def test_explore_cli_writes_front_points_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    model = str(ROOT / "configs" / "workloads" / "tiny_cnn.yaml")
    argv = ["explore", "--model", model, "--space", str(DEMO), "--objectives", "runtime,energy,area",
            "--constraint", "area_mm2<=0.5", "--out", str(out), "--workers", "1", "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "Pareto front: tiny_cnn on demo (maestro)" in printed.out and "designs/s" in printed.err
    rows = (out / "pareto.csv").read_text().splitlines()
    points = sorted((out / "points").iterdir())
    assert len(rows) - 1 == len(points) > 1
    assert (out / "pareto.png").stat().st_size > 0 and (out / "pareto.svg").read_text().startswith("<?xml")
    header = rows[0].split(",")
    first = dict(zip(header, rows[1].split(",")))
    design = load_design(points[0])
    r = analyze_model(TINY, design.hardware, per_layer=[design.dataflow_for(l) for l in TINY.layers])
    assert r.total["runtime_cycles"] == int(first["runtime_cycles"])
    assert repr(r.total["energy_pj"]["total"]) == first["energy_pj"] and r.total["area_mm2"] <= 0.5
    assert main(["analyze", "--model", model, "--design", str(points[0]), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["runtime_cycles"] == int(first["runtime_cycles"])


@pytest.mark.parametrize("argv, message", [
    (["--objectives", "speed"], "--objectives: unknown objective 'speed'; expected some of runtime, energy"),
    (["--constraint", "area<=2"], "--constraint: unknown metric 'area' in 'area<=2'"),
    (["--layer", "nope"], "--layer: tiny_cnn has no layer 'nope'"),
    (["--resume"], "no checkpoint to resume from"),
])
def test_explore_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                         message: str) -> None:
    base = ["explore", "--model", str(ROOT / "configs" / "workloads" / "tiny_cnn.yaml"), "--space", str(DEMO),
            "--out", str(tmp_path / "o"), "--no-progress"]
    assert main(base + argv) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not (tmp_path / "o" / "pareto.csv").exists()


def test_gemm_only_model_and_single_layer_search() -> None:
    model = Model("g", (GEMM("fc", M=4, N=64, K=256),))
    state = run_search(_plan(model=model), workers=1)
    assert len(state.front) >= 1 and state.evaluated == _plan(model=model).size
    resnet_layer = Model("r", (get_model("resnet50").layers[5],))
    assert len(run_search(_plan(model=resnet_layer), workers=1, max_points=5000).front) >= 1
    assert math.isfinite(float(state.front.objectives[1][0]))

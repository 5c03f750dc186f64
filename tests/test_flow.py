"""``accelgen flow`` without a simulator: choosing the front point, choosing and scaling the layers
it runs, the record of its stages, an interrupt and ``--resume``, and one-line errors.  The whole
flow, simulated and synthesised, is ``sim_tests/test_flow.py``."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from accelgen.cli import main
from accelgen.flow_choices import halved, knee_index, one_run, pick_point, sample_layers, verification_layer
from costmodel.workload import GEMM, Conv2D

ROOT = Path(__file__).resolve().parents[1]

SPACE = {"name": "flowunit", "base": "tiny",
         "hardware": {"num_pes": [4, 8], "l1_bytes_per_pe": [256], "l2_bytes": [16384],
                      "noc": [{"bandwidth_words_per_cycle": [2, 4], "latency_cycles": 1}]},
         "dataflows": {"kcp": {"cluster": [4]}, "xp": {}, "nmk": {"k_tile": [4]}},
         "search": {"mode": "exhaustive"}}
MODEL = {"name": "two", "layers": [
    {"name": "c", "type": "conv2d", "K": 8, "C": 4, "Y": 6, "X": 6, "R": 3, "S": 3, "padding": 1},
    {"name": "g", "type": "gemm", "M": 4, "N": 8, "K": 16}]}


# --- choosing the point ---------------------------------------------------------------------------

def test_the_knee_is_the_point_nearest_the_ideal_on_log_scales():
    # a convex front: the middle point is nearest (0, 0) once both axes span [0, 1]
    assert knee_index([[1, 10, 100], [100, 10, 1]]) == 1
    # a point that gives up little on one objective for much on the other is the knee
    assert knee_index([[1, 2, 1000], [1000, 2, 1]]) == 1
    # scaling an objective (another unit) does not move it; nor does listing the points reversed
    assert knee_index([[3, 30, 300], [100, 10, 1]]) == 1
    assert knee_index([[100, 10, 1], [1, 10, 100]]) == 1
    # ties go to the earlier point; one point is its own knee
    assert knee_index([[1, 100], [100, 1]]) == 0
    assert knee_index([[5], [7]]) == 0


def test_pick_by_a_metric_takes_its_least_and_the_lower_rank_on_ties():
    rows = [{"rank": "1", "runtime_cycles": "10", "energy_pj": "9.5", "area_mm2": "3", "edp_pj_cycles": "95",
             "power_mw": "1"},
            {"rank": "2", "runtime_cycles": "20", "energy_pj": "3.0", "area_mm2": "1", "edp_pj_cycles": "60",
             "power_mw": "1"}]
    assert pick_point(rows, ("runtime_cycles", "energy_pj"), "runtime")["rank"] == "1"
    assert pick_point(rows, ("runtime_cycles", "energy_pj"), "energy")["rank"] == "2"
    assert pick_point(rows, ("runtime_cycles", "energy_pj"), "edp")["rank"] == "2"
    assert pick_point(rows, ("runtime_cycles", "energy_pj"), "power")["rank"] == "1"
    assert pick_point(rows, ("area_mm2",), "knee")["rank"] == "2"      # one objective: its least


# --- the layers run -------------------------------------------------------------------------------

def _conv(name, **kw):
    base = dict(K=8, C=8, Y=8, X=8, R=3, S=3)
    return Conv2D(name, **{**base, **kw})


def test_sample_takes_one_layer_of_each_class_first_and_keeps_model_order():
    layers = [_conv("a"), _conv("a2"), _conv("b", K=16), _conv("c", R=1, S=1), _conv("d", K=32),
              _conv("e", stride=2), GEMM("f", M=4, N=4, K=4), _conv("g", R=1, S=1, K=4)]
    every = sample_layers(layers, "all", 2)
    assert [[l.name for l in g] for g in every] == [["a", "a2"], ["b"], ["c"], ["d"], ["e"], ["f"], ["g"]]
    some = sample_layers(layers, "sample", 4)
    # the classes: 3x3, 1x1, 3x3 stride 2, GEMM -> a, c, e, f (in model order)
    assert [g[0].name for g in some] == ["a", "c", "e", "f"]
    assert [g[0].name for g in sample_layers(layers, "sample", 5)] == ["a", "b", "c", "e", "f"]
    assert sample_layers(layers, "none", 4) == []


def test_one_run_of_a_grouped_or_batched_layer():
    one, runs = one_run(_conv("g", K=12, C=6, groups=3, N=2))
    assert (one.K, one.C, one.groups, one.N, runs) == (4, 2, 1, 1, 6)
    one, runs = one_run(GEMM("m", M=3, N=5, K=7, batch=4))
    assert (one.M, one.N, one.K, one.batch, runs) == (3, 5, 7, 1, 4)
    layer = _conv("plain")
    assert one_run(layer) == (layer, 1)


def test_scaling_keeps_the_window_and_stops_at_the_first_shape_that_fits():
    """Random layers (every dimension, filter, stride and padding drawn on its own) scaled to a
    random MAC budget: the result fits, keeps filter, strides and padding, and halving once less
    would not have fitted (no dimension is cut further than needed)."""
    rng = random.Random(11)
    for _ in range(300):
        R, S = rng.randint(1, 5), rng.randint(1, 5)
        sy, sx = rng.randint(1, 4), rng.randint(1, 4)
        pads = [rng.randint(0, 2) for _ in range(4)]
        layer = Conv2D("x", K=rng.randint(1, 64), C=rng.randint(1, 64), Y=rng.randint(R, 40), X=rng.randint(S, 40),
                       R=R, S=S, stride_y=sy, stride_x=sx, pad_top=pads[0], pad_bottom=pads[1], pad_left=pads[2],
                       pad_right=pads[3])
        budget = rng.choice([1, 50, 500, 5000, 10 ** 9])
        chain = [layer]
        while (nxt := halved(chain[-1])) is not None:
            chain.append(nxt)
        expected = next((l for l in chain if l.macs <= budget), None)
        if expected is None:
            with pytest.raises(Exception, match="does not fit"):
                verification_layer(layer, lambda l: l.macs <= budget)
            continue
        v, runs = verification_layer(layer, lambda l: l.macs <= budget)
        assert runs == 1 and v.macs <= budget and v.describe() == expected.describe()
        assert (v.R, v.S, v.stride_y, v.stride_x, v.pad_top, v.pad_bottom, v.pad_left, v.pad_right) == \
               (R, S, sy, sx, *pads)
        assert all(getattr(v, d) <= getattr(layer, d) for d in "KCYX")
        assert v.padded_y >= v.window_y and v.padded_x >= v.window_x
    # a GEMM halves its largest dimension each time (on a tie, the first of M, N, K)
    g, _ = verification_layer(GEMM("m", M=64, N=8, K=32), lambda l: l.macs <= 64 * 8 * 32 // 4)
    assert (g.M, g.N, g.K) == (16, 8, 32)


# --- the stages, an interrupt, --resume -----------------------------------------------------------

@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(SPACE))
    (tmp_path / "model.yaml").write_text(yaml.safe_dump(MODEL))
    return tmp_path / "space.yaml", tmp_path / "model.yaml"


def _argv(space: Path, model: Path, out: Path, *extra: str) -> list[str]:
    return ["flow", "--model", str(model), "--space", str(space), "--out", str(out), "--verify", "none",
            "--fmax", "none", "--no-progress", *extra]


def _fake_synthesis(monkeypatch, calls: list[str], interrupt_first: bool, bram: int = 2) -> None:
    """Synthesis replaced by figures of its own (this test checks the flow's record, not Yosys;
    sim_tests/test_flow.py synthesises): the first call is interrupted if asked."""
    from accelgen import synth

    def fake(verilog, num_pes, target, by_source=False):
        calls.append(Path(verilog).parent.name)
        if interrupt_first and len(calls) == 1:
            raise KeyboardInterrupt
        one = synth.Resources(lut=10, ff=5, dsp=1)
        return synth.DesignResources(target, num_pes, one, synth.Resources(lut=100, ff=50, bram=bram))
    monkeypatch.setattr(synth, "synthesize_design", fake)
    monkeypatch.setattr(synth, "yosys_missing", lambda: None)


def test_an_interrupted_flow_resumes_where_it_stopped(inputs, tmp_path, monkeypatch, capsys):
    space, model = inputs
    out = tmp_path / "out"
    calls: list[str] = []
    _fake_synthesis(monkeypatch, calls, interrupt_first=True)
    assert main(_argv(space, model, out)) == 1
    err = capsys.readouterr().err
    assert "interrupted; stages done: explore, pick, emit, verify" in err and "--resume" in err
    record = json.loads((out / "flow.json").read_text())
    assert list(record["done"]) == ["explore", "pick", "emit", "verify"]
    assert (out / "chosen.yaml").exists() and (out / "rtl" / "conv2d" / "manifest.json").exists()
    assert not (out / "report.json").exists()

    # --resume runs only what is left: no search, no emission
    def refuse(*args, **kwargs):
        raise AssertionError("a stage done before was run again")
    import costmodel.dse as dse
    import hwgen.emit as emit
    monkeypatch.setattr(dse, "run_search", refuse)
    monkeypatch.setattr(emit, "emit_design", refuse)
    assert main(_argv(space, model, out, "--resume")) == 0
    err = capsys.readouterr().err
    assert err.count("done before (--resume)") == 4
    assert calls == ["conv2d", "conv2d", "gemm"]
    doc = json.loads((out / "report.json").read_text())
    assert doc["fpga"]["lut"] == 2 * 100 + 10 * sum(d["num_pes"] for d in doc["fpga"]["designs"].values())
    assert doc["fpga"]["fmax_mhz"] is None and "--fmax none" in doc["fpga"]["fmax_note"]
    assert doc["verified"] == []
    chosen = yaml.safe_load((out / "chosen.yaml").read_text())
    assert doc["chosen"]["hardware"]["num_pes"] == chosen["hardware"]["num_pes"]
    assert doc["chosen"]["rank"] == chosen["design_point"]["rank"]
    # the search's runtime of the chosen point is the sum of the design's predicted layer cycles
    assert sum(l["design_cycles"] for l in doc["layers"]) == doc["chosen"]["search_runtime_cycles"]
    html = (out / "report.html").read_text()
    assert all(d["design"] in html for d in doc["chosen"]["designs"]) and html.count("<svg") >= 4


def test_resume_refuses_changed_options_and_a_missing_flow(inputs, tmp_path, monkeypatch, capsys):
    space, model = inputs
    out = tmp_path / "out"
    _fake_synthesis(monkeypatch, [], interrupt_first=False)
    assert main(_argv(space, model, out)) == 0
    capsys.readouterr()
    assert main(_argv(space, model, out, "--resume", "--pick", "runtime")) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--pick 'knee', not 'runtime'" in err
    space.write_text(yaml.safe_dump({**SPACE, "hardware": {**SPACE["hardware"], "num_pes": [8]}}))
    assert main(_argv(space, model, out, "--resume")) == 1
    assert "--space-sha256" in capsys.readouterr().err
    assert main(_argv(space, model, tmp_path / "empty", "--resume")) == 1
    assert "no flow to resume" in capsys.readouterr().err


@pytest.mark.parametrize("change, message", [
    ({"hardware": {**SPACE["hardware"], "l2_bytes": [1024]}}, "no point of the space is feasible"),
    ({"dataflows": {"kcp": {"cluster": [4]}}}, "dataflows has no GEMM family"),
    ({"dataflows": {"kcp": {"cluster": [0]}, "nmk": {}}}, "cluster"),
])
def test_flow_errors_are_one_line(inputs, tmp_path, capsys, change, message):
    space, model = inputs
    space.write_text(yaml.safe_dump({**SPACE, **change}))
    assert main(_argv(space, model, tmp_path / "out")) == 1
    err = capsys.readouterr().err.strip().splitlines()        # (the stages' lines, then the error)
    assert [l for l in err if l.startswith("accelgen")] == err[-1:]
    assert err[-1].startswith("accelgen: error:") and message in err[-1]


def test_a_missing_simulator_is_one_line(inputs, tmp_path, monkeypatch, capsys):
    from sim_tests import simenv
    space, model = inputs
    monkeypatch.setattr(simenv, "missing_tools", lambda sim: ["verilator"])
    argv = _argv(space, model, tmp_path / "out", "--verify", "sample")     # (the last --verify counts)
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("accelgen: error: --sim: verilator is not installed") and "--verify none" in err[-1]
    assert list(json.loads((tmp_path / "out" / "flow.json").read_text())["done"]) == ["explore", "pick", "emit"]


@pytest.mark.parametrize("bram, device", [(2, "LFE5U-25F"), (40, "LFE5U-45F"), (60, "LFE5U-85F"), (300, None)])
def test_the_report_names_the_smallest_ecp5_that_holds_the_design(inputs, tmp_path, monkeypatch, bram, device):
    space, model = inputs
    _fake_synthesis(monkeypatch, [], interrupt_first=False, bram=bram)
    assert main(_argv(space, model, tmp_path / "out")) == 0
    fpga = json.loads((tmp_path / "out" / "report.json").read_text())["fpga"]
    assert fpga["bram"] == 2 * bram and fpga["device"] == device       # (two designs: conv2d and gemm)
    assert (fpga["device_note"] is None) == (device is not None)
    if device is None:
        assert "larger than the largest ECP5" in (tmp_path / "out" / "report.html").read_text()

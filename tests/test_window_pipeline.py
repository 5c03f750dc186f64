"""Per-axis strides, per-side pads, dilation and transposed convolutions through the pipeline:
the hwgen preset (the same tiles and cycles as the per-axis strides hwgen already ran through
compaction), the driver's registers and its numpy reference, `accelgen emit`'s manifest,
`analyze --preset hwgen`, the design-space search, and one-line errors for malformed fields."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from accelgen.cli import main
from costmodel import AccelgenError, Conv2D, Model, analyze_layer, analyze_model, builtin_hardware, load_workload_yaml
from costmodel.analysis import resolve_dataflow
from costmodel.design import load_design
from costmodel.dse import ScalarEvaluator, VectorEvaluator, make_plan, space_from_dict
from costmodel.hwgen_preset.closed import hwgen_cycles
from costmodel.hwgen_preset.preset import hwgen_layer, hwgen_structure
from costmodel.hwgen_preset.structure import tiles_of
from costmodel.hwgen_preset.walk import reference_summary
from costmodel.workload.layers import ConvTranspose2D
from sim_tests.driver import make_job, random_operands, reference_output

ROOT = Path(__file__).resolve().parents[1]
TINY = builtin_hardware("tiny")
BIG_L2 = {"input": 10**6, "weight": 10**6, "output": 10**6}


@pytest.mark.parametrize("r,s,stride", [(3, 1, 2), (1, 3, 2), (3, 2, 3), (2, 3, 3), (2, 1, 2), (1, 2, 4)])
@pytest.mark.parametrize("dataflow", ["kcp", "cp", "xp"])
def test_per_axis_strides_run_as_the_compacted_layer_did(r, s, stride, dataflow):
    """Before Conv2D had per-axis strides, hwgen ran per-axis strides only through compaction: a
    stride wider than one filter dimension becomes that dimension over the rows (columns) some
    window reads.  The layer given those strides directly over the compacted input has the same
    tiles, configuration registers and cycles."""
    old = Conv2D("a", K=4, C=3, Y=9, X=10, R=r, S=s, stride=stride)
    axes = {}
    for axis, size, taps, outputs in (("y", old.Y, r, old.Yo), ("x", old.X, s, old.Xo)):
        axes[axis] = (taps, outputs * taps) if stride > taps else (stride, size)
    new = Conv2D("a", K=4, C=3, Y=axes["y"][1], X=axes["x"][1], R=r, S=s, stride_y=axes["y"][0],
                 stride_x=axes["x"][0])
    assert new.stride_y != new.stride_x and (new.Yo, new.Xo) == (old.Yo, old.Xo)
    runs = {}
    for layer in (old, new):
        df = resolve_dataflow(dataflow, layer, TINY)
        s_, t, figures = hwgen_layer(df, layer, TINY)
        a, b = random_operands(layer, seed=2)
        job = make_job(s_, t, layer, a, b, BIG_L2)
        assert (job.config["stride_y"], job.config["stride_x"]) == (t.stride_y, t.stride_x) == \
            (new.stride_y, new.stride_x)
        runs[layer is new] = (t.as_dict(), figures["cycles"], reference_summary(s_, t)["cycles"],
                              analyze_layer(layer, dataflow, TINY, preset="hwgen").runtime_cycles)
    assert runs[True] == runs[False]
    assert len(set(runs[True][1:])) == 1                  # preset == vectorised schedule == step walk


def direct_convolution(layer: Conv2D, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The definition, one output at a time: taps outside the unpadded input read zero."""
    out = np.zeros((layer.K, layer.Yo, layer.Xo), dtype=np.int64)
    for k in range(layer.K):
        for oy in range(layer.Yo):
            for ox in range(layer.Xo):
                for r in range(layer.R):
                    for s in range(layer.S):
                        iy = oy * layer.stride_y + r * layer.dilation_y - layer.pad_top
                        ix = ox * layer.stride_x + s * layer.dilation_x - layer.pad_left
                        if 0 <= iy < layer.Y and 0 <= ix < layer.X:
                            out[k, oy, ox] += int(b[k, :, r, s] @ a[:, iy, ix])
    return out


@pytest.mark.parametrize("layer", [
    Conv2D("p", K=2, C=3, Y=7, X=6, R=3, S=2, stride_y=2, stride_x=1, pad_top=2, pad_bottom=0, pad_left=0,
           pad_right=1),
    Conv2D("d", K=2, C=2, Y=9, X=8, R=2, S=3, stride_y=1, stride_x=3, dilation_y=3, dilation_x=2, pad_top=1,
           pad_left=2),
])
def test_the_drivers_numpy_reference_is_the_definition(layer):
    a, b = random_operands(layer, seed=4)
    assert np.array_equal(reference_output(layer, a, b), direct_convolution(layer, a, b))


@pytest.mark.parametrize("layer,message", [
    (Conv2D("dil", K=4, C=3, Y=10, X=9, R=3, S=3, dilation_y=2),
     "layer 'dil': dilation_y=2: the generated PEs read windows of adjacent rows and columns, dilation 1 only"),
    (Conv2D("dil", K=4, C=3, Y=9, X=15, R=3, S=3, dilation_x=3),
     "layer 'dil': dilation_x=3: the generated PEs read windows"),
    (ConvTranspose2D("up", K=4, C=3, Y=4, X=4, R=2, S=2, stride=2),
     "layer 'up': hwgen generates direct convolutions and GEMMs; transposed convolutions are not generated yet"),
])
def test_hwgen_refuses_dilation_and_transposed_convolutions_in_one_line(layer, message):
    with pytest.raises(AccelgenError) as err:
        analyze_layer(layer, "kcp", TINY, preset="hwgen")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert analyze_layer(layer, "kcp", TINY).macs == layer.macs          # the maestro preset analyses it


MODEL = {"name": "axes", "layers": [
    {"name": "rows", "type": "conv2d", "K": 4, "C": 3, "Y": 9, "X": 8, "R": 3, "S": 3, "stride_y": 2,
     "stride_x": 1, "pad_top": 1, "pad_bottom": 0, "pad_left": 2, "pad_right": 1},
    {"name": "cols", "type": "conv2d", "K": 4, "C": 4, "Y": 5, "X": 11, "R": 1, "S": 3, "stride_y": 1,
     "stride_x": 2},
]}
TRANSPOSED = {"name": "up", "type": "convtranspose2d", "K": 3, "C": 4, "Y": 4, "X": 5, "R": 3, "S": 2,
              "stride_y": 2, "stride_x": 1, "pad_top": 1, "pad_bottom": 0, "pad_left": 0, "pad_right": 1,
              "output_pad_y": 1}
DILATED = {"name": "dil", "type": "conv2d", "K": 4, "C": 4, "Y": 8, "X": 8, "R": 3, "S": 3, "dilation": 2,
           "padding": 2}


def _write(tmp_path: Path, layers: list[dict]) -> str:
    path = tmp_path / "axes.yaml"
    path.write_text(yaml.safe_dump({"name": "axes", "layers": layers}, sort_keys=False))
    return str(path)


def test_emit_manifest_carries_per_axis_strides_and_refuses_per_layer(tmp_path: Path):
    model = _write(tmp_path, MODEL["layers"] + [DILATED, TRANSPOSED])
    out = tmp_path / "design"
    assert main(["emit", "--dataflow", "kcp", "--hw", "tiny", "--model", model, "--out", str(out)]) == 0
    by_name = {e["layer"]: e for e in json.loads((out / "manifest.json").read_text())["layers"]}
    rows = Conv2D("rows", K=4, C=3, Y=9, X=8, R=3, S=3, stride_y=2, stride_x=1, pad_top=1, pad_left=2,
                  pad_right=1)
    config = by_name["rows"]["config"]
    assert (config["stride_y"], config["stride_x"], config["in_rows"], config["in_cols"]) == (2, 1, 10, 11)
    assert by_name["rows"]["shape"] == rows.describe()
    fit = [rows, Conv2D("cols", K=4, C=4, Y=5, X=11, R=1, S=3, stride_y=1, stride_x=2)]
    s = hwgen_structure(resolve_dataflow("kcp", rows, TINY), rows, TINY, fit=fit)
    for layer in fit:
        tiles = tiles_of(s, resolve_dataflow("kcp", layer, TINY), layer)
        assert by_name[layer.name]["predicted_cycles_per_run"] == hwgen_cycles(s, tiles)
    assert by_name["dil"]["refused"].startswith("layer 'dil': dilation_y=2")
    assert "transposed convolutions are not generated" in by_name["up"]["refused"]


def test_analyze_hwgen_cli_reports_per_axis_layers(tmp_path: Path, capsys):
    model = _write(tmp_path, MODEL["layers"])
    assert main(["analyze", "--model", model, "--dataflow", "kcp", "--hw", "tiny", "--preset", "hwgen",
                 "--format", "json"]) == 0
    got = {layer["layer"]: layer["runtime_cycles"] for layer in json.loads(capsys.readouterr().out)["layers"]}
    for layer in load_workload_yaml(model).layers:
        assert got[layer.name] == analyze_layer(layer, "kcp", TINY, preset="hwgen").runtime_cycles


SPACE = {"name": "axes", "base": "small",
         "hardware": {"num_pes": [8, 16], "l1_bytes_per_pe": [256, 1024], "l2_bytes": [65536],
                      "noc": [{"bandwidth_words_per_cycle": [2, 8], "latency_cycles": 1}]},
         "dataflows": {"kcp": {"cluster": [4, 8]}, "yrp": {}, "xp": {}}}


def test_explore_searches_a_model_with_per_axis_strides_and_a_transposed_conv(tmp_path: Path, capsys):
    path = _write(tmp_path, MODEL["layers"] + [TRANSPOSED, DILATED])
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    out = tmp_path / "run"
    assert main(["explore", "--model", path, "--space", str(space), "--objectives", "runtime,energy",
                 "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    rows = (out / "pareto.csv").read_text().splitlines()
    first = dict(zip(rows[0].split(","), rows[1].split(",")))
    design = load_design(out / first["file"])
    model: Model = load_workload_yaml(path)
    r = analyze_model(model, design.hardware, per_layer=[design.dataflow_for(l) for l in model.layers])
    assert r.total["runtime_cycles"] == int(first["runtime_cycles"])
    assert sum(layer.macs for layer in r.layers) == model.macs
    plan = make_plan(space_from_dict(SPACE), model, ("runtime_cycles", "energy_pj"), (), "maestro", None)
    flat = np.arange(plan.size)
    got, want = VectorEvaluator(plan).evaluate(flat), ScalarEvaluator(plan).evaluate(flat)
    assert np.array_equal(got.valid, want.valid) and got.valid.any()
    assert np.array_equal(got.runtime_cycles[got.valid], want.runtime_cycles[want.valid])


@pytest.mark.parametrize("field,message", [
    ("stride_y: 0", "layers[0].stride_y must be a positive integer, not 0"),
    ("stride_x: 1.5", "layers[0].stride_x must be a positive integer, not 1.5"),
    ("pad_top: -1", "layers[0].pad_top must be a non-negative integer, not -1"),
    ("dilation: 0", "layers[0].dilation must be a positive integer, not 0"),
    ("dilation_x: two", "layers[0].dilation_x must be a positive integer, not 'two'"),
    ("stride: 2, stride_y: 3", "layers[0]: stride=2 and stride_y=3 disagree; give one of them"),
    ("strides: 2", ("layers[0].strides is not a field of a conv2d layer; expected name, type, K, C, Y, X, R, "
                    "S, stride, stride_y, stride_x")),
])
def test_malformed_window_fields_are_one_line_naming_file_field_and_value(tmp_path: Path, capsys, field, message):
    path = tmp_path / "bad.yaml"
    path.write_text("name: m\nlayers:\n  - {name: c1, type: conv2d, K: 4, C: 3, Y: 8, X: 8, R: 3, S: 3, "
                    f"{field}}}\n")
    assert main(["analyze", "--model", str(path), "--dataflow", "kcp"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: {message}" in err, err


def test_explore_with_hwgen_searches_per_axis_strides(tmp_path: Path, capsys):
    """The generated design's own timing in the search: a Pareto point's runtime is the hwgen
    preset's over the layers given with stride_y != stride_x and asymmetric pads."""
    path = _write(tmp_path, MODEL["layers"])
    out = tmp_path / "run"
    assert main(["explore", "--model", path, "--space", str(ROOT / "configs" / "space" / "hwgen_demo.yaml"),
                 "--preset", "hwgen", "--objectives", "runtime,area", "--out", str(out), "--no-progress"]) == 0
    rows = (out / "pareto.csv").read_text().splitlines()
    first = dict(zip(rows[0].split(","), rows[1].split(",")))
    design = load_design(out / first["file"])
    model = load_workload_yaml(path)
    r = analyze_model(model, design.hardware, per_layer=[design.dataflow_for(l) for l in model.layers],
                      preset="hwgen")
    assert r.total["runtime_cycles"] == int(first["runtime_cycles"])


def test_explore_searches_a_layer_whose_dilated_phases_differ_in_length(tmp_path: Path, capsys):
    """7 output rows dilated by 2 interleave phases of 4 and 3 rows: the search analyses them
    exactly, and its Pareto point is analyze_model's."""
    path = _write(tmp_path, MODEL["layers"] + [{**DILATED, "Y": 7, "padding": 2}])
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    out = tmp_path / "run"
    assert main(["explore", "--model", path, "--space", str(space), "--out", str(out), "--workers", "1",
                 "--no-progress"]) == 0
    rows = (out / "pareto.csv").read_text().splitlines()
    first = dict(zip(rows[0].split(","), rows[1].split(",")))
    model = load_workload_yaml(path)
    assert model.layers[-1].Yo == 7
    design = load_design(out / first["file"])
    r = analyze_model(model, design.hardware, per_layer=[design.dataflow_for(l) for l in model.layers])
    assert r.total["runtime_cycles"] == int(first["runtime_cycles"])


def test_explore_with_hwgen_refuses_once_a_layer_no_generated_design_runs(tmp_path: Path, capsys):
    """A dilated layer fails every hwgen point: the search says why in one line instead of
    reporting 0 valid points."""
    path = _write(tmp_path, MODEL["layers"] + [{**DILATED, "Y": 7, "padding": 2}])
    assert main(["explore", "--model", path, "--space", str(ROOT / "configs" / "space" / "hwgen_demo.yaml"),
                 "--preset", "hwgen", "--out", str(tmp_path / "run"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "layer 'dil': dilation_y=2: the generated PEs read windows" in err
    assert not (tmp_path / "run" / "pareto.csv").exists()

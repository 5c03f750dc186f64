"""The ``accelgen`` command line: outputs, options and one-line errors."""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from accelgen import analyze, cli
from accelgen.report import json_safe
from costmodel import get_model
from costmodel.base import AccelgenError
from costmodel.dataflow.yaml_io import load_dataflow

ROOT = Path(__file__).resolve().parents[1]
MAPPING = ROOT / "tests" / "data" / "maestro" / "small_cnn_kcp.m"
DATAFLOWS = ROOT / "configs" / "dataflows"
ACCELGEN = Path(sys.executable).parent / "accelgen"


@pytest.fixture(autouse=True)
def _fixed_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.chdir(ROOT)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, _ = run(capsys, "analyze", *argv, "--format", "json")
    assert code == 0
    return json.loads(out)


def by_layer(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {layer["layer"]: layer for layer in doc["layers"]}


# --- analyze: the three formats -------------------------------------------------------------------

def test_table_has_units_totals_and_filled_in_directives(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "analyze", "--model", "resnet50", "--dataflow", "kcp", "--hw", "small")
    assert code == 0
    for text in ("resnet50", "small", "64 PEs", "L2 1 MiB", "maestro",
                 "MACs", "(cycles)", "(µs)", "util", "(%)", "(B/PE)", "(B)", "(words/", "(µJ)", "bound", "fits",
                 "TOTAL", "4,089,184,256", "conv1", "layer4.2.conv3"):
        assert text in out, text
    # The filled-in directives: conv1's 7x7 filter and the 64-PE cluster, not Sz(R).
    assert "TemporalMap(7,7) R" in out and "Cluster(64,P)" in out and "Sz(" not in out
    assert "nmk" in out  # the GEMM layer's library default is shown too
    # resnet50's fc does not fit on `small` (off-chip bandwidth): reported, exit status still 0.
    assert "fc: off-chip traffic needs" in out
    assert err.startswith("accelgen: note: 1 layer(s) do not fit: fc") and err.count("\n") == 1
    assert max(len(line) for line in out.splitlines()) <= 120


def test_json_is_strict_and_totals_match_the_zoo(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "analyze", "--model", "resnet50", "--format", "json", "--noc-bw", "inf")
    assert code == 0
    doc = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert set(doc) == {"model", "hardware", "hardware_config", "preset", "layers", "total"}
    model = get_model("resnet50")
    assert len(doc["layers"]) == len(model.layers)
    assert all(isinstance(layer["macs"], int) and layer["runtime_cycles"] > 0 for layer in doc["layers"])
    assert doc["total"]["macs"] == model.macs == sum(layer["macs"] for layer in doc["layers"])
    assert doc["total"]["runtime_cycles"] == sum(layer["runtime_cycles"] for layer in doc["layers"])


def test_json_safe_maps_non_finite_floats_to_strings() -> None:
    doc = json_safe({"a": math.inf, "b": [-math.inf, 1.5], "c": {"d": math.nan}, "e": 3})
    assert doc == {"a": "inf", "b": ["-inf", 1.5], "c": {"d": "nan"}, "e": 3}
    json.dumps(doc, allow_nan=False)


def test_csv_has_a_header_a_row_per_layer_and_a_total(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "analyze", "--model", "alexnet", "--format", "csv")
    assert code == 0
    rows = list(csv.reader(io.StringIO(out)))
    header, body, total = rows[0], rows[1:-1], rows[-1]
    assert header[0] == "layer" and "l2_reads_input" in header and "energy_pj_total" in header
    assert [row[0] for row in body] == [layer.name for layer in get_model("alexnet").layers]
    assert all(len(row) == len(header) for row in rows)
    record = dict(zip(header, total))
    assert record["layer"] == "TOTAL" and int(record["macs"]) == get_model("alexnet").macs
    assert float(record["energy_pj_total"]) > 0


# --- analyze: inputs ------------------------------------------------------------------------------

def test_mapping_file_uses_each_layers_own_dataflow(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "--mapping", str(MAPPING.relative_to(ROOT)))
    layers = by_layer(doc)
    assert list(layers) == ["CONV1", "DW2", "PW3", "FC4"]
    assert "Cluster(8,P)" in layers["CONV1"]["dataflow"]
    # PW3 has no Dataflow block: as in MAESTRO it reuses DW2's, and is named after it.
    assert layers["PW3"]["dataflow_name"] == "small_cnn_kcp.m:DW2"
    code, out, _ = run(capsys, "analyze", "--mapping", str(MAPPING))
    assert code == 0 and "small_cnn_kcp.m:CONV1" in out and "TemporalMap(8,8) C" in out


def test_model_m_file_dataflows_are_replaced_by_dataflow_option(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "analyze", "--model", str(MAPPING), "--dataflow", "kcp", "--format", "json")
    assert code == 0
    assert {layer["dataflow_name"] for layer in json.loads(out)["layers"]} == {"kcp", "nmk"}
    assert "Dataflow blocks" in err and "ignored" in err


def test_workload_yaml_and_yaml_dataflow(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "--model", "configs/workloads/tiny_cnn.yaml", "--dataflow", "configs/dataflows/kcp_64.yaml")
    layers = by_layer(doc)
    assert doc["model"] == "tiny_cnn"
    assert layers["conv1"]["dataflow_name"] == "kcp_64" and layers["fc"]["dataflow_name"] == "nmk"


def test_rs_like_file_matches_library_yrp(capsys: pytest.CaptureFixture[str]) -> None:
    from_file = by_layer(run_json(capsys, "--model", "alexnet", "--dataflow", str(DATAFLOWS / "rs_like.yaml")))
    library = by_layer(run_json(capsys, "--model", "alexnet", "--dataflow", "yrp"))
    for name, layer in library.items():
        assert from_file[name]["runtime_cycles"] == layer["runtime_cycles"], name
        assert from_file[name]["dataflow"] == layer["dataflow"], name


def test_noc_bw_inf_is_never_slower(capsys: pytest.CaptureFixture[str]) -> None:
    default = by_layer(run_json(capsys, "--model", "mobilenetv2"))
    unlimited = by_layer(run_json(capsys, "--model", "mobilenetv2", "--noc-bw", "inf"))
    assert all(unlimited[n]["runtime_cycles"] <= default[n]["runtime_cycles"] for n in default)
    assert sum(r["runtime_cycles"] for r in unlimited.values()) < sum(r["runtime_cycles"] for r in default.values())


def test_hardware_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "--model", "alexnet", "--hw", "large", "--num-pes", "32", "--simd-lanes", "2",
                   "--noc-latency", "0")
    assert {layer["num_pes"] for layer in doc["layers"]} == {32}
    code, out, _ = run(capsys, "analyze", "--model", "alexnet", "--num-pes", "32", "--noc-bw", "8")
    assert code == 0 and "32 PEs" in out and "--num-pes 32" in out and "8 words/cycle" in out


def test_gemm_dataflow_applies_to_gemm_layers_only(capsys: pytest.CaptureFixture[str]) -> None:
    gemm_file = str(DATAFLOWS / "weight_stationary_gemm.yaml")
    layers = by_layer(run_json(capsys, "--model", "alexnet", "--dataflow", "yrp", "--gemm-dataflow", gemm_file))
    assert {layers[n]["dataflow_name"] for n in ("fc6", "fc7", "fc8")} == {"weight_stationary_gemm"}
    assert {layers[n]["dataflow_name"] for n in ("conv1", "conv5")} == {"yrp"}
    assert "Cluster(32,P)" in layers["fc6"]["dataflow"]
    # A GEMM dataflow given as --dataflow is meant for the GEMMs (BERT has nothing else).
    bert = run_json(capsys, "--model", "bert_base", "--dataflow", gemm_file)
    assert {layer["dataflow_name"] for layer in bert["layers"]} == {"weight_stationary_gemm"}


def test_out_file_is_written_whole(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    code, out, _ = run(capsys, "analyze", "--model", "alexnet", "--format", "json", "--out", str(target))
    assert code == 0 and out == ""
    assert json.loads(target.read_text())["total"]["macs"] == get_model("alexnet").macs
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary left behind


# --- errors: one line, naming the offender, no traceback -------------------------------------------

def _malformed_hw(tmp_path: Path) -> str:
    path = tmp_path / "broken_hw.yaml"
    path.write_text("name: broken\nnum_pes: [64\nl2_bytes: 1024\n")
    return str(path)


ERROR_CASES = [
    pytest.param(["--model", "resnet5"], ["'resnet5'", "resnet50"], id="unknown-model"),
    pytest.param(["--model", "missing_model.yaml"], ["missing_model.yaml", "no such file"], id="missing-model-file"),
    pytest.param(["--model", "alexnet", "--hw", "missing_hw.yaml"], ["missing_hw.yaml", "no such file"],
                 id="missing-hw-file"),
    pytest.param(["--model", "alexnet", "--hw", "<malformed>"], ["broken_hw.yaml", "not valid YAML", "line"],
                 id="malformed-hw-yaml"),
    pytest.param(["--model", "alexnet", "--dataflow", "kpc"], ["--dataflow", "'kpc'", "kcp"], id="unknown-dataflow"),
    pytest.param(["--model", "alexnet", "--dataflow", "nope.yaml"], ["nope.yaml", "no such file"],
                 id="missing-dataflow-file"),
    pytest.param(["--model", "alexnet", "--dataflow", "yrp", "--num-pes", "8"], ["conv1", "Cluster(11)", "8"],
                 id="cluster-exceeds-pes"),
    pytest.param(["--model", "alexnet", "--gemm-dataflow", "kcp"], ["--gemm-dataflow", "'kcp'"],
                 id="conv-dataflow-for-gemm"),
    pytest.param(["--mapping", str(MAPPING), "--model", "alexnet"], ["--model", "--mapping"], id="mapping-and-model"),
    pytest.param([], ["--mapping", "--model"], id="no-workload"),
    pytest.param(["--model", "alexnet", "--num-pes", "0"], ["--num-pes", "'0'"], id="zero-pes"),
    pytest.param(["--model", "alexnet", "--noc-bw", "fast"], ["--noc-bw", "'fast'"], id="bad-noc-bw"),
    pytest.param(["--model", "alexnet", "--out", "no_such_dir/x.txt"], ["no_such_dir/x.txt", "cannot write"],
                 id="unwritable-out"),
]


@pytest.mark.parametrize(("argv", "needles"), ERROR_CASES)
def test_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str],
                             needles: list[str]) -> None:
    argv = [_malformed_hw(tmp_path) if arg == "<malformed>" else arg for arg in argv]
    try:
        code = cli.main(["analyze", *argv])
    except SystemExit as exit_:  # argparse usage errors: status 2
        code = exit_.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert code not in (0, None)
    assert out == ""
    assert err.startswith("accelgen: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)


def test_interrupt_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(analyze, "analyze_model", interrupted)
    code, out, err = run(capsys, "analyze", "--model", "alexnet")
    assert code == 1 and err == "accelgen: error: interrupted\n"


# --- dataflow files -------------------------------------------------------------------------------

def test_example_dataflows_load() -> None:
    assert load_dataflow(DATAFLOWS / "kcp_64.yaml").name == "kcp_64"
    assert "Cluster(Sz(R),P)" in str(load_dataflow(DATAFLOWS / "rs_like.yaml"))
    gemm = load_dataflow(DATAFLOWS / "weight_stationary_gemm.yaml")
    assert gemm.dims() == {"M", "N", "K"} and "TemporalMap(32,32) K" in str(gemm)
    assert load_dataflow(MAPPING).name == "small_cnn_kcp:CONV1"


@pytest.mark.parametrize(("text", "needles"), [
    ("directives: ['SpatialMap(1,1) K']\nstride: 2\n", ["'stride'", "not a dataflow field"]),
    ("name: x\n", ["directives is missing"]),
    ("directives:\n  - SpatialMap(1,1) K\n  - 7\n", ["directives[1]", "7"]),
    ("directives: 5\n", ["directives must be", "5"]),
    ("name: two words\ndirectives: SpatialMap(1,1) K\n", ["name", "'two words'"]),
    ("directives: SpatialMap(1,1) K; Spatial(1,1) C\n", ["directive 2", "'Spatial(1,1) C'"]),
    ("directives:\n  - TemporalMap(1,1) K\n", ["no SpatialMap"]),
    ("directives: [SpatialMap(1,1) K]\n", ["directives[0] 'SpatialMap(1'", "quote each directive"]),
    ("directives: ['SpatialMap(1,1) K'\n", ["not valid YAML", "line"]),
    ("directives: SpatialMap(1,1) K\ndirectives: SpatialMap(1,1) C\n", ["duplicate key"]),
    ("", ["empty"]),
])
def test_dataflow_file_errors_name_the_file(tmp_path: Path, text: str, needles: list[str]) -> None:
    path = tmp_path / "df.yaml"
    path.write_text(text)
    with pytest.raises(AccelgenError) as info:
        load_dataflow(path)
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message
    for needle in needles:
        assert needle in message, (needle, message)


def test_dataflow_file_not_found_and_wrong_kind(tmp_path: Path) -> None:
    with pytest.raises(AccelgenError, match=r"nothing\.yaml: no such file$"):
        load_dataflow(tmp_path / "nothing.yaml")
    with pytest.raises(AccelgenError, match=r"has no Dataflow block"):
        load_dataflow(ROOT / "tests" / "data" / "maestro" / "model_only.m")
    with pytest.raises(AccelgenError, match=r"unknown dataflow file type '\.txt'"):
        load_dataflow(tmp_path / "df.txt")


# --- list, and the installed script ---------------------------------------------------------------

def test_list_names_models_dataflows_hardware_presets(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list")
    assert code == 0
    for text in ("resnet50", "4,089,184,256", "kcp", "nmk", "Eyeriss", "maestro_ref", "1,024", "maestro"):
        assert text in out, text


def _script(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ACCELGEN), *argv], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "COLUMNS": "120", "PYTHONIOENCODING": "utf-8"})


def test_script_analyze_json() -> None:
    done = _script("analyze", "--model", "bert_base", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["total"]["macs"] == get_model("bert_base").macs


def test_script_error_is_one_line() -> None:
    done = _script("analyze", "--model", "alexnet", "--dataflow", "yrp", "--num-pes", "8")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("accelgen: error: layer 'conv1'") and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr


def test_script_list_and_table() -> None:
    listed = _script("list")
    assert listed.returncode == 0 and "resnet50" in listed.stdout and "kcp" in listed.stdout
    table = _script("analyze", "--mapping", str(MAPPING))
    assert table.returncode == 0 and "TOTAL" in table.stdout and "Cluster(64,P)" in table.stdout


def test_json_records_the_hardware_as_analysed(capsys: pytest.CaptureFixture[str]) -> None:
    from costmodel import hardware_from_dict

    data = run_json(capsys, "--model", "alexnet", "--num-pes", "128", "--noc-latency", "3")
    config = data["hardware_config"]
    assert config["num_pes"] == 128 and config["noc"][0]["latency_cycles"] == 3
    hw = hardware_from_dict(config, "json")            # what was analysed can be analysed again
    assert hw.num_pes == 128 and hw.noc[0].latency_cycles == 3


def test_pe_drain_words_override(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--pe-drain-words reaches the hwgen preset: a 1x1 layer whose every step ends an output
    tile is drain-bound with the generator's narrow drain and compute-bound with a wide one."""
    model = tmp_path / "one.yaml"
    model.write_text("name: one\nlayers:\n  - {name: pw, type: conv2d, K: 64, C: 256, Y: 14, X: 14, R: 1, S: 1}\n")
    args = ("--model", str(model), "--dataflow", "kcp(cluster=8,c_tile=2,x_tile=14)", "--hw", "small",
            "--preset", "hwgen")
    narrow, wide = (run_json(capsys, *args, *extra)["layers"][0] for extra in ((), ("--pe-drain-words", "64")))
    assert narrow["runtime_cycles"] > 2 * wide["runtime_cycles"] > 0
    with pytest.raises(SystemExit) as info:
        cli.main(["analyze", *args, "--pe-drain-words", "-1"])
    assert info.value.code == 2 and "--pe-drain-words" in capsys.readouterr().err

"""A Pareto-front point of ``accelgen explore --preset hwgen``, generated and run: the RTL takes
exactly the cycles the search reported for it, with outputs bit-exact (issue: search the
generator's own design space).  On both simulators."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from accelgen.cli import main
from costmodel.dataflow.library import dataflow_label
from costmodel.design import load_design
from costmodel.hardware.hardware import hardware_to_dict

from . import simenv

ROOT = Path(__file__).resolve().parents[1]
LAYER = "conv2d:K=8,C=6,Y=7,X=7,R=3,S=3,pad=1"
SPACE = {
    "name": "front", "base": "tiny",
    "hardware": {"num_pes": [4, 8], "l1_bytes_per_pe": [256, 1024], "l2_bytes": [65536],
                 "noc": [{"bandwidth_words_per_cycle": [2, 4], "latency_cycles": 1}]},
    "dataflows": {"kcp": {"cluster": [2, 4], "x_tile": [1, 7]}, "cp": {}, "xp": {}},
    "search": {"mode": "exhaustive"},
}


@pytest.fixture(scope="module")
def front(tmp_path_factory) -> tuple[Path, dict]:
    """The search's fastest front point: its design file and its row of pareto.csv."""
    tmp = tmp_path_factory.mktemp("front")
    (tmp / "space.yaml").write_text(yaml.safe_dump(SPACE))
    (tmp / "model.yaml").write_text(yaml.safe_dump({"name": "one", "layers": [
        {"name": "c", "type": "conv2d", "K": 8, "C": 6, "Y": 7, "X": 7, "R": 3, "S": 3, "padding": 1}]}))
    assert main(["explore", "--model", str(tmp / "model.yaml"), "--space", str(tmp / "space.yaml"), "--preset",
                 "hwgen", "--objectives", "runtime,area", "--out", str(tmp / "out"), "--no-progress"]) == 0
    with open(tmp / "out" / "pareto.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    best = min(rows, key=lambda r: int(r["runtime_cycles"]))
    return tmp / "out" / best["file"], best


@pytest.mark.parametrize("sim", simenv.SIMULATORS)
def test_a_front_point_runs_in_the_cycles_the_search_reported(sim, front, tmp_path, capsys):
    simenv.require_simulator(sim)
    design_file, row = front
    design = load_design(design_file)
    hw_file = tmp_path / "hw.yaml"
    hw_file.write_text(yaml.safe_dump(hardware_to_dict(design.hardware)))
    family, params = design.dataflows["conv2d"]
    code = main(["verify", "--dataflow", dataflow_label(family, params), "--hw", str(hw_file), "--layer", LAYER,
                 "--sim", sim, "--seed", "5", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["bit_exact"] is True
    assert report["measured_cycles"] == report["predicted_cycles"] == int(row["runtime_cycles"])

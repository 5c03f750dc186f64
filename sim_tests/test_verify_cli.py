"""`accelgen verify` end to end on both simulators: JSON report, exit status, refusals."""

import json
from pathlib import Path

import pytest
import yaml

from accelgen.cli import main
from costmodel.hardware.hardware import hardware_to_dict

from . import simenv
from .matrix import array


@pytest.fixture
def tiny8(tmp_path: Path) -> str:
    """The matrix's 8-PE array as a file (its build is shared with the matrix)."""
    path = tmp_path / "tiny8.yaml"
    path.write_text(yaml.safe_dump(hardware_to_dict(array("tiny8"))))
    return str(path)


@pytest.mark.parametrize("sim", simenv.SIMULATORS)
def test_verify_reports_cycles_and_numerics(sim, tiny8, capsys):
    simenv.require_simulator(sim)
    code = main(["verify", "--dataflow", "xp", "--hw", tiny8, "--layer", "conv2d:K=8,C=4,Y=6,X=6,R=3,S=3,stride=1",
                 "--sim", sim, "--seed", "3", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["measured_cycles"] == report["predicted_cycles"] > 0 and report["cycle_difference"] == 0
    assert report["bit_exact"] is True and 0 < report["rtl_utilization"] <= 1


def test_verify_refuses_a_layer_the_l2_cannot_hold(tiny8, capsys):
    code = main(["verify", "--dataflow", "kcp", "--hw", tiny8, "--layer", "conv2d:K=64,C=64,Y=32,X=32,R=3,S=3",
                 "--sim", "icarus"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "L2 words, the generated L2 holds" in err

"""`accelgen emit` output passes `verilator --lint-only` with only the documented waivers: the
core alone, and the IP top level with the core inside."""

import subprocess
from pathlib import Path

import pytest

from accelgen.cli import main
from hwgen.emit import IP_TOP, LINT_WAIVERS as WAIVERS, TOP
from hwgen.ipfiles import VERILOG_FILES

from . import simenv


@pytest.mark.parametrize("dataflow", ["kcp", "cp", "xp", "nmk"])
def test_emitted_verilog_lints_clean(dataflow: str, tmp_path: Path) -> None:
    simenv.require_simulator("verilator")
    out = tmp_path / dataflow
    assert main(["emit", "--dataflow", dataflow, "--hw", "tiny", "--out", str(out)]) == 0
    for top, files in ((TOP, [f"{TOP}.v"]), (IP_TOP, list(VERILOG_FILES))):
        proc = subprocess.run(["verilator", "--lint-only", *WAIVERS, "--top-module", top,
                               *(str(out / name) for name in files)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "%Warning" not in proc.stderr and "%Error" not in proc.stderr

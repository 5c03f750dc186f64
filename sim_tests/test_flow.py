"""``accelgen flow`` from a network to a report, on each simulator: the search picks a point, the
generator emits it, every layer shape of the network runs on it (one scaled down to the cycle
budget) bit-exact and in exactly the predicted cycles, Yosys synthesises it and nextpnr places
its PE: on an ECP5 in Verilator's run, on an iCE40 in Icarus's (issue: one command from a
network to a verified, synthesised accelerator)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from accelgen import pnr, synth
from accelgen.cli import main

from . import simenv

SPACE = {"name": "flowtest", "base": "tiny",
         "hardware": {"num_pes": [4, 8], "l1_bytes_per_pe": [256], "l2_bytes": [16384],
                      "noc": [{"bandwidth_words_per_cycle": [2, 4], "latency_cycles": 1}]},
         "dataflows": {"kcp": {"cluster": [4]}, "xp": {}, "nmk": {"k_tile": [4]}},
         "search": {"mode": "exhaustive"}}
MODEL = {"name": "flownet", "layers": [
    {"name": "c1", "type": "conv2d", "K": 8, "C": 4, "Y": 6, "X": 6, "R": 3, "S": 3, "padding": 1},
    {"name": "c2", "type": "conv2d", "K": 16, "C": 8, "Y": 12, "X": 12, "R": 3, "S": 3, "stride": 2, "padding": 1},
    {"name": "c3", "type": "conv2d", "K": 8, "C": 4, "Y": 6, "X": 6, "R": 3, "S": 3, "padding": 1},
    {"name": "fc", "type": "gemm", "M": 4, "N": 8, "K": 16}]}
MAX_SIM_CYCLES = 4000        # c2 takes more: it runs scaled down


@pytest.mark.parametrize("sim", simenv.SIMULATORS)
def test_flow_builds_verifies_and_synthesises_a_network(sim, tmp_path: Path, capsys):
    simenv.require_simulator(sim)
    missing = synth.yosys_missing()
    if missing:
        (pytest.fail if os.environ.get("CI") else pytest.skip)(f"the flow synthesises: {missing}")
    target = "ecp5" if sim == "verilator" else "ice40"
    placeable = pnr.nextpnr_missing(target) is None
    if not placeable and os.environ.get("CI"):
        pytest.fail(f"the flow places and routes under CI: {pnr.nextpnr_missing(target)}")
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(SPACE))
    (tmp_path / "model.yaml").write_text(yaml.safe_dump(MODEL))
    out = tmp_path / "flow"
    fmax = "pe" if placeable else "none"
    code = main(["flow", "--model", str(tmp_path / "model.yaml"), "--space", str(tmp_path / "space.yaml"),
                 "--objectives", "runtime,area", "--target", target, "--verify", "all", "--sim", sim,
                 "--max-sim-cycles", str(MAX_SIM_CYCLES), "--fmax", fmax, "--sim-seed", "3", "--out", str(out),
                 "--no-progress"])
    assert code == 0, capsys.readouterr().err
    doc = json.loads((out / "report.json").read_text())

    # every distinct shape ran (c3 is c1's), each bit-exact and cycle-exact; c2 scaled to the budget
    verified = {v["layer"]: v for v in doc["verified"]}
    assert sorted(verified) == ["c1", "c2", "fc"] and verified["c1"]["also"] == ["c3"]
    for v in doc["verified"]:
        assert v["bit_exact"] is True and v["measured_cycles"] == v["predicted_cycles"] > 0 and v["sim"] == sim
    assert verified["c2"]["scaled"] and verified["c2"]["predicted_cycles"] <= MAX_SIM_CYCLES
    assert verified["c2"]["simulated_shape"] != verified["c2"]["shape"]
    # an unscaled layer ran in the cycles its design's manifest predicts, which the search summed
    layers = {l["layer"]: l for l in doc["layers"]}
    for name in ("c1", "fc"):
        assert not verified[name]["scaled"]
        assert verified[name]["predicted_cycles"] * verified[name]["runs"] == layers[name]["design_cycles"]
    assert sum(l["design_cycles"] for l in doc["layers"]) == doc["chosen"]["search_runtime_cycles"]

    # FPGA figures from Yosys, Fmax from nextpnr where it ran
    fpga = doc["fpga"]
    assert fpga["target"] == target and all(fpga[k] > 0 for k in ("lut", "ff", "bram"))
    assert fpga["dsp"] > 0 if target == "ecp5" else fpga["dsp"] == 0     # (synth_ice40 maps multipliers to LUTs)
    assert sorted(fpga["designs"]) == ["conv2d", "gemm"]
    for d in fpga["designs"].values():      # the shared parts split by the generator's parts add up
        parts = d["shared_by_source"]
        assert {"controller", "loader", "drain", "l2"} <= set(parts)
        assert {k: sum(c[k] for c in parts.values()) for k in ("lut", "ff", "dsp", "bram", "lutram")} == d["shared"]
    if fmax == "pe":
        assert 10 < fpga["fmax_mhz"] < 1000 and fpga["fmax_scope"] == "pe"
        assert fpga["fmax_part"] == ("iCE40HX8K" if target == "ice40" else "LFE5U-25F")
    else:
        assert fpga["fmax_mhz"] is None and fpga["fmax_note"]

    # the HTML names the chosen design and holds its plots
    html = (out / "report.html").read_text()
    chosen = yaml.safe_load((out / "chosen.yaml").read_text())
    assert chosen["hardware"]["name"].startswith("flowtest-")
    assert all(d["design"] in html for d in doc["chosen"]["designs"]) and html.count("<svg") >= 5
    assert f"{chosen['hardware']['num_pes']} PEs" in html

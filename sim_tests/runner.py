"""Run generated designs in a simulator (cocotb 2 through ``cocotb_tools.runner``): build a
design's IP top level (``accelgen_axi_top`` around ``accelgen_top``) once for Icarus or
Verilator, run host jobs on it over AXI (``sim_tests/tb_accel.py``), and check a layer against
numpy and the ``hwgen`` preset.  One build serves every layer of a design: layers are run-time
configuration.  Jobs alternate between the AXI4-Stream ports and the ``load_data`` /
``read_data`` registers, so every case of the matrix runs through both."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Literal

from costmodel.base import AccelgenError
from costmodel.dataflow.spec import DataflowSpec, resolve_dataflow
from costmodel.hardware import Hardware
from costmodel.hwgen_preset.fast import hwgen_cycles
from costmodel.hwgen_preset.preset import hwgen_structure, l2_split
from costmodel.hwgen_preset.structure import HwStructure, tiles_of
from costmodel.workload import Layer
from hwgen.emit import IP_TOP, design_id, write_design_sources

from hwgen import ipfiles

from . import simenv
from .driver import Job, make_job, random_operands

__all__ = ["Simulator", "run_jobs", "verify_layer", "timeout_cycles"]

Simulator = Literal["icarus", "verilator"]


def timeout_cycles(predicted: int) -> int:
    """How long the bench waits for ``done`` before it gives up on a job."""
    return 2 * predicted + 1000


def _design_sources(structure: HwStructure, l2_words: dict[str, int]) -> list[Path]:
    folder = simenv.SIM_BUILD / "designs" / design_id(structure, l2_words)
    sources = [folder / name for name in ipfiles.VERILOG_FILES]
    if not all(src.exists() for src in sources):
        assert [p.name for p in write_design_sources(structure, l2_words, folder)] == [p.name for p in sources]
    return sources


def run_jobs(structure: HwStructure, l2_words: dict[str, int], jobs: list[tuple[str, Job, int]],
             sim: Simulator) -> list[dict]:
    """Run ``(name, job, timeout_cycles)`` on ``sim``; returns per job ``finished``,
    ``measured_cycles`` and ``outputs``."""
    simenv.apply_env()
    missing = simenv.missing_tools(sim)
    if missing:
        raise AccelgenError(f"{sim} is not installed here (missing {', '.join(missing)}); run `make tools`",
                            where="--sim")
    from cocotb_tools.runner import get_runner

    did = design_id(structure, l2_words)
    sources = _design_sources(structure, l2_words)
    build = simenv.build_dir(did, sim)
    runner = get_runner(sim)
    with contextlib.redirect_stdout(sys.stderr):     # the runner's chatter must not mix with a report
        runner.build(sources=sources, hdl_toplevel=IP_TOP, build_dir=build, build_args=simenv.build_args(sim),
                     timescale=("1ns", "1ps"), always=False, log_file=build / "build.log")
    payload = []
    for i, (name, job, timeout) in enumerate(jobs):
        payload.append({"name": name, "job": job.as_dict(), "timeout_cycles": timeout, "streams": i % 2 == 0})
    token = hashlib.sha256(json.dumps([p["name"] for p in payload]).encode()).hexdigest()[:10]
    run_dir = build / f"run_{os.getpid()}_{token}"
    run_dir.mkdir(parents=True, exist_ok=True)
    jobs_file, results_file = run_dir / "jobs.json", run_dir / "results.json"
    jobs_file.write_text(json.dumps(payload))
    env = dict(simenv.TB_ENV, ACCELGEN_JOBS=str(jobs_file), ACCELGEN_RESULTS=str(results_file))
    with contextlib.redirect_stdout(sys.stderr):
        runner.test(test_module="sim_tests.tb_accel", hdl_toplevel=IP_TOP, build_dir=build, test_dir=run_dir,
                    extra_env=env, log_file=run_dir / "sim.log")
    if not results_file.exists():
        raise AccelgenError(f"the simulation wrote no results; see {run_dir / 'sim.log'}", where=sim)
    results = json.loads(results_file.read_text())
    if all(r['finished'] for r in results):
        shutil.rmtree(run_dir, ignore_errors=True)
    return results


def verify_layer(dataflow: DataflowSpec, hw: Hardware, layer: Layer, sim: Simulator, seed: int,
                 label: str | None = None) -> dict:
    """Generate (or reuse) the design, run ``layer`` on random int8 data, compare with numpy and
    the ``hwgen`` preset."""
    df = resolve_dataflow(dataflow, layer, hw)
    structure = hwgen_structure(df, layer, hw, fit=[layer])
    l2 = l2_split(hw)
    tiles = tiles_of(structure, df, layer)
    a, b = random_operands(layer, seed)
    job = make_job(structure, tiles, layer, a, b, l2)
    predicted = hwgen_cycles(structure, tiles)
    result = run_jobs(structure, l2, [(layer.name, job, timeout_cycles(predicted))], sim)[0]
    measured = result["measured_cycles"]
    return {"layer": layer.describe(), "dataflow": label or df.name, "hardware": hw.name, "sim": sim,
            "seed": seed, "predicted_cycles": predicted, "measured_cycles": measured,
            "cycle_difference": measured - predicted if result["finished"] else None,
            "bit_exact": result["finished"] and result["outputs"] == job.expected,
            "rtl_utilization": layer.macs / (structure.num_pes * structure.simd_lanes * measured)
            if measured > 0 else 0.0}

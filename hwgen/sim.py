"""Build a generated design for a simulator and run host jobs on it (cocotb 2 through
``cocotb_tools.runner``).  One build serves every layer of a design: layers are run-time
configuration."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Literal

from costmodel._errors import AccelgenError
from costmodel.hwgen_schedule import HwStructure, structure_key

from . import simenv
from .host import Job

__all__ = ["Simulator", "design_id", "write_verilog", "run_jobs", "TOP"]

Simulator = Literal["icarus", "verilator"]
TOP = "accelgen_top"


def _generator_digest() -> str:
    """The generator's own source: a changed generator never reuses a cached build."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for name in ("accelerator.py", "pe.py", "_tb_accel.py"):
        h.update((here / name).read_bytes())
    return h.hexdigest()[:16]


def design_id(structure: HwStructure, l2_words: dict[str, int]) -> str:
    key = repr((structure_key(structure), sorted(l2_words.items()), _generator_digest()))
    return "accel_" + hashlib.sha256(key.encode()).hexdigest()[:12]


def write_verilog(structure: HwStructure, l2_words: dict[str, int], path: Path) -> Path:
    """Emit the design's Verilog to ``path`` (written to a temporary name, then renamed)."""
    from amaranth.back import verilog

    from .accelerator import Accelerator
    text = verilog.convert(Accelerator(structure, l2_words), name=TOP)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".v.tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def _design_source(structure: HwStructure, l2_words: dict[str, int]) -> Path:
    src = simenv.SIM_BUILD / "designs" / design_id(structure, l2_words) / f"{TOP}.v"
    if not src.exists():
        write_verilog(structure, l2_words, src)
    return src


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
    src = _design_source(structure, l2_words)
    build = simenv.build_dir(did, sim)
    runner = get_runner(sim)
    with contextlib.redirect_stdout(sys.stderr):     # the runner's chatter must not mix with a report
        runner.build(sources=[src], hdl_toplevel=TOP, build_dir=build, build_args=simenv.build_args(sim),
                     timescale=("1ns", "1ps"), always=False, log_file=build / "build.log")
    payload = []
    for name, job, timeout in jobs:
        entry = job.as_dict()
        entry.update(name=name, timeout_cycles=timeout)
        payload.append(entry)
    token = hashlib.sha256(json.dumps([p["name"] for p in payload]).encode()).hexdigest()[:10]
    run_dir = build / f"run_{os.getpid()}_{token}"
    run_dir.mkdir(parents=True, exist_ok=True)
    jobs_file, results_file = run_dir / "jobs.json", run_dir / "results.json"
    jobs_file.write_text(json.dumps(payload))
    env = dict(simenv.TB_ENV, ACCELGEN_JOBS=str(jobs_file), ACCELGEN_RESULTS=str(results_file))
    with contextlib.redirect_stdout(sys.stderr):
        runner.test(test_module="hwgen._tb_accel", hdl_toplevel=TOP, build_dir=build, test_dir=run_dir,
                    extra_env=env, log_file=run_dir / "sim.log")
    if not results_file.exists():
        raise AccelgenError(f"the simulation wrote no results; see {run_dir / 'sim.log'}", where=sim)
    results = json.loads(results_file.read_text())
    if all(r['finished'] for r in results):
        shutil.rmtree(run_dir, ignore_errors=True)
    return results

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
import time
from pathlib import Path
from typing import Literal

from costmodel.base import AccelgenError, write_atomically
from costmodel.dataflow import Dataflow
from costmodel.dataflow.spec import DataflowSpec, resolve_dataflow
from costmodel.hardware import Hardware
from costmodel.hwgen_preset.closed import hwgen_cycles
from costmodel.hwgen_preset.preset import hwgen_structure, l2_split
from costmodel.hwgen_preset.structure import HwStructure, tiles_of
from costmodel.workload import Layer
from hwgen.emit import IP_TOP, design_id, generator_digest, write_design_sources
from hwgen.pe import PE_MODULE

from hwgen import ipfiles

from . import simenv
from .driver import Job, make_job, random_operands

__all__ = ["Simulator", "design_sources", "run_jobs", "run_layer", "verify_layer", "timeout_cycles"]

Simulator = Literal["icarus", "verilator"]


#: Wall seconds of the last :func:`run_jobs`'s phases (``generate``, ``build``, ``run``), for
#: ``make bench``.
PHASE_SECONDS: dict[str, float] = {}


def timeout_cycles(predicted: int) -> int:
    """How long the bench waits for ``done`` before it gives up on a job."""
    return 2 * predicted + 1000


def design_sources(structure: HwStructure, l2_words: dict[str, int]) -> list[Path]:
    """The Verilog the simulators build for the design (written once under ``sim_build/designs``)."""
    folder = simenv.SIM_BUILD / "designs" / design_id(structure, l2_words)
    sources = [folder / name for name in ipfiles.VERILOG_FILES]
    if not all(src.exists() for src in sources):
        # (written beside it and renamed into place whole: another process, a test worker of
        # the other simulator, may build the same design at the same time, and must never read
        # a half-written file; a folder left incomplete by an interrupted writer is replaced)
        tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        assert [p.name for p in write_design_sources(structure, l2_words, tmp)] == [p.name for p in sources]
        if folder.exists() and not all(src.exists() for src in sources):
            shutil.rmtree(folder, ignore_errors=True)
        try:
            os.rename(tmp, folder)
        except OSError:                         # (the other process's came first: the same files)
            shutil.rmtree(tmp, ignore_errors=True)
    return sources


def _bench_digest() -> str:
    """What a simulation's result depends on besides the design and the job: the bench and the
    host program it runs."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in (here / "tb_accel.py", here.parent / "hwgen" / "host.py", here.parent / "hwgen" / "layout.py",
                 here.parent / "hwgen" / "regmap.py"):
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def run_jobs(structure: HwStructure, l2_words: dict[str, int], jobs: list[tuple[str, Job, int]],
             sim: Simulator, reuse: bool = False, abort_after: dict[str, int] | None = None) -> list[dict]:
    """Run ``(name, job, timeout_cycles)`` on ``sim``; returns per job ``finished``,
    ``measured_cycles`` and ``outputs``.  With ``reuse``, a job already run on the same design
    (same generator, same Verilog), bench and simulator is not run again: its result is read from
    the build folder (``make validate-rtl`` goes on where an interrupted run stopped; the tests
    always simulate).  With ``abort_after`` (job name -> cycles), each job it names is first
    started and the design reset that many cycles later, then the job is run whole (what is
    returned)."""
    if abort_after is not None:
        return _simulate(structure, l2_words, jobs, sim, abort_after)
    if reuse:
        did = design_id(structure, l2_words)
        cache = simenv.build_dir(did, sim, generator_digest()) / "results"
        keys = [hashlib.sha256(json.dumps([_bench_digest(), name, job.as_dict(), timeout], sort_keys=True)
                               .encode()).hexdigest()[:16] for name, job, timeout in jobs]
        done = {key: json.loads((cache / f"{key}.json").read_text()) for key in keys
                if (cache / f"{key}.json").exists()}
        todo = [(key, job) for key, job in zip(keys, jobs) if key not in done]
        if todo:
            cache.mkdir(parents=True, exist_ok=True)
            for (key, _), result in zip(todo, _simulate(structure, l2_words, [job for _, job in todo], sim)):
                done[key] = result
                if result["finished"]:          # (a job that timed out is run again next time)
                    write_atomically(cache / f"{key}.json", json.dumps(result))
        return [done[key] for key in keys]
    return _simulate(structure, l2_words, jobs, sim)


def _simulate(structure: HwStructure, l2_words: dict[str, int], jobs: list[tuple[str, Job, int]],
              sim: Simulator, abort_after: dict[str, int] | None = None) -> list[dict]:
    simenv.apply_env()
    missing = simenv.missing_tools(sim)
    if missing:
        raise AccelgenError(f"{sim} is not installed here (missing {', '.join(missing)}); run `make tools`",
                            where="--sim")

    did = design_id(structure, l2_words)
    clock = time.perf_counter()
    sources = design_sources(structure, l2_words)
    PHASE_SECONDS["generate"] = time.perf_counter() - clock
    build = simenv.build_dir(did, sim, generator_digest())
    # The bench drives the top level's ports only; the PE is built once and shared by every
    # position of the array (simenv.get_runner).
    runner = simenv.get_runner(sim, ports_only=True, hier_blocks=(PE_MODULE,))
    clock = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):     # the runner's chatter must not mix with a report
        runner.build(sources=sources, hdl_toplevel=IP_TOP, build_dir=build, build_args=simenv.build_args(sim),
                     timescale=("1ns", "1ps"), always=False, log_file=build / "build.log")
    PHASE_SECONDS["build"] = time.perf_counter() - clock
    payload = []
    for i, (name, job, timeout) in enumerate(jobs):
        payload.append({"name": name, "job": job.as_dict(), "timeout_cycles": timeout, "streams": i % 2 == 0,
                        "abort_after": (abort_after or {}).get(name)})
    token = hashlib.sha256(json.dumps([p["name"] for p in payload]).encode()).hexdigest()[:10]
    run_dir = build / f"run_{os.getpid()}_{token}"
    run_dir.mkdir(parents=True, exist_ok=True)
    jobs_file, results_file = run_dir / "jobs.json", run_dir / "results.json"
    jobs_file.write_text(json.dumps(payload))
    env = dict(simenv.TB_ENV, ACCELGEN_JOBS=str(jobs_file), ACCELGEN_RESULTS=str(results_file))
    clock = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):
        runner.test(test_module="sim_tests.tb_accel", hdl_toplevel=IP_TOP, build_dir=build, test_dir=run_dir,
                    extra_env=env, log_file=run_dir / "sim.log")
    PHASE_SECONDS["run"] = time.perf_counter() - clock
    if not results_file.exists():
        raise AccelgenError(f"the simulation wrote no results; see {run_dir / 'sim.log'}", where=sim)
    results = json.loads(results_file.read_text())
    if all(r['finished'] for r in results):
        shutil.rmtree(run_dir, ignore_errors=True)
    return results


def verify_layer(dataflow: DataflowSpec, hw: Hardware, layer: Layer, sim: Simulator, seed: int,
                 label: str | None = None, reuse: bool = False) -> dict:
    """Generate (or reuse) the design made for ``layer``, run it on random int8 data, compare with
    numpy and the ``hwgen`` preset."""
    df = resolve_dataflow(dataflow, layer, hw)
    structure = hwgen_structure(df, layer, hw, fit=[layer])
    report = run_layer(structure, l2_split(hw), df, layer, sim, seed, reuse=reuse)
    return {"layer": layer.describe(), "dataflow": label or df.name, "hardware": hw.name, "sim": sim, "seed": seed,
            **{k: v for k, v in report.items() if k != "layer"}}


def run_layer(structure: HwStructure, l2: dict[str, int], df: Dataflow, layer: Layer, sim: Simulator, seed: int,
              reuse: bool = False) -> dict:
    """Run ``layer`` (tiled by ``df``) on the design of ``structure`` and ``l2`` with random int8
    operands (``seed``): its predicted and measured cycles, and whether every output is numpy's."""
    tiles = tiles_of(structure, df, layer)
    a, b = random_operands(layer, seed)
    job = make_job(structure, tiles, layer, a, b, l2)
    predicted = hwgen_cycles(structure, tiles)
    result = run_jobs(structure, l2, [(layer.name, job, timeout_cycles(predicted))], sim, reuse=reuse)[0]
    measured = result["measured_cycles"]
    return {"layer": layer.describe(), "predicted_cycles": predicted, "measured_cycles": measured,
            "cycle_difference": measured - predicted if result["finished"] else None,
            "bit_exact": result["finished"] and result["outputs"] == job.expected,
            "rtl_utilization": layer.macs / (structure.num_pes * structure.simd_lanes * measured)
            if measured > 0 else 0.0}

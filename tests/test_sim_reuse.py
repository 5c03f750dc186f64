"""``make validate-rtl`` keeps each finished simulation and goes on where an interrupted run
stopped (``sim_tests.runner.run_jobs(reuse=True)``): a job is simulated once per design, bench
and simulator; one that did not finish, a changed job or another simulator is simulated again.
No simulator runs here: the simulation is replaced by a recorder."""

from pathlib import Path

import pytest

from costmodel.dataflow.spec import resolve_dataflow
from costmodel.hwgen_preset.preset import hwgen_structure, l2_split
from costmodel.hwgen_preset.structure import tiles_of
from hwgen.layout import make_job, random_operands
from sim_tests import matrix, runner, simenv


@pytest.fixture
def jobs_and_calls(tmp_path, monkeypatch):
    monkeypatch.setattr(simenv, "SIM_BUILD", tmp_path)
    calls = []

    def fake(structure, l2, jobs, sim):
        calls.append((sim, [name for name, _, _ in jobs]))
        # job "L1" does not finish on its first run
        return [{"name": name, "finished": not (name == "L1" and len(calls) == 1), "measured_cycles": 100 + i,
                 "outputs": [i]} for i, (name, _, _) in enumerate(jobs)]

    monkeypatch.setattr(runner, "_simulate", fake)
    hw = matrix.array(matrix.ARRAYS[0])
    layers = matrix.layers("kcp")[:3]
    spec = matrix.dataflow_spec("kcp")
    structure = hwgen_structure(resolve_dataflow(spec, layers[0], hw), layers[0], hw, fit=layers)
    l2 = l2_split(hw)
    jobs = []
    for i, layer in enumerate(layers):
        tiles = tiles_of(structure, resolve_dataflow(spec, layer, hw), layer)
        jobs.append((layer.name, make_job(structure, tiles, layer, *random_operands(layer, seed=i), l2), 1000))
    return structure, l2, jobs, calls


def test_finished_jobs_are_not_simulated_again(jobs_and_calls):
    structure, l2, jobs, calls = jobs_and_calls
    first = runner.run_jobs(structure, l2, jobs, "icarus", reuse=True)
    assert [r["finished"] for r in first] == [True, False, True]
    again = runner.run_jobs(structure, l2, jobs, "icarus", reuse=True)
    assert calls == [("icarus", ["L0", "L1", "L2"]), ("icarus", ["L1"])]      # only the unfinished one
    assert [r["finished"] for r in again] == [True, True, True]
    assert again[0] == first[0] and again[2] == first[2]
    runner.run_jobs(structure, l2, jobs, "icarus", reuse=True)
    assert len(calls) == 2                                                       # all kept now


def test_another_simulator_or_a_changed_job_runs_again(jobs_and_calls):
    structure, l2, jobs, calls = jobs_and_calls
    runner.run_jobs(structure, l2, jobs[:1], "icarus", reuse=True)
    runner.run_jobs(structure, l2, jobs[:1], "verilator", reuse=True)
    name, job, timeout = jobs[0]
    runner.run_jobs(structure, l2, [(name, job, timeout + 1)], "icarus", reuse=True)
    assert calls == [("icarus", ["L0"]), ("verilator", ["L0"]), ("icarus", ["L0"])]


def test_without_reuse_every_job_is_simulated(jobs_and_calls):
    structure, l2, jobs, calls = jobs_and_calls
    runner.run_jobs(structure, l2, jobs[:1], "icarus")
    runner.run_jobs(structure, l2, jobs[:1], "icarus")
    assert calls == [("icarus", ["L0"]), ("icarus", ["L0"])]


def _build(name, generator, age, now, size=1000):
    """A build folder last used ``age`` seconds before ``now``, of ``size`` bytes, with its
    sources in ``designs/``."""
    import json
    import os
    folder = simenv.SIM_BUILD / name
    (folder / "verilator").mkdir(parents=True)
    (folder / "verilator" / "obj").write_bytes(b"x" * size)
    (simenv.SIM_BUILD / "designs" / name).mkdir(parents=True)
    stamp = folder / simenv.STAMP
    if generator is not False:
        stamp.write_text(json.dumps({"generator": generator}))
        os.utime(stamp, (now - age, now - age))
    os.utime(folder, (now - age, now - age))


def test_builds_of_older_generators_and_the_least_recently_used_are_evicted(tmp_path, monkeypatch):
    monkeypatch.setattr(simenv, "SIM_BUILD", tmp_path)
    now = 1e9
    hour = simenv.IDLE_SECONDS
    _build("old_idle", "g0", 2 * hour, now)
    _build("old_busy", "g0", hour / 2, now)          # another run may be using it
    _build("legacy", False, 2 * hour, now)           # from before the stamps
    _build("tool", None, 2.5 * hour, now)            # not a design: evicted only for room
    _build("cur_a", "g1", 3 * hour, now)
    _build("cur_b", "g1", 2 * hour, now)
    _build("cur_c", "g1", hour / 2, now)
    removed = simenv.evict_builds("g1", budget_bytes=1e9, now=now)
    assert sorted(removed) == ["legacy", "old_idle"]
    assert not (tmp_path / "old_idle").exists() and not (tmp_path / "designs" / "old_idle").exists()
    assert (tmp_path / "old_busy").exists() and (tmp_path / "designs" / "old_busy").exists()
    # over budget (five builds of about 1 kB are left): the least recently used of the idle ones
    # go first, never a busy one
    removed = simenv.evict_builds("g1", budget_bytes=3100, now=now)
    assert removed == ["cur_a", "tool"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cur_b", "cur_c", "designs", "old_busy"]
    assert simenv.evict_builds("g1", budget_bytes=0, now=now) == ["cur_b"]


def test_a_build_folder_says_which_generator_made_it_and_when_it_was_used(tmp_path, monkeypatch):
    import json
    monkeypatch.setattr(simenv, "SIM_BUILD", tmp_path)
    monkeypatch.setattr(simenv, "_EVICTED", False)
    calls = []
    monkeypatch.setattr(simenv, "evict_builds", lambda generator: calls.append(generator))
    assert simenv.build_dir("toolchain_mac", "icarus") == tmp_path / "toolchain_mac" / "icarus"
    assert calls == []                                # (not a design: no generator to compare with)
    path = simenv.build_dir("accel_x", "verilator", "g1")
    simenv.build_dir("accel_y", "verilator", "g1")
    assert calls == ["g1"]                            # once per process
    assert path.is_dir() and json.loads((tmp_path / "accel_x" / simenv.STAMP).read_text()) == {"generator": "g1"}


def test_design_sources_appear_whole(jobs_and_calls, monkeypatch):
    """Two test workers (one per simulator) may generate the same design at once: its sources are
    written beside their folder and renamed into place whole, a folder left half-written is
    replaced, and a writer that finds the folder already placed keeps that one."""
    structure, l2, _, _ = jobs_and_calls
    folder = simenv.SIM_BUILD / "designs" / runner.design_id(structure, l2)
    folder.mkdir(parents=True)
    (folder / "partial.v").write_text("module half")                  # an interrupted writer's
    sources = runner.design_sources(structure, l2)
    assert all(p.exists() and p.stat().st_size > 0 for p in sources) and not (folder / "partial.v").exists()
    first = {p.name: p.read_text() for p in sources}
    # another writer placed it between the check and the rename: ours is dropped, theirs kept
    import os
    import shutil
    shutil.rmtree(folder)
    real_rename = os.rename

    def other_first(src, dst):
        shutil.copytree(src, dst)               # (the other worker's rename, just before ours)
        (Path(dst) / "theirs").write_text("")
        real_rename(src, dst)
    monkeypatch.setattr(runner.os, "rename", other_first)
    assert runner.design_sources(structure, l2) == sources
    monkeypatch.undo()
    assert {p.name: p.read_text() for p in sources} == first and (folder / "theirs").exists()
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]      # no temporary folder left

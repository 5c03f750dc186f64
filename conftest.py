"""pytest hooks for the whole suite.

``make test`` runs pytest with two workers (pytest-xdist, ``--dist loadgroup``).  Every test that
runs a simulator is put in its simulator's group, so one worker runs all the Icarus tests and
the other all the Verilator ones: no two workers build the same design in the same folder of
``sim_build/`` at once (a build folder is per design and simulator), and the two simulators'
long runs overlap.  Pure-Python tests go to whichever worker is free."""

from __future__ import annotations

import pytest


def _simulator(item: pytest.Item) -> str:
    params = getattr(getattr(item, "callspec", None), "params", {})
    if params.get("sim") in ("icarus", "verilator"):
        return params["sim"]
    # (ids name the simulator; the lint runs Verilator; the rest build nothing, or with Icarus)
    if "verilator" in item.nodeid or "lint" in item.nodeid:
        return "verilator"
    return "icarus"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith("sim_tests/"):
            item.add_marker(pytest.mark.xdist_group(_simulator(item)))

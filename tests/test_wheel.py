"""The package as a user installs it: build the wheel from the tracked files, install it into a
fresh virtual environment outside the checkout, and run ``accelgen`` there.  The built-in
hardware, dataflows, workloads and MAESTRO reference must come from the wheel itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
                          check=False, timeout=600)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; its dependencies are the test environment's,
    seen through a path entry (no ``.pth`` of that environment runs, so the editable
    checkout stays invisible)."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    tracked = _run("git", "ls-files", "-z", cwd=ROOT).stdout.split("\0")
    for name in filter(None, tracked):
        src, dst = ROOT / name, source / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        elif src.is_file():
            shutil.copy2(src, dst)
    dist = base / "dist"
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                 "-w", dist, source, cwd=base)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = dist.glob("accelgen-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("costmodel/configs/hw/small.yaml", "costmodel/configs/dataflows/kcp_x2.yaml",
                   "costmodel/configs/workloads/tiny_cnn.yaml", "costmodel/maestro/data/maestro_reference.csv",
                   "sim_tests/cases.yaml", "accelgen/cli.py", "hwgen/accelerator.py"):
        assert needed in names, f"{needed} is not in {wheel.name}"
    env_dir = base / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                        cwd=base).stdout.strip())
    (purelib / "accelgen_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    got = _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q", wheel, cwd=base)
    assert got.returncode == 0, got.stderr[-3000:]
    return env_dir


def test_installed_accelgen_analyzes_resnet50(installed: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = _run(installed / "bin" / "python", "-c", "import costmodel, accelgen; print(costmodel.__file__); "
                 "print(accelgen.__file__)", cwd=tmp_path, env=env)
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(installed)) for line in where.stdout.split()), where.stdout
    run = _run(installed / "bin" / "accelgen", "analyze", "--model", "resnet50", "--dataflow", "kcp", "--hw",
               "small", "--format", "json", cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert len(doc["layers"]) == 54 and doc["total"]["macs"] == sum(r["macs"] for r in doc["layers"])
    assert doc["total"]["runtime_cycles"] > 0
    listed = _run(installed / "bin" / "accelgen", "list", cwd=tmp_path, env=env)
    assert listed.returncode == 0 and "maestro_ref" in listed.stdout, listed.stderr

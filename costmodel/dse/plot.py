"""The Pareto plot: the front on the first two objectives (the third as colour), PNG and SVG."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from ..fpga import FPGA_METRICS
from .plan import METRICS

__all__ = ["plot_front"]

_LABELS = {"runtime_cycles": "runtime", "energy_pj": "energy", "edp_pj_cycles": "energy-delay product",
           "area_mm2": "area", "power_mw": "power"}


def _label(metric: str) -> str:
    if metric in FPGA_METRICS:                  # a count: its unit is its name
        return FPGA_METRICS[metric]
    return f"{_LABELS.get(metric, metric)} ({METRICS[metric]})"


def plot_front(objectives: tuple[str, ...], values: list[np.ndarray], title: str, out_dir: Path) -> list[Path]:
    """Write ``pareto.png`` and ``pareto.svg`` (each to a temporary file, renamed into place)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "accelgen"          # deterministic SVG ids
    fig, ax = plt.subplots(figsize=(7, 5), dpi=110)
    x = values[0].astype(np.float64)
    y = values[1].astype(np.float64) if len(values) > 1 else np.zeros_like(x)
    if len(values) > 2:
        points = ax.scatter(x, y, c=values[2].astype(np.float64), cmap="viridis", s=28, zorder=3)
        fig.colorbar(points, ax=ax, label=_label(objectives[2]))
    else:
        order = np.argsort(x, kind="stable")
        ax.step(x[order], y[order], where="post", color="0.6", lw=1, zorder=2)
        ax.scatter(x, y, s=28, color="tab:blue", zorder=3)
    ax.set_xlabel(_label(objectives[0]))
    ax.set_ylabel(_label(objectives[1]) if len(objectives) > 1 else "")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    written = []
    for suffix in ("png", "svg"):
        target = out_dir / f"pareto.{suffix}"
        fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=f".pareto.{suffix}.", suffix=".tmp")
        os.close(fd)
        try:
            fig.savefig(tmp, format=suffix, metadata={"Date": None} if suffix == "svg" else None)
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        written.append(target)
    plt.close(fig)
    return written

"""What ``accelgen flow`` builds and runs (:mod:`.flow`): the front point it picks, the layer
shapes it runs in the simulator, and how a layer is scaled down to fit the design and the
simulation's cycle budget."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

from costmodel.base import AccelgenError
from costmodel.workload import GEMM, Conv2D, Layer

__all__ = ["PICKS", "knee_index", "pick_point", "layer_kind", "sample_layers", "one_run", "halved",
           "verification_layer"]

PICKS = ("knee", "runtime", "energy", "edp", "area", "power")
_PICK_METRIC = {"runtime": "runtime_cycles", "energy": "energy_pj", "edp": "edp_pj_cycles", "area": "area_mm2",
                "power": "power_mw"}


# --- choosing the point ---------------------------------------------------------------------------

def knee_index(values: Sequence[Sequence[float]]) -> int:
    """The index of the front point nearest the ideal one (every objective at its best on the
    front), each objective scaled to [0, 1] over the front on a log scale (objectives span
    orders of magnitude); ties go to the earlier point."""
    n = len(values[0])
    scaled = []
    for column in values:
        logs = [math.log(max(v, 1e-300)) for v in column]
        lo, hi = min(logs), max(logs)
        scaled.append([(v - lo) / (hi - lo) if hi > lo else 0.0 for v in logs])
    distance = [math.fsum(col[i] ** 2 for col in scaled) for i in range(n)]
    return min(range(n), key=lambda i: (distance[i], i))


def pick_point(rows: Sequence[dict[str, Any]], objectives: Sequence[str], how: str) -> dict[str, Any]:
    """The row of ``pareto.csv`` the flow builds: ``knee`` over ``objectives`` or the least of one
    metric (ties to the lower rank)."""
    if not rows:
        raise AccelgenError("the front is empty: no point of the space is feasible for the model", where="pick")
    if how == "knee":
        if len(objectives) == 1:
            how = next(k for k, v in _PICK_METRIC.items() if v == objectives[0])
        else:
            return rows[knee_index([[float(r[o]) for r in rows] for o in objectives])]
    metric = _PICK_METRIC[how]
    return min(rows, key=lambda r: (float(r[metric]), int(r["rank"])))


# --- the layers to verify -------------------------------------------------------------------------

def layer_kind(layer: Layer) -> str:
    return "gemm" if isinstance(layer, GEMM) else "conv2d"


def _class(layer: Layer) -> tuple:
    """What sets a layer's hardware path apart: kind, filter, strides, groups."""
    if isinstance(layer, Conv2D):
        return ("conv2d", layer.R, layer.S, layer.stride_y, layer.stride_x, layer.groups > 1)
    return (layer_kind(layer),)


def sample_layers(layers: Sequence[Layer], how: str, count: int) -> list[list[Layer]]:
    """The distinct layer shapes to run (each with the layers of that shape, in model order):
    ``all`` of them, or for ``sample`` up to ``count``, one of each class first (filter, strides,
    groups) in model order, then the others in model order."""
    if how == "none":
        return []
    shapes: dict[str, list[Layer]] = {}
    for layer in layers:
        shapes.setdefault(layer.describe(), []).append(layer)
    groups = list(shapes.values())
    if how == "all" or len(groups) <= count:
        return groups
    seen: set[tuple] = set()
    first = []
    for g in groups:
        if _class(g[0]) not in seen:
            seen.add(_class(g[0]))
            first.append(g)
    rest = [g for g in groups if g not in first]
    chosen = (first + rest)[:count]
    return [g for g in groups if g in chosen]


def one_run(layer: Layer) -> tuple[Layer, int]:
    """One run of ``layer`` (one group of one batch item: the design runs them one after another)
    and how many runs the layer is."""
    if isinstance(layer, GEMM):
        return dataclasses.replace(layer, batch=1), layer.batch
    if isinstance(layer, Conv2D) and (layer.groups > 1 or layer.N > 1):
        g = layer.groups
        return dataclasses.replace(layer, K=layer.K // g, C=layer.C // g, groups=1, N=1), g * layer.N
    return layer, 1


def halved(layer: Layer) -> Layer | None:
    """``layer`` with its largest halvable dimension halved (rounded up): channels or a GEMM
    dimension, or rows and columns while the padded input still holds a filter window."""
    if isinstance(layer, GEMM):
        dims = {d: getattr(layer, d) for d in ("M", "N", "K")}
    else:
        dims = {d: getattr(layer, d) for d in ("K", "C")}
        for d, window, pads in (("Y", layer.window_y, layer.pad_top + layer.pad_bottom),
                                ("X", layer.window_x, layer.pad_left + layer.pad_right)):
            if -(-getattr(layer, d) // 2) + pads >= window:
                dims[d] = getattr(layer, d)
    dims = {d: v for d, v in dims.items() if v > 1}
    if not dims:
        return None
    d = max(dims, key=lambda k: dims[k])
    return dataclasses.replace(layer, **{d: -(-dims[d] // 2)})


def verification_layer(layer: Layer, fits: Callable[[Layer], bool]) -> tuple[Layer, int]:
    """The layer the simulator runs for ``layer``: one run of it (:func:`one_run`), halved
    (:func:`halved`) until ``fits``; and the layer's number of runs."""
    one, runs = one_run(layer)
    v: Layer | None = one
    while v is not None and not fits(v):
        v = halved(v)
    if v is None:
        raise AccelgenError(f"{layer.describe()} does not fit the design even scaled down",
                            where=f"layer {layer.name!r}")
    return dataclasses.replace(v, name=layer.name), runs

"""The schedule of the generated accelerator, step by step: the reference.

The loop nest is walked as an odometer over the structure's loops; in each step every PE holds
a tile of each tensor, and each engine (load, compute, drain) has a cost.  Slot ``k`` loads step
``k``, computes step ``k-1`` and drains step ``k-2``, and lasts the controller's cycle plus the
longest of the three (``docs/timing.md``).  :mod:`.closed` evaluates the same schedule at a cost
that does not grow with the steps and is tested equal to this walk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Mapping

from .rules import (
    LOOP_DIMS,
    OUTPUT_DIMS,
    TENSOR_LOOP_DIMS,
    TIMING,
    TimingConstants,
    bounding_engine,
    check_timing,
    drain_latency,
    drain_runs,
    ingress,
    input_span,
    load_latency,
    slides,
    slot_cycles,
    tensor_load,
)
from .structure import HwStructure, LayerTiles

__all__ = ["Step", "steps", "step_costs", "step_traffic", "traffic_totals", "schedule_summary", "reference_summary"]


@dataclass(frozen=True)
class Step:
    """Where the loop nest stands: per loop dim, the level-0 base and the level-1 offset
    relative to it (unit 0 of every level starts at ``b0 + r1``)."""

    b0: tuple[int, int, int, int]
    r1: tuple[int, int, int, int]


def _loop_params(s: HwStructure, t: LayerTiles):
    out = []
    for lv, d in s.loops:
        tile = t.t0[d] if lv == 0 else t.t1[d]
        n = (s.n0 if lv == 0 else s.n1) if s.spatial[lv] == d else 1
        out.append((lv, LOOP_DIMS.index(d), tile * n))
    return out


def steps(s: HwStructure, t: LayerTiles) -> Iterator[Step]:
    """The steps in order: an odometer over the loops, inner levels inside the cluster-0 tile."""
    params = _loop_params(s, t)
    dims = [t.dims[d] for d in LOOP_DIMS]
    t0 = [t.t0[d] for d in LOOP_DIMS]
    b0 = [0, 0, 0, 0]
    r1 = [0, 0, 0, 0]
    n = len(params)
    while True:
        yield Step(tuple(b0), tuple(r1))      # type: ignore[arg-type]
        i = n - 1
        while i >= 0:
            lv, di, stride = params[i]
            if lv == 0:
                if b0[di] + stride < dims[di]:
                    b0[di] += stride
                    break
                b0[di] = 0
            else:
                if r1[di] + stride < min(t0[di], dims[di] - b0[di]):
                    r1[di] += stride
                    break
                r1[di] = 0
            i -= 1
        if i < 0:
            return


def _extent(s: HwStructure, t: LayerTiles, step: Step, di: int, unit: tuple[int, int]) -> tuple[int, int]:
    """(start, extent) of loop dim ``di`` for the PE at (cluster, unit)."""
    d = LOOP_DIMS[di]
    D, t0, t1 = t.dims[d], t.t0[d], t.t1[d]
    base = step.b0[di] + (unit[0] * t0 if s.spatial[0] == d else 0)
    start = base + step.r1[di] + (unit[1] * t1 if s.spatial[1] == d else 0)
    end = min(start + t1, base + t0, D)
    return start, max(0, end - start)


def _union(s: HwStructure, t: LayerTiles, step: Step, di: int) -> tuple[int, int]:
    """(start, extent) of the union over all PEs of loop dim ``di``."""
    d = LOOP_DIMS[di]
    D, t0, t1 = t.dims[d], t.t0[d], t.t1[d]
    start = step.b0[di] + step.r1[di]
    if s.spatial[0] == d:
        end = min(step.b0[di] + s.n0 * t0, D)
    elif s.spatial[1] == d:
        end = min(start + s.n1 * t1, step.b0[di] + t0, D)
    else:
        end = min(start + t1, step.b0[di] + t0, D)
    return start, end - start


def _loads(s: HwStructure, t: LayerTiles, step: Step, slide: Mapping[str, bool] | None = None
           ) -> dict[str, tuple[int, int]]:
    """``(issue cycles, words)`` of a load of each input tensor in ``step``
    (:func:`.rules.tensor_load`; ``slide``: along which axes the input's window slid, :func:`_slides`)."""
    ext = {d: _extent(s, t, step, di, (0, 0))[1] for di, d in enumerate(LOOP_DIMS)}
    union = {d: _union(s, t, step, di)[1] for di, d in enumerate(LOOP_DIMS)}
    slide = slide or {}
    return {name: tuple(int(v) for v in tensor_load(s, t, ingress(s, name), ext, union,
                                                     *(name == "input" and slide.get(d, False) for d in "XY")))
            for name in ("input", "weight")}


def _slides(s: HwStructure, t: LayerTiles, prev: Step | None, step: Step) -> dict[str, bool]:
    """Along which axes ``step``'s input window slid after ``prev``'s (:func:`.rules.slides`); the
    walk checks what the rule assumes of the odometer: the window's tile starts where the last
    one's ends."""
    out = {"X": False, "Y": False}
    if prev is None:
        return out
    for d, other in (("X", "CY"), ("Y", "CX")):
        di = LOOP_DIMS.index(d)
        same = all((prev.b0[i], prev.r1[i]) == (step.b0[i], step.r1[i]) for i in map(LOOP_DIMS.index, other))
        start_prev, e_prev = _extent(s, t, prev, di, (0, 0))
        start = _extent(s, t, step, di, (0, 0))[0]
        out[d] = bool(slides(s, t, d, same, start_prev, start))
        assert not out[d] or start == start_prev + e_prev, "tiles side by side"
    return out


def _keys(step: Step) -> dict[str, tuple]:
    def pick(dims):
        return tuple((step.b0[LOOP_DIMS.index(d)], step.r1[LOOP_DIMS.index(d)]) for d in dims)
    return {name: pick(dims) for name, dims in TENSOR_LOOP_DIMS.items()}


def _groups(s: HwStructure, t: LayerTiles, step: Step) -> list[tuple[int, int]]:
    """The PEs that represent each output group with a non-empty tile (unit 0 of a reduction level)."""
    red = s.reduction_spatial
    out = []
    for u0 in range(1 if red[0] or s.spatial[0] is None else s.n0):
        for u1 in range(1 if red[1] or s.spatial[1] is None else s.n1):
            if all(_extent(s, t, step, di, (u0, u1))[1] > 0 for di in range(4)):
                out.append((u0, u1))
    return out


def step_costs(s: HwStructure, t: LayerTiles, step: Step, loaded: tuple[str, ...],
               timing: TimingConstants = TIMING, slide: Mapping[str, bool] | None = None) -> dict[str, int]:
    """Busy cycles of each engine for one step: ``load`` (bringing in its tiles of the tensors in
    ``loaded``; the input's new columns or rows only where it ``slide``-s), ``compute`` and ``drain`` (its
    finished outputs, if it ends an output tile)."""
    w = s.noc_words_per_cycle
    loads = _loads(s, t, step, slide)
    issue = sum(loads[name][0] for name in loaded)
    load = issue + load_latency(s, timing) if loaded else 0
    ext = [_extent(s, t, step, di, (0, 0))[1] for di in range(4)]
    window = -(-(t.dims["R"] * t.dims["S"]) // s.simd_lanes)     # lanes share one filter window
    compute = math.prod(ext) * window + timing.compute_latency_cycles
    if s.drain_across_groups is not None:       # runs of up to W one-column groups side by side
        k, y = ext[0], ext[2]
        runs = drain_runs(k * y, _union(s, t, step, 3)[1], w)
    else:                                       # each group's tile in runs of up to L words along X
        runs, lanes = 0, s.drain_lanes
        for g in _groups(s, t, step):
            k, y, x = (_extent(s, t, step, LOOP_DIMS.index(d), g)[1] for d in OUTPUT_DIMS)
            runs += drain_runs(k * y, x, lanes)
    drain = runs + timing.drain_wait_cycles
    return {"load": load, "compute": compute, "drain": drain}


def schedule_summary(s: HwStructure, t: LayerTiles, timing: TimingConstants = TIMING) -> dict:
    """Walk the steps and return the exact cycle count of one run and per-engine totals."""
    check_timing(timing)
    seq = list(steps(s, t))
    n = len(seq)
    keys = [_keys(st) for st in seq]
    loads, computes, drains = [], [], []
    for i, st in enumerate(seq):
        loaded = tuple(name for name in ("input", "weight")
                       if i == 0 or keys[i][name] != keys[i - 1][name])
        ends = i == n - 1 or keys[i + 1]["output"] != keys[i]["output"]
        slide = _slides(s, t, seq[i - 1] if i else None, st) if "input" in loaded else None
        c = step_costs(s, t, st, loaded, timing, slide)
        loads.append(c["load"])
        computes.append(c["compute"])
        drains.append(c["drain"] if ends else 0)
    total = 0
    bound = {"load": 0, "compute": 0, "drain": 0}
    for k in range(n + 2):
        parts = {"load": loads[k] if k < n else 0,
                 "compute": computes[k - 1] if 1 <= k <= n else 0,
                 "drain": drains[k - 2] if 2 <= k <= n + 1 else 0}
        if k == n + 1 and parts["drain"] == 0:
            continue
        cycles = int(slot_cycles(max(parts.values()), timing))
        total += cycles
        if 1 <= k <= n:
            bound[bounding_engine(parts)] += cycles
    total += timing.start_cycles + drain_latency(s, timing)   # the last drain's writes land
    return {"cycles": total, "steps": n, "load_cycles": sum(loads), "compute_cycles": sum(computes),
            "drain_cycles": sum(drains), "bound_cycles": bound}


def reference_summary(s: HwStructure, t: LayerTiles, timing: TimingConstants = TIMING) -> dict:
    """The step-by-step walk (slow; the reference :func:`.closed.closed_summary` is tested against)."""
    summary = schedule_summary(s, t, timing)
    summary.update(_traffic(s, t))
    return summary


def step_traffic(s: HwStructure, t: LayerTiles, step: Step, loaded: tuple[str, ...],
                 slide: Mapping[str, bool] | None = None, ends: bool = False) -> dict[str, int]:
    """Words one step moves: L2 reads of the tensors in ``loaded`` (``l2_input``, ``l2_weight``:
    NoC words) and the L1 writes they make in every PE (``l1_input``, ``l1_weight``; the
    input's new columns or rows only where it ``slide``-s), the MACs of every PE (``macs``) and,
    if it ``ends`` an output tile, the words drained (``drained``)."""
    slide = slide or {}
    R, S, sy, sx = t.dims["R"], t.dims["S"], t.stride_y, t.stride_x
    pes = [(u0, u1) for u0 in range(s.n0) for u1 in range(s.n1)]
    loads = _loads(s, t, step, slide)
    out = dict.fromkeys(("l2_input", "l2_weight", "l1_input", "l1_weight", "macs", "drained"), 0)
    for name in loaded:
        out[f"l2_{name}"] = loads[name][1]
        for pe in pes:
            k, c, y, x = (_extent(s, t, step, di, pe)[1] for di in range(4))
            if name == "input":
                cols = x * sx if slide.get("X") else input_span(x, sx, S)
                rows = y * sy if slide.get("Y") else input_span(y, sy, R)
                out["l1_input"] += c * rows * cols if y and x and c else 0
            else:
                out["l1_weight"] += k * c * R * S
    for pe in pes:
        out["macs"] += math.prod(_extent(s, t, step, di, pe)[1] for di in range(4)) * R * S
    if ends:
        out["drained"] = sum(math.prod(_extent(s, t, step, di, g)[1] for di in (0, 2, 3)) for g in _groups(s, t, step))
    return out


def traffic_totals(l2_input: int, l2_weight: int, l1_input: int, l1_weight: int, macs: int, drained: int) -> dict:
    """The preset's traffic figures from the sums of :func:`step_traffic` over the steps: L2
    reads (one per NoC word), L1 writes (captures), L1 reads (two operands and a partial sum per
    MAC), L2 output read-modify-writes (one per drained word)."""
    return {"l2_reads": {"input": l2_input, "weight": l2_weight, "output": drained},
            "l2_writes": {"input": 0, "weight": 0, "output": drained},
            "l1_reads": {"input": macs, "weight": macs, "output": macs + drained},
            "l1_writes": {"input": l1_input, "weight": l1_weight, "output": macs},
            "step_macs": macs, "drained_words": drained}


def _traffic(s: HwStructure, t: LayerTiles) -> dict:
    """Words moved per tensor, step by step (:func:`step_traffic`, :func:`traffic_totals`)."""
    seq = list(steps(s, t))
    keys = [_keys(x) for x in seq]
    tot: dict[str, int] = {}
    for i, step in enumerate(seq):
        loaded = tuple(name for name in ("input", "weight") if i == 0 or keys[i][name] != keys[i - 1][name])
        slide = _slides(s, t, seq[i - 1], step) if i > 0 and "input" in loaded else {}
        ends = i == len(seq) - 1 or keys[i + 1]["output"] != keys[i]["output"]
        for k, v in step_traffic(s, t, step, loaded, slide, ends).items():
            tot[k] = tot.get(k, 0) + v
    return traffic_totals(**tot)

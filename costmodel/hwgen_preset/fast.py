"""The ``hwgen`` schedule evaluated with numpy over all steps at once.

:func:`.walk.schedule_summary` walks the steps one by one and is the
reference (tests compare the two).  Here every step's positions are built as arrays, level-0
positions first and each one's level-1 sub-walk expanded by its own trip counts, and the engines'
cycles, the slot sum and the traffic are array expressions.  Sums over PEs use the fact that
each level spreads one dimension: a sum over units of a product is the product of per-level
sums, and along a spread dimension the first units hold whole tiles, the last valid one the rest.
"""

from __future__ import annotations

import numpy as np

from .rules import (LOOP_DIMS, TENSOR_LOOP_DIMS, TIMING, TimingConstants, check_timing, drain_latency,
                    drain_runs, ingress, input_span, load_latency, slides, slot_cycles, tensor_load)
from .structure import HwStructure, LayerTiles

__all__ = ["fast_summary", "hwgen_cycles"]

_CHUNK_STEPS = 1 << 21      # steps per batch: bounds memory on large layers


def _level0(s: HwStructure, t: LayerTiles):
    loops = [(LOOP_DIMS.index(d), (t.t0[d] * (s.n0 if s.spatial[0] == d else 1))) for lv, d in s.loops if lv == 0]
    counts = [-(-t.dims[LOOP_DIMS[di]] // step) for di, step in loops]
    return loops, counts


def _positions(s: HwStructure, t: LayerTiles, first: int, last: int, loops0, counts0):
    """Positions of the level-0 combinations ``first .. last-1`` and their level-1 sub-walks."""
    n = last - first
    flat = np.arange(first, last, dtype=np.int64)
    b0 = np.zeros((4, n), dtype=np.int64)
    rad = 1
    for (di, step), cnt in reversed(list(zip(loops0, counts0))):
        b0[di] = (flat // rad) % cnt * step
        rad *= cnt
    loops1 = [(LOOP_DIMS.index(d), t.t1[d] * (s.n1 if s.spatial[1] == d else 1)) for lv, d in s.loops if lv == 1]
    D = np.array([t.dims[d] for d in LOOP_DIMS], dtype=np.int64)[:, None]
    T0 = np.array([t.t0[d] for d in LOOP_DIMS], dtype=np.int64)[:, None]
    bound = np.minimum(T0, D - b0)                       # cluster 0's tile per dim
    m = [-(-bound[di] // step) for di, step in loops1]   # level-1 trip counts per combination
    sub = np.ones(n, dtype=np.int64)
    for c in m:
        sub = sub * c
    idx = np.repeat(np.arange(n), sub)
    offsets = np.concatenate(([0], np.cumsum(sub)[:-1]))
    w = np.arange(idx.size, dtype=np.int64) - offsets[idx]
    B0 = b0[:, idx]
    R1 = np.zeros_like(B0)
    rad = np.ones(idx.size, dtype=np.int64)
    for (di, step), c in reversed(list(zip(loops1, m))):
        cc = c[idx]
        R1[di] = (w // rad) % cc * step
        rad = rad * cc
    return B0, R1


def _sum_over_units(U, tile, units, h):
    """``Σ_u h(extent of unit u)`` for a dimension of union extent ``U`` spread in tiles of
    ``tile`` over ``units`` units (the first ones whole, the last valid one the rest)."""
    valid = np.minimum(units, -(-U // tile))
    last = U - (valid - 1) * tile
    return np.where(valid > 0, (valid - 1) * h(np.full_like(U, tile)) + h(last), 0)


def fast_summary(s: HwStructure, t: LayerTiles, timing: TimingConstants = TIMING) -> dict:
    """What :func:`.walk.schedule_summary` returns, plus the traffic."""
    check_timing(timing)
    loops0, counts0 = _level0(s, t)
    n0 = int(np.prod(counts0)) if counts0 else 1
    D = {d: t.dims[d] for d in LOOP_DIMS}
    R, S, sy, sx, W = t.dims["R"], t.dims["S"], t.stride_y, t.stride_x, s.noc_words_per_cycle
    tot = {"cycles": timing.start_cycles + drain_latency(s, timing),   # (the last drain's writes)
           "steps": 0, "load_cycles": 0, "compute_cycles": 0,
           "drain_cycles": 0, "bound_cycles": {"load": 0, "compute": 0, "drain": 0}}
    l2r = {"input": 0, "weight": 0}
    l1w = {"input": 0, "weight": 0}
    macs = 0
    prev_keys = None          # the last step of the previous batch: its tensor keys
    prev_pos = None           # ... its input's positions (b0 and r1 of C, Y, X)
    # level-0 combinations per batch, so a batch's expansion stays near _CHUNK_STEPS
    inner = int(np.prod([max(1, -(-t.t0[d] // t.t1[d])) for d in LOOP_DIMS]))
    per0 = max(1, _CHUNK_STEPS // inner)
    L_all, C_all, Dr_all, Wd_all, Ch_all = [], [], [], [], []
    units = {d: (s.n0 if s.spatial[0] == d else s.n1) for d in LOOP_DIMS if d in s.spatial}
    ing = {name: ingress(s, name) for name in ("input", "weight")}
    tiles = {d: (t.t0[d] if s.spatial[0] == d else t.t1[d]) for d in units}
    for first in range(0, n0, per0):
        B0, R1 = _positions(s, t, first, min(n0, first + per0), loops0, counts0)
        start = B0 + R1
        ext0 = {}
        union = {}
        for di, d in enumerate(LOOP_DIMS):
            t0, t1 = t.t0[d], t.t1[d]
            ext0[d] = np.minimum(np.minimum(t1, t0 - R1[di]), D[d] - start[di])
            if s.spatial[0] == d:
                union[d] = np.minimum(B0[di] + s.n0 * t0, D[d]) - start[di]
            elif s.spatial[1] == d:
                union[d] = np.minimum(np.minimum(start[di] + s.n1 * t1, B0[di] + t0), D[d]) - start[di]
            else:
                union[d] = ext0[d]
        keys = {name: np.stack([B0[LOOP_DIMS.index(d)] for d in dims] + [R1[LOOP_DIMS.index(d)] for d in dims])
                for name, dims in TENSOR_LOOP_DIMS.items()}
        changed = {}
        for name, k in keys.items():
            diff = np.any(k[:, 1:] != k[:, :-1], axis=0)
            head = np.array([True if prev_keys is None else bool(np.any(prev_keys[name] != k[:, 0]))])
            changed[name] = np.concatenate((head, diff))
        prev_keys = {name: k[:, -1] for name, k in keys.items()}
        # the input's slides (rules.slides): along X (Y), the same channels and rows (columns)
        # as the step before, and a start past its one
        pos = np.concatenate((B0[1:], R1[1:]))          # (C, Y, X of b0, then of r1)
        before = np.concatenate((pos[:, :1] if prev_pos is None else prev_pos[:, None], pos[:, :-1]), axis=1)
        prev_pos = pos[:, -1]
        slide = {}
        for d in "XY":
            di = LOOP_DIMS.index(d)
            others = [i for i in range(6) if i % 3 != di - 1]
            same = np.all(pos[others] == before[others], axis=0)
            slide[d] = changed["input"] & slides(s, t, d, same, before[di - 1] + before[di + 2], start[di])
        in_load, in_box = tensor_load(s, t, ing["input"], ext0, union, slide["X"], slide["Y"])
        w_load, w_box = tensor_load(s, t, ing["weight"], ext0, union)
        load = np.where(changed["input"], in_load, 0) + np.where(changed["weight"], w_load, 0)
        load = np.where(changed["input"] | changed["weight"], load + load_latency(s, timing), 0)
        window = -(-(R * S) // s.simd_lanes)
        compute = ext0["K"] * ext0["C"] * ext0["Y"] * ext0["X"] * window + timing.compute_latency_cycles
        L_all.append(load)
        C_all.append(compute)
        Ch_all.append(changed["output"])
        # traffic
        l2r["input"] += int(np.sum(np.where(changed["input"], in_box, 0)))
        l2r["weight"] += int(np.sum(np.where(changed["weight"], w_box, 0)))

        def pe_sum(d, h):
            """Σ over the units' tiles along d of h(extent)."""
            if d in units:
                return _sum_over_units(union[d], tiles[d], units[d], h)
            return h(ext0[d])

        def ident(e):
            return e

        def span(st, f):
            return lambda e: np.where(e > 0, input_span(e, st, f), 0)

        pes_c = pe_sum("C", ident)
        # (a slide writes its new columns, X_t * stride of them, or rows: no level spreads them)
        x_cols = np.where(slide["X"], ext0["X"] * sx, pe_sum("X", span(sx, S)))
        y_rows = np.where(slide["Y"], ext0["Y"] * sy, pe_sum("Y", span(sy, R)))
        in_words = pes_c * y_rows * x_cols
        w_words = pe_sum("K", ident) * pes_c * R * S
        for d, u in units.items():        # units spread over a dim the tensor ignores share its tile
            if d not in "CYX":
                in_words = in_words * u
            if d not in "KC":
                w_words = w_words * u
        # drain: Σ over groups (a product of per-dimension sums over the output dims' units)
        rows = pe_sum("K", ident) * pe_sum("Y", ident)
        Wd_all.append(rows * pe_sum("X", ident))
        if s.drain_across_groups is not None:        # runs of up to W one-column groups side by side
            Dr_all.append(drain_runs(ext0["K"] * ext0["Y"], union["X"], W) + timing.drain_wait_cycles)
        else:
            lanes = s.drain_lanes
            Dr_all.append(rows * pe_sum("X", lambda e: drain_runs(1, e, lanes)) + timing.drain_wait_cycles)
        l1w["input"] += int(np.sum(np.where(changed["input"], in_words, 0)))
        l1w["weight"] += int(np.sum(np.where(changed["weight"], w_words, 0)))
        macs += int(np.sum(pe_sum("K", ident) * pes_c * pe_sum("Y", ident) * pe_sum("X", ident))) * R * S
    ends = np.concatenate(Ch_all)[1:]
    ends = np.concatenate((ends, [True]))
    Dr = np.where(ends, np.concatenate(Dr_all), 0)          # drains of the steps that end a tile
    drained = int(np.sum(np.where(ends, np.concatenate(Wd_all), 0)))
    L = np.concatenate(L_all)
    C = np.concatenate(C_all)
    n = L.size
    zero2 = np.zeros(2, dtype=np.int64)
    Ls = np.concatenate((L, zero2))                  # slot k: load k
    Cs = np.concatenate(([0], C, [0]))               # compute k-1
    Ds = np.concatenate((zero2, Dr))                 # drain k-2
    longest = np.maximum(np.maximum(Ls, Cs), Ds)
    lengths = slot_cycles(longest, timing)
    tot["cycles"] += int(np.sum(lengths))
    mid = slice(1, n + 1)
    is_c = (Cs[mid] >= Ls[mid]) & (Cs[mid] >= Ds[mid])      # rules.bounding_engine's ties
    is_l = ~is_c & (Ls[mid] >= Ds[mid])
    is_d = ~is_c & ~is_l
    tot["bound_cycles"] = {name: int(np.sum(np.where(is_x, lengths[mid], 0)))
                           for name, is_x in (("load", is_l), ("compute", is_c), ("drain", is_d))}
    tot.update(steps=n, load_cycles=int(L.sum()), compute_cycles=int(C.sum()), drain_cycles=int(Dr.sum()))
    tot.update({
        "l2_reads": {"input": l2r["input"], "weight": l2r["weight"], "output": drained},
        "l2_writes": {"input": 0, "weight": 0, "output": drained},
        "l1_reads": {"input": macs, "weight": macs, "output": macs + drained},
        "l1_writes": {"input": l1w["input"], "weight": l1w["weight"], "output": macs},
        "step_macs": macs, "drained_words": drained,
    })
    return tot


def hwgen_cycles(s: HwStructure, t: LayerTiles, timing: TimingConstants = TIMING) -> int:
    """Cycles from ``start`` to ``done`` for one run of the layer (the vectorised evaluation,
    tested equal to :func:`.walk.reference_summary`)."""
    return fast_summary(s, t, timing)["cycles"]

"""The ``hwgen`` schedule in closed form: cost independent of the number of steps.

The schedule (:mod:`.walk`, ``docs/timing.md``) is an odometer over the structure's loops; slot
``k`` lasts as long as the longest of load ``k``, compute ``k-1`` and drain ``k-2``.  What a step
costs depends only on where its tiles sit against the layer's edges (how much of each dimension
is left past its start, capped at what the loops and units can take) and, at its two ends, on
its neighbours: the tensors it loads and whether its input window slides (from the step
before), and whether it drains (from the step after).

So the walk is summarised as *segments*: a run of consecutive steps is its additive totals
(steps, slot cycles of the slots wholly inside it, engine and traffic sums) and the costs of its
first two and last two steps, whose open ends (the first step's load, the last step's drain)
are settled when two segments are joined, by the concrete steps on either side of the join.
A loop's iterations other than its last see the same edges, so their sub-walks are one
segment (computed once per edge situation and reused wherever it recurs), and ``m`` of them
in a row are the first three joined and the third's increment repeated: the joins between
them are translations of one another (the first two and the second's increment, when the
segment has two steps or more: a join then reads only steps inside the copies it joins).  The
cost is the number of distinct edge situations, a few per loop, however many steps the layer
takes.

:func:`.walk.reference_summary` walks every step and is the reference: tests compare the two
on random layers, dataflows, tiles and arrays, figure for figure.

A step is written here as one flat tuple, the level-0 bases of the loop dims then their level-1
offsets (:class:`.walk.Step`'s ``b0 + r1``), a step at a segment's end as a plain tuple and a
segment's totals as a tuple added field by field: the closed form is on the preset's hot path
(every layer of every design point of a search), so a join builds no dicts and no named copies.
What a join does depends only on which positions change across it, the same at every join of
a loop's iterations, so it is worked out once per loop and edge situation (:meth:`_Closed.transition`).
"""

from __future__ import annotations

from operator import add as _add
from operator import itemgetter
from typing import NamedTuple

from .rules import (LOOP_DIMS, TENSOR_LOOP_DIMS, TIMING, Ingress, TimingConstants, check_timing, drain_latency,
                    drain_runs, ingress, input_span, load_latency, sliding, tensor_load)
from .structure import HwStructure, LayerTiles
from .walk import _loop_params, traffic_totals

__all__ = ["closed_summary", "hwgen_cycles"]

# the additive totals of a segment, in this order
_FIELDS = ("steps", "slots", "bound_load", "bound_compute", "bound_drain", "load_cycles", "compute_cycles",
           "drain_cycles", "l2_input", "l2_weight", "l1_input", "l1_weight", "macs", "drained")
_I = {name: i for i, name in enumerate(_FIELDS)}
_ZERO = (0,) * len(_FIELDS)
_SLOTS, _DRAIN_CYCLES, _DRAINED = _I["slots"], _I["drain_cycles"], _I["drained"]
_BOUND_LOAD, _BOUND_COMPUTE, _BOUND_DRAIN = _I["bound_load"], _I["bound_compute"], _I["bound_drain"]
_LOAD_CYCLES, _L2_INPUT, _L2_WEIGHT = _I["load_cycles"], _I["l2_input"], _I["l2_weight"]
_L1_INPUT, _L1_WEIGHT = _I["l1_input"], _I["l1_weight"]

#: Each tensor's positions in a flat step (its loop dims' level-0 bases and level-1 offsets): a
#: step reloads (outputs: drains) the tensor when they differ from the step before.
_TENSOR_AT = {name: itemgetter(*(i + 4 * lv for lv in (0, 1) for i in (LOOP_DIMS.index(d) for d in dims)))
              for name, dims in TENSOR_LOOP_DIMS.items()}
_INPUT_AT, _WEIGHT_AT, _OUTPUT_AT = _TENSOR_AT["input"], _TENSOR_AT["weight"], _TENSOR_AT["output"]


#: A step at a segment's end (a plain tuple, indexed by these): its engines' cycles, ``None``
#: while the side it depends on is open (the load on the step before, the drain on the step
#: after); the drain's cycles and words if the step ends an output tile; its edge situation
#: (what its costs depend on).
_LOAD, _COMPUTE, _DRAIN, _DRAIN_IF_ENDS, _WORDS_IF_ENDS, _EDGES = range(6)


class _Seg(NamedTuple):
    add: tuple               # the totals of _FIELDS
    ends: tuple              # its steps' records: all of them if at most four, else the first two and last two
    last: tuple              # positions of the segment's own loops at its last step

    @property
    def n(self) -> int:
        return self.add[0]


def _bump(add: tuple, **kw) -> tuple:
    out = list(add)
    for k, v in kw.items():
        out[_I[k]] += v
    return tuple(out)


class _Closed:
    def __init__(self, s: HwStructure, t: LayerTiles, timing: TimingConstants):
        self.s, self.t, self.timing = s, t, timing
        self.params = _loop_params(s, t)                  # (level, dim index, stride) outermost first
        seen0 = set()
        for lv, di, _ in self.params:
            if lv == 0:
                seen0.add(di)
            elif any(lv0 == 0 and d0 == di for lv0, d0, _ in self.params) and di not in seen0:
                raise AssertionError("a level-1 loop outside the level-0 loop of its dimension")
        self.L = len(self.params)
        self.overhead, self.min_slot = timing.slot_overhead_cycles, timing.min_slot_cycles
        self.slots = tuple(di + 4 * lv for lv, di, _ in self.params)    # where each loop's position sits in a step
        self.dims = tuple(t.dims[d] for d in LOOP_DIMS)
        self.t0 = tuple(t.t0[d] for d in LOOP_DIMS)
        # per dim: its size, level-0 tile and what its two levels can take at once
        self.rows = tuple((t.dims[d], t.t0[d], t.t0[d] * (s.n0 if s.spatial[0] == d else 1),
                           t.t1[d] * (s.n1 if s.spatial[1] == d else 1)) for d in LOOP_DIMS)
        self.memo: dict = {}
        self.opens: dict = {}
        self.geometries: dict = {}
        self.ingresses: dict = {}
        # the axes along which a load can slide (rules.slides: a sliding design, a stride
        # narrower than the filter): the axis' level-0 and level-1 positions in a step, and the
        # positions that must stay put for it to (the input's other loop dims)
        self.slide_axes = []
        for d, filt, stride, other in (("X", "S", t.stride_x, "CY"), ("Y", "R", t.stride_y, "CX")):
            if sliding(s, d) and stride < t.dims[filt]:
                di = LOOP_DIMS.index(d)
                self.slide_axes.append((d, di, di + 4, itemgetter(*(LOOP_DIMS.index(o) + 4 * lv for o in other
                                                                    for lv in (0, 1)))))
        # what every step's geometry shares (_StepGeometry)
        self.window = -(-(t.dims["R"] * t.dims["S"]) // s.simd_lanes)      # lanes share a window
        self.units = {d: (s.n0 if s.spatial[0] == d else s.n1) for d in LOOP_DIMS if d in s.spatial}
        self.spread = {d: (t.t0[d] if s.spatial[0] == d else t.t1[d]) for d in self.units}
        self.drain_across = s.drain_across_groups is not None
        self.drain_lanes = s.drain_lanes
        self.load_latency = load_latency(s, timing)
        # a load's L1 writes: the input rows (columns) a PE's output rows (columns) read, and the
        # units that share a tensor's tile (they spread a dim the tensor ignores)
        R, S = t.dims["R"], t.dims["S"]
        self.input_rows = lambda e: input_span(e, t.stride_y, R) if e > 0 else 0
        self.input_cols = lambda e: input_span(e, t.stride_x, S) if e > 0 else 0
        self.input_sharers = self.weight_sharers = 1
        for d, u in self.units.items():
            self.input_sharers *= u if d not in "CYX" else 1
            self.weight_sharers *= u if d not in "KC" else 1

    def ingress(self, tensor: str) -> Ingress:
        """:func:`.rules.ingress`, once per tensor (every distinct load of the layer reads it)."""
        got = self.ingresses.get(tensor)
        if got is None:
            got = self.ingresses[tensor] = ingress(self.s, tensor)
        return got

    # -- positions ------------------------------------------------------------------------------
    def step(self, pos: tuple) -> tuple:
        """The flat step (level-0 bases, then level-1 offsets) of the loop positions ``pos``,
        outermost first (the loops it leaves out at 0)."""
        return self.place((0,) * 8, 0, pos)

    def place(self, st: tuple, j: int, pos: tuple) -> tuple:
        """Step ``st`` with loops ``j, j+1, ...`` at the positions ``pos``."""
        out = list(st)
        for slot, p in zip(self.slots[j:], pos):
            out[slot] = p
        return tuple(out)

    def edges(self, st: tuple) -> tuple:
        """What the sub-walk below step ``st`` (its outer loops' positions) depends on: per dim,
        how much is left past the level-0 start and past the level-1 start, each capped at what
        its level covers at once."""
        return tuple(self.edge(di, st) for di in range(4))

    def edge(self, di: int, st: tuple) -> tuple[int, int]:
        """Dimension ``di``'s part of :meth:`edges`."""
        D, t0, cap0, cap1 = self.rows[di]
        left = D - st[di]
        return min(left, cap0), min(min(t0, left) - st[4 + di], cap1)

    def trips(self, j: int, pos: tuple) -> int:
        """Iterations of loop ``j`` with the outer loops at ``pos``."""
        return self._trips(j, self.step(pos))

    def _trips(self, j: int, st: tuple) -> int:
        lv, di, stride = self.params[j]
        span = self.dims[di] if lv == 0 else min(self.t0[di], self.dims[di] - st[di])
        return -(-span // stride)

    def transition(self, before: tuple | None, st: tuple) -> tuple:
        """What step ``st`` does after step ``before`` (``None``: the first step): whether
        ``before`` ends an output tile, whether ``st`` loads the input and the weight, and
        whether its input window slid along X and along Y (:func:`.rules.slides`, as
        :func:`.walk._slides` decides it: the same positions along the input's other loop
        dims, and a start past the one before)."""
        if before is None:
            return False, True, True, False, False
        inp = _INPUT_AT(before) != _INPUT_AT(st)
        slid = {"X": False, "Y": False}
        if inp:
            for d, i0, i1, other in self.slide_axes:
                if other(before) == other(st) and st[i0] + st[i1] > before[i0] + before[i1]:
                    slid[d] = True
        return _OUTPUT_AT(before) != _OUTPUT_AT(st), inp, _WEIGHT_AT(before) != _WEIGHT_AT(st), slid["X"], slid["Y"]

    # -- segments -------------------------------------------------------------------------------
    def seg(self, j: int, st: tuple, edges: tuple) -> _Seg:
        """The segment of the sub-walk of loops ``j..`` from step ``st`` (the outer loops'
        positions), whose edge situation is ``edges``."""
        key = (j, edges)
        got = self.memo.get(key)
        if got is None:
            got = self.memo[key] = self._seg(j, st, edges)
        return got

    def _seg(self, j: int, st: tuple, edges: tuple) -> _Seg:
        if j == self.L:
            return self._leaf(edges)
        di, stride = self.params[j][1:]
        slot = self.slots[j]
        c = self._trips(j, st)
        at = st[:slot] + ((c - 1) * stride,) + st[slot + 1:]            # (loop j's last iteration: only dim di moves)
        last = self.seg(j + 1, at, edges[:di] + (self.edge(di, at),) + edges[di + 1:])
        if c == 1:
            return _Seg(last.add, last.ends, (0,) + last.last)
        at = st[:slot] + (0,) + st[slot + 1:]
        full = self.seg(j + 1, at, edges[:di] + (self.edge(di, at),) + edges[di + 1:])
        # (every join below is from a full iteration's last step to the next iteration's first:
        # the positions that change, and how, are the same at each, so is what the join does)
        join = self.transition(self.place(st, j, (0,) + full.last),
                               self.place(st, j, (stride,) + (0,) * (self.L - j - 1)))
        m = c - 1                                   # full iterations before the last
        body = full
        if m >= 2:
            two = self.concat(full, full, join)
            body = two
            if m >= 3 and full.n >= 2:
                # (a join reads the two steps on either side of it: inside the copies when they
                # have two, so every join adds what the first did)
                body = self.repeat(full, two, m - 2)
            elif m >= 3:
                three = self.concat(two, full, join)
                body = three if m == 3 else self.repeat(two, three, m - 3)
        out = self.concat(body, last, join)
        return _Seg(out.add, out.ends, ((c - 1) * stride,) + last.last)

    def geometry(self, edges: tuple) -> _StepGeometry:
        """The geometry of a step in the edge situation ``edges`` (computed once per situation)."""
        got = self.geometries.get(edges)
        if got is None:
            got = self.geometries[edges] = _StepGeometry(self, edges)
        return got

    def _leaf(self, edges: tuple) -> _Seg:
        g = self.geometry(edges)
        compute = g.compute(self.timing)
        rec = (None, compute, None, g.drain(self.timing), g.drained(), edges)
        return _Seg(_bump(_ZERO, steps=1, compute_cycles=compute, macs=g.macs()), (rec,), ())

    def open_load(self, rec: tuple, transition: tuple) -> tuple[int, tuple]:
        """The load of the step whose costs are ``rec`` after the ``transition`` into it, and
        the traffic it adds."""
        key = (rec[_EDGES], transition[1:])
        got = self.opens.get(key)
        if got is None:
            got = self.opens[key] = self.geometry(rec[_EDGES]).loads(*transition[1:], self.timing)
        return got

    def slot(self, add: list, load: int, compute: int, drain: int) -> None:
        """Add to the totals ``add`` a slot of these engines' cycles, and to the engine it waits on."""
        cycles = max(max(load, compute, drain) + self.overhead, self.min_slot)
        add[_SLOTS] += cycles
        if compute >= load and compute >= drain:
            add[_BOUND_COMPUTE] += cycles
        elif load >= drain:
            add[_BOUND_LOAD] += cycles
        else:
            add[_BOUND_DRAIN] += cycles

    def concat(self, a: _Seg, b: _Seg, transition: tuple) -> _Seg:
        """``a`` then ``b``, joined by ``transition`` (:meth:`transition` from ``a``'s last step
        to ``b``'s first): settle the open ends between them and add the slots the join makes
        whole (the one that loads ``b``'s first step, if ``a`` has two steps; the one that loads
        ``b``'s second, if any)."""
        na, nb = a.add[0], b.add[0]
        ra, rb = a.ends[-1], b.ends[0]
        ends = transition[0]
        drain = ra[_DRAIN_IF_ENDS] if ends else 0
        load, opened = self.open_load(rb, transition)
        add = list(map(_add, map(_add, a.add, b.add), opened))
        add[_DRAIN_CYCLES] += drain
        if ends:
            add[_DRAINED] += ra[_WORDS_IF_ENDS]
        if na >= 2:
            self.slot(add, load, ra[_COMPUTE], a.ends[-2][_DRAIN])
        if nb >= 2:
            self.slot(add, b.ends[1][_LOAD], rb[_COMPUTE], drain)
        seq = a.ends[:-1] + (ra[:_DRAIN] + (drain,) + ra[_DRAIN + 1:], (load,) + rb[_LOAD + 1:]) + b.ends[1:]
        return _Seg(tuple(add), seq if na + nb <= 4 else seq[:2] + seq[-2:], b.last)

    @staticmethod
    def repeat(shorter: _Seg, longer: _Seg, more: int) -> _Seg:
        """``longer`` (joined copies of a segment, one more than ``shorter``) followed by ``more``
        further copies: each adds what its last did (``longer - shorter``), and the ends are its."""
        add = tuple(x + more * (x - y) for x, y in zip(longer.add, shorter.add))
        return _Seg(add, longer.ends[:2] + longer.ends[-2:], longer.last)

    # -- the whole run --------------------------------------------------------------------------
    def summary(self) -> dict:
        first = (0,) * 8
        whole = self.seg(0, first, self.edges(first))
        n = whole.n
        e = [list(r) for r in whole.ends]
        recs = dict(enumerate(e)) if n <= 4 else {0: e[0], 1: e[1], n - 2: e[2], n - 1: e[3]}
        load, opened = self.open_load(e[0], self.transition(None, first))
        recs[0][_LOAD] = load
        last = recs[n - 1]
        last[_DRAIN] = last[_DRAIN_IF_ENDS]
        add = list(map(_add, whole.add, opened))
        add[_DRAIN_CYCLES] += last[_DRAIN_IF_ENDS]
        add[_DRAINED] += last[_WORDS_IF_ENDS]
        for k in sorted({k for k in (0, 1, n, n + 1) if not 2 <= k < n}):     # (the others are inside)
            ld = recs[k][_LOAD] if k < n else 0
            cp = recs[k - 1][_COMPUTE] if 1 <= k <= n else 0
            dr = recs[k - 2][_DRAIN] if 2 <= k <= n + 1 else 0
            if k == n + 1 and dr == 0:
                continue
            if 1 <= k <= n:
                self.slot(add, ld, cp, dr)
            else:                                   # the first and the last slot bound nothing
                add[_SLOTS] += max(max(ld, cp, dr) + self.overhead, self.min_slot)
        f = dict(zip(_FIELDS, add))
        out = {"cycles": f["slots"] + self.timing.start_cycles + drain_latency(self.s, self.timing),
               "steps": n, "load_cycles": f["load_cycles"], "compute_cycles": f["compute_cycles"],
               "drain_cycles": f["drain_cycles"],
               "bound_cycles": {"load": f["bound_load"], "compute": f["bound_compute"], "drain": f["bound_drain"]}}
        out.update(traffic_totals(f["l2_input"], f["l2_weight"], f["l1_input"], f["l1_weight"], f["macs"],
                                  f["drained"]))
        return out


def _unit_sum(union: int, tile: int, units: int, h) -> int:
    """``Σ_u h(extent of unit u)`` along a dimension of union extent ``union`` spread in tiles of
    ``tile`` over ``units`` units: the first ones whole, the last valid one the rest."""
    valid = min(units, -(-union // tile))
    return (valid - 1) * h(tile) + h(union - (valid - 1) * tile) if valid > 0 else 0


def _ident(e: int) -> int:
    return e


class _StepGeometry:
    """One step's tiles: PE (0, 0)'s extent and the union's per loop dim, and sums over the
    PEs as products of per-dimension sums (each level spreads one dimension, so a sum over the
    units of a product is the product of the per-level sums; :func:`.walk.step_costs` and
    :func:`.walk.step_traffic` sum PE by PE).

    Both follow from the step's edge situation (:meth:`_Closed.edges`: per dim, what is left
    past the level-0 and the level-1 start, capped at what each level covers): PE (0, 0) takes
    at most a PE tile of what is left past the level-1 start; the union is what is left past
    the start of the level that spreads the dim (no level-1 loop runs over a dimension level 0
    spreads), or PE (0, 0)'s extent where no level spreads it."""

    def __init__(self, c: _Closed, edges: tuple):
        s, t = c.s, c.t
        self.s, self.t, self.c = s, t, c
        self.ext, self.union = {}, {}
        for d, (left0, left1) in zip(LOOP_DIMS, edges):
            self.ext[d] = min(t.t1[d], left1)
            self.union[d] = left0 if s.spatial[0] == d else left1 if s.spatial[1] == d else self.ext[d]
        self.sums = {d: self.pe_sum(d) for d in LOOP_DIMS}      # each dim's extents over its units

    def pe_sum(self, d: str, h=_ident) -> int:
        """Σ over the units along ``d`` of ``h(extent)`` (PE (0, 0)'s if no level spreads ``d``)."""
        units = self.c.units.get(d)
        if units is not None:
            return _unit_sum(self.union[d], self.c.spread[d], units, h)
        return h(self.ext[d])

    def compute(self, timing: TimingConstants) -> int:
        e = self.ext
        return e["K"] * e["C"] * e["Y"] * e["X"] * self.c.window + timing.compute_latency_cycles

    def macs(self) -> int:
        u = self.sums
        return u["K"] * u["C"] * u["Y"] * u["X"] * self.t.dims["R"] * self.t.dims["S"]

    def drain(self, timing: TimingConstants) -> int:
        """The drain's cycles if the step ends an output tile (:func:`.walk.step_costs`)."""
        if self.c.drain_across:                      # runs of up to W one-column groups side by side
            runs = drain_runs(self.ext["K"] * self.ext["Y"], self.union["X"], self.s.noc_words_per_cycle)
        else:                                        # each group's rows in runs of up to L words
            lanes = self.c.drain_lanes
            runs = self.sums["K"] * self.sums["Y"] * self.pe_sum("X", lambda e: drain_runs(1, e, lanes))
        return runs + timing.drain_wait_cycles

    def drained(self) -> int:
        """Output words drained if the step ends an output tile: one per output of every group."""
        return self.sums["K"] * self.sums["Y"] * self.sums["X"]

    def loads(self, inp: bool, wgt: bool, slide_x: bool, slide_y: bool, timing: TimingConstants) -> tuple[int, tuple]:
        """The load's cycles when the step loads the input (``inp``; its window slid along X, Y
        where ``slide_x``, ``slide_y``) and the weight (``wgt``), and the totals it adds: NoC
        words and the L1 words every PE writes."""
        if not (inp or wgt):
            return 0, _ZERO
        s, t, c = self.s, self.t, self.c
        issue, add = 0, list(_ZERO)
        if inp:
            cycles, words = tensor_load(s, t, c.ingress("input"), self.ext, self.union, slide_x, slide_y)
            issue += int(cycles)
            cols = self.ext["X"] * t.stride_x if slide_x else self.pe_sum("X", c.input_cols)
            rows = self.ext["Y"] * t.stride_y if slide_y else self.pe_sum("Y", c.input_rows)
            add[_L2_INPUT], add[_L1_INPUT] = int(words), self.sums["C"] * rows * cols * c.input_sharers
        if wgt:
            cycles, words = tensor_load(s, t, c.ingress("weight"), self.ext, self.union)
            issue += int(cycles)
            add[_L2_WEIGHT] = int(words)
            add[_L1_WEIGHT] = self.sums["K"] * self.sums["C"] * t.dims["R"] * t.dims["S"] * c.weight_sharers
        add[_LOAD_CYCLES] = load = issue + c.load_latency
        return load, tuple(add)


def closed_summary(s: HwStructure, t: LayerTiles, timing: TimingConstants = TIMING) -> dict:
    """What :func:`.walk.reference_summary` returns, at a cost that does not grow with the steps."""
    check_timing(timing)
    return _Closed(s, t, timing).summary()


def hwgen_cycles(s: HwStructure, t: LayerTiles, timing: TimingConstants = TIMING) -> int:
    """Cycles from ``start`` to ``done`` for one run of the layer (:func:`closed_summary`)."""
    return closed_summary(s, t, timing)["cycles"]

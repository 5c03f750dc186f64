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
them are translations of one another.  The cost is the number of distinct edge situations,
a few per loop, however many steps the layer takes.

:func:`.walk.reference_summary` walks every step and is the reference: tests compare the two
on random layers, dataflows, tiles and arrays, figure for figure.
"""

from __future__ import annotations

from typing import NamedTuple

from .rules import (LOOP_DIMS, TENSOR_LOOP_DIMS, TIMING, TimingConstants, check_timing, drain_latency, drain_runs, ingress,
                    input_span, load_latency, sliding, tensor_load)
from .structure import HwStructure, LayerTiles
from .walk import Step, _loop_params, traffic_totals

__all__ = ["closed_summary", "hwgen_cycles"]

# the additive totals of a segment, in this order
_FIELDS = ("steps", "slots", "bound_load", "bound_compute", "bound_drain", "load_cycles", "compute_cycles",
           "drain_cycles", "l2_input", "l2_weight", "l1_input", "l1_weight", "macs", "drained")
_I = {name: i for i, name in enumerate(_FIELDS)}
_ZERO = (0,) * len(_FIELDS)


class _Rec(NamedTuple):
    """One step at a segment's end: its engines' cycles, ``None`` while the side it depends on is
    open (``load`` on the step before, ``drain`` on the step after)."""

    load: int | None
    compute: int
    drain: int | None
    drain_if_ends: int       # the drain's cycles and words if the step ends an output tile
    words_if_ends: int
    edges: tuple             # the step's edge situation (what its costs depend on)


class _Seg(NamedTuple):
    add: tuple               # the totals of _FIELDS
    recs: dict               # index within the segment -> _Rec, for its first two and last two steps
    last: tuple              # positions of the segment's own loops at its last step

    @property
    def n(self) -> int:
        return self.add[0]


_TENSOR_DIMS = {name: tuple(LOOP_DIMS.index(d) for d in dims) for name, dims in TENSOR_LOOP_DIMS.items()}


def _moved(tensor: str, a: Step, b: Step) -> bool:
    """Whether ``tensor``'s tile differs between steps ``a`` and ``b`` (its loop dims moved)."""
    return any(a.b0[i] != b.b0[i] or a.r1[i] != b.r1[i] for i in _TENSOR_DIMS[tensor])


def _plus(*vs):
    return tuple(map(sum, zip(*vs)))


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
        self.caps = []                                    # per dim: what its two levels can take at once
        for d in LOOP_DIMS:
            self.caps.append((t.t0[d] * (s.n0 if s.spatial[0] == d else 1),
                              t.t1[d] * (s.n1 if s.spatial[1] == d else 1)))
        self.memo: dict = {}
        self.opens: dict = {}
        # the axes along which a load can slide (rules.slides: a sliding design, a stride
        # narrower than the filter), with the loop dims that must stay put for it to
        self.slide_axes = []
        for d, filt, stride, other in (("X", "S", t.stride_x, "CY"), ("Y", "R", t.stride_y, "CX")):
            if sliding(s, d) and stride < t.dims[filt]:
                self.slide_axes.append((d, LOOP_DIMS.index(d), tuple(LOOP_DIMS.index(o) for o in other)))

    # -- positions ------------------------------------------------------------------------------
    def step(self, pos: tuple) -> Step:
        b0, r1 = [0, 0, 0, 0], [0, 0, 0, 0]
        for (lv, di, _), p in zip(self.params, pos):
            (b0 if lv == 0 else r1)[di] = p
        return Step(tuple(b0), tuple(r1))            # type: ignore[arg-type]

    def edges(self, pos: tuple) -> tuple:
        """What the sub-walk below ``pos`` (the positions of the outer loops) depends on: per dim,
        how much is left past the level-0 start and past the level-1 start, each capped at what
        its level covers at once."""
        st = self.step(pos)
        out = []
        for di, d in enumerate(LOOP_DIMS):
            left0 = self.t.dims[d] - st.b0[di]
            cap0, cap1 = self.caps[di]
            out.append((min(left0, cap0), min(min(self.t.t0[d], left0) - st.r1[di], cap1)))
        return tuple(out)

    def trips(self, j: int, pos: tuple) -> int:
        lv, di, stride = self.params[j]
        st = self.step(pos)
        d = LOOP_DIMS[di]
        span = self.t.dims[d] if lv == 0 else min(self.t.t0[d], self.t.dims[d] - st.b0[di])
        return -(-span // stride)

    # -- segments -------------------------------------------------------------------------------
    def seg(self, j: int, pos: tuple) -> _Seg:
        """The segment of the sub-walk of loops ``j..`` with the outer loops at ``pos``."""
        key = (j, self.edges(pos))
        got = self.memo.get(key)
        if got is None:
            got = self.memo[key] = self._seg(j, pos)
        return got

    def _seg(self, j: int, pos: tuple) -> _Seg:
        if j == self.L:
            return self._leaf(pos)
        stride = self.params[j][2]
        c = self.trips(j, pos)
        zeros = (0,) * (self.L - j - 1)
        last = self.seg(j + 1, pos + ((c - 1) * stride,))
        if c == 1:
            return last._replace(last=(0,) + last.last)
        full = self.seg(j + 1, pos + (0,))

        def join(a: _Seg, b: _Seg, i: int) -> _Seg:
            """``a`` ending in iteration ``i`` (a full one), ``b`` starting iteration ``i + 1``."""
            return self.concat(a, b, self.step(pos + (i * stride,) + full.last),
                               self.step(pos + ((i + 1) * stride,) + zeros))

        m = c - 1                                   # full iterations before the last
        body = full
        if m >= 2:
            two = join(full, full, 0)
            body = two
            if m >= 3:
                three = join(two, full, 1)
                body = three if m == 3 else self.repeat(two, three, m - 3)
        out = join(body, last, m - 1)
        return out._replace(last=((c - 1) * stride,) + last.last)

    def _leaf(self, pos: tuple) -> _Seg:
        g = _StepGeometry(self.s, self.t, self.step(pos))
        compute = g.compute(self.timing)
        rec = _Rec(None, compute, None, g.drain(self.timing), g.drained(), self.edges(pos))
        return _Seg(_bump(_ZERO, steps=1, compute_cycles=compute, macs=g.macs()), {0: rec}, ())

    def open_load(self, rec: _Rec, before: Step | None, st: Step) -> tuple[int, tuple]:
        """The load of step ``st`` (whose costs are ``rec``) after ``before`` (``None``: the
        first step), and the traffic it adds."""
        if before is None:
            loaded, slide = ("input", "weight"), {}
        else:
            loaded = tuple(name for name in ("input", "weight") if _moved(name, before, st))
            slide = self.slides(before, st) if "input" in loaded else {}
        key = (rec.edges, loaded, slide.get("X", False), slide.get("Y", False))
        got = self.opens.get(key)
        if got is None:
            got = self.opens[key] = _StepGeometry(self.s, self.t, st).loads(loaded, slide, self.timing)
        return got

    def slides(self, before: Step, st: Step) -> dict[str, bool]:
        """Along which axes ``st``'s input window slid after ``before``'s (:func:`.rules.slides`,
        as :func:`.walk._slides` decides it): the same positions along the input's other loop
        dims, and a start past the one before."""
        out = {}
        for d, di, other in self.slide_axes:
            if all(before.b0[i] == st.b0[i] and before.r1[i] == st.r1[i] for i in other) \
                    and st.b0[di] + st.r1[di] > before.b0[di] + before.r1[di]:
                out[d] = True
        return out

    def slot(self, load: int, compute: int, drain: int) -> tuple:
        cycles = max(max(load, compute, drain) + self.timing.slot_overhead_cycles, self.timing.min_slot_cycles)
        if compute >= load and compute >= drain:
            return _bump(_ZERO, slots=cycles, bound_compute=cycles)
        if load >= drain:
            return _bump(_ZERO, slots=cycles, bound_load=cycles)
        return _bump(_ZERO, slots=cycles, bound_drain=cycles)

    def concat(self, a: _Seg, b: _Seg, a_last: Step, b_first: Step) -> _Seg:
        """``a`` then ``b``, whose last and first steps are ``a_last`` and ``b_first``: settle
        the open ends between them and add the slots the join makes whole."""
        na, nb = a.n, b.n
        n = na + nb
        ra, rb = a.recs[na - 1], b.recs[0]
        ends = _moved("output", a_last, b_first)
        drain = ra.drain_if_ends if ends else 0
        load, opened = self.open_load(rb, a_last, b_first)
        recs = dict(a.recs)
        recs[na - 1] = ra._replace(drain=drain)
        for i, r in b.recs.items():
            recs[na + i] = r
        recs[na] = recs[na]._replace(load=load)
        parts = [a.add, b.add, opened, _bump(_ZERO, drain_cycles=drain, drained=ra.words_if_ends if ends else 0)]
        for k in range(max(2, na), min(na + 1, n - 1) + 1):
            parts.append(self.slot(recs[k].load, recs[k - 1].compute, recs[k - 2].drain))
        add = _plus(*parts)
        keep = {0, 1, n - 2, n - 1}
        return _Seg(add, {i: r for i, r in recs.items() if i in keep}, b.last)

    @staticmethod
    def repeat(two: _Seg, three: _Seg, more: int) -> _Seg:
        """``three`` (three joined copies of a segment) followed by ``more`` further copies:
        each adds what the third did (``three - two``), and the ends are the third's."""
        inc = tuple(x - y for x, y in zip(three.add, two.add))
        add = tuple(x + more * d for x, d in zip(three.add, inc))
        n3, n = three.n, add[0]
        recs = {0: three.recs[0], 1: three.recs[1], n - 2: three.recs[n3 - 2], n - 1: three.recs[n3 - 1]}
        return _Seg(add, recs, three.last)

    # -- the whole run --------------------------------------------------------------------------
    def summary(self) -> dict:
        whole = self.seg(0, ())
        n = whole.n
        recs = dict(whole.recs)
        first = self.step((0,) * self.L)
        load, opened = self.open_load(recs[0], None, first)
        recs[0] = recs[0]._replace(load=load)
        last = recs[n - 1]
        recs[n - 1] = last._replace(drain=last.drain_if_ends)
        add = _plus(whole.add, opened, _bump(_ZERO, drain_cycles=last.drain_if_ends, drained=last.words_if_ends))
        for k in sorted({k for k in (0, 1, n, n + 1) if not 2 <= k < n}):     # (the others are inside)
            ld = recs[k].load if k < n else 0
            cp = recs[k - 1].compute if 1 <= k <= n else 0
            dr = recs[k - 2].drain if 2 <= k <= n + 1 else 0
            if k == n + 1 and dr == 0:
                continue
            part = self.slot(ld, cp, dr)
            if not 1 <= k <= n:                     # the first and the last slot bound nothing
                part = _bump(_ZERO, slots=part[_I["slots"]])
            add = _plus(add, part)
        f = dict(zip(_FIELDS, add))
        out = {"cycles": f["slots"] + self.timing.start_cycles + drain_latency(self.s, self.timing),
               "steps": n, "load_cycles": f["load_cycles"], "compute_cycles": f["compute_cycles"],
               "drain_cycles": f["drain_cycles"],
               "bound_cycles": {"load": f["bound_load"], "compute": f["bound_compute"], "drain": f["bound_drain"]}}
        out.update(traffic_totals(f["l2_input"], f["l2_weight"], f["l1_input"], f["l1_weight"], f["macs"], f["drained"]))
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
    :func:`.walk.step_traffic` sum PE by PE)."""

    def __init__(self, s: HwStructure, t: LayerTiles, st: Step):
        self.s, self.t = s, t
        self.ext, self.union = {}, {}
        for di, d in enumerate(LOOP_DIMS):
            D, t0, t1 = t.dims[d], t.t0[d], t.t1[d]
            start = st.b0[di] + st.r1[di]
            self.ext[d] = min(t1, t0 - st.r1[di], D - start)
            if s.spatial[0] == d:
                self.union[d] = min(st.b0[di] + s.n0 * t0, D) - start
            elif s.spatial[1] == d:
                self.union[d] = min(start + s.n1 * t1, st.b0[di] + t0, D) - start
            else:
                self.union[d] = self.ext[d]
        self.units = {d: (s.n0 if s.spatial[0] == d else s.n1) for d in LOOP_DIMS if d in s.spatial}

    def pe_sum(self, d: str, h=_ident) -> int:
        """Σ over the units along ``d`` of ``h(extent)`` (PE (0, 0)'s if no level spreads ``d``)."""
        if d in self.units:
            tile = self.t.t0[d] if self.s.spatial[0] == d else self.t.t1[d]
            return _unit_sum(self.union[d], tile, self.units[d], h)
        return h(self.ext[d])

    def compute(self, timing: TimingConstants) -> int:
        window = -(-(self.t.dims["R"] * self.t.dims["S"]) // self.s.simd_lanes)   # lanes share a window
        e = self.ext
        return e["K"] * e["C"] * e["Y"] * e["X"] * window + timing.compute_latency_cycles

    def macs(self) -> int:
        return (self.pe_sum("K") * self.pe_sum("C") * self.pe_sum("Y") * self.pe_sum("X")
                * self.t.dims["R"] * self.t.dims["S"])

    def drain(self, timing: TimingConstants) -> int:
        """The drain's cycles if the step ends an output tile (:func:`.walk.step_costs`)."""
        if self.s.drain_across_groups is not None:   # runs of up to W one-column groups side by side
            runs = drain_runs(self.ext["K"] * self.ext["Y"], self.union["X"], self.s.noc_words_per_cycle)
        else:                                        # each group's rows in runs of up to L words
            lanes = self.s.drain_lanes
            runs = self.pe_sum("K") * self.pe_sum("Y") * self.pe_sum("X", lambda e: drain_runs(1, e, lanes))
        return runs + timing.drain_wait_cycles

    def drained(self) -> int:
        """Output words drained if the step ends an output tile: one per output of every group."""
        return self.pe_sum("K") * self.pe_sum("Y") * self.pe_sum("X")

    def loads(self, loaded: tuple[str, ...], slide: dict, timing: TimingConstants) -> tuple[int, tuple]:
        """The load's cycles when the step loads ``loaded`` (the input's window slid along the
        axes in ``slide``), and the totals it adds: NoC words and the L1 words every PE writes."""
        s, t = self.s, self.t
        if not loaded:
            return 0, _ZERO
        R, S, sy, sx = t.dims["R"], t.dims["S"], t.stride_y, t.stride_x
        issue, add = 0, {}
        if "input" in loaded:
            sl_x, sl_y = bool(slide.get("X")), bool(slide.get("Y"))
            cycles, words = tensor_load(s, t, ingress(s, "input"), self.ext, self.union, sl_x, sl_y)
            issue += int(cycles)

            def span(st, f):
                return lambda e: input_span(e, st, f) if e > 0 else 0
            cols = self.ext["X"] * sx if sl_x else self.pe_sum("X", span(sx, S))
            rows = self.ext["Y"] * sy if sl_y else self.pe_sum("Y", span(sy, R))
            l1 = self.pe_sum("C") * rows * cols
            for d, u in self.units.items():          # units spread over a dim the input ignores share its tile
                l1 *= u if d not in "CYX" else 1
            add.update(l2_input=int(words), l1_input=l1)
        if "weight" in loaded:
            cycles, words = tensor_load(s, t, ingress(s, "weight"), self.ext, self.union)
            issue += int(cycles)
            l1 = self.pe_sum("K") * self.pe_sum("C") * R * S
            for d, u in self.units.items():
                l1 *= u if d not in "KC" else 1
            add.update(l2_weight=int(words), l1_weight=l1)
        load = issue + load_latency(s, timing)
        return load, _bump(_ZERO, load_cycles=load, **add)


def closed_summary(s: HwStructure, t: LayerTiles, timing: TimingConstants = TIMING) -> dict:
    """What :func:`.walk.reference_summary` returns, at a cost that does not grow with the steps."""
    check_timing(timing)
    return _Closed(s, t, timing).summary()


def hwgen_cycles(s: HwStructure, t: LayerTiles, timing: TimingConstants = TIMING) -> int:
    """Cycles from ``start`` to ``done`` for one run of the layer (:func:`closed_summary`)."""
    return closed_summary(s, t, timing)["cycles"]

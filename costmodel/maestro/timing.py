"""The numeric half of the ``maestro`` step model: cycles from case tables, for one hardware or
for arrays of hardware points at once.

`_maestro_cases` reduces a (sub-)problem to a :class:`~costmodel._maestro_cases.CaseTable` that
depends only on the layer, the filled-in dataflow and the PE count.  Everything that depends on
the hardware's numbers happens here:

* a case's NoC delay is ``hops * latency - 1 + transfer_cycles(words, bandwidth)`` (MAESTRO's
  ``hops * latency + ceil(words / bw) - 1``; a word-less transfer leaves the head delay minus one);
* its compute delay is ``ceil(psums / simd_lanes)`` at the innermost level and, above it, the
  runtime of the slowest of its sub-problems;
* its step delay is ``max(ingress, compute, egress)``, or ``compute + ingress`` for the very first
  step; a problem's runtime is the occurrence-weighted sum.

Exactness.  Bandwidths and lane counts enter only through tables computed per distinct value with
the scalar rule (:func:`~costmodel.hardware.transfer_cycles`, exact for a fractional bandwidth) and
integer ceiling division; a hardware point selects its column by index.  Everything after that is
integer addition, ``max`` and a weighted sum, done in int64 — or, when a bound on the runtime says
int64 could overflow, in Python integers (object arrays) — so an array of points gets exactly the
numbers each point would get alone.  Because ``transfer_cycles`` never decreases with the word
count, ``max(delay(in), delay(out)) = delay(max(in, out))``: cases with the same larger volume and
the same compute are merged (their occurrences added) before any point is evaluated.

One hardware (:func:`scalar_timing`, what a single analysis uses) takes the same rules in plain
Python integers, case by case: arrays and their tables cost more than they save for one point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from operator import mul
from typing import Any, Callable, Collection, Iterable, Sequence

import numpy as np

from ..hardware.hardware import transfer_cycles
from .cases import CaseTable

__all__ = ["Timing", "CompiledLayer", "transfer_column", "ceil_column", "delay_rule", "scalar_timing"]

_INT64_SAFE = 1 << 62


@dataclass(frozen=True)
class Timing:
    """The timing numbers of ``n`` hardware points.  Lane counts and per-NoC-level bandwidths
    are value lists with a per-point index (so tables are built once per distinct value); the
    head delay ``hops * latency - 1`` of each level is a per-point integer array.  A level beyond
    the lists uses the last one."""

    n: int
    simd_values: tuple[int, ...]
    simd_idx: np.ndarray
    bw_values: tuple[tuple[float, ...], ...]
    bw_idx: tuple[np.ndarray, ...]
    head: tuple[np.ndarray, ...]
    head_bound: int = -1            # max |head| over levels and points, if the caller knows it


def transfer_column(words: np.ndarray, bandwidth: float) -> list[int]:
    """``transfer_cycles(w, bandwidth)`` for every ``w`` of ``words``, as Python integers."""
    if math.isinf(bandwidth):
        return [1 if w > 0 else 0 for w in words.tolist()]
    if float(bandwidth).is_integer():
        b = int(bandwidth)
        return [-(-w // b) if w > 0 else 0 for w in words.tolist()]
    found: dict[int, int] = {}
    out = []
    for w in words.tolist():
        cycles = found.get(w)
        if cycles is None:
            cycles = found[w] = transfer_cycles(w, bandwidth)
        out.append(cycles)
    return out


def ceil_column(psums: np.ndarray, lanes: int) -> list[int]:
    return [-(-p // lanes) for p in psums.tolist()]


class _Problem:
    """A case table reduced to what its runtime needs (merged cases, numpy arrays)."""

    __slots__ = ("ident", "level", "occ", "words", "psums", "kidx", "groups", "first", "scale", "largest")

    def __init__(self, cases: CaseTable) -> None:
        self.ident, self.level = cases.ident, cases.level
        inner = cases.psums is not None
        keys: Any = cases.psums if inner else cases.subs
        # runtime <= scale * (largest word or partial-sum count / slowest bandwidth + 1 + head)
        self.scale = sum(cases.occ)
        self.largest = max([0, *cases.ingress, *cases.egress, *(cases.psums or ())])
        self.first: tuple[int, int, Any] | None = None      # (occurrences, ingress words, compute key)
        merged: dict[tuple[int, Any], int] = {}
        for i, (o, w_in, w_out, key) in enumerate(zip(cases.occ, cases.ingress, cases.egress, keys)):
            if i == 0 and cases.first:
                self.first = (o, w_in, key)
                continue
            k = (max(w_in, w_out), key)
            merged[k] = merged.get(k, 0) + o
        self.occ = np.array(list(merged.values()), dtype=np.int64)
        self.words = np.array([w for w, _ in merged], dtype=np.int64)
        self.psums: np.ndarray | None = None
        self.kidx: np.ndarray | None = None
        self.groups: list[tuple[int, ...]] = []
        if inner:
            self.psums = np.array([k for _, k in merged], dtype=np.int64)
        else:
            index: dict[tuple[int, ...], int] = {}
            self.kidx = np.array([index.setdefault(k, len(index)) for _, k in merged], dtype=np.intp)
            if self.first is not None:
                index.setdefault(self.first[2], len(index))
            self.groups = list(index)


class CompiledLayer:
    """The problems of one layer's analysis (sub-problems before the problems that use them),
    ready to be evaluated for any :class:`Timing`.  Tables per distinct bandwidth and lane count
    are cached, so a design-space search builds each once.  Arrays are points x cases."""

    def __init__(self, problems: Sequence[CaseTable]) -> None:
        self.problems = [_Problem(p) for p in problems]
        self._tables: dict[tuple[Any, ...], np.ndarray] = {}
        # A runtime bound: a problem's steps times (1 + its slowest sub-problem's scale).
        scales: list[int] = []
        for p in self.problems:
            inner = max((scales[i] for g in p.groups for i in g), default=0)
            if p.first is not None and p.psums is None:
                inner = max([inner, *(scales[i] for i in p.first[2])])
            scales.append(p.scale * (1 + inner))
        self._scale = max(scales, default=0)
        self._largest = max((p.largest for p in self.problems), default=0)

    def _table(self, p: _Problem, kind: str, values: tuple[Any, ...]) -> np.ndarray:
        """One row per value: the transfer cycles of the merged cases' words (``w``) or of the
        first step's ingress (``in0``), or the compute cycles of the merged cases' partial sums
        (``c``) or of the first step's (``c0``).  int64, or Python integers past int64's range."""
        key = (p.ident, kind, values)
        hit = self._tables.get(key)
        if hit is None:
            first = p.first
            if kind == "w":
                rows = [transfer_column(p.words, v) for v in values]
            elif kind == "in0":
                assert first is not None
                rows = [transfer_column(np.array([first[1]], dtype=np.int64), v) for v in values]
            elif kind == "c":
                assert p.psums is not None
                rows = [ceil_column(p.psums, v) for v in values]
            else:
                assert first is not None
                rows = [[-(-first[2] // v)] for v in values]
            big = max((max(row, default=0) for row in rows), default=0) >= _INT64_SAFE
            hit = np.array(rows, dtype=object if big else np.int64).reshape(len(values), -1)
            self._tables[key] = hit
        return hit

    def runtimes(self, t: Timing) -> list[np.ndarray]:
        """Every problem's runtime at every point (index = the problem's ident); the layer's
        top-level problem is the last."""
        dtype: Any = object if self._needs_python_ints(t) else np.int64
        out: list[np.ndarray] = []
        for p in self.problems:
            out.append(self._runtime(p, t, out, dtype))
        return out

    def _level(self, p: _Problem, t: Timing) -> tuple[tuple[float, ...], np.ndarray, np.ndarray]:
        lvl = min(p.level, len(t.bw_values) - 1)
        return t.bw_values[lvl], t.bw_idx[lvl], t.head[lvl]

    def _runtime(self, p: _Problem, t: Timing, done: list[np.ndarray], dtype: Any) -> np.ndarray:
        values, bidx, head = self._level(p, t)
        if dtype is object:
            head = head.astype(object)
        inner = p.psums is not None
        groups = None if inner else [_max_of([done[i] for i in g]) for g in p.groups]
        total: Any = None
        if len(p.occ):
            delay = self._table(p, "w", values).astype(dtype, copy=False)[bidx]
            delay += head[:, None]
            if inner:
                compute = self._table(p, "c", t.simd_values).astype(dtype, copy=False)[t.simd_idx]
            else:
                assert groups is not None and p.kidx is not None
                compute = np.stack(groups, axis=1)[:, p.kidx]
            np.maximum(delay, compute, out=delay)
            total = delay @ p.occ.astype(dtype, copy=False)
        if p.first is not None:
            occ0, _, key0 = p.first
            first = self._table(p, "in0", values).astype(dtype, copy=False)[bidx, 0] + head
            if inner:
                first += self._table(p, "c0", t.simd_values).astype(dtype, copy=False)[t.simd_idx, 0]
            else:
                assert groups is not None
                first += groups[p.groups.index(key0)]
            if occ0 != 1:
                first *= occ0
            total = first if total is None else total + first
        if total is None:
            return np.zeros(t.n, dtype=dtype)
        return total

    def _needs_python_ints(self, t: Timing) -> bool:
        """Whether some runtime could leave int64: a (loose, cheap) bound on every runtime.  Its
        transfer term is at most ``largest / bandwidth + 1`` cycles and its compute at most the
        largest partial-sum count; a float bound with a wide margin is enough to decide."""
        slowest = min((bw for values in t.bw_values for bw in values), default=math.inf)
        head = t.head_bound if t.head_bound >= 0 else max(int(np.max(np.abs(h))) for h in t.head)
        transfer = 1.0 if math.isinf(slowest) else self._largest / slowest + 1.0
        bound = float(self._scale) * (transfer + head + 1.0 + self._largest)
        return bound >= _INT64_SAFE / 4


def _max_of(arrays: list[np.ndarray]) -> np.ndarray:
    if len(arrays) == 1:
        return arrays[0]
    out = arrays[0].copy()
    for a in arrays[1:]:
        np.maximum(out, a, out=out)
    return out


def delay_rule(bandwidth: float) -> Callable[[Iterable[int], int], list[int]]:
    """``head + transfer_cycles(w, bandwidth)`` for every ``w`` of a sequence of word counts, the
    rule chosen once (integer and unlimited bandwidths, the common cases, need no Fraction)."""
    if math.isinf(bandwidth):
        return lambda words, head: [head + 1 if w > 0 else head for w in words]
    if float(bandwidth).is_integer():
        b = int(bandwidth)
        return lambda words, head: [head - (-w // b) if w > 0 else head for w in words]
    return lambda words, head: [head + transfer_cycles(w, bandwidth) for w in words]


def scalar_timing(problems: Sequence[CaseTable], simd_lanes: int, noc: Sequence[tuple[float, int, int]],
                  reported: Collection[int]) -> tuple[list[int], dict[int, tuple[list[int], list[int], list[int]]]]:
    """One hardware's cycles, in plain Python integers (no arrays: a single point gains nothing from
    them): every problem's runtime (index = its ident), and per case of the problems whose idents
    are ``reported`` (unmerged, in grid order) the compute, ingress and egress delays.  The same
    rules as :meth:`CompiledLayer.runtimes`, exactly (integer arithmetic throughout).
    ``noc[i]`` is ``(words/cycle, hop latency, hops)`` of level ``i``; a level beyond it uses the last."""
    levels = [(delay_rule(bw), hops * latency - 1) for bw, latency, hops in noc]
    runtimes: list[int] = []
    delays: dict[int, tuple[list[int], list[int], list[int]]] = {}
    for cases in problems:
        occ = cases.occ
        if not occ:
            runtimes.append(0)
            continue
        delay, head = levels[min(cases.level, len(levels) - 1)]
        if cases.psums is not None:
            compute = [-(-p // simd_lanes) for p in cases.psums]
        else:
            subs = cases.subs or []             # cases share sub-problems: each set's slowest once
            slowest = {s: max(map(runtimes.__getitem__, s)) for s in dict.fromkeys(subs)}
            compute = list(map(slowest.__getitem__, subs))
        if cases.ident in reported:
            d_in, d_out = delay(cases.ingress, head), delay(cases.egress, head)
            delays[cases.ident] = (compute, d_in, d_out)
            step = list(map(max, d_in, d_out))
            first_in = d_in[0]
        else:
            # the delay never decreases with the words: the slower direction is the larger one
            step = delay(map(max, cases.ingress, cases.egress), head)
            first_in = delay(cases.ingress[:1], head)[0]
        if cases.first:
            # the very first step: ingress and compute add up (nothing to overlap with)
            total = occ[0] * (first_in + compute[0]) + sum(map(mul, occ[1:], map(max, step[1:], compute[1:])))
        else:
            total = sum(map(mul, occ, map(max, step, compute)))
        runtimes.append(total)
    return runtimes, delays

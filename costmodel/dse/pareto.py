"""Pareto fronts over two or three objectives, all minimised, exact and order-independent.

A point ``p`` dominates ``q`` when it is no worse in every objective and better in one — or, when
the two are equal in every objective, when ``p`` comes first (smaller point id).  That tie rule
makes dominance a strict order, so the front of a union is the front of the fronts of its parts:
chunks can be filtered in any order, on any machine, and merged into the same front.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Front", "nondominated", "merge"]

_BLOCK = 1024


@dataclass
class Front:
    """Point ids (stream positions), flat indices and one array per objective, sorted by the
    objectives then the id."""

    ids: np.ndarray
    flat: np.ndarray
    objectives: list[np.ndarray]

    @classmethod
    def empty(cls, k: int) -> Front:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), [np.zeros(0) for _ in range(k)])

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, keep: np.ndarray) -> Front:
        return Front(self.ids[keep], self.flat[keep], [o[keep] for o in self.objectives])


def _order(ids: np.ndarray, objs: list[np.ndarray]) -> np.ndarray:
    return np.lexsort((ids, *reversed(objs)))


def nondominated(ids: np.ndarray, objs: list[np.ndarray]) -> np.ndarray:
    """Indices of the non-dominated points, in front order (objectives, then id)."""
    n = len(ids)
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    order = _order(ids, objs)
    if len(objs) == 1:
        return order[:1]
    if len(objs) == 2:
        # Sorted by (o1, o2, id): a point survives iff its o2 is below every earlier point's.
        second = objs[1][order]
        best = np.minimum.accumulate(second)
        keep = np.empty(n, dtype=bool)
        keep[0] = True
        keep[1:] = second[1:] < best[:-1]
        return order[keep]
    # Sorted lexicographically, a dominator always comes earlier; any earlier dominator implies a
    # kept one (transitivity), so each block is checked against the kept points and itself.
    cols = [o[order] for o in objs]
    kept: list[np.ndarray] = []
    kept_cols: list[list[np.ndarray]] = []
    for start in range(0, n, _BLOCK):
        block = slice(start, min(start + _BLOCK, n))
        bcols = [c[block] for c in cols]
        alive = np.ones(block.stop - block.start, dtype=bool)
        for front in kept_cols:
            alive &= ~_dominated(bcols, front)
        # within the block, among the survivors (a dead dominator implies a live one): earlier
        # (lexicographically smaller or equal) points only
        sub = np.flatnonzero(alive)
        m = len(sub)
        if m > 1:
            le = np.ones((m, m), dtype=bool)
            for c in bcols:
                c = c[sub]
                le &= c[None, :] <= c[:, None]      # [q, p]: p no worse than q
            le &= np.tri(m, k=-1, dtype=bool)       # p before q
            alive[sub] = ~le.any(axis=1)
        idx = np.arange(block.start, block.stop)[alive]
        if len(idx):
            kept.append(idx)
            kept_cols.append([c[idx] for c in cols])
    survivors = np.concatenate(kept) if kept else np.zeros(0, dtype=np.intp)
    return order[survivors]


def _dominated(q: list[np.ndarray], p: list[np.ndarray]) -> np.ndarray:
    """For each point of ``q``, whether some point of ``p`` (earlier in front order) is no worse
    in every objective — which, with ``p`` earlier, is domination."""
    out = np.zeros(len(q[0]), dtype=bool)
    step = max(1, (1 << 22) // max(len(q[0]), 1))
    for s in range(0, len(p[0]), step):
        le = np.ones((len(q[0]), min(step, len(p[0]) - s)), dtype=bool)
        for qc, pc in zip(q, p):
            le &= pc[None, s:s + step] <= qc[:, None]
        out |= le.any(axis=1)
    return out


def merge(a: Front, b: Front) -> Front:
    """The front of the union of two fronts (or of any two point sets)."""
    if not len(a) or not len(b):
        c = b if not len(a) else a
        keep = nondominated(c.ids, c.objectives)
        return c.take(keep)
    ids = np.concatenate([a.ids, b.ids])
    flat = np.concatenate([a.flat, b.flat])
    objs = [np.concatenate([x, y]) for x, y in zip(a.objectives, b.objectives)]
    keep = nondominated(ids, objs)
    return Front(ids[keep], flat[keep], [o[keep] for o in objs])

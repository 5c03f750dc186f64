"""One cluster level of a dataflow under MAESTRO's step model: its maps, its static tile sizes,
its directives' states (Init / Steady / Edge) and the per-case traffic of its units (ingress with
multicast and halo sharing, egress with spatial reduction, partial sums on the critical PE).

:mod:`.engine` builds the levels of a layer and evaluates them; the rules here follow MAESTRO's
published semantics so that the preset reproduces its figures.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from ..workload.problem import Problem
from .cases import EDGE, INIT, STEADY, _State

__all__ = ["Level", "Map", "Directive"]


def _cdiv(a: int, b: int) -> int:
    """C's truncating integer division (MAESTRO's arithmetic), for possibly negative ``a``."""
    q = abs(a) // b
    return q if a >= 0 else -q


def _edge_units(remaining: int, size: int, ofs: int) -> tuple[int, bool]:
    """Units active in a spatial fold that starts ``remaining`` elements before the end of the
    dimension, and whether the last of them holds a partial tile.  Counted in tile positions, so
    that with offset > size (strided windows) the gaps between tiles cost no unit — MAESTRO
    counts elements there and activates a unit for the unused tail."""
    if remaining < size:
        return 1, False
    full = (remaining - size) // ofs + 1
    partial = full * ofs < remaining and (full - 1) * ofs + size < remaining
    return full + partial, partial


# The states that carry no count are shared (a _State is an immutable tuple): Init by
# (unrolled, over-covers) for temporal and spatial maps, Edge by whether its last unit is partial.
_INIT_TEMPORAL = {(u, e): _State(INIT, 1, u, e, False, e) for u in (False, True) for e in (False, True)}
_INIT_SPATIAL = {(u, e): _State(INIT, 1, u, e, e, e) for u in (False, True) for e in (False, True)}
_EDGE_TEMPORAL = _State(EDGE, 1, False, False, False, True)
_EDGE_SPATIAL = {ee: _State(EDGE, 1, False, False, ee, True) for ee in (False, True)}


class Map(NamedTuple):
    spatial: bool
    size: int
    ofs: int
    dim: str


class Directive(NamedTuple):
    """What the case grid needs of one directive of a level."""

    spatial: bool
    full: int                      # its tile of its dimension
    edge: int                      # ... at a partial tile
    out: tuple[int, int] | None    # (full, edge) output tile, when the output is indexed by it
    unique: int                    # the fresh part of a full tile (at least 1)
    code_unit: int                 # spatial: the case-code weight of its state index


class _Views(NamedTuple):
    """Which directives of a level index which tensor: a function of the directives' dimensions
    and kinds (not their sizes) and of the problem's tensors, so shared by every level of that
    shape (a mapping search's candidates mostly differ in sizes only)."""

    by_dim: dict[str, int]                 # dimension -> its directive
    spatial: list[int]                     # the spatial directives
    out_spatial: list[int]                 # the output's spatial directives, in its dimension order
    out_sp_outs: list[tuple[int, str]]     # the spatial directives indexing the output (and its tile)
    out_sp_others: list[int]               # the spatial directives not indexing it
    in_masks: list[int]                    # per input: its directives (bit i for directive i)
    in_of: list[list[int]]                 # directive -> the inputs it indexes
    in_spatial: list[list[int]]            # per input: its spatial directives, in its dimension order
    in_sp_coupled: list[list[int]]         # ... in directive order
    out_names: list[str | None]            # per directive: its output tile's name, if it indexes the output
    code_units: list[int]                  # per directive: `Directive.code_unit`


def _spatial_of(spatial: list[int], dims_of: tuple[str, ...], dims: tuple[str, ...]) -> list[int]:
    """The spatially mapped directives indexing a tensor, in the tensor's dimension order."""
    found = [i for i in spatial if dims_of[i] in dims]
    if len(found) > 1:
        found.sort(key=lambda i: dims.index(dims_of[i]))
    return found


@lru_cache(maxsize=512)
def _views(kinds: tuple[tuple[bool, str], ...], out_dims: tuple[str, ...], inputs: tuple[tuple[str, ...], ...],
           overlapping: frozenset[str]) -> _Views:
    """The :class:`_Views` of directives ``(spatial, dim)`` over the tensors (the views are shared:
    never modified)."""
    dims_of = tuple(dim for _, dim in kinds)
    by_dim = {dim: i for i, dim in enumerate(dims_of)}
    spatial = [i for i, (sp, _) in enumerate(kinds) if sp]
    out_of = {}
    for d in out_dims:
        i = by_dim.get(d)
        if i is not None:
            out_of[i] = d + "'" if d in overlapping else d
    in_masks = []
    in_of: list[list[int]] = [[] for _ in kinds]
    for t, dims in enumerate(inputs):
        mask = 0
        for d in dims:
            i = by_dim.get(d)
            if i is not None:
                mask |= 1 << i
                in_of[i].append(t)
        in_masks.append(mask)
    in_spatial = [_spatial_of(spatial, dims_of, dims) for dims in inputs]
    code_units, unit = [], 1 << len(kinds)
    for sp, _ in kinds:
        code_units.append(unit if sp else 0)
        if sp:
            unit *= 3
    return _Views(by_dim, spatial, _spatial_of(spatial, dims_of, out_dims),
                  [(i, a) for i, a in out_of.items() if kinds[i][0]], [i for i in spatial if i not in out_of],
                  in_masks, in_of, in_spatial, [sorted(sp) for sp in in_spatial],
                  [out_of.get(i) for i in range(len(kinds))], code_units)


class Level:
    """One cluster level: its directives, its static tile sizes, and its unit count."""

    def __init__(self, index: int, maps: list[Map], dims: dict[str, int], size: int,
                 problem: Problem, floor: Level | None = None) -> None:
        """``floor``: the level's own Level when this is an edge sub-problem of it."""
        self.index = index
        self.strides = problem.strides
        self.maps = maps
        self.dims = dims
        self.size = size
        self.overlaps = problem.overlaps
        self.l1_words: dict[str, int] | None = None          # one unit's tiles (see _first_step)
        if floor is None:
            self.views = _views(tuple([(m.spatial, m.dim) for m in maps]), problem.output.dims,
                                tuple([t.dims for t in problem.inputs]), frozenset(problem.overlaps))
        else:
            # An edge sub-problem of ``floor``'s level: the same directives, so the same views
            # of the tensors; only the tile tables (and the per-directive factors) differ.
            self.views = floor.views
            self.num_edge_clusters = floor.num_edge_clusters
        (self.by_dim, self.spatial, self.out_spatial, self.out_sp_outs, self.out_sp_others, self.in_masks,
         self.in_of, self.in_spatial, self.in_sp_coupled, out_names, code_units) = self.views
        self.spatial_index = self.spatial[0]
        if floor is None:
            self.num_edge_clusters = self._edge_clusters()
        self._mapping_sizes(floor, out_names, code_units)

    def _edge_clusters(self) -> int:
        m = self.maps[self.spatial_index]
        d = self.dims.get(m.dim, 0)
        full = m.ofs * (self.size - 1) + m.size
        if d > full:
            steady = _cdiv(_cdiv(d - m.size, m.ofs) + 1, self.size) - 1
            return _edge_units(d - (steady + 1) * m.ofs * self.size, m.size, m.ofs)[0]
        if d > m.size:
            return _edge_units(d, m.size, m.ofs)[0]
        return 1

    def _mapping_sizes(self, floor: Level | None, out_names: list[str | None], code_units: list[int]) -> None:
        """Every dimension's tile (``mapped``), the fresh part of the next one (``unique``) and
        both at a partial last tile (``*_edge``) — output rows and columns ``Y'``/``X'`` included
        — and what the case grid multiplies per directive (``info``, a `Directive` each)."""
        self.mapped = mapped = {}
        self.unique = unique = {}
        self.mapped_edge = mapped_edge = {}
        self.unique_edge = unique_edge = {}
        dims = self.dims
        floor_edge = None if floor is None else floor.mapped_edge
        for spatial, size, ofs, dim in self.maps:
            d = dims.get(dim, 0)
            mapped[dim] = size
            if d > size:
                steady = (d - size) // ofs
                unique[dim] = size if size < ofs else ofs
                # A partial last tile exists when the full tiles leave a tail uncovered; with
                # offset > size (strided windows) the gap rows between tiles are never needed.
                edge_size = d - (steady + 1) * ofs
                if edge_size < 0:
                    edge_size = d
                edge = edge_size if steady * ofs + size < d and (steady + 1) * ofs < d else size
            else:
                # One tile covers the dimension (MAESTRO keeps ``d - ofs`` when it over-covers,
                # losing elements): the one tile holds the whole dimension.
                unique[dim] = 0 if not spatial else size if size < ofs else ofs
                edge = edge_size = d
            if floor_edge is not None and floor_edge[dim] > edge:
                mapped_edge[dim] = floor_edge[dim]
                unique_edge[dim] = floor.unique_edge[dim]          # type: ignore[union-attr]
            else:
                mapped_edge[dim] = edge
                fresh = ofs - (size - edge_size)
                unique_edge[dim] = fresh if fresh > 0 else 0
        by_dim, maps, strides = self.by_dim, self.maps, self.strides
        for ref, sliding in self.overlaps.items():
            i = by_dim.get(ref)
            if i is None:
                continue
            m = maps[i]
            out = ref + "'"
            stride = strides.get(ref, 1)
            mapped[out] = (mapped[ref] - mapped.get(sliding, 0)) // stride + 1      # out_extent, inlined
            unique[out] = min(m.ofs, m.size) // stride or 1
            edge = mapped_edge[out] = (mapped_edge[ref] - mapped_edge.get(sliding, 0)) // stride + 1
            unique_edge[out] = min(m.ofs // stride or 1, edge)
        self.info = [Directive(spatial, mapped[dim], mapped_edge[dim],
                               None if actual is None else (mapped.get(actual, 0), mapped_edge.get(actual, 0)),
                               unique[dim] or 1, code_unit)
                     for (spatial, _, _, dim), actual, code_unit in zip(maps, out_names, code_units)]

    def out_extent(self, ref_dim: str, ref: int, filt: int) -> int:
        """Output rows of an input tile of ``ref`` rows under a filter of ``filt`` rows.  MAESTRO
        uses ``ref - filt + 1`` whatever the stride, which over-counts strided layers."""
        return (ref - filt) // self.strides.get(ref_dim, 1) + 1

    def states(self, dims: dict[str, int]) -> list[list[_State]]:
        """Init / Steady / Edge states of every directive for a (sub-)problem of ``dims``."""
        out = []
        n = self.size
        for spatial, size, ofs, dim in self.maps:
            d = dims.get(dim, 0)
            if not spatial:
                states = [_INIT_TEMPORAL[d <= size, d < size]]
                if d > size:
                    steady = (d - size) // ofs
                    if steady > 0:
                        states.append(_State(STEADY, steady, False, False, False, False))
                    if steady * ofs + size < d and (steady + 1) * ofs < d:
                        states.append(_EDGE_TEMPORAL)
            else:
                coverage = size + ofs * (n - 1)
                init_unroll, init_edge = d <= coverage, d < coverage
                states = [_INIT_SPATIAL[init_unroll, init_edge]]
                steady = _cdiv(_cdiv(d - size, ofs) + 1, n) - 1
                fold = ofs * n
                has_edge = (not init_unroll and (steady + 1) * fold + coverage > d
                            and steady * fold + coverage != d)
                if coverage < d and steady > 0:
                    states.append(_State(STEADY, steady, False, False, False, False))
                if not init_edge and has_edge:
                    states.append(_EDGE_SPATIAL[_edge_units(d - (steady + 1) * fold, size, ofs)[1]])
            out.append(states)
        return out

    # -- the spatial directives' share of the per-unit volumes (MAESTRO's reuse analysis) ------
    # A unit's volume is the product of one factor per directive.  The temporal directives'
    # factors (the full or the edge tile of their dimension) are multiplied in by the case grid
    # (`_maestro_cases`); these rules give the product of the spatial directives' factors, which
    # also depend on the unit (``first``, ``ee``: the last, partial one of an edge fold).
    def _spatial_factor(self, dim: str, st: _State, first: bool, ee: bool, actual: str,
                        init_edge_reuse: bool) -> int:
        """Tile factor of a spatially mapped dimension for one unit: the first unit holds the
        whole tile, the others only what their neighbour does not (overlap), and at a spatial
        edge the last active unit holds the partial remainder."""
        n_edge = self.num_edge_clusters
        if st.pos == INIT and st.edge and ee:
            if n_edge == 1 or not init_edge_reuse:
                return self.mapped_edge.get(actual, 0)
            return self.unique_edge.get(actual, 0)
        if st.pos == EDGE:
            if n_edge == 1:
                # MAESTRO reads the input-coordinate tile here (mapped_edge[X] for X'), which
                # inflates the MACs of a one-unit spatial edge; we use the output tile.
                return self.mapped_edge.get(actual, 0) if (first or ee) else 1
            if ee:
                return self.unique_edge.get(actual, 0)
        if first:
            return self.mapped.get(actual, 0)
        return self.unique.get(actual, 0) or 1

    def egress_spatial(self, case: list[_State], psums: bool, first: bool = True, ee: bool = False,
                       reuse_at_edge: bool = True) -> int:
        """One unit's output words of a step, or (``psums``) its partial sums = MACs."""
        ret = 1
        if psums:
            for i in self.out_sp_others:
                dim = self.maps[i].dim
                ret *= self._spatial_factor(dim, case[i], first, ee, dim, False)
        for i, actual in self.out_sp_outs:
            ret *= self._spatial_factor(self.maps[i].dim, case[i], first, ee, actual, reuse_at_edge)
        return ret

    def fresh_mask(self, t: int, changing: int, inited: bool) -> int:
        """Which spatial directives indexing input ``t`` bring only their fresh part to the
        units after the first (bit ``i`` for directive ``i``) when ``changing`` advanced: those
        inside it, and itself unless an inner directive of the tensor restarts (``inited``).
        -1 for the first step of a (sub-)problem."""
        if changing < 0:
            return -1
        mask = 0
        for i in self.in_sp_coupled[t]:
            if i > changing or (i == changing and not inited):
                mask |= 1 << i
        return mask

    def ingress_spatial(self, t: int, case: list[_State], first: bool, ee: bool, fresh: int) -> int:
        """New words of input ``t`` one unit receives in a step: everything at the first step of
        a (sub-)problem (``fresh`` -1); afterwards the tile, cut to its fresh part along the
        directives of ``fresh`` (see `fresh_mask`), except at the first unit.  (The temporal
        directives' part is 0 for a tensor the advancing directive does not index.)"""
        ret = 1
        for i in self.in_sp_coupled[t]:
            m, st = self.maps[i], case[i]
            if fresh < 0:
                if not st.edge:
                    ret *= self.mapped[m.dim]
                elif self.num_edge_clusters == 1:
                    if first or ee:
                        ret *= self.mapped_edge[m.dim]
                else:
                    ret *= self.mapped_edge[m.dim] if ee else self.mapped[m.dim]
            elif first or not fresh >> i & 1:
                ret *= self.mapped_edge[m.dim] if ee else self.mapped[m.dim]
            else:
                ret *= self.unique_edge[m.dim] if ee else self.unique[m.dim]
        return ret

    @staticmethod
    def _spatial_state(spatial: list[int], case: list[_State]) -> tuple[_State | None, bool]:
        """The state of the last of a tensor's spatial directives, and whether any of them is
        at a spatial edge."""
        if not spatial:
            return None, False
        edge = False
        for i in spatial:
            edge |= case[i].edge
        return case[spatial[-1]], edge

    def unit_classes(self, spatial: list[int], case: list[_State]) -> tuple[tuple[int, bool, bool], ...]:
        """``(count, first, ee)`` of the units a per-unit volume of a tensor (whose spatial
        directives are ``spatial``) is summed over: the first unit, the others in a full fold,
        and at a spatial edge the active units (the last one possibly partial)."""
        sp, edge = self._spatial_state(spatial, case)
        if sp is None:
            return ((1, True, False),)
        if not edge:
            return ((1, True, False), (self.size - 1, False, False))
        n_edge, ee = self.num_edge_clusters, sp.sp_edge_edge
        if n_edge == 1:
            return ((1, True, ee),)
        n_ee = 1 if ee else 0
        return ((1, True, False), (max(n_edge - n_ee - 1, 0), False, False), (n_ee, False, True))

    def ingress(self, t: int, case: list[_State], fresh: int, units: int) -> tuple[int, int]:
        """Input ``t``'s spatial part of a step's words over the units (a word multicast to many
        counts once) and of the words landing in their L1s."""
        lead = self.ingress_spatial(t, case, True, False, fresh)        # the first unit's
        words = 0
        for n, first, ee in self.unit_classes(self.in_spatial[t], case):
            words += n * (lead if first and not ee else self.ingress_spatial(t, case, first, ee, fresh))
        return words, units * lead

    def egress(self, case: list[_State]) -> int:
        total = 0
        for n, first, ee in self.unit_classes(self.out_spatial, case):
            total += n * self.egress_spatial(case, False, first, ee)
        return total

    def psums(self, case: list[_State]) -> tuple[int, int]:
        """The partial sums of a step of the case on the critical unit, and on all units of the
        level (the unit of a full fold's count is shared)."""
        full = self.egress_spatial(case, True, True, False)
        sp, edge = self._spatial_state(self.out_spatial, case)
        n_edge = self.num_edge_clusters
        if sp is not None and edge and n_edge == 1 and sp.sp_edge_edge:
            critical = self.egress_spatial(case, True, True, True)
        else:
            critical = full
        spatial = [case[i] for i in self.spatial]
        sp, edge = spatial[-1], any(st.edge for st in spatial)
        if not edge:
            return critical, self.size * full
        ee = sp.sp_edge_edge
        total = self.egress_spatial(case, True, True, True) if n_edge == 1 and ee else full
        if n_edge > 1:
            n_ee = 1 if ee else 0
            total += max(n_edge - n_ee - 1, 0) * full
            total += n_ee * self.egress_spatial(case, True, False, True, reuse_at_edge=False)
        return critical, total

    def sub_dims(self, edges: int, ee: bool) -> dict[str, int]:
        """The sub-cluster problem of a case whose directives at a partial tile are the set bits
        of ``edges``; ``ee``: the one of the last, partial unit of an edge fold."""
        out: dict[str, int] = {}
        for i, m in enumerate(self.maps):
            full, edge = self.info[i].full, self.info[i].edge
            if not edges >> i & 1:
                size = full
            elif not m.spatial or self.num_edge_clusters == 1 or ee:
                size = edge
            else:
                size = full
            out[m.dim] = size
        for ref, sliding in self.overlaps.items():
            if ref in out:
                out[ref + "'"] = self.out_extent(ref, out[ref], out.get(sliding, 0))
        return out

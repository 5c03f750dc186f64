"""The ``maestro`` preset: MAESTRO's data-centric step model, re-derived in closed form.

The directive list is split into cluster levels.  At each level every directive has up to three
*states* — Init (first step), Steady (the repeated middle), Edge (the partial last tile or last
spatial fold) — and a *case* is one state per directive, occurring ``prod(state counts)`` times.
Per case we compute the ingress traffic (new input/weight words; a word multicast to many units
counts once; overlapping neighbour tiles count only their non-overlap), the egress traffic
(outputs; spatial reduction is free) and the compute delay (at the innermost level
``ceil(partial sums per PE / SIMD lanes)``, above it the runtime of the sub-cluster problem of
that case).  A case costs ``ingress + compute`` when every directive is in Init (nothing to
overlap with) and ``max(ingress, compute, egress)`` otherwise (double buffering); the runtime is
the occurrence-weighted sum over cases.  Nothing is simulated step by step: the number of cases is
at most ``3 ** directives`` per level and sub-cluster problems are memoised by their tile sizes.
`_maestro_cases` evaluates the cases: the temporal directives' factors as outer products over the
case grid, the spatial ones (the rules below, ``*_spatial``) once per distinct spatial state.

The model is split in two: :func:`maestro_structure` builds every (sub-)problem's case table —
it depends only on the layer, the filled-in dataflow, the PE count and the multicast / reduction
flags — and `_maestro_timing` turns case tables into cycles for one hardware or, vectorised, for
many (the design-space search).  :func:`analyze_maestro` is the two in sequence.

The bookkeeping deliberately follows MAESTRO's published semantics (its tile-size tables, edge
handling, and which PE is on the critical path) so that the preset reproduces MAESTRO's figures;
`docs/costmodel.md` lists where this project departs from MAESTRO on purpose.
"""

from __future__ import annotations

import math
from copy import copy
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

from ._errors import AccelgenError
from ._maestro_cases import EDGE, INIT, STEADY, CaseTable, LevelStats, RunEnv, _State, fill_timing, level_cases
from ._maestro_timing import CompiledLayer, Timing, case_delays
from .dataflow import Dataflow, SpatialMap
from .problem import Problem

__all__ = ["LevelStats", "MaestroAnalysis", "MaestroStructure", "analyze_maestro", "maestro_structure",
           "timed_analysis"]


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


class _Map(NamedTuple):
    spatial: bool
    size: int
    ofs: int
    dim: str


class _Directive(NamedTuple):
    """What the case grid needs of one directive of a level."""

    spatial: bool
    full: int                      # its tile of its dimension
    edge: int                      # ... at a partial tile
    out: tuple[int, int] | None    # (full, edge) output tile, when the output is indexed by it
    unique: int                    # the fresh part of a full tile (at least 1)
    code_unit: int                 # spatial: the case-code weight of its state index


class _Level:
    """One cluster level: its directives, its static tile sizes, and its unit count."""

    def __init__(self, index: int, maps: list[_Map], dims: dict[str, int], size: int,
                 problem: Problem, floor: _Level | None = None) -> None:
        self.index = index
        self.strides = problem.strides
        self.maps = maps
        self.dims = dims
        self.size = size
        self.overlaps = problem.overlaps
        self.l1_words: dict[str, int] | None = None          # one unit's tiles (see _first_step)
        if floor is not None:
            # An edge sub-problem of ``floor``'s level: the same directives, so the same views
            # of the tensors; only the tile tables (and the per-directive factors) differ.
            for name in self._STATIC:
                setattr(self, name, getattr(floor, name))
            self._mapping_sizes(floor)
            self._directive_info()
            return
        self.by_dim = {m.dim: i for i, m in enumerate(maps)}
        self.spatial = [i for i, m in enumerate(maps) if m.spatial]
        self.spatial_index = self.spatial[0]
        self.num_edge_clusters = self._edge_clusters()
        self._mapping_sizes(floor)
        self._tensor_views(problem.output.dims, [t.dims for t in problem.inputs])
        self._directive_info()

    # What depends only on the directives (shared by a level's edge sub-problems).
    _STATIC = ("by_dim", "spatial", "spatial_index", "num_edge_clusters", "out_of", "out_spatial",
               "out_sp_outs", "out_sp_others", "in_masks", "in_of", "in_spatial", "in_sp_coupled")

    def _tensor_views(self, out_dims: tuple[str, ...], inputs: list[tuple[str, ...]]) -> None:
        """Which directives index which tensor."""
        maps, by_dim = self.maps, self.by_dim
        self.out_of = out_of = {}                      # directive -> its output tile's name
        for d in out_dims:
            i = by_dim.get(d)
            if i is not None:
                out_of[i] = d + "'" if d in self.overlaps else d
        self.out_spatial = self._spatial_of(out_dims)
        self.out_sp_outs = [(i, a) for i, a in out_of.items() if maps[i].spatial]
        self.out_sp_others = [i for i in self.spatial if i not in out_of]
        self.in_masks = []
        self.in_of = [[] for _ in maps]                # directive -> the inputs it indexes
        for t, dims in enumerate(inputs):
            mask = 0
            for d in dims:
                i = by_dim.get(d)
                if i is not None:
                    mask |= 1 << i
                    self.in_of[i].append(t)
            self.in_masks.append(mask)
        self.in_spatial = [self._spatial_of(dims) for dims in inputs]
        self.in_sp_coupled = [sorted(spatial) for spatial in self.in_spatial]   # directive order

    def _directive_info(self) -> None:
        """What the case grid multiplies per directive (`_Directive`)."""
        out_of, mapped, edge = self.out_of, self.mapped, self.mapped_edge
        self.info = info = []
        unit = 1 << len(self.maps)
        for i, (spatial, _, _, dim) in enumerate(self.maps):
            actual = out_of.get(i)
            out = None if actual is None else (mapped.get(actual, 0), edge.get(actual, 0))
            info.append(_Directive(spatial, mapped[dim], edge[dim], out, self.unique[dim] or 1,
                                   unit if spatial else 0))
            if spatial:
                unit *= 3

    def _spatial_of(self, dims: tuple[str, ...]) -> list[int]:
        """The spatially mapped directives indexing a tensor, in the tensor's dimension order."""
        found = [i for i in self.spatial if self.maps[i].dim in dims]
        if len(found) > 1:
            found.sort(key=lambda i: dims.index(self.maps[i].dim))
        return found

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

    def _mapping_sizes(self, floor: _Level | None = None) -> None:
        self.mapped = mapped = {}
        self.unique = unique = {}
        self.mapped_edge = mapped_edge = {}
        self.unique_edge = unique_edge = {}
        dims = self.dims
        for spatial, size, ofs, dim in self.maps:
            d = dims.get(dim, 0)
            steady = (d - size) // ofs if d > size else 0
            # A partial last tile exists when the full tiles leave a tail uncovered; with
            # offset > size (strided windows) the gap rows between tiles are never needed.
            has_edge = (steady * ofs + size < d and (steady + 1) * ofs < d) or size > d
            mapped[dim] = size
            unique[dim] = 0 if not spatial and d <= size else size if size < ofs else ofs
            edge_size = d - (steady + 1) * ofs
            if edge_size < 0 or size >= d:
                # MAESTRO keeps ``d - ofs`` when a single tile over-covers the dimension,
                # losing elements; the one tile holds the whole dimension.
                edge_size = d
            mapped_edge[dim] = edge_size if has_edge else size
            fresh = ofs - (size - edge_size)
            unique_edge[dim] = fresh if fresh > 0 else 0
            if floor is not None and floor.mapped_edge[dim] > mapped_edge[dim]:
                mapped_edge[dim] = floor.mapped_edge[dim]
                unique_edge[dim] = floor.unique_edge[dim]
        for ref, sliding in self.overlaps.items():
            i = self.by_dim.get(ref)
            if i is None:
                continue
            m = self.maps[i]
            out = ref + "'"
            stride = self.strides.get(ref, 1)
            mapped[out] = self.out_extent(ref, mapped[ref], mapped.get(sliding, 0))
            unique[out] = min(m.ofs, m.size) // stride or 1
            mapped_edge[out] = self.out_extent(ref, mapped_edge[ref], mapped_edge.get(sliding, 0))
            unique_edge[out] = min(m.ofs // stride or 1, mapped_edge[out])

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
        words = 0
        for n, first, ee in self.unit_classes(self.in_spatial[t], case):
            words += n * self.ingress_spatial(t, case, first, ee, fresh)
        return words, units * self.ingress_spatial(t, case, True, False, fresh)

    def egress(self, case: list[_State]) -> int:
        total = 0
        for n, first, ee in self.unit_classes(self.out_spatial, case):
            total += n * self.egress_spatial(case, False, first, ee)
        return total

    def critical_psums(self, case: list[_State]) -> int:
        sp, edge = self._spatial_state(self.out_spatial, case)
        ee = sp is not None and edge and self.num_edge_clusters == 1 and sp.sp_edge_edge
        return self.egress_spatial(case, True, True, ee)

    def psum_mapping_size(self, case: list[_State]) -> int:
        """Partial sums produced by all units of the level in one step of the case."""
        spatial = [case[i] for i in self.spatial]
        sp, edge = spatial[-1], any(st.edge for st in spatial)
        if not edge:
            return self.size * self.egress_spatial(case, True, True, False)
        n_edge, ee = self.num_edge_clusters, sp.sp_edge_edge
        total = self.egress_spatial(case, True, True, n_edge == 1 and ee)
        if n_edge > 1:
            n_ee = 1 if ee else 0
            total += max(n_edge - n_ee - 1, 0) * self.egress_spatial(case, True, True, False)
            total += n_ee * self.egress_spatial(case, True, False, True, reuse_at_edge=False)
        return total

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


@dataclass
class MaestroAnalysis:
    top: LevelStats
    innermost: LevelStats
    levels: list[_Level]
    used_pes: int


@dataclass
class MaestroStructure:
    """Every (sub-)problem's case table, sub-problems first (a table's ``ident`` is its index);
    the top-level problem and the first innermost one are reported in full."""

    problems: list[CaseTable]
    top: CaseTable
    innermost: CaseTable
    levels: list[_Level]
    used_pes: int

    def compiled(self) -> CompiledLayer:
        return CompiledLayer(self.problems)


def build_levels(problem: Problem, dataflow: Dataflow, num_pes: int) -> tuple[list[_Level], int]:
    """Split the (resolved) directive list into cluster levels, completing each as MAESTRO does:
    output-row/column maps become input ones, a dimension an upper level mapped but this one
    does not keeps the upper tile, and a dimension mapped nowhere is fully unrolled."""
    sizes = [int(c) for c in dataflow.cluster_sizes()]
    prod = math.prod(sizes)
    if prod > num_pes:
        shape = " x ".join(f"Cluster({n})" for n in sizes)
        raise AccelgenError(f"{shape} needs {prod} PEs per array but the hardware has {num_pes}; "
                            "expected cluster sizes whose product is at most the PE count",
                            where=dataflow.name)
    units = prod * (num_pes // prod)
    input_vars = problem.input_vars()
    sliding_dims = set(problem.overlaps.values())
    dims = {k: v for k, v in problem.dims.items() if not k.endswith("'")}
    # The order in which unmentioned dimensions are appended (every level's dims are a subset).
    unrolled = input_vars + [d for d in sorted(dims) if d not in input_vars]
    levels: list[_Level] = []
    prev: list[_Map] | None = None
    for index, directives in enumerate(dataflow.levels()):
        maps = []
        for d in directives:
            size, dim = int(d.size), d.dim
            if dim in sliding_dims and dim in dims and size > dims[dim]:
                # a filter map larger than the filter holds the whole filter (Sz(R))
                maps.append(_Map(isinstance(d, SpatialMap), dims[dim], dims[dim], dim))
            else:
                maps.append(_Map(isinstance(d, SpatialMap), size, int(d.offset), dim))
        names = {m.dim for m in maps}
        for out, ref, sliding in (("Y'", "Y", "R"), ("X'", "X", "S")):
            if out in names and ref in names:
                raise AccelgenError(f"both {ref} and {out} are mapped; they are the same rows seen "
                                    f"from the input and the output side: expected one of them",
                                    where=f"{dataflow.name}: level {index}")
            if out in names and ref not in names:
                filt = next((m.size for m in maps if m.dim == sliding), dims.get(sliding, 1))
                maps = [_Map(m.spatial, m.size + filt - 1, m.ofs, ref) if m.dim == out else m for m in maps]
        names = {m.dim for m in maps}
        if prev is not None:
            for m in prev:
                if m.dim not in names:
                    maps.insert(0, _Map(False, m.size, m.ofs, m.dim))
                    names.add(m.dim)
        for var in unrolled:
            if var not in names and var in dims:
                maps.append(_Map(False, dims[var], dims[var], var))
                names.add(var)
        size = units // prod if index == 0 else sizes[index - 1]
        _check_tiling(problem, maps, dims, index, dataflow.name, size)
        maps = _apply_stride(problem, maps, dims, top=index == 0)
        levels.append(_Level(index, maps, dict(dims), size, problem))
        by_dim = {m.dim: m for m in maps}
        # The next level's problem is this level's tile, for every dimension mapped here (MAESTRO
        # keeps only the input tensors' dimensions, losing e.g. a depthwise layer's K).
        dims = {v: min(m.size, dims[v]) for v, m in by_dim.items() if v in dims}
        prev = maps
    return levels, units


def _check_tiling(problem: Problem, maps: list[_Map], dims: dict[str, int], level: int,
                  name: str, units: int) -> None:
    """Reject tilings whose MACs the step model cannot count exactly: overlapping tiles of a
    dimension that does not slide (every overlapped output computed twice), sliding windows that
    advance by other than the outputs they produce (outputs skipped or recomputed), filter rows
    split across time steps (windows cut in two), and two SpatialMaps other than row stationary's
    input-row/filter-row pair (units would get only the diagonal of the two dimensions)."""
    overlaps = problem.overlaps
    spatial = [m for m in maps if m.spatial]
    split = [m for m in maps if m.size < dims.get(m.dim, 0)]
    if len(spatial) != 2 and not split:
        return                                    # every tile holds its whole dimension
    by_dim = {m.dim: m for m in maps}
    sliding_dims = set(overlaps.values())
    if len(spatial) == 2:
        a, b = spatial
        pair = {a.dim: a, b.dim: b}
        ref = next((r for r, f in overlaps.items() if r in pair and f in pair), None)
        where = f"{name}: level {level}"
        if ref is None or (a.size, a.ofs) != (b.size, b.ofs):
            raise AccelgenError(
                f"two SpatialMaps ({a.dim}, {b.dim}) give each unit one element of their diagonal; "
                "expected them only as row stationary's pair SpatialMap(s,o) Y with SpatialMap(s,o) R "
                "(or X with S)", where=where)
        filt = overlaps[ref]
        positions = (dims.get(filt, 1) - a.size) // a.ofs + 1
        if dims.get(ref, 0) != dims.get(filt, 0) or positions > units:
            raise AccelgenError(
                f"row stationary's SpatialMap pair ({ref}, {filt}) needs one output row per cluster "
                f"({ref} tile {dims.get(ref, 0)} = {filt} {dims.get(filt, 0)}) and a unit per filter "
                f"row ({positions} needed, {units} available)", where=where)
    for m in split:
        d = dims.get(m.dim, 0)
        filt = overlaps.get(m.dim)
        if filt is None:
            if m.ofs != m.size:
                raise AccelgenError(
                    f"tiles of {m.dim} overlap (offset {m.ofs} < size {m.size}): only the input rows "
                    "and columns Y and X slide; expected offset = size", where=_where(name, level, m))
            if m.dim in sliding_dims:
                ref = next(r for r, f in overlaps.items() if f == m.dim)
                partner = by_dim.get(ref)
                paired = (m.spatial and partner is not None and partner.spatial
                          and (partner.size, partner.ofs) == (m.size, m.ofs))
                if not paired:
                    raise AccelgenError(
                        f"the filter's {m.dim} is split ({m.size} of {d}) without a matching "
                        f"SpatialMap({m.size},{m.ofs}) {ref} beside it; expected {m.dim} whole "
                        f"(Sz({m.dim})) or mapped spatially together with {ref}, as in row stationary",
                        where=_where(name, level, m))
            continue
        r = by_dim[filt].size if filt in by_dim else dims.get(filt, 1)
        r = min(r, dims.get(filt, r))
        if m.ofs != m.size - r + 1:
            raise AccelgenError(
                f"a {m.size}-row window under a {r}-row filter produces {m.size - r + 1} outputs but "
                f"advances {m.ofs}: outputs would be {'skipped' if m.ofs > m.size - r + 1 else 'recomputed'};"
                f" expected offset {m.size - r + 1}", where=_where(name, level, m))


def _where(name: str, level: int, m: _Map) -> str:
    return f"{name}: level {level} {'SpatialMap' if m.spatial else 'TemporalMap'}({m.size},{m.ofs}) {m.dim}"


def _apply_stride(problem: Problem, maps: list[_Map], dims: dict[str, int], top: bool) -> list[_Map]:
    """A strided layer's input tile: ``t`` output rows need ``(t-1)*stride + R`` input rows, and
    consecutive tiles start ``t*stride`` rows apart (MAESTRO's outer-stride rule)."""
    strided = [ref for ref in problem.overlaps if problem.strides.get(ref, 1) != 1]
    if not strided:
        return maps
    out = []
    for m in maps:
        if m.dim in strided:
            stride, filt = problem.strides[m.dim], problem.dims[problem.overlaps[m.dim]]
            if m.size >= filt:
                rows = (m.size + stride - filt) // stride
                size = rows * min(stride, filt) + max(filt - stride, 0)
                ofs = rows * stride if (top or filt >= stride) else rows * filt
                m = _Map(m.spatial, size, ofs, m.dim)
        out.append(m)
    return out


def analyze_maestro(problem: Problem, dataflow: Dataflow, *, num_pes: int, simd_lanes: int,
                    noc: list[tuple[float, int, int]], multicast: bool = True,
                    spatial_reduction: bool = True) -> MaestroAnalysis:
    """Run the step model.  ``noc[i]`` is ``(words/cycle, hop latency, hops)`` of level ``i``.

    Without ``multicast`` every unit's copy of a word crosses the NoC; without
    ``spatial_reduction`` every unit sends its own partial outputs (MAESTRO ignores both flags)."""
    structure = maestro_structure(problem, dataflow, num_pes=num_pes, multicast=multicast,
                                  spatial_reduction=spatial_reduction)
    return timed_analysis(structure, structure.compiled(), Timing.single(simd_lanes, noc))


def timed_analysis(structure: MaestroStructure, compiled: CompiledLayer, timing: Timing,
                   point: int = 0) -> MaestroAnalysis:
    """The full figures of the top-level and first innermost problems at one point of
    ``timing`` (runtimes from ``compiled``, the per-case delays by the same rules)."""
    runtimes = compiled.runtimes(timing)
    reported: dict[int, LevelStats] = {}
    for cases in (structure.top, structure.innermost):
        if cases.ident in reported:
            continue
        stats = copy(cases.stats)            # the structure's own stats stay untimed
        stats.runtime_cycles = int(runtimes[cases.ident][point])
        fill_timing(stats, cases, *case_delays(cases, timing, runtimes, point))
        reported[cases.ident] = stats
    return MaestroAnalysis(reported[structure.top.ident], reported[structure.innermost.ident],
                           structure.levels, structure.used_pes)


def maestro_structure(problem: Problem, dataflow: Dataflow, *, num_pes: int, multicast: bool = True,
                      spatial_reduction: bool = True) -> MaestroStructure:
    """The case tables of every (sub-)problem of the step model: everything but the cycles."""
    levels, units = build_levels(problem, dataflow, num_pes)
    out = problem.output
    env = RunEnv(out.name, out.dims, tuple((t.name, t.dims) for t in problem.inputs),
                 problem.overlaps, multicast, spatial_reduction)
    memo: dict[tuple, CaseTable] = {}
    problems: list[CaseTable] = []
    innermost: list[CaseTable] = []
    last = len(levels) - 1

    def run(li: int, dims: dict[str, int]) -> CaseTable:
        key = (li, tuple(sorted(dims.items())))
        hit = memo.get(key)
        if hit is not None:
            return hit
        level = levels[li]
        own = {d: dims.get(d, v) for d, v in level.dims.items()}
        if own != level.dims:
            # A sub-problem smaller than the level's full tile (an edge tile of the level above).
            # MAESTRO keeps the full tile's tables there.  Where those round an edge tile up we
            # keep them (its published runtimes carry that); where they would make an edge tile
            # smaller than it really is — the sub-cluster finishing before its MACs — we use
            # the edge tile's own size.
            level = _Level(level.index, level.maps, own, level.size, problem, floor=level)
        # Only the top level and the first innermost problem are reported in full; of the
        # others the level above reads just the runtime and the active units.
        brief = li != 0 and (li != last or bool(innermost))
        cases = level_cases(level, dims, env, None if li == last else partial(run, li + 1), brief)
        cases.ident = len(problems)
        problems.append(cases)
        memo[key] = cases
        if li == last and not innermost:
            innermost.append(cases)
        return cases

    top = run(0, dict(problem.dims))
    return MaestroStructure(problems, top, innermost[0] if innermost else top, levels, units)

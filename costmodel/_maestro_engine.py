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

The bookkeeping deliberately follows MAESTRO's published semantics (its tile-size tables, edge
handling, and which PE is on the critical path) so that the preset reproduces MAESTRO's figures;
`docs/costmodel.md` lists where this project departs from MAESTRO on purpose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import product

from ._errors import AccelgenError
from .dataflow import Dataflow, SpatialMap
from .problem import Problem

__all__ = ["LevelStats", "MaestroAnalysis", "analyze_maestro"]

INIT, STEADY, EDGE = 0, 1, 2


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


@dataclass(frozen=True)
class _Map:
    spatial: bool
    size: int
    ofs: int
    dim: str


@dataclass(frozen=True)
class _State:
    pos: int
    occ: int
    unrolled: bool
    init_edge: bool = False
    sp_edge_edge: bool = False

    @property
    def edge(self) -> bool:
        return self.pos == EDGE or self.init_edge


class _Level:
    """One cluster level: its directives, its static tile sizes, and its unit count."""

    def __init__(self, index: int, maps: list[_Map], dims: dict[str, int], size: int,
                 overlaps: dict[str, str], strides: dict[str, int] | None = None) -> None:
        self.index = index
        self.strides = strides or {}
        self.maps = maps
        self.dims = dims
        self.size = size
        self.overlaps = overlaps
        self.by_dim = {m.dim: i for i, m in enumerate(maps)}
        self.spatial_index = next(i for i, m in enumerate(maps) if m.spatial)
        self.num_edge_clusters = self._edge_clusters()
        self._mapping_sizes()

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

    def _mapping_sizes(self) -> None:
        self.mapped: dict[str, int] = {}
        self.unique: dict[str, int] = {}
        self.mapped_edge: dict[str, int] = {}
        self.unique_edge: dict[str, int] = {}
        for m in self.maps:
            d = self.dims.get(m.dim, 0)
            steady = max(_cdiv(d - m.size, m.ofs), 0)
            # A partial last tile exists when the full tiles leave a tail uncovered; with
            # offset > size (strided windows) the gap rows between tiles are never needed.
            has_edge = (steady * m.ofs + m.size < d and (steady + 1) * m.ofs < d) or m.size > d
            self.mapped[m.dim] = m.size
            self.unique[m.dim] = min(m.size, m.ofs)
            if not m.spatial and d <= m.size:
                self.unique[m.dim] = 0
            edge_size = d - (steady + 1) * m.ofs
            if edge_size < 0 or m.size >= d:
                # MAESTRO keeps ``d - ofs`` when a single tile over-covers the dimension,
                # losing elements; the one tile holds the whole dimension.
                edge_size = d
            self.mapped_edge[m.dim] = edge_size if has_edge else m.size
            self.unique_edge[m.dim] = max(m.ofs - (m.size - edge_size), 0)
        for m in self.maps:
            sliding = self.overlaps.get(m.dim)
            if sliding is None:
                continue
            out = m.dim + "'"
            stride = self.strides.get(m.dim, 1)
            self.mapped[out] = self.out_extent(m.dim, self.mapped[m.dim], self.mapped.get(sliding, 0))
            self.unique[out] = min(m.ofs, m.size) // stride or 1
            self.mapped_edge[out] = self.out_extent(m.dim, self.mapped_edge[m.dim], self.mapped_edge.get(sliding, 0))
            self.unique_edge[out] = min(m.ofs // stride or 1, self.mapped_edge[out])

    def out_extent(self, ref_dim: str, ref: int, filt: int) -> int:
        """Output rows of an input tile of ``ref`` rows under a filter of ``filt`` rows.  MAESTRO
        uses ``ref - filt + 1`` whatever the stride, which over-counts strided layers."""
        return (ref - filt) // self.strides.get(ref_dim, 1) + 1

    def states(self, dims: dict[str, int]) -> list[list[_State]]:
        """Init / Steady / Edge states of every directive for a (sub-)problem of ``dims``."""
        out = []
        for m in self.maps:
            d = dims.get(m.dim, 0)
            if not m.spatial:
                init_edge = d < m.size
                states = [_State(INIT, 1, d <= m.size, init_edge)]
                steady = _cdiv(d - m.size, m.ofs)
                if m.size < d and steady > 0:
                    states.append(_State(STEADY, steady, False))
                if not init_edge and steady * m.ofs + m.size < d and (steady + 1) * m.ofs < d:
                    states.append(_State(EDGE, 1, False))
            else:
                n = self.size
                coverage = m.size + m.ofs * (n - 1)
                init_unroll, init_edge = d <= coverage, d < coverage
                states = [_State(INIT, 1, init_unroll, init_edge, init_edge)]
                steady = _cdiv(_cdiv(d - m.size, m.ofs) + 1, n) - 1
                fold = m.ofs * n
                has_edge = (not init_unroll and (steady + 1) * fold + coverage > d
                            and steady * fold + coverage != d)
                if coverage < d and steady > 0:
                    states.append(_State(STEADY, steady, False))
                edge_edge = _edge_units(d - (steady + 1) * fold, m.size, m.ofs)[1]
                if not init_edge and has_edge:
                    states.append(_State(EDGE, 1, False, False, edge_edge))
            out.append(states)
        return out

    # -- per-PE volumes (MAESTRO's reuse analysis) ---------------------------------------------
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

    def egress_volume(self, out_dims: tuple[str, ...], case: list[_State], psums: bool,
                      first: bool = True, ee: bool = False, reuse_at_edge: bool = True) -> int:
        """Per-unit output words of a step, or (``psums``) its partial sums = MACs."""
        ret = 1
        if psums:
            for m, st in zip(self.maps, case):
                if m.dim in out_dims:
                    continue
                if not m.spatial:
                    ret *= self.mapped_edge.get(m.dim, 0) if st.edge else self.mapped.get(m.dim, 0)
                else:
                    ret *= self._spatial_factor(m.dim, st, first, ee, m.dim, False)
        for dim in out_dims:
            i = self.by_dim.get(dim)
            if i is None:
                continue
            m, st = self.maps[i], case[i]
            actual = dim + "'" if dim in self.overlaps else dim
            if not m.spatial:
                if st.pos == STEADY or (st.pos == INIT and not st.edge):
                    ret *= self.mapped.get(actual, 0)
                else:
                    ret *= self.mapped_edge.get(actual, 0)
            else:
                ret *= self._spatial_factor(dim, st, first, ee, actual, reuse_at_edge)
        return ret

    def mapped_volume(self, dims: tuple[str, ...], case: list[_State], first: bool, ee: bool) -> int:
        ret = 1
        for m, st in zip(self.maps, case):
            if m.dim not in dims:
                continue
            if not m.spatial:
                ret *= self.mapped_edge[m.dim] if st.edge else self.mapped[m.dim]
            elif st.edge:
                if self.num_edge_clusters == 1:
                    if first or ee:
                        ret *= self.mapped_edge[m.dim]
                else:
                    ret *= self.mapped_edge[m.dim] if ee else self.mapped[m.dim]
            else:
                ret *= self.mapped[m.dim]
        return ret

    def ingress_volume(self, dims: tuple[str, ...], case: list[_State], first: bool, ee: bool) -> int:
        changing = -1
        for i, st in enumerate(case):
            if st.pos != INIT:
                changing = i
        if changing == -1:
            return self.mapped_volume(dims, case, first, ee)
        inited = any(st.pos == INIT and m.dim in dims and i > changing and not st.unrolled
                     for i, (m, st) in enumerate(zip(self.maps, case)))
        ret, tensor_changes = 1, False
        for i, (m, st) in enumerate(zip(self.maps, case)):
            if m.dim not in dims:
                continue
            is_changing = i == changing
            tensor_changes |= is_changing
            if not m.spatial:
                if st.pos == INIT:
                    ret *= self.mapped_edge[m.dim] if st.edge else self.mapped[m.dim]
                elif is_changing and not inited:
                    ret *= max(self.unique[m.dim], 1)
                else:
                    ret *= self.mapped[m.dim]
            else:
                full = self.mapped_edge[m.dim] if ee else self.mapped[m.dim]
                fresh = self.unique_edge[m.dim] if ee else self.unique[m.dim]
                if first:
                    ret *= full
                elif st.pos == INIT:
                    ret *= full if i <= changing else fresh
                else:
                    ret *= fresh if (not inited and is_changing) else full
        return ret if tensor_changes else 0

    def _spatial_state(self, dims: tuple[str, ...], case: list[_State]) -> tuple[_State | None, bool]:
        """The state of the (last) spatially mapped dimension among ``dims``, and whether any of
        them is at a spatial edge."""
        sp, edge = None, False
        for d in dims:
            i = self.by_dim.get(d)
            if i is not None and self.maps[i].spatial:
                sp = case[i]
                edge |= sp.edge
        return sp, edge

    def _over_units(self, dims: tuple[str, ...], case: list[_State], volume) -> int:
        """Sum a per-unit volume over the units of the level: the first unit, the others in a full
        fold, and at a spatial edge the active units (the last one possibly partial)."""
        sp, edge = self._spatial_state(dims, case)
        if sp is None:
            return volume(True, False)
        if not edge:
            return volume(True, False) + (self.size - 1) * volume(False, False)
        n_edge, ee = self.num_edge_clusters, sp.sp_edge_edge
        total = volume(True, n_edge == 1 and ee)
        if n_edge > 1:
            n_ee = 1 if ee else 0
            total += max(n_edge - n_ee - 1, 0) * volume(False, False) + n_ee * volume(False, True)
        return total

    def ingress(self, dims: tuple[str, ...], case: list[_State]) -> int:
        return self._over_units(dims, case, lambda first, ee: self.ingress_volume(dims, case, first, ee))

    def egress(self, dims: tuple[str, ...], case: list[_State]) -> int:
        return self._over_units(
            dims, case, lambda first, ee: self.egress_volume(dims, case, False, first, ee))

    def critical_psums(self, dims: tuple[str, ...], case: list[_State]) -> int:
        sp, edge = self._spatial_state(dims, case)
        ee = sp is not None and edge and self.num_edge_clusters == 1 and sp.sp_edge_edge
        return self.egress_volume(dims, case, True, True, ee)

    def psum_mapping_size(self, dims: tuple[str, ...], case: list[_State]) -> int:
        """Partial sums produced by all units of the level in one step of the case."""
        spatial = [st for m, st in zip(self.maps, case) if m.spatial]
        sp, edge = spatial[-1], any(st.edge for st in spatial)
        if not edge:
            return self.size * self.egress_volume(dims, case, True, True, False)
        n_edge, ee = self.num_edge_clusters, sp.sp_edge_edge
        total = self.egress_volume(dims, case, True, True, n_edge == 1 and ee)
        if n_edge > 1:
            n_ee = 1 if ee else 0
            total += max(n_edge - n_ee - 1, 0) * self.egress_volume(dims, case, True, True, False)
            total += n_ee * self.egress_volume(dims, case, True, False, True, reuse_at_edge=False)
        return total

    def sub_dims(self, case: list[_State], ee: bool) -> dict[str, int]:
        out: dict[str, int] = {}
        for m, st in zip(self.maps, case):
            if not m.spatial:
                size = self.mapped_edge[m.dim] if st.edge else self.mapped[m.dim]
            elif st.pos == STEADY or not st.edge:
                size = self.mapped[m.dim]
            else:
                size = self.mapped_edge[m.dim] if (self.num_edge_clusters == 1 or ee) else self.mapped[m.dim]
            out[m.dim] = size
        for ref, sliding in self.overlaps.items():
            if ref in out:
                out[ref + "'"] = self.out_extent(ref, out[ref], out.get(sliding, 0))
        return out


@dataclass
class LevelStats:
    """Totals of one level's analysis (every count is over the whole layer)."""

    runtime_cycles: int = 0
    macs: int = 0
    l2_reads: dict[str, int] = field(default_factory=dict)     # upstream reads per tensor
    l2_writes: dict[str, int] = field(default_factory=dict)
    l1_reads: dict[str, int] = field(default_factory=dict)     # downstream reads per tensor
    l1_writes: dict[str, int] = field(default_factory=dict)
    l1_fills: dict[str, int] = field(default_factory=dict)     # words landing in L1s (multicast counted per PE)
    l2_size_words: dict[str, int] = field(default_factory=dict)
    l1_size_words: dict[str, int] = field(default_factory=dict)
    noc_peak_words_per_cycle: float = 0.0
    noc_avg_words_per_cycle: float = 0.0
    ingress_delay_avg: float = 0.0
    egress_delay_avg: float = 0.0
    compute_delay_min: int = 0
    compute_delay_max: int = 0
    compute_delay_avg: float = 0.0
    active_units_avg: float = 0.0
    ingress_bound_steps: int = 0
    compute_bound_steps: int = 0
    egress_bound_steps: int = 0
    steps: int = 0


@dataclass
class MaestroAnalysis:
    top: LevelStats
    innermost: LevelStats
    levels: list[_Level]
    used_pes: int


def _noc_delay(words: int, bw: float, latency: int, hops: int = 1) -> int:
    """MAESTRO's NoC: hops x latency head delay plus ceil(words / bw) - 1 pipelined sends."""
    if math.isinf(bw):
        sends = 1 if words > 0 else 0
    else:
        sends = -(-words // int(bw)) if float(bw).is_integer() else math.ceil(words / bw)
    return hops * latency + sends - 1


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
    dims = {k: v for k, v in problem.dims.items() if not k.endswith("'")}
    levels: list[_Level] = []
    prev: list[_Map] | None = None
    for index, directives in enumerate(dataflow.levels()):
        maps = [_Map(isinstance(d, SpatialMap), int(d.size), int(d.offset), d.dim) for d in directives]
        names = {m.dim for m in maps}
        for out, ref, sliding in (("Y'", "Y", "R"), ("X'", "X", "S")):
            if out in names and ref not in names:
                filt = next((m.size for m in maps if m.dim == sliding), dims.get(sliding, 1))
                maps = [_Map(m.spatial, m.size + filt - 1, m.ofs, ref) if m.dim == out else m for m in maps]
        names = {m.dim for m in maps}
        if prev is not None:
            for m in prev:
                if m.dim not in names:
                    maps.insert(0, _Map(False, m.size, m.ofs, m.dim))
                    names.add(m.dim)
        for var in input_vars:
            if var not in names and var in dims:
                maps.append(_Map(False, dims[var], dims[var], var))
                names.add(var)
        _check_tiling(problem, maps, dims, index, dataflow.name)
        maps = _apply_stride(problem, maps, dims, top=index == 0)
        size = units // prod if index == 0 else sizes[index - 1]
        levels.append(_Level(index, maps, dict(dims), size, problem.overlaps, problem.strides))
        by_dim = {m.dim: m for m in maps}
        dims = {v: min(by_dim[v].size, dims[v]) for v in input_vars if v in by_dim and v in dims}
        prev = maps
    return levels, units


def _check_tiling(problem: Problem, maps: list[_Map], dims: dict[str, int], level: int,
                  name: str) -> None:
    """Reject tilings whose MACs the step model cannot count exactly: overlapping tiles of a
    dimension that does not slide (every overlapped output computed twice), sliding windows that
    advance by other than the outputs they produce (outputs skipped or recomputed), and filter
    rows split across time steps (windows cut in two)."""
    by_dim = {m.dim: m for m in maps}
    sliding_dims = set(problem.overlaps.values())
    for m in maps:
        where = f"{name}: level {level} {'SpatialMap' if m.spatial else 'TemporalMap'}({m.size},{m.ofs}) {m.dim}"
        d = dims.get(m.dim, 0)
        filt = problem.overlaps.get(m.dim)
        if filt is None:
            if m.ofs != m.size and m.size < d:
                raise AccelgenError(
                    f"tiles of {m.dim} overlap (offset {m.ofs} < size {m.size}): only the input rows "
                    "and columns Y and X slide; expected offset = size", where=where)
            if m.dim in sliding_dims and m.size < d:
                ref = next(r for r, f in problem.overlaps.items() if f == m.dim)
                partner = by_dim.get(ref)
                paired = (m.spatial and partner is not None and partner.spatial
                          and (partner.size, partner.ofs) == (m.size, m.ofs))
                if not paired:
                    raise AccelgenError(
                        f"the filter's {m.dim} is split ({m.size} of {d}) without a matching "
                        f"SpatialMap({m.size},{m.ofs}) {ref} beside it; expected {m.dim} whole "
                        f"(Sz({m.dim})) or mapped spatially together with {ref}, as in row stationary",
                        where=where)
            continue
        r = by_dim[filt].size if filt in by_dim else dims.get(filt, 1)
        r = min(r, dims.get(filt, r))
        if m.size < d and m.ofs != m.size - r + 1:
            raise AccelgenError(
                f"a {m.size}-row window under a {r}-row filter produces {m.size - r + 1} outputs but "
                f"advances {m.ofs}: outputs would be {'skipped' if m.ofs > m.size - r + 1 else 'recomputed'};"
                f" expected offset {m.size - r + 1}", where=where)


def _apply_stride(problem: Problem, maps: list[_Map], dims: dict[str, int], top: bool) -> list[_Map]:
    """A strided layer's input tile: ``t`` output rows need ``(t-1)*stride + R`` input rows, and
    consecutive tiles start ``t*stride`` rows apart (MAESTRO's outer-stride rule)."""
    out = []
    for m in maps:
        sliding = problem.overlaps.get(m.dim)
        stride = problem.strides.get(m.dim, 1)
        if sliding is not None and stride != 1:
            filt = problem.dims[sliding]
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
    levels, units = build_levels(problem, dataflow, num_pes)
    out_dims = problem.output.dims
    memo: dict[tuple, LevelStats] = {}
    innermost: list[LevelStats] = []

    def run(li: int, dims: dict[str, int]) -> LevelStats:
        key = (li, tuple(sorted(dims.items())))
        hit = memo.get(key)
        if hit is not None:
            return hit
        level = levels[li]
        bw, latency, hops = noc[min(li, len(noc) - 1)]
        last = li == len(levels) - 1
        stats = LevelStats()
        steps = 0
        avg_acc = 0
        active_acc = 0.0
        cmin: int | None = None
        first_case = True
        out_name = problem.output.name
        for case_t in product(*level.states(dims)):
            case = list(case_t)
            occ = math.prod(st.occ for st in case)
            psums = level.critical_psums(out_dims, case)
            if psums <= 0:
                continue
            sp = case[level.spatial_index]
            units = level.num_edge_clusters if sp.edge else level.size
            egress = level.egress(out_dims, case)
            if not spatial_reduction:
                egress = max(egress, units * level.egress_volume(out_dims, case, False))
            psum_size = level.psum_mapping_size(out_dims, case)
            ingress_by = {}
            for t in problem.inputs:
                words = level.ingress(t.dims, case)
                fills = units * level.ingress_volume(t.dims, case, True, False)
                stats.l1_fills[t.name] = stats.l1_fills.get(t.name, 0) + occ * fills
                ingress_by[t.name] = words if multicast else max(words, fills)
            ingress = sum(ingress_by.values())
            if first_case:
                _first_step(stats, level, problem, dims, ingress_by, egress)
                first_case = False
            for t in problem.inputs:
                stats.l2_reads[t.name] = stats.l2_reads.get(t.name, 0) + occ * ingress_by[t.name]
                stats.l1_writes[t.name] = stats.l2_reads[t.name]
                stats.l1_reads[t.name] = stats.l1_reads.get(t.name, 0) + occ * psum_size
            stats.l2_writes[out_name] = stats.l2_writes.get(out_name, 0) + occ * egress
            stats.l1_writes[out_name] = stats.l1_writes.get(out_name, 0) + occ * psum_size
            stats.l1_reads[out_name] = stats.l1_reads.get(out_name, 0) + occ * psum_size
            if not last:
                if sp.edge and sp.sp_edge_edge:
                    subs = [(run(li + 1, level.sub_dims(case, True)), 1)]
                    if level.num_edge_clusters > 1:
                        subs.append((run(li + 1, level.sub_dims(case, False)), level.num_edge_clusters - 1))
                else:
                    subs = [(run(li + 1, level.sub_dims(case, False)), units)]
                compute = max(sub.runtime_cycles for sub, _ in subs)
                active = sum(sub.active_units_avg * n for sub, n in subs) or units
            else:
                compute = -(-psums // simd_lanes)
                active = units
            d_in = _noc_delay(ingress, bw, latency, hops)
            d_out = _noc_delay(egress, bw, latency, hops)
            if all(st.pos == INIT for st in case):
                delay = compute + d_in
            else:
                delay = max(d_out, compute, d_in)
            if delay > compute and delay == d_in:
                stats.ingress_bound_steps += occ
            elif delay > compute:
                stats.egress_bound_steps += occ
            else:
                stats.compute_bound_steps += occ
            stats.runtime_cycles += occ * delay
            stats.macs += occ * psum_size
            c = max(compute, 1)
            stats.noc_peak_words_per_cycle = max(stats.noc_peak_words_per_cycle, max(ingress, egress) // c)
            avg_acc += (occ * max(ingress, egress)) // c
            active_acc += occ * active
            stats.ingress_delay_avg += occ * d_in
            stats.egress_delay_avg += occ * d_out
            stats.compute_delay_avg += occ * c
            cmin = c if cmin is None else min(cmin, c)
            stats.compute_delay_max = max(stats.compute_delay_max, c)
            steps += occ
        if steps:
            stats.noc_avg_words_per_cycle = avg_acc / steps
            stats.active_units_avg = active_acc / steps
            stats.ingress_delay_avg /= steps
            stats.egress_delay_avg /= steps
            stats.compute_delay_avg /= steps
        stats.compute_delay_min = cmin or 0
        stats.steps = steps
        memo[key] = stats
        if last and not innermost:
            innermost.append(stats)
        return stats

    top_dims = dict(problem.dims)
    top = run(0, top_dims)
    return MaestroAnalysis(top, innermost[0] if innermost else top, levels, units)


def _first_step(stats: LevelStats, level: _Level, problem: Problem, dims: dict[str, int],
                ingress_by: dict[str, int], egress: int) -> None:
    """What the first (all-Init) step fixes: buffer needs, double-buffered — L2 (upstream) holds
    what a step brings in and sends out, L1 (downstream, per unit) one unit's tiles — and the
    whole-tensor L2 traffic (inputs written once from DRAM, outputs read once to DRAM).  Outputs
    are sized in output coordinates (MAESTRO sizes them in input coordinates)."""
    for t in problem.inputs:
        stats.l2_size_words[t.name] = 2 * ingress_by[t.name]
        stats.l1_size_words[t.name] = 2 * math.prod(level.mapped[d] for d in t.dims if d in level.mapped)
        stats.l2_writes[t.name] = math.prod(dims.get(d, 1) for d in t.dims)
    out = problem.output

    def out_size(table: dict[str, int], d: str) -> int:
        sliding = problem.overlaps.get(d)
        if sliding is None:
            return table.get(d, 1)
        return max(level.out_extent(d, table.get(d, 1), table.get(sliding, 1)), 1)

    stats.l2_size_words[out.name] = 2 * egress
    stats.l1_size_words[out.name] = 2 * math.prod(out_size(level.mapped, d) for d in out.dims)
    stats.l2_reads[out.name] = math.prod(out_size(dims, d) for d in out.dims)

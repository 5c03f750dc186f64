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
from dataclasses import dataclass
from functools import partial
from typing import Sequence

from ..base import AccelgenError
from ..dataflow.directives import Cluster, Dataflow, SpatialMap
from ..workload.problem import Problem
from .cases import CaseTable, LevelStats, RunEnv, fill_timing, level_cases
from .levels import Level, Map
from .timing import CompiledLayer, scalar_timing

__all__ = ["LevelStats", "MaestroAnalysis", "MaestroStructure", "analyze_maestro", "maestro_structure",
           "timed_analysis"]


@dataclass
class MaestroAnalysis:
    top: LevelStats
    innermost: LevelStats
    levels: list[Level]
    used_pes: int


@dataclass
class MaestroStructure:
    """Every (sub-)problem's case table, sub-problems first (a table's ``ident`` is its index);
    the top-level problem and the first innermost one are reported in full."""

    problems: list[CaseTable]
    top: CaseTable
    innermost: CaseTable
    levels: list[Level]
    used_pes: int

    def compiled(self) -> CompiledLayer:
        return CompiledLayer(self.problems)


def build_levels(problem: Problem, dataflow: Dataflow, num_pes: int) -> tuple[list[Level], int]:
    """Split the (resolved) directive list into cluster levels, completing each as MAESTRO does:
    output-row/column maps become input ones, a dimension an upper level mapped but this one
    does not keeps the upper tile, and a dimension mapped nowhere is fully unrolled."""
    per_level, sizes = _split(dataflow)
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
    strided = [ref for ref in problem.overlaps if problem.strides.get(ref, 1) != 1]
    levels: list[Level] = []
    prev: list[Map] | None = None
    for index, directives in enumerate(per_level):
        maps = []
        for spatial, size, ofs, dim in directives:
            if dim in sliding_dims and dim in dims and size > dims[dim]:
                # a filter map larger than the filter holds the whole filter (Sz(R))
                maps.append(Map(spatial, dims[dim], dims[dim], dim))
            else:
                maps.append(Map(spatial, size, ofs, dim))
        names = {m.dim for m in maps}
        if "Y'" in names or "X'" in names:
            maps = _output_maps(maps, names, dims, f"{dataflow.name}: level {index}")
            names = {m.dim for m in maps}
        if prev is not None:
            for m in prev:
                if m.dim not in names:
                    maps.insert(0, Map(False, m.size, m.ofs, m.dim) if m.spatial else m)
                    names.add(m.dim)
        for var in unrolled:
            if var not in names and var in dims:
                maps.append(Map(False, dims[var], dims[var], var))
                names.add(var)
        size = units // prod if index == 0 else sizes[index - 1]
        _check_tiling(problem, maps, dims, index, dataflow.name, size)
        if strided:
            maps = _apply_stride(problem, strided, maps, top=index == 0)
        levels.append(Level(index, maps, dict(dims), size, problem))
        # The next level's problem is this level's tile, for every dimension mapped here (MAESTRO
        # keeps only the input tensors' dimensions, losing e.g. a depthwise layer's K).
        dims = {m.dim: min(m.size, dims[m.dim]) for m in maps if m.dim in dims}
        prev = maps
    return levels, units


def _split(dataflow: Dataflow) -> tuple[list[list[Map]], list[int]]:
    """The (resolved) directives as maps, per cluster level, and the cluster sizes: one pass over
    the directives (what :meth:`Dataflow.levels` and :meth:`Dataflow.cluster_sizes` give)."""
    per_level: list[list[Map]] = [[]]
    sizes = []
    for d in dataflow.directives:
        if isinstance(d, Cluster):
            per_level.append([])
            sizes.append(int(d.size))
        else:
            per_level[-1].append(Map(isinstance(d, SpatialMap), int(d.size), int(d.offset), d.dim))
    return per_level, sizes


def _output_maps(maps: list[Map], names: set[str], dims: dict[str, int], where: str) -> list[Map]:
    """Output-row/column maps (``Y'``, ``X'``) as the input rows/columns they read."""
    for out, ref, sliding in (("Y'", "Y", "R"), ("X'", "X", "S")):
        if out in names and ref in names:
            raise AccelgenError(f"both {ref} and {out} are mapped; they are the same rows seen "
                                f"from the input and the output side: expected one of them", where=where)
        if out in names and ref not in names:
            filt = next((m.size for m in maps if m.dim == sliding), dims.get(sliding, 1))
            maps = [Map(m.spatial, m.size + filt - 1, m.ofs, ref) if m.dim == out else m for m in maps]
    return maps


def _check_tiling(problem: Problem, maps: list[Map], dims: dict[str, int], level: int,
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


def _where(name: str, level: int, m: Map) -> str:
    return f"{name}: level {level} {'SpatialMap' if m.spatial else 'TemporalMap'}({m.size},{m.ofs}) {m.dim}"


def _apply_stride(problem: Problem, strided: list[str], maps: list[Map], top: bool) -> list[Map]:
    """A strided layer's input tile: ``t`` output rows need ``(t-1)*stride + R`` input rows, and
    consecutive tiles start ``t*stride`` rows apart (MAESTRO's outer-stride rule).  ``strided``:
    the reference dimensions whose stride is not 1."""
    out = []
    for m in maps:
        if m.dim in strided:
            stride, filt = problem.strides[m.dim], problem.dims[problem.overlaps[m.dim]]
            if m.size >= filt:
                rows = (m.size + stride - filt) // stride
                size = rows * min(stride, filt) + max(filt - stride, 0)
                ofs = rows * stride if (top or filt >= stride) else rows * filt
                m = Map(m.spatial, size, ofs, m.dim)
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
    return timed_analysis(structure, simd_lanes, noc)


def timed_analysis(structure: MaestroStructure, simd_lanes: int,
                   noc: Sequence[tuple[float, int, int]]) -> MaestroAnalysis:
    """The full figures of the top-level and first innermost problems on one hardware
    (:func:`~.timing.scalar_timing`; ``noc`` as for :func:`analyze_maestro`)."""
    top, inner = structure.top, structure.innermost
    runtimes, delays = scalar_timing(structure.problems, simd_lanes, noc, (top.ident, inner.ident))
    reported: dict[int, LevelStats] = {}
    for cases in (top, inner):
        if cases.ident in reported:
            continue
        stats = cases.stats.copy()           # the structure's own stats stay untimed
        stats.runtime_cycles = runtimes[cases.ident]
        if cases.ident in delays:
            fill_timing(stats, cases, *delays[cases.ident])
        reported[cases.ident] = stats
    return MaestroAnalysis(reported[top.ident], reported[inner.ident], structure.levels, structure.used_pes)


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
            level = Level(level.index, level.maps, own, level.size, problem, floor=level)
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

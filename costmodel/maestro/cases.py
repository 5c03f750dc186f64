"""The case loop of one cluster level, arranged so that a case costs a few multiplications.

Every per-unit volume of the step model is a product over the level's directives of one factor
each.  A temporal directive's factor depends only on its own state, so over the whole case grid
these products are outer products, built here directive by directive (``_expand*``).  A spatial
directive's factor also depends on which unit is meant (the first, one of a full fold, the edge
units) and, for ingress, on where the directive that advanced sits; those few combinations are
evaluated by the level's ``*_spatial`` rules once per distinct spatial state and multiplied in.

The loop visits the cases in the order of ``itertools.product`` over the directives' states and
accumulates exactly what the plain per-case model does, in the same order, so every figure —
float averages included — is bit-identical to evaluating each case from scratch.

Nothing here depends on the hardware's numbers (SIMD lanes, NoC bandwidth and latency): a level's
cases become a :class:`CaseTable` — occurrences, NoC words, partial sums or the sub-problems whose
runtime is the compute delay — and `_maestro_timing` turns case tables into cycles, for one
hardware or for arrays of hardware points.  :func:`fill_timing` adds the cycle figures of a
problem reported in full once its delays are known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import reduce
from itertools import compress
from operator import add, attrgetter, mul
from typing import Any, Callable, NamedTuple

INIT, STEADY, EDGE = 0, 1, 2


class _State(NamedTuple):
    """One directive's state in a case: position, how many steps it lasts, and its flags."""

    pos: int
    occ: int
    unrolled: bool
    init_edge: bool
    sp_edge_edge: bool
    edge: bool                # at a partial tile: the Edge position, or an Init that over-covers


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

    def copy(self) -> LevelStats:
        """A shallow copy (what ``copy.copy`` makes, without its reduce protocol's cost)."""
        out = LevelStats.__new__(LevelStats)
        out.__dict__.update(self.__dict__)
        return out


class RunEnv(NamedTuple):
    """What every level's case loop needs besides the level: the problem's tensors and the
    hardware's structural rules (its numbers are `_maestro_timing`'s)."""

    out_name: str
    out_dims: tuple[str, ...]
    inputs: tuple[tuple[str, tuple[str, ...]], ...]      # (name, dims) of each input tensor
    overlaps: dict[str, str]                            # input dim -> the filter dim it slides over
    multicast: bool
    spatial_reduction: bool


@dataclass
class CaseTable:
    """The structure of one (sub-)problem: per case (in grid order, cases without partial sums
    dropped) its occurrences, the words crossing the NoC in and out, and what its compute delay is
    made of — the critical unit's partial sums at the innermost level (``ceil(psums / lanes)``),
    above it the sub-problems whose slowest runtime it is.  ``stats`` holds every figure that does
    not depend on the hardware's numbers (only ``active_units_avg`` when ``brief``)."""

    level: int
    occ: list[int]
    ingress: list[int]
    egress: list[int]
    first: bool                              # case 0 is the problem's very first (all-Init) step
    psums: list[int] | None                  # innermost level
    subs: list[tuple[int, ...]] | None       # above it: idents of the sub-problems per case
    stats: LevelStats
    brief: bool
    ident: int = -1                          # position in the analysis' problem list


# -- the case grid -----------------------------------------------------------------------------
# Cases are enumerated in ``itertools.product`` order over the directives' states (the first
# directive varies slowest).  Grids are built from the last directive to the first: adding a
# directive in front repeats the grid so far once per state of it.  A directive's first state is
# its Init, the others are not, and the all-Init case of a suffix of directives is the first entry
# of the suffix's grid, which is what makes the directive that advanced (the last one not in Init)
# easy to spot.
def _expand(factors: list[int], grid: list[int]) -> list[int]:
    return [f * x for f in factors for x in grid]


def _expand_ingress(grid: list[int], states: int, init: int, full: int, fresh: int) -> list[int]:
    """A tensor's temporal ingress: the product of the directives' factors — ``init`` in Init,
    ``full`` otherwise — except that the directive that advanced (not in Init, all after it in
    Init) contributes only ``fresh`` (0 for a directive that does not index the tensor)."""
    first = grid if init == 1 else [init * x for x in grid]
    rest = [fresh * grid[0]]
    rest += grid[1:] if full == 1 else [full * x for x in grid[1:]]
    return first + rest * (states - 1)


class _Vectors(NamedTuple):
    """Per case, in grid order: occurrences, the temporal products of the output tile (``a``)
    and of the other partial-sum dimensions (``b``), each input's temporal ingress, the directive
    that advanced, and a code of the edge pattern (low bits) and the spatial directives' states."""

    occ: list[int]
    a: list[int]
    b: list[int]
    ingress: list[list[int]]            # per input
    changing: list[int]
    code: list[int]


def _vectors(level: Any, states: list[list[_State]]) -> tuple[_Vectors, list[int]]:
    """The case grid's per-case products and codes, and per input the directives that restart
    its tile (`_constants`)."""
    masks = level.in_masks
    a0, b0, code0, in0, varying, restart = _constants(level, states)
    occ, a, b, code, changing = [1], [a0], [b0], [code0], [-1]
    ingress = [[c] for c in in0]
    for i in reversed(varying):
        sts, info = states[i], level.info[i]
        k = len(sts)
        occ = _expand([st.occ for st in sts], occ)
        edges = [st.edge for st in sts]
        bit = 1 << i
        if info.spatial:
            code = [c + (bit if e else 0) + j * info.code_unit for j, e in enumerate(edges) for c in code]
            a, b = a * k, b * k
            for t, mask in enumerate(masks):          # see levels.Level.ingress_spatial for the rest
                ingress[t] = _expand_ingress(ingress[t], k, 1, 1, mask >> i & 1)
        else:
            if any(edges):
                code = [c + t for t in [bit if e else 0 for e in edges] for c in code]
            else:
                code = code * k
            sizes = [info.edge if e else info.full for e in edges]
            if info.out is None:
                a, b = a * k, [s * x for s in sizes for x in b]
            else:
                a, b = [info.out[e] * x for e in edges for x in a], b * k
            for t, mask in enumerate(masks):
                if not mask >> i & 1:                 # a step of a directive it ignores: none
                    ingress[t] = _expand_ingress(ingress[t], k, 1, 1, 0)
                else:
                    # a temporal directive that advanced brings only its fresh rows, unless an
                    # inner directive of the tensor restarts: then the whole tile is new
                    fresh = info.full if restart[t] >> (i + 1) else info.unique
                    ingress[t] = _expand_ingress(ingress[t], k, sizes[0], info.full, fresh)
        changing = changing + ([i] + changing[1:]) * (k - 1)
    return _Vectors(occ, a, b, ingress, changing, code), restart


def _constants(level: Any, states: list[list[_State]]) -> tuple[int, int, int, list[int], list[int], list[int]]:
    """The factors of the directives with a single state (Init), which scale every case alike
    (``a``, ``b``, code, each input's ingress), the directives with more states, and per input
    the directives (bit ``i``) that index it and whose Init does not cover their dimension: when
    a directive before one of them advances, the tensor's tile restarts."""
    a0, b0, code0, partial = 1, 1, 0, 0
    in0 = [1] * len(level.in_masks)
    varying = []
    infos, in_of = level.info, level.in_of
    for i, sts in enumerate(states):
        init = sts[0]
        if not init.unrolled:
            partial |= 1 << i
        if len(sts) > 1:
            varying.append(i)
            continue
        info, edge = infos[i], init.edge
        if edge:
            code0 += 1 << i
        if info.spatial:
            continue
        size = info.edge if edge else info.full
        if info.out is None:
            b0 *= size
        else:
            a0 *= info.out[edge]
        if size != 1:
            for t in in_of[i]:
                in0[t] *= size
    return a0, b0, code0, in0, varying, [partial & mask for mask in level.in_masks]


# -- spatial coefficients ----------------------------------------------------------------------
class _SpatialConsts(NamedTuple):
    """What the spatial directives' states fix for a case (per-unit volumes summed over units)."""

    case: list[Any]           # the spatial states at their directive positions, None elsewhere
    units: int                # active units
    split: bool               # the last edge unit is partial: its sub-problem differs
    psums: int                # critical unit's partial sums
    egress: int
    egress_unreduced: int     # one unit's outputs times the units (no spatial reduction)
    psum_size: int            # partial sums of all units


_PSUMS, _EGRESS, _UNREDUCED, _PSUM_SIZE, _UNITS = (
    attrgetter(name) for name in ("psums", "egress", "egress_unreduced", "psum_size", "units"))


def _spatial_consts(level: Any, states: list[list[_State]], code: int, reduction: bool) -> _SpatialConsts:
    case: list[Any] = [None] * len(level.maps)
    for j, i in enumerate(level.spatial):
        case[i] = states[i][code // 3 ** j % 3]
    sp = case[level.spatial_index]
    units = level.num_edge_clusters if sp.edge else level.size
    unreduced = 0 if reduction else units * level.egress_spatial(case, False)
    critical, total = level.psums(case)
    return _SpatialConsts(case, units, sp.edge and sp.sp_edge_edge, critical, level.egress(case), unreduced, total)


# -- the loop, one list operation per quantity over all cases -----------------------------------
def level_cases(level: Any, dims: dict[str, int], env: RunEnv,
                sub_run: Callable[[dict[str, int]], CaseTable] | None, brief: bool = False) -> CaseTable:
    """The case table of one (sub-)problem of ``dims`` at ``level``; ``sub_run`` gives a
    sub-cluster problem's table (None at the innermost level).  ``brief``: only what a level
    above reads of a sub-cluster problem (its runtime, from the table, and its active units)."""
    states = level.states(dims)
    vec, restart = _vectors(level, states)
    shift = len(level.maps)
    spatial = [c >> shift for c in vec.code]
    table = {code: _spatial_consts(level, states, code, env.spatial_reduction) for code in dict.fromkeys(spatial)}
    ks = list(map(table.__getitem__, spatial))
    ab = list(map(mul, vec.a, vec.b))
    psums = list(map(mul, ab, map(_PSUMS, ks)))
    cols = [vec.occ, vec.a, ab, psums, ks, vec.code, spatial, vec.changing, *vec.ingress]
    if min(psums) <= 0:                  # a case without partial sums is no step at all
        keep = [p > 0 for p in psums]
        cols = [list(compress(col, keep)) for col in cols]
    occ, a, ab, psums, ks, code, spatial, changing, *q = cols
    stats = LevelStats()
    if not occ:
        return CaseTable(level.index, [], [], [], False, [] if sub_run is None else None,
                         None if sub_run is None else [], stats, brief)
    egress = list(map(mul, a, map(_EGRESS, ks)))
    if not env.spatial_reduction:
        egress = list(map(max, egress, map(mul, a, map(_UNREDUCED, ks))))
    words, fills = _ingress(level, table, spatial, changing, q, restart, env.multicast, not brief)
    ingress = [sum(w) for w in zip(*words)]
    if not brief:
        _first_step(env, stats, level, dims, [w[0] for w in words], egress[0])
    subs = None
    if sub_run is None:
        active: list[Any] = list(map(_UNITS, ks))
    else:
        subs, active = _sub_problems(level, sub_run, code, ks)
    steps = sum(occ)
    stats.active_units_avg = _active_avg(occ, active, steps)
    cases = CaseTable(level.index, occ, ingress, egress, changing[0] < 0,
                      psums if sub_run is None else None, subs, stats, brief)
    if brief:
        return cases
    stats.steps = steps
    stats.macs = sum(map(mul, occ, map(mul, ab, map(_PSUM_SIZE, ks))))
    _traffic(stats, env, [sum(map(mul, occ, f)) for f in fills],
             [sum(map(mul, occ, w)) for w in words], sum(map(mul, occ, egress)), stats.macs)
    return cases


def _ingress(level: Any, table: dict[int, _SpatialConsts], spatial: list[int], changing: list[int],
             q: list[list[int]], restart: list[int], multicast: bool,
             with_fills: bool = True) -> tuple[list[list[int]], list[list[int]]]:
    """Per input, per case: the words crossing the NoC and the words landing in L1s (those
    only ``with_fills`` or where they bound the words: without multicast)."""
    with_fills = with_fills or not multicast
    words, fills = [], []
    units = None
    for t, qt in enumerate(q):
        if not level.in_sp_coupled[t]:          # every unit gets the same tile: multicast
            w = qt
            if with_fills:
                if units is None:
                    units = list(map(_UNITS, map(table.__getitem__, spatial)))
                fills.append(list(map(mul, qt, units)))
        else:
            fresh = {c: level.fresh_mask(t, c, restart[t] >> (c + 1) != 0) for c in dict.fromkeys(changing)}
            keys = list(zip(spatial, map(fresh.__getitem__, changing)))
            per_word, per_fill = {}, {}
            for key in dict.fromkeys(keys):
                k = table[key[0]]
                per_word[key], per_fill[key] = level.ingress(t, k.case, key[1], k.units)
            w = list(map(mul, qt, map(per_word.__getitem__, keys)))
            if with_fills:
                fills.append(list(map(mul, qt, map(per_fill.__getitem__, keys))))
        words.append(w if multicast else list(map(max, w, fills[-1])))
    return words, fills


def _first_step(env: RunEnv, stats: LevelStats, level: Any, dims: dict[str, int],
                ingress_by: list[int], egress: int) -> None:
    """What the first (all-Init) step fixes: buffer needs, double-buffered — L2 (upstream) holds
    what a step brings in and sends out, L1 (downstream, per unit) one unit's tiles — and the
    whole-tensor L2 traffic (inputs written once from DRAM, outputs read once to DRAM).  Outputs
    are sized in output coordinates (MAESTRO sizes them in input coordinates)."""
    if level.l1_words is None:            # the same for every (sub-)problem of the level
        mapped = level.mapped
        level.l1_words = {name: math.prod([mapped[d] for d in tdims if d in mapped]) for name, tdims in env.inputs}
        level.l1_words[env.out_name] = _out_words(env, level, mapped)
    for (name, tdims), words in zip(env.inputs, ingress_by):
        stats.l2_size_words[name] = 2 * words
        stats.l1_size_words[name] = 2 * level.l1_words[name]
        stats.l2_writes[name] = math.prod([dims.get(d, 1) for d in tdims])
    out = env.out_name
    stats.l2_size_words[out] = 2 * egress
    stats.l1_size_words[out] = 2 * level.l1_words[out]
    stats.l2_reads[out] = _out_words(env, level, dims)


def _out_words(env: RunEnv, level: Any, table: dict[str, int]) -> int:
    """The output tile of a table of (input-coordinate) sizes, in output coordinates."""
    words = 1
    for d in env.out_dims:
        sliding = env.overlaps.get(d)
        if sliding is None:
            words *= table.get(d, 1)
        else:
            words *= max(level.out_extent(d, table.get(d, 1), table.get(sliding, 1)), 1)
    return words


def _sub_problems(level: Any, sub_run: Callable[[dict[str, int]], CaseTable], codes: list[int],
                  ks: list[_SpatialConsts]) -> tuple[list[tuple[int, ...]], list[Any]]:
    """Per case above the innermost level: the sub-cluster problems whose slowest runtime is the
    compute delay, and the active units summed over the sub-clusters.  Sub-problems are analysed
    in case order (the first innermost one analysed is the one reported)."""
    memo: dict[int, tuple[tuple[int, ...], Any]] = {}
    tables: dict[tuple[int, bool], CaseTable] = {}       # by edge pattern (codes share them)
    subs, active = [], []
    n_edge = level.num_edge_clusters
    mask = (1 << len(level.maps)) - 1

    def sub(e: int, ee: bool) -> CaseTable:
        table = tables.get((e, ee))
        if table is None:
            table = tables[e, ee] = sub_run(level.sub_dims(e, ee))
        return table

    for code, k in zip(codes, ks):
        hit = memo.get(code)
        if hit is None:
            e = code & mask
            if k.split:
                found = [(sub(e, True), 1)]
                if n_edge > 1:
                    found.append((sub(e, False), n_edge - 1))
            else:
                found = [(sub(e, False), k.units)]
            hit = memo[code] = (tuple(table.ident for table, _ in found),
                                sum(table.stats.active_units_avg * n for table, n in found))
        subs.append(hit[0])
        active.append(hit[1] or k.units)
    return subs, active


def fill_timing(stats: LevelStats, cases: CaseTable, compute: list[int], d_in: list[int],
                d_out: list[int]) -> None:
    """The cycle figures of a problem reported in full, from its per-case compute and NoC delays
    (:func:`~.timing.scalar_timing`): what the steps wait on, NoC bandwidth and the averages.
    Float sums are accumulated left to right from 0.0, as the per-case model adds them."""
    occ = cases.occ
    if not occ:
        return
    steps = stats.steps
    # A step waits on whichever engine takes longest (ties: compute, then ingress); in the
    # all-Init step, where ingress and compute add up, the larger of the two.
    ingress_bound = egress_bound = 0
    for o, c, i, e in zip(occ, compute, d_in, d_out):
        if i > c and i >= e:
            ingress_bound += o
        elif e > c and e > i:
            egress_bound += o
    stats.ingress_bound_steps = ingress_bound
    stats.egress_bound_steps = egress_bound
    stats.compute_bound_steps = steps - ingress_bound - egress_bound
    cc = [c if c > 1 else 1 for c in compute]
    traffic = list(map(max, cases.ingress, cases.egress))
    stats.noc_peak_words_per_cycle = max([0.0] + [t // c for t, c in zip(traffic, cc)])
    stats.noc_avg_words_per_cycle = sum([o * t // c for o, t, c in zip(occ, traffic, cc)]) / steps
    stats.ingress_delay_avg = reduce(add, map(mul, occ, d_in), 0.0) / steps
    stats.egress_delay_avg = reduce(add, map(mul, occ, d_out), 0.0) / steps
    stats.compute_delay_avg = reduce(add, map(mul, occ, cc), 0.0) / steps
    stats.compute_delay_min = min(cc)
    stats.compute_delay_max = max(cc)


def _active_avg(occ: list[int], active: list[Any], steps: int) -> float:
    """Occurrence-weighted average, a float sum accumulated left to right from 0.0."""
    return reduce(add, map(mul, occ, active), 0.0) / steps


def _traffic(stats: LevelStats, env: RunEnv, fills: list[int], reads: list[int], egress: int,
             macs: int) -> None:
    """The traffic totals, in the key order the per-case updates would have produced."""
    out = env.out_name
    names = [name for name, _ in env.inputs]
    stats.l1_fills.update(zip(names, fills))
    stats.l2_reads.update(zip(names, reads))
    stats.l2_writes[out] = egress
    for name, words in zip(names, reads):
        stats.l1_writes[name] = words
        stats.l1_reads[name] = macs
    stats.l1_writes[out] = macs
    stats.l1_reads[out] = macs

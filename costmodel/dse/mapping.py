"""A mapping search per layer: the tile sizes and loop order of a library dataflow, for one
fixed hardware, best by runtime, energy or EDP (like Timeloop's mapper, ZigZag's LOMA or GAMMA
over MAESTRO, ``docs/dse.md``).

A family's *mapping space* is the product of its template parameters' candidate values
(:func:`mapping_space`: tiles of the dimension each one tiles, powers of two and that
dimension's divisors up to it, and its whole extent; cluster sizes a power of two up to the
array) and the orders of the outer level's loops that can take more than one step.  A space no
larger than the budget is enumerated; from a larger one mappings are drawn without replacement,
in an order the seed fixes (so a search is reproducible), until ``budget`` of them are accepted.
Each mapping is analysed by the preset (``hwgen``: the generated design's own timing in closed
form; ``maestro``); one the preset or the hardware refuses (most often: its PE tiles need more
L1 than the PE has) is counted and skipped, and does not use the budget, as in Timeloop's mapper,
whose budget counts valid mappings: a small L1 refuses most of a space (nine in ten of
``kcp``'s on ``small``).  At most :data:`MAX_DRAWS_PER_BUDGET` times the budget are drawn.  The
best are ranked feasible first, then by the objective, then by their place in the space.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..analysis import analyze_layer
from ..base import AccelgenError
from ..dataflow.directives import Cluster, TemporalMap
from ..dataflow.library import LIBRARY, canonical_name, dataflow_label, is_library_name, library_dataflow
from ..hardware.hardware import Hardware
from ..hwgen_preset.preset import TilesExceedL1
from ..results import LayerResult
from ..workload.layers import GEMM, Layer, analysed_layer
from ..workload.problem import problems_of

__all__ = ["MAPPING_OBJECTIVES", "MappingSpace", "Mapping", "MappingSearch", "mapping_space", "rank_key",
           "search_mappings", "tile_candidates", "family_kind", "draw_order", "MAX_DRAWS_PER_BUDGET"]

#: Mappings a search draws at most, per mapping of its budget (refused ones included).
MAX_DRAWS_PER_BUDGET = 20

#: Objectives of a mapping search -> the figure minimised.
MAPPING_OBJECTIVES: dict[str, Callable[[LayerResult], float]] = {
    "runtime": lambda r: float(r.runtime_cycles),
    "energy": lambda r: r.energy_pj["total"],
    "edp": lambda r: r.energy_pj["total"] * r.runtime_cycles,
}

#: Which layer dimension each template parameter tiles (``cluster``: the array's PEs).
_PARAM_DIM = {"k_tile": "K", "c_tile": "C", "x_tile": "X'", "m_tile": "M", "n_tile": "N"}


def tile_candidates(extent: int) -> list[int]:
    """Tiles worth trying along a dimension of ``extent``: powers of two and the divisors of
    ``extent`` below it (tiles that divide it leave no edge), and ``extent`` itself."""
    out = {extent}
    p = 1
    while p < extent:
        out.add(p)
        p *= 2
    out.update(d for d in range(1, extent) if extent % d == 0)
    return sorted(out)


@dataclass(frozen=True)
class MappingSpace:
    family: str
    params: tuple[tuple[str, tuple[Any, ...]], ...]   # (name, candidate values) in a fixed order
    orders: tuple[str, ...]                           # the outer level's loop orders ("" = the template's)

    @property
    def size(self) -> int:
        return math.prod(len(v) for _, v in self.params) * len(self.orders)

    def at(self, index: int) -> dict[str, Any]:
        """The template parameters of mapping ``index`` (mixed radix, the order innermost)."""
        out: dict[str, Any] = {}
        index, o = divmod(index, len(self.orders))
        for name, values in reversed(self.params):
            index, i = divmod(index, len(values))
            out[name] = values[i]
        out = dict(reversed(list(out.items())))
        if self.orders[o]:
            out["order"] = self.orders[o]
        return out


def _dim_sizes(layer: Layer) -> dict[str, int]:
    """The extents the template parameters tile: the analysed problem's (a convolution's in
    output rows and columns; a dilated one's first phase, the largest)."""
    dims = problems_of(analysed_layer(layer))[0].dims
    return {d: dims[d] for d in ("M", "N", "K", "C", "Y'", "X'") if d in dims}


def family_kind(family: str) -> str:
    """The layer kind (``conv2d``, ``gemm``) of library dataflow ``family``; one line if unknown."""
    if not is_library_name(family):
        raise AccelgenError(f"unknown dataflow {family!r}; expected one of {', '.join(LIBRARY)}", where="--dataflow")
    return LIBRARY[canonical_name(family)].layer_kind


def mapping_space(layer: Layer, family: str, num_pes: int) -> MappingSpace:
    """The mappings of library dataflow ``family`` for ``layer`` on ``num_pes`` PEs."""
    family_kind(family)
    family = canonical_name(family)
    template = LIBRARY[family]
    kind = "gemm" if isinstance(analysed_layer(layer), GEMM) else "conv2d"
    if template.layer_kind != kind:
        raise AccelgenError(f"{family} is for {template.layer_kind} layers, not the {kind} layer {layer.name!r}",
                            where="--dataflow")
    sizes = _dim_sizes(layer)
    pes = [p for p in tile_candidates(num_pes) if p & (p - 1) == 0]
    params = []
    for name in template.defaults:
        if name == "cluster" or (family == "nmk" and name == "k_tile"):   # (nmk's k_tile is its cluster)
            values = pes if name == "cluster" else [p for p in pes if p <= max(sizes["K"], 1)] or [1]
        else:
            values = tile_candidates(sizes[_PARAM_DIM[name]])
        params.append((name, tuple(values)))
    # (the outer level's TemporalMaps whose dimension can take more than one step: the order of
    # the others, whole filters and the like, changes nothing)
    df = library_dataflow(family, layer, num_pes)
    outer = []
    for d in df.directives:
        if isinstance(d, Cluster):
            break
        if isinstance(d, TemporalMap) and d.dim.rstrip("'") + ("'" if d.dim[0] in "YX" else "") in sizes \
                and d.dim not in outer:
            outer.append(d.dim)
    orders = tuple("".join(p) for p in itertools.permutations(outer)) if len(outer) > 1 else ("",)
    return MappingSpace(family, tuple(params), orders)


@dataclass(frozen=True)
class Mapping:
    """One evaluated mapping."""

    index: int
    family: str
    params: dict[str, Any]
    result: LayerResult
    score: float

    @property
    def label(self) -> str:
        """``kcp(cluster=8,k_tile=2,...)``: what ``--dataflow`` takes to run this mapping."""
        return dataflow_label(self.family, self.params)


@dataclass
class MappingSearch:
    """What a search of one layer found: the best mappings, and how many it drew (``evaluated``),
    how many of them the preset refused, and the size of the space."""

    layer: Layer
    family: str
    objective: str
    space_size: int
    evaluated: int = 0
    refused: int = 0
    best: list[Mapping] = field(default_factory=list)
    interrupted: bool = False
    first_refusal: str = ""         # why the first refused mapping was refused

    @property
    def accepted(self) -> int:
        """Mappings the preset analysed (the budget counts these)."""
        return self.evaluated - self.refused


def draw_order(size: int, budget: int, seed: int) -> Iterator[int]:
    """The indices a search tries, in order: every one (in index order) if the space holds no
    more than ``budget``, else all of them in the seed's random order (a shuffle; for spaces of
    over a million, seeded draws that skip the ones already drawn)."""
    if size <= budget:
        yield from range(size)
        return
    rng = random.Random(seed)
    if size <= 1 << 20:
        order = list(range(size))
        rng.shuffle(order)
        yield from order
        return
    seen: set[int] = set()
    while len(seen) < size:
        i = rng.randrange(size)
        if i not in seen:
            seen.add(i)
            yield i


def rank_key(m: Mapping) -> tuple:
    return (not m.result.feasible, m.score, m.index)


def search_mappings(layer: Layer, family: str, hw: Hardware, *, preset: str = "hwgen", objective: str = "runtime",
                    budget: int = 1000, seed: int = 0, keep: int = 10,
                    on_progress: Callable[[MappingSearch], None] | None = None) -> MappingSearch:
    """Search ``family``'s mappings of ``layer`` on ``hw``: every one if the space holds no more
    than ``budget``, else distinct ones drawn in ``seed``'s order (:func:`draw_order`) until the
    preset has accepted ``budget`` of them (or :data:`MAX_DRAWS_PER_BUDGET` times that many are
    drawn, or the space runs out); the ``keep`` best, ranked feasible first, then by
    ``objective``, then by index.  Ctrl-C stops it with what it found (``interrupted``)."""
    if objective not in MAPPING_OBJECTIVES:
        raise AccelgenError(f"unknown objective {objective!r}; expected one of {', '.join(MAPPING_OBJECTIVES)}",
                            where="--objective")
    if budget < 1:
        raise AccelgenError(f"expected a positive number of mappings, not {budget!r}", where="--budget")
    space = mapping_space(layer, family, hw.num_pes)
    out = MappingSearch(layer, space.family, objective, space.size)
    score_of = MAPPING_OBJECTIVES[objective]
    draws = min(space.size, MAX_DRAWS_PER_BUDGET * budget)
    # (tiles too large for L1 are refused in every loop order: once per tiles, not per mapping)
    too_large: dict[tuple, str] = {}
    try:
        for n, index in enumerate(draw_order(space.size, budget, seed)):
            if n == draws or out.accepted == budget:
                break
            params = space.at(index)
            tiles = tuple((k, v) for k, v in params.items() if k != "order")
            refusal = too_large.get(tiles)
            if refusal is None:
                try:
                    df = library_dataflow(space.family, layer, hw.num_pes, **params)
                    result = analyze_layer(layer, df, hw, preset)
                except AccelgenError as exc:
                    refusal = str(exc)
                    if isinstance(exc, TilesExceedL1):
                        too_large[tiles] = refusal
            if refusal is not None:
                out.refused += 1
                out.first_refusal = out.first_refusal or refusal
            else:
                out.best.append(Mapping(index, space.family, params, result, score_of(result)))
                if len(out.best) > 4 * keep:
                    out.best = sorted(out.best, key=rank_key)[:keep]
            out.evaluated += 1
            if on_progress is not None and n % 64 == 63:
                on_progress(out)
    except KeyboardInterrupt:
        out.interrupted = True
    if on_progress is not None:
        on_progress(out)
    out.best = sorted(out.best, key=rank_key)[:keep]
    return out

"""The schedule of the generated accelerator: one object that the ``hwgen`` timing preset, the RTL
generator (:mod:`hwgen`) and the host driver (``sim_tests``) all read, so the three cannot drift.

A dataflow becomes a *structure* (generation time: cluster levels, which dimension each level
spreads across its units, the loop order) and, for each layer, *tiles* (run time: the tile of
every dimension at every level, in output coordinates, written into configuration registers).
The steps of the loop nest, what each PE holds in each step and what each engine costs are
defined here once; ``docs/timing.md`` is the prose of the same rules.

Dimensions are those of a convolution in output coordinates: ``K C Y X R S`` with ``Y``/``X``
the output rows/columns.  A GEMM ``out[M,N] = A[M,K] @ B[K,N]`` is the 1x1 convolution with
``K <- N``, ``C <- K``, ``Y <- M``, ``X = 1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

from ._errors import AccelgenError
from .dataflow import Dataflow, SpatialMap, Sz
from .problem import problem_of
from .workload import GEMM, Conv2D, Layer

__all__ = ["HW_DIMS", "LOOP_DIMS", "TENSOR_DIMS", "TimingConstants", "TIMING", "HwStructure",
           "LayerTiles", "Step", "structure_of", "tiles_of", "steps", "step_costs", "hwgen_cycles",
           "structure_key", "schedule_summary", "reference_summary"]

HW_DIMS = ("K", "C", "Y", "X", "R", "S")
LOOP_DIMS = ("K", "C", "Y", "X")          # R and S are always whole inside a PE's tile
OUTPUT_DIMS = ("K", "Y", "X")
TENSOR_DIMS = {"input": ("C", "Y", "X"), "weight": ("K", "C", "R", "S"), "output": ("K", "Y", "X")}
_CONV_MAP = {"K": "K", "C": "C", "Y": "Y", "Y'": "Y", "X": "X", "X'": "X", "R": "R", "S": "S"}
_GEMM_MAP = {"N": "K", "K": "C", "M": "Y"}


@dataclass(frozen=True)
class TimingConstants:
    """Every fixed cycle count of the generated hardware (``docs/timing.md``)."""

    slot_overhead_cycles: int = 1   # the controller's cycle that starts a slot's engines
    load_latency_cycles: int = 1    # L2 read -> NoC -> L1 capture pipeline, after the last issue
    compute_latency_cycles: int = 0  # the MAC is one cycle: read L1, multiply, accumulate
    drain_latency_cycles: int = 1   # reduction tree -> L2 read-modify-write, after the last issue
    finish_cycles: int = 1          # the controller's cycle that sees the last slot end
    drain_words_per_cycle: int = 1  # the output collection bus


TIMING = TimingConstants()


@dataclass(frozen=True)
class HwStructure:
    """Generation-time shape of the array and its loop nest."""

    num_pes: int
    n0: int                                  # units of level 0 (clusters, or PEs if one level)
    n1: int                                  # PEs per cluster (1 with a single level)
    spatial: tuple[str, str | None]          # dimension spread across the units of each level
    loops: tuple[tuple[int, str], ...]       # (level, dim), outermost first
    noc_words_per_cycle: int                 # W: distribution bus width (words per cycle)
    pe_tile_max: dict[str, int]              # largest PE tile per dim (K C Y X R S) and stride
    max_stride: int
    simd_lanes: int = 1                      # MAC lanes per PE, over consecutive filter positions

    @property
    def used_pes(self) -> int:
        return self.n0 * self.n1

    def mapped(self, level: int) -> set[str]:
        return {d for lv, d in self.loops if lv == level}

    @property
    def reduction_spatial(self) -> tuple[bool, bool]:
        """Whether each level's units share outputs (their spatial dim is a reduction dim)."""
        return tuple(d is not None and d not in OUTPUT_DIMS for d in self.spatial)  # type: ignore[return-value]

    def l1_words(self) -> dict[str, int]:
        """Words of one PE's L1 per tensor for one tile (each is double-buffered)."""
        t = self.pe_tile_max
        st = self.max_stride
        rows = (t["Y"] - 1) * st + t["R"]
        cols = (t["X"] - 1) * st + t["S"]
        return {"input": t["C"] * rows * cols, "weight": t["K"] * t["C"] * t["R"] * t["S"],
                "output": t["K"] * t["Y"] * t["X"]}

    def as_dict(self) -> dict:
        return {"num_pes": self.num_pes, "clusters": self.n0, "pes_per_cluster": self.n1,
                "spatial": list(self.spatial), "loops": [f"L{lv}:{d}" for lv, d in self.loops],
                "noc_words_per_cycle": self.noc_words_per_cycle, "pe_tile_max": dict(self.pe_tile_max),
                "max_stride": self.max_stride, "simd_lanes": self.simd_lanes, "l1_words": self.l1_words()}


def structure_key(s: HwStructure) -> tuple:
    return (s.num_pes, s.n0, s.n1, s.spatial, s.loops, s.noc_words_per_cycle,
            tuple(sorted(s.pe_tile_max.items())), s.max_stride, s.simd_lanes)


def _refuse(msg: str, where: str) -> AccelgenError:
    return AccelgenError(f"hwgen cannot generate this dataflow: {msg}", where=where)


def _dim_map(layer: Layer) -> dict[str, str]:
    return _GEMM_MAP if isinstance(layer, GEMM) else _CONV_MAP


def _check_layer(layer: Layer) -> None:
    if isinstance(layer, Conv2D) and layer.depthwise:
        raise AccelgenError("hwgen generates dense convolutions and GEMMs; depthwise layers are not "
                            "generated yet (analyse them with --preset maestro)", where=f"layer {layer.name!r}")


def structure_of(dataflow: Dataflow, layer: Layer, num_pes: int, *, noc_words_per_cycle: int = 1,
                 max_filter: int = 3, max_stride: int = 2, simd_lanes: int = 1) -> HwStructure:
    """The generation-time structure of ``dataflow`` (as rendered for ``layer``) on ``num_pes``."""
    _check_layer(layer)
    where = dataflow.name
    levels = dataflow.levels()
    if len(levels) > 2:
        raise _refuse(f"{len(levels)} cluster levels; expected one or two", where)
    dmap = _dim_map(layer)
    loops: list[tuple[int, str]] = []
    spatial: list[str | None] = [None, None]
    tiles: dict[str, object] = {}
    for lv, maps in enumerate(levels):
        spat = [m for m in maps if isinstance(m, SpatialMap)]
        if len(spat) != 1:
            raise _refuse(f"level {lv} has {len(spat)} SpatialMaps; expected exactly one", where)
        for m in maps:
            if m.dim not in dmap:
                raise _refuse(f"dimension {m.dim} (batch / groups) is not generated; the host runs "
                              "batches one after another", where)
            d = dmap[m.dim]
            if d in ("R", "S"):
                if isinstance(m, SpatialMap):
                    raise _refuse(f"SpatialMap on {m.dim} splits filter windows across PEs "
                                  "(row stationary); expected whole filters in every PE", where)
                continue
            if isinstance(m, SpatialMap):
                spatial[lv] = d
            loops.append((lv, d))
            tiles[d] = m                      # the innermost level's map decides the PE tile
    sizes = dataflow.cluster_sizes()
    if sizes and not isinstance(sizes[0], int):
        raise _refuse(f"cluster size {sizes[0]} must be a number at generation time", where)
    n1 = int(sizes[0]) if sizes else 1
    if n1 > num_pes:
        raise _refuse(f"Cluster({n1}) needs more than the {num_pes} PEs", where)
    n0 = num_pes // n1 if sizes else num_pes
    for lv, d in enumerate(spatial):
        if d is not None and lv == 1 and (0, d) in loops and spatial[0] == d:
            raise _refuse(f"{d} is spread across both levels; expected each dimension spatial at one "
                          "level", where)
    if spatial[0] is not None and (1, spatial[0]) in loops:
        # the inner level may only restate the cluster's tile (checked per layer): no loop
        loops.remove((1, spatial[0]))
    if isinstance(layer, GEMM):                 # a 1x1 convolution with one output column
        max_filter, max_stride = 1, 1
        tiles.setdefault("X", None)
    tile_max: dict[str, int] = {"R": max_filter, "S": max_filter}
    for d in LOOP_DIMS:
        m = tiles.get(d, 0)
        if m is None:
            tile_max[d] = 1
            continue
        if m == 0:
            tile_max[d] = -1                  # whole dimension: unbounded at generation time
            continue
        tile_max[d] = _max_tile(m, d, layer, max_filter, max_stride)
        if tile_max[d] < 0:
            raise _refuse(f"the PE tile of {m} grows with the layer; expected a fixed tile size "
                          "at the innermost level", where)
    unbounded = [d for d in LOOP_DIMS if tile_max[d] < 0]
    if unbounded:
        raise _refuse(f"dimension {unbounded[0]} is never mapped, so each PE would hold all of it; "
                      "expected a map of every dimension", where)
    return HwStructure(num_pes, n0, n1, (spatial[0], spatial[1]), tuple(loops),
                       noc_words_per_cycle, tile_max, max_stride, simd_lanes)


def _max_tile(m, d: str, layer: Layer, max_filter: int, max_stride: int) -> int:
    """Largest output-coordinate tile the map ``m`` can give a PE over layers with filters up to
    ``max_filter`` and strides up to ``max_stride`` (-1: depends on the layer's size)."""
    size = m.size
    if isinstance(layer, Conv2D) and m.dim in ("Y", "X"):
        filt = "R" if m.dim == "Y" else "S"
        if isinstance(size, Sz):
            return 1 if size.dim == filt else -1
        return max((size + st - f) // st for f in range(1, min(max_filter, size) + 1)
                   for st in range(1, max_stride + 1))
    return size if isinstance(size, int) else -1


@dataclass(frozen=True)
class LayerTiles:
    """Run-time configuration of one layer: sizes, stride and the tile of each dim per level."""

    dims: dict[str, int]            # K C Y X (outputs) R S
    stride: int                     # effective stride of the (row-compacted) input
    in_rows: int                    # input rows / columns as laid out in L2
    in_cols: int
    t0: dict[str, int]              # level-0 tile per loop dim (whole dim if unmapped)
    t1: dict[str, int]              # level-1 (PE) tile per loop dim
    repeat: int                     # groups / batch: the host runs the layer this many times

    def as_dict(self) -> dict:
        return {"dims": dict(self.dims), "stride": self.stride, "in_rows": self.in_rows,
                "in_cols": self.in_cols, "t0": dict(self.t0), "t1": dict(self.t1), "repeat": self.repeat}


def _hw_dims(layer: Layer) -> tuple[dict[str, int], int, int, int, int]:
    if isinstance(layer, GEMM):
        return {"K": layer.N, "C": layer.K, "Y": layer.M, "X": 1, "R": 1, "S": 1}, 1, layer.M, 1, layer.batch
    p = problem_of(layer)
    st = p.strides["Y"]
    d = p.dims
    return ({"K": d["K"], "C": d["C"], "Y": d["Y'"], "X": d["X'"], "R": d["R"], "S": d["S"]},
            st, d["Y"], d["X"], p.repeat * d.get("N", 1))


def tiles_of(structure: HwStructure, dataflow: Dataflow, layer: Layer) -> LayerTiles:
    """The run-time tiles of ``layer`` under ``dataflow`` (rendered for it), checked against the
    generated ``structure`` and its buffers: a layer that does not fit is refused here, by the
    host, with the reason."""
    _check_layer(layer)
    where = f"layer {layer.name!r}"
    dims, st, in_rows, in_cols, repeat = _hw_dims(layer)
    if isinstance(layer, Conv2D):
        p = problem_of(layer)
        resolved = dataflow.resolve(p.dims, kind=p.kind, allowed=p.allowed_dims)
    else:
        resolved = dataflow.resolve(layer.dims(), kind="gemm", allowed=("M", "N", "K"))
    dmap = _dim_map(layer)
    t0: dict[str, int] = {}
    t1: dict[str, int] = {}
    for lv, maps in enumerate(resolved.levels()):
        for m in maps:
            d = dmap.get(m.dim)
            if d is None:
                raise AccelgenError(f"dimension {m.dim} is not generated", where=where)
            size, ofs = int(m.size), int(m.offset)
            if d in ("R", "S"):
                if size < dims[d]:
                    raise AccelgenError(f"{m} splits the {dims[d]}-wide filter; the generated PEs hold "
                                        "whole filters", where=where)
                continue
            if isinstance(layer, Conv2D) and m.dim in ("Y", "X"):
                filt = dims["R" if m.dim == "Y" else "S"]
                if size < filt:
                    raise AccelgenError(f"{m} is narrower than the filter ({filt})", where=where)
                rows = (size + st - filt) // st
                if ofs != size - filt + 1:
                    raise AccelgenError(f"{m}: windows must advance by the outputs they produce "
                                        f"(offset {size - filt + 1})", where=where)
                size = ofs = rows
            if ofs != size:
                raise AccelgenError(f"{m}: offset must equal size (tiles side by side)", where=where)
            (t0 if lv == 0 else t1)[d] = min(size, dims[d])
    for d in LOOP_DIMS:
        t0.setdefault(d, dims[d])
        t1.setdefault(d, t0[d])
        t1[d] = min(t1[d], t0[d])
    if structure.spatial[0] is not None and t1[structure.spatial[0]] != t0[structure.spatial[0]]:
        d = structure.spatial[0]
        raise AccelgenError(f"{d} is spread across clusters in tiles of {t0[d]} and split again into "
                            f"{t1[d]} inside them; expected the inner level to keep the cluster's tile",
                            where=where)
    got = structure_of(dataflow, layer, structure.num_pes, noc_words_per_cycle=structure.noc_words_per_cycle,
                       max_filter=structure.pe_tile_max["R"], max_stride=structure.max_stride,
                       simd_lanes=structure.simd_lanes)
    if (got.n0, got.n1, got.spatial, got.loops) != (structure.n0, structure.n1, structure.spatial,
                                                    structure.loops):
        raise AccelgenError(f"the dataflow for this layer has another shape ({' '.join(got.as_dict()['loops'])}) "
                            f"than the generated one ({' '.join(structure.as_dict()['loops'])})", where=where)
    limits = dict(structure.pe_tile_max)
    for d in LOOP_DIMS:
        if t1[d] > limits[d]:
            raise AccelgenError(f"PE tile of {d} is {t1[d]}, the generated L1 holds {limits[d]}", where=where)
    for d in ("R", "S"):
        if dims[d] > limits[d]:
            raise AccelgenError(f"filter {d}={dims[d]} exceeds the generated maximum {limits[d]}", where=where)
    if st > structure.max_stride:
        raise AccelgenError(f"stride {st} exceeds the generated maximum {structure.max_stride}", where=where)
    return LayerTiles(dims, st, in_rows, in_cols, t0, t1, repeat)


# ---------------------------------------------------------------------------------------------
# The walk
@dataclass(frozen=True)
class Step:
    """Where the loop nest stands: per loop dim, the level-0 base and the level-1 offset
    relative to it (unit 0 of every level starts at ``b0 + r1``)."""

    b0: tuple[int, int, int, int]
    r1: tuple[int, int, int, int]


def _loop_params(s: HwStructure, t: LayerTiles):
    out = []
    for lv, d in s.loops:
        tile = t.t0[d] if lv == 0 else t.t1[d]
        n = (s.n0 if lv == 0 else s.n1) if s.spatial[lv] == d else 1
        out.append((lv, LOOP_DIMS.index(d), tile * n))
    return out


def steps(s: HwStructure, t: LayerTiles) -> Iterator[Step]:
    """The steps in order: an odometer over the loops, inner levels inside the cluster-0 tile."""
    params = _loop_params(s, t)
    dims = [t.dims[d] for d in LOOP_DIMS]
    t0 = [t.t0[d] for d in LOOP_DIMS]
    b0 = [0, 0, 0, 0]
    r1 = [0, 0, 0, 0]
    n = len(params)
    while True:
        yield Step(tuple(b0), tuple(r1))      # type: ignore[arg-type]
        i = n - 1
        while i >= 0:
            lv, di, stride = params[i]
            if lv == 0:
                if b0[di] + stride < dims[di]:
                    b0[di] += stride
                    break
                b0[di] = 0
            else:
                if r1[di] + stride < min(t0[di], dims[di] - b0[di]):
                    r1[di] += stride
                    break
                r1[di] = 0
            i -= 1
        if i < 0:
            return


def _extent(s: HwStructure, t: LayerTiles, step: Step, di: int, unit: tuple[int, int]) -> tuple[int, int]:
    """(start, extent) of loop dim ``di`` for the PE at (cluster, unit)."""
    d = LOOP_DIMS[di]
    D, t0, t1 = t.dims[d], t.t0[d], t.t1[d]
    base = step.b0[di] + (unit[0] * t0 if s.spatial[0] == d else 0)
    start = base + step.r1[di] + (unit[1] * t1 if s.spatial[1] == d else 0)
    end = min(start + t1, base + t0, D)
    return start, max(0, end - start)


def _union(s: HwStructure, t: LayerTiles, step: Step, di: int) -> tuple[int, int]:
    """(start, extent) of the union over all PEs of loop dim ``di``."""
    d = LOOP_DIMS[di]
    D, t0, t1 = t.dims[d], t.t0[d], t.t1[d]
    start = step.b0[di] + step.r1[di]
    if s.spatial[0] == d:
        end = min(step.b0[di] + s.n0 * t0, D)
    elif s.spatial[1] == d:
        end = min(start + s.n1 * t1, step.b0[di] + t0, D)
    else:
        end = min(start + t1, step.b0[di] + t0, D)
    return start, end - start


def _boxes(s: HwStructure, t: LayerTiles, step: Step) -> dict[str, tuple[int, int]]:
    """Rows and run length of each input tensor's union box (L2 layouts ``C,Y,X`` and
    ``K,C,R,S``: a row is a run along the last dimension)."""
    _, k = _union(s, t, step, 0)
    _, c = _union(s, t, step, 1)
    _, y = _union(s, t, step, 2)
    _, x = _union(s, t, step, 3)
    rows = (y - 1) * t.stride + t.dims["R"]
    cols = (x - 1) * t.stride + t.dims["S"]
    return {"input": (c * rows, cols), "weight": (k * c * t.dims["R"], t.dims["S"])}


def _keys(step: Step) -> dict[str, tuple]:
    def pick(dims):
        return tuple((step.b0[LOOP_DIMS.index(d)], step.r1[LOOP_DIMS.index(d)]) for d in dims if d in LOOP_DIMS)
    return {name: pick(dims) for name, dims in TENSOR_DIMS.items()}


def _groups(s: HwStructure, t: LayerTiles, step: Step) -> list[tuple[int, int]]:
    """The PEs that represent each output group with a non-empty tile (unit 0 of a reduction level)."""
    red = s.reduction_spatial
    out = []
    for u0 in range(1 if red[0] or s.spatial[0] is None else s.n0):
        for u1 in range(1 if red[1] or s.spatial[1] is None else s.n1):
            if all(_extent(s, t, step, di, (u0, u1))[1] > 0 for di in range(4)):
                out.append((u0, u1))
    return out


def step_costs(s: HwStructure, t: LayerTiles, step: Step, loaded: tuple[str, ...],
               timing: TimingConstants = TIMING) -> dict[str, int]:
    """Busy cycles of each engine for one step: ``load`` (bringing in its tiles of the tensors in
    ``loaded``), ``compute`` and ``drain`` (its finished outputs, if it ends an output tile)."""
    w = s.noc_words_per_cycle
    boxes = _boxes(s, t, step)
    issue = sum(rows * -(-run // w) for name, (rows, run) in boxes.items() if name in loaded)
    load = issue + timing.load_latency_cycles if loaded else 0
    ext = [_extent(s, t, step, di, (0, 0))[1] for di in range(4)]
    window = -(-(t.dims["R"] * t.dims["S"]) // s.simd_lanes)     # lanes share one filter window
    compute = math.prod(ext) * window + timing.compute_latency_cycles
    words = 0
    for g in _groups(s, t, step):
        words += math.prod(_extent(s, t, step, LOOP_DIMS.index(d), g)[1] for d in OUTPUT_DIMS)
    drain = -(-words // timing.drain_words_per_cycle) + timing.drain_latency_cycles
    return {"load": load, "compute": compute, "drain": drain}


def schedule_summary(s: HwStructure, t: LayerTiles, timing: TimingConstants = TIMING) -> dict:
    """Walk the steps and return the exact cycle count of one run and per-engine totals."""
    seq = list(steps(s, t))
    n = len(seq)
    keys = [_keys(st) for st in seq]
    loads, computes, drains = [], [], []
    for i, st in enumerate(seq):
        loaded = tuple(name for name in ("input", "weight")
                       if i == 0 or keys[i][name] != keys[i - 1][name])
        ends = i == n - 1 or keys[i + 1]["output"] != keys[i]["output"]
        c = step_costs(s, t, st, loaded, timing)
        loads.append(c["load"])
        computes.append(c["compute"])
        drains.append(c["drain"] if ends else 0)
    total = 0
    bound = {"load": 0, "compute": 0, "drain": 0}
    for k in range(n + 2):
        parts = {"load": loads[k] if k < n else 0,
                 "compute": computes[k - 1] if 1 <= k <= n else 0,
                 "drain": drains[k - 2] if 2 <= k <= n + 1 else 0}
        if k == n + 1 and parts["drain"] == 0:
            continue
        longest = max(parts.values())
        total += timing.slot_overhead_cycles + longest
        if 1 <= k <= n:
            bound[max(parts, key=lambda e: (parts[e], e == "compute"))] += 1
    total += timing.finish_cycles
    return {"cycles": total, "steps": n, "load_cycles": sum(loads), "compute_cycles": sum(computes),
            "drain_cycles": sum(drains), "bound_slots": bound}


def hwgen_cycles(s: HwStructure, t: LayerTiles, timing: TimingConstants = TIMING) -> int:
    """Cycles from ``start`` to ``done`` for one run of the layer (the vectorised evaluation,
    tested equal to :func:`reference_summary`)."""
    from ._hwgen_fast import fast_summary      # it builds on this module
    return fast_summary(s, t, timing)["cycles"]


def reference_summary(s: HwStructure, t: LayerTiles) -> dict:
    """The step-by-step walk (slow; the reference :func:`fast_summary` is tested against)."""
    summary = schedule_summary(s, t)
    summary.update(_traffic(s, t))
    return summary


def _traffic(s: HwStructure, t: LayerTiles) -> dict:
    """Words moved per tensor: L2 reads (one per NoC word), L1 writes (captures), L1 reads (two
    operands and a partial sum per MAC), L2 output read-modify-writes (one per drained word)."""
    l2r = {"input": 0, "weight": 0, "output": 0}
    l1w = {"input": 0, "weight": 0, "output": 0}
    drained = 0
    macs = 0
    seq = list(steps(s, t))
    keys = [_keys(x) for x in seq]
    R, S, st = t.dims["R"], t.dims["S"], t.stride
    pes = [(u0, u1) for u0 in range(s.n0) for u1 in range(s.n1)]
    for i, step in enumerate(seq):
        boxes = _boxes(s, t, step)
        for name in ("input", "weight"):
            if i == 0 or keys[i][name] != keys[i - 1][name]:
                rows, run = boxes[name]
                l2r[name] += rows * run
                for pe in pes:
                    k, c, y, x = (_extent(s, t, step, di, pe)[1] for di in range(4))
                    if name == "input":
                        l1w[name] += c * ((y - 1) * st + R) * ((x - 1) * st + S) if y and x and c else 0
                    else:
                        l1w[name] += k * c * R * S
        for pe in pes:
            macs += math.prod(_extent(s, t, step, di, pe)[1] for di in range(4)) * R * S
        if i == len(seq) - 1 or keys[i + 1]["output"] != keys[i]["output"]:
            for g in _groups(s, t, step):
                drained += math.prod(_extent(s, t, step, di, g)[1] for di in (0, 2, 3))
    l1w["output"] = macs
    l1r = {"input": macs, "weight": macs, "output": macs + drained}
    l2w = {"input": 0, "weight": 0, "output": drained}
    l2r["output"] = drained
    return {"l2_reads": l2r, "l2_writes": l2w, "l1_reads": l1r, "l1_writes": l1w, "step_macs": macs,
            "drained_words": drained}

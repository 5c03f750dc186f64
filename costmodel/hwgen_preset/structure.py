"""A dataflow as the generated accelerator's *structure* (generation time: cluster levels, which
dimension each level spreads across its units, the loop order, the buffers), and a layer as
its *tiles* (run time: the tile of every dimension at every level, in output coordinates,
written into configuration registers).  The RTL is built from a structure; the host driver
writes the tiles; the schedule (:mod:`.walk`, :mod:`.closed`) reads both.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

from ..base import AccelgenError
from ..dataflow.directives import Dataflow, SpatialMap, Sz
from ..workload.layers import GEMM, Conv2D, ConvTranspose2D, Layer
from ..workload.problem import Problem, problem_of
from .rules import LOOP_DIMS, OUTPUT_DIMS, l1_shape, l1_words, slide_eligible

__all__ = ["HwStructure", "LayerTiles", "OUTPUT_BANK_ROWS", "PSUM_RAM_MIN_WORDS", "PSUM_RAM_ROWS", "check_layer",
           "structure_of", "tiles_of", "structure_key"]

_CONV_MAP = {"K": "K", "C": "C", "Y": "Y", "Y'": "Y", "X": "X", "X'": "X", "R": "R", "S": "S"}
_GEMM_MAP = {"N": "K", "K": "C", "M": "X"}   # M along X: A^T's rows are runs of M

#: Partial sums of a PE tile from which the drain reads it in runs of few words
#: (:attr:`HwStructure.drain_lanes`), so that the PE keeps them in memories (LUT RAM, a row for
#: each run) rather than a register each; and the runs a memory holds (an ECP5 LUT RAM cell's
#: depth: 16x4 bits).
PSUM_RAM_MIN_WORDS = 8
PSUM_RAM_ROWS = 16
#: Rows of an output L2 bank at most, where the drain's width leaves the choice
#: (:meth:`HwStructure.output_banks`): 2,048 int32 words are block RAMs side by side with no
#: choice of block after them (an ECP5's 2048x9, a Xilinx RAMB18's 2048x9, an iCE40's 2048x2).
OUTPUT_BANK_ROWS = 2048


@dataclass(frozen=True)
class HwStructure:
    """Generation-time shape of the array and its loop nest.  Immutable: what follows from its
    fields alone (the drain's width, its L1) is worked out once per structure and kept in its
    ``__dict__`` (``cached_property``)."""

    num_pes: int
    n0: int                                  # units of level 0 (clusters, or PEs if one level)
    n1: int                                  # PEs per cluster (1 with a single level)
    spatial: tuple[str, str | None]          # dimension spread across the units of each level
    loops: tuple[tuple[int, str], ...]       # (level, dim), outermost first
    noc_words_per_cycle: int                 # W: distribution bus width (words per cycle)
    pe_tile_max: dict[str, int]              # largest PE tile per dim (K C Y X R S) and stride
    max_stride: int
    simd_lanes: int = 1                      # MAC lanes per PE, over consecutive filter positions
    slide_x: bool = False                    # the input's L1 rows keep columns as X slides (rules.slide_eligible)
    slide_y: bool = False                    # ... its L1 channels keep rows as Y slides
    drain_words: int = 0                     # the drain's lanes at most (0: the rule's: drain_lanes)

    @property
    def used_pes(self) -> int:
        return self.n0 * self.n1

    def mapped(self, level: int) -> set[str]:
        return {d for lv, d in self.loops if lv == level}

    @cached_property
    def reduction_spatial(self) -> tuple[bool, bool]:
        """Whether each level's units share outputs (their spatial dim is a reduction dim)."""
        return tuple(d is not None and d not in OUTPUT_DIMS for d in self.spatial)  # type: ignore[return-value]

    @cached_property
    def drain_across_groups(self) -> int | None:
        """The level whose units the drain collects side by side, or ``None``.  When the only
        level that splits outputs spreads ``X`` one output column per unit (``xp``), neighbouring
        groups hold neighbouring outputs: the drain takes a run of up to ``W`` of them a cycle,
        one word from each group, instead of one group after another."""
        red = self.reduction_spatial
        levels = [lv for lv in (0, 1) if self.spatial[lv] is not None and not red[lv] and (self.n0, self.n1)[lv] > 1]
        if len(levels) != 1 or self.spatial[levels[0]] != "X" or self.pe_tile_max["X"] != 1 or (1, "X") in self.loops:
            return None
        return levels[0]

    @cached_property
    def drain_lanes(self) -> int:
        """Words the drain reads from one PE a cycle (``L``): one when it collects across groups;
        else ``min(W, X_t, d)`` (``X_t`` the largest X tile: a group's row in ``⌈X_g / L⌉`` runs;
        ``d`` the hardware's ``pe_drain_words`` when given).  When ``d`` is not given and the PE's
        tile holds ``n >=`` :data:`PSUM_RAM_MIN_WORDS` partial sums, the fewest lanes (a power of
        two dividing ``X_t``) whose runs are no more than :data:`PSUM_RAM_ROWS`: the PE keeps
        them in memories, one for each lane and buffer, each as deep as one LUT RAM cell
        (``hwgen/pe.py``), with the narrowest choices before them (``small``'s 16-word rows: one
        lane, 16 runs; a PE of 1,700 LUT4 and 1,100 FFs in registers).  A drain that narrow can
        hold the slots up where every step ends an output tile: the preset counts it (``bound``:
        noc-egress), and ``pe_drain_words`` widens it."""
        if self.drain_across_groups is not None:
            return 1
        x = self.pe_tile_max["X"]
        lanes = max(1, min(self.noc_words_per_cycle, x))
        if self.drain_words:
            return min(lanes, self.drain_words)
        n = l1_words(self.pe_tile_max, self.max_stride)["output"]
        if n < PSUM_RAM_MIN_WORDS:
            return lanes
        p = 1
        while n // p > PSUM_RAM_ROWS and x % (2 * p) == 0 and 2 * p <= lanes:
            p *= 2
        return p

    @cached_property
    def collection_lanes(self) -> int:
        """Words the drain collects a cycle: a PE's run (:attr:`drain_lanes`), or one word from
        each of up to ``W`` groups (:attr:`drain_across_groups`)."""
        lv = self.drain_across_groups
        if lv is None:
            return self.drain_lanes
        return min(self.noc_words_per_cycle, (self.n0, self.n1)[lv])

    def output_banks(self, output_words: int) -> int:
        """Banks of the output region of L2 (``hwgen/l2.py``; word ``a`` in bank ``a`` mod the
        banks), a power of two: the drain's collected words rounded up to one (any run of them
        is then one access of each bank), or more where a bank would hold more than
        :data:`OUTPUT_BANK_ROWS` rows, and at most ``W``.  The drain writes one run a cycle,
        so banks beyond its run would only add ports, adders and wires (``small``'s ``kcp``,
        one word a cycle, with its L2 cut to 256 KiB: 16 banks of 2,048 rows, not 64 of 512)."""
        run = 1 << (self.collection_lanes - 1).bit_length()
        rows = 1 << (max(1, -(-output_words // OUTPUT_BANK_ROWS)) - 1).bit_length()
        return min(self.noc_words_per_cycle, max(run, rows))

    def l1_words(self) -> dict[str, int]:
        """Words of one PE's L1 per tensor for one tile (each is double-buffered): its banks'
        rows (:func:`.rules.l1_shape`) for the input and the weight."""
        return dict(self._l1_words)

    @cached_property
    def _l1_words(self) -> dict[str, int]:
        """:meth:`l1_words`, worked out once (a design's L1 is asked for again and again)."""
        words = l1_words(self.pe_tile_max, self.max_stride)
        words.update({name: banks * rows for name, (banks, rows) in l1_shape(self).items()})
        return words

    def as_dict(self) -> dict:
        return {"num_pes": self.num_pes, "clusters": self.n0, "pes_per_cluster": self.n1,
                "spatial": list(self.spatial), "loops": [f"L{lv}:{d}" for lv, d in self.loops],
                "noc_words_per_cycle": self.noc_words_per_cycle, "pe_tile_max": dict(self.pe_tile_max),
                "max_stride": self.max_stride, "simd_lanes": self.simd_lanes, "slide_x": self.slide_x,
                "slide_y": self.slide_y, "drain_words": self.drain_words, "l1_words": self.l1_words()}


def structure_key(s: HwStructure) -> tuple:
    return (s.num_pes, s.n0, s.n1, s.spatial, s.loops, s.noc_words_per_cycle,
            tuple(sorted(s.pe_tile_max.items())), s.max_stride, s.simd_lanes, s.slide_x, s.slide_y, s.drain_words)


def _refuse(msg: str, where: str) -> AccelgenError:
    return AccelgenError(f"hwgen cannot generate this dataflow: {msg}", where=where)


def _dim_map(layer: Layer) -> dict[str, str]:
    return _GEMM_MAP if isinstance(layer, GEMM) else _CONV_MAP


def check_layer(layer: Layer) -> None:
    """Refuse what the generated hardware cannot run correctly yet (one line naming the field)."""
    where = f"layer {layer.name!r}"
    if isinstance(layer, ConvTranspose2D):
        raise AccelgenError("hwgen generates direct convolutions and GEMMs; transposed convolutions are "
                            "not generated yet (analyse them with --preset maestro)", where=where)
    if not isinstance(layer, Conv2D):
        return
    if layer.depthwise:
        raise AccelgenError("hwgen generates dense convolutions and GEMMs; depthwise layers are not "
                            "generated yet (analyse them with --preset maestro)", where=where)
    for field in ("dilation_y", "dilation_x"):
        if getattr(layer, field) != 1:
            raise AccelgenError(f"{field}={getattr(layer, field)}: the generated PEs read windows of adjacent "
                                "rows and columns, dilation 1 only (analyse it with --preset maestro)", where=where)


def structure_of(dataflow: Dataflow, layer: Layer, num_pes: int, *, noc_words_per_cycle: int = 1,
                 max_filter: int = 3, max_stride: int = 2, simd_lanes: int = 1, slide: bool = True,
                 drain_words: int = 0) -> HwStructure:
    """The generation-time structure of ``dataflow`` (as rendered for ``layer``) on ``num_pes``;
    with ``slide``, its input's L1 keeps columns (rows) as a window slides along ``X`` (``Y``)
    wherever the structure allows (:func:`.rules.slide_eligible`)."""
    check_layer(layer)
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
    if isinstance(layer, GEMM):                 # a 1x1 convolution with one output row
        max_filter, max_stride = 1, 1
        tiles.setdefault("Y", None)
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
    s = HwStructure(num_pes, n0, n1, (spatial[0], spatial[1]), tuple(loops),
                    noc_words_per_cycle, tile_max, max_stride, simd_lanes, drain_words=drain_words)
    s.__dict__[_ORIGIN] = (dataflow, layer)
    if not slide:
        return s
    slide_x, slide_y = slide_eligible(s, "X"), slide_eligible(s, "Y")
    return with_slides(s, slide_x, slide_y) if slide_x or slide_y else s


#: Where a structure made by :func:`structure_of` keeps the dataflow and layer (the objects)
#: it was made from: :func:`tiles_of` given the same two knows the loop nest it would rebuild
#: to compare (the structure's own maxima make the same one) without rebuilding it.
_ORIGIN = "_origin"


def with_slides(s: HwStructure, slide_x: bool, slide_y: bool) -> HwStructure:
    """``s`` with its input's L1 sliding along ``X`` and ``Y`` as given (the same loop nest: it
    keeps the dataflow and layer it was made from)."""
    out = dataclasses.replace(s, slide_x=slide_x, slide_y=slide_y)
    if _ORIGIN in s.__dict__:
        out.__dict__[_ORIGIN] = s.__dict__[_ORIGIN]
    return out


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
    """Run-time configuration of one layer: sizes, strides and the tile of each dim per level."""

    dims: dict[str, int]            # K C Y X (outputs) R S
    stride_y: int                   # effective strides of the input as laid out (compacted where
    stride_x: int                   # the stride is wider than the filter, per axis)
    in_rows: int                    # input rows / columns as laid out in L2
    in_cols: int
    t0: dict[str, int]              # level-0 tile per loop dim (whole dim if unmapped)
    t1: dict[str, int]              # level-1 (PE) tile per loop dim
    repeat: int                     # groups / batch: the host runs the layer this many times

    def as_dict(self) -> dict:
        return {"dims": dict(self.dims), "stride_y": self.stride_y, "stride_x": self.stride_x, "in_rows": self.in_rows,
                "in_cols": self.in_cols, "t0": dict(self.t0), "t1": dict(self.t1), "repeat": self.repeat}


def _hw_dims(layer: Layer, p: Problem | None = None) -> tuple[dict[str, int], dict[str, int], int, int, int]:
    """Loop sizes, the effective stride of the Y and X windows, input rows and columns as laid out
    in L2, and how many times the layer runs (``p``: the layer's problem, if the caller has it)."""
    if isinstance(layer, GEMM):
        return ({"K": layer.N, "C": layer.K, "Y": 1, "X": layer.M, "R": 1, "S": 1}, {"Y": 1, "X": 1},
                1, layer.M, layer.batch)
    p = problem_of(layer) if p is None else p
    d = p.dims
    return ({"K": d["K"], "C": d["C"], "Y": d["Y'"], "X": d["X'"], "R": d["R"], "S": d["S"]},
            {"Y": p.strides["Y"], "X": p.strides["X"]}, d["Y"], d["X"], p.repeat * d.get("N", 1))


def tiles_of(structure: HwStructure, dataflow: Dataflow, layer: Layer) -> LayerTiles:
    """The run-time tiles of ``layer`` under ``dataflow`` (rendered for it), checked against the
    generated ``structure`` and its buffers: a layer that does not fit is refused here, by the
    host, with the reason."""
    check_layer(layer)
    where = f"layer {layer.name!r}"
    p = None if isinstance(layer, GEMM) else problem_of(layer)
    dims, strides, in_rows, in_cols, repeat = _hw_dims(layer, p)
    if isinstance(layer, Conv2D):
        assert p is not None
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
                st = strides[m.dim]
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
    origin = structure.__dict__.get(_ORIGIN, (None, None))
    got = structure if origin[0] is dataflow and origin[1] is layer else structure_of(
        dataflow, layer, structure.num_pes, noc_words_per_cycle=structure.noc_words_per_cycle,
        max_filter=structure.pe_tile_max["R"], max_stride=structure.max_stride, simd_lanes=structure.simd_lanes)
    if (got.n0, got.n1, got.spatial, got.loops) != (structure.n0, structure.n1, structure.spatial,
                                                    structure.loops):
        raise AccelgenError(f"the dataflow for this layer has another shape ({' '.join(got.as_dict()['loops'])}) "
                            f"than the generated one ({' '.join(structure.as_dict()['loops'])})", where=where)
    d, n1 = structure.spatial[1], structure.n1
    if d in ("K", "C") and n1 > 1 and t0[d] < dims[d] and t0[d] % (n1 * t1[d]):
        raise AccelgenError(f"the cluster tile of {d} ({t0[d]}) is not a multiple of what its {n1} PEs "
                            f"spread ({n1} x {t1[d]}); expected a multiple, or all of {d} ({dims[d]}): L2 "
                            f"interleaves {d} in blocks of the PEs' tiles", where=where)
    limits = dict(structure.pe_tile_max)
    for d in LOOP_DIMS:
        if t1[d] > limits[d]:
            raise AccelgenError(f"PE tile of {d} is {t1[d]}, the generated L1 holds {limits[d]}", where=where)
    for d in ("R", "S"):
        if dims[d] > limits[d]:
            raise AccelgenError(f"filter {d}={dims[d]} exceeds the generated maximum {limits[d]}", where=where)
    for d, st in strides.items():
        if st > structure.max_stride:
            raise AccelgenError(f"stride {st} exceeds the generated maximum {structure.max_stride} (along {d})",
                                where=where)
    return LayerTiles(dims, strides["Y"], strides["X"], in_rows, in_cols, t0, t1, repeat)

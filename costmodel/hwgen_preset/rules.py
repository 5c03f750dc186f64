"""The rules of the generated accelerator that every reader shares: the ``hwgen`` preset's
schedule (:mod:`.structure`, :mod:`.walk`, :mod:`.closed`), the RTL (:mod:`hwgen`) and the host
driver (:mod:`hwgen.layout`, :mod:`hwgen.host`) import them from here, so each is written once.

Dimensions are those of a convolution in output coordinates: ``K C Y X R S`` with ``Y``/``X``
the output rows/columns.  A GEMM ``out[M,N] = A[M,K] @ B[K,N]`` is the 1x1 convolution with
``K <- N``, ``C <- K``, ``Y = 1``, ``X <- M`` (A's rows along X, so they load as long runs).  ``docs/timing.md`` is the prose of the same rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Mapping

import numpy as np

from ..base import AccelgenError
from ..workload.problem import CONV_TENSOR_DIMS

__all__ = ["HW_DIMS", "LOOP_DIMS", "OUTPUT_DIMS", "TENSOR_DIMS", "TENSOR_LOOP_DIMS", "ENGINES",
           "TimingConstants", "TIMING", "check_timing", "bounding_engine", "l1_words", "l1_bytes",
           "input_span", "host_offset_bits", "WORD_BITS", "slot_cycles", "drain_runs", "drain_latency", "load_latency", "ROTATION_SPLIT_WORDS", "reduction_levels", "input_runs", "weight_runs", "load_issue_cycles",
           "MAX_WORDS_PER_CHUNK", "Ingress", "ingress", "spread_tile", "class_box", "tensor_load", "padded_dim", "l2_layout_words", "spread_units", "within", "box_runs", "l2_coefficients", "l1_pitches", "l1_shape", "active_phases", "l2_axes", "input_mode", "weight_merged", "input_window_banks",
           "l2_address_bits", "SLIDE_FILTER", "slide_eligible", "sliding", "slide_extent", "l1_row_words", "l1_input_fields", "slides"]

HW_DIMS = ("K", "C", "Y", "X", "R", "S")
LOOP_DIMS = ("K", "C", "Y", "X")          # R and S are always whole inside a PE's tile
#: Which dimensions index which tensor (the problem's own table, in output coordinates).
TENSOR_DIMS: dict[str, tuple[str, ...]] = dict(CONV_TENSOR_DIMS)
OUTPUT_DIMS = TENSOR_DIMS["output"]
#: The loop dimensions of each tensor: a step reloads a tensor when one of them moves.
TENSOR_LOOP_DIMS: dict[str, tuple[str, ...]] = {
    name: tuple(d for d in dims if d in LOOP_DIMS) for name, dims in TENSOR_DIMS.items()}
#: The three engines of a slot, in the order that breaks ties of :func:`bounding_engine` after
#: compute: a slot as long as its compute is compute-bound, else load before drain.
ENGINES = ("load", "compute", "drain")


@dataclass(frozen=True)
class TimingConstants:
    """Every fixed cycle count of the generated hardware (``docs/timing.md``).  These are the
    values the RTL is built with; :func:`check_timing` refuses any other, since the generator
    cannot build them."""

    slot_overhead_cycles: int = 0   # no controller cycle between slots: the next slot's go is
    #                                 registered in the longest engine's last busy cycle
    min_slot_cycles: int = 2        # a slot lasts at least two cycles, even with nothing to do:
    #                                 no shift in the cycle after one (the first register stage of
    #                                 the next step's quantities: Controller.ahead)
    load_latency_cycles: int = 5    # a cycle at go to take the step's first box, then, after the
    #                                 last issue, the L2 read, the rotation to lanes, the
    #                                 broadcast to each PE's input register and the L1 capture:
    #                                 four register stages; two more with a NoC wider than
    #                                 ROTATION_SPLIT_WORDS, whose banks' rows are registered beside
    #                                 them and whose rotation is two halves, each registered
    #                                 (load_latency)
    compute_latency_cycles: int = 0  # the engine is busy only while it issues: the MAC pipeline
    #                                  (a broadcast register at each end, read L1, into the
    #                                  multiplier, multiply, the product beside the partial sums,
    #                                  accumulate) overlaps the next step's issues (drain_wait_cycles)
    drain_wait_cycles: int = 5      # a step's drain starts five cycles after its slot's go: the
    #                                 last partial sums of the step are written by then
    drain_latency_cycles: int = 5   # the PEs' input register, their words selected (a register),
    #                                 the reduction tree (a register a level), moved to the L2 banks
    #                                 (a register), added to the L2 words read three cycles
    #                                 before (the banks, a register beside each, a register
    #                                 beside the adder), the sum registered: after the last issue,
    #                                 5 + max(levels - 1, 0)
    #                                 cycles with ``levels`` of reduction tree (drain_latency)
    start_delay_cycles: int = 3     # the controller starts three cycles after the host's start
    #                                 write: the configuration's products (Geometry.static) settle
    start_cycles: int = 7           # from the start write: the delay, then the controller's
    #                                 cycles before the first slot: the odometer runs two steps
    #                                 ahead of the step loaded, so step 0 takes two shifts (each
    #                                 after a cycle of register stage) to reach the loader
    #                                 (the drain's width: HwStructure.drain_lanes, drain_runs)


TIMING = TimingConstants()


def check_timing(timing: TimingConstants) -> TimingConstants:
    """``timing`` if it is what the RTL builds; else one line naming the first constant that differs."""
    for f in fields(TimingConstants):
        got, built = getattr(timing, f.name), getattr(TIMING, f.name)
        if got != built:
            raise AccelgenError(f"{f.name} is {got!r}; the generated RTL has {built!r} and cannot be "
                                "built with another value", where="hwgen timing")
    return timing


def bounding_engine(busy: Mapping[str, int]) -> str:
    """Which engine a slot waits on: the longest; compute wins ties, then load over drain."""
    return max(ENGINES, key=lambda e: (busy[e], e == "compute"))


def slot_cycles(longest, timing: TimingConstants):
    """Cycles of a slot whose longest engine is busy ``longest`` cycles (integers or numpy
    arrays): the next slot's ``go`` is registered in that engine's last busy cycle."""
    return np.maximum(longest + timing.slot_overhead_cycles, timing.min_slot_cycles)


def reduction_levels(s) -> int:
    """Levels of the drain's reduction tree: ``ceil(log2)`` of the PEs that share an output (the
    levels whose spatial dimension is a reduction one)."""
    shared = math.prod(n for n, reduces in zip((s.n0, s.n1), s.reduction_spatial) if reduces)
    return (shared - 1).bit_length()


#: A NoC wider than this many words rotates the banks' words to lanes in two registered halves:
#: its banks and lanes spread across the device, and six stages of choices between them did
#: not fit a 10 ns cycle on an ECP5 (docs/timing.md, "LOAD_LATENCY").
ROTATION_SPLIT_WORDS = 8


def load_latency(s, timing: TimingConstants | None = None) -> int:
    """Cycles a load stays busy after its last issue, for structure ``s``: the timing's
    ``load_latency_cycles``, plus two with a NoC wider than :data:`ROTATION_SPLIT_WORDS` words (a
    register of each L2 bank's row beside the bank, and the rotation in two registered halves)."""
    return (timing or TIMING).load_latency_cycles + 2 * (s.noc_words_per_cycle > ROTATION_SPLIT_WORDS)


def drain_latency(s, timing: TimingConstants | None = None) -> int:
    """Cycles the drain stays busy after its last issue, for structure ``s``: the timing's
    ``drain_latency_cycles`` (no tree, or a one-level tree) plus a cycle for each further level
    of the reduction tree."""
    return (timing or TIMING).drain_latency_cycles + max(reduction_levels(s) - 1, 0)


def drain_runs(rows, run, words_per_cycle: int):
    """Collection cycles of ``rows`` rows of ``run`` output words along X, ``words_per_cycle``
    consecutive words a cycle (integers or numpy arrays; the last chunk of a row may be short)."""
    return rows * -(-run // words_per_cycle)


def _where(cond, a, b):   # (scalars: a plain choice; the closed form's one step costs less than numpy's call)
    return np.where(cond, a, b) if any(isinstance(v, np.ndarray) for v in (cond, a, b)) else a if cond else b


def input_runs(c, rows, cols, in_rows, in_cols):
    """``(runs, length)``: how the loader sends an input box of ``c`` channels x ``rows`` x
    ``cols`` from the ``[C][in_rows][in_cols]`` L2 layout, as runs of consecutive addresses:
    rows of ``cols`` words, whole-width rows of a channel merged into one run, whole channels
    into one run (integers or numpy arrays)."""
    full_cols = cols == in_cols
    full = full_cols & (rows == in_rows)
    runs = _where(full, 1, _where(full_cols, c, c * rows))
    length = _where(full, c * rows * cols, _where(full_cols, rows * cols, cols))
    return runs, length


def weight_runs(k, c, C, R, S):
    """``(runs, length)`` of a weight box of ``k`` filters x ``c`` channels in the ``[K][C][R][S]``
    layout: one run per filter of its ``c*R*S`` consecutive words, or one run of all ``k`` filters
    when ``c`` is every channel (integers or numpy arrays)."""
    full = c == C
    return _where(full, 1, k), _where(full, k * C * R * S, c * R * S)


#: Words a PE's L1 takes from one NoC chunk at most, per tensor (its banks): the lanes a PE reads
#: are fixed at generation time, so wider chunks only help when they feed more PEs.
MAX_WORDS_PER_CHUNK = 4


@dataclass(frozen=True)
class Ingress:
    """How one tensor (input or weight) reaches the PEs' L1 (``docs/timing.md``, "Load").

    The PEs whose tiles of the tensor differ along a dimension the array spreads without overlap
    (``interleaved``: ``K``, ``C``, and ``Y``/``X`` of a design whose filters are 1x1) are its
    *classes*: L2 holds the tensor with the class innermost (``classes`` words for each word of a
    tile), so each of a chunk's words goes to the PEs of one class, at a lane fixed when the
    hardware is generated.  A *group* of words is ``per_pe`` consecutive words of every class's
    tile (``P``, a power of two: the banks of a PE's L1), sent in one chunk when the classes fit
    the lanes, else a word of every class in ``chunks_per_word`` chunks.  An input spread along
    ``X`` or ``Y`` by a design with wider filters (``window_x``, ``window_y``: neighbouring
    windows overlap) goes as the union's rows instead, a row per run, each PE taking its window
    (along ``X``, an aligner per PE; along ``Y``, the rows its window holds)."""

    tensor: str
    classes: int
    interleaved: tuple[str, ...]
    window_x: bool
    window_y: bool
    per_pe: int
    chunks_per_word: int
    banks: int              # of a PE's L1 for the tensor: per_pe, or an X window's (input_window_banks)


def ingress(s, tensor: str) -> Ingress:
    """The :class:`Ingress` of ``tensor`` (``"input"``, ``"weight"``) on ``s``, once per structure (in its ``__dict__``)."""
    if (got := s.__dict__.get("_ingress_" + tensor)) is not None:
        return got
    W = s.noc_words_per_cycle
    dims = TENSOR_LOOP_DIMS[tensor]
    classes, inter, wx, wy = 1, [], False, False
    for lv, d in enumerate(s.spatial):
        units = (s.n0, s.n1)[lv]
        if d is None or d not in dims or units == 1:
            continue
        if d in ("Y", "X") and s.pe_tile_max["R" if d == "Y" else "S"] > 1:
            wx, wy = wx or d == "X", wy or d == "Y"
        else:
            classes *= units
            inter.append(d)
    if (wx or wy) and inter:
        raise AccelgenError(f"the {tensor} is spread along {'/'.join(inter)} and along "
                            f"{'Y' if wy else 'X'} (overlapping windows) at once; expected one of the two",
                            where="dataflow")
    if classes > W and classes % W:
        raise AccelgenError(f"the {tensor}'s {classes} classes of PEs outnumber the NoC's {W} lanes and are not a "
                            f"multiple of them; expected at most {W} or a multiple of {W} (a chunk carries a word of "
                            f"{W} classes)", where="dataflow")
    per_pe = 1
    while per_pe * 2 <= min(MAX_WORDS_PER_CHUNK, W // classes):
        per_pe *= 2
    got = s.__dict__["_ingress_" + tensor] = Ingress(tensor, classes, tuple(inter), wx, wy, per_pe, -(-classes // W),
                                                     input_window_banks(s) if wx else per_pe)
    return got


def spread_tile(s, t, d: str) -> int:                # the tile of dimension ``d`` at the level that spreads it
    return t.t0[d] if s.spatial[0] == d else t.t1[d]


def spread_units(s, d: str) -> int:                     # the units of the level that spreads ``d``
    return s.n0 if s.spatial[0] == d else s.n1


def class_box(s, t, ing: Ingress, ext: Mapping, union: Mapping) -> dict:
    """The extents a load of ``ing``'s tensor sends per class, per loop dim: along an
    interleaved dimension the whole tile (L2 pads the last one), along a window the union's,
    else PE (0, 0)'s (``ext``: the layer's edge clips it).  Integers or numpy arrays."""
    out = {}
    for d in TENSOR_LOOP_DIMS[ing.tensor]:
        if d in ing.interleaved:
            out[d] = spread_tile(s, t, d)
        elif (d == "X" and ing.window_x) or (d == "Y" and ing.window_y):
            out[d] = union[d]
        else:
            out[d] = ext[d]
    return out


def within(s, t, ing: Ingress, d: str) -> int:
    """Dimension ``d`` of a block of ``ing``'s tensor in L2: the spread tile if ``d`` is
    interleaved, else the whole dimension."""
    return spread_tile(s, t, d) if d in ing.interleaved else t.dims[d]


def box_runs(s, t, ing: Ingress, box: Mapping):
    """``(runs, words)`` of a class box (:func:`class_box`), each run ``words`` consecutive words
    of a class's tile (L2 holds ``classes`` times as many): input rows (a row of the union per
    run for a window), whole-width rows of a channel merged, whole channels merged
    (:func:`input_runs`); weight filters, merged when the box holds every channel of the block
    (:func:`weight_runs`)."""
    R, S = t.dims["R"], t.dims["S"]
    if ing.tensor == "input":
        rows = input_span(box["Y"], t.stride_y, R)
        cols = input_span(box["X"], t.stride_x, S)
        if ing.window_x or ing.window_y or s.slide_x or s.slide_y:     # (a row a run: input_mode)
            return box["C"] * rows, cols
        return input_runs(box["C"], rows, cols, *_block_rows_cols(s, t, ing))
    return weight_runs(box["K"], box["C"], within(s, t, ing, "C"), R, S)


def _block_rows_cols(s, t, ing: Ingress) -> tuple[int, int]:
    """The input rows and columns of a block in L2: the layer's, or along an interleaved ``Y`` or
    ``X`` (1x1 filters, stride 1) the spread tile."""
    return (spread_tile(s, t, "Y") if "Y" in ing.interleaved else t.in_rows,
            spread_tile(s, t, "X") if "X" in ing.interleaved else t.in_cols)


def tensor_load(s, t, ing: Ingress, ext: Mapping, union: Mapping, slide_x=False, slide_y=False):
    """``(issue cycles, words)`` of one load of ``ing``'s tensor in a step whose PE (0, 0) tile
    and union have extents ``ext`` and ``union`` per loop dim (integers or numpy arrays): each
    run of its class box (:func:`box_runs`) in groups of ``per_pe`` words, a chunk a group
    (``chunks_per_word`` chunks a word when the classes outnumber the lanes); a window's rows
    in chunks of ``W`` words.  Where the input's window slid (``slide_x``, ``slide_y``: bools
    or arrays of them, :func:`slides`), it loads only its new columns (``ext["X"] * stride_x``
    of each row) or its new rows (``ext["Y"] * stride_y`` of each channel)."""
    W = s.noc_words_per_cycle
    box = class_box(s, t, ing, ext, union)
    runs, length = box_runs(s, t, ing, box)
    n = ing.classes
    if ing.tensor == "input" and (s.slide_x or s.slide_y):      # (a row a run: box_runs)
        runs = _where(slide_y, box["C"] * ext["Y"] * t.stride_y, runs)
        length = _where(slide_x, ext["X"] * t.stride_x, length)
    if ing.window_x or ing.window_y:
        return runs * -(-(length * n) // W), runs * length * n
    return runs * -(-length // ing.per_pe) * active_phases(s, t, ing, union), runs * length * n


#: The input's axes a window slides along, with the filter's dimension along each.
SLIDE_FILTER = {"X": "S", "Y": "R"}


def slide_eligible(s, d: str) -> bool:
    """Whether structure ``s`` can keep its input's columns (``d = "X"``) or rows (``"Y"``) in its
    L1 as a window slides along ``d`` (``docs/timing.md``, "Load"): ``d`` is a loop that no level
    spreads, the filters may be wider than one, and the input's PEs do not hold windows of
    neighbouring rows.  Along ``X``, the input is sent a word of each class a chunk and not as an
    aligned window (the columns a step adds start at any column, which a PE's one bank takes at
    any row); along ``Y``, each row is a run of its own in every ingress."""
    ing = ingress(s, "input")
    if d in s.spatial or not any(x == d for _, x in s.loops) or s.pe_tile_max[SLIDE_FILTER[d]] <= 1 or ing.window_y:
        return False
    return d == "Y" or (not ing.window_x and ing.per_pe == 1)


def sliding(s, d: str) -> bool:
    """Whether structure ``s``'s input windows slide along ``d`` in L1."""
    return s.slide_x if d == "X" else s.slide_y


def slide_extent(s, d: str) -> int:
    """Columns (``d = "X"``) or rows (``"Y"``) of a PE's input L1 in a design whose windows slide
    along ``d`` (0 in any other): a power of two ``M``, each input column (row) ``i`` of the layer
    (padded) at ``i mod M``, with room for two windows side by side, the one computed and the
    next one, which a slide writes beside it (``T·s + (T-1)·s + F`` at a stride ``s < F`` that
    slides, ``T`` the largest tile, ``F`` the filter; any window at the largest stride)."""
    if not sliding(s, d):
        return 0
    T, F = s.pe_tile_max[d], s.pe_tile_max[SLIDE_FILTER[d]]
    slid = min(s.max_stride, F - 1)
    need = max(input_span(T, s.max_stride, F), T * slid + input_span(T, slid, F))
    return 1 << (need - 1).bit_length()


def l1_row_words(s) -> int:
    """Words of an input row in a PE's L1 in a sliding design (0 in any other): ``M`` columns
    along ``X``; a power of two along ``Y`` alone (the row's banks for an X window, else its
    largest row, padded), so that a row's place is a field of the L1 address."""
    if not (s.slide_x or s.slide_y):
        return 0
    ing = ingress(s, "input")
    if s.slide_x:
        return slide_extent(s, "X")
    if ing.window_x:
        return ing.banks
    cols = input_span(s.pe_tile_max["X"], s.max_stride, s.pe_tile_max["S"])
    return 1 << (-(-cols // ing.per_pe) * ing.per_pe - 1).bit_length()


def l1_input_fields(s) -> list[tuple[str, int]]:
    """``(name, bits)`` of the low fields of a sliding design's input L1 word address, each
    counted modulo its size: the column (:func:`l1_row_words` of them) and, where windows slide
    along ``Y``, the row (``M_y``); the channel above them.  Empty in any other design.  The
    loader places its runs and the compute engine adds its operands' addresses by them."""
    if not (s.slide_x or s.slide_y):
        return []
    out = [("col", (l1_row_words(s) - 1).bit_length())]
    if s.slide_y:
        out.append(("row", (slide_extent(s, "Y") - 1).bit_length()))
    return out


def slides(s, t, d: str, same, prev, now):
    """Whether a step's input load is a *slide* along ``d`` (integers, bools or numpy arrays): a
    design whose windows slide along ``d`` (:func:`slide_eligible`), a stride along ``d``
    narrower than the filter (windows overlap), the same positions as the step before along the
    input's other loop dims (``same``) and a start along ``d`` past its one (``prev`` < ``now``,
    in output coordinates): the odometer's tiles are side by side, so the new window starts
    ``F - stride`` before the last one's end and only its last ``T · stride`` are new."""
    stride = t.stride_x if d == "X" else t.stride_y
    if not sliding(s, d) or stride >= t.dims[SLIDE_FILTER[d]]:
        return np.zeros_like(np.asarray(same), dtype=bool) if np.ndim(same) else False
    return np.logical_and(same, np.asarray(now) > np.asarray(prev))


def active_phases(s, t, ing: Ingress, union: Mapping):
    """Chunks a word of ``ing``'s tensor takes in a step: with more classes than lanes, the
    ``W`` classes of a chunk are consecutive ones, so the loader sends only the chunks up to the
    last class with a tile in the step when one dimension interleaves the classes (its units
    ``0 .. ceil(union / tile) - 1``); all of them with two; 1 otherwise.  Integers or numpy
    arrays."""
    W = s.noc_words_per_cycle
    if ing.classes <= W:
        return 1
    if len(ing.interleaved) != 1:
        return ing.chunks_per_word
    d = ing.interleaved[0]
    active = -(-union[d] // spread_tile(s, t, d))
    return -(-active // W)


def padded_dim(s, t, d: str, ing: Ingress) -> int:
    """Dimension ``d`` of ``ing``'s tensor as L2 holds it: an interleaved one is padded to whole
    blocks of (units x tile)."""
    D = t.dims[d]
    if d not in ing.interleaved:
        return D
    block = spread_tile(s, t, d) * spread_units(s, d)
    return -(-D // block) * block


def l2_layout_words(s, t) -> dict[str, int]:
    """Words of each tensor as the host lays it out in L2 (interleaved dimensions padded to
    whole blocks: :func:`l2_axes`)."""
    d = t.dims
    out = {name: math.prod(b * n * w for _, b, n, w in l2_axes(s, t, ingress(s, name))) for name in ("input", "weight")}
    out["output"] = d["K"] * d["Y"] * d["X"]
    return out


def l2_axes(s, t, ing: Ingress):
    """Per axis of ``ing``'s tensor in L2 order (input ``C, rows, cols``; weight ``K, C, R, S``):
    ``(dim, blocks, units, within)``, the axis as L2 holds it being blocks x units x within
    (interleaved: blocks of units x tile, the last padded; else one block of one unit), which
    :func:`hwgen.layout.interleaved` orders blocks, within, units."""
    if ing.tensor == "input":
        axes = (("C", t.dims["C"]), ("Y", t.in_rows), ("X", t.in_cols))
    else:
        axes = (("K", t.dims["K"]), ("C", t.dims["C"]), ("R", t.dims["R"]), ("S", t.dims["S"]))
    out = []
    for d, size in axes:
        if d in ing.interleaved:
            n, w = spread_units(s, d), spread_tile(s, t, d)
            out.append((d, padded_dim(s, t, d, ing) // (n * w), n, w))
        else:
            out.append((d, 1, 1, size))
    return out


def l2_coefficients(s, t, ing: Ingress) -> dict[str, int]:
    """Where a class box starts in L2: the first word of PE (0, 0)'s tile is the sum over the
    tensor's loop dims of its start along them (an input's in input rows and columns) times
    these; and ``"run_<d>"``: the L2 words between consecutive positions along ``d`` inside a
    block (the strides of the loader's runs)."""
    axes = l2_axes(s, t, ing)
    n = ing.classes
    out = {}
    for i, (d, _, units, w) in enumerate(axes):
        inner = n * math.prod(a[3] for a in axes[i + 1:])
        out[f"run_{d}"] = inner
        if d in ing.interleaved:
            block = n * math.prod(a[3] for a in axes) * math.prod(a[1] for a in axes[i + 1:])
            out[d] = block // (units * w)
        else:
            out[d] = inner
    return out


def input_mode(s, t) -> int:
    """How the loader sends the input's class boxes, the same in every step of the layer
    (:func:`box_runs`): 0 a run per row, 1 a run per channel (the box spans whole rows), 2 one
    run (whole channels too).  A window is always 0, and so is a sliding design's input (its
    rows are at a pitch of :func:`l1_row_words`; a word of each class a chunk, so merged runs
    would take no fewer chunks)."""
    ing = ingress(s, "input")
    if ing.window_x or ing.window_y or s.slide_x or s.slide_y:
        return 0
    # (PE (0, 0)'s whole tile is the PE tile, t1: a dimension spread across clusters keeps it)
    rows = input_span(t.t1["Y"], t.stride_y, t.dims["R"])
    cols = input_span(t.t1["X"], t.stride_x, t.dims["S"])
    in_rows, in_cols = _block_rows_cols(s, t, ing)
    return 0 if cols != in_cols else 1 if rows != in_rows else 2


def weight_merged(s, t) -> bool:
    """Whether the loader sends a weight class box as one run (it holds every channel of its
    block), in every step of the layer; else a run per filter."""
    return t.t1["C"] == within(s, t, ingress(s, "weight"), "C")


def l1_pitches(s, t) -> dict[str, int]:
    """Words between consecutive rows and channels of a PE's input L1 and between its filters
    (the compute engine's strides, :mod:`hwgen.compute`): each run the loader sends starts a
    row of the PE's banks (:func:`box_runs`), so a run's words are padded to a multiple of the
    banks.  From the layer's whole PE tile (an edge tile leaves the rest unused)."""
    ing_in, ing_w = ingress(s, "input"), ingress(s, "weight")
    rows = input_span(t.t1["Y"], t.stride_y, t.dims["R"])
    cols = input_span(t.t1["X"], t.stride_x, t.dims["S"])

    def pad(v, P):
        return -(-v // P) * P
    mode, P = input_mode(s, t), ing_in.per_pe
    if s.slide_x or s.slide_y:
        # (each input column or row at its own modulo M: a slide writes the new ones beside the window)
        row = l1_row_words(s)
        ch = (slide_extent(s, "Y") or rows) * row
    elif ing_in.window_x or ing_in.window_y:
        # (a row of the union a run: the PE's rows are its window's, a row of banks each)
        row = ing_in.banks if ing_in.window_x else pad(cols, P)
        ch = rows * row
    elif mode == 0:
        row, ch = pad(cols, P), rows * pad(cols, P)
    elif mode == 1:
        row, ch = cols, pad(rows * cols, P)
    else:
        row, ch = cols, rows * cols
    crs = t.t1["C"] * t.dims["R"] * t.dims["S"]
    return {"in_row": row, "in_ch": ch, "w_k": crs if weight_merged(s, t) else pad(crs, ing_w.per_pe)}


def input_window_banks(s) -> int:
    """Banks of a PE's input L1 when the input is spread along ``X`` in overlapping windows: a
    bank per input column of its largest tile, rounded up to a power of two (an L1 row holds an
    input row of its window)."""
    cols = input_span(s.pe_tile_max["X"], s.max_stride, s.pe_tile_max["S"])
    return 1 << (cols - 1).bit_length()


def l1_shape(s) -> dict[str, tuple[int, int]]:
    """``(banks, rows)`` of a PE's L1 for the input and the weight (each double-buffered): a
    row of banks takes a chunk's words (:class:`Ingress`), each run the loader sends starts a
    row (:func:`l1_pitches`), so the rows bound the largest tile's runs."""
    t, out = s.pe_tile_max, {}
    rows = input_span(t["Y"], s.max_stride, t["R"])
    cols = input_span(t["X"], s.max_stride, t["S"])
    ing = ingress(s, "input")
    # (a window's row of banks holds an input row; else each input row starts a row of banks)
    row = -(-(l1_row_words(s) or (ing.banks if ing.window_x else cols)) // ing.banks)
    out["input"] = (ing.banks, t["C"] * (slide_extent(s, "Y") or rows) * row)
    P = ingress(s, "weight").per_pe
    out["weight"] = (P, t["K"] * -(-(t["C"] * t["R"] * t["S"]) // P))
    return out


def load_issue_cycles(runs, length, words_per_cycle: int):
    """Cycles the loader issues ``runs`` runs of ``length`` words, ``words_per_cycle`` a cycle
    (a run's last chunk may be short; runs never share a cycle)."""
    return runs * -(-length // words_per_cycle)


def input_span(tile, stride, filt):
    """Input rows (or columns) that ``tile >= 1`` output rows read: ``(tile-1)*stride + filt``
    (integers or numpy arrays)."""
    return (tile - 1) * stride + filt


def l1_words(pe_tile_max: Mapping[str, int], max_stride: int) -> dict[str, int]:
    """Words of one PE's L1 per tensor for its largest tile (each is double-buffered)."""
    t = pe_tile_max
    rows = input_span(t["Y"], max_stride, t["R"])
    cols = input_span(t["X"], max_stride, t["S"])
    return {"input": t["C"] * rows * cols, "weight": t["K"] * t["C"] * t["R"] * t["S"],
            "output": t["K"] * t["Y"] * t["X"]}


def l2_address_bits(l2_words: Mapping[str, int]) -> int:
    """Bits of the L2 word addresses the loader puts on the NoC: the input and weight regions'
    depth plus a bit, so a PE's distance from lane 0 (taken modulo 2**bits) is never negative
    by wrap-around."""
    return max(words for name, words in l2_words.items() if name != "output").bit_length() + 1


def host_offset_bits(l2_words: Mapping[str, int]) -> int:
    """Bits of the host bus's word offset within a region: ``bus_addr[:n]`` is the offset and
    ``bus_addr[n:n+4]`` the region; at least 20, and as wide as the largest L2 region needs."""
    return max(20, (max(l2_words.values()) - 1).bit_length())

#: Bits of one word of each tensor in the generated PEs (int8 x int8 -> int32).
WORD_BITS = {"input": 8, "weight": 8, "output": 32}


def l1_bytes(words: Mapping[str, int]) -> int:
    """Bytes of one PE's double-buffered L1 for tiles of ``words`` (int8 operands, int32 sums)."""
    return sum(2 * -(-words[k] * WORD_BITS[k] // 8) for k in WORD_BITS)

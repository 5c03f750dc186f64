"""The rules of the generated accelerator that every reader shares: the ``hwgen`` preset's
schedule (:mod:`.structure`, :mod:`.walk`, :mod:`.fast`), the RTL (:mod:`hwgen`) and the host
driver (:mod:`hwgen.layout`, :mod:`hwgen.host`) import them from here, so each is written once.

Dimensions are those of a convolution in output coordinates: ``K C Y X R S`` with ``Y``/``X``
the output rows/columns.  A GEMM ``out[M,N] = A[M,K] @ B[K,N]`` is the 1x1 convolution with
``K <- N``, ``C <- K``, ``Y = 1``, ``X <- M`` (A's rows along X, so they load as long runs).  ``docs/timing.md`` is the prose of the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping

import numpy as np

from ..base import AccelgenError
from ..workload.problem import CONV_TENSOR_DIMS

__all__ = ["HW_DIMS", "LOOP_DIMS", "OUTPUT_DIMS", "TENSOR_DIMS", "TENSOR_LOOP_DIMS", "ENGINES",
           "TimingConstants", "TIMING", "check_timing", "bounding_engine", "l1_words", "l1_bytes",
           "input_span", "host_offset_bits", "WORD_BITS", "slot_cycles", "drain_runs", "drain_latency", "reduction_levels", "input_runs", "weight_runs", "load_issue_cycles",
           "l2_address_bits"]

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
    #                                 four register stages
    compute_latency_cycles: int = 0  # the engine is busy only while it issues: the MAC pipeline
    #                                  (a broadcast register at each end, read L1, multiply,
    #                                  accumulate) overlaps the next step's issues (drain_wait_cycles)
    drain_wait_cycles: int = 3      # a step's drain starts three cycles after its slot's go: the
    #                                 last partial sums of the step are written by then
    drain_latency_cycles: int = 4   # the PEs' input register, their words selected (a register),
    #                                 the reduction tree (a register a level), moved to the L2 banks
    #                                 (a register), and added to the L2 words read two cycles
    #                                 before (the banks and a register): after the last issue,
    #                                 4 + max(levels - 1, 0)
    #                                 cycles with ``levels`` of reduction tree (drain_latency)
    start_delay_cycles: int = 3     # the controller starts three cycles after the host's start
    #                                 write: the configuration's products (Geometry.static) settle
    start_cycles: int = 7           # from the start write: the delay, then the controller's
    #                                 cycles before the first slot: the odometer runs two steps
    #                                 ahead of the step loaded, so step 0 takes two shifts (each
    #                                 after a cycle of register stage) to reach the loader
    #                                 (the drain's width is the structure's W: drain_runs)


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
    shared = 1
    for lv, n in enumerate((s.n0, s.n1)):
        if s.reduction_spatial[lv]:
            shared *= n
    return (shared - 1).bit_length()


def drain_latency(s, timing: TimingConstants | None = None) -> int:
    """Cycles the drain stays busy after its last issue, for structure ``s``: the timing's
    ``drain_latency_cycles`` (no tree, or a one-level tree) plus a cycle for each further level
    of the reduction tree."""
    timing = TIMING if timing is None else timing
    return timing.drain_latency_cycles + max(reduction_levels(s) - 1, 0)


def drain_runs(rows, run, words_per_cycle: int):
    """Collection cycles of ``rows`` rows of ``run`` output words along X, ``words_per_cycle``
    consecutive words a cycle (integers or numpy arrays; the last chunk of a row may be short)."""
    return rows * -(-run // words_per_cycle)


def input_runs(c, rows, cols, in_rows, in_cols):
    """``(runs, length)``: how the loader sends an input box of ``c`` channels x ``rows`` x
    ``cols`` from the ``[C][in_rows][in_cols]`` L2 layout, as runs of consecutive addresses:
    rows of ``cols`` words, whole-width rows of a channel merged into one run, whole channels
    into one run (integers or numpy arrays)."""
    full_cols = cols == in_cols
    full = full_cols & (rows == in_rows)
    runs = np.where(full, 1, np.where(full_cols, c, c * rows))
    length = np.where(full, c * rows * cols, np.where(full_cols, rows * cols, cols))
    return runs, length


def weight_runs(k, c, C, R, S):
    """``(runs, length)`` of a weight box of ``k`` filters x ``c`` channels in the ``[K][C][R][S]``
    layout: one run per filter of its ``c*R*S`` consecutive words, or one run of all ``k`` filters
    when ``c`` is every channel (integers or numpy arrays)."""
    full = c == C
    return np.where(full, 1, k), np.where(full, k * C * R * S, c * R * S)


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

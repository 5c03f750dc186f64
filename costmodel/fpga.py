"""FPGA resources of a generated accelerator estimated from its parameters, and the limits of
known FPGA parts (``docs/fpga.md``, "The resource model").

The model is linear in what a design point gives, with coefficients of its own for every dataflow
family the generator builds (:data:`FAMILIES`: their PEs and controllers differ), so that a search
evaluates it over millions of points with a few array operations, each point's coefficients
gathered by its family.  It was fitted from Yosys synthesis of generated designs by
``scripts/fit_fpga_model.py``, which writes it with its provenance (Yosys version and script,
the commit and generator digest, every design synthesised and the fit's residuals, per family)
to ``configs/fpga/<target>.yaml``.  For every resource but block RAM::

    fixed + per_pe x P + per_pe_lane x P x S + per_pe_noc_word x P x W + per_noc_word x W
          + per_output_bank x V + per_l2_row_bit x row bits

``P`` is the PE count, ``S`` the SIMD lanes, ``W`` the top NoC level's width in words a cycle: the
distribution bus and the L2's operand banks (one per word, :mod:`hwgen.l2`), and in ``xp`` and
``yxp`` the lanes a PE aligns its input window from.  ``V`` the output region's banks
(:func:`output_banks`: the drain's run, or more where a bank would be deeper than
``OUTPUT_BANK_ROWS``, at most ``W``), each with its read-modify-write.  ``row bits`` is the
address width of a bank's row in an operand region (``l2_split``: a quarter of L2's bytes in
each): the L2's counters and address paths grow with it.  Block RAMs are counted from the banks'
geometry instead (exact: each bank is one memory whose depth the L2's size, ``W`` and ``V`` fix, in block
RAM or, small, in LUT RAM, whichever the target's costs make cheaper), with the target's block
shapes and costs from the YAML file.  ``luts`` counts a LUT-RAM cell as the LUTs it
takes.  A library family the generator does not build (``yrp``) has no design: its figures are
infinite, as are those of an unlimited NoC width.

Nothing here imports Yosys or the generator: a model file is read once per process, when a
figure is first asked for.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .base import CONFIGS, AccelgenError, load_yaml, read_text
from .dataflow.library import LIBRARY
from .hardware.hardware import Hardware
from .hwgen_preset.structure import OUTPUT_BANK_ROWS

__all__ = ["FPGA_TARGETS", "FAMILIES", "TERMS", "RESOURCES", "FPGA_METRICS", "FpgaModel", "Part", "PARTS", "load_model",
           "model_from_dict", "find_part", "estimate", "estimate_arrays", "l2_rows", "l2_memories", "output_banks",
           "drain_run", "bit_length"]

#: FPGA targets of :mod:`accelgen.synth` (its ``generic`` one is no FPGA: memories as flip-flops);
#: a model file ``configs/fpga/<target>.yaml`` for each fitted (not ``ice40``: docs/fpga.md).
FPGA_TARGETS = ("ecp5", "ice40", "xilinx")
#: The dataflow families the generator builds, each with a model of its own (``yrp``'s
#: row-stationary map splits filter windows across PEs, which the generator refuses).
FAMILIES = ("kcp", "cp", "xp", "yxp", "nmk")
#: The linear model's terms, in the order they are added (the scalar and the array paths agree
#: to the bit).
TERMS = ("fixed", "per_pe", "per_pe_lane", "per_pe_noc_word", "per_noc_word", "per_output_bank", "per_l2_row_bit")
#: The families whose drain collects one word of each of up to ``W`` PEs a cycle (``xp``'s output
#: columns across the PEs: ``HwStructure.drain_across_groups``); the others' library templates
#: drain one word a cycle (one output column a PE: ``drain_lanes`` is ``min(W, X_t)``, ``X_t`` 1).
_DRAIN_ACROSS = ("xp",)
#: Resources with a linear model (block RAMs come from the L2's geometry).
RESOURCES = ("lut", "ff", "dsp", "lutram")
#: The figures a search bounds or minimises (``accelgen explore``), with their units.
FPGA_METRICS = {"luts": "LUTs", "ffs": "FFs", "dsps": "DSPs", "brams": "BRAMs"}
#: L2's regions as ``l2_split`` lays them out: bytes per word of a region's row count.
_OPERAND_BYTES_PER_WORD = 4       # input and weight regions: a quarter of the bytes each, int8
_OUTPUT_BYTES_PER_WORD = 8        # output region: half the bytes, int32


@dataclass(frozen=True)
class FpgaModel:
    """One target's fitted model (``configs/fpga/<target>.yaml``)."""

    target: str
    coefficients: Mapping[str, Mapping[str, Mapping[str, float]]]   # family -> resource -> term -> coefficient
    bram_blocks: Mapping[int, tuple[int, int]]        # word bits -> (rows a block holds, blocks side by side)
    bram_cost: int                                    # Yosys's cost of a block RAM (its techlib's memory map)
    lutram_cells: tuple[tuple[int, int, int], ...]    # LUT-RAM cells it can use: (rows, bits, cost)
    lutram_luts: int                                  # LUTs one LUT-RAM cell takes
    source: str


def _fail(where: str, message: str) -> AccelgenError:
    return AccelgenError(message, where=where)


def _number(where: str, path: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(where, f"{path} must be a finite number, not {value!r}")
    return float(value)


def _positive_int(where: str, path: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(where, f"{path} must be a positive integer, not {value!r}")
    return value


def model_from_dict(doc: Any, where: str) -> FpgaModel:
    """Validate a model document (the YAML file's ``target`` and ``model``; its provenance is
    read by people, not here)."""
    if not isinstance(doc, dict):
        raise _fail(where, f"expected a mapping with target and model, not {type(doc).__name__}")
    target = doc.get("target")
    if target not in FPGA_TARGETS:
        raise _fail(where, f"target must be one of {', '.join(FPGA_TARGETS)}, not {target!r}")
    model = doc.get("model")
    if not isinstance(model, dict):
        raise _fail(where, "model must be a mapping with families, bram_blocks, bram_cost, lutram_cells and "
                           "lutram_luts")
    families = model.get("families")
    if not isinstance(families, dict) or set(families) != set(FAMILIES):
        given = sorted(families) if isinstance(families, dict) else families
        raise _fail(where, f"model.families must give the coefficients of every family the generator builds "
                           f"({', '.join(FAMILIES)}), not {given!r}")
    coefficients: dict[str, dict[str, dict[str, float]]] = {}
    for family in FAMILIES:
        coefficients[family] = {}
        for resource in RESOURCES:
            path = f"model.families.{family}.{resource}"
            terms = families[family].get(resource) if isinstance(families[family], dict) else None
            if not isinstance(terms, dict):
                raise _fail(where, f"{path} must be a mapping of terms to coefficients, not {terms!r}")
            unknown = sorted(set(terms) - set(TERMS))
            if unknown:
                raise _fail(where, f"unknown term {unknown[0]!r} in {path} (allowed: {', '.join(TERMS)})")
            coefficients[family][resource] = {t: _number(where, f"{path}.{t}", terms.get(t, 0)) for t in TERMS}
    blocks = model.get("bram_blocks")
    if not isinstance(blocks, dict) or set(blocks) != {8, 32}:
        raise _fail(where, f"model.bram_blocks must give the block shape of 8- and 32-bit words, not {blocks!r}")
    bram: dict[int, tuple[int, int]] = {}
    for bits, shape in blocks.items():
        if not isinstance(shape, dict) or set(shape) != {"rows", "blocks"}:
            raise _fail(where, f"model.bram_blocks.{bits} must be {{rows: N, blocks: N}}, not {shape!r}")
        bram[bits] = (_positive_int(where, f"model.bram_blocks.{bits}.rows", shape["rows"]),
                      _positive_int(where, f"model.bram_blocks.{bits}.blocks", shape["blocks"]))
    cost = _positive_int(where, "model.bram_cost", model.get("bram_cost"))
    cells = model.get("lutram_cells")
    if not isinstance(cells, list) or not all(isinstance(c, dict) and set(c) == {"rows", "bits", "cost"}
                                              for c in cells):
        raise _fail(where, f"model.lutram_cells must be a list of {{rows: N, bits: N, cost: N}}, not {cells!r}")
    shapes = tuple(tuple(_positive_int(where, f"model.lutram_cells[{i}].{k}", c[k]) for k in ("rows", "bits", "cost"))
                   for i, c in enumerate(cells))
    lutram = model.get("lutram_luts")
    if isinstance(lutram, bool) or not isinstance(lutram, int) or lutram < 0:
        raise _fail(where, f"model.lutram_luts must be a non-negative integer, not {lutram!r}")
    return FpgaModel(target, coefficients, bram, cost, shapes, lutram, where)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=None)
def load_model(target: str) -> FpgaModel:
    """The fitted model of ``target`` (read once per process)."""
    if target not in FPGA_TARGETS:
        raise AccelgenError(f"unknown FPGA target {target!r}; expected one of {', '.join(FPGA_TARGETS)}",
                            where="--fpga-target")
    path = CONFIGS / "fpga" / f"{target}.yaml"
    if not path.exists():
        fitted = sorted(p.stem for p in (CONFIGS / "fpga").glob("*.yaml") if p.stem in FPGA_TARGETS)
        raise AccelgenError(f"no FPGA resource model for target {target!r} (fitted: {', '.join(fitted) or 'none'}; "
                            "docs/fpga.md, 'The resource model', says why and how to fit one)", where="--fpga-target")
    where = str(path)
    return model_from_dict(load_yaml(read_text(path, "an FPGA model"), where, empty="an FPGA model"), where)


# --- the L2's geometry (hwgen.l2.L2.build, with l2_split's regions) --------------------------------

def bit_length(values: np.ndarray) -> np.ndarray:
    """``int.bit_length`` of non-negative whole numbers held as float64 (exact: ``frexp``)."""
    return np.frexp(values)[1].astype(np.float64)


def drain_run(family: Any, num_pes: Any, noc_words: Any) -> Any:
    """Words the drain of ``family``'s library template collects a cycle (arrays, or scalars):
    one from each of up to ``W`` PEs for ``xp``, one otherwise (``family`` an array of names or
    one name)."""
    across = np.isin(np.asarray(family), _DRAIN_ACROSS)
    with np.errstate(invalid="ignore"):
        return np.where(across, np.minimum(np.asarray(noc_words, dtype=np.float64), num_pes), 1.0)


def output_banks(run: Any, l2_bytes: Any, noc_words: Any) -> np.ndarray:
    """Banks of the output region (``HwStructure.output_banks``, over arrays as float64): the
    drain's ``run`` rounded up to a power of two, or more where a bank would hold more than
    ``OUTPUT_BANK_ROWS`` rows, at most ``W`` (``W`` infinite: the larger of the two)."""
    words = (np.asarray(l2_bytes, dtype=np.int64) // _OUTPUT_BYTES_PER_WORD).astype(np.float64)
    rows = np.exp2(bit_length(np.maximum(1.0, np.ceil(words / OUTPUT_BANK_ROWS)) - 1))
    return np.minimum(np.asarray(noc_words, dtype=np.float64),
                      np.maximum(np.exp2(bit_length(np.asarray(run, dtype=np.float64) - 1)), rows))


def l2_rows(l2_bytes: int, noc_words: float, banks: float | None = None) -> tuple[int, int]:
    """Rows of a bank in an operand region and in the output region (``hwgen.l2``: ``W`` banks an
    operand region, ``banks`` the output region, ``W`` when not given; a region's words
    ``l2_split`` of ``l2_bytes``)."""
    operand = max(1, math.ceil((l2_bytes // _OPERAND_BYTES_PER_WORD) / noc_words))
    output = max(1, math.ceil((l2_bytes // _OUTPUT_BYTES_PER_WORD) / (banks or noc_words)))
    return operand, output


def l2_memories(model: FpgaModel, l2_bytes: np.ndarray, noc_words: np.ndarray,
                run: Any = 1.0) -> dict[str, np.ndarray]:
    """An operand bank's row bits, the output region's banks (``run``: the drain's words a
    cycle, :func:`drain_run`), and the L2's block RAMs and LUT-RAM cells, per point (arrays, or
    0-d arrays for one).  An operand bank holds one region's rows up to a power of two, then the
    other's (8-bit words); an output bank its region's (32-bit).  Yosys maps a bank to whichever
    its techlib's costs make cheaper: block RAMs, or the fewest LUT-RAM cells (a small bank; a
    tie goes to block RAM).  An unlimited width has infinite block RAMs and no row bits."""
    l2 = np.asarray(l2_bytes, dtype=np.int64)
    words = np.asarray(noc_words, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        banks = output_banks(run, l2, words)
        operand = np.maximum(1.0, np.ceil((l2 // _OPERAND_BYTES_PER_WORD) / words))
        output = np.maximum(1.0, np.ceil((l2 // _OUTPUT_BYTES_PER_WORD) / banks))
        split = bit_length(operand - 1)
        brams = cells = np.zeros_like(words)
        for bits, depth, count in ((8, np.exp2(split) + operand, words), (32, output, banks)):
            per_block, side = model.bram_blocks[bits]
            blocks = side * np.ceil(depth / per_block)
            lut_cost, lut_cells = np.full_like(words, np.inf), np.zeros_like(words)
            for rows, width, cost in model.lutram_cells:
                n = np.ceil(depth / rows) * math.ceil(bits / width)
                lut_cells = np.where(n * cost < lut_cost, n, lut_cells)
                lut_cost = np.minimum(n * cost, lut_cost)
            in_lutram = lut_cost < blocks * model.bram_cost
            brams = brams + count * np.where(in_lutram, 0.0, blocks)
            cells = cells + count * np.where(in_lutram, lut_cells, 0.0)
        unlimited = np.isinf(words)
        return {"row_bits": np.where(unlimited, 0.0, split), "output_banks": banks,
                "brams": np.where(unlimited, np.inf, brams), "lutram_cells": np.where(unlimited, 0.0, cells)}


# --- the estimate -----------------------------------------------------------------------------------

def _linear(c: Mapping[str, Any], pes: Any, lanes: Any, words: Any, banks: Any, row_bits: Any) -> Any:
    # (a term whose coefficient is 0 adds 0, not 0 x inf: a resource with no NoC term stays finite
    # at an unlimited NoC width)
    def times(term: str, value: Any) -> Any:
        if isinstance(c[term], np.ndarray):
            return np.where(c[term] == 0, 0.0, c[term] * value)
        return c[term] * value if c[term] else 0.0
    return ((((((c["fixed"] + c["per_pe"] * pes) + c["per_pe_lane"] * (pes * lanes))
                + times("per_pe_noc_word", pes * words)) + times("per_noc_word", words))
             + times("per_output_bank", banks)) + c["per_l2_row_bit"] * row_bits)


def _check_family(family: str) -> bool:
    """Whether the generator builds ``family`` (a library family it does not has no figures)."""
    if family in FAMILIES:
        return True
    if family not in LIBRARY:
        raise AccelgenError(f"unknown dataflow family {family!r}; expected one of {', '.join(LIBRARY)}",
                            where="FPGA resource model")
    return False


def estimate(hw: Hardware, target: str = "ecp5", *, family: str, model: FpgaModel | None = None) -> dict[str, float]:
    """``luts``, ``ffs``, ``dsps`` and ``brams`` of the design generated for ``hw`` with the
    dataflow ``family`` on ``target`` (whole numbers; infinite for an unlimited NoC width or a
    family the generator does not build).  ``model``: another than the target's file (a fit's)."""
    model = model or load_model(target)
    if not _check_family(family):
        return {k: math.inf for k in FPGA_METRICS}
    words = hw.noc_at(0).bandwidth_words_per_cycle
    run = drain_run(family, hw.num_pes, words)
    l2 = {k: float(v) for k, v in l2_memories(model, np.asarray(hw.l2_bytes), np.asarray(words), run).items()}
    c = model.coefficients[family]
    linear = {r: _linear(c[r], hw.num_pes, hw.simd_lanes, words, l2["output_banks"], l2["row_bits"])
              for r in RESOURCES}
    figures = {"luts": linear["lut"] + model.lutram_luts * (linear["lutram"] + l2["lutram_cells"]),
               "ffs": linear["ff"], "dsps": linear["dsp"], "brams": l2["brams"]}
    return {k: float(round(v)) if math.isfinite(v) else v for k, v in figures.items()}


def estimate_arrays(target: str, families: Sequence[str], family: np.ndarray, num_pes: np.ndarray,
                    simd_lanes: np.ndarray, noc_words: np.ndarray, l2_bytes: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`estimate` over arrays of points (float64, equal to it point by point): point ``i``'s
    family is ``families[family[i]]`` (its coefficients gathered by that index)."""
    model = load_model(target)
    built = np.array([_check_family(f) for f in families] + [False], dtype=bool)
    index = np.where(built[np.asarray(family, dtype=np.int64)], np.asarray(family, dtype=np.int64), len(families))
    # one row of coefficients per family (a row of zeros for one not built), then each point's row
    c = {r: {t: np.array([model.coefficients[f][r][t] if b else 0.0 for f, b in zip(families, built)] + [0.0])[index]
             for t in TERMS} for r in RESOURCES}
    pes = np.asarray(num_pes, dtype=np.float64)
    lanes = np.asarray(simd_lanes, dtype=np.float64)
    words = np.asarray(noc_words, dtype=np.float64)
    names = np.array([*families, ""])[index]
    l2 = l2_memories(model, np.asarray(l2_bytes, dtype=np.int64), words, drain_run(names, pes, words))
    with np.errstate(invalid="ignore", over="ignore"):
        linear = {r: _linear(c[r], pes, lanes, words, l2["output_banks"], l2["row_bits"]) for r in RESOURCES}
        figures = {"luts": linear["lut"] + model.lutram_luts * (linear["lutram"] + l2["lutram_cells"]),
                   "ffs": linear["ff"], "dsps": linear["dsp"], "brams": l2["brams"]}
        none = index == len(families)
        return {k: np.where(none, np.inf, np.rint(v)) for k, v in figures.items()}


# --- parts ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Part:
    """An FPGA and what it holds: LUTs (LUT4 on ECP5 and iCE40, LUT6 on 7-series), flip-flops,
    multipliers (MULT18X18D, SB_MAC16, DSP48E1) and block RAMs (18 Kbit DP16KD, 4 Kbit
    SB_RAM40_4K, 18 Kbit RAMB18E1: a RAMB36E1 is two), as :mod:`accelgen.synth` counts them."""

    name: str
    target: str
    luts: int
    ffs: int
    dsps: int
    brams: int
    source: str

    def limits(self) -> dict[str, int]:
        return {"luts": self.luts, "ffs": self.ffs, "dsps": self.dsps, "brams": self.brams}


_ECP5 = "Lattice FPGA-DS-02012 (ECP5 family data sheet), table 1.1; two LUT4s and two FFs a slice"
_ICE40_UP = "Lattice FPGA-DS-02008 (iCE40 UltraPlus data sheet), table 1.1; EBR only (SPRAM is not inferred)"
_ICE40_HX = "Lattice FPGA-DS-02029 (iCE40 LP/HX data sheet), table 1.1"
_XC7 = "AMD/Xilinx DS180 (7 Series FPGAs overview), tables 3 and 5; 36 Kbit block RAMs counted as two 18 Kbit"
#: Known parts, by name.  ECP5 LUT counts are the devices' slices x 2 (nextpnr's chip databases)
#: but the 12F's, which the data sheet gives in thousands only.
PARTS: dict[str, Part] = {p.name: p for p in (
    Part("LFE5U-12F", "ecp5", 12_000, 12_000, 28, 32, _ECP5),
    Part("LFE5U-25F", "ecp5", 24_288, 24_288, 28, 56, _ECP5),
    Part("LFE5U-45F", "ecp5", 43_848, 43_848, 72, 108, _ECP5),
    Part("LFE5U-85F", "ecp5", 83_640, 83_640, 156, 208, _ECP5),
    Part("iCE40UP5K", "ice40", 5_280, 5_280, 8, 30, _ICE40_UP),
    Part("iCE40HX8K", "ice40", 7_680, 7_680, 0, 32, _ICE40_HX),
    Part("xc7a35t", "xilinx", 20_800, 41_600, 90, 100, _XC7),
    Part("xc7a100t", "xilinx", 63_400, 126_800, 240, 270, _XC7),
    Part("xc7a200t", "xilinx", 134_600, 269_200, 740, 730, _XC7),
    Part("xc7z020", "xilinx", 53_200, 106_400, 220, 280, _XC7),
)}


def find_part(name: str) -> Part:
    """The part named ``name`` (any case)."""
    for part in PARTS.values():
        if part.name.lower() == name.strip().lower():
            return part
    raise AccelgenError(f"unknown part {name!r}; expected one of {', '.join(PARTS)}", where="--part")

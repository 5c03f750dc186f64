"""FPGA resources of a generated accelerator estimated from its parameters, and the limits of
known FPGA parts (``docs/fpga.md``, "The resource model").

The model is linear in what a design point gives, so that a search evaluates it over millions of
points with a few array operations; it was fitted from Yosys synthesis of generated designs by
``scripts/fit_fpga_model.py``, which writes it with its provenance (Yosys version and script,
the commit and generator digest, every design synthesised and the fit's residuals) to
``configs/fpga/<target>.yaml``.  For every resource but block RAM::

    fixed + per_pe x PEs + per_pe_lane x PEs x SIMD lanes + per_noc_word x W + per_l2_row_bit x row bits

``W`` is the top NoC level's width in words a cycle: the distribution bus and the L2's banks (one
operand and one output bank per word, :mod:`hwgen.l2`).  ``row bits`` is the address width of a
bank's row in an operand region (``l2_split``: a quarter of L2's bytes in each): the L2's
counters and address paths grow with it.  Block RAMs are counted from the banks' geometry
instead (exact: each bank is one memory whose depth the L2's size and ``W`` fix), with the
target's block shapes from the YAML file.  ``luts`` counts a LUT-RAM cell as the LUTs it takes.

Nothing here imports Yosys or the generator: a model file is read once per process, when a
figure is first asked for.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .base import CONFIGS, AccelgenError, load_yaml, read_text
from .hardware.hardware import Hardware

__all__ = ["FPGA_TARGETS", "TERMS", "RESOURCES", "FPGA_METRICS", "FpgaModel", "Part", "PARTS", "load_model",
           "model_from_dict", "find_part", "estimate", "estimate_arrays", "l2_rows", "bit_length"]

#: FPGA targets of :mod:`accelgen.synth` (its ``generic`` one is no FPGA: memories as flip-flops);
#: a model file ``configs/fpga/<target>.yaml`` for each fitted (not ``ice40``: docs/fpga.md).
FPGA_TARGETS = ("ecp5", "ice40", "xilinx")
#: The linear model's terms, in the order they are added (the scalar and the array paths agree
#: to the bit).
TERMS = ("fixed", "per_pe", "per_pe_lane", "per_noc_word", "per_l2_row_bit")
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
    coefficients: Mapping[str, Mapping[str, float]]   # resource -> term -> coefficient
    bram_blocks: Mapping[int, tuple[int, int]]        # word bits -> (rows a block holds, blocks side by side)
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
        raise _fail(where, "model must be a mapping of resources to coefficients")
    coefficients: dict[str, dict[str, float]] = {}
    for resource in RESOURCES:
        terms = model.get(resource)
        if not isinstance(terms, dict):
            raise _fail(where, f"model.{resource} must be a mapping of terms to coefficients, not {terms!r}")
        unknown = sorted(set(terms) - set(TERMS))
        if unknown:
            raise _fail(where, f"unknown term {unknown[0]!r} in model.{resource} (allowed: {', '.join(TERMS)})")
        coefficients[resource] = {t: _number(where, f"model.{resource}.{t}", terms.get(t, 0)) for t in TERMS}
    blocks = model.get("bram_blocks")
    if not isinstance(blocks, dict) or set(blocks) != {8, 32}:
        raise _fail(where, f"model.bram_blocks must give the block shape of 8- and 32-bit words, not {blocks!r}")
    bram: dict[int, tuple[int, int]] = {}
    for bits, shape in blocks.items():
        if not isinstance(shape, dict) or set(shape) != {"rows", "blocks"}:
            raise _fail(where, f"model.bram_blocks.{bits} must be {{rows: N, blocks: N}}, not {shape!r}")
        bram[bits] = (_positive_int(where, f"model.bram_blocks.{bits}.rows", shape["rows"]),
                      _positive_int(where, f"model.bram_blocks.{bits}.blocks", shape["blocks"]))
    lutram = model.get("lutram_luts")
    if isinstance(lutram, bool) or not isinstance(lutram, int) or lutram < 0:
        raise _fail(where, f"model.lutram_luts must be a non-negative integer, not {lutram!r}")
    return FpgaModel(target, coefficients, bram, lutram, where)


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


def l2_rows(l2_bytes: int, noc_words: float) -> tuple[int, int]:
    """Rows of a bank in an operand region and in the output region (``hwgen.l2``: ``W`` banks a
    region, a region's words ``l2_split`` of ``l2_bytes``)."""
    operand = max(1, math.ceil((l2_bytes // _OPERAND_BYTES_PER_WORD) / noc_words))
    output = max(1, math.ceil((l2_bytes // _OUTPUT_BYTES_PER_WORD) / noc_words))
    return operand, output


def _blocks(model: FpgaModel, bits: int, rows: Any) -> Any:
    per_block, side = model.bram_blocks[bits]
    return side * np.ceil(rows / per_block) if isinstance(rows, np.ndarray) else side * math.ceil(rows / per_block)


# --- the estimate -----------------------------------------------------------------------------------

def _linear(c: Mapping[str, float], pes: Any, lanes: Any, words: Any, row_bits: Any) -> Any:
    # (a resource with no NoC term stays finite at an unlimited NoC width)
    per_word = c["per_noc_word"] * words if c["per_noc_word"] else 0.0
    return ((((c["fixed"] + c["per_pe"] * pes) + c["per_pe_lane"] * (pes * lanes)) + per_word)
            + c["per_l2_row_bit"] * row_bits)


def estimate(hw: Hardware, target: str = "ecp5") -> dict[str, float]:
    """``luts``, ``ffs``, ``dsps`` and ``brams`` of the design generated for ``hw`` on ``target``
    (whole numbers; infinite for an unlimited NoC width)."""
    model = load_model(target)
    words = hw.noc_at(0).bandwidth_words_per_cycle
    c = model.coefficients
    if math.isinf(words):
        linear = {r: _linear(c[r], hw.num_pes, hw.simd_lanes, words, 0.0) for r in RESOURCES}
        brams = math.inf
    else:
        operand, output = l2_rows(hw.l2_bytes, words)
        row_bits = float((operand - 1).bit_length())
        linear = {r: _linear(c[r], hw.num_pes, hw.simd_lanes, words, row_bits) for r in RESOURCES}
        split = (operand - 1).bit_length()          # the operand bank: one region's rows, then the other's
        brams = words * (_blocks(model, 8, (1 << split) + operand) + _blocks(model, 32, output))
    figures = {"luts": linear["lut"] + model.lutram_luts * linear["lutram"], "ffs": linear["ff"],
               "dsps": linear["dsp"], "brams": brams}
    return {k: float(round(v)) if math.isfinite(v) else v for k, v in figures.items()}


def estimate_arrays(target: str, num_pes: np.ndarray, simd_lanes: np.ndarray, noc_words: np.ndarray,
                    l2_bytes: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`estimate` over arrays of points (float64, equal to it point by point)."""
    model = load_model(target)
    pes = np.asarray(num_pes, dtype=np.float64)
    lanes = np.asarray(simd_lanes, dtype=np.float64)
    words = np.asarray(noc_words, dtype=np.float64)
    l2 = np.asarray(l2_bytes, dtype=np.int64)
    c = model.coefficients
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        operand = np.maximum(1.0, np.ceil((l2 // _OPERAND_BYTES_PER_WORD) / words))
        output = np.maximum(1.0, np.ceil((l2 // _OUTPUT_BYTES_PER_WORD) / words))
        split = bit_length(operand - 1)
        row_bits = np.where(np.isinf(words), 0.0, split)
        linear = {r: _linear(c[r], pes, lanes, words, row_bits) for r in RESOURCES}
        brams = words * (_blocks(model, 8, np.exp2(split) + operand) + _blocks(model, 32, output))
        brams = np.where(np.isinf(words), np.inf, brams)
        figures = {"luts": linear["lut"] + model.lutram_luts * linear["lutram"], "ffs": linear["ff"],
                   "dsps": linear["dsp"], "brams": brams}
        return {k: np.rint(v) for k, v in figures.items()}


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

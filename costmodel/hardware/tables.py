"""Energy and area coefficients, each with the citation it came from.

Energies are pJ per action and areas um^2. The memory, NoC and DRAM energies of a table are per
access of one word of ``word_bits`` bits; :meth:`EnergyTable.per_word_pj` rescales them linearly to
another width (an SRAM or DRAM access costs about in proportion to the bits moved, for a fixed
array). ``word_bits=None`` means the figures are per element whatever its width (MAESTRO's
convention: it has no datatype width). The MAC energy and area are for the widths named in their
source (8b x 8b multiply, 32-bit accumulate) and are not rescaled.

This module also holds the small field checkers shared with :mod:`costmodel.hardware`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Literal, Mapping

from ..base import AccelgenError

__all__ = [
    "EnergyTable",
    "AreaTable",
    "ENERGY_45NM_HOROWITZ",
    "ENERGY_MAESTRO_RELATIVE",
    "AREA_45NM_HOROWITZ",
    "ENERGY_TABLES",
    "AREA_TABLES",
    "EnergyCoefficient",
]

#: Integers above this are refused: every count stays exact as a float (2**53).
MAX_INT = 2**53
#: Widest datum the model accepts, in bits.
MAX_BITS = 64

EnergyCoefficient = Literal[
    "mac_pj", "l1_read_pj", "l1_write_pj", "l2_read_pj", "l2_write_pj",
    "noc_pj_per_word_hop", "dram_pj_per_word",
]


# --- checkers: each returns the value it accepts or raises a one-line AccelgenError ------------

def show(value: object) -> str:
    """``repr`` of an offending value, shortened so that the message stays readable."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def fail(where: str | None, path: str, expected: str, value: object) -> AccelgenError:
    return AccelgenError(f"{path} must be {expected}, not {show(value)}", where=where)


def check_int(where: str | None, path: str, value: object, *, minimum: int) -> int:
    expected = {0: "a non-negative integer", 1: "a positive integer"}.get(minimum, f"an integer >= {minimum}")
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise fail(where, path, expected, value)
    if value > MAX_INT:
        raise fail(where, path, f"{expected} no larger than 2**53", value)
    return value


def check_bits(where: str | None, path: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BITS:
        raise fail(where, path, f"an integer from 1 to {MAX_BITS}", value)
    return value


def check_number(where: str | None, path: str, value: object, *, positive: bool,
                 allow_inf: bool = False) -> float | int:
    """A finite number (``> 0`` if ``positive`` else ``>= 0``); with ``allow_inf`` also
    ``math.inf`` or the strings ``'inf'`` / ``'.inf'`` (any case), returned as ``math.inf``."""
    expected = "a positive number" if positive else "a non-negative number"
    if allow_inf:
        expected += " or 'inf'"
        if isinstance(value, str) and value.strip().lower() in ("inf", ".inf", "+inf", "+.inf"):
            return math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(where, path, expected, value)
    if isinstance(value, int) and value > MAX_INT:
        raise fail(where, path, f"{expected} no larger than 2**53", value)
    number: float | int = value
    if math.isnan(number) or (math.isinf(number) and not allow_inf) or number < 0 \
            or (positive and number == 0):
        raise fail(where, path, expected, value)
    return number


def check_bool(where: str | None, path: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise fail(where, path, "true or false", value)
    return value


def check_text(where: str | None, path: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise fail(where, path, "a non-empty string", value)
    return value


# --- tables ------------------------------------------------------------------------------------

def _check_sources(where: str, coefficients: tuple[str, ...], sources: object) -> dict[str, str]:
    if not isinstance(sources, Mapping):
        raise fail(where, "sources", "a mapping of coefficient name to citation", sources)
    extra = sorted(str(k) for k in sources if k not in coefficients)
    if extra:
        raise AccelgenError(f"sources has no coefficient named {extra[0]!r} "
                            f"(allowed: {', '.join(coefficients)})", where=where)
    for name in coefficients:
        check_text(where, f"sources[{name!r}]", sources.get(name))
    return {name: sources[name] for name in coefficients}


@dataclass(frozen=True, kw_only=True)
class EnergyTable:
    """pJ per action. Memory, NoC and DRAM figures are per ``word_bits``-bit word (see module doc)."""

    mac_pj: float
    l1_read_pj: float
    l1_write_pj: float
    l2_read_pj: float
    l2_write_pj: float
    noc_pj_per_word_hop: float
    dram_pj_per_word: float
    word_bits: int | None
    sources: Mapping[str, str] = field(hash=False)  # coefficient name -> citation

    def __post_init__(self) -> None:
        where = "EnergyTable"
        for name in self.coefficient_names():
            check_number(where, name, getattr(self, name), positive=False)
        if self.word_bits is not None:
            check_bits(where, "word_bits", self.word_bits)
        # A plain dict (not a mapping proxy) keeps the table picklable for parallel search.
        object.__setattr__(self, "sources", _check_sources(where, self.coefficient_names(), self.sources))

    @staticmethod
    def coefficient_names() -> tuple[str, ...]:
        return tuple(f.name for f in fields(EnergyTable) if f.name not in ("word_bits", "sources"))

    def per_word_pj(self, coefficient: EnergyCoefficient, bits: int) -> float:
        """The energy of one action on a ``bits``-bit word: linear in width for memory, NoC and
        DRAM when the table has a ``word_bits``; the MAC and width-free tables are returned as is."""
        value = float(getattr(self, coefficient))
        if coefficient == "mac_pj" or self.word_bits is None:
            return value
        return value * bits / self.word_bits


@dataclass(frozen=True, kw_only=True)
class AreaTable:
    """um^2 per component; see :meth:`costmodel.hardware.Hardware.area_mm2` for how they add up."""

    mac_um2: float            # one multiplier + accumulator (one SIMD lane)
    l1_um2_per_byte: float    # per-PE scratchpad
    l2_um2_per_byte: float    # shared global buffer
    noc_um2_per_pe: float     # distribution / collection network share of one PE
    controller_um2: float     # one controller for the whole array
    sources: Mapping[str, str] = field(hash=False)

    def __post_init__(self) -> None:
        where = "AreaTable"
        for name in self.coefficient_names():
            check_number(where, name, getattr(self, name), positive=False)
        object.__setattr__(self, "sources", _check_sources(where, self.coefficient_names(), self.sources))

    @staticmethod
    def coefficient_names() -> tuple[str, ...]:
        return tuple(f.name for f in fields(AreaTable) if f.name != "sources")


_HOROWITZ = 'M. Horowitz, "Computing\'s energy problem (and what we can do about it)", ISSCC 2014'
_EYERISS = ('Y.-H. Chen, J. Emer, V. Sze, "Eyeriss: a spatial architecture for energy-efficient '
            'dataflow for CNNs", ISCA 2016, normalized energy per access (65 nm, 16-bit): '
            'RF 1x, PE-to-PE 2x, global buffer 6x, DRAM 200x a MAC')
_MAESTRO = ('MAESTRO (Kwon et al., MICRO 2019; maestro-project/maestro @4eb08d1), energy printed in '
            'units of one MAC from its Cacti-based tables (28 nm): total = 18.61 x L2 accesses + '
            '1.68 x L1 accesses + MACs; per element, no datatype width')

#: Default: 45 nm figures, per 8-bit word. Horowitz quotes memory per 64-bit access; those are
#: scaled by 8/64.
ENERGY_45NM_HOROWITZ = EnergyTable(
    mac_pj=0.2 + 0.1,
    l1_read_pj=10.0 * 8 / 64,
    l1_write_pj=10.0 * 8 / 64,
    l2_read_pj=100.0 * 8 / 64,
    l2_write_pj=100.0 * 8 / 64,
    noc_pj_per_word_hop=2 * (0.2 + 0.1),
    dram_pj_per_word=1300.0 * 8 / 64,
    word_bits=8,
    sources={
        "mac_pj": f"{_HOROWITZ}, energy table, 45 nm 0.9 V: 8-bit int mult 0.2 pJ + 32-bit int add "
                  "0.1 pJ (8b x 8b multiply, 32-bit accumulate) = 0.3 pJ",
        "l1_read_pj": f"{_HOROWITZ}, 45 nm: 8 KB SRAM/cache 10 pJ per 64-bit access, x 8/64 = 1.25 pJ "
                      "per 8-bit word; an upper bound for an L1 smaller than 8 KB",
        "l1_write_pj": f"{_HOROWITZ}, 45 nm: 8 KB SRAM 10 pJ per 64-bit access, x 8/64; write taken "
                       "equal to read (the source gives one figure per access)",
        "l2_read_pj": f"{_HOROWITZ}, 45 nm: 1 MB SRAM/cache ~100 pJ per 64-bit access, x 8/64 = "
                      "12.5 pJ per 8-bit word",
        "l2_write_pj": f"{_HOROWITZ}, 45 nm: 1 MB SRAM ~100 pJ per 64-bit access, x 8/64; write taken "
                       "equal to read",
        "noc_pj_per_word_hop": f"approximate: {_EYERISS}; PE-to-PE = 2 x this table's 0.3 pJ MAC "
                               "= 0.6 pJ per word per hop",
        "dram_pj_per_word": f"{_HOROWITZ}, 45 nm: DRAM 1.3-2.6 nJ per 64-bit access, low end "
                            "1.3 nJ x 8/64 = 162.5 pJ per 8-bit word",
    },
)

#: MAESTRO's own ratios, one MAC = 1 pJ-equivalent, so totals equal its printed energy columns.
ENERGY_MAESTRO_RELATIVE = EnergyTable(
    mac_pj=1.0,
    l1_read_pj=1.68,
    l1_write_pj=1.68,
    l2_read_pj=18.61,
    l2_write_pj=18.61,
    noc_pj_per_word_hop=0.0,
    dram_pj_per_word=0.0,
    word_bits=None,
    sources={
        "mac_pj": f"{_MAESTRO}: MAC = 1 unit",
        "l1_read_pj": f"{_MAESTRO}: L1 read = 1.68 units",
        "l1_write_pj": f"{_MAESTRO}: L1 write = 1.68 units",
        "l2_read_pj": f"{_MAESTRO}: L2 read = 18.61 units",
        "l2_write_pj": f"{_MAESTRO}: L2 write = 18.61 units",
        "noc_pj_per_word_hop": f"{_MAESTRO}: NoC traffic is not charged (0)",
        "dram_pj_per_word": f"{_MAESTRO}: off-chip traffic is not in its energy total (0), so that "
                            "totals match its figures; Eyeriss would suggest ~200 units",
    },
)

#: 45 nm areas. Arithmetic from Horowitz; SRAM and wiring are estimates, marked approximate.
AREA_45NM_HOROWITZ = AreaTable(
    mac_um2=282.0 + 137.0,
    l1_um2_per_byte=8.0,
    l2_um2_per_byte=4.0,
    noc_um2_per_pe=430.0,
    controller_um2=16_000.0,
    sources={
        "mac_um2": f"{_HOROWITZ}, area table, 45 nm: 8-bit int mult 282 um^2 + 32-bit int add "
                   "137 um^2 = 419 um^2 (accumulator register not counted)",
        "l1_um2_per_byte": "approximate: Intel 45 nm 6T bit cell 0.346 um^2 (Mistry et al., IEDM "
                           "2007) x 8 bits / ~35% array efficiency of a small (<=1 KB) scratchpad "
                           "~= 8 um^2 per byte",
        "l2_um2_per_byte": "approximate: Intel 45 nm 6T bit cell 0.346 um^2 (Mistry et al., IEDM "
                           "2007) x 8 bits / ~70% array efficiency of a large SRAM macro ~= 4 um^2 "
                           "per byte",
        "noc_um2_per_pe": "approximate: one 48-bit pipeline register per PE (8b input + 8b weight + "
                          "32b psum) x ~4.5 um^2 per flip-flop (NanGate 45 nm open cell library "
                          "DFF_X1), doubled for multiplexers and wiring ~= 430 um^2",
        "controller_um2": "approximate assumption, no published figure: ~20k NAND2-equivalent gates "
                          "(sequencer, address generators) x ~0.8 um^2 (NanGate 45 nm NAND2_X1) "
                          "~= 16000 um^2",
    },
)

#: Names accepted by ``energy:`` / ``area:`` in a hardware YAML file.
ENERGY_TABLES: Mapping[str, EnergyTable] = {
    "horowitz45": ENERGY_45NM_HOROWITZ,
    "maestro": ENERGY_MAESTRO_RELATIVE,
}
AREA_TABLES: Mapping[str, AreaTable] = {
    "horowitz45": AREA_45NM_HOROWITZ,
}

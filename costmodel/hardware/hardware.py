"""Hardware: the accelerator's parameters (PEs, buffers, NoC per cluster level, widths, clock) and
its energy and area tables, loaded from YAML and validated at the door.

Every check raises :class:`~costmodel._errors.AccelgenError` with one line that names the input
(file), the field path, the offending value and what was expected, e.g.
``configs/hw/x.yaml: noc[0].bandwidth_words_per_cycle must be a positive number or 'inf', not -3``.
"""

from __future__ import annotations

import math
import operator
import os
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, Mapping

from ..base import CONFIGS, AccelgenError, load_yaml, read_text
from .tables import (
    AREA_45NM_HOROWITZ,
    AREA_TABLES,
    ENERGY_45NM_HOROWITZ,
    ENERGY_TABLES,
    AreaTable,
    EnergyTable,
    check_bits,
    check_bool,
    check_int,
    check_number,
    check_text,
    fail,
    show,
)

__all__ = [
    "NoCLevel",
    "transfer_cycles",
    "Hardware",
    "BuiltinHardware",
    "BUILTIN_HARDWARE",
    "load_hardware",
    "hardware_from_dict",
    "hardware_from_yaml",
    "hardware_to_dict",
    "builtin_hardware",
]

BuiltinHardware = Literal["tiny", "small", "large", "maestro_ref"]
BUILTIN_HARDWARE: tuple[BuiltinHardware, ...] = ("tiny", "small", "large", "maestro_ref")


@dataclass(frozen=True)
class NoCLevel:
    """The network that feeds one cluster level."""

    bandwidth_words_per_cycle: float  # > 0; math.inf = unlimited
    latency_cycles: int               # >= 0, per hop
    hops: int = 1                     # >= 1

    def __post_init__(self) -> None:
        where = "NoCLevel"
        check_number(where, "bandwidth_words_per_cycle", self.bandwidth_words_per_cycle,
                     positive=True, allow_inf=True)
        check_int(where, "latency_cycles", self.latency_cycles, minimum=0)
        check_int(where, "hops", self.hops, minimum=1)

    def delay_cycles(self, words: int) -> int:
        """MAESTRO's rule: ``0`` for no words, else ``hops * latency + ceil(words / bw) - 1``
        (``hops * latency`` when the bandwidth is unlimited). Exact for any word count."""
        if isinstance(words, bool):
            raise fail("NoCLevel", "words", "a non-negative integer", words)
        try:
            count = operator.index(words)
        except TypeError:
            raise fail("NoCLevel", "words", "a non-negative integer", words) from None
        if count < 0:
            raise fail("NoCLevel", "words", "a non-negative integer", words)
        if count == 0:
            return 0
        return self.hops * self.latency_cycles + transfer_cycles(count, self.bandwidth_words_per_cycle) - 1


def transfer_cycles(words: int, bandwidth: float) -> int:
    """``ceil(words / bandwidth)`` sends, exactly (one send when the bandwidth is unlimited)."""
    if words <= 0:
        return 0
    if math.isinf(bandwidth):
        return 1
    if isinstance(bandwidth, int) or float(bandwidth).is_integer():
        return -(-words // int(bandwidth))
    # The float's exact binary value: no rounding surprise for huge counts.
    return math.ceil(Fraction(words) / Fraction(bandwidth))


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """One accelerator. ``noc`` lists the network of each cluster level, outermost first; a level
    beyond the tuple uses the last entry (so one entry serves every level)."""

    name: str
    num_pes: int
    simd_lanes: int = 1
    pe_drain_words: int = 0            # hwgen: partial sums a PE sends to the drain a cycle at most (0: the rule's)
    l1_bytes_per_pe: int
    l2_bytes: int
    noc: tuple[NoCLevel, ...]
    multicast: bool = True
    spatial_reduction: bool = True
    offchip_bw_words_per_cycle: float  # > 0; math.inf = unlimited
    input_bits: int = 8
    weight_bits: int = 8
    psum_bits: int = 32
    clock_mhz: float = 1000.0
    energy: EnergyTable = ENERGY_45NM_HOROWITZ
    area: AreaTable = AREA_45NM_HOROWITZ

    def __post_init__(self) -> None:
        check_text("hardware", "name", self.name)
        where = f"hardware {self.name!r}"
        for field_name in ("num_pes", "simd_lanes", "l1_bytes_per_pe", "l2_bytes"):
            check_int(where, field_name, getattr(self, field_name), minimum=1)
        check_int(where, "pe_drain_words", self.pe_drain_words, minimum=0)
        if not isinstance(self.noc, (tuple, list)) or not self.noc:
            raise fail(where, "noc", "a non-empty tuple of NoCLevel", self.noc)
        for index, level in enumerate(self.noc):
            if not isinstance(level, NoCLevel):
                raise fail(where, f"noc[{index}]", "a NoCLevel", level)
        object.__setattr__(self, "noc", tuple(self.noc))
        check_bool(where, "multicast", self.multicast)
        check_bool(where, "spatial_reduction", self.spatial_reduction)
        check_number(where, "offchip_bw_words_per_cycle", self.offchip_bw_words_per_cycle,
                     positive=True, allow_inf=True)
        for field_name in ("input_bits", "weight_bits", "psum_bits"):
            check_bits(where, field_name, getattr(self, field_name))
        check_number(where, "clock_mhz", self.clock_mhz, positive=True)
        if not isinstance(self.energy, EnergyTable):
            raise fail(where, "energy", "an EnergyTable", self.energy)
        if not isinstance(self.area, AreaTable):
            raise fail(where, "area", "an AreaTable", self.area)

    def noc_at(self, level: int) -> NoCLevel:
        """The network of cluster level ``level`` (0 = outermost)."""
        if isinstance(level, bool) or not isinstance(level, int) or level < 0:
            raise fail(f"hardware {self.name!r}", "NoC level", "a non-negative integer", level)
        return self.noc[min(level, len(self.noc) - 1)]

    def bits(self, tensor: Literal["input", "weight", "output"]) -> int:
        """Width of one word of ``tensor`` (outputs travel as partial sums)."""
        widths = {"input": self.input_bits, "weight": self.weight_bits, "output": self.psum_bits}
        if tensor not in widths:
            raise fail(f"hardware {self.name!r}", "tensor", "'input', 'weight' or 'output'", tensor)
        return widths[tensor]

    def area_mm2(self) -> float:
        """``num_pes * (mac * simd_lanes + l1_bytes_per_pe * l1_per_byte + noc_per_pe)
        + l2_bytes * l2_per_byte + controller``, in um^2 from :attr:`area`, divided by 1e6.
        Areas are for the table's widths (8b x 8b MAC, 32-bit accumulate); not rescaled."""
        a = self.area
        pe_um2 = a.mac_um2 * self.simd_lanes + self.l1_bytes_per_pe * a.l1_um2_per_byte + a.noc_um2_per_pe
        total_um2 = self.num_pes * pe_um2 + self.l2_bytes * a.l2_um2_per_byte + a.controller_um2
        return total_um2 / 1e6

    def with_overrides(
        self, *,
        name: str | None = None,
        num_pes: int | None = None,
        simd_lanes: int | None = None,
        pe_drain_words: int | None = None,
        l1_bytes_per_pe: int | None = None,
        l2_bytes: int | None = None,
        noc_bw: float | str | None = None,
        noc_latency: int | None = None,
        noc_hops: int | None = None,
        multicast: bool | None = None,
        spatial_reduction: bool | None = None,
        offchip_bw: float | str | None = None,
        input_bits: int | None = None,
        weight_bits: int | None = None,
        psum_bits: int | None = None,
        clock_mhz: float | None = None,
        energy: EnergyTable | str | None = None,
        area: AreaTable | str | None = None,
    ) -> Hardware:
        """A copy with the given fields replaced (``None`` = keep). ``noc_bw`` (a number, ``inf``
        or ``'inf'``), ``noc_latency`` and ``noc_hops`` apply to every NoC level; ``energy`` and
        ``area`` take a table or a table name."""
        where = f"hardware {self.name!r}"
        changes: dict[str, Any] = {}
        if name is not None:
            changes["name"] = check_text(where, "name", name)
        for key, value in (("num_pes", num_pes), ("simd_lanes", simd_lanes),
                           ("l1_bytes_per_pe", l1_bytes_per_pe), ("l2_bytes", l2_bytes)):
            if value is not None:
                changes[key] = check_int(where, key, value, minimum=1)
        if pe_drain_words is not None:
            changes["pe_drain_words"] = check_int(where, "pe_drain_words", pe_drain_words, minimum=0)
        for key, value in (("input_bits", input_bits), ("weight_bits", weight_bits),
                           ("psum_bits", psum_bits)):
            if value is not None:
                changes[key] = check_bits(where, key, value)
        for key, value in (("multicast", multicast), ("spatial_reduction", spatial_reduction)):
            if value is not None:
                changes[key] = check_bool(where, key, value)
        if offchip_bw is not None:
            changes["offchip_bw_words_per_cycle"] = check_number(
                where, "offchip_bw", offchip_bw, positive=True, allow_inf=True)
        if clock_mhz is not None:
            changes["clock_mhz"] = check_number(where, "clock_mhz", clock_mhz, positive=True)
        level_changes: dict[str, Any] = {}
        if noc_bw is not None:
            level_changes["bandwidth_words_per_cycle"] = check_number(
                where, "noc_bw", noc_bw, positive=True, allow_inf=True)
        if noc_latency is not None:
            level_changes["latency_cycles"] = check_int(where, "noc_latency", noc_latency, minimum=0)
        if noc_hops is not None:
            level_changes["hops"] = check_int(where, "noc_hops", noc_hops, minimum=1)
        if level_changes:
            changes["noc"] = tuple(replace(level, **level_changes) for level in self.noc)
        if energy is not None:
            changes["energy"] = _named_table(where, "energy", energy, ENERGY_TABLES, EnergyTable)
        if area is not None:
            changes["area"] = _named_table(where, "area", area, AREA_TABLES, AreaTable)
        return replace(self, **changes)


def _named_table(where: str, path: str, value: object, named: Mapping[str, Any], cls: type) -> Any:
    if isinstance(value, cls):
        return value
    if isinstance(value, str) and value in named:
        return named[value]
    raise fail(where, path, f"an {cls.__name__} or one of {_quoted(named)}", value)


def _quoted(names: Any) -> str:
    return ", ".join(repr(n) for n in names)


# --- YAML schema ---------------------------------------------------------------------------------

_TOP_FIELDS = ("name", "num_pes", "simd_lanes", "pe_drain_words", "l1_bytes_per_pe", "l2_bytes", "noc", "multicast",
               "spatial_reduction", "offchip_bw_words_per_cycle", "data_widths", "clock_mhz",
               "energy", "area")
_TOP_REQUIRED = ("name", "num_pes", "l1_bytes_per_pe", "l2_bytes", "noc", "offchip_bw_words_per_cycle")
_NOC_FIELDS = ("bandwidth_words_per_cycle", "latency_cycles", "hops")
_WIDTH_FIELDS = ("input_bits", "weight_bits", "psum_bits")


def _check_keys(where: str, path: str, mapping: Mapping[Any, Any], allowed: tuple[str, ...],
                required: tuple[str, ...]) -> None:
    for key in mapping:
        if key not in allowed:
            inside = f" in {path}" if path else ""
            raise AccelgenError(f"unknown field {show(key)}{inside} (allowed: {', '.join(allowed)})",
                                where=where)
    for key in required:
        if key not in mapping:
            raise AccelgenError(f"{path + '.' if path else ''}{key} is required", where=where)


def _parse_table(where: str, path: str, spec: object, named: Mapping[str, Any],
                 cls: type[EnergyTable] | type[AreaTable]) -> Any:
    """A table name, or a mapping of ``coefficient: {value, source}`` entries with an optional
    ``base`` table that supplies the others."""
    if isinstance(spec, str) and spec in named:
        return named[spec]
    coefficients = cls.coefficient_names()
    has_word_bits = cls is EnergyTable
    if not isinstance(spec, Mapping):
        raise fail(where, path, f"one of {_quoted(named)} or a mapping of coefficients", spec)
    allowed = ("base", *(("word_bits",) if has_word_bits else ()), *coefficients)
    _check_keys(where, path, spec, allowed, ())
    base = None
    if "base" in spec:
        if not isinstance(spec["base"], str) or spec["base"] not in named:
            raise fail(where, f"{path}.base", f"one of {_quoted(named)}", spec["base"])
        base = named[spec["base"]]
    else:
        _check_keys(where, path, spec, allowed, allowed[1:])
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in coefficients:
        if name not in spec:
            assert base is not None
            values[name], sources[name] = getattr(base, name), base.sources[name]
            continue
        entry, entry_path = spec[name], f"{path}.{name}"
        if not isinstance(entry, Mapping):
            raise fail(where, entry_path, "a mapping {value: <number>, source: <citation>}", entry)
        _check_keys(where, entry_path, entry, ("value", "source"), ("value", "source"))
        values[name] = check_number(where, f"{entry_path}.value", entry["value"], positive=False)
        sources[name] = check_text(where, f"{entry_path}.source", entry["source"])
    if has_word_bits:
        word_bits = spec["word_bits"] if "word_bits" in spec else base.word_bits  # type: ignore[union-attr]
        if word_bits is not None and (isinstance(word_bits, bool) or not isinstance(word_bits, int)
                                      or not 1 <= word_bits <= 64):
            raise fail(where, f"{path}.word_bits", "an integer from 1 to 64 or null", word_bits)
        values["word_bits"] = word_bits
    return cls(**values, sources=sources)


def hardware_from_dict(d: object, where: str = "<hardware>") -> Hardware:
    """Validate a parsed hardware description (see ``configs/hw/small.yaml``), fill defaults."""
    if not isinstance(d, Mapping):
        raise AccelgenError(f"the top level must be a mapping of hardware fields, not {show(d)}",
                            where=where)
    _check_keys(where, "", d, _TOP_FIELDS, _TOP_REQUIRED)
    kwargs: dict[str, Any] = {"name": check_text(where, "name", d["name"])}
    for key in ("num_pes", "simd_lanes", "l1_bytes_per_pe", "l2_bytes"):
        if key in d:
            kwargs[key] = check_int(where, key, d[key], minimum=1)
    if "pe_drain_words" in d:
        kwargs["pe_drain_words"] = check_int(where, "pe_drain_words", d["pe_drain_words"], minimum=0)

    levels = d["noc"]
    if not isinstance(levels, list) or not levels:
        raise fail(where, "noc", "a non-empty list of {bandwidth_words_per_cycle, latency_cycles, hops}",
                   levels)
    noc = []
    for index, level in enumerate(levels):
        path = f"noc[{index}]"
        if not isinstance(level, Mapping):
            raise fail(where, path, "a mapping {bandwidth_words_per_cycle, latency_cycles, hops}", level)
        _check_keys(where, path, level, _NOC_FIELDS, _NOC_FIELDS[:2])
        noc.append(NoCLevel(
            check_number(where, f"{path}.bandwidth_words_per_cycle", level["bandwidth_words_per_cycle"],
                         positive=True, allow_inf=True),
            check_int(where, f"{path}.latency_cycles", level["latency_cycles"], minimum=0),
            check_int(where, f"{path}.hops", level.get("hops", 1), minimum=1),
        ))
    kwargs["noc"] = tuple(noc)

    for key in ("multicast", "spatial_reduction"):
        if key in d:
            kwargs[key] = check_bool(where, key, d[key])
    kwargs["offchip_bw_words_per_cycle"] = check_number(
        where, "offchip_bw_words_per_cycle", d["offchip_bw_words_per_cycle"], positive=True, allow_inf=True)
    if "data_widths" in d:
        widths = d["data_widths"]
        if not isinstance(widths, Mapping):
            raise fail(where, "data_widths", "a mapping {input_bits, weight_bits, psum_bits}", widths)
        _check_keys(where, "data_widths", widths, _WIDTH_FIELDS, ())
        for key in _WIDTH_FIELDS:
            if key in widths:
                kwargs[key] = check_bits(where, f"data_widths.{key}", widths[key])
    if "clock_mhz" in d:
        kwargs["clock_mhz"] = check_number(where, "clock_mhz", d["clock_mhz"], positive=True)
    if "energy" in d:
        kwargs["energy"] = _parse_table(where, "energy", d["energy"], ENERGY_TABLES, EnergyTable)
    if "area" in d:
        kwargs["area"] = _parse_table(where, "area", d["area"], AREA_TABLES, AreaTable)
    return Hardware(**kwargs)


def hardware_from_yaml(text: str, where: str = "<string>") -> Hardware:
    """Parse and validate YAML text; ``where`` names it in errors."""
    data = load_yaml(text, where, empty="a mapping of hardware fields")
    return hardware_from_dict(data, where)


def load_hardware(path: str | os.PathLike[str]) -> Hardware:
    """Read and validate a hardware YAML file."""
    where = os.fspath(path)
    text = read_text(path, "a hardware file")
    return hardware_from_yaml(text, where)


def builtin_hardware(name: BuiltinHardware | str) -> Hardware:
    """``tiny``, ``small``, ``large`` or ``maestro_ref`` shipped with the package (``configs/hw``);
    anything else is read as a path."""
    if name in BUILTIN_HARDWARE:
        return load_hardware(CONFIGS / "hw" / f"{name}.yaml")
    if not Path(name).exists():
        raise AccelgenError(f"no such file (built-in hardware: {', '.join(BUILTIN_HARDWARE)})", where=name)
    return load_hardware(name)


def _table_to_dict(table: EnergyTable | AreaTable, named: Mapping[str, Any]) -> str | dict[str, Any]:
    for table_name, candidate in named.items():
        if candidate == table:
            return table_name
    spec: dict[str, Any] = {name: {"value": getattr(table, name), "source": table.sources[name]}
                            for name in table.coefficient_names()}
    if isinstance(table, EnergyTable):
        spec["word_bits"] = table.word_bits
    return spec


def hardware_to_dict(hw: Hardware) -> dict[str, Any]:
    """The YAML-ready mapping that :func:`hardware_from_dict` reads back to an equal ``Hardware``."""
    return {
        "name": hw.name,
        "num_pes": hw.num_pes,
        "simd_lanes": hw.simd_lanes,
        "pe_drain_words": hw.pe_drain_words,
        "l1_bytes_per_pe": hw.l1_bytes_per_pe,
        "l2_bytes": hw.l2_bytes,
        "noc": [{"bandwidth_words_per_cycle": level.bandwidth_words_per_cycle,
                 "latency_cycles": level.latency_cycles, "hops": level.hops} for level in hw.noc],
        "multicast": hw.multicast,
        "spatial_reduction": hw.spatial_reduction,
        "offchip_bw_words_per_cycle": hw.offchip_bw_words_per_cycle,
        "data_widths": {"input_bits": hw.input_bits, "weight_bits": hw.weight_bits,
                        "psum_bits": hw.psum_bits},
        "clock_mhz": hw.clock_mhz,
        "energy": _table_to_dict(hw.energy, ENERGY_TABLES),
        "area": _table_to_dict(hw.area, AREA_TABLES),
    }

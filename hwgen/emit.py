"""Verilog emission: one generated design as ``accelgen_top.v``, its file list and a JSON
manifest (parameters, ports, the host bus map, and per layer the predicted cycles and the
configuration registers).  Written to a temporary folder and renamed into place."""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from costmodel.base import AccelgenError
from costmodel.dataflow import Dataflow
from costmodel.hardware import Hardware, hardware_to_dict
from costmodel.hwgen_preset.fast import hwgen_cycles
from costmodel.hwgen_preset.preset import hwgen_structure, l2_split
from costmodel.hwgen_preset.rules import host_offset_bits
from costmodel.hwgen_preset.structure import HwStructure, structure_key, tiles_of
from costmodel.workload import Layer

__all__ = ["TOP", "LINT_WAIVERS", "design_id", "write_verilog", "emit_design"]

TOP = "accelgen_top"
#: The only Verilator warnings the emitted Verilog raises (Amaranth's width and case idioms).
LINT_WAIVERS = ("-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-CASEINCOMPLETE")


@functools.lru_cache(maxsize=None)
def _generator_digest() -> str:
    """The generator's own source: a changed generator never reuses a cached build.  Read once
    per process, as the modules it has loaded are: a source edited while a run goes on must not
    label the old code's output with the new code's digest."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def design_id(structure: HwStructure, l2_words: dict[str, int]) -> str:
    key = repr((structure_key(structure), sorted(l2_words.items()), _generator_digest()))
    return "accel_" + hashlib.sha256(key.encode()).hexdigest()[:12]


def write_verilog(structure: HwStructure, l2_words: dict[str, int], path: Path) -> Path:
    """Emit the design's Verilog to ``path`` (written to a temporary name, then renamed): the top
    level, the one PE module its array instantiates and the RAM module of its L2."""
    from amaranth.back import verilog

    from .accelerator import Accelerator
    from .pe import PE_MODULE
    from .ram import RAM_VERILOG
    top = Accelerator(structure, l2_words)
    text = "\n".join((verilog.convert(top, name=TOP), verilog.convert(top.pe(), name=PE_MODULE), RAM_VERILOG))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".v.tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def emit_design(hw: Hardware, dataflow_for: Callable[[Layer], Dataflow], layers: Sequence[Layer],
                out: Path) -> str:
    """Generate the accelerator for ``layers[0]``'s dataflow on ``hw`` into ``out``, with the
    predicted cycles of every layer in the manifest; returns a one-line summary."""
    from .accelerator import CONFIG_REGS, CTRL, REGION
    first = layers[0]
    df = dataflow_for(first)
    structure = hwgen_structure(df, first, hw, fit=layers)
    l2 = l2_split(hw)
    offset_bits = host_offset_bits(l2)
    predicted = []
    for layer in layers:
        try:
            tiles = tiles_of(structure, dataflow_for(layer), layer)
            predicted.append({"layer": layer.name, "shape": layer.describe(), "runs": tiles.repeat,
                              "predicted_cycles_per_run": hwgen_cycles(structure, tiles),
                              "config": tiles.as_dict()})
        except AccelgenError as err:
            predicted.append({"layer": layer.name, "shape": layer.describe(), "refused": str(err)})
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".emit-", dir=out.parent))
    try:
        write_verilog(structure, l2, tmp / f"{TOP}.v")
        (tmp / "files.f").write_text(f"{TOP}.v\n")
        manifest = {
            "design": design_id(structure, l2), "top": TOP, "dataflow": str(df),
            "hardware": hardware_to_dict(hw), "structure": structure.as_dict(), "l2_words": l2,
            "ports": {"clk": 1, "rst": 1, "bus_addr": offset_bits + 4, "bus_wdata": 32, "bus_we": 1,
                      "bus_re": 1, "bus_rdata": 32, "busy": 1, "done": 1},
            "bus": {"offset_bits": offset_bits, "regions": REGION, "ctrl": CTRL,
                    "config_registers": list(CONFIG_REGS)},
            "timing": "docs/timing.md", "verilator_lint_waivers": list(LINT_WAIVERS), "layers": predicted,
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.replace(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return (f"wrote {out}/{TOP}.v, files.f, manifest.json ({structure.used_pes} PEs, "
            f"NoC {structure.noc_words_per_cycle} words/cycle, {df.name})")

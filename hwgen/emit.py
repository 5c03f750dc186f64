"""Emission of one generated design as IP: the core's Verilog (``accelgen_top.v``), the AXI top
level around it (``accelgen_axi_top.v``, :mod:`hwgen.axi`), the register map (SystemRDL, the C
header and the Markdown table, :mod:`hwgen.regmap`), a C example, a FuseSoC core, the file list
and a Vivado Tcl script (:mod:`hwgen.ipfiles`), and a JSON manifest (parameters, ports, the
register map, and per layer the predicted cycles and the configuration registers).  Written to a
temporary folder and renamed into place."""

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
from costmodel.hwgen_preset.closed import hwgen_cycles
from costmodel.hwgen_preset.preset import hwgen_structure, l2_split
from costmodel.hwgen_preset.rules import host_offset_bits
from costmodel.hwgen_preset.structure import HwStructure, structure_key, tiles_of
from costmodel.workload import Layer

__all__ = ["TOP", "IP_TOP", "LINT_WAIVERS", "design_id", "design_info", "generator_digest", "write_verilog",
           "write_ip_top", "write_design_sources", "design_structure", "emit_design"]

TOP = "accelgen_top"            # the core: its own word bus (docs/timing.md)
IP_TOP = "accelgen_axi_top"     # what the user instantiates: AXI4-Lite, AXI4-Stream in and out, irq
#: hwgen modules that describe the host side, not the hardware: a change there rebuilds nothing.
_HOST_SIDE = {"host.py", "layout.py", "ipfiles.py"}
#: The only Verilator warnings the emitted Verilog raises (Amaranth's width and case idioms).
LINT_WAIVERS = ("-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-CASEINCOMPLETE")


@functools.lru_cache(maxsize=None)
def generator_digest() -> str:
    """The generator's own source, and the rules and structure it builds the hardware by (an
    L1's shape, a load's runs: :mod:`costmodel.hwgen_preset.rules`, shared with the model): a
    changed generator never reuses a cached build.  Read once per process, as the modules it has
    loaded are: a source edited while a run goes on must not label the old code's output with
    the new code's digest."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    sources = [p for p in sorted(here.glob("*.py")) if p.name not in _HOST_SIDE]
    sources += [here.parent / "costmodel" / "hwgen_preset" / name for name in ("rules.py", "structure.py")]
    for path in sources:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def design_id(structure: HwStructure, l2_words: dict[str, int]) -> str:
    key = repr((structure_key(structure), sorted(l2_words.items()), generator_digest()))
    return "accel_" + hashlib.sha256(key.encode()).hexdigest()[:12]


def write_verilog(structure: HwStructure, l2_words: dict[str, int], path: Path) -> Path:
    """Emit the design's Verilog to ``path`` (written to a temporary name, then renamed): the top
    level, the one PE module its array instantiates, the RAM module of its L2, the register
    each PE keeps at the end of a broadcast and the registered multiplier."""
    from amaranth.back import verilog

    from .accelerator import Accelerator
    from .pe import PE_MODULE
    from .common import MUL_VERILOG, PIPE_VERILOG
    from .ram import RAM_VERILOG
    top = Accelerator(structure, l2_words)
    text = "\n".join((verilog.convert(top, name=TOP), verilog.convert(top.pe(), name=PE_MODULE), RAM_VERILOG,
                      PIPE_VERILOG, MUL_VERILOG))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".v.tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def design_info(structure: HwStructure, l2_words: dict[str, int]) -> dict[str, int]:
    """The read-only information registers of the design (:data:`hwgen.regmap.INFO_REGS`)."""
    return {"l2_input_words": l2_words["input"], "l2_weight_words": l2_words["weight"],
            "l2_output_words": l2_words["output"], "num_pes": structure.used_pes,
            "noc_words": structure.noc_words_per_cycle}


def write_ip_top(structure: HwStructure, l2_words: dict[str, int], path: Path) -> Path:
    """Emit ``accelgen_axi_top`` (it instantiates ``accelgen_top``) to ``path``."""
    from amaranth.back import verilog

    from .axi import AxiTop
    top = AxiTop(host_offset_bits(l2_words), l2_words, design_info(structure, l2_words), core_name=TOP)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".v.tmp")
    tmp.write_text(verilog.convert(top, name=IP_TOP))
    tmp.replace(path)
    return path


def write_design_sources(structure: HwStructure, l2_words: dict[str, int], folder: Path) -> list[Path]:
    """Both Verilog files of a design into ``folder``, in compile order."""
    return [write_verilog(structure, l2_words, folder / f"{TOP}.v"),
            write_ip_top(structure, l2_words, folder / f"{IP_TOP}.v")]


def _pe(structure: HwStructure):
    """The design's PE (its geometry only)."""
    from .pe import PE
    pe = PE(structure)
    pe._MustUse__silence = True
    return pe


def design_structure(hw: Hardware, dataflow_for: Callable[[Layer], Dataflow],
                     layers: Sequence[Layer]) -> tuple[Dataflow, HwStructure]:
    """The dataflow and structure of the design :func:`emit_design` generates for ``layers``: the
    first layer's dataflow fixes its shape, every layer's filter and stride size its buffers."""
    df = dataflow_for(layers[0])
    return df, hwgen_structure(df, layers[0], hw, fit=layers)


def emit_design(hw: Hardware, dataflow_for: Callable[[Layer], Dataflow], layers: Sequence[Layer],
                out: Path, dataflow_spec: str | None = None) -> str:
    """Generate the accelerator for ``layers[0]``'s dataflow on ``hw`` into ``out``, with the
    predicted cycles of every layer in the manifest; returns a one-line summary.  ``dataflow_spec`` (what
    the user gave: a library name, a file, directives) lets the host driver tile other layers."""
    from costmodel.hwgen_preset.rules import l2_layout_words

    from . import ipfiles, regmap
    from .layout import config_registers
    from amaranth.lib.wiring import In

    from .axi import AXIL_ADDR_BITS, axi_signature
    from .hostbus import CTRL, REGION
    df, structure = design_structure(hw, dataflow_for, layers)
    l2 = l2_split(hw)
    offset_bits = host_offset_bits(l2)
    predicted = []
    for layer in layers:
        try:
            tiles = tiles_of(structure, dataflow_for(layer), layer)
            predicted.append({"layer": layer.name, "shape": layer.describe(), "runs": tiles.repeat,
                              "predicted_cycles_per_run": hwgen_cycles(structure, tiles),
                              "config": tiles.as_dict(), "registers": config_registers(structure, tiles),
                              "l2_words": l2_layout_words(structure, tiles)})
        except AccelgenError as err:
            predicted.append({"layer": layer.name, "shape": layer.describe(), "refused": str(err)})
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".emit-", dir=out.parent))
    try:
        did = design_id(structure, l2)
        write_design_sources(structure, l2, tmp)
        info = design_info(structure, l2)
        reg_files = regmap.write_outputs(tmp, info)
        runnable = next((p for p in predicted if "refused" not in p and p["runs"] == 1), None)
        (tmp / "accelgen_example.c").write_text(ipfiles.c_example(runnable))
        (tmp / "files.f").write_text(ipfiles.file_list())
        (tmp / "accelgen_files.tcl").write_text(ipfiles.vivado_tcl(IP_TOP))
        summary = (f"accelgen {df.name} accelerator, {structure.used_pes} PEs, NoC {structure.noc_words_per_cycle} "
                   f"words/cycle, L2 {hw.l2_bytes} bytes")
        (tmp / f"{did}.core").write_text(ipfiles.core_file(did, IP_TOP, summary, LINT_WAIVERS))
        rm = regmap.register_map()
        manifest = {
            "design": did, "top": IP_TOP, "core_name": ipfiles.core_name(did), "dataflow": str(df),
            "dataflow_spec": dataflow_spec, "hardware": hardware_to_dict(hw), "structure": structure.as_dict(),
            "l2_words": l2, "info": info,
            "ports": {name: {"direction": "in" if member.flow == In else "out", "width": member.shape}
                      for name, member in axi_signature().items()},
            "registers": {name: r.address for name, r in rm.registers.items()},
            "axil_address_bits": AXIL_ADDR_BITS, "region_codes": regmap.REGION_CODES,
            "core": {"module": TOP, "ports": {"clk": 1, "rst": 1, "bus_addr": offset_bits + 4, "bus_wdata": 32,
                                              "bus_we": 1, "bus_re": 1, "bus_rdata": 32, "busy": 1, "done": 1},
                     "bus": {"offset_bits": offset_bits, "regions": REGION, "ctrl": CTRL},
                     # cycles after reset in which a start write is ignored (the PEs clear their
                     # partial sums' memories; docs/timing.md)
                     "psum_clear_cycles": _pe(structure).psum_clear_cycles},
            "files": {"verilog": list(ipfiles.VERILOG_FILES), "register_map": reg_files,
                      "c_example": "accelgen_example.c", "fusesoc": f"{did}.core", "file_list": "files.f",
                      "vivado": "accelgen_files.tcl"},
            "timing": "docs/timing.md", "verilator_lint_waivers": list(LINT_WAIVERS), "layers": predicted,
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.replace(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return (f"wrote {out}/{IP_TOP}.v ({TOP}.v inside), {did}.core, {regmap.MAP_NAME}.rdl/.h/.md, "
            f"accelgen_example.c, files.f, manifest.json ({structure.used_pes} PEs, "
            f"NoC {structure.noc_words_per_cycle} words/cycle, {df.name})")

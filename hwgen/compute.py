"""The compute engine: one counter nest over the step's PE tile (k, c, y, x, and the filter
positions ``f`` in steps of the SIMD lanes), broadcast to every PE, which multiplies where the
position is inside its own tile.  One MAC slot a cycle per PE (``docs/timing.md``)."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Const, Module, Signal

from costmodel.hwgen_preset.structure import HwStructure

from .common import COORD, wire
from .controller import Controller
from .geometry import Geometry

__all__ = ["Compute", "ORDER"]

ORDER = ("k", "c", "y", "x", "f")     # outermost first


@dataclass
class Compute:
    continues: Signal       # still busy next cycle (this issue is not the last)
    issue: Signal           # the PEs multiply this cycle
    counters: dict          # ORDER -> the position broadcast to the PEs
    filter_rs: Signal       # R*S of the layer

    @classmethod
    def build(cls, m: Module, s: HwStructure, g: Geometry, ctl: Controller) -> "Compute":
        cp = ctl.cp
        cp_ext = [g.tile(cp, di, 0, 0)[1] for di in range(4)]
        c_active = Signal(name="c_active")
        rs = wire(m, g.R * g.S, "filt_rs", COORD)
        mac = {n: Signal(COORD, name=f"mac_{n}") for n in ORDER}
        bounds = dict(zip(ORDER, cp_ext + [rs]))
        steps_by = {"k": 1, "c": 1, "y": 1, "x": 1, "f": s.simd_lanes}   # the lanes take simd filter positions
        c_issue = wire(m, (ctl.go & cp.valid) | c_active, "c_issue")
        c_wrap = [Const(1)]
        for n in reversed(ORDER):
            c_wrap.append(wire(m, c_wrap[-1] & (mac[n] + steps_by[n] >= bounds[n]), f"c_wrap_{n}"))
        with m.If(c_issue):
            m.d.sync += c_active.eq(~c_wrap[-1])
            for i, n in enumerate(reversed(ORDER)):
                inner = c_wrap[i]
                with m.If(inner & ~(mac[n] + steps_by[n] >= bounds[n])):
                    m.d.sync += mac[n].eq(mac[n] + steps_by[n])
                with m.Elif(inner):
                    m.d.sync += mac[n].eq(0)
        return cls(wire(m, c_issue & ~c_wrap[-1], "c_continues"), c_issue, mac, rs)

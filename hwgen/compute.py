"""The compute engine: one counter nest over the step's PE tile (k, c, y, x, and the filter
positions ``f`` in steps of the SIMD lanes), broadcast to every PE with the L1 addresses it
points at, and a per-PE enable where the position is inside the PE's own tile.  One MAC issue a
cycle per PE; the engine is busy one cycle more for the last partial-sum write (``docs/timing.md``)."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Signal

from costmodel.hwgen_preset.rules import TIMING, input_span, l1_words
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
    rd_in: list             # per SIMD lane: the L1 address of its input operand (every PE's)
    rd_w: list              # ... of its weight
    rd_on: Signal           # bit j: lane j's filter position is inside the filter
    ps_addr: Signal         # the L1 address of the partial sum

    @classmethod
    def build(cls, m: Module, s: HwStructure, g: Geometry, ctl: Controller) -> "Compute":
        cp = ctl.cp
        cp_ext = [ctl.ahead(m, "cp", lambda d, di=di: g.tile(d, di, 0, 0)[1], f"cp_ext_{di}") for di in range(4)]
        c_active = Signal(name="c_active")
        rs = g.static(g.R * g.S, "filt_rs", COORD)
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
        rd_in, rd_w, rd_on, ps_addr = cls._addresses(m, s, g, mac, rs)
        # the PEs' partial-sum write lands COMPUTE_LATENCY (1) cycle after the last issue: busy
        # in the cycle after every issue (the next issue, or that write)
        assert TIMING.compute_latency_cycles == 1, "the PE's MAC has three stages (hwgen/pe.py)"
        return cls(wire(m, c_issue, "c_continues"), c_issue, mac, rs, rd_in, rd_w, rd_on, ps_addr)

    @staticmethod
    def _addresses(m: Module, s: HwStructure, g: Geometry, mac: dict, rs):
        """The L1 addresses the counters point at, the same in every PE (its L1 is laid out by
        the largest tile): input ``[c][rows][cols]``, weight ``[k][c][R][S]``, partial sums
        ``[k][y][x]``; the SIMD lanes take filter positions ``f .. f+simd-1``."""
        t = s.pe_tile_max
        rows = input_span(t["Y"], s.max_stride, t["R"])
        cols = input_span(t["X"], s.max_stride, t["S"])
        words = l1_words(t, s.max_stride)
        shape = {name: range(max(2, n)) for name, n in words.items()}
        base_in = wire(m, mac["c"] * (rows * cols) + mac["y"] * g.stride_y * cols + mac["x"] * g.stride_x,
                       "rd_base_in", COORD)
        base_w = wire(m, (mac["k"] * t["C"] + mac["c"]) * (t["R"] * t["S"]), "rd_base_w", COORD)
        ps_addr = wire(m, (mac["k"] * t["Y"] + mac["y"]) * t["X"] + mac["x"],
                       "ps_addr", shape["output"])
        max_rs = t["R"] * t["S"]
        rd_in, rd_w, on = [], [], []
        for lane in range(s.simd_lanes):
            f = wire(m, mac["f"] + lane, f"rd_f{lane}", COORD)
            r = Signal(range(t["R"] + 1), name=f"rd_r{lane}")
            s_ = Signal(range(t["S"] + 1), name=f"rd_s{lane}")
            with m.Switch(g.S):       # r, s = divmod(f, S) for each S the design allows
                for sv in range(1, t["S"] + 1):
                    with m.Case(sv):
                        m.d.comb += [r.eq(Array([Const(v // sv, r.shape()) for v in range(max_rs)])[f]),
                                     s_.eq(Array([Const(v % sv, s_.shape()) for v in range(max_rs)])[f])]
            rd_in.append(wire(m, base_in + r * cols + s_, f"rd_in{lane}",
                              shape["input"]))
            rd_w.append(wire(m, base_w + r * t["S"] + s_, f"rd_w{lane}",
                             shape["weight"]))
            on.append(f < rs)
        return rd_in, rd_w, wire(m, Cat(*on), "rd_on", s.simd_lanes), ps_addr

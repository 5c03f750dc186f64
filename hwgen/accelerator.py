"""The generated accelerator's top level: the host bus, the banked L2, the controller, the
loader and multicast NoC, the PE array with its compute engine, and the drain with its reduction
tree, wired together.

Timing follows ``docs/timing.md`` (and :mod:`costmodel.hwgen_preset`, which the ``hwgen`` cost
model preset evaluates): the loop nest is walked in *slots*; slot ``k`` loads step ``k``,
computes step ``k-1`` and drains step ``k-2``; it lasts as long as the longest of the three
engines (at least one cycle): the next slot starts the cycle after.
"""

from __future__ import annotations

from amaranth.hdl import Const, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from costmodel.hwgen_preset.rules import LOOP_DIMS, host_offset_bits, l2_address_bits
from costmodel.hwgen_preset.structure import HwStructure

from .common import wire
from .compute import ORDER, Compute
from .controller import Controller
from .drain import Drain, drain_lanes
from .geometry import CONFIG_REGS, Geometry
from .hostbus import CTRL, REGION, HostBus
from .l2 import L2
from .loader import Loader
from .pe import PE, pe_instance

__all__ = ["Accelerator", "CONFIG_REGS", "REGION", "CTRL"]


class Accelerator(wiring.Component):
    """Top level.  ``l2_words`` gives the depth of each L2 region (input, weight: int8; output: int32)."""

    def __init__(self, structure: HwStructure, l2_words: dict[str, int]):
        self.s = structure
        self.l2_words = dict(l2_words)
        self.offset_bits = host_offset_bits(self.l2_words)
        self.abits = l2_address_bits(self.l2_words)       # the NoC's L2 word addresses
        super().__init__({
            "bus_addr": In(self.offset_bits + 4), "bus_wdata": In(32), "bus_we": In(1), "bus_re": In(1),
            "bus_rdata": Out(32),
            "busy": Out(1), "done": Out(1),
        })

    def pe(self) -> PE:
        """The one PE every position of the array instantiates (emitted as :data:`PE_MODULE`)."""
        s = self.s
        return PE(s.pe_tile_max, s.max_stride, s.noc_words_per_cycle, s.simd_lanes, drain_lanes(s),
                  self.abits, s.spatial)

    def elaborate(self, platform):
        m = Module()
        s = self.s
        g = Geometry(m, s)
        ctl = Controller.build()
        m.d.comb += [self.busy.eq(ctl.running), self.done.eq(ctl.done)]
        l2 = L2.build(m, self.l2_words, s.noc_words_per_cycle)
        bus = HostBus.build(m, self, g, l2, s.noc_words_per_cycle, ctl.running, ctl.done, ctl.cycles)
        ctl.elaborate(m, s, g, bus.start)
        loader = Loader.build(m, s, g, ctl, l2, self.abits)
        compute = Compute.build(m, s, g, ctl)
        template = self.pe()
        pes = [(u0, u1, pe_instance(m, f"pe_{u0}_{u1}", template)) for u0 in range(s.n0) for u1 in range(s.n1)]
        drain = Drain.build(m, s, g, ctl, l2, bus, pes, self)
        steps = self._unit_steps(m, g, loader)
        for u0, u1, pe in pes:
            self._wire_pe(m, g, ctl, loader, compute, pe, u0, u1, steps)
        m.d.comb += ctl.engines_continue.eq(loader.continues | compute.continues | drain.continues)
        return m

    def _unit_steps(self, m: Module, g: Geometry, loader: Loader) -> dict[str, list]:
        """Per tensor and level, how far apart in L2 the first words of neighbouring units'
        tiles are: a PE's first word is the box's plus ``u0 * step0 + u1 * step1`` (constant
        multiples: no multiplier per PE)."""
        out = {}
        for name, by_dim in loader.strides.items():
            out[name] = []
            for lv, T in enumerate((g.T0, g.T1)):
                d = self.s.spatial[lv]
                out[name].append(wire(m, (T[d] * by_dim[d])[:self.abits], f"{name}_unit{lv}", self.abits)
                                 if d in by_dim else Const(0, self.abits))
        return out

    @staticmethod
    def _wire_pe(m: Module, g: Geometry, ctl: Controller, loader: Loader, compute: Compute, pe,
                 u0: int, u1: int, steps: dict[str, list]) -> None:
        """One PE's ports: the broadcast steps being loaded and computed, the layer's sizes and
        tiles, the NoC lanes and compute counters, and what is its own: where its tiles start
        (constant multiples of the tiles) and the L2 address of its first words."""
        ld, cp, sy, sx, R, S = ctl.ld, ctl.cp, g.stride_y, g.stride_x, g.R, g.S
        A = len(loader.lane_addr)
        s = g.s

        def base(first, name):
            return (first + u0 * steps[name][0] + u1 * steps[name][1])[:A]
        m.d.comb += [
            pe.lane_valid.eq(loader.lane_valid), pe.lane_count.eq(loader.lane_count),
            pe.lane_weight.eq(loader.lane_weight), pe.lane_addr.eq(loader.lane_addr),
            pe.lane_data.eq(loader.lane_data),
            pe.ld_bank_in.eq(ld.bank_in), pe.ld_bank_w.eq(ld.bank_w),
            pe.ld_in_base.eq(base(loader.in_base, "input")), pe.ld_w_base.eq(base(loader.w_base, "weight")),
            pe.in_plane.eq(loader.strides["input"]["C"]), pe.in_row.eq(g.cfg["in_cols"]),
            pe.w_crs.eq(loader.strides["weight"]["K"]), pe.w_rs.eq(loader.strides["weight"]["C"]), pe.filt_r.eq(R),
            pe.mac_en.eq(compute.issue), pe.stride_y.eq(sy), pe.stride_x.eq(sx),
            pe.cp_bank_in.eq(cp.bank_in), pe.cp_bank_w.eq(cp.bank_w), pe.cp_bank_ps.eq(cp.bank_ps),
        ]
        for di, d in enumerate(LOOP_DIMS):
            m.d.comb += [getattr(pe, f"ld_b0_{d}").eq(ld.b0[di]), getattr(pe, f"ld_r1_{d}").eq(ld.r1[di]),
                         getattr(pe, f"cp_b0_{d}").eq(cp.b0[di]), getattr(pe, f"cp_r1_{d}").eq(cp.r1[di]),
                         getattr(pe, f"t0_{d}").eq(g.T0[d]), getattr(pe, f"t1_{d}").eq(g.T1[d]),
                         getattr(pe, f"dim_{d}").eq(g.D[d])]
        # where this PE's tiles start from the step's, along each level's spatial dimension
        for lv, port in enumerate((pe.off0, pe.off1)):
            d = s.spatial[lv]
            m.d.comb += port.eq(g.offsets(LOOP_DIMS.index(d), u0, u1)[lv] if d is not None else 0)
        m.d.comb += [getattr(pe, f"mac_{n}").eq(compute.counters[n]) for n in ORDER]
        m.d.comb += [pe.filt_s.eq(S), pe.filt_rs.eq(compute.filter_rs)]

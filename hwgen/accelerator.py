"""The generated accelerator's top level: the host bus, the banked L2, the controller, the
loader and multicast NoC, the PE array with its compute engine, and the drain with its reduction
tree, wired together.

Timing follows ``docs/timing.md`` (and :mod:`costmodel.hwgen_preset`, which the ``hwgen`` cost
model preset evaluates): the loop nest is walked in *slots*; slot ``k`` loads step ``k``,
computes step ``k-1`` and drains step ``k-2``; it lasts as long as the longest of the three
engines (at least one cycle): the next slot starts the cycle after.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from costmodel.hwgen_preset.rules import LOOP_DIMS, host_offset_bits, input_span
from costmodel.hwgen_preset.structure import HwStructure

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
        super().__init__({
            "bus_addr": In(self.offset_bits + 4), "bus_wdata": In(32), "bus_we": In(1), "bus_re": In(1),
            "bus_rdata": Out(32),
            "busy": Out(1), "done": Out(1),
        })

    def pe(self) -> PE:
        """The one PE every position of the array instantiates (emitted as :data:`PE_MODULE`)."""
        s = self.s
        return PE(s.pe_tile_max, s.max_stride, s.noc_words_per_cycle, s.simd_lanes, drain_lanes(s))

    def elaborate(self, platform):
        m = Module()
        s = self.s
        g = Geometry(m, s)
        ctl = Controller.build()
        m.d.comb += [self.busy.eq(ctl.running), self.done.eq(ctl.done)]
        l2 = L2.build(m, self.l2_words, s.noc_words_per_cycle)
        bus = HostBus.build(m, self, g, l2, s.noc_words_per_cycle, ctl.running, ctl.done, ctl.cycles)
        ctl.elaborate(m, s, g, bus.start)
        loader = Loader.build(m, s, g, ctl, l2)
        compute = Compute.build(m, s, g, ctl)
        template = self.pe()
        pes = [(u0, u1, pe_instance(m, f"pe_{u0}_{u1}", template)) for u0 in range(s.n0) for u1 in range(s.n1)]
        drain = Drain.build(m, s, g, ctl, l2, bus, pes, self)
        for u0, u1, pe in pes:
            self._wire_pe(m, g, ctl, loader, compute, pe, u0, u1)
        m.d.comb += ctl.engines_continue.eq(loader.continues | compute.continues | drain.continues)
        return m

    @staticmethod
    def _wire_pe(m: Module, g: Geometry, ctl: Controller, loader: Loader, compute: Compute, pe,
                 u0: int, u1: int) -> None:
        """One PE's view of the step being loaded (its tile, in input coordinates) and of the step
        being computed (its extents), and the broadcast NoC lanes and compute counters."""
        ld, cp, sy, sx, R, S = ctl.ld, ctl.cp, g.stride_y, g.stride_x, g.R, g.S
        (lk0, lkn), (lc0, lcn), (ly0, lyn), (lx0, lxn) = [g.tile(ld, di, u0, u1) for di in range(4)]
        m.d.comb += [
            pe.lane_valid.eq(loader.lane_valid), pe.lane_count.eq(loader.lane_count),
            pe.lane_weight.eq(loader.lane_weight),
            pe.lane_a.eq(loader.lane_coord[0]), pe.lane_b.eq(loader.lane_coord[1]),
            pe.lane_c.eq(loader.lane_coord[2]), pe.lane_d.eq(loader.lane_coord[3]),
            pe.lane_data.eq(loader.lane_data),
            pe.ld_bank_in.eq(ld.bank_in), pe.ld_bank_w.eq(ld.bank_w),
            pe.ld_k0.eq(lk0), pe.ld_kn.eq(lkn), pe.ld_c0.eq(lc0), pe.ld_cn.eq(lcn),
            pe.ld_y0.eq(ly0 * sy), pe.ld_yn.eq(Mux(lyn > 0, input_span(lyn, sy, R), 0)),
            pe.ld_x0.eq(lx0 * sx), pe.ld_xn.eq(Mux(lxn > 0, input_span(lxn, sx, S), 0)),
            pe.mac_en.eq(compute.issue), pe.stride_y.eq(sy), pe.stride_x.eq(sx),
            pe.cp_bank_in.eq(cp.bank_in), pe.cp_bank_w.eq(cp.bank_w), pe.cp_bank_ps.eq(cp.bank_ps),
        ]
        m.d.comb += [getattr(pe, f"mac_{n}").eq(compute.counters[n]) for n in ORDER]
        m.d.comb += [pe.filt_s.eq(S), pe.filt_rs.eq(compute.filter_rs)]
        ext = [g.tile(cp, di, u0, u1)[1] for di in range(len(LOOP_DIMS))]
        m.d.comb += [pe.cp_kn.eq(ext[0]), pe.cp_cn.eq(ext[1]), pe.cp_yn.eq(ext[2]), pe.cp_xn.eq(ext[3])]

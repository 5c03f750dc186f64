"""The host bus: one word bus whose top four address bits select a region (control and status,
the input, weight and output regions of L2).  The host writes L2 and the configuration
registers while the accelerator is idle, starts it, polls ``done`` and reads the outputs; see
``docs/timing.md``, :mod:`hwgen.layout` and the AXI top level :mod:`hwgen.axi` that drives it."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal

from .common import Copies, pipe
from .geometry import CONFIG_REGS, Geometry
from .l2 import L2

__all__ = ["REGION", "CTRL", "HostBus"]

REGION = {"ctrl": 0, "input": 1, "weight": 2, "output": 3}   # bus_addr[n:n+4], n = host_offset_bits
CTRL = {"start": 0, "status": 1, "cycles": 2, "config": 16}  # word offsets in the ctrl region


@dataclass
class HostBus:
    start: Signal           # one cycle: the host writes 1 to the start register (the controller
    #                         starts START_DELAY cycles later, Controller.elaborate)
    out_row: object         # the row of the bus word offset in its output bank (while idle)
    out_write: list         # per output bank: the host writes its word (it clears outputs before a run)

    @classmethod
    def build(cls, m: Module, top, g: Geometry, l2: L2, banks: int, busy: Signal, done: Signal,
              cycles: Signal, busy_soon: Signal) -> "HostBus":
        n = top.offset_bits
        region = top.bus_addr[n:n + 4]
        offset = top.bus_addr[:n]
        lg = (banks - 1).bit_length()
        # (the banks' write enables from kept copies of ``busy``: the one register's wires would
        # reach every block RAM of L2)
        busy_near = Copies(banks, lambda i: pipe(m, busy_soon, f"host_busy{i}")).of
        # (an operand bank holds both regions' words: the input's or the weight's row, L2.operand_row)
        operand_we = top.bus_we & ((region == REGION["input"]) | (region == REGION["weight"]))
        op_row = l2.operand_row(offset >> lg, region == REGION[l2.high])
        for b, (_, wr) in enumerate(l2.operands):
            hit = operand_we & ~busy_near(b)
            if banks > 1:
                hit = hit & (offset[:lg] == b)
            m.d.comb += [wr.addr.eq(op_row), wr.data.eq(top.bus_wdata[:8]), wr.en.eq(hit)]
        # (the output region's banks: as many as the drain's run needs, L2.build)
        out_banks = len(l2.outputs)
        out_lg = (out_banks - 1).bit_length()
        out_we = top.bus_we & (region == REGION["output"])
        out_write = [Signal(name=f"host_out_we{b}") for b in range(out_banks)]
        for b, we in enumerate(out_write):
            hit = out_we & ~busy_near(b * banks // out_banks)
            m.d.comb += we.eq(hit & (offset[:out_lg] == b) if out_banks > 1 else hit)
        region_r = Signal(4)
        bank_r = Signal(max(1, out_lg), name="host_bank_r")       # the output bank read last cycle
        m.d.sync += bank_r.eq(offset[:out_lg] if out_banks > 1 else 0)
        ctrl_r = Signal(32)
        m.d.sync += region_r.eq(region)
        with m.If(top.bus_re & (region == REGION["ctrl"])):
            with m.Switch(offset):
                with m.Case(CTRL["status"]):
                    m.d.sync += ctrl_r.eq(Cat(busy, done))
                with m.Case(CTRL["cycles"]):
                    m.d.sync += ctrl_r.eq(cycles)
                for i, name in enumerate(CONFIG_REGS):
                    with m.Case(CTRL["config"] + i):
                        m.d.sync += ctrl_r.eq(g.cfg[name])
        out_data = Cat(*[rd.data for rd, _ in l2.outputs])
        m.d.comb += top.bus_rdata.eq(Mux(region_r == REGION["output"], out_data.word_select(bank_r, 32), ctrl_r))
        # the host's writes of start and of the configuration, while the accelerator is idle
        # (``busy``: running, or starting)
        start = Signal(name="start_write")
        with m.If(top.bus_we & (region == REGION["ctrl"]) & ~busy):
            with m.Switch(offset):
                with m.Case(CTRL["start"]):
                    m.d.comb += start.eq(top.bus_wdata[0])
                for i, name in enumerate(CONFIG_REGS):
                    with m.Case(CTRL["config"] + i):
                        m.d.sync += g.cfg[name].eq(top.bus_wdata)
        return cls(start, offset >> out_lg, out_write)

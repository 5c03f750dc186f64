"""The IP top level ``accelgen_axi_top``: the accelerator core (``accelgen_top``, instantiated as
it is emitted) behind interfaces that FPGA tools recognise.

* ``aclk``, ``aresetn`` (active low, synchronous);
* ``s_axil_*``: an AXI4-Lite slave (32-bit data, 12-bit byte addresses) holding the register map
  of :mod:`hwgen.regmap` (control, status, cycles, interrupt, the data port and the layer's
  configuration registers);
* ``s_axis_*``: an AXI4-Stream slave (``tdata`` 32, ``tkeep`` 4, ``tlast``) writing L2 at
  ``region`` / ``offset``: int8 regions take four words a beat (byte lane ``i`` is word
  ``offset + i``, ``tkeep`` selects), the output region one int32 a beat;
* ``m_axis_*``: an AXI4-Stream master (``tdata`` 32, ``tkeep`` all ones, ``tlast``) sending output words ``0 .. out_words-1`` after a write of
  ``ctrl.readout``, ``tlast`` on the last;
* ``irq``: ``irq_status.done & irq_enable.done``, level, cleared by writing 1 to ``irq_status``.

The core's one word bus is shared by the AXI4-Lite port (first), then the clear, readout and
stream engines; a register write reaches the core in the cycle of its handshake, so the
``cycles`` register counts from the cycle after the ``ctrl.start`` write handshake, exactly as
``docs/timing.md`` says.  An AXI4-Lite write waits (``awready`` low, at most four cycles) until
the words of the stream beat or ``load_data`` write before it are in L2, and a pending write
pauses ``s_axis``: writes land in the order they were issued.  ``ctrl`` is ignored while the core
runs, a clear or a readout is in progress (``status``); L2 is the core's while it runs or clears
(``s_axis_tready`` low, ``load_data`` answers ``SLVERR``); words beyond a region are dropped, and
registers are written whole (``wstrb`` matters for ``load_data`` alone).  An address without a register, a write to a
read-only one or a read of a write-only one answers ``SLVERR`` (and does nothing)."""

from __future__ import annotations

from amaranth.hdl import Cat, ClockDomain, ClockSignal, Const, Instance, Module, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .geometry import CONFIG_REGS
from .hostbus import CTRL, REGION
from .regmap import INFO_REGS, MAGIC, VERSION, register_map

__all__ = ["AXI_TOP", "AXIL_ADDR_BITS", "IRQ_LATENCY_CYCLES", "AxiTop", "axi_signature"]

AXI_TOP = "accelgen_axi_top"
AXIL_ADDR_BITS = 12          # a 4 KiB aperture; the map uses the first 0x88 bytes
#: Clock edges from the ``ctrl.start`` write handshake to ``irq`` rising, beyond the ``cycles``
#: register: the core counts from the cycle after the handshake, and ``irq_status.done`` is set at
#: the edge after ``done`` rises (the benches check this exactly).
IRQ_LATENCY_CYCLES = 2


OKAY, SLVERR = 0b00, 0b10    # xRESP: an address that holds no register (or not that way) answers SLVERR


def sum_or(terms: list):
    out = Const(0, 1)
    for term in terms:
        out = out | term
    return out


def axi_signature() -> dict:
    return {
        "aclk": In(1), "aresetn": In(1),
        "s_axil_awaddr": In(AXIL_ADDR_BITS), "s_axil_awvalid": In(1), "s_axil_awready": Out(1),
        "s_axil_wdata": In(32), "s_axil_wstrb": In(4), "s_axil_wvalid": In(1), "s_axil_wready": Out(1),
        "s_axil_bresp": Out(2), "s_axil_bvalid": Out(1), "s_axil_bready": In(1),
        "s_axil_araddr": In(AXIL_ADDR_BITS), "s_axil_arvalid": In(1), "s_axil_arready": Out(1),
        "s_axil_rdata": Out(32), "s_axil_rresp": Out(2), "s_axil_rvalid": Out(1), "s_axil_rready": In(1),
        "s_axis_tdata": In(32), "s_axis_tkeep": In(4), "s_axis_tvalid": In(1), "s_axis_tready": Out(1),
        "s_axis_tlast": In(1),
        "m_axis_tdata": Out(32), "m_axis_tkeep": Out(4), "m_axis_tvalid": Out(1), "m_axis_tready": In(1),
        "m_axis_tlast": Out(1),
        "irq": Out(1),
    }


class CoreBus:
    """The core's host bus as seen from the shell (``docs/timing.md``, :mod:`hwgen.hostbus`)."""

    def __init__(self, offset_bits: int):
        self.addr = Signal(offset_bits + 4, name="core_bus_addr")
        self.wdata = Signal(32, name="core_bus_wdata")
        self.we = Signal(name="core_bus_we")
        self.re = Signal(name="core_bus_re")
        self.rdata = Signal(32, name="core_bus_rdata")
        self.busy = Signal(name="core_busy")
        self.done = Signal(name="core_done")


class AxiTop(wiring.Component):
    """``core``: ``None`` instantiates the emitted ``accelgen_top``; tests pass an Amaranth
    module with the same ports (``bus_addr`` ... ``done``) to simulate the shell alone."""

    def __init__(self, offset_bits: int, l2_words: dict[str, int], info: dict[str, int], core=None,
                 core_name: str = "accelgen_top", clock_from_ports: bool = True):
        self.offset_bits = offset_bits
        self.l2_words = dict(l2_words)
        self.info = {name: int(info.get(name, 0)) for name in INFO_REGS}
        self.core = core
        self.core_name = core_name
        self.clock_from_ports = clock_from_ports    # False: the simulator's own sync domain (tests)
        super().__init__(axi_signature())

    def _core(self, m: Module, bus: CoreBus) -> None:
        if self.core is None:
            m.submodules.core = Instance(
                self.core_name, i_clk=ClockSignal(), i_rst=ResetSignal(), i_bus_addr=bus.addr,
                i_bus_wdata=bus.wdata, i_bus_we=bus.we, i_bus_re=bus.re, o_bus_rdata=bus.rdata,
                o_busy=bus.busy, o_done=bus.done)
            return
        c = self.core
        m.submodules.core = c
        m.d.comb += [c.bus_addr.eq(bus.addr), c.bus_wdata.eq(bus.wdata), c.bus_we.eq(bus.we), c.bus_re.eq(bus.re),
                     bus.rdata.eq(c.bus_rdata), bus.busy.eq(c.busy), bus.done.eq(c.done)]

    def elaborate(self, platform):
        m = Module()
        if self.clock_from_ports:
            m.domains.sync = ClockDomain("sync")
            m.d.comb += [ClockSignal().eq(self.aclk), ResetSignal().eq(~self.aresetn)]
        n = self.offset_bits
        rm = register_map()
        bus = CoreBus(n)
        self._core(m, bus)

        def core_addr(region: str, offset) -> object:
            return Cat(offset[:n] if not isinstance(offset, int) else Const(offset, n), Const(REGION[region], 4))

        # -- shell registers
        irq_enable, irq_pending = Signal(name="irq_enable"), Signal(name="irq_pending")
        region = Signal(2, init=rm["region"].fields["target"].reset, name="data_region")
        offset = Signal(32, name="data_offset")
        out_words = Signal(32, name="out_words")
        clearing, streaming = Signal(name="clearing"), Signal(name="streaming")
        idx = Signal(32, name="engine_index")           # the clear's / readout's next word
        done_r = Signal(name="core_done_r")
        m.d.sync += done_r.eq(bus.done)
        m.d.comb += self.irq.eq(irq_pending & irq_enable)
        idle = ~bus.busy & ~clearing & ~streaming

        # the region a data word goes to, and whether the offset is inside it
        region_name = {code: name for name, code in REGION.items() if name != "ctrl"}
        in_range = Signal(name="offset_in_range")
        with m.Switch(region):
            for code, name in region_name.items():
                with m.Case(code):
                    m.d.comb += in_range.eq(offset < self.l2_words[name])

        def data_addr():
            return Cat(offset[:n], region.as_unsigned(), Const(0, 2))

        # -- AXI4-Lite write: address and data together, answered the next cycle
        packer_valid = Signal(name="packer_valid")
        aw = self.s_axil_awaddr[2:]
        aw_is = {name: aw == (reg.address >> 2) for name, reg in rm.registers.items()}
        aw_fire = Signal(name="axil_aw_fire")
        # a write waits (at most four cycles) for the packer's last words, so it lands after them:
        # a start never overtakes the data before it
        m.d.comb += aw_fire.eq(self.s_axil_awvalid & self.s_axil_wvalid & ~self.s_axil_bvalid & ~packer_valid)
        m.d.comb += [self.s_axil_awready.eq(aw_fire), self.s_axil_wready.eq(aw_fire)]
        aw_mapped = sum_or([aw_is[name] for name, reg in rm.registers.items() if reg.writable])
        aw_mapped = aw_mapped & ~(aw_is["load_data"] & ~idle)      # L2 is the core's while it runs
        with m.If(aw_fire):
            m.d.sync += [self.s_axil_bvalid.eq(1), self.s_axil_bresp.eq(Mux(aw_mapped, OKAY, SLVERR))]
        with m.Elif(self.s_axil_bready):
            m.d.sync += self.s_axil_bvalid.eq(0)
        wd = self.s_axil_wdata
        ctrl = rm["ctrl"].fields
        with m.If(aw_fire):
            with m.If(aw_is["ctrl"]):
                m.d.comb += [bus.addr.eq(core_addr("ctrl", CTRL["start"])), bus.wdata.eq(wd[ctrl["start"].lsb]),
                             bus.we.eq(wd[ctrl["start"].lsb] & ~streaming & ~clearing)]
                with m.If(idle & wd[ctrl["clear"].lsb]):
                    m.d.sync += [clearing.eq(out_words != 0), idx.eq(0)]
                with m.Elif(idle & wd[ctrl["readout"].lsb]):
                    m.d.sync += [streaming.eq(out_words != 0), idx.eq(0)]
            for i, name in enumerate(CONFIG_REGS):
                with m.If(aw_is[f"cfg_{name}"]):
                    m.d.comb += [bus.addr.eq(core_addr("ctrl", CTRL["config"] + i)), bus.wdata.eq(wd), bus.we.eq(1)]
            with m.If(aw_is["irq_enable"]):
                m.d.sync += irq_enable.eq(wd[0])
            with m.If(aw_is["region"]):
                m.d.sync += region.eq(wd[:2])
            with m.If(aw_is["out_words"]):
                m.d.sync += out_words.eq(wd)
        with m.If(bus.done & ~done_r):
            m.d.sync += irq_pending.eq(1)
        with m.Elif(aw_fire & aw_is["irq_status"] & wd[0]):
            m.d.sync += irq_pending.eq(0)

        # -- AXI4-Lite read: the handshake cycle reads (the core answers a cycle later), then rvalid
        ar = self.s_axil_araddr[2:]
        ar_is = {name: ar == (reg.address >> 2) for name, reg in rm.registers.items()}
        ar_fire = Signal(name="axil_ar_fire")
        rd_wait = Signal(name="axil_read_wait")          # the data comes next cycle
        rd_from_core = Signal(name="axil_read_core")
        rd_local = Signal(32, name="axil_read_local")
        m.d.comb += ar_fire.eq(self.s_axil_arvalid & ~self.s_axil_rvalid & ~rd_wait & ~aw_fire)
        m.d.comb += self.s_axil_arready.eq(ar_fire)
        ar_mapped = sum_or([ar_is[name] for name, reg in rm.registers.items() if reg.readable])
        with m.If(ar_fire):
            m.d.sync += self.s_axil_rresp.eq(Mux(ar_mapped, OKAY, SLVERR))
        m.d.sync += rd_wait.eq(ar_fire)
        with m.If(rd_wait):
            m.d.sync += [self.s_axil_rvalid.eq(1), self.s_axil_rdata.eq(Mux(rd_from_core, bus.rdata, rd_local))]
        with m.Elif(self.s_axil_rready):
            m.d.sync += self.s_axil_rvalid.eq(0)
        status = rm["status"]
        info_reg = rm["info"]
        local = {
            "status": sum((v << status.fields[f].lsb for f, v in
                           (("busy", bus.busy), ("done", bus.done), ("clearing", clearing), ("streaming", streaming))),
                          Const(0, 32)),
            "irq_enable": irq_enable, "irq_status": irq_pending, "region": region, "offset": offset,
            "out_words": out_words,
            "info": Const(info_reg.value(version=VERSION, magic=MAGIC), 32),
            **{name: Const(self.info[name], 32) for name in INFO_REGS},
        }
        with m.If(ar_fire):
            m.d.sync += [rd_from_core.eq(0), rd_local.eq(0)]
            for name, value in local.items():
                with m.If(ar_is[name]):
                    m.d.sync += rd_local.eq(value)
            with m.If(ar_is["cycles"]):
                m.d.comb += [bus.addr.eq(core_addr("ctrl", CTRL["cycles"])), bus.re.eq(1)]
                m.d.sync += rd_from_core.eq(1)
            for i, name in enumerate(CONFIG_REGS):
                with m.If(ar_is[f"cfg_{name}"]):
                    m.d.comb += [bus.addr.eq(core_addr("ctrl", CTRL["config"] + i)), bus.re.eq(1)]
                    m.d.sync += rd_from_core.eq(1)
            with m.If(ar_is["read_data"] & idle):
                m.d.comb += [bus.addr.eq(core_addr("output", offset)), bus.re.eq(1)]
                m.d.sync += [rd_from_core.eq(1), offset.eq(offset + 1)]

        lite = aw_fire | ar_fire                          # the AXI4-Lite port has the bus this cycle

        # -- clear: zero output words 0 .. out_words-1, one a cycle
        with m.If(clearing & ~lite):
            m.d.comb += [bus.addr.eq(core_addr("output", idx)), bus.wdata.eq(0),
                         bus.we.eq(idx < self.l2_words["output"])]
            m.d.sync += idx.eq(idx + 1)
            with m.If(idx + 1 >= out_words):
                m.d.sync += clearing.eq(0)

        # -- readout: read output words into a two-word queue; a read is issued when the queue
        # will have room for it when it lands (a word leaving this cycle counts), so m_axis
        # sends a word every cycle while tready holds
        queue = [Signal(33, name=f"readout_q{i}") for i in range(2)]
        count = Signal(range(3), name="readout_count")
        in_flight = Signal(name="readout_in_flight")
        issue = Signal(name="readout_issue")
        pop = Signal(name="readout_pop")
        m.d.comb += [pop.eq((count != 0) & self.m_axis_tready),
                     issue.eq(streaming & ~lite & (count - pop + in_flight < len(queue)))]
        m.d.sync += in_flight.eq(issue)
        with m.If(issue):
            m.d.comb += [bus.addr.eq(core_addr("output", idx)), bus.re.eq(1)]
            m.d.sync += idx.eq(idx + 1)
            with m.If(idx + 1 >= out_words):
                m.d.sync += streaming.eq(0)
        last_r = Signal(name="readout_last")
        m.d.sync += last_r.eq(idx + 1 >= out_words)
        with m.If(pop):
            m.d.sync += queue[0].eq(queue[1])
        with m.If(in_flight):
            with m.Switch(count - pop):
                for i, q in enumerate(queue):
                    with m.Case(i):
                        m.d.sync += q.eq(Cat(bus.rdata, last_r))
        m.d.sync += count.eq(count + in_flight - pop)
        m.d.comb += [self.m_axis_tvalid.eq(count != 0), self.m_axis_tkeep.eq(0b1111), self.m_axis_tdata.eq(queue[0][:32]),
                     self.m_axis_tlast.eq(queue[0][32])]

        # -- the packer: a beat of s_axis or a load_data write, written a word a cycle
        pk_data, pk_keep = Signal(32, name="packer_data"), Signal(4, name="packer_keep")
        is_output = region == REGION["output"]
        writing = packer_valid & ~lite
        finishing = Signal(name="packer_finishing")
        m.d.comb += finishing.eq(writing & (is_output | (pk_keep[1:] == 0)))
        with m.If(writing):
            m.d.comb += [bus.addr.eq(data_addr()), bus.wdata.eq(Mux(is_output, pk_data, pk_data[:8])),
                         bus.we.eq(in_range & (pk_keep[0] | (is_output & (pk_keep != 0))))]
            with m.If(pk_keep[0] | is_output):
                m.d.sync += offset.eq(offset + 1)
            m.d.sync += [pk_data.eq(pk_data >> 8), pk_keep.eq(pk_keep >> 1)]
            with m.If(finishing):
                m.d.sync += packer_valid.eq(0)
        accept = Signal(name="s_axis_accept")
        # a pending AXI4-Lite write pauses the stream, so the packer empties and the write goes through
        m.d.comb += [self.s_axis_tready.eq(idle & (~packer_valid | finishing)
                                           & ~(self.s_axil_awvalid & self.s_axil_wvalid)),
                     accept.eq(self.s_axis_tvalid & self.s_axis_tready)]
        with m.If(accept):
            m.d.sync += [pk_data.eq(self.s_axis_tdata), pk_keep.eq(self.s_axis_tkeep), packer_valid.eq(1)]
        with m.Elif(aw_fire & aw_is["load_data"] & idle):
            m.d.sync += [pk_data.eq(wd), pk_keep.eq(self.s_axil_wstrb), packer_valid.eq(1)]
        # offset: the data engines advance it, an AXI4-Lite write sets it (they never share a cycle)
        with m.If(aw_fire & aw_is["offset"]):
            m.d.sync += offset.eq(wd)
        return m

"""The generated accelerator's top level: the host bus, the banked L2, the controller, the
loader and multicast NoC, the PE array with its compute engine, and the drain with its reduction
tree, wired together.

Timing follows ``docs/timing.md`` (and :mod:`costmodel.hwgen_preset`, which the ``hwgen`` cost
model preset evaluates): the loop nest is walked in *slots*; slot ``k`` loads step ``k``,
computes step ``k-1`` and drains step ``k-2``; it lasts as long as the longest of the three
engines (at least one cycle): the next slot starts the cycle after.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from costmodel.hwgen_preset.rules import LOOP_DIMS, host_offset_bits, input_span, l2_address_bits
from costmodel.hwgen_preset.structure import HwStructure

from .common import COORD, by_stride, fanout, pipe, registered, span, wire
from .compute import ORDER, PES_PER_OPERAND_COPY, Compute
from .controller import Controller
from .drain import Drain
from .geometry import CONFIG_REGS, Geometry
from .hostbus import CTRL, REGION, HostBus
from .l2 import L2
from .loader import Loader, tensor_ingress
from .pe import PE, pe_instance, row_window

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
        return PE(self.s)

    def elaborate(self, platform):
        m = Module()
        s = self.s
        g = Geometry(m, s)
        ctl = Controller.build()
        # (the port's busy: a copy of the register, that the pin's placement does not pull the
        # host bus's guard away from it)
        m.d.comb += [self.busy.eq(pipe(m, ctl.busy_soon, "busy_port")), self.done.eq(ctl.done)]
        l2 = L2.build(m, self.l2_words, s.noc_words_per_cycle, s.output_banks(self.l2_words["output"]))
        bus = HostBus.build(m, self, g, l2, s.noc_words_per_cycle, ctl.busy, ctl.done, ctl.cycles, ctl.busy_soon)
        template = self.pe()
        start = bus.start
        if template.psum_clear_cycles:
            # the PEs clear their partial sums (LUT RAM) in the cycles after reset: a start
            # written then is ignored (docs/timing.md).  ``clearing``: a flag register, that the
            # start's path meets one bit (its count is ``left != 0``, a cycle ahead)
            left = Signal(range(template.psum_clear_cycles + 1), init=template.psum_clear_cycles,
                          name="pe_clear_left")
            clearing = Signal(name="pe_clearing", init=1)
            with m.If(left != 0):
                m.d.sync += [left.eq(left - 1), clearing.eq(left > 1)]
            start = wire(m, bus.start & ~clearing, "start_accepted")
        ctl.elaborate(m, s, g, start)
        loader = Loader.build(m, s, g, ctl, l2, self.abits)
        compute = Compute.build(m, s, g, ctl)
        pes = [(u0, u1, pe_instance(m, f"pe_{u0}_{u1}", template)) for u0 in range(s.n0) for u1 in range(s.n1)]
        drain = Drain.build(m, s, g, ctl, l2, bus, pes, self)
        shared = _PerClass(m, s, g, ctl, loader, compute)
        for u0, u1, pe in pes:
            shared.wire_pe(pe, u0, u1, template)
        m.d.comb += [ctl.engines_continue.eq(loader.continues | compute.continues | drain.continues),
                     ctl.flushing.eq(drain.flushing)]
        ctl.connect_engines(m, [loader.continues_next, compute.continues_next, drain.continues_next])
        return m



class _PerClass:
    """What the PEs are told, each quantity computed once for the PEs it is the same for: a PE's
    tile extent along a loop dimension depends on its unit index only at the levels that spread
    that dimension, and its lanes, its load phase and where its window falls only on the levels
    that spread a dimension of the tensor (``kcp`` on 64 PEs: 8 input classes, not 64).
    Quantities the same for every PE (the L1 row a chunk goes to, the operand addresses) are
    broadcast."""

    def __init__(self, m: Module, s: HwStructure, g: Geometry, ctl: Controller, loader: Loader, compute: Compute):
        self.m, self.s, self.g, self.ctl, self.loader, self.compute = m, s, g, ctl, loader, compute
        self.cache: dict = {}
        self.A = len(loader.col)
        self.ingress = tensor_ingress(s)

    def _once(self, key, make):
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def _to_pes(self, value, name: str):
        """A register of a step descriptor's ``value`` for the PEs' capture: a descriptor changes
        at the shift, whose logic sits with the controller, and the PEs are spread over the
        device, so the broadcast starts from a register of its own (a cycle later than the
        descriptor is in time: the captures come four cycles after the loader's issues)."""
        return self._once(("to_pes", name), lambda: registered(self.m, value, f"{name}_pes"))

    def _to_all_pes(self, value, name: str, u0: int, u1: int):
        """:meth:`_to_pes` for a value every PE reads: the register in copies for groups of PEs
        (:func:`.common.fanout`), PE (``u0``, ``u1``)'s copy."""
        return self._once(("to_all_pes", name), lambda: fanout(self.m, value, f"{name}_pes", self.s.num_pes)).of(
            self._pe(u0, u1))

    def _unit_key(self, dims, u0: int, u1: int) -> tuple[int, int]:
        s = self.s
        return (u0 if s.spatial[0] in dims else 0, u1 if s.spatial[1] in dims else 0)

    def extent(self, desc, d: str, u0: int, u1: int):
        """The PE's tile extent along ``d`` in the step of ``desc`` (the controller's ``ld`` or
        ``cp``), a register ahead of the step (the ``ld`` one, moved along for ``cp``)."""
        k0, k1 = self._unit_key((d,), u0, u1)
        which = desc.valid.name[:2]
        di = LOOP_DIMS.index(d)
        s = self.s
        level = next((lv for lv in (0, 1) if s.spatial[lv] == d and (s.n0, s.n1)[lv] > 1), None)
        if level is not None:               # (every unit of the level at once: Geometry.spread_extent_stages)
            units = self._once(("ext", "units", d), lambda: self.ctl.ahead(
                self.m, "ld", f"ld_ext_{d}", *self.g.spread_extent_stages(di, level)))
            ld = units[f"u{(k0, k1)[level]}"]
        else:
            ld = self._once(("ext", "ld", d, k0, k1), lambda: self.ctl.ahead(
                self.m, "ld", f"ld_ext_{d}_{k0}_{k1}", *self.g.pe_tile_stages(di, k0, k1)))
        if which == "ld":
            return ld
        return self._once(("ext", which, d, k0, k1), lambda: self.ctl.later(self.m, ld, which))

    def _span(self, d: str, u0: int, u1: int):
        """Input rows (``Y``) or columns (``X``) of the PE's tile in the step being loaded."""
        g, m = self.g, self.m
        k0, k1 = self._unit_key((d,), u0, u1)

        def make():
            stride, filt = (g.stride_y, g.R) if d == "Y" else (g.stride_x, g.S)
            # the extent in three stages (Controller.ahead), then the span
            return self.ctl.ahead(m, "ld", f"ld_span_{d}_{k0}_{k1}", *g.pe_tile_stages(LOOP_DIMS.index(d), k0, k1),
                                  lambda e: Mux(e > 0, span(e, stride, filt, self.s.max_stride), 0)[:COORD])
        return self._once(("span", d, k0, k1), make)

    def _ld_extent(self, d: str, u0: int, u1: int):
        """The PE's extent along ``d`` in the step loaded (its input span for ``Y`` and ``X``),
        registered for the PEs (:meth:`_to_pes`)."""
        k0, k1 = self._unit_key((d,), u0, u1)
        value = self._span(d, u0, u1) if d in ("Y", "X") else self.extent(self.ctl.ld, d, u0, u1)
        return self._to_pes(value, f"ld_ext_{d}_{k0}_{k1}")

    def _class(self, name: str, u0: int, u1: int) -> int:
        """The PE's class for tensor ``name``: its units along the levels the tensor's L2 layout
        interleaves, the level-0 one first (:func:`hwgen.layout.interleaved`)."""
        s, inter = self.s, self.ingress[name].interleaved
        u = 0
        for lv, (d, n, k) in enumerate(zip(s.spatial, (s.n0, s.n1), (u0, u1))):
            if d in inter:
                u = u * n + k
        return u

    def _taps(self, name: str, u0: int, u1: int):
        """The lanes the PE takes its words of ``name`` from, fixed: ``P`` words of each class a
        chunk (class ``u``'s word ``j`` on lane ``j * classes + u``), or, with more classes than
        lanes, class ``u``'s on lane ``u % W`` (in phase ``u // W``); a window's: all of them."""
        ing, W, data = self.ingress[name], self.s.noc_words_per_cycle, self.loader.lane_data
        if name == "input" and ing.window_x:
            return data
        u = self._class(name, u0, u1)
        lanes = [u % W] if ing.classes > W else [j * ing.classes + u for j in range(ing.per_pe)]
        return Cat(*[data[8 * j: 8 * j + 8] for j in lanes])

    def _we(self, name: str, u0: int, u1: int):
        """The chunk on the lanes is one of ``name`` that the PE takes (its phase, with more
        classes than lanes): once per phase."""
        ing, W = self.ingress[name], self.s.noc_words_per_cycle
        phase = self._class(name, u0, u1) // W if ing.classes > W else None
        chunks = self.loader.chunk
        copy = self._pe(u0, u1) * len(chunks) // chunks.count        # (the PE's copy of the chunk's registers)
        ch = chunks[copy]

        def make():
            ok = ch["valid"] & (ch["weight"] if name == "weight" else ~ch["weight"])
            if phase is not None:
                ok = ok & (ch["phase"] == phase)
            return wire(self.m, ok, f"ld_we_{name}_{phase}_{copy}")
        return self._once(("we", name, phase, copy), make)

    def _pe(self, u0: int, u1: int) -> int:
        """The PE's index (for its copies of a broadcast register: :class:`.common.Copies`)."""
        return u0 * self.s.n1 + u1

    def _rows(self, u0: int, u1: int):
        """The L1 row and write enable of the input for the PE's class when the input is spread
        along ``Y`` in overlapping windows: the loader sends the union's rows, and the class of
        unit ``u`` takes rows ``u * T * stride_y`` .. of them (its input span in the step), each
        ``u * T * stride_y`` rows of its L1 below where the loader counts it; registered from the
        loader's count a cycle before the lanes, once per class."""
        s, g, m = self.s, self.g, self.m
        lv = s.spatial.index("Y")
        u = (u0, u1)[lv]
        early = self.loader.chunk_early

        def make():
            first = g.static(by_stride(g.scaled(lv, "Y", u), g.stride_y, s.max_stride)[:COORD],
                             f"win_y_first_{u}", COORD) if u else Const(0, COORD)
            # (the loader's rows per input row, as it counts them: hwgen/loader.py)
            inner = g.static(g.cfg["l1_in_row"] >> (self.ingress["input"].banks - 1).bit_length(),
                             f"win_y_inner_{u}", COORD)
            below = g.static_product(first, inner, f"win_y_below_{u}", COORD) if u else Const(0, COORD)
            rel = (early["y"] - first)[:COORD + 1].as_signed()
            span = self._span("Y", u0, u1)
            ok = early["valid"] & ~early["weight"] & (rel >= 0) & (rel < span)
            return (registered(m, ok, f"win_y_we_{u}"),
                    registered(m, (early["row"] - below)[:len(early["row"])], f"win_y_row_{u}"))
        return self._once(("rows", u), make)

    def _window(self, u0: int, u1: int):
        """Where the window of the class's PEs falls on the lanes of a cycle later (``near``,
        ``lo``: :meth:`PE._window`): its first word's column in the union's row is the class's
        unit times the spread tile and the stride, a static register; the chunk's first column
        comes from the loader a cycle after the issue."""
        s, g, m, A, W = self.s, self.g, self.m, self.A, self.s.noc_words_per_cycle
        lv = s.spatial.index("X")
        u = (u0, u1)[lv]
        n = input_span(s.pe_tile_max["X"], s.max_stride, s.pe_tile_max["S"])

        def make():
            first = g.static((by_stride(g.scaled(lv, "X", u), g.stride_x, s.max_stride) + (n - 1))[:A],
                             f"win_first_{u}", A) if u else Const(n - 1, A)
            v = registered(m, (first - self.loader.col)[:A], f"win_v_{u}", A)
            return registered(m, v < W + n - 1, f"win_near_{u}"), registered(m, v[:row_window(n, W)], f"win_lo_{u}")
        return self._once(("window", u), make)

    def _inside(self, u0: int, u1: int):
        """The compute engine's position of the cycle before is inside the PE's tile of the step
        computed (registered with the broadcast, like the operand addresses)."""
        cp, mac = self.ctl.cp, self.compute.counters

        def inside(n, d, k0, k1):
            reg = Signal(name=f"cp_in_{d}_{k0}_{k1}")
            self.m.d.sync += reg.eq(mac[n] < self.extent(cp, d, k0, k1))
            return reg
        bits = []
        for d, n in zip(LOOP_DIMS, ORDER):
            k0, k1 = self._unit_key((d,), u0, u1)
            bits.append(self._once(("inside", d, k0, k1), lambda: inside(n, d, k0, k1)))
        return Cat(*bits).all()

    def wire_pe(self, pe, u0: int, u1: int, template: PE) -> None:
        """One PE's ports."""
        m, ctl, loader, compute = self.m, self.ctl, self.loader, self.compute
        ld = ctl.ld
        ch = loader.chunk.of(self._pe(u0, u1))
        m.d.comb += [
            pe.in_taps.eq(self._taps("input", u0, u1)), pe.w_taps.eq(self._taps("weight", u0, u1)),
            pe.ld_we_w.eq(self._we("weight", u0, u1)), pe.ld_count.eq(ch["count"]),
            pe.ld_bank_in.eq(self._to_all_pes(ld.bank_in, "ld_bank_in", u0, u1)),
            pe.ld_bank_w.eq(self._to_all_pes(ld.bank_w, "ld_bank_w", u0, u1)),
        ]
        ops = compute.operands(self._pe(u0, u1) // PES_PER_OPERAND_COPY)
        m.d.comb += [pe.cp_bank_in.eq(ops["bank_in"]), pe.cp_bank_w.eq(ops["bank_w"]),
                     pe.mac_en.eq(ops["issue"] & self._inside(u0, u1)), pe.rd_on.eq(ops["rd_on"]),
                     pe.ps_addr.eq(ops["ps_addr"]), pe.cp_bank_ps.eq(ops["bank_ps"])]
        if self.ingress["input"].window_y:
            we_in, row_in = self._rows(u0, u1)
            m.d.comb += [pe.ld_we_in.eq(we_in), pe.ld_row.eq(Mux(ch["weight"], ch["row"], row_in))]
        else:
            m.d.comb += [pe.ld_we_in.eq(self._we("input", u0, u1)), pe.ld_row.eq(ch["row"])]
        if template.window:
            near, lo = self._window(u0, u1)
            m.d.comb += [pe.lane_len.eq(loader.early_len), pe.win_near.eq(near), pe.win_lo.eq(lo),
                         pe.ld_xn.eq(self._ld_extent("X", u0, u1))]
        for j in range(template.simd):
            m.d.comb += [getattr(pe, f"rd_in_{j}").eq(ops["rd_in"][j]),
                         getattr(pe, f"rd_w_{j}").eq(ops["rd_w"][j])]

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

from costmodel.hwgen_preset.rules import LOOP_DIMS, host_offset_bits, l2_address_bits
from costmodel.hwgen_preset.structure import HwStructure

from .common import COORD, by_stride, registered, span, times, wire
from .compute import ORDER, PES_PER_OPERAND_COPY, Compute
from .controller import Controller
from .drain import Drain, drain_lanes
from .geometry import CONFIG_REGS, Geometry
from .hostbus import CTRL, REGION, HostBus
from .l2 import L2
from .loader import Loader
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
        s = self.s
        return PE(s.pe_tile_max, s.max_stride, s.noc_words_per_cycle, s.simd_lanes, drain_lanes(s))

    def elaborate(self, platform):
        m = Module()
        s = self.s
        g = Geometry(m, s)
        ctl = Controller.build()
        m.d.comb += [self.busy.eq(ctl.busy), self.done.eq(ctl.done)]
        l2 = L2.build(m, self.l2_words, s.noc_words_per_cycle)
        bus = HostBus.build(m, self, g, l2, s.noc_words_per_cycle, ctl.busy, ctl.done, ctl.cycles)
        ctl.elaborate(m, s, g, bus.start)
        loader = Loader.build(m, s, g, ctl, l2, self.abits)
        compute = Compute.build(m, s, g, ctl)
        template = self.pe()
        pes = [(u0, u1, pe_instance(m, f"pe_{u0}_{u1}", template)) for u0 in range(s.n0) for u1 in range(s.n1)]
        drain = Drain.build(m, s, g, ctl, l2, bus, pes, self)
        shared = _PerClass(m, s, g, ctl, loader, compute, self._unit_steps(m, g, loader), template.early_windows)
        shared.broadcast_rows(template)
        for u0, u1, pe in pes:
            shared.wire_pe(pe, u0, u1, template)
        m.d.comb += [ctl.engines_continue.eq(loader.continues | compute.continues | drain.continues),
                     ctl.flushing.eq(drain.flushing)]
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
                if d not in by_dim:
                    out[name].append(Const(0, self.abits))
                elif by_dim[d] is g.stride_x:       # (a stride: a choice of constant multiples)
                    out[name].append(g.static(by_stride(T[d], g.stride_x, self.s.max_stride)[:self.abits],
                                              f"{name}_unit{lv}", self.abits))
                else:
                    out[name].append(g.static_product(T[d], by_dim[d], f"{name}_unit{lv}", self.abits))
        return out



class _PerClass:
    """What the PEs are told, each quantity computed once for the PEs it is the same for: a PE's
    tile extent along a loop dimension depends on its unit index only at the levels that spread
    that dimension, and its distance from the NoC's lane 0 only on the levels that spread a
    dimension of the tensor (``kcp`` on 64 PEs: 8 input classes, not 64).  Quantities the same
    for every PE (the L1 rows' L2 offsets, the operand addresses) are broadcast."""

    def __init__(self, m: Module, s: HwStructure, g: Geometry, ctl: Controller, loader: Loader,
                 compute: Compute, steps: dict[str, list], early_windows: bool = False):
        self.m, self.s, self.g, self.ctl, self.loader, self.compute, self.steps = m, s, g, ctl, loader, compute, steps
        self.early_windows = early_windows      # the PEs take the rows' windows a cycle earlier (PE.early_windows)
        self.cache: dict = {}
        A = len(loader.issue_rel)
        self.A = A
        self.rows: dict[str, Signal] = {}

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

    def _unit_key(self, dims, u0: int, u1: int) -> tuple[int, int]:
        s = self.s
        return (u0 if s.spatial[0] in dims else 0, u1 if s.spatial[1] in dims else 0)

    def extent(self, desc, d: str, u0: int, u1: int):
        """The PE's tile extent along ``d`` in the step of ``desc`` (the controller's ``ld`` or
        ``cp``), a register ahead of the step (the ``ld`` one, moved along for ``cp``)."""
        k0, k1 = self._unit_key((d,), u0, u1)
        which = desc.valid.name[:2]
        di = LOOP_DIMS.index(d)
        ld = self._once(("ext", "ld", d, k0, k1),
                        lambda: self.ctl.ahead(self.m, "ld", f"ld_ext_{d}_{k0}_{k1}", *self.g.pe_tile_stages(di, k0, k1)))
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

    def _delta(self, name: str, u0: int, u1: int):
        """(the PE's first word of ``name`` - lane 0's address) mod 2**A, a register: the class's
        first word is the box's plus its units' steps (a static register), and lane 0's is the
        box's plus the issue's offset in it (``issue_rel``, a cycle after the issue), so the
        difference is taken from registers, two cycles before the PEs' lanes register holds
        the issue's words (:meth:`_window` adds each row's offset); with early windows, from
        the offset in the issue's own cycle, a cycle earlier."""
        loader, m, A = self.loader, self.m, self.A
        k0, k1 = self._unit_key(tuple(loader.strides[name]), u0, u1)

        def make():
            first = [x for x in (self._step_times(name, 0, k0), self._step_times(name, 1, k1)) if not isinstance(x, int)]
            if len(first) == 2:
                first = [self._once(("first", name, k0, k1),
                                    lambda: self.g.static((first[0] + first[1])[:A], f"{name}_first_{k0}_{k1}", A))]
            delta = Signal(A, name=f"{name}_delta_{k0}_{k1}")
            rel = loader.issue_rel_now if self.early_windows else loader.issue_rel
            m.d.sync += delta.eq(((first[0] if first else 0) - rel)[:A])
            return delta
        return self._once(("delta", name, k0, k1), make)

    def _window(self, name: str, row: str, n: int, u0: int, u1: int):
        """Where L1 row ``row`` (``n`` words) of the class's PEs falls on the lanes of two (early
        windows: three) cycles later, registered a cycle (two) before them: ``near`` (some word
        of it is on the lanes: v < lanes + n - 1, with v = delta + the row's offset mod 2**A, the
        row's first word on lane v - (n - 1)) and the window ``lo`` (v's low bits), for the PEs'
        capture (``hwgen/pe.py``).
        Once per class and row, not per PE: all the PEs of a class see the row at one place."""
        m, A, W = self.m, self.A, self.s.noc_words_per_cycle
        k0, k1 = self._unit_key(tuple(self.loader.strides[name]), u0, u1)

        def make():
            # (the row's offset, a static register, copied beside each class's adder)
            ofs = self.g.operand(self.rows[row], f"{row}_ofs_{k0}_{k1}")
            v = wire(m, (self._delta(name, u0, u1) + ofs)[:A], f"{row}_v_{k0}_{k1}", A)
            near = registered(m, v < W + n - 1, f"{row}_near_{k0}_{k1}")
            lo = registered(m, v[:row_window(n, W)], f"{row}_lo_{k0}_{k1}")
            return near, lo
        return self._once(("window", row, k0, k1), make)

    def _step_times(self, name: str, level: int, k: int):
        """``k`` times the L2 distance between neighbouring units of ``level`` for ``name``: a
        static register (shifts and adds of a static one, so ready by the first ``go``)."""
        if k == 0:
            return 0
        return self._once(("step", name, level, k),
                          lambda: self.g.static(times(k, self.steps[name][level])[:self.A],
                                                f"{name}_step{level}_x{k}", self.A))

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

    def broadcast_rows(self, pe: PE) -> None:
        """The L2 offset of every L1 row from the tile's first word, plus (row length - 1): static
        registers, read by :meth:`_window`."""
        m, g, A, t = self.m, self.g, self.A, pe.tile
        strides = self.loader.strides
        plane, row = strides["input"]["C"], g.cfg["in_cols"]
        for c in range(t["C"]):
            for y in range(pe.in_rows):
                self.rows[f"in_{c}_{y}"] = g.static_sum([(c, plane), (y, row), pe.in_cols - 1], f"in_ofs_{c}_{y}", A)
        crs, rs = strides["weight"]["K"], strides["weight"]["C"]
        for k in range(t["K"]):
            for c in range(t["C"]):
                for r in range(t["R"]):
                    self.rows[f"w_{k}_{c}_{r}"] = g.static_sum([(k, crs), (c, rs), (r, g.S), t["S"] - 1],
                                                                   f"w_ofs_{k}_{c}_{r}", A)

    def wire_pe(self, pe, u0: int, u1: int, template: PE) -> None:
        """One PE's ports."""
        m, ctl, loader, compute, g = self.m, self.ctl, self.loader, self.compute, self.g
        ld, cp = ctl.ld, ctl.cp
        m.d.comb += [
            pe.lane_len.eq(loader.early_len), pe.lane_weight.eq(loader.early_weight), pe.lane_data.eq(loader.lane_data),
            pe.ld_bank_in.eq(self._to_pes(ld.bank_in, "ld_bank_in")), pe.ld_bank_w.eq(self._to_pes(ld.bank_w, "ld_bank_w")),
            pe.ld_kn.eq(self._ld_extent("K", u0, u1)), pe.ld_cn.eq(self._ld_extent("C", u0, u1)),
            pe.ld_yn.eq(self._ld_extent("Y", u0, u1)), pe.ld_xn.eq(self._ld_extent("X", u0, u1)),
            pe.filt_r.eq(g.R), pe.filt_s.eq(g.S),
            pe.mac_en.eq(compute.issue_r & self._inside(u0, u1)),
            pe.rd_on.eq(compute.rd_on), pe.ps_addr.eq(compute.ps_addr),
            pe.cp_bank_ps.eq(compute.banks["bank_ps"]),
        ]
        ops = compute.operands((u0 * self.s.n1 + u1) // PES_PER_OPERAND_COPY)
        m.d.comb += [pe.cp_bank_in.eq(ops["bank_in"]), pe.cp_bank_w.eq(ops["bank_w"])]
        for name, row, n in template.l1_rows():
            near, lo = self._window(name, row, n, u0, u1)
            m.d.comb += [getattr(pe, f"{row}_near").eq(near), getattr(pe, f"{row}_lo").eq(lo)]
        for j in range(template.simd):
            m.d.comb += [getattr(pe, f"rd_in_{j}").eq(ops["rd_in"][j]),
                         getattr(pe, f"rd_w_{j}").eq(ops["rd_w"][j])]

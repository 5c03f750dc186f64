"""The controller: walks the dataflow's loop nest as an odometer and runs it in *slots*.  Slot
``k`` loads step ``k``, computes step ``k-1`` and drains step ``k-2`` (three step descriptors,
``ld``, ``cp``, ``dr``).  Each engine tells the controller whether it will still be busy next
cycle; in the cycle none will, the descriptors shift and ``go`` (a register) starts the next
slot's engines the cycle after, so a slot lasts as long as its longest engine, at least the one
``go`` cycle (``docs/timing.md``)."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, Value

from costmodel.hwgen_preset.rules import LOOP_DIMS, OUTPUT_DIMS, TENSOR_LOOP_DIMS
from costmodel.hwgen_preset.structure import HwStructure

from .common import COORD, smaller, wire
from .geometry import Desc, Geometry

__all__ = ["Controller"]


@dataclass
class Controller:
    running: Signal
    done: Signal
    cycles: Signal          # start to done
    go: Signal              # a slot starts: every engine takes its descriptor
    ld: Desc                # the step being loaded
    cp: Desc                # the step being computed
    dr: Desc                # the step being drained
    engines_continue: Signal  # driven by the top level: an engine is still busy next cycle
    shift: Signal | None = None     # (after elaborate) the descriptors shift at this cycle's edge
    pending: dict | None = None     # (after elaborate) "ld" / "cp" / "dr" -> what it holds after the shift

    @classmethod
    def build(cls) -> "Controller":
        """The controller's registers; :meth:`elaborate` adds its logic once the host bus (which
        reads them and gives ``start``) exists."""
        return cls(Signal(name="running"), Signal(name="done"), Signal(32, name="cycles"), Signal(name="go"),
                   Desc.named("ld"), Desc.named("cp"), Desc.named("dr"), Signal(name="engines_continue"))

    def elaborate(self, m: Module, s: HwStructure, g: Geometry, start: Signal) -> None:
        """The odometer and the slot sequencing; ``start`` restarts the walk."""
        ld, cp, dr, go = self.ld, self.cp, self.dr, self.go
        pos_b0 = [Signal(COORD, name=f"pos_b0_{d}") for d in LOOP_DIMS]
        pos_r1 = [Signal(COORD, name=f"pos_r1_{d}") for d in LOOP_DIMS]
        more = Signal(name="more")

        def tensor_differs(a_b0, a_r1, b: Desc, dims):
            return Cat(*[(a_b0[LOOP_DIMS.index(d)] != b.b0[LOOP_DIMS.index(d)])
                         | (a_r1[LOOP_DIMS.index(d)] != b.r1[LOOP_DIMS.index(d)])
                         for d in dims]).any()

        def settled(expr, name):
            """``expr`` of the odometer's and the descriptors' registers, as a register computed
            in every cycle: they change only at a shift (or ``start``) and are not read for the
            next one until two cycles later (``hold``), so it is right whenever it is read."""
            value = Value.cast(expr)
            reg = Signal(value.shape(), name=name)
            m.d.sync += reg.eq(value)
            return reg

        new_in = settled(~ld.valid | tensor_differs(pos_b0, pos_r1, ld, TENSOR_LOOP_DIMS["input"]), "new_in")
        new_w = settled(~ld.valid | tensor_differs(pos_b0, pos_r1, ld, TENSOR_LOOP_DIMS["weight"]), "new_w")
        ld_ends = settled(~more | tensor_differs(pos_b0, pos_r1, ld, OUTPUT_DIMS), "ld_ends")
        cp_ends = wire(m, ~ld.valid | tensor_differs(ld.b0, ld.r1, cp, OUTPUT_DIMS), "cp_ends_now")
        work = settled(more | ld.valid | (cp.valid & cp_ends), "work")
        cp_ends = settled(cp_ends, "cp_ends")
        # ``hold``: the cycle after start or after a shift, when the descriptors' first register
        # stage (Controller.ahead with ``then``) is still being computed from their new positions:
        # no shift then (START, MIN_SLOT = 2; docs/timing.md)
        hold = Signal(name="hold")
        self.shift = wire(m, self.running & ~start & ~hold & ~self.engines_continue & work, "shift")
        m.d.sync += hold.eq(start | self.shift)
        self.pending = {"ld": Desc(wire(m, more, "ldn_valid"), pos_b0, pos_r1, *[Signal(name=f"ldn_{f}") for f in
                                   ("bank_in", "bank_w", "bank_ps", "ld_in", "ld_w", "ends")]),
                        "cp": ld, "dr": cp}

        # advance of the odometer, in two stages: each loop's position plus its step and whether
        # that is inside its bound are settled registers; the carry chain runs at the shift
        nxt_b0 = [Signal(COORD, name=f"nxt_b0_{d}") for d in LOOP_DIMS]
        nxt_r1 = [Signal(COORD, name=f"nxt_r1_{d}") for d in LOOP_DIMS]
        carry = [Signal(name=f"carry{i}") for i in range(len(s.loops) + 1)]
        m.d.comb += [nxt_b0[i].eq(pos_b0[i]) for i in range(4)]
        m.d.comb += [nxt_r1[i].eq(pos_r1[i]) for i in range(4)]
        m.d.comb += carry[len(s.loops)].eq(1)
        for idx in reversed(range(len(s.loops))):
            lv, d = s.loops[idx]
            di = LOOP_DIMS.index(d)
            units = (s.n0 if lv == 0 else s.n1) if s.spatial[lv] == d else 1
            step = g.scaled(lv, d, units) if units > 1 else (g.T0[d] if lv == 0 else g.T1[d])
            cur = pos_b0[di] if lv == 0 else pos_r1[di]
            nxt = nxt_b0[di] if lv == 0 else nxt_r1[di]
            end = g.D[d] if lv == 0 else smaller(g.T0[d], g.D[d] - pos_b0[di])
            plus = settled((cur + step)[:COORD], f"odo_plus{idx}")
            fits = settled(cur + step < end, f"odo_fits{idx}")
            with m.If(carry[idx + 1]):
                with m.If(fits):
                    m.d.comb += nxt.eq(plus)
                with m.Else():
                    m.d.comb += [nxt.eq(0), carry[idx].eq(1)]
        last = carry[0]

        with m.If(start):
            m.d.sync += [self.running.eq(1), self.done.eq(0), self.cycles.eq(0), more.eq(1),
                         ld.valid.eq(0), cp.valid.eq(0), dr.valid.eq(0), go.eq(0)]
            m.d.sync += [p.eq(0) for p in pos_b0 + pos_r1]
        with m.Elif(self.running):
            m.d.sync += [self.cycles.eq(self.cycles + 1), go.eq(0)]
            with m.If(~self.engines_continue):      # this is every engine's last busy cycle
                with m.If(self.shift):
                    m.d.sync += go.eq(1)
                    # dr <- cp, cp <- ld, ld <- pos, pos <- next
                    m.d.sync += [dr.valid.eq(cp.valid), dr.ends.eq(cp_ends), dr.bank_ps.eq(cp.bank_ps)]
                    m.d.sync += [a.eq(b) for a, b in zip(dr.b0 + dr.r1, cp.b0 + cp.r1)]
                    m.d.sync += [cp.valid.eq(ld.valid), cp.bank_in.eq(ld.bank_in),
                                 cp.bank_w.eq(ld.bank_w), cp.bank_ps.eq(ld.bank_ps)]
                    m.d.sync += [a.eq(b) for a, b in zip(cp.b0 + cp.r1, ld.b0 + ld.r1)]
                    m.d.sync += [ld.valid.eq(more), ld.ld_in.eq(more & new_in), ld.ld_w.eq(more & new_w),
                                 ld.bank_in.eq(ld.bank_in ^ new_in), ld.bank_w.eq(ld.bank_w ^ new_w),
                                 ld.bank_ps.eq(ld.bank_ps ^ (ld.valid & ld_ends))]
                    m.d.sync += [a.eq(b) for a, b in zip(ld.b0 + ld.r1, pos_b0 + pos_r1)]
                    with m.If(more):
                        m.d.sync += [a.eq(b) for a, b in zip(pos_b0 + pos_r1, nxt_b0 + nxt_r1)]
                        m.d.sync += more.eq(~last)
                with m.Elif(~work & ~hold):
                    m.d.sync += [self.running.eq(0), self.done.eq(1)]

    def ahead(self, m: Module, which: str, make, name: str, then=None):
        """``make(desc)`` for the step descriptor ``which`` (``"ld"``, ``"cp"``, ``"dr"``; ``make``
        may read its positions and the configuration), as a register (or a dict of them, named
        ``name_key``, when ``make`` returns a dict of values): computed in the cycle the
        descriptors shift, from the positions the descriptor is about to take, and held until
        the next shift.  A quantity of the step is then a register in every cycle it is used,
        not arithmetic behind one (``go`` is the cycle after the shift).

        With ``then``, the quantity is ``then(first)`` and takes two register stages: ``first``
        (``make``'s registers, named ``name_pre``) is computed in every cycle from the positions
        the descriptor is about to take, which hold still from the cycle after a shift (or after
        ``start``) to the next shift, at least two cycles later (``hold``); ``then`` runs at the
        shift.  So ``make`` may read the configuration and static registers of the first level
        only (ready in the cycle after ``start``: :meth:`Geometry.static`)."""
        assert self.shift is not None, "ahead() needs the controller elaborated"
        made = make(self.pending[which])
        if then is not None:
            def pre(value, key):
                value = Value.cast(value)
                reg = Signal(value.shape(), name=key)
                m.d.sync += reg.eq(value)
                return reg
            if isinstance(made, dict):
                made = {key: pre(value, f"{name}_pre_{key}") for key, value in made.items()}
            else:
                made = pre(made, f"{name}_pre")
            made = then(made)
        if isinstance(made, dict):
            return {key: self._hold(m, value, f"{name}_{key}") for key, value in made.items()}
        return self._hold(m, made, name)

    def _hold(self, m: Module, value, name: str) -> Signal:
        value = Value.cast(value)
        reg = Signal(value.shape(), name=name)
        m.d.sync += reg.eq(Mux(self.shift, value, reg))
        return reg

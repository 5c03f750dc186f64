"""What every engine of the top level computes the same way: the run-time configuration
registers, the step descriptors, and each PE's tile (start, extent) of a loop dimension in a
step, or the union of the tiles over all PEs.  The rules are :mod:`costmodel.hwgen_preset`'s
(``walk._extent``, ``walk._union``), in hardware."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Const, Module, Mux, Signal, Value

from costmodel.hwgen_preset.rules import LOOP_DIMS
from costmodel.hwgen_preset.structure import HwStructure

from .common import COORD, times, wire

__all__ = ["CONFIG_REGS", "Desc", "Geometry"]

#: The run-time configuration registers, in bus order (``docs/timing.md``).
CONFIG_REGS = ("K", "C", "Y", "X", "R", "S", "stride_y", "stride_x", "in_rows", "in_cols",
               "t0_K", "t0_C", "t0_Y", "t0_X", "t1_K", "t1_C", "t1_Y", "t1_X")


@dataclass(frozen=True)
class Desc:
    """A step descriptor register set: positions per loop dim, banks, flags."""
    valid: Signal
    b0: list
    r1: list
    bank_in: Signal
    bank_w: Signal
    bank_ps: Signal
    ld_in: Signal
    ld_w: Signal
    ends: Signal

    @classmethod
    def named(cls, name: str) -> "Desc":
        return cls(Signal(name=f"{name}_valid"),
                   [Signal(COORD, name=f"{name}_b0_{d}") for d in LOOP_DIMS],
                   [Signal(COORD, name=f"{name}_r1_{d}") for d in LOOP_DIMS],
                   Signal(name=f"{name}_bank_in"), Signal(name=f"{name}_bank_w"),
                   Signal(name=f"{name}_bank_ps"), Signal(name=f"{name}_ld_in"),
                   Signal(name=f"{name}_ld_w"), Signal(name=f"{name}_ends"))


class Geometry:
    """The configuration registers and the tile arithmetic on them."""

    def __init__(self, m: Module, s: HwStructure):
        self.m = m
        self.s = s
        self.cfg = {name: Signal(COORD, name=f"cfg_{name}") for name in CONFIG_REGS}
        self.D = {d: self.cfg[d] for d in LOOP_DIMS}
        self.T0 = {d: self.cfg[f"t0_{d}"] for d in LOOP_DIMS}
        self.T1 = {d: self.cfg[f"t1_{d}"] for d in LOOP_DIMS}
        self.stride_y, self.stride_x = self.cfg["stride_y"], self.cfg["stride_x"]
        self.R, self.S = self.cfg["R"], self.cfg["S"]
        self._scaled: dict = {}
        self._products: dict = {}

    def static(self, expr, name: str, shape=None) -> Signal:
        """``expr``, arithmetic on the configuration registers (which hold still while the
        accelerator runs), as a register: products like ``in_rows * in_cols`` are then on no
        path of the run.  Each is at most one multiplier or about two carry chains deep, so a
        product of three registers or a sum of constant multiples takes a register per stage
        (:meth:`static_sum`).  A register of stage ``n`` (``n = 1``: it reads the configuration
        alone) is ready ``n`` cycles after ``start``, since the last configuration write was a
        cycle before ``start`` at the latest.  Where they are read keeps within that: the
        odometer's limits and the tile offsets (stage 1) from the cycle after ``start``; the
        loader's strides (stage 2 at most) from the first shift, two cycles after; the compute
        engine's (stage 2) from the first ``go``; the PEs' classes' first words (stages 3 to
        5) from the cycle after the first issue of a load, at least six cycles after ``start``,
        and their row offsets (stages 3 and 4, and a register at each PE) a cycle later
        (``docs/timing.md``)."""
        value = Value.cast(expr)
        reg = Signal(shape if shape is not None else value.shape(), name=name)
        self.m.d.sync += reg.eq(value)
        return reg

    @property
    def rs(self) -> Signal:
        """``R * S``, a static register (one multiplier, shared by every engine)."""
        if "rs" not in self._products:
            self._products["rs"] = self.static((self.R * self.S)[:COORD], "filt_rs", COORD)
        return self._products["rs"]

    def static_sum(self, terms: list, name: str, width: int) -> Signal:
        """The sum of ``terms`` (each a constant multiple ``(k, x)`` of a static register or
        the configuration, or a constant), as a static register one stage after the terms':
        the multiples (shifts and adds) are registers of their own, so no static register is
        deeper than one multiplier or about two carry chains."""
        regs, const = [], 0
        for i, term in enumerate(terms):
            if isinstance(term, int):
                const += term
                continue
            k, x = term
            if k == 0:
                continue
            regs.append(x if k == 1 else self.static(times(k, x)[:width], f"{name}_t{i}", width))
        value = Const(const, width)
        for r in regs:
            value = value + r
        return self.static(value[:width], name, width)

    def offsets(self, di: int, u0, u1) -> tuple:
        """How far the tile of unit (u0, u1) starts from the step's ``b0 + r1`` along loop dim
        ``di``: ``u0 * T0`` and ``u1 * T1`` where the levels spread it (constant multiples for a
        fixed unit), else 0; they do not change during a run."""
        s, d = self.s, LOOP_DIMS[di]
        off0 = self.scaled(0, d, u0) if s.spatial[0] == d else Const(0, COORD)
        off1 = self.scaled(1, d, u1) if s.spatial[1] == d else Const(0, COORD)
        return off0, off1

    def scaled(self, level: int, d: str, u: int):
        """``u * T_level[d]`` for a constant ``u``: a static register (shifts and adds, so no
        multiplier and on no path of the run)."""
        T = (self.T0, self.T1)[level][d]
        key = (level, d, u)
        if key not in self._scaled:
            self._scaled[key] = self.static(times(u, T), f"t{level}_{d}_x{u}")
        return self._scaled[key]

    def tile_stages(self, di: int, off0, off1) -> tuple:
        """The extent of loop dim ``di`` of the unit whose tile starts ``off0 + off1`` from the
        step's ``b0 + r1`` (:meth:`offsets`), as three stages for :meth:`Controller.ahead`
        (``a1(desc)``, ``a2``, ``b1``): ``min(T1, T0 - (r1 + off1), D - start)``, at least 0,
        with ``start = b0 + r1 + off0 + off1`` (``walk._extent``): the sums; the two differences;
        the three comparisons side by side and the choice."""
        d = LOOP_DIMS[di]
        T0, T1, D = self.T0[d], self.T1[d], self.D[d]

        def a1(desc):
            return {"start": (desc.b0[di] + desc.r1[di]) + (off0 + off1), "inner": desc.r1[di] + off1}

        def a2(p):
            return {"a": (T0 - p["inner"]).as_signed(), "b": (D - p["start"]).as_signed()}

        def b1(p):
            # the least of a, b and T1 (three comparisons side by side), 0 if negative (T1 is not)
            a, b = p["a"], p["b"]
            e = Mux(a < b, Mux(a < T1, a, T1), Mux(b < T1, b, T1))
            return Mux(e[-1], 0, e)[:COORD]
        return a1, a2, b1

    def pe_tile_stages(self, di: int, u0: int, u1: int) -> tuple:
        """:meth:`tile_stages` for the PE at (u0, u1)."""
        return self.tile_stages(di, *self.offsets(di, u0, u1))

    def union_stages(self, di: int) -> tuple:
        """(start, extent) of loop dim di over all PEs, as two stages for
        :meth:`Controller.ahead` (``a1(desc)``, ``a2``; the first two carry chains deep, the second
        one): ``start = b0 + r1``, extent
        ``min(X0 - r1, X1, D - start)`` where ``X0`` is ``n0 * T0`` if level 0 spreads the
        dimension (and then no ``X1``), else ``T0``, and ``X1`` is ``n1 * T1`` if level 1 spreads
        it, else ``T1`` (``walk._union``)."""
        s, d = self.s, LOOP_DIMS[di]
        T0, T1, D = self.T0[d], self.T1[d], self.D[d]

        def a1(desc):
            # (unsigned, COORD bits: for a valid step every difference is positive)
            start = wire(self.m, (desc.b0[di] + desc.r1[di])[:COORD], f"u_{d}_start", COORD)
            lim0 = self.scaled(0, d, s.n0) if s.spatial[0] == d else T0
            q = (lim0 - desc.r1[di])[:COORD]
            if s.spatial[0] != d:
                x1 = self.scaled(1, d, s.n1) if s.spatial[1] == d else T1
                q = Mux(q < x1, q, x1)
            return {"start": start, "q": q, "b": (D - start)[:COORD]}

        def a2(p):
            return {"start": p["start"], "ext": Mux(p["q"] < p["b"], p["q"], p["b"])}
        return a1, a2

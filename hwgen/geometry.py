"""What every engine of the top level computes the same way: the run-time configuration
registers, the step descriptors, and each PE's tile (start, extent) of a loop dimension in a
step, or the union of the tiles over all PEs.  The rules are :mod:`costmodel.hwgen_preset`'s
(``walk._extent``, ``walk._union``), in hardware."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Const, Module, Signal, Value

from costmodel.hwgen_preset.rules import LOOP_DIMS
from costmodel.hwgen_preset.structure import HwStructure

from .common import COORD, smaller, tile_extent, times, wire

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

    def static(self, expr, name: str, shape=None) -> Signal:
        """``expr``, arithmetic on the configuration registers (which hold still while the
        accelerator runs), as a register: products like ``in_rows * in_cols`` are then on no
        path of the run.  One that reads the configuration alone is ready in the cycle after
        ``start`` (the last configuration write was a cycle before ``start`` at the latest),
        the first shift of the descriptors; one that reads such registers is ready a cycle
        later, by the first ``go``.  No static register is deeper (``docs/timing.md``)."""
        value = Value.cast(expr)
        reg = Signal(shape if shape is not None else value.shape(), name=name)
        self.m.d.sync += reg.eq(value)
        return reg

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

    def tile(self, desc: Desc, di: int, u0: int, u1: int):
        """(start, extent) of loop dim di for the PE at (u0, u1) in the step of desc."""
        return self.tile_at(desc, di, *self.offsets(di, u0, u1), f"{u0}_{u1}")

    def tile_at(self, desc: Desc, di: int, off0, off1, tag: str):
        """(start, extent) of loop dim di for the unit whose tile starts ``off0 + off1`` from
        the step's ``b0 + r1`` (:meth:`offsets`; the drain counts them for its group)."""
        d = LOOP_DIMS[di]
        return tile_extent(self.m, f"{desc.valid.name[:2]}_{d}_{tag}", desc.b0[di], desc.r1[di], self.T0[d],
                           self.T1[d], self.D[d], off0, off1)

    def union(self, desc: Desc, di: int):
        """(start, extent) of loop dim di over all PEs in the step of desc."""
        m, s = self.m, self.s
        d = LOOP_DIMS[di]
        T0, T1, D = self.T0[d], self.T1[d], self.D[d]
        start = wire(m, desc.b0[di] + desc.r1[di], f"u_{d}_start", COORD)
        if s.spatial[0] == d:
            end = smaller(desc.b0[di] + self.scaled(0, d, s.n0), D)
        elif s.spatial[1] == d:
            end = smaller(smaller(start + self.scaled(1, d, s.n1), desc.b0[di] + T0), D)
        else:
            end = smaller(smaller(start + T1, desc.b0[di] + T0), D)
        return start, wire(m, (end - start)[:COORD], f"u_{d}_ext", COORD)

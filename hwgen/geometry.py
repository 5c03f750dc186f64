"""What every engine of the top level computes the same way: the run-time configuration
registers, the step descriptors, and each PE's tile (start, extent) of a loop dimension in a
step, or the union of the tiles over all PEs.  The rules are :mod:`costmodel.hwgen_preset`'s
(``walk._extent``, ``walk._union``), in hardware."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from amaranth.hdl import Const, Module, Mux, Signal, Value

from costmodel.hwgen_preset.rules import LOOP_DIMS
from costmodel.hwgen_preset.structure import HwStructure

from .common import COORD, multiply, pipe, times

__all__ = ["CONFIG_REGS", "WIDE_REGS", "WIDE_BITS", "Desc", "Geometry"]

#: The run-time configuration registers, in bus order (``docs/timing.md``).
CONFIG_REGS = ("K", "C", "Y", "X", "R", "S", "stride_y", "stride_x", "in_rows", "in_cols",
               "t0_K", "t0_C", "t0_Y", "t0_X", "t1_K", "t1_C", "t1_Y", "t1_X",
               "in_sc", "in_sy", "in_sx", "in_run_row", "in_run_ch", "w_sk", "w_sc", "w_run_k",
               "in_mode", "w_merge", "l1_in_row", "l1_in_ch", "l1_w_k")
#: The configuration registers that hold L2 word counts (the layout's strides), wider than a
#: coordinate (:data:`WIDE_BITS`); the host computes them with the others
#: (:func:`hwgen.layout.config_registers`).
WIDE_REGS = ("in_sc", "in_sy", "in_sx", "in_run_row", "in_run_ch", "w_sk", "w_sc", "w_run_k")
WIDE_BITS = 24


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
    start: list | None = None       # (the odometer's only) b0 + r1 per loop dim, a register

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
        self.cfg = {name: Signal(WIDE_BITS if name in WIDE_REGS else COORD, name=f"cfg_{name}")
                    for name in CONFIG_REGS}
        self.D = {d: self.cfg[d] for d in LOOP_DIMS}
        self.T0 = {d: self.cfg[f"t0_{d}"] for d in LOOP_DIMS}
        self.T1 = {d: self.cfg[f"t1_{d}"] for d in LOOP_DIMS}
        self.stride_y, self.stride_x = self.cfg["stride_y"], self.cfg["stride_x"]
        self.R, self.S = self.cfg["R"], self.cfg["S"]
        self._scaled: dict = {}
        self._products: dict = {}
        self._statics: set = set()     # (ids of the static registers)
        self._copies = itertools.count()

    def static(self, expr, name: str, shape=None) -> Signal:
        """``expr``, arithmetic on the configuration registers (which hold still while the
        accelerator runs), as a register: products like ``in_rows * in_cols`` are then on no
        path of the run.  Each is at most one multiplier (a registered one, two stages after its
        operands: :meth:`static_product`) or about two carry chains deep, so a product of three
        registers or a sum of constant multiples takes a register per stage (:meth:`static_sum`).
        A register of stage ``n`` (``n = 1``: it reads the configuration alone) is ready ``n``
        cycles after the host's start write, since the last configuration write was a cycle
        before it at the latest; the controller starts ``start_delay_cycles`` (3) after the
        write.  Where they are read keeps within that (cycles from the write): the odometer's
        limits and the tile offsets (stages 1 and 2) from the cycle after the controller's
        start (4); the loader's strides and its multipliers' input registers of them (stage 5 at
        most: ``C * R * S`` is stage 4, a register of it 5) from the first shift (5); the compute engine's
        (stage 3 at most) from the first ``go`` (7); where the classes' windows start and their
        rows sit (stage 4 at most: ``u * T * stride * row``) from the cycle after the first issue
        of a load (9 at the earliest) (``docs/timing.md``)."""
        value = Value.cast(expr)
        # (a kept register: synthesis would merge two statics of the same value, such as the
        # odometer's limit D - T0 and the drain's, into one register between both groups of
        # readers, with a net across the device)
        reg = pipe(self.m, value, name, shape if shape is not None else value.shape())
        self._statics.add(id(reg))
        return reg

    def operand(self, reg: Signal, name: str) -> Signal:
        """A copy of ``reg`` (a configuration or static register) for one group of the logic
        that reads it, a register of it (a stage later) that synthesis keeps apart
        (:func:`.common.pipe`), so that it sits beside its readers instead of driving wires
        across the design (about 3.5 ns each on an ECP5)."""
        self._check_static(reg)
        return pipe(self.m, reg, name)

    def _check_static(self, reg: Signal) -> None:
        assert id(reg) in self._statics or any(reg is r for r in self.cfg.values()), \
            f"{reg.name} is neither a configuration nor a static register"

    def static_product(self, a: Signal, b: Signal, name: str, width: int) -> Signal:
        """``a * b`` (configuration or static registers) as a static register: a registered
        multiplier (:func:`.common.multiply`) whose input registers take ``a`` and ``b`` and whose
        output register is the static one, two stages after the later operand."""
        self._check_static(a)
        self._check_static(b)
        reg = multiply(self.m, a, b, width, name)
        self._statics.add(id(reg))
        return reg

    @property
    def rs(self) -> Signal:
        """``R * S``, a static register (one multiplier, shared by every engine)."""
        if "rs" not in self._products:
            self._products["rs"] = self.static_product(self.R, self.S, "filt_rs", COORD)
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
        """``u * T_level[d]`` for a constant ``u`` and the dimension ``d`` that ``level``
        spreads: a static register (shifts and adds, so no multiplier and on no path of the run),
        as wide as ``u`` PE tiles: the host checks the level's tile is at most the generated PE
        tile and, at level 0, the same as level 1's (:func:`costmodel.hwgen_preset.structure.tiles_of`)."""
        assert self.s.spatial[level] == d, f"{d} is not spread at level {level}"
        T = (self.T0, self.T1)[level][d]
        key = (level, d, u)
        if key not in self._scaled:
            width = max(1, (u * self.s.pe_tile_max[d]).bit_length())
            self._scaled[key] = self.static(times(u, T)[:width], f"t{level}_{d}_x{u}", width)
        return self._scaled[key]

    def tile_stages(self, di: int, off0, off1) -> tuple:
        """The extent of loop dim ``di`` of the unit whose tile starts ``off0 + off1`` from the
        step's ``b0 + r1`` (:meth:`offsets`), as three stages for :meth:`Controller.ahead`
        (``a1(desc)``, ``a2``, ``b1``): ``min(T1, T0 - (r1 + off1), D - start)``, at least 0,
        with ``start = b0 + r1 + off0 + off1`` (``walk._extent``).  With ``inner = r1 + off1``,
        ``a = T0 - inner`` and ``b = D - start``, each comparison is one of an ``a1`` register
        with a static one (``a < b`` is ``b0 + off0 < D - T0``, ``a < T1`` is
        ``inner > T0 - T1``, ``b < T1`` is ``start > D - T1``; ``a < 0`` is ``inner > T0``,
        ``b < 0`` is ``start > D``), so: the sums; the two differences and the five comparisons
        side by side; the choice (no carry chain)."""
        d = LOOP_DIMS[di]
        T0, T1, D = self.T0[d], self.T1[d], self.D[d]
        # (the offsets' sum a static register, and T1 a copy beside the choice)
        off = self._offsets_sum(off0, off1)
        T1 = self.operand(T1, f"t1_{d}_near{next(self._copies)}")
        lims = self._tile_limits(d)

        def a1(desc):
            return {"start": desc.start[di] + off, "inner": desc.r1[di] + off1, "outer": desc.b0[di] + off0}

        def a2(p):
            start, inner = p["start"], p["inner"]
            return {"a": (T0 - inner)[:COORD], "b": (D - start)[:COORD],
                    "a_lt_b": p["outer"] < lims["D-T0"], "a_lt_t1": inner > lims["T0-T1"],
                    "b_lt_t1": start > lims["D-T1"], "neg": (inner > T0) | (start > D)}

        def b1(p):
            e = Mux(p["a_lt_b"], Mux(p["a_lt_t1"], p["a"], T1), Mux(p["b_lt_t1"], p["b"], T1))
            return Mux(p["neg"], 0, e)[:COORD]
        return a1, a2, b1

    def extent_bits(self, d: str) -> int:
        """Bits of a PE's tile extent along ``d``: it is at most the generated PE tile, which the
        host checks a layer's tile against (:func:`costmodel.hwgen_preset.structure.tiles_of`)."""
        return max(1, self.s.pe_tile_max[d].bit_length())

    def spread_extent_stages(self, di: int, level: int) -> tuple:
        """The extents along loop dim ``di`` of all the units of ``level``, which spreads it,
        as four stages for :meth:`Controller.ahead` giving a dict of registers ``{"u<k>":
        extent}``, each :meth:`extent_bits` wide: the values of :meth:`pe_tile_stages` for each
        unit, with what the units share computed once.  Unit ``k``'s tile starts ``S_k = k * T``
        past the step's ``b0 + r1`` (``T`` the level's tile, ``S_k`` a static register:
        :meth:`scaled`), so its extent ``max(0, min(T1, T0 - inner, D - start))`` is:

        - level 1 (``inner = r1 + S_k``): ``max(0, min(T1, M - S_k))``, ``M = min(T0 - r1,
          D - b0 - r1)``: ``T1`` where ``M >= S_{k+1}``, ``M - S_k`` where ``M > S_k``, else 0;
        - level 0 (``inner = r1``; ``r1`` is 0 there, as the inner level keeps the cluster's
          tile): ``max(0, min(P, B - S_k))``, ``P = min(T1, T0 - r1)``, ``B = D - b0 - r1``: 0 unless ``B > S_k`` and
          ``P > 0``; ``B - S_k`` where it is less than ``P``, that is where ``B - P = max(D -
          T0 - b0, D - T1 - b0 - r1)`` is less than ``S_k``; else ``P``.

        A unit's chosen difference is below ``T1``, so its low bits are the extent: each unit
        keeps two comparisons and a narrow difference (``b1``), then the choice (``b2``), and
        no 16-bit sum of its own (``small``'s 64 units along ``C``: 6,700 flip-flops before)."""
        s, d = self.s, LOOP_DIMS[di]
        T0, T1, D = self.T0[d], self.T1[d], self.D[d]
        n, w = (s.n0, s.n1)[level], self.extent_bits(d)
        lims = self._tile_limits(d)
        offset = [Const(0, COORD)] + [self.scaled(level, d, k) for k in range(1, n + (level == 1))]
        t1 = pipe(self.m, T1[:w], f"t1_{d}_units{next(self._copies)}")    # (a copy beside the choices)

        if level == 1:
            def a1(desc):
                return {"a": T0 - desc.r1[di], "b": D - desc.start[di], "a_lt_b": desc.b0[di] < lims["D-T0"]}

            def a2(p):
                return {"m": Mux(p["a_lt_b"], p["a"], p["b"])}

            def b1(p):
                out = {}
                for k in range(n):
                    out.update({f"full{k}": p["m"] >= offset[k + 1], f"some{k}": p["m"] > offset[k],
                                f"part{k}": (p["m"] - offset[k])[:w]})
                return out

            def b2(p):
                return {f"u{k}": Mux(p[f"full{k}"], t1, Mux(p[f"some{k}"], p[f"part{k}"], 0))[:w] for k in range(n)}
            return a1, a2, b1, b2

        def a1(desc):
            r1, start = desc.r1[di], desc.start[di]
            return {"a": T0 - r1, "b": D - start, "x": lims["D-T0"] - desc.b0[di], "y": lims["D-T1"] - start,
                    "a_lt_t1": r1 > lims["T0-T1"]}

        def a2(p):
            # (where a < T1 its low bits are P, unless a <= 0, and then pos says so)
            return {"p": Mux(p["a_lt_t1"], p["a"][:w], t1), "pos": Mux(p["a_lt_t1"], p["a"] > 0, 1),
                    "b": p["b"], "x": p["x"], "y": p["y"]}

        def b1(p):
            out = {"p": p["p"], "pos": p["pos"]}
            for k in range(n):
                out.update({f"some{k}": p["b"] > offset[k], f"less{k}": (p["x"] < offset[k]) & (p["y"] < offset[k]),
                            f"part{k}": (p["b"] - offset[k])[:w]})
            return out

        def b2(p):
            return {f"u{k}": Mux(p[f"some{k}"] & p["pos"], Mux(p[f"less{k}"], p[f"part{k}"], p["p"]), 0)[:w]
                    for k in range(n)}
        return a1, a2, b1, b2

    def _tile_limits(self, d: str) -> dict:
        """The static limits :meth:`tile_stages` compares with along ``d`` (signed)."""
        key = ("limits", d)
        if key not in self._scaled:
            T0, T1, D = self.T0[d], self.T1[d], self.D[d]
            self._scaled[key] = {"D-T0": self.static((D - T0).as_signed(), f"tile_{d}_d_t0"),
                                 "T0-T1": self.static((T0 - T1).as_signed(), f"tile_{d}_t0_t1"),
                                 "D-T1": self.static((D - T1).as_signed(), f"tile_{d}_d_t1")}
        return self._scaled[key]

    def _offsets_sum(self, off0, off1):
        if isinstance(off0, Const) and off0.value == 0:
            return off1
        if isinstance(off1, Const) and off1.value == 0:
            return off0
        key = ("sum", id(off0), id(off1))
        if key not in self._scaled:
            self._scaled[key] = self.static((off0 + off1)[:COORD], f"{off0.name}_{off1.name}", COORD)
        return self._scaled[key]

    def pe_tile_stages(self, di: int, u0: int, u1: int) -> tuple:
        """:meth:`tile_stages` for the PE at (u0, u1)."""
        return self.tile_stages(di, *self.offsets(di, u0, u1))

    def union_stages(self, di: int) -> tuple:
        """(start, extent) of loop dim di over all PEs, as two stages for
        :meth:`Controller.ahead` (``a1(desc)``, ``a2``; each a carry chain and a choice):
        ``start = b0 + r1`` (the odometer's register), extent
        ``min(X0 - r1, X1, D - start)`` where ``X0`` is ``n0 * T0`` if level 0 spreads the
        dimension (and then no ``X1``), else ``T0``, and ``X1`` is ``n1 * T1`` if level 1 spreads
        it, else ``T1`` (``walk._union``)."""
        s, d = self.s, LOOP_DIMS[di]
        T0, T1, D = self.T0[d], self.T1[d], self.D[d]

        lim0 = self.scaled(0, d, s.n0) if s.spatial[0] == d else T0
        if s.spatial[0] != d:
            # (lim0 - r1 < x1 is r1 > lim0 - x1, a static register: the comparison beside the
            # difference, not after it)
            x1 = self.scaled(1, d, s.n1) if s.spatial[1] == d else T1
            lim_x1 = self.static((lim0 - x1).as_signed(), f"union_{d}_lim_x1")

        def a1(desc):
            # (unsigned, COORD bits: for a valid step every difference is positive)
            start, r1 = desc.start[di], desc.r1[di]
            q = (lim0 - r1)[:COORD]
            if s.spatial[0] != d:
                q = Mux(r1 > lim_x1, q, x1)[:COORD]
            return {"start": start, "q": q, "b": (D - start)[:COORD]}

        def a2(p):
            return {"start": p["start"], "ext": Mux(p["q"] < p["b"], p["q"], p["b"])[:COORD]}
        return a1, a2

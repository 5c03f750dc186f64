"""The drain: for a step that finishes an output tile, walk the output groups (the PEs that do
not share outputs) and each group's tile in runs of up to :func:`drain_lanes` consecutive words
along X (the innermost dimension of the output L2 layout), one run a cycle; or, when each group
holds one output column side by side (``HwStructure.drain_across_groups``), runs of up to ``W``
groups' words at once.  The reduction tree,
one lane per word of the run, adds the partial sums of the PEs that share outputs (a reduction
dimension spread across them), and the run is added into the ``W``-banked output L2
(read-modify-write, one cycle later: any ``W`` consecutive words are one access)."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed

from costmodel.hwgen_preset.rules import LOOP_DIMS
from costmodel.hwgen_preset.structure import HwStructure

from .common import COORD, wire
from .controller import Controller
from .geometry import Geometry
from .hostbus import HostBus
from .l2 import L2

__all__ = ["Drain", "drain_lanes"]


def drain_lanes(s: HwStructure) -> int:
    """Words the drain reads from one PE a cycle: the NoC's ``W``, or fewer when no PE tile has a
    row that long (a group's row is at most the largest X tile, so ``⌈X_g / lanes⌉ = ⌈X_g / W⌉``);
    one when the drain collects across groups."""
    if s.drain_across_groups is not None:
        return 1
    return max(1, min(s.noc_words_per_cycle, s.pe_tile_max["X"]))


def collection_lanes(s: HwStructure) -> int:
    """Words the drain collects a cycle: a PE's run, or one word from each of up to ``W`` groups."""
    lv = s.drain_across_groups
    if lv is None:
        return drain_lanes(s)
    return min(s.noc_words_per_cycle, (s.n0, s.n1)[lv])


@dataclass
class Drain:
    continues: Signal       # still busy next cycle (a run issued now is written next cycle)

    @classmethod
    def build(cls, m: Module, s: HwStructure, g: Geometry, ctl: Controller, l2: L2, bus: HostBus,
              pes: list, top) -> "Drain":
        """``pes``: ``(u0, u1, pe)`` for every PE of the array."""
        dr, D = ctl.dr, g.D
        n0, n1 = s.n0, s.n1
        red0, red1 = s.reduction_spatial
        sp0, sp1 = s.spatial
        g0 = Signal(COORD, name="g0")
        g1 = Signal(COORD, name="g1")
        dk, dy, dx = Signal(COORD, name="dk"), Signal(COORD, name="dy"), Signal(COORD, name="dx")
        d_active = Signal(name="d_active")
        d_tail = Signal(name="d_tail")
        # the group's offsets from the step's b0 + r1, counted (g0 * T0, g1 * T1 along the
        # levels' spatial dimensions), so the group's tile takes no multiplier
        o0, o1 = Signal(COORD, name="dr_ofs0"), Signal(COORD, name="dr_ofs1")
        T0s = g.T0[sp0] if sp0 is not None else Const(0, COORD)
        T1s = g.T1[sp1] if sp1 is not None else Const(0, COORD)

        def group_tile(a0, a1, tag):
            return [g.tile_at(dr, di, a0 if sp0 == d else Const(0, COORD), a1 if sp1 == d else Const(0, COORD), tag)
                    for di, d in enumerate(LOOP_DIMS)]

        # the group's tile extents (K, Y, X), registers: the first group's from the step's
        # positions at the shift, the next group's from the counted offsets when it starts
        g_ext = {d: Signal(COORD, name=f"dr_g_ext_{d}") for d in ("K", "Y", "X")}

        def extents(tile):
            return {d: tile[LOOP_DIMS.index(d)][1] for d in g_ext}

        def valid_group(tile):
            return Cat(*[e > 0 for _, e in tile]).all()

        has_g1 = not red1 and s.spatial[1] is not None and n1 > 1
        has_g0 = not red0 and s.spatial[0] is not None and n0 > 1
        tile_g1 = group_tile(o0, o1 + T1s, "g1n") if has_g1 else None
        tile_g0 = group_tile(o0 + T0s, Const(0, COORD), "g0n") if has_g0 else None
        next_g1_ok = wire(m, (g1 + 1 < n1) & valid_group(tile_g1), "dr_next_g1_ok") if has_g1 else Const(0)
        next_g0_ok = wire(m, (g0 + 1 < n0) & valid_group(tile_g0), "dr_next_g0_ok") if has_g0 else Const(0)
        # (the step's, as it moves from cp into dr at the shift)
        first = {d: ctl.ahead(m, "cp", f"dr_first_{d}", *g.pe_tile_stages(LOOP_DIMS.index(d), 0, 0)) for d in g_ext}
        lanes, banks = collection_lanes(s), s.noc_words_per_cycle
        lg = (banks - 1).bit_length()
        d_issue = wire(m, (ctl.go & dr.valid & dr.ends) | (d_active & ~d_tail), "d_issue")
        t = s.pe_tile_max
        across = s.drain_across_groups
        psums = [[] for _ in range(lanes)]            # the reduction tree's inputs, per lane
        if across is None:
            x_last = wire(m, dx + lanes >= g_ext["X"], "x_last")
            left = wire(m, (g_ext["X"] - dx)[:COORD], "dr_left", COORD)
            more_groups = Const(0)
        else:
            # dx counts groups (group 0 is the walk's only g0, g1): a run is groups dx .. dx+len-1,
            # one output column each, for every (k, y) of their tile, then the next run
            groups = ctl.ahead(m, "dr", "dr_groups", *g.union_stages(3), lambda u: u["ext"])
            x_last = Const(1)
            left = wire(m, (groups - dx)[:COORD], "dr_left", COORD)
            more_groups = wire(m, dx + lanes < groups, "dr_more_groups")
            next_g0_ok = next_g1_ok = Const(0)
        y_last = wire(m, x_last & (dy + 1 >= g_ext["Y"]), "y_last")
        k_last = wire(m, y_last & (dk + 1 >= g_ext["K"]), "k_last")
        length = wire(m, Mux(left < lanes, left, lanes), "dr_len", range(lanes + 1))
        # the output address, counted: ``base`` (the step's first output, a register of the dr
        # descriptor: Controller.ahead) + ``rel`` (the run's row from it) + dx, where ``rel``
        # restarts from ``k_rel`` (the group's row of this k) and ``k_rel`` from ``grp`` (the
        # group's first word; ``g0_rel`` its g0 part)
        OB = max(1, top.l2_words["output"].bit_length())
        dydx = g.static((D["Y"] * D["X"])[:OB], "out_plane", OB)
        dim_stride = {"K": dydx, "Y": D["X"][:OB], "X": Const(1, OB)}

        def step_start(desc):
            return {n: (desc.b0[i] + desc.r1[i])[:COORD] for n, i in (("k", 0), ("y", 2), ("x", 3))}

        def step_terms(p):
            return {"k": (p["k"] * dydx)[:OB], "y": (p["y"] * D["X"])[:OB], "x": p["x"][:OB]}
        # in stages (Controller.ahead): the step's start, the products, their sum
        base = ctl.ahead(m, "dr", "out_base", step_start, step_terms, lambda t: (t["k"] + t["y"] + t["x"])[:OB])
        unit_step = [g.static((T * dim_stride[d])[:OB], f"out_unit{lv}", OB) if d in dim_stride else Const(0, OB)
                     for lv, (T, d) in enumerate(((T0s, sp0), (T1s, sp1)))]
        rel, k_rel, grp, g0_rel = (Signal(OB, name=n) for n in ("dr_rel", "dr_k_rel", "dr_grp", "dr_g0_rel"))
        # the PE's L1 address of the run, counted likewise: ``loc`` = (dk * tY + dy) * tX + dx
        # (dk * tY + dy across groups, where dx counts groups), ``loc_k`` its value at dy = dx = 0
        dr_local, loc_k = Signal(COORD, name="dr_local"), Signal(COORD, name="dr_loc_k")
        row_words, k_words = (t["X"], t["Y"] * t["X"]) if across is None else (1, t["Y"])
        with m.If(d_issue):
            m.d.sync += d_active.eq(1)
            with m.If(~x_last):
                m.d.sync += [dx.eq(dx + lanes), dr_local.eq(dr_local + lanes)]
            with m.Elif(~y_last):
                m.d.sync += [dx.eq(0), dy.eq(dy + 1), rel.eq(rel + dim_stride["Y"])]
                if across is None:      # (the row's start: dr_local - dx)
                    m.d.sync += dr_local.eq(dr_local - dx + row_words)
                else:
                    m.d.sync += dr_local.eq(dr_local + row_words)
            with m.Elif(~k_last):
                m.d.sync += [dx.eq(0), dy.eq(0), dk.eq(dk + 1), rel.eq(k_rel + dydx), k_rel.eq(k_rel + dydx),
                             dr_local.eq(loc_k + k_words), loc_k.eq(loc_k + k_words)]
            with m.Elif(more_groups):
                m.d.sync += [dy.eq(0), dk.eq(0), dx.eq(dx + lanes), rel.eq(grp), k_rel.eq(grp),  # the next run of groups
                             dr_local.eq(0), loc_k.eq(0)]
            with m.Else():
                m.d.sync += [dx.eq(0), dy.eq(0), dk.eq(0), dr_local.eq(0), loc_k.eq(0)]
                with m.If(next_g1_ok):
                    nxt = grp + unit_step[1]
                    m.d.sync += [g1.eq(g1 + 1), o1.eq(o1 + T1s), grp.eq(nxt), k_rel.eq(nxt), rel.eq(nxt)]
                    m.d.sync += [g_ext[d].eq(e) for d, e in extents(tile_g1).items()] if has_g1 else []
                with m.Elif(next_g0_ok):
                    nxt = g0_rel + unit_step[0]
                    m.d.sync += [g1.eq(0), g0.eq(g0 + 1), o1.eq(0), o0.eq(o0 + T0s),
                                 g0_rel.eq(nxt), grp.eq(nxt), k_rel.eq(nxt), rel.eq(nxt)]
                    m.d.sync += [g_ext[d].eq(e) for d, e in extents(tile_g0).items()] if has_g0 else []
                with m.Else():
                    m.d.sync += [g0.eq(0), g1.eq(0), o0.eq(0), o1.eq(0), d_tail.eq(1),
                                 g0_rel.eq(0), grp.eq(0), k_rel.eq(0), rel.eq(0)]
        with m.Elif(d_tail):
            m.d.sync += [d_tail.eq(0), d_active.eq(0)]
        with m.If(ctl.shift):       # (the drain is idle or in its last busy cycle then)
            m.d.sync += [g_ext[d].eq(e) for d, e in first.items()]
        out_addr = wire(m, (base + rel + dx)[:OB], "out_addr", OB)
        for u0, u1, pe in pes:
            if across is None:
                in_group = Const(1)
                if not red0 and s.spatial[0] is not None:
                    in_group = in_group & (g0 == u0)
                if not red1 and s.spatial[1] is not None:
                    in_group = in_group & (g1 == u1)
                for j in range(lanes):
                    psums[j].append(Mux(in_group, pe.psum.word_select(j, 32).as_signed(), 0))
            else:
                u = (u0, u1)[across]             # the group; it is lane u mod lanes of its run
                in_group = (dx == u - u % lanes) if (s.n0, s.n1)[across] > lanes else Const(1)
                psums[u % lanes].append(Mux(in_group, pe.psum[:32].as_signed(), 0))
            m.d.comb += [pe.dr_en.eq(d_issue & in_group), pe.dr_bank.eq(dr.bank_ps), pe.dr_addr.eq(dr_local),
                         pe.dr_len.eq(length if across is None else 1)]
        value_r = [Signal(signed(32), name=f"value_r{j}") for j in range(lanes)]
        for j, lane in enumerate(psums):
            while len(lane) > 1:
                lane = [wire(m, (lane[i] + lane[i + 1])[:32].as_signed(), f"red{j}", signed(32))
                        if i + 1 < len(lane) else lane[i] for i in range(0, len(lane), 2)]
            m.d.sync += value_r[j].eq(lane[0])
        addr_r = Signal(OB, name="addr_r")
        len_r = Signal(range(lanes + 1), name="len_r")
        m.d.sync += [addr_r.eq(out_addr), len_r.eq(Mux(d_issue, length, 0))]
        # bank b holds word a when a mod W == b: lane j = (b - a0) mod W of the run starting at a0
        for b, (rd, wr) in enumerate(l2.outputs):
            j_rd = (b - out_addr[:lg])[:lg] if lg else 0
            j_wr = wire(m, (b - addr_r[:lg])[:lg] if lg else 0, f"dr_wlane{b}", range(max(2, banks)))
            value = value_r[0]
            for j in range(1, lanes):
                value = Mux(j_wr == j, value_r[j], value)
            m.d.comb += [rd.addr.eq(Mux(ctl.running, (out_addr + j_rd) >> lg, bus.out_row)), rd.en.eq(1)]
            m.d.comb += [wr.addr.eq(Mux(ctl.running, (addr_r + j_wr) >> lg, bus.out_row)),
                         wr.data.eq(Mux(ctl.running, rd.data + value, top.bus_wdata)),
                         wr.en.eq(Mux(ctl.running, j_wr < len_r, bus.out_write[b]))]
        return cls(d_issue)

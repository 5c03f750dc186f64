"""The drain: for a step that finishes an output tile, walk the output groups (the PEs that do
not share outputs) and each group's tile in runs of up to ``HwStructure.drain_lanes`` consecutive words
along X (the innermost dimension of the output L2 layout), one run a cycle; or, when each group
holds one output column side by side (``HwStructure.drain_across_groups``), runs of up to ``W``
groups' words at once.  The reduction tree,
one lane per word of the run, adds the partial sums of the PEs that share outputs (a reduction
dimension spread across them), and the run is added into the output L2, whose banks are at least
the run's words rounded up to a power of two (read-modify-write: any run is one access of each
bank; the sum is registered beside the bank before it is written)."""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed

from costmodel.hwgen_preset.rules import LOOP_DIMS, TIMING, drain_latency, reduction_levels
from costmodel.hwgen_preset.structure import HwStructure

from .common import COORD, READERS_PER_COPY, NextState, fanout, pipe, registered, rotate, wire
from .controller import Controller, Product
from .geometry import Geometry
from .hostbus import HostBus
from .l2 import L2

__all__ = ["Drain"]

#: What the drain keeps of a group: its tile's extents and their flags (``K``, ``Y``: one row;
#: ``X``: one run of the drain).
GROUP_FIELDS = (("K", COORD), ("Y", COORD), ("X", COORD), ("K_flag", 1), ("Y_flag", 1), ("X_flag", 1),
                ("K_near", 1), ("Y_near", 1), ("X_near", 1))


@dataclass
class Drain:
    continues: Signal       # still busy next cycle: waiting to start, or issuing (the pipeline's tail
    #                         overlaps the next slot: its writes are to other words)
    flushing: Signal        # writes in flight (the last ones land before done)

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
        # (the group as one-hot registers beside g0 and g1, bit u set when it is u: whether a
        # PE's group drains is a register's bit, not a comparison of the counter)
        hot0 = Signal(max(1, n0), name="g0_hot", init=1)
        hot1 = Signal(max(1, n1), name="g1_hot", init=1)
        dk, dy, dx = Signal(COORD, name="dk"), Signal(COORD, name="dy"), Signal(COORD, name="dx")
        d_active = Signal(name="d_active")
        d_tail = Signal(name="d_tail")
        # the group's tile extents (K, Y, X), registers: the first group's taken at the shift,
        # the next group's when it starts, from the step's extents of every group (registers of
        # the dr step, Controller.ahead, with whether each is empty): no arithmetic when a group
        # ends, whose decision feeds the controller's shift
        g_ext = {d: Signal(COORD, name=f"dr_g_ext_{d}") for d in ("K", "Y", "X")}
        lanes, banks = s.collection_lanes, len(l2.outputs)
        lg = (banks - 1).bit_length()

        def with_flags(e):
            """An extent and what the walk asks of it: not empty; one row (K, Y) or one run (X)
            only; at most two of them."""
            return {"n": e, "nz": e != 0, "one": e <= 1, "fits": e <= lanes, "two": e <= 2, "fits2": e <= 2 * lanes}

        def flags_of(ext):
            return {**{f"{d}_flag": ext[d][f] for d, f in (("K", "one"), ("Y", "one"), ("X", "fits"))},
                    **{f"{d}_near": ext[d][f] for d, f in (("K", "two"), ("Y", "two"), ("X", "fits2"))}}
        has_g1 = not red1 and s.spatial[1] is not None and n1 > 1 and s.drain_across_groups is None
        has_g0 = not red0 and s.spatial[0] is not None and n0 > 1 and s.drain_across_groups is None
        G0, G1 = range(n0 if has_g0 else 1), range(n1 if has_g1 else 1)
        per_group = {}
        if has_g0 or has_g1:
            for u0 in G0:
                for u1 in G1:
                    if (u0, u1) == (0, 0):
                        continue
                    ext = {d: ctl.ahead(m, "dr", f"dr_ext_{d}_{u0}_{u1}", *g.pe_tile_stages(LOOP_DIMS.index(d), u0, u1),
                                        with_flags) for d in g_ext}
                    per_group[u0, u1] = ({**{d: e["n"] for d, e in ext.items()}, **flags_of(ext)},
                                         Cat(*[e["nz"] for e in ext.values()]).all())

        def pick_group(index, options, width):
            """``options[i]`` for ``index == i`` (0 past the end): a mux tree on the counter."""
            padded = list(options) + [Const(0, width)] * (2 ** len(index) - len(options))
            return Cat(*padded[:2 ** len(index)]).word_select(index, width) if len(options) > 1 else options[0]
        g0_bits, g1_bits = max(1, (len(G0) - 1).bit_length()), max(1, (len(G1) - 1).bit_length())
        g0i, g1i = g0[:g0_bits], g1[:g1_bits]

        def groups_ok(g0i, g1i):
            """Whether a next group along level 1 (level 0) exists for group (g0i, g1i)."""
            ok1 = ok0 = Const(0)
            if has_g1:
                ok_g1 = [pick_group(g1i, [per_group[u0, u1 + 1][1] if u1 + 1 in G1 else Const(0) for u1 in G1], 1)
                         for u0 in G0]
                ok1 = wire(m, pick_group(g0i, ok_g1, 1), "dr_next_g1_ok_n")
            if has_g0:
                ok0 = wire(m, pick_group(g0i, [per_group[u0 + 1, 0][1] if u0 + 1 in G0 else Const(0) for u0 in G0], 1),
                           "dr_next_g0_ok_n")
            return ok1, ok0
        def next_exts(g0i, g1i):
            """The extents and flags of the next group along level 1 (level 0) of group (g0i, g1i)."""
            ext1 = ({d: pick_group(g0i, [pick_group(g1i, [per_group[u0, u1 + 1][0][d] if u1 + 1 in G1
                                                          else Const(0, w) for u1 in G1], w) for u0 in G0], w)
                     for d, w in GROUP_FIELDS} if has_g1 else None)
            ext0 = ({d: pick_group(g0i, [per_group[u0 + 1, 0][0][d] if u0 + 1 in G0 else Const(0, w) for u0 in G0], w)
                     for d, w in GROUP_FIELDS} if has_g0 else None)
            return ext1, ext0
        # Whether a next group exists and its extents: registers, worked out from the group
        # the walk goes to (its next state, below) and the step's per-group registers, which
        # change only at a shift, after which the drain waits DRAIN_WAIT cycles before its first
        # issue: so the group's end decides from registers, not from choices on the counters
        next_g1_ok, next_g0_ok = Signal(name="dr_next_g1_ok"), Signal(name="dr_next_g0_ok")
        # (how the walk moves at a group's end: to the next group along level 1, along level 0,
        # or back to the first, the step's drain done)
        to_g1, to_g0, to_first = Signal(name="dr_to_g1"), Signal(name="dr_to_g0"), Signal(name="dr_to_first")
        ext_g1 = {d: Signal(w, name=f"dr_next_g1_{d}") for d, w in GROUP_FIELDS} if has_g1 else None
        ext_g0 = {d: Signal(w, name=f"dr_next_g0_{d}") for d, w in GROUP_FIELDS} if has_g0 else None
        # (the dr step's first group: taken at go, below)
        first_ext = {d: ctl.ahead(m, "dr", f"dr_first_{d}", *g.pe_tile_stages(LOOP_DIMS.index(d), 0, 0), with_flags)
                     for d in g_ext}
        first = {**{d: e["n"] for d, e in first_ext.items()}, **flags_of(first_ext)}
        # the drain starts DRAIN_WAIT (5) cycles after go: the last partial sums of its step,
        # issued at the end of the slot before, are written before the PEs read them (a cycle
        # after each drain issue: their input register; compute.py asserts the MAC's stages)
        wait = TIMING.drain_wait_cycles
        assert wait >= 2
        # (counted from this slot's go alone: a slot without a drain may last two cycles)
        go_d = [Signal(name=f"dr_wait_d{k}") for k in range(1, wait + 1)]
        starts = ctl.go_drain
        go = ctl.go_walk            # (go, a copy beside the walk)
        m.d.sync += [r.eq(prev) for r, prev in zip(go_d, [starts] + go_d[:-1])]
        # (whether it issues: go_d[-1] | (d_active & ~d_tail), a register of their next values,
        # below, since it reaches every PE)
        d_issue = Signal(name="d_issue")
        t = s.pe_tile_max
        across = s.drain_across_groups
        # Where the walk is, as registers worked out when its counters move (and at a group's
        # start from its extents' flags), so the drain's last issue is known from registers: it
        # feeds the controller's shift.  ``left``: the words (or groups) left in the run's row.
        x_end, y_end, k_end = (Signal(name=f"dr_{n}_end") for n in ("x", "y", "k"))
        # (and a step from it: the end flag's next value is then a choice of registers, with no
        # sum or compare before the drain's "busy next cycle")
        x_near, y_near, k_near = (Signal(name=f"dr_{n}_near") for n in ("x", "y", "k"))
        left = Signal(COORD, name="dr_left")
        if across is None:
            x_last = x_end
            more_groups = Const(0)
        else:
            # dx counts groups (group 0 is the walk's only g0, g1): a run is groups dx .. dx+len-1,
            # one output column each, for every (k, y) of their tile, then the next run
            groups = ctl.ahead(m, "dr", "dr_groups", *g.union_stages(3),
                               lambda u: {"n": u["ext"], "more": u["ext"] > lanes, "more2": u["ext"] > 2 * lanes})
            x_last = Const(1)
            more_groups = Signal(name="dr_more_groups")
            more_near = Signal(name="dr_more_near")         # more groups after the next run too
            next_g0_ok = next_g1_ok = Const(0)
        # The registers the last issue is decided from are written through next-state wires
        # (``nx += ...`` in place of ``m.d.sync += ...``), so whether the drain is busy in the
        # next cycle is a register too (below)
        OB = max(1, top.l2_words["output"].bit_length())
        rel, k_rel, grp, g0_rel = (Signal(OB, name=n) for n in ("dr_rel", "dr_k_rel", "dr_grp", "dr_g0_rel"))
        # (and the PEs' L1 address of the run, dr_local below, whose next value its copies take)
        dr_local = Signal(COORD, name="dr_local")
        nx = NextState(m, [r for r in (x_end, y_end, k_end, more_groups, g0, g1, d_active, d_tail, left, rel, dx,
                                       dr_local) if isinstance(r, Signal)])
        y_last = wire(m, x_last & y_end, "y_last")
        k_last = wire(m, y_last & k_end, "k_last")
        # (the run's words: a register of left's next value, not a compare after left, since it
        # goes to every PE and to the drain's own pipeline)
        length_next = Mux(nx[left] < lanes, nx[left], lanes)
        length = registered(m, length_next, "dr_len", range(lanes + 1))
        g_flag = {d: Signal(name=f"dr_g_{d}_flag") for d in ("K", "Y", "X")}   # the group's extents' flags
        g_near = {d: Signal(name=f"dr_g_{d}_near") for d in ("K", "Y", "X")}
        # the output address, counted: ``rel`` (the run's first word: from ``base``, the step's
        # first output, a register of the dr descriptor taken at go: Controller.ahead) + dx,
        # where ``rel`` restarts from ``k_rel`` (the group's row of this k) and ``k_rel`` from
        # ``grp`` (the group's first word; ``g0_rel`` its g0 part).  The strides the counters add
        # are static registers, copied beside them (a multiplier block's output is a wire
        # across the device, and so is the configuration's X: on small, 3.8 ns of it before the
        # adder into out_addr)
        dydx = g.static_product(D["Y"], D["X"], "out_plane", OB)
        dim_stride = {"K": pipe(m, dydx, "dr_out_plane", OB), "Y": pipe(m, D["X"][:OB], "dr_out_row", OB),
                      "X": Const(1, OB)}

        def step_start(desc):
            return {n: desc.start[i] for n, i in (("k", 0), ("y", 2), ("x", 3))}

        def product(p, key, f):
            # (a registered multiplier whose output register is the stage's)
            return Product(p[key], f, OB)

        def step_terms(p):
            return {"k": product(p, "k", dydx), "y": product(p, "y", D["X"]), "x": p["x"][:OB]}
        # in stages (Controller.ahead): the step's start, the products, their sum
        base = ctl.ahead(m, "dr", "out_base", step_start, step_terms, lambda t: (t["k"] + t["y"] + t["x"])[:OB])
        T0s = g.T0[sp0] if sp0 is not None else Const(0, COORD)
        T1s = g.T1[sp1] if sp1 is not None else Const(0, COORD)
        unit_step = [pipe(m, g.static(T[:OB], f"out_unit{lv}", OB) if d == "X" else
                          g.static_product(T, dydx if d == "K" else D["X"], f"out_unit{lv}", OB), f"dr_out_unit{lv}", OB)
                     if d in dim_stride else Const(0, OB) for lv, (T, d) in enumerate(((T0s, sp0), (T1s, sp1)))]
        # the PE's L1 address of the run, counted likewise: ``loc`` = (dk * tY + dy) * tX + dx
        # (dk * tY + dy across groups, where dx counts groups), ``loc_k`` its value at dy = dx = 0;
        # dx moves by ``lanes``, so when they divide tX every run starts at a multiple of them
        # (the PE's drain read relies on it: hwgen/pe.py, ``slotted``)
        loc_k = Signal(COORD, name="dr_loc_k")
        row_words, k_words = (t["X"], t["Y"] * t["X"]) if across is None else (1, t["Y"])

        def start_group(src):
            """A group starts (its counters at 0): its extents, their flags, the walk's flags."""
            return ([g_ext[d].eq(src[d]) for d in g_ext] + [g_flag[d].eq(src[f"{d}_flag"]) for d in g_flag]
                    + [g_near[d].eq(src[f"{d}_near"]) for d in g_near]
                    + [k_end.eq(src["K_flag"]), y_end.eq(src["Y_flag"]), k_near.eq(src["K_near"]),
                       y_near.eq(src["Y_near"])]
                    + ([x_end.eq(src["X_flag"]), x_near.eq(src["X_near"]), left.eq(src["X"])] if across is None else []))

        def x_restart():
            return [dx.eq(0), x_end.eq(g_flag["X"]), x_near.eq(g_near["X"]), left.eq(g_ext["X"])]
        with m.If(d_issue):
            nx += d_active.eq(1)
            with m.If(~x_last):
                nx += [dx.eq(dx + lanes), dr_local.eq(dr_local + lanes), left.eq(left - lanes),
                       x_end.eq(x_near), x_near.eq(dx + 3 * lanes >= g_ext["X"])]
            with m.Elif(~y_last):
                nx += [dy.eq(dy + 1), rel.eq(rel + dim_stride["Y"]), y_end.eq(y_near), y_near.eq(dy + 3 >= g_ext["Y"])]
                if across is None:      # (the row's start: dr_local - dx)
                    nx += [dr_local.eq(dr_local - dx + row_words)] + x_restart()
                else:                   # (the same run of groups)
                    nx += dr_local.eq(dr_local + row_words)
            with m.Elif(~k_last):
                nx += [dy.eq(0), dk.eq(dk + 1), rel.eq(k_rel + dim_stride["K"]), k_rel.eq(k_rel + dim_stride["K"]),
                       dr_local.eq(loc_k + k_words), loc_k.eq(loc_k + k_words),
                       k_end.eq(k_near), k_near.eq(dk + 3 >= g_ext["K"]), y_end.eq(g_flag["Y"]), y_near.eq(g_near["Y"])]
                if across is None:
                    nx += x_restart()
            with m.Elif(more_groups):
                nx += [dy.eq(0), dk.eq(0), dx.eq(dx + lanes), rel.eq(grp), k_rel.eq(grp),  # the next run of groups
                       dr_local.eq(0), loc_k.eq(0), left.eq(left - lanes),
                       k_end.eq(g_flag["K"]), y_end.eq(g_flag["Y"]), k_near.eq(g_near["K"]), y_near.eq(g_near["Y"])]
                if across is not None:
                    nx += [more_groups.eq(more_near), more_near.eq(dx + 3 * lanes < groups["n"])]
            with m.Else():
                nx += [dx.eq(0), dy.eq(0), dk.eq(0), dr_local.eq(0), loc_k.eq(0)]
                with m.If(next_g1_ok):
                    m.d.comb += to_g1.eq(1)
                    nxt = grp + unit_step[1]
                    nx += [g1.eq(g1 + 1), grp.eq(nxt), k_rel.eq(nxt), rel.eq(nxt), hot1.eq(hot1 << 1)]
                    nx += start_group(ext_g1) if has_g1 else []
                with m.Elif(next_g0_ok):
                    m.d.comb += to_g0.eq(1)
                    nxt = g0_rel + unit_step[0]
                    nx += [g1.eq(0), g0.eq(g0 + 1), g0_rel.eq(nxt), grp.eq(nxt), k_rel.eq(nxt), rel.eq(nxt),
                           hot1.eq(1), hot0.eq(hot0 << 1)]
                    nx += start_group(ext_g0) if has_g0 else []
                with m.Else():
                    m.d.comb += to_first.eq(1)
                    nx += [g0.eq(0), g1.eq(0), d_tail.eq(1), hot0.eq(1), hot1.eq(1)]
        with m.Elif(d_tail):
            nx += [d_tail.eq(0), d_active.eq(0)]
        # The step's first group, taken at go (the drain issues nothing then: its last issue
        # was at the shift at the latest, and the next comes DRAIN_WAIT cycles later), from the
        # dr step's registers: the shift, whose fanout is wide, drives none of the drain's logic
        with m.If(go):
            nx += start_group(first) + [r.eq(base) for r in (rel, k_rel, grp, g0_rel)]
            if across is not None:
                nx += [left.eq(groups["n"]), more_groups.eq(groups["more"]), more_near.eq(groups["more2"])]
        # Busy next cycle, a register: a drain starts at the next go (the shift now) or is
        # waiting, or it issues next cycle and that issue is not its last (the step's group
        # registers change only at a shift, after which the drain does not issue)
        # (of the group the walk goes to: worked out for each group it may go to, from the
        # registers, then one chosen by how the walk moves, so its decision meets a last choice,
        # not the mux trees over the groups)
        if has_g0 and not has_g1:
            # one level of groups, walked in order: the groups after this one in a queue of
            # registers, loaded at go from the dr step's per-group registers and moved up one at
            # each group's end (the next group's extents and whether it exists: its head)
            fields = [d for d, _ in GROUP_FIELDS]
            queue = [{**{d: Signal(w, name=f"dr_queue{j}_{d}") for d, w in GROUP_FIELDS},
                      "ok": Signal(name=f"dr_queue{j}_ok")} for j in range(len(G0) - 1)]
            for j, entry in enumerate(queue):
                after = queue[j + 1] if j + 1 < len(queue) else None
                with m.If(go):
                    m.d.sync += [entry[d].eq(per_group[j + 1, 0][0][d]) for d in fields]
                    m.d.sync += entry["ok"].eq(per_group[j + 1, 0][1])
                with m.Elif(to_g0):
                    m.d.sync += [entry[d].eq(after[d] if after is not None else 0) for d in fields]
                    m.d.sync += entry["ok"].eq(after["ok"] if after is not None else 0)
            m.d.comb += [ext_g0[d].eq(queue[0][d]) for d in fields] + [next_g0_ok.eq(queue[0]["ok"])]
            oks_stay = (Const(0), queue[0]["ok"])
            oks_after = {"g0": (Const(0), queue[1]["ok"] if len(queue) > 1 else Const(0)), "first": oks_stay}
        else:
            moves = [("first", to_first, (Const(0, g0_bits), Const(0, g1_bits)))]
            if has_g0:
                moves.append(("g0", to_g0, ((g0i + 1)[:g0_bits], Const(0, g1_bits))))
            if has_g1:
                moves.append(("g1", to_g1, (g0i, (g1i + 1)[:g1_bits])))
            ok1_n, ok0_n = oks_stay = groups_ok(g0i, g1i)
            exts_n = next_exts(g0i, g1i)
            oks_after = {}
            for key, move, (to0, to1) in moves:
                ok1_m, ok0_m = oks_after[key] = groups_ok(to0, to1)
                ok1_n, ok0_n = Mux(move, ok1_m, ok1_n), Mux(move, ok0_m, ok0_n)
                exts_n = [None if e is None else {d: Mux(move, e_m[d], e[d]) for d in e}
                          for e, e_m in zip(exts_n, next_exts(to0, to1))]
            ok1_n, ok0_n = wire(m, ok1_n, "dr_g1_ok_next"), wire(m, ok0_n, "dr_g0_ok_next")
            if has_g0 or has_g1:
                m.d.sync += [next_g1_ok.eq(ok1_n), next_g0_ok.eq(ok0_n)]
            for regs, value in zip((ext_g1, ext_g0), exts_n):
                if regs is not None:
                    m.d.sync += [regs[d].eq(value[d]) for d in regs]
        # Whether the walk's word after this cycle's move is its last: by how it moves, each
        # move's flags after it from registers, a sum of products (the AND of the flags'
        # next-state muxes placed over seven LUTs on small, in the controller's shift's cone).
        # The walk does not issue at go (above), so at go the groups' flags stay
        def last(xe, ye, ke, more, oks):
            return xe & ye & ke & ~more & ~oks[0] & ~oks[1]
        mg = more_groups
        x_restarted = g_flag["X"] if across is None else Const(1)
        issue = d_issue & ~go
        moved = [issue & ~x_last & last(x_near, y_end, k_end, mg, oks_stay),
                 issue & x_last & ~y_end & last(x_restarted, y_near, k_end, mg, oks_stay),
                 issue & y_last & ~k_end & last(x_restarted, g_flag["Y"], k_near, mg, oks_stay)]
        at_end = issue & k_last
        if across is not None:
            moved.append(at_end & mg & last(Const(1), g_flag["Y"], g_flag["K"], more_near, oks_stay))
            at_end = at_end & ~mg
        for ok, ext, key, present in ((next_g1_ok, ext_g1, "g1", has_g1), (next_g0_ok, ext_g0, "g0", has_g0)):
            if present:
                moved.append(at_end & ok & last(ext["X_flag"] if across is None else Const(1), ext["Y_flag"],
                                                ext["K_flag"], mg, oks_after[key]))
                at_end = at_end & ~ok
        moved += [at_end & last(x_last, y_end, k_end, mg, oks_after["first"]),
                  ~d_issue & ~go & last(x_last, y_end, k_end, mg, oks_stay),
                  go & last(first["X_flag"] if across is None else Const(1), first["Y_flag"], first["K_flag"],
                                groups["more"] if across is not None else mg, oks_stay)]
        final_n = wire(m, Cat(*moved).any(), "dr_final_next")
        run_n = nx[d_active] & ~nx[d_tail]
        issue_next = go_d[-2] | run_n
        m.d.sync += d_issue.eq(issue_next)
        # (busy while it waits, and from the cycle before its first issue as a run)
        continues_next = wire(m, functools.reduce(operator.or_, [ctl.go_next["drain"], starts, *go_d[:-2]])
                              | ((go_d[-2] | run_n) & ~final_n), "dr_continues_next")
        continues = registered(m, continues_next, "dr_continues")
        # (the issue's output address, a register of the counters' next values: the L2 banks'
        # reads are worked out from it in the cycle of the issue)
        out_addr = registered(m, (nx[rel] + nx[dx])[:OB], "out_addr", OB)
        # Each lane's words, one per reduction position (the PEs of the other levels' groups
        # are one-hot: an OR of masked words selects the group's), registered; then the
        # reduction tree over the positions, a register after each level (drain_latency).
        terms = [{} for _ in range(lanes)]            # lane -> reduction position -> masked words
        # (a group's select, registered since the PEs read a cycle later, in kept copies, one
        # for each READERS_PER_COPY of the group's PEs: one register of 64 PEs would clear 32
        # lanes' words of each of them, 2,048 loads)
        selects, members = {}, {}

        def group_select(in_group, group, name):
            n = members[group] = members.get(group, -1) + 1
            key = (group, n // READERS_PER_COPY)
            if key not in selects:
                selects[key] = pipe(m, in_group, name, 1)
            return selects[key]
        # (what every PE is told, in copies for groups of PEs: .common.fanout)
        to_pes = {"issue": fanout(m, issue_next, "d_issue", len(pes), clear=True),
                  "local": fanout(m, nx[dr_local], "dr_local", len(pes)),
                  "len": fanout(m, length_next, "dr_len", len(pes), length.shape())}
        for u0, u1, pe in pes:
            near = {k: c.of(u0 * s.n1 + u1) for k, c in to_pes.items()}
            key = (u0 if red0 else 0, u1 if red1 else 0)
            if across is None:
                in_group = Const(1)
                if not red0 and s.spatial[0] is not None:
                    in_group = in_group & hot0[u0]
                if not red1 and s.spatial[1] is not None:
                    in_group = in_group & hot1[u1]
                group = (u0 if not red0 and s.spatial[0] is not None else None,
                         u1 if not red1 and s.spatial[1] is not None else None)
                in_group_r = (group_select(in_group, group, f"dr_in_group_{u0}_{u1}")
                              if not isinstance(in_group, Const) else None)     # (one group: no select)
                for j in range(lanes):
                    word = pe.psum.word_select(j, 32)
                    terms[j].setdefault(key, []).append(word if in_group_r is None else Mux(in_group_r, word, 0))
            else:
                u = (u0, u1)[across]             # the group; it is lane u mod lanes of its run
                in_group = (dx == u - u % lanes) if (s.n0, s.n1)[across] > lanes else Const(1)
                if isinstance(in_group, Const):
                    terms[u % lanes].setdefault(key, []).append(pe.psum[:32])
                else:
                    in_group_r = group_select(in_group, u - u % lanes, f"dr_in_group_{u0}_{u1}")
                    terms[u % lanes].setdefault(key, []).append(Mux(in_group_r, pe.psum[:32], 0))
            m.d.comb += [pe.dr_en.eq(near["issue"] & in_group), pe.dr_bank.eq(dr.bank_ps), pe.dr_addr.eq(near["local"]),
                         pe.dr_len.eq(near["len"] if across is None else 1)]

        def reg(value, name, shape=signed(32), data=True):
            # (the words are data, without reset: L2 is written when the write enables, which
            # come from registers the reset clears, say so)
            return registered(m, value, name, shape, reset_less=data)
        values = []
        for j, by_key in enumerate(terms):
            level = [reg(_or(words), f"dr_sel{j}") for _, words in sorted(by_key.items())]
            while len(level) > 1:
                level = [reg((level[i] + level[i + 1])[:32].as_signed() if i + 1 < len(level) else level[i],
                             f"dr_red{j}") for i in range(0, len(level), 2)]
            values.append(level[0])
        levels = reduction_levels(s)
        assert all(len(by_key) == len(terms[0]) for by_key in terms) and (len(terms[0]) - 1).bit_length() == levels
        latency = drain_latency(s)
        assert latency == 5 + max(levels - 1, 0)
        # Issue d's words: read by the PEs at d + 1 (their input register), selected then
        # (registered), reduced by d + 2 + levels, moved to their banks (registered), added at
        # d + latency - 1 to the L2 words read three cycles before (the banks' latency, a
        # register beside the bank, a register beside the adder), the sum registered beside the
        # bank and written at d + latency: the BRAMs' clock-to-output (5.7 ns on an ECP5
        # without the block's own output register, which Yosys 0.23 does not map), the wire to
        # the adder, the add and the wire to the bank's write port are on separate paths.
        # (The read's row is worked out from the issue's address, a register: ``out_addr``.)
        issued = [d_issue]
        for k in range(1, latency):
            issued.append(reg(issued[-1], f"dr_issued_d{k}", 1, data=False))
        addr_q, len_q = [out_addr], [Mux(d_issue, length, 0)]
        for k in range(1, latency + 1):
            addr_q.append(reg(addr_q[-1], f"dr_addr_d{k}", OB, data=False))
            len_q.append(reg(len_q[-1], f"dr_len_d{k}", range(lanes + 1), data=False))
        rotate_at = 2 + levels                          # the lanes' values are ready then
        read_at = latency - 4

        def bank_row(addr, b):
            return ((addr >> lg) + (b < addr[:lg]))[:OB] if b < banks - 1 else addr >> lg

        def lane_of(addr, b):
            return (b - addr[:lg])[:lg] if lg else Const(0, 1)
        # bank b takes lane (b - address) mod V (the banks) when that is one of the run's lanes
        # (its write enable says so; the other banks' words are never written): a rotation of the lanes'
        # words by the address, whose period is the lanes rounded up to a power of two ``Q``
        # (a divisor of V), so lg(Q) stages of two-way choices give Q words, bank b taking word
        # b mod Q (one word, no rotation, when the drain reads a word a cycle), registered in a
        # kept register of each bank (:func:`.common.pipe`), which sits beside the bank's memory
        # and its adder: the wires across the device run from register to register
        Q = 1 << (lanes - 1).bit_length()
        rotated = rotate(m, [values[p] if p < lanes else values[0] for p in range(Q)], addr_q[rotate_at],
                         "dr_rot", signed(32), down=True)
        # each bank's rows to read and write in kept registers beside it, worked out from the
        # addresses a stage before (the address's high part, or one more: Yosys shares the sum
        # and the compares): the sum lies on one side of the wires across the device, the
        # bank's port choice on the other
        # (the V / Q banks that take the same word share its kept register, a copy for each
        # READERS_PER_COPY of them: on small's kcp, one word a cycle into 16 banks, 2 copies)
        values_at: dict[tuple[int, int], Signal] = {}

        def moved_value(b):
            key = (b % Q, b // Q // READERS_PER_COPY)
            if key not in values_at:
                moved = pipe(m, rotated[b % Q], f"dr_bank_value{b}", signed(32))
                for k in range(rotate_at + 1, latency - 1):     # (no reduction level: a cycle to wait)
                    moved = reg(moved, f"dr_bank_value{b}_d{k}")
                values_at[key] = moved
            return values_at[key]
        for b, (rd, wr) in enumerate(l2.outputs):
            j = lane_of(addr_q[rotate_at], b)
            moved = moved_value(b)
            write_en = pipe(m, j < len_q[rotate_at], f"dr_bank_en{b}", 1)
            for k in range(rotate_at + 1, latency):
                write_en = reg(write_en, f"dr_bank_en{b}_d{k}", 1, data=False)
            old = reg(pipe(m, rd.data, f"dr_l2_word{b}", 32), f"dr_old{b}", 32)
            # the bank's rows to read and write (from its copies of the addresses)
            # and whether the accelerator or the host has its ports (a register of its own)
            running = ctl.running_copy(m, f"dr_running{b}")
            rd_row, wr_row = (pipe(m, bank_row(addr_q[k - 1], b)[:len(rd.addr)], f"dr_bank{b}_row_d{k}")
                              for k in (read_at, latency))
            m.d.comb += [rd.addr.eq(Mux(running, rd_row, bus.out_row)), rd.en.eq(1)]
            total = reg((old + moved)[:32].as_signed(), f"dr_sum{b}")
            m.d.comb += [wr.addr.eq(Mux(running, wr_row, bus.out_row)),
                         wr.data.eq(Mux(running, total, top.bus_wdata)),
                         wr.en.eq(Mux(running, write_en, bus.out_write[b]))]
        drain = cls(continues, wire(m, Cat(*issued).any(), "dr_flushing"))
        drain.continues_next = continues_next       # (for the controller's copies of the register)
        return drain


def _or(words):
    """The OR of ``words`` (at most one of them is non-zero: a select of one-hot masked words)."""
    while len(words) > 1:
        words = [words[i] | words[i + 1] if i + 1 < len(words) else words[i] for i in range(0, len(words), 2)]
    return words[0]

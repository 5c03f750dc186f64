"""The loader and the multicast distribution NoC.  For a step that reloads a tensor, the loader
walks that tensor's union box over all PEs (inputs first, then weights) as runs of consecutive L2
addresses (:func:`costmodel.hwgen_preset.rules.input_runs` / ``weight_runs``: rows, or whole-width
rows and whole filters merged into one run), ``W`` consecutive words a cycle read from the
interleaved L2 banks.  Addresses are counted in registers, not multiplied or summed: each run
starts one stride after the last.  Three cycles later (two register stages after the banks) the
words are on the NoC's lanes with lane 0's L2 address, and every PE whose tile holds a word
captures it in that cycle (:mod:`.pe`): the multicast, and the halo shared by overlapping
windows."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value

from costmodel.hwgen_preset.rules import LOOP_DIMS, TIMING
from costmodel.hwgen_preset.structure import HwStructure

from .common import COORD, by_stride, registered, span, wire
from .controller import Controller, Product
from .geometry import Geometry
from .l2 import L2

__all__ = ["Loader"]


@dataclass
class Loader:
    continues: Signal       # still busy next cycle (an issue is followed by its capture, four cycles later)
    early_len: Signal       # the PEs' lanes register holds, two cycles later, words on lanes
    #                         0 .. early_len-1 (a register; 0: none): lane_data holds them next cycle
    early_weight: Signal    # ... of which tensor: 0 input, 1 weight
    lane_data: Signal       # W words, lane j in bits [8j, 8j+8) (each PE registers them at its input)
    issue_rel: Signal       # the issue's L2 address (lane 0's) from its box's first word, a cycle
    #                         after the issue (two cycles before the lanes reach lane_data)
    issue_rel_now: Signal   # ... in the issue's cycle (a register of the walk's)
    in_base: Signal         # L2 address of the input box's first word (PE (0, 0)'s tile)
    w_base: Signal          # ... of the weight box
    strides: dict           # tensor -> loop dim -> L2 words between neighbouring positions along it
    #                         (input C: in_rows * in_cols, Y: stride_y * in_cols, X: stride_x;
    #                          weight K: C * R * S, C: R * S)

    @classmethod
    def build(cls, m: Module, s: HwStructure, g: Geometry, ctl: Controller, l2: L2, abits: int) -> "Loader":
        W = s.noc_words_per_cycle
        lg = (W - 1).bit_length()
        ld, sy, sx, R, S = ctl.ld, g.stride_y, g.stride_x, g.R, g.S
        in_rows, in_cols, C = g.cfg["in_rows"], g.cfg["in_cols"], g.D["C"]
        A = abits
        # (static registers, one multiplier deep: C * R * S is C times the R * S register; a
        # product by a stride is a choice of constant multiples)
        plane = g.static_product(in_rows, in_cols, "in_plane", A)
        rs = g.rs
        crs = g.static_product(C, rs, "w_crs", A)
        row_step = g.static(by_stride(in_cols, sy, s.max_stride)[:A], "in_row_step", A)
        strides = {"input": {"C": plane, "Y": row_step, "X": sx}, "weight": {"K": crs, "C": rs}}

        # The boxes of the step being loaded, registers ahead of the step in four stages
        # (Controller.ahead): the unions' starts; their extents and the starts' products; the
        # input spans, the bases and the products of the extents; the runs.
        unions = [g.union_stages(di) for di in range(4)]

        def starts(desc):
            return {d: unions[di][0](desc) for di, d in enumerate(LOOP_DIMS)}

        def product(p, d, key, f):
            # (a registered multiplier whose output register is the stage's)
            return Product(p[d][key], f, A)

        def extents(p):
            out = {d: unions[di][1](p[d]) for di, d in enumerate(LOOP_DIMS)}
            out["prod"] = {"c": product(p, "C", "start", plane), "y": product(p, "Y", "start", row_step),
                           "x": by_stride(p["X"]["start"], sx, s.max_stride)[:A],
                           "k": product(p, "K", "start", crs), "cw": product(p, "C", "start", rs)}
            return out

        # rows * in_cols of a box of full rows = y_n * row_step + (R * in_cols - row_step): a
        # product in the span stage and a sum in the box stage, not a product then choices
        filter_rows = g.static_product(R, in_cols, "in_filter_rows", A)
        rows_extra = g.static((filter_rows - row_step)[:A], "in_rows_extra", A)

        # Whether the input box spans whole rows (its columns are in_cols), and whole channels
        # too: only when it spans every output column (row), and the layer's do reach the
        # input's last column (row), since the span grows with the outputs; so the box stage
        # reads two registers, not two comparisons with the configuration's wide fanout
        whole = {d: g.static(g.static(span(g.D[d], st, f, s.max_stride)[:COORD], f"in_span_{d}") == n,
                             f"in_whole_{d}")
                 for d, st, f, n in (("Y", sy, R, in_rows), ("X", sx, S, in_cols))}

        def spans(p):
            k_n, c_n, y_n, x_n = (p[d]["ext"] for d in LOOP_DIMS)
            pr = p["prod"]
            return {"k_n": k_n, "c_n": c_n, "y_rows": product(p, "Y", "ext", row_step),
                    "rows": span(y_n, sy, R, s.max_stride)[:COORD],      # rows x cols of c_n channels
                    "cols": span(x_n, sx, S, s.max_stride)[:COORD],      # from (c_s, y_s * sy, x_s * sx)
                    "in_base": (pr["c"] + pr["y"] + pr["x"])[:A], "w_base": (pr["k"] + pr["cw"])[:A],
                    "c_plane": product(p, "C", "ext", plane), "k_crs": product(p, "K", "ext", crs),
                    "c_rs": product(p, "C", "ext", rs),
                    "w_full": c_n == C,
                    "full_cols": (x_n == g.D["X"]) & whole["X"], "full_rows": (y_n == g.D["Y"]) & whole["Y"]}

        def boxes(p):
            full_cols = p["full_cols"]
            full = full_cols & p["full_rows"]
            in_box = {"base": p["in_base"], "n_outer": Mux(full, 1, p["c_n"]), "outer_stride": plane,
                      "n_inner": Mux(full_cols, 1, p["rows"]), "inner_stride": in_cols,
                      "run": Mux(full, p["c_plane"], Mux(full_cols, p["y_rows"] + rows_extra, p["cols"]))}
            # the weight box: k_n filters x c_n channels x R x S from (k_s, c_s)
            w_box = {"base": p["w_base"], "n_outer": Mux(p["w_full"], 1, p["k_n"]),
                     "outer_stride": crs, "n_inner": Const(1, COORD), "inner_stride": Const(0, A),
                     "run": Mux(p["w_full"], p["k_crs"], p["c_rs"])}
            return {f"{t}_{k}": Value.cast(box[k])[:n] for t, box in zip(("in", "w"), (in_box, w_box))
                    for k, n in widths.items()}

        widths = {"base": A, "n_outer": COORD, "outer_stride": A, "n_inner": COORD, "inner_stride": A, "run": A}
        both = ctl.ahead(m, "ld", "box", starts, extents, spans, boxes)
        in_box = {k: both[f"in_{k}"] for k in widths}
        w_box = {k: both[f"w_{k}"] for k in widths}
        in_base, w_base = in_box["base"], w_box["base"]
        l_tail = Signal(name="l_tail")
        l_active = Signal(name="l_active")
        l_weight = Signal(name="l_weight")
        # The walk, counted in registers: the chunk's L2 address and its offset from the box's
        # first word, the same for the first word of its run and of its outer run, the words
        # left in the run, and the inner and outer runs left.  They take the step's first box at
        # ``go`` (a cycle before the first issue: the boxes' registers and ``go``'s wide fanout
        # stay off the issue's paths), so an issue's address is a register, not a sum.
        a_r, rel_r, run_a_r, run_rel_r, out_a_r, out_rel_r, rem_r = (
            Signal(A, name=n) for n in ("l2_addr", "l2_rel", "l_run_addr", "l_run_rel", "l_out_addr",
                                        "l_out_rel", "remaining"))
        il_r, ol_r = Signal(COORD, name="l_inner_left"), Signal(COORD, name="l_outer_left")
        box = {k: wire(m, Mux(l_weight, w_box[k], in_box[k])[:n], f"box_{k}", n) for k, n in widths.items()}
        issuing = wire(m, l_active & ~l_tail, "issuing")
        addr, rel, remaining = a_r, rel_r, rem_r
        length = wire(m, Mux(remaining < W, remaining, W), "length", 8)
        hi = addr >> lg
        for b in range(W):
            # bank b serves lane (b - addr) mod W: the word at addr + that, in row hi or hi + 1
            # (the last bank's word is never in the next row)
            row = wire(m, (hi + (b < addr[:lg]))[:A] if b < W - 1 else hi, f"bank{b}_row", A)
            for ports in (l2.inputs, l2.weights):
                rd = ports[b][0]
                m.d.comb += [rd.addr.eq(row), rd.en.eq(1)]
        # where the walk is (the run's last chunk; the last inner run; the last outer run),
        # registers worked out as the counters move: they decide the next address
        last_chunk, il_zero, ol_zero = (Signal(name=n) for n in ("last_chunk", "l_inner_zero", "l_outer_zero"))
        # and which way the walk goes after this issue, decoded from them as they are worked out
        # (one of: the next chunk, run, outer run, or the box's end), so each register's enable
        # is a register or two
        next_run, next_outer, box_end = (Signal(name=n) for n in ("l_next_run", "l_next_outer", "l_box_end"))

        def restart(a, r, rem, il, ol, last, il0, ol0):
            return [a_r.eq(a), rel_r.eq(r), rem_r.eq(rem), il_r.eq(il), ol_r.eq(ol),
                    last_chunk.eq(last), il_zero.eq(il0), ol_zero.eq(ol0),
                    next_run.eq(last & ~il0), next_outer.eq(last & il0 & ~ol0), box_end.eq(last & il0 & ol0)]

        # whether a box's run fits one chunk, and it has one inner (outer) run: worked out at
        # ``go`` from its registers for its first run, and registered then for the runs after
        # it (the box's registers hold still until the load ends), so the walk's next run reads
        # a choice of registers, not the boxes' choice and then a comparison
        def flags(bx):
            return bx["run"] <= W, bx["n_inner"] == 1, bx["n_outer"] == 1

        kept = {name: [registered(m, f, f"{name}_{k}") for f, k in zip(flags(bx), ("fits", "one_inner", "one_outer"))]
                for name, bx in (("l_in", in_box), ("l_w", w_box))}
        fits, one_inner, _ = (Mux(l_weight, w, i) for w, i in zip(kept["l_w"], kept["l_in"]))

        def first(bx, name, now=False):
            last, il0, ol0 = flags(bx) if now else kept[name]
            return restart(bx["base"], 0, bx["run"], bx["n_inner"] - 1, bx["n_outer"] - 1, last, il0, ol0) + [
                run_a_r.eq(bx["base"]), run_rel_r.eq(0), out_a_r.eq(bx["base"]), out_rel_r.eq(0)]
        starts = ctl.go_load
        # (exactly one of the run's next chunk, the next run, the next outer run and the box's
        # end is next, so each is an If of its own, not a choice after the others: a register's
        # enable is then a few registers; ``starts`` (the loader idle) comes last, and wins)
        to_weights = wire(m, ~l_weight & ld.ld_w, "l_to_weights")
        with m.If(issuing & ~last_chunk):           # the run's next chunk
            m.d.sync += restart(addr + W, rel + W, remaining - W, il_r, ol_r, remaining <= 2 * W, il_zero, ol_zero)
        with m.If(issuing & next_run):              # the next run
            nxt_a, nxt_rel = run_a_r + box["inner_stride"], run_rel_r + box["inner_stride"]
            m.d.sync += restart(nxt_a, nxt_rel, box["run"], il_r - 1, ol_r, fits, il_r == 1, ol_zero)
            m.d.sync += [run_a_r.eq(nxt_a), run_rel_r.eq(nxt_rel)]
        with m.If(issuing & next_outer):            # the next outer run
            nxt_a, nxt_rel = out_a_r + box["outer_stride"], out_rel_r + box["outer_stride"]
            m.d.sync += restart(nxt_a, nxt_rel, box["run"], box["n_inner"] - 1, ol_r - 1, fits, one_inner, ol_r == 1)
            m.d.sync += [run_a_r.eq(nxt_a), run_rel_r.eq(nxt_rel), out_a_r.eq(nxt_a), out_rel_r.eq(nxt_rel)]
        with m.If(issuing & box_end & to_weights):  # the weight box next
            m.d.sync += first(w_box, "l_w") + [l_weight.eq(1)]
        with m.If(issuing & box_end & ~to_weights):     # the end
            m.d.sync += [l_tail.eq(1), l_weight.eq(0)]
        with m.If(l_tail):
            m.d.sync += [l_tail.eq(0), l_active.eq(0)]
        with m.If(starts):                          # the step's first box: inputs, else weights
            m.d.sync += [l_active.eq(1), l_weight.eq(~ld.ld_in)]
            with m.If(ld.ld_in):
                m.d.sync += first(in_box, "l_in", now=True)
            with m.Else():
                m.d.sync += first(w_box, "l_w", now=True)
        cur_weight = l_weight
        # The NoC lanes, three cycles after the issue, in register stages: the L2
        # banks' words (the banks' read latency, then a register of both tensors'); the words
        # of the tensor on the bus rotated to lanes (lane j carries lane 0's address + j) in a
        # register; the lanes
        # broadcast to the PEs, each of which registers them at its input and captures them
        # the cycle after: the broadcast's wires run from register to register.
        assert TIMING.load_latency_cycles == 5, "a cycle to take the box, then four register stages (hwgen/loader.py)"
        # (what the lanes carry is told to the PEs two cycles before they capture them, which
        # register it as they do the lanes: how many, which tensor; the issue's offset two
        # cycles after the issue, hwgen/pe.py)
        issued, count = Signal(name="lane_valid_d1"), Signal(8, name="lane_count_d1")
        weights = [Signal(name=f"lane_weight_d{k}") for k in (1, 2)]
        addrs = [Signal(A, name=f"lane_addr_d{k}") for k in (1, 2)]
        m.d.sync += [issued.eq(issuing), count.eq(length), weights[0].eq(cur_weight), weights[1].eq(weights[0]),
                     addrs[0].eq(addr), addrs[1].eq(addrs[0])]
        early_len = registered(m, Mux(issued, count, 0), "lane_len_d2", 8)
        issued_d2 = registered(m, issued, "lane_valid_d2")
        issue_rel = registered(m, rel, "l_issue_rel_d1", A)
        # (both tensors' banks are registered as they come out of the RAMs, whose read is the
        # slow part of the cycle; the tensor is chosen with the rotation)
        banked = {name: Signal(8 * W, name=f"noc_banked_{name}") for name in ("input", "weight")}
        for b in range(W):
            m.d.sync += [banked["input"][8 * b: 8 * b + 8].eq(l2.inputs[b][0].data),
                         banked["weight"][8 * b: 8 * b + 8].eq(l2.weights[b][0].data)]
        lane_data = Signal(8 * W, name="lane_data")
        for j in range(W):
            bank = (addrs[1][:lg] + j)[:lg] if lg else 0
            words = {name: bits.word_select(bank, 8) if W > 1 else bits for name, bits in banked.items()}
            m.d.sync += lane_data[8 * j: 8 * j + 8].eq(Mux(weights[1], words["weight"], words["input"]))
        # Busy next cycle, a register: a box taken at the next go (the shift now), an issue
        # next cycle (one now that is not the last, or the box taken now), or one in flight
        last_issue = wire(m, box_end & (l_weight | ~ld.ld_w), "l_last_issue")
        issuing_next = starts | (issuing & ~last_issue)
        continues = registered(m, ctl.go_next["load"] | issuing_next | issuing | issued | issued_d2, "l_continues")
        return cls(continues, early_len, weights[1], lane_data, issue_rel, rel, in_base, w_base, strides)

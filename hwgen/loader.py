"""The loader and the multicast distribution NoC.  For a step that reloads a tensor, the loader
walks that tensor's union box over all PEs (inputs first, then weights) as runs of consecutive L2
addresses (:func:`costmodel.hwgen_preset.rules.input_runs` / ``weight_runs``: rows, or whole-width
rows and whole filters merged into one run), ``W`` consecutive words a cycle read from the
interleaved L2 banks.  Addresses are counted, not multiplied: each run starts one stride after
the last.  One cycle later the words are on the NoC's lanes with lane 0's L2 address, and every PE
whose tile holds a word captures it in that cycle (:mod:`.pe`): the multicast, and the halo
shared by overlapping windows."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value

from costmodel.hwgen_preset.rules import LOOP_DIMS
from costmodel.hwgen_preset.structure import HwStructure

from .common import COORD, span, wire
from .controller import Controller
from .geometry import Geometry
from .l2 import L2

__all__ = ["Loader"]


@dataclass
class Loader:
    continues: Signal       # still busy next cycle (an issue now is followed by its capture)
    lane_valid: Signal      # the lanes carry words this cycle
    lane_count: Signal      # how many (lanes 0 .. count-1)
    lane_weight: Signal     # which tensor: 0 input, 1 weight
    lane_addr: Signal       # lane 0's L2 address (lane j carries the word at lane_addr + j)
    lane_data: Signal       # W words, lane j in bits [8j, 8j+8)
    issue_rel: Signal       # the issue's address from its box's first word (lane_addr's, a cycle early)
    in_base: Signal         # L2 address of the input box's first word (PE (0, 0)'s tile)
    w_base: Signal          # ... of the weight box
    strides: dict           # tensor -> loop dim -> L2 words between neighbouring positions along it
    #                         (input C: in_rows * in_cols, Y: stride_y * in_cols, X: stride_x;
    #                          weight K: C * R * S, C: R * S)

    @classmethod
    def build(cls, m: Module, s: HwStructure, g: Geometry, ctl: Controller, l2: L2, abits: int) -> "Loader":
        W = s.noc_words_per_cycle
        lg = (W - 1).bit_length()
        ld, go, sy, sx, R, S = ctl.ld, ctl.go, g.stride_y, g.stride_x, g.R, g.S
        in_rows, in_cols, C = g.cfg["in_rows"], g.cfg["in_cols"], g.D["C"]
        A = abits
        plane = g.static((in_rows * in_cols)[:A], "in_plane", A)
        rs = g.static((R * S)[:A], "w_rs", A)
        crs = g.static((C * R * S)[:A], "w_crs", A)
        row_step = g.static((sy * in_cols)[:A], "in_row_step", A)
        strides = {"input": {"C": plane, "Y": row_step, "X": sx}, "weight": {"K": crs, "C": rs}}

        # The boxes of the step being loaded, registers ahead of the step in four stages
        # (Controller.ahead): the unions' starts; their extents and the starts' products; the
        # input spans, the bases and the products of the extents; the runs.
        unions = [g.union_stages(di) for di in range(4)]

        def starts(desc):
            return {d: unions[di][0](desc) for di, d in enumerate(LOOP_DIMS)}

        def extents(p):
            out = {d: unions[di][1](p[d]) for di, d in enumerate(LOOP_DIMS)}
            k_s, c_s, y_s, x_s = (p[d]["start"][:COORD] for d in LOOP_DIMS)
            out["prod"] = {"c": (c_s * plane)[:A], "y": (y_s * row_step)[:A], "x": (x_s * sx)[:A],
                           "k": (k_s * crs)[:A], "cw": (c_s * rs)[:A]}
            return out

        def spans(p):
            k_n, c_n, y_n, x_n = (p[d]["ext"] for d in LOOP_DIMS)
            pr = p["prod"]
            return {"k_n": k_n, "c_n": c_n,
                    "rows": span(y_n, sy, R, s.max_stride)[:COORD],      # rows x cols of c_n channels
                    "cols": span(x_n, sx, S, s.max_stride)[:COORD],      # from (c_s, y_s * sy, x_s * sx)
                    "in_base": (pr["c"] + pr["y"] + pr["x"])[:A], "w_base": (pr["k"] + pr["cw"])[:A],
                    "c_plane": (c_n * plane)[:A], "k_crs": (k_n * crs)[:A], "c_rs": (c_n * rs)[:A],
                    "w_full": c_n == C}

        def boxes(p):
            full_cols = wire(m, p["cols"] == in_cols, "in_full_cols")
            full = full_cols & (p["rows"] == in_rows)
            in_box = {"base": p["in_base"], "n_outer": Mux(full, 1, p["c_n"]), "outer_stride": plane,
                      "n_inner": Mux(full_cols, 1, p["rows"]), "inner_stride": in_cols,
                      "run": Mux(full, p["c_plane"], Mux(full_cols, p["rows"] * in_cols, p["cols"]))}
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
        l_o = Signal(COORD, name="l_outer")            # run counters: outer, inner
        l_i = Signal(COORD, name="l_inner")
        o_ofs = Signal(A, name="l_outer_ofs")          # their address offsets, counted
        i_ofs = Signal(A, name="l_inner_ofs")
        l_off = Signal(A, name="l_run_ofs")            # the chunk's offset in its run
        cur_weight = wire(m, Mux(go, ~ld.ld_in, l_weight), "cur_weight")
        box = {k: wire(m, Mux(cur_weight, w_box[k], in_box[k])[:n], f"box_{k}", n) for k, n in widths.items()}
        issuing = wire(m, (go & ld.valid & (ld.ld_in | ld.ld_w)) | (l_active & ~l_tail), "issuing")
        rel = wire(m, (o_ofs + i_ofs + l_off)[:A], "l2_rel", A)      # from the box's first word
        addr = wire(m, (box["base"] + rel)[:A], "l2_addr", A)
        remaining = wire(m, (box["run"] - l_off)[:A], "remaining", A)
        length = wire(m, Mux(remaining < W, remaining, W), "length", 8)
        for b in range(W):
            # bank b serves lane j = (b - addr) mod W
            j = (b - addr[:lg])[:lg] if W > 1 else 0
            row = wire(m, (addr + j) >> lg, f"bank{b}_row", A)
            for ports in (l2.inputs, l2.weights):
                rd = ports[b][0]
                m.d.comb += [rd.addr.eq(row), rd.en.eq(1)]
        last_chunk = wire(m, l_off + W >= box["run"], "last_chunk")
        inner_last = wire(m, last_chunk & (l_i + 1 >= box["n_inner"]), "inner_last")
        box_done = wire(m, inner_last & (l_o + 1 >= box["n_outer"]), "box_done")
        with m.If(issuing):
            m.d.sync += l_active.eq(1)
            with m.If(~last_chunk):
                m.d.sync += l_off.eq(l_off + W)
            with m.Else():
                m.d.sync += l_off.eq(0)
                with m.If(~inner_last):
                    m.d.sync += [l_i.eq(l_i + 1), i_ofs.eq(i_ofs + box["inner_stride"])]
                with m.Else():
                    m.d.sync += [l_i.eq(0), i_ofs.eq(0)]
                    with m.If(~box_done):
                        m.d.sync += [l_o.eq(l_o + 1), o_ofs.eq(o_ofs + box["outer_stride"])]
                    with m.Else():
                        m.d.sync += [l_o.eq(0), o_ofs.eq(0)]
            with m.If(box_done):
                with m.If(~cur_weight & ld.ld_w):
                    m.d.sync += l_weight.eq(1)
                with m.Else():
                    m.d.sync += [l_tail.eq(1), l_weight.eq(0)]
            with m.Else():
                m.d.sync += l_weight.eq(cur_weight)
        with m.Elif(l_tail):
            m.d.sync += [l_tail.eq(0), l_active.eq(0)]
        # the NoC lanes, one cycle after the issue (L2 read latency)
        lane_valid = Signal(name="lane_valid")
        lane_count = Signal(8, name="lane_count")
        lane_weight = Signal(name="lane_weight")
        lane_addr = Signal(A, name="lane_addr")
        m.d.sync += [lane_valid.eq(issuing), lane_count.eq(length), lane_weight.eq(cur_weight), lane_addr.eq(addr)]
        lane_data = Signal(8 * W, name="lane_data")
        for j in range(W):
            bank = (lane_addr[:lg] + j)[:lg] if lg else 0
            word_in = Cat(*[p[0].data for p in l2.inputs]).word_select(bank, 8) if W > 1 else l2.inputs[0][0].data
            word_w = Cat(*[p[0].data for p in l2.weights]).word_select(bank, 8) if W > 1 else l2.weights[0][0].data
            m.d.comb += lane_data[8 * j: 8 * j + 8].eq(Mux(lane_weight, word_w, word_in))
        return cls(issuing, lane_valid, lane_count, lane_weight, lane_addr, lane_data, rel, in_base, w_base, strides)

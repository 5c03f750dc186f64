"""The loader and the distribution NoC.  For a step that reloads a tensor, the loader walks
that tensor's *class box* (``docs/timing.md``, "Load"; :func:`costmodel.hwgen_preset.rules.box_runs`)
as runs of consecutive L2 addresses, inputs first, then weights.  L2 holds each tensor with the
PEs' classes innermost (:func:`hwgen.layout.interleaved`), so a chunk of a run carries ``P``
consecutive words of every class's tile (``P`` the PEs' banks for the tensor), or, with more
classes than lanes, one word of ``W`` classes; every PE takes its words at lanes fixed when the
hardware is generated and writes them into its L1 at the row the loader counts.  An input spread
along ``X`` in overlapping windows goes as the union's rows, each PE aligning its window off the
lanes (:mod:`.pe`).  Addresses are counted in registers, not multiplied: each run starts one
stride after the last.  Three cycles after an issue the words are on the NoC's lanes with what
the PEs need to write them."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value

from costmodel.hwgen_preset.rules import (LOOP_DIMS, ROTATION_SPLIT_WORDS, Ingress, ingress, l1_input_fields,
                                         load_latency, slide_extent)
from costmodel.hwgen_preset.structure import HwStructure

from .common import COORD, Copies, NextState, by_stride, fanout, kept_copy, pipe, registered, rotate, span, wire
from .controller import Controller, Product
from .geometry import Geometry
from .l2 import L2

__all__ = ["Loader", "tensor_ingress"]


#: Lanes whose rotation choices share a kept copy of the rotation's amount
ROTATION_WORDS_PER_COPY = 4


def tensor_ingress(s: HwStructure) -> dict[str, Ingress]:
    """The input's and the weight's :class:`Ingress` (the PEs' banks: a window's are its columns)."""
    return {name: ingress(s, name) for name in ("input", "weight")}


@dataclass
class Loader:
    continues: Signal       # still busy next cycle (an issue is followed by its write, 4 or 5 cycles later)
    lane_data: Signal       # W words, lane j in bits [8j, 8j+8) (each PE registers them at its input)
    chunk: Copies           # what the PEs are told with the lanes (registers of the same cycle,
    #                         in copies for groups of PEs: ``chunk.of(pe)``):
    #                         "valid", "weight" (0 input, 1 weight), "row" (the L1 row the chunk's
    #                         words go to), "count" (words of each class's tile in it, 1 .. P),
    #                         "phase" (with more classes than lanes: which W of them it carries)
    chunk_early: dict       # ... a cycle before (a Y window's row and validity are worked out per class from it)
    early_len: Signal       # a window's row: lanes 0 .. early_len-1 hold words, two cycles before lane_data
    col: Signal             # a window's row: the chunk's first word's column in the row, two cycles before the lanes

    @classmethod
    def build(cls, m: Module, s: HwStructure, g: Geometry, ctl: Controller, l2: L2, abits: int) -> "Loader":
        W = s.noc_words_per_cycle
        lg = (W - 1).bit_length()
        ld, sy, sx, R, S = ctl.ld, g.stride_y, g.stride_x, g.R, g.S
        A = abits
        cfg = g.cfg
        ing = tensor_ingress(s)
        rs = g.rs
        # The class boxes of the step being loaded, registers ahead of the step in four stages
        # (Controller.ahead): the starts (and the input's in input rows and columns); the
        # extents and the starts' products with the layout's coefficients; the spans, the bases
        # and the products of the extents; the runs.
        unions = [g.union_stages(di) for di in range(4)]
        tile = {d: (g.T0[d] if s.spatial[0] == d else g.T1[d]) for d in LOOP_DIMS}

        # A sliding design (rules.slide_extent) keeps each input column x at x mod M of its L1
        # row, or each input row y at y mod M_y of its channel: an L1 row's address (in rows of
        # banks) has fields, the column (lg_c bits), the row (lg_r bits), the channel; a run's
        # first chunk goes to its first column and row, and a slide's runs start
        # S - stride_x columns after the window's start, each X_t * stride_x columns long.
        M, M_y = slide_extent(s, "X"), slide_extent(s, "Y")
        fields = dict(l1_input_fields(s))       # (in words; the loader counts rows of banks)
        sliding_in = bool(fields)
        lg_c = fields["col"] - (ing["input"].banks - 1).bit_length() if sliding_in else 0
        col_bits = max(1, lg_c)
        lg_r = max(1, fields.get("row", 0))
        slide = ctl.slide_pre

        def starts(desc):
            out = {d: unions[di][0](desc) for di, d in enumerate(LOOP_DIMS)}
            out["in_y"] = by_stride(desc.start[2], sy, s.max_stride)[:A]
            out["in_x"] = by_stride(desc.start[3], sx, s.max_stride)[:A]
            return out

        # (the layout's coefficients are below the L2 region's size: A bits of them, so that on a
        # small L2 each product is one multiplier block, 18 x 18 bits on an ECP5)
        coef = {name: cfg[name][:A] for name in ("in_sc", "in_sy", "in_sx", "w_sk", "w_sc")}

        def extents(p):
            out = {d: unions[di][1](p[d]) for di, d in enumerate(LOOP_DIMS)}
            if sliding_in:
                out["col0"] = p["in_x"][:lg_c] if M else Const(0, col_bits)
                out["row0"] = p["in_y"][:lg_r] if M_y else Const(0, lg_r)
            out["prod"] = {"c": Product(p["C"]["start"], coef["in_sc"], A),
                           "y": Product(p["in_y"], coef["in_sy"], A), "x": Product(p["in_x"], coef["in_sx"], A),
                           "k": Product(p["K"]["start"], coef["w_sk"], A), "cw": Product(p["C"]["start"], coef["w_sc"], A)}
            return out

        def box_ext(p, name, d):
            """The class box's extent along ``d``: the spread tile where the tensor interleaves
            it (a static register), else the union's (PE (0, 0)'s, or a window's union)."""
            return tile[d] if d in ing[name].interleaved else p[d]["ext"]

        # (an interleaved X or Y holds its tile in a block: 1x1 filters, stride 1)
        cols_w = tile["X"] if "X" in ing["input"].interleaved else cfg["in_cols"]
        rows_w = tile["Y"] if "Y" in ing["input"].interleaved else cfg["in_rows"]
        row_step = g.static(by_stride(cols_w, sy, s.max_stride)[:A], "in_row_step", A)
        # rows * cols_w of a box of whole rows = y_n * row_step + (R * cols_w - row_step): a
        # product in the span stage and a sum in the box stage
        filter_rows = g.static_product(R, cols_w, "in_filter_rows", A)
        rows_extra = g.static((filter_rows - row_step)[:A], "in_rows_extra", A)
        plane_w = g.static_product(rows_w, cols_w, "in_plane_w", A)
        c_w = tile["C"] if "C" in ing["weight"].interleaved else g.D["C"]
        crs_w = g.static_product(c_w, rs, "w_crs_w", A)
        # (a filter tile's words when K is interleaved: (T_K * C_w) * R * S, two multipliers deep,
        # not T_K * (C_w * R * S), three: a static register is ready by its readers' first cycle)
        k_crs = (g.static_product(g.static_product(tile["K"], c_w, "w_kc", A), rs, "w_k_crs_static", A)
                 if "K" in ing["weight"].interleaved else None)
        mode = {k: g.static(cfg["in_mode"] == k, f"in_mode{k}", 1) for k in (1, 2)}
        w_merge = g.static(cfg["w_merge"][0], "w_merge_r", 1)

        # What a chunk takes of a run, per tensor (constants of the structure): the address step,
        # the run's words it takes (of a class's tile, or of a window's row), and how many
        # chunks a word's classes take.
        def chunking(i: Ingress):
            if i.window_x:
                return {"step": W, "take": W, "phases": 1}
            if i.classes > W:
                assert i.classes % W == 0, "more classes than lanes: a multiple of them (structure check)"
                return {"step": W, "take": 1, "phases": i.classes // W}
            return {"step": i.per_pe * i.classes, "take": i.per_pe, "phases": 1}
        chunk_of = {name: chunking(i) for name, i in ing.items()}
        # (y_rows + rows_extra fits a chunk: y_rows <= take - rows_extra, when rows_extra <= take)
        rows_over = g.static(rows_extra > chunk_of["input"]["take"], "in_rows_over", 1)
        rows_room = g.static((chunk_of["input"]["take"] - rows_extra)[:A], "in_rows_room", A)
        max_phases = max(c["phases"] for c in chunk_of.values())

        def product_or_static(a, b, static_a: bool, name: str):
            return g.static_product(a, b, name, A) if static_a else Product(a, b, A)

        def spans(p):
            pr = p["prod"]
            c_in, y_n, x_n = (box_ext(p, "input", d) for d in ("C", "Y", "X"))
            k_w, c_w = (box_ext(p, "weight", d) for d in ("K", "C"))
            return {"c_in": c_in, "k_w": k_w,
                    "rows": span(y_n, sy, R, s.max_stride)[:COORD], "cols": span(x_n, sx, S, s.max_stride)[:COORD],
                    "y_rows": product_or_static(y_n, row_step, "Y" in ing["input"].interleaved, "in_y_rows"),
                    "c_plane": product_or_static(c_in, plane_w, "C" in ing["input"].interleaved, "in_c_plane"),
                    "k_crs": k_crs if k_crs is not None else Product(k_w, crs_w, A),
                    "c_rs": product_or_static(c_w, rs, "C" in ing["weight"].interleaved, "w_c_rs"),
                    "in_base": (pr["c"] + pr["y"] + pr["x"])[:A], "w_base": (pr["k"] + pr["cw"])[:A],
                    "in_phases": phases(p, "input"), "w_phases": phases(p, "weight"),
                    **({"col0": p["col0"], "new_cols": by_stride(x_n, sx, s.max_stride)[:COORD],
                        "row0": p["row0"], "new_rows": by_stride(y_n, sy, s.max_stride)[:COORD]} if sliding_in else {})}

        def phases(p, name):
            """The chunks a word takes in the step (rules.active_phases): with more classes than
            lanes and one interleaved dimension, 1 + how many multiples of W tiles its union
            passes (comparisons with static registers, no division)."""
            i, n = ing[name], chunk_of[name]["phases"]
            if n == 1 or len(i.interleaved) != 1:
                return Const(n, range(max_phases + 1))
            d = i.interleaved[0]
            lv = s.spatial.index(d)
            over = [p[d]["ext"] > g.scaled(lv, d, k * W) for k in range(1, n)]
            return (1 + sum(Value.cast(o) for o in over))[:len(Const(max_phases, range(max_phases + 1)))]

        def boxes(p):
            # runs are counted in words of a class's tile (L2 holds `classes` times as many)
            m1, m2 = mode[1], mode[2]
            in_box = {"base": p["in_base"], "n_outer": Mux(m2, 1, p["c_in"]), "n_inner": Mux(m1 | m2, 1, p["rows"]),
                      "run": Mux(m2, p["c_plane"], Mux(m1, p["y_rows"] + rows_extra, p["cols"])),
                      "col0": Const(0, col_bits), "row0": Const(0, lg_r),
                      # (whether the run fits a chunk, compared on each choice: no sum first)
                      "run_fits": Mux(m2, fit(p["c_plane"], "input"),
                                      Mux(m1, ~rows_over & (p["y_rows"] <= rows_room), fit(p["cols"], "input")))}
            if sliding_in:      # (a sliding design's input: a row a run, in_mode 0)
                ofs, col0, row0 = Const(0, A), p["col0"], p["row0"]
                if M:
                    ofs = Mux(slide["X"], slide_ofs["X"], ofs)
                    in_box["run"] = Mux(slide["X"], p["new_cols"], p["cols"])
                    in_box["run_fits"] = Mux(slide["X"], fit(p["new_cols"], "input"), fit(p["cols"], "input"))
                    col0 = Mux(slide["X"], col0 + slide_first["X"], col0)
                if M_y:
                    ofs = Mux(slide["Y"], slide_ofs["Y"], ofs)
                    in_box["n_inner"] = Mux(slide["Y"], p["new_rows"], p["rows"])
                    row0 = Mux(slide["Y"], row0 + slide_first["Y"], row0)
                in_box.update(base=p["in_base"] + ofs, col0=col0, row0=row0)
            w_box = {"base": p["w_base"], "n_outer": Mux(w_merge, 1, p["k_w"]), "n_inner": Const(1, COORD),
                     "run": Mux(w_merge, p["k_crs"], p["c_rs"]), "col0": Const(0, col_bits), "row0": Const(0, lg_r),
                     "run_fits": Mux(w_merge, fit(p["k_crs"], "weight"), fit(p["c_rs"], "weight"))}
            for box, name, key in ((in_box, "input", "in_phases"), (w_box, "weight", "w_phases")):
                c = chunk_of[name]
                box["phases"] = p[key]
                # (the address after a word's last chunk: past the chunks of the classes left out)
                box["wrap"] = (Array([Const((c["phases"] + 1 - q) * W, A) for q in range(max_phases + 1)])[p[key]]
                               if c["phases"] > 1 else Const(c["step"], A))
            out = {f"{t}_{k}": Value.cast(box[k])[:n] for t, box in zip(("in", "w"), (in_box, w_box))
                   for k, n in widths.items()}
            # and its flags (a run of one chunk, one inner run, one outer run), taken with it at
            # the shift, so at go the walk's first flags are registers, not compares
            # (a run of one chunk: its words fit one chunk and, with more classes than lanes,
            # there is one phase)
            for t, box in (("in", in_box), ("w", w_box)):
                out.update({f"{t}_fits": box["run_fits"] & (out[f"{t}_phases"] == 1),
                            f"{t}_one_inner": out[f"{t}_n_inner"] == 1, f"{t}_one_outer": out[f"{t}_n_outer"] == 1,
                            f"{t}_two_inner": out[f"{t}_n_inner"] == 2, f"{t}_two_outer": out[f"{t}_n_outer"] == 2})
            return out

        FLAGS = ("fits", "one_inner", "one_outer")
        MORE_FLAGS = ("two_inner", "two_outer")

        def fit(run, name):
            return run <= chunk_of[name]["take"]

        widths = {"base": A, "n_outer": COORD, "n_inner": COORD, "run": A, "phases": len(Const(max_phases, range(max_phases + 1))),
                  "wrap": A, "col0": col_bits, "row0": lg_r}
        # (a slide's first new column (row): S - stride_x (R - stride_y) after the window's start,
        # in columns (rows) and in L2 words, static registers; the difference is 1 .. S - 1 where
        # the window slides: a choice of the coefficient's constant multiples, no multiplier)
        slide_first, slide_ofs = {}, {}
        for d, filt, stride, fits, c in (("X", S, sx, M, "in_sx"), ("Y", R, sy, M_y, "in_sy")):
            if fits:
                bits = lg_c if d == "X" else lg_r
                slide_first[d] = g.static((filt - stride)[:bits], f"slide_first_{d}", bits)
                most = s.pe_tile_max["S" if d == "X" else "R"] - 1
                slide_ofs[d] = g.static(by_stride(coef[c], (filt - stride)[:COORD], most)[:A], f"slide_ofs_{d}", A)
        both = ctl.ahead(m, "ld", "box", starts, extents, spans, boxes)
        in_box = {k: both[f"in_{k}"] for k in (*widths, *FLAGS, *MORE_FLAGS)}
        w_box = {k: both[f"w_{k}"] for k in (*widths, *FLAGS, *MORE_FLAGS)}
        # the runs' strides: in L2 words (the layout's), and in rows of the PEs' L1 banks
        l1_shift = {name: (i.banks - 1).bit_length() for name, i in ing.items()}
        in_box.update(outer_stride=cfg["in_run_ch"][:A], inner_stride=cfg["in_run_row"][:A],
                      outer_row=g.static(cfg["l1_in_ch"] >> l1_shift["input"], "l1_in_ch_rows", COORD),
                      inner_row=g.static(cfg["l1_in_row"] >> l1_shift["input"], "l1_in_row_rows", COORD))
        w_box.update(outer_stride=cfg["w_run_k"][:A], inner_stride=Const(0, A),
                     outer_row=g.static(cfg["l1_w_k"] >> l1_shift["weight"], "l1_w_k_rows", COORD),
                     inner_row=Const(0, COORD))

        l_tail = Signal(name="l_tail")
        l_active = Signal(name="l_active")
        l_weight = Signal(name="l_weight")
        # The walk, counted in registers: the chunk's L2 address, the same for the first word of
        # its run and of its outer run, the L1 row likewise, the words left in the run, the
        # phase, the chunk's column in the run, and the inner and outer runs left.  They take the
        # step's first box at ``go`` (a cycle before the first issue), so an issue's address is
        # a register, not a sum.
        a_r, run_a_r, out_a_r, rem_r = (Signal(A, name=n) for n in ("l2_addr", "l_run_addr", "l_out_addr", "remaining"))
        row_r, run_row_r, out_row_r = (Signal(COORD, name=n) for n in ("l1_row", "l_run_row", "l_out_row"))
        col_r = Signal(A, name="l_col")
        y_r = Signal(COORD, name="l_y")             # the run's row of the union in its channel (a Y window's)
        ph_r = Signal(range(max(2, max_phases)), name="l_phase")
        il_r, ol_r = Signal(COORD, name="l_inner_left"), Signal(COORD, name="l_outer_left")
        box = {k: wire(m, Mux(l_weight, w_box[k], in_box[k])[:len(in_box[k])], f"box_{k}")
               for k in ("base", "n_outer", "n_inner", "run", "outer_stride", "inner_stride", "outer_row", "inner_row",
                         "phases", "wrap", "col0", "row0")}
        issuing = Signal(name="issuing")         # (l_active & ~l_tail, a register: below)
        # (a window's row is one run, written into one L1 row)
        in_window = wire(m, ~l_weight if ing["input"].window_x else Const(0, 1), "l_in_window")
        step = wire(m, Mux(l_weight, chunk_of["weight"]["step"], chunk_of["input"]["step"]), "l_step", range(W + 1))
        take = wire(m, Mux(l_weight, chunk_of["weight"]["take"], chunk_of["input"]["take"]), "l_take", range(W + 1))
        last_phase = wire(m, box["phases"] - 1 == ph_r, "l_last_phase")
        # where the walk is (the run's last chunk; the last inner run; the last outer run),
        # registers worked out as the counters move, and which way it goes after this issue
        last_chunk, il_zero, ol_zero = (Signal(name=n) for n in ("last_chunk", "l_inner_zero", "l_outer_zero"))
        # (and whether the inner or outer runs left are one: the flags' values after a move,
        # registers, not compares of the counters in the moves' next-state logic)
        il_one, ol_one = Signal(name="l_inner_one"), Signal(name="l_outer_one")
        next_run, next_outer, box_end = (Signal(name=n) for n in ("l_next_run", "l_next_outer", "l_box_end"))
        # The walk's moves at an issue (the run's next chunk, the next run, the next outer run,
        # the box's end) are registers worked out a cycle ahead from those flags' next values
        # (NextState), so the counters' and the address copies' updates choose by a register,
        # not by logic of the flags after them; each address copy has its own copies of them.
        nx = NextState(m, [l_active, l_tail, l_weight, rem_r, ph_r, last_chunk, next_run, next_outer, box_end])
        issuing_next = wire(m, nx[l_active] & ~nx[l_tail], "l_issuing_next")
        m.d.sync += issuing.eq(issuing_next)
        move_next = {k: wire(m, issuing_next & v, f"l_move_{k}_next") for k, v in (
            ("chunk", ~nx[last_chunk]), ("run", nx[next_run]), ("outer", nx[next_outer]), ("box", nx[box_end]))}
        move = {k: registered(m, v, f"l_move_{k}") for k, v in move_next.items()}

        def place(row, col0=0, row0=0):
            """An L1 row of a sliding design's input: ``row`` (whose column and row fields are 0,
            or its row field the run's row) with the first column ``col0`` (and row ``row0``)."""
            if not sliding_in:
                return row
            col = Value.cast(col0)
            col = Cat(col, Const(0, max(0, lg_c - len(col))))[:lg_c]
            return row | Cat(col, row0)

        def next_row(row, step):
            """The L1 row ``step`` rows of the channel after ``row``: its row field counted modulo
            M_y in a design whose windows slide along Y."""
            if not M_y:
                return (row + step)[:COORD]
            lo, hi = lg_c, lg_c + lg_r
            wrapped = Cat(row[:lo], (row[lo:hi] + step[lo:hi])[:lg_r], row[hi:])
            return Mux(l_weight, row + step, wrapped)[:COORD]

        def restart(a, rem, row, il, ol, last, il0, ol0, il1, ol1, y=0, col0=0):
            return [a_r.eq(a), rem_r.eq(rem), row_r.eq(place(row, col0)), ph_r.eq(0), col_r.eq(0), il_r.eq(il), ol_r.eq(ol), y_r.eq(y),
                    last_chunk.eq(last), il_zero.eq(il0), ol_zero.eq(ol0), il_one.eq(il1), ol_one.eq(ol1),
                    next_run.eq(last & ~il0), next_outer.eq(last & il0 & ~ol0), box_end.eq(last & il0 & ol0)]

        # (the boxes' flags: registers of the step, taken with its boxes at the shift)
        fits, one_inner = (Mux(l_weight, w_box[k], in_box[k]) for k in ("fits", "one_inner"))

        def first(bx):
            start_row = place(Const(0, COORD), 0, bx["row0"])
            return restart(bx["base"], bx["run"], start_row, bx["n_inner"] - 1, bx["n_outer"] - 1,
                           *(bx[k] for k in FLAGS), bx["two_inner"], bx["two_outer"], col0=bx["col0"]) + [
                run_a_r.eq(bx["base"]), out_a_r.eq(bx["base"]), run_row_r.eq(start_row), out_row_r.eq(start_row)]
        # Whether the chunk after the next move is the run's last (last_of), for each tensor
        # (its take a constant), then the one loading chosen: a register of last_of on the words
        # left, the phase and the tensor as they will be, so that the move's flags take a
        # register, not a compare of the counters (the step's boxes do not change while it
        # loads: they are its registers from before go).  Worked out for each way the walk
        # moves, from registers, then chosen by the move (registers too): no subtraction and
        # choice of the words left before the compares
        starts_load = ctl.go_load
        to_weights = wire(m, ~l_weight & ld.ld_w, "l_to_weights")

        def last_of(name, bx, rem, ph):
            """Whether the chunk after the one at (``rem`` words left in the run, phase ``ph``)
            of tensor ``name``'s box ``bx`` is the run's last: the word's last phase of the run's
            last words (compared before the subtraction: rem - take <= take is rem <= 2 take)."""
            tk = chunk_of[name]["take"]
            return Mux(bx["phases"] - 1 == ph, (rem <= 2 * tk) & (bx["phases"] == 1),
                       (rem <= tk) & (ph + 2 == bx["phases"]))

        def within(rem, tk, bound):
            """(rem - tk) mod 2**A <= bound, as two compares of ``rem``."""
            return (rem >= tk) & (rem <= tk + bound)
        by_tensor = {}
        for name, bx in (("weight", w_box), ("input", in_box)):
            tk, P = chunk_of[name]["take"], bx["phases"]
            by_tensor[name] = {
                "stay": last_of(name, bx, rem_r, ph_r),
                # (the word's next phase: P - 1 == ph + 1 leaves P >= 2, so the first case is 0)
                "phase": (rem_r <= tk) & (ph_r + 3 == P),
                # (the next words, phase 0)
                "words": ((P == 1) & within(rem_r, tk, 2 * tk)) | ((P == 2) & within(rem_r, tk, tk)),
                # (the box's first chunk: its run left, phase 0; from the box's registers, not a
                # flag of the box's stage, which follows the multipliers' products)
                "restart": last_of(name, bx, bx["run"], 0)}
        cur = {k: Mux(l_weight, by_tensor["weight"][k], by_tensor["input"][k]) for k in by_tensor["input"]}
        last_next = Signal(name="l_last_next")
        with m.If(starts_load):
            m.d.sync += last_next.eq(Mux(ld.ld_in, by_tensor["input"]["restart"], by_tensor["weight"]["restart"]))
        with m.Elif(move["box"]):
            m.d.sync += last_next.eq(Mux(to_weights, by_tensor["weight"]["restart"], by_tensor["input"]["stay"]))
        with m.Elif(move["run"] | move["outer"]):
            m.d.sync += last_next.eq(cur["restart"])
        with m.Elif(move["chunk"]):
            m.d.sync += last_next.eq(Mux(last_phase, cur["words"], cur["phase"]))
        with m.Else():
            m.d.sync += last_next.eq(cur["stay"])
        # the run's next chunk: the next phase of the word, or the next words
        with m.If(move["chunk"]):
            more = wire(m, ~last_phase, "l_more_phases")
            rem_next = wire(m, Mux(more, rem_r, rem_r - take), "l_rem_next", A)
            # (a sliding design's input row: the next column, modulo M)
            row_next = (Mux(l_weight, row_r + 1, Cat((row_r[:lg_c] + 1)[:lg_c], row_r[lg_c:])) if M
                        else row_r + 1)
            m.d.sync += [a_r.eq(a_r + Mux(more, step, box["wrap"])), col_r.eq(col_r + W),
                         row_r.eq(Mux(more | in_window, row_r, row_next))]
            nx += [rem_r.eq(rem_next), ph_r.eq(Mux(more, ph_r + 1, 0))]
            nx += [last_chunk.eq(last_next), next_run.eq(last_next & ~il_zero),
                   next_outer.eq(last_next & il_zero & ~ol_zero), box_end.eq(last_next & il_zero & ol_zero)]
        with m.If(move["run"]):                     # the next run
            nxt_a, nxt_row = run_a_r + box["inner_stride"], next_row(run_row_r, box["inner_row"])
            nx += restart(nxt_a, box["run"], nxt_row, il_r - 1, ol_r, fits, il_one, ol_zero, il_r == 2, ol_one, y_r + 1,
                          col0=box["col0"])
            m.d.sync += [run_a_r.eq(nxt_a), run_row_r.eq(nxt_row)]
        with m.If(move["outer"]):                   # the next outer run
            nxt_a, nxt_row = out_a_r + box["outer_stride"], out_row_r + box["outer_row"]
            nx += restart(nxt_a, box["run"], nxt_row, box["n_inner"] - 1, ol_r - 1, fits, one_inner, ol_one,
                          Mux(l_weight, w_box["two_inner"], in_box["two_inner"]), ol_r == 2,
                          col0=box["col0"])
            m.d.sync += [run_a_r.eq(nxt_a), out_a_r.eq(nxt_a), run_row_r.eq(nxt_row), out_row_r.eq(nxt_row)]
        with m.If(move["box"] & to_weights):        # the weight box next
            nx += first(w_box) + [l_weight.eq(1)]
        with m.If(move["box"] & ~to_weights):       # the end
            nx += [l_tail.eq(1), l_weight.eq(0)]
        with m.If(l_tail):
            nx += [l_tail.eq(0), l_active.eq(0)]
        with m.If(starts_load):                     # the step's first box: inputs, else weights
            nx += [l_active.eq(1), l_weight.eq(~ld.ld_in)]
            with m.If(ld.ld_in):
                nx += first(in_box)
            with m.Else():
                nx += first(w_box)
        # Bank b serves lane (b - addr) mod W: the word at addr + that, in row hi or hi + 1 (hi
        # = addr // W), worked out beside the bank from a kept copy of the chunk's address (one
        # for each eight banks, common.Copies), which takes the same updates as l2_addr (in the
        # same order: the last assignment above wins), its own sum included; from l2_addr
        # itself, the rows' compares (Yosys shares them between the banks) and adds lay on
        # wires across the device
        def copy_updates(mv):
            return lambda q: [(starts_load & ld.ld_in, in_box["base"]), (starts_load, w_box["base"]),
                              (mv["box"] & to_weights, w_box["base"]),
                              (mv["outer"], (out_a_r + box["outer_stride"])[:A]),
                              (mv["run"], (run_a_r + box["inner_stride"])[:A]),
                              (mv["chunk"], (q + Mux(last_phase, box["wrap"], step))[:A])]
        # A NoC wider than ROTATION_SPLIT_WORDS registers each bank's row beside the bank: its
        # banks are spread over the device, and a copy's sum
        # on one side of it and its wires to the banks on the other did not fit 10 ns on an
        # ECP5 (a cycle more: rules.load_latency)
        split = int(W > ROTATION_SPLIT_WORDS)
        moves_near = Copies(W, lambda i: {k: pipe(m, v, f"l_move_{k}_{i}") for k, v in move_next.items()})
        a_near = Copies(W, lambda i: kept_copy(m, f"l2_addr_{i}", A, copy_updates(moves_near[i])))
        # (which region the issue reads, in a kept copy beside each address copy, since an operand
        # bank holds both: L2.operand_row; l_weight's updates, the last above first)
        high_first = l2.high == "weight"
        high_near = Copies(W, lambda i: kept_copy(m, f"l_high_{i}", 1, [
            (starts_load, ld.ld_in ^ high_first), (moves_near[i]["box"], to_weights == high_first)]))
        for b in range(W):
            a = a_near.of(b)
            row = wire(m, ((a >> lg) + (b < a[:lg]))[:A] if b < W - 1 else a >> lg, f"bank{b}_row", A)
            rd = l2.operands[b][0]
            at = l2.operand_row(row, high_near.of(b))
            if split:
                at = pipe(m, at, f"bank{b}_row_r")
            m.d.comb += [rd.addr.eq(at), rd.en.eq(1)]
        # The NoC lanes, three cycles after the issue, in register stages: the L2 banks' words
        # (the banks' read latency, then a register); the words rotated to lanes (lane j carries the issue's address + j) in a register;
        # the lanes broadcast to the PEs, each of which registers them at its input and writes
        # its words into its L1 the cycle after: the broadcast's wires run from register to
        # register.  What the PEs need to write them comes with the lanes, registered alike.
        # A NoC wider than ROTATION_SPLIT_WORDS has its banks' rows registered (above) and
        # rotates in two halves, each followed by a register (its banks and lanes are spread
        # over the device, and each half's choices bring words from across it): two cycles
        # more (rules.load_latency).
        stages = 4 + 2 * split
        assert load_latency(s) == 1 + stages, "a cycle to take the box, then 4 (or 6) register stages (hwgen/loader.py)"
        window = ing["input"].window_x
        count = wire(m, Mux(rem_r < take, rem_r, take), "l_count", range(W + 1))     # (a window's: its lanes)
        now = {"valid": issuing, "weight": l_weight, "row": row_r, "count": count, "phase": ph_r, "y": y_r}
        delayed = [now]
        for k in range(1, stages - 1):
            delayed.append({key: registered(m, v, f"lane_{key}_d{k}") for key, v in delayed[-1].items()})
        # (the last stage, which the PEs register at their inputs, in copies for groups of PEs)
        to_pes = {key: fanout(m, v, f"lane_{key}_d{stages - 1}", s.num_pes, clear=key == "valid")
                  for key, v in delayed[-1].items() if key != "y"}
        chunk = Copies(s.num_pes, lambda i: {key: c[i] for key, c in to_pes.items()})
        early = delayed[stages - 3]
        early_len = registered(m, Mux(early["valid"] & ~early["weight"], early["count"], 0),
                               f"lane_len_d{stages - 2}", 8) if window else Const(0, 8)
        col = col_r
        for k in range(1, stages - 2):
            col = registered(m, col, f"l_col_d{k}", A)
        # (the issue's address and tensor when the banks' words are registered)
        addr_d = a_r
        for k in range(1, 2 + split):
            addr_d = registered(m, addr_d, f"lane_addr_d{k}", A)
        # (the lanes' words are data, without reset: the PEs write them when the lanes' valid
        # register, which the reset clears, says so)
        banked = [registered(m, l2.operands[b][0].data, f"noc_banked{b}", 8, reset_less=True) for b in range(W)]
        # lane j takes bank (address + j) mod W: the banks' words rotated (common.rotate).  The
        # choices' input (the address's low bits) in kept copies, one for each
        # ROTATION_WORDS_PER_COPY lanes (and again for the second half): one register would
        # drive 64 lanes of bytes' choices, ~4,000 LUT inputs a bit, and a copy for eight lanes
        # had 10.5 ns of wires to its choices on small (docs/fpga.md)
        lane_data = Signal(8 * W, name="lane_data", reset_less=True)
        lg_w = (W - 1).bit_length()
        sel = [pipe(m, addr_d[:max(1, lg_w)], f"lane_sel_d{2 + split}_{i}")
               for i in range(max(1, W // ROTATION_WORDS_PER_COPY))]
        if split:
            half = (lg_w + 1) // 2
            mid = rotate(m, banked, [c[:lg_w] for c in sel], "lane_rot", 8, stages=range(half))
            mid = [registered(m, w, f"lane_mid{j}", 8, reset_less=True) for j, w in enumerate(mid)]
            sel2 = [pipe(m, c[:lg_w], f"lane_sel_d{3 + split}_{i}") for i, c in enumerate(sel)]
            m.d.sync += lane_data.eq(Cat(*rotate(m, mid, sel2, "lane_rot", 8, stages=range(half, lg_w))))
        else:
            m.d.sync += lane_data.eq(Cat(*rotate(m, banked, [c[:lg_w] for c in sel], "lane_rot", 8)))
        # Busy next cycle, a register: a box taken at the next go (the shift now), an issue
        # next cycle (one now that is not the last, or the box taken now), or one in flight
        last_issue = wire(m, box_end & (l_weight | ~ld.ld_w), "l_last_issue")
        # (issuing_next's value from registers alone, not through the walk's next-state logic:
        # continues_next goes to the controller's copies across the device)
        issues_next = starts_load | (issuing & ~last_issue)
        continues_next = wire(m, ctl.go_next["load"] | issues_next | issuing
                              | Cat(*[d["valid"] for d in delayed[1:]]).any(), "l_continues_next")
        loader = cls(registered(m, continues_next, "l_continues"), lane_data, chunk, delayed[-1], early_len, col)
        loader.continues_next = continues_next      # (for the controller's copies of the register)
        return loader

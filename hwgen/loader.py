"""The loader and the multicast distribution NoC.  For a step that reloads a tensor, the loader
walks that tensor's union box over all PEs (inputs first, then weights), row by row, ``W``
consecutive words a cycle read from the interleaved L2 banks; one cycle later the words are on
the NoC's lanes with the coordinates of lane 0, and every PE whose tile holds a word captures it
in that cycle (:mod:`.pe`): the multicast, and the halo shared by overlapping windows."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal

from costmodel.hwgen_preset.rules import input_span
from costmodel.hwgen_preset.structure import HwStructure

from .controller import Controller
from .geometry import Geometry
from .l2 import L2
from .pe import COORD, wire

__all__ = ["Loader"]


@dataclass
class Loader:
    continues: Signal       # still busy next cycle (an issue now is followed by its capture)
    lane_valid: Signal      # the lanes carry words this cycle
    lane_count: Signal      # how many (lanes 0 .. count-1)
    lane_weight: Signal     # which tensor: 0 input, 1 weight
    lane_coord: list        # lane 0's coordinates (input: -, C, row, col; weight: K, C, R, S)
    lane_data: Signal       # W words, lane j in bits [8j, 8j+8)

    @classmethod
    def build(cls, m: Module, s: HwStructure, g: Geometry, ctl: Controller, l2: L2) -> "Loader":
        W = s.noc_words_per_cycle
        lg = (W - 1).bit_length()
        ld, go, sy, sx, R, S = ctl.ld, ctl.go, g.stride_y, g.stride_x, g.R, g.S
        ub = [g.union(ld, di) for di in range(4)]
        (k_s, k_n), (c_s, c_n), (y_s, y_n), (x_s, x_n) = ub
        in_box_start = [Const(0, COORD), c_s, wire(m, (y_s * sy)[:COORD], "in_y0"), wire(m, (x_s * sx)[:COORD], "in_x0")]
        in_box_ext = [Const(1, COORD), c_n, wire(m, input_span(y_n, sy, R)[:COORD], "in_yn"),
                      wire(m, input_span(x_n, sx, S)[:COORD], "in_xn")]
        w_box_start = [k_s, c_s, Const(0, COORD), Const(0, COORD)]
        w_box_ext = [k_n, c_n, R, S]
        l_active = Signal(name="l_active")
        l_tail = Signal(name="l_tail")
        l_weight = Signal(name="l_weight")
        l_cnt = [Signal(COORD, name=f"l_cnt{i}") for i in range(4)]
        cur_weight = wire(m, Mux(go, ~ld.ld_in, l_weight), "cur_weight")
        box_start = [wire(m, Mux(cur_weight, a, b), f"box_start{i}", COORD)
                     for i, (a, b) in enumerate(zip(w_box_start, in_box_start))]
        box_ext = [wire(m, Mux(cur_weight, a, b), f"box_ext{i}", COORD)
                   for i, (a, b) in enumerate(zip(w_box_ext, in_box_ext))]
        issuing = wire(m, (go & ld.valid & (ld.ld_in | ld.ld_w)) | (l_active & ~l_tail), "issuing")
        coord = [wire(m, (a + b)[:COORD], f"coord{i}", COORD) for i, (a, b) in enumerate(zip(box_start, l_cnt))]
        # linear L2 address of lane 0
        in_addr = (coord[1] * g.cfg["in_rows"] + coord[2]) * g.cfg["in_cols"] + coord[3]
        w_addr = ((coord[0] * g.D["C"] + coord[1]) * R + coord[2]) * S + coord[3]
        addr = Signal(32, name="l2_addr")
        m.d.comb += addr.eq(Mux(cur_weight, w_addr, in_addr))
        remaining = wire(m, (box_ext[3] - l_cnt[3])[:COORD], "remaining")
        length = wire(m, Mux(remaining < W, remaining, W), "length")
        for b in range(W):
            # bank b serves lane j = (b - addr) mod W
            j = (b - addr[:lg])[:lg] if W > 1 else 0
            row = wire(m, (addr + j) >> lg, f"bank{b}_row", 32)
            for ports in (l2.inputs, l2.weights):
                rd = ports[b][0]
                m.d.comb += [rd.addr.eq(row), rd.en.eq(1)]
        # advance the box counters
        last_chunk = wire(m, l_cnt[3] + W >= box_ext[3], "last_chunk")
        wraps = [last_chunk]
        for i in (2, 1, 0):
            wraps.append(wire(m, wraps[-1] & (l_cnt[i] + 1 >= box_ext[i]), f"wrap{i}"))
        box_done = wraps[-1]
        with m.If(issuing):
            m.d.sync += l_active.eq(1)
            with m.If(~last_chunk):
                m.d.sync += l_cnt[3].eq(l_cnt[3] + W)
            with m.Else():
                m.d.sync += l_cnt[3].eq(0)
                for i, w in zip((2, 1, 0), wraps[:3]):
                    with m.If(w & ~(l_cnt[i] + 1 >= box_ext[i])):
                        m.d.sync += l_cnt[i].eq(l_cnt[i] + 1)
                    with m.Elif(w):
                        m.d.sync += l_cnt[i].eq(0)
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
        lane_coord = [Signal(COORD, name=f"lane_c{i}") for i in range(4)]
        lane_addr0 = Signal(lg or 1, name="lane_addr0")
        m.d.sync += [lane_valid.eq(issuing), lane_count.eq(length), lane_weight.eq(cur_weight),
                     lane_addr0.eq(addr[:lg] if lg else 0)]
        m.d.sync += [a.eq(b) for a, b in zip(lane_coord, coord)]
        lane_data = Signal(8 * W, name="lane_data")
        for j in range(W):
            bank = (lane_addr0 + j)[:lg] if lg else 0
            word_in = Cat(*[p[0].data for p in l2.inputs]).word_select(bank, 8) if W > 1 else l2.inputs[0][0].data
            word_w = Cat(*[p[0].data for p in l2.weights]).word_select(bank, 8) if W > 1 else l2.weights[0][0].data
            m.d.comb += lane_data[8 * j: 8 * j + 8].eq(Mux(lane_weight, word_w, word_in))
        return cls(issuing, lane_valid, lane_count, lane_weight, lane_coord, lane_data)

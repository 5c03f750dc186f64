"""The generated accelerator: host bus, banked L2, multicast distribution NoC, PE array, reduction
tree and the controller that walks the dataflow's loop nest.

Timing follows ``docs/timing.md`` (and :mod:`costmodel.hwgen_schedule`, which the ``hwgen`` cost
model preset evaluates): the loop nest is walked in *slots*; slot ``k`` loads step ``k``,
computes step ``k-1`` and drains step ``k-2``; it lasts one controller cycle plus the longest of
the three engines.
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from costmodel.hwgen_preset.structure import LOOP_DIMS, OUTPUT_DIMS, HwStructure

from .pe import COORD, PE, wire

__all__ = ["Accelerator", "CONFIG_REGS", "REGION", "CTRL"]

CONFIG_REGS = ("K", "C", "Y", "X", "R", "S", "stride", "in_rows", "in_cols",
               "t0_K", "t0_C", "t0_Y", "t0_X", "t1_K", "t1_C", "t1_Y", "t1_X")
REGION = {"ctrl": 0, "input": 1, "weight": 2, "output": 3}   # bus address bits [20:24]
CTRL = {"start": 0, "status": 1, "cycles": 2, "config": 16}  # word offsets in the ctrl region


@dataclass(frozen=True)
class _Desc:
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


def _desc(name: str) -> _Desc:
    return _Desc(Signal(name=f"{name}_valid"),
                 [Signal(COORD, name=f"{name}_b0_{d}") for d in LOOP_DIMS],
                 [Signal(COORD, name=f"{name}_r1_{d}") for d in LOOP_DIMS],
                 Signal(name=f"{name}_bank_in"), Signal(name=f"{name}_bank_w"),
                 Signal(name=f"{name}_bank_ps"), Signal(name=f"{name}_ld_in"),
                 Signal(name=f"{name}_ld_w"), Signal(name=f"{name}_ends"))


def _min(a, b):
    return Mux(a < b, a, b)


class Accelerator(wiring.Component):
    """Top level.  ``l2_words`` gives the depth of each L2 region (input, weight: int8; output: int32)."""

    def __init__(self, structure: HwStructure, l2_words: dict[str, int]):
        self.s = structure
        self.l2_words = dict(l2_words)
        super().__init__({
            "bus_addr": In(24), "bus_wdata": In(32), "bus_we": In(1), "bus_re": In(1),
            "bus_rdata": Out(32),
            "busy": Out(1), "done": Out(1),
        })

    # ------------------------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        s = self.s
        W = s.noc_words_per_cycle
        n0, n1 = s.n0, s.n1
        cfg = {name: Signal(COORD, name=f"cfg_{name}") for name in CONFIG_REGS}
        D = {d: cfg[d] for d in LOOP_DIMS}
        T0 = {d: cfg[f"t0_{d}"] for d in LOOP_DIMS}
        T1 = {d: cfg[f"t1_{d}"] for d in LOOP_DIMS}
        st = cfg["stride"]
        R, S = cfg["R"], cfg["S"]

        running = Signal()
        done = Signal()
        cycles = Signal(32)
        m.d.comb += [self.busy.eq(running), self.done.eq(done)]

        # ---- L2: input and weight in W interleaved banks, output in one bank ---------------
        def banked(name):
            depth = max(1, -(-self.l2_words[name] // W))
            banks = []
            for b in range(W):
                mem = Memory(shape=unsigned(8), depth=depth, init=[])
                m.submodules[f"l2_{name}_{b}"] = mem
                banks.append((mem.read_port(), mem.write_port()))
            return banks
        l2_in, l2_w = banked("input"), banked("weight")
        out_mem = Memory(shape=signed(32), depth=max(1, self.l2_words["output"]), init=[])
        m.submodules.l2_output = out_mem
        out_rd, out_wr = out_mem.read_port(), out_mem.write_port()

        # ---- host bus --------------------------------------------------------------------------
        region = self.bus_addr[20:24]
        offset = self.bus_addr[:20]
        lg = (W - 1).bit_length()
        for name, banks in (("input", l2_in), ("weight", l2_w)):
            for b, (_, wr) in enumerate(banks):
                hit = self.bus_we & (region == REGION[name]) & ~running
                if W > 1:
                    hit = hit & (offset[:lg] == b)
                m.d.comb += [wr.addr.eq(offset >> lg), wr.data.eq(self.bus_wdata[:8]), wr.en.eq(hit)]
        host_out_we = self.bus_we & (region == REGION["output"]) & ~running
        region_r = Signal(4)
        ctrl_r = Signal(32)
        m.d.sync += region_r.eq(region)
        with m.If(self.bus_re & (region == REGION["ctrl"])):
            with m.Switch(offset):
                with m.Case(CTRL["status"]):
                    m.d.sync += ctrl_r.eq(Cat(running, done))
                with m.Case(CTRL["cycles"]):
                    m.d.sync += ctrl_r.eq(cycles)
                for i, name in enumerate(CONFIG_REGS):
                    with m.Case(CTRL["config"] + i):
                        m.d.sync += ctrl_r.eq(cfg[name])
        m.d.comb += self.bus_rdata.eq(Mux(region_r == REGION["output"], out_rd.data, ctrl_r))
        start = Signal()
        with m.If(self.bus_we & (region == REGION["ctrl"]) & ~running):
            with m.Switch(offset):
                with m.Case(CTRL["start"]):
                    m.d.comb += start.eq(self.bus_wdata[0])
                for i, name in enumerate(CONFIG_REGS):
                    with m.Case(CTRL["config"] + i):
                        m.d.sync += cfg[name].eq(self.bus_wdata)

        # ---- controller: odometer and the three step descriptors ---------------------------
        pos_b0 = [Signal(COORD, name=f"pos_b0_{d}") for d in LOOP_DIMS]
        pos_r1 = [Signal(COORD, name=f"pos_r1_{d}") for d in LOOP_DIMS]
        more = Signal()
        ld, cp, dr = _desc("ld"), _desc("cp"), _desc("dr")
        go = Signal()
        engines_busy = Signal()

        def tensor_differs(a_b0, a_r1, b: _Desc, dims):
            return Cat(*[(a_b0[LOOP_DIMS.index(d)] != b.b0[LOOP_DIMS.index(d)])
                         | (a_r1[LOOP_DIMS.index(d)] != b.r1[LOOP_DIMS.index(d)])
                         for d in dims]).any()

        new_in = wire(m, ~ld.valid | tensor_differs(pos_b0, pos_r1, ld, ("C", "Y", "X")), "new_in")
        new_w = wire(m, ~ld.valid | tensor_differs(pos_b0, pos_r1, ld, ("K", "C")), "new_w")
        ld_ends = wire(m, ~more | tensor_differs(pos_b0, pos_r1, ld, OUTPUT_DIMS), "ld_ends")
        cp_ends = wire(m, ~ld.valid | tensor_differs(ld.b0, ld.r1, cp, OUTPUT_DIMS), "cp_ends")
        work = wire(m, more | ld.valid | (cp.valid & cp_ends), "work")

        # advance of the odometer (combinational next position)
        nxt_b0 = [Signal(COORD, name=f"nxt_b0_{d}") for d in LOOP_DIMS]
        nxt_r1 = [Signal(COORD, name=f"nxt_r1_{d}") for d in LOOP_DIMS]
        carry = [Signal(name=f"carry{i}") for i in range(len(s.loops) + 1)]
        m.d.comb += [nxt_b0[i].eq(pos_b0[i]) for i in range(4)]
        m.d.comb += [nxt_r1[i].eq(pos_r1[i]) for i in range(4)]
        m.d.comb += carry[len(s.loops)].eq(1)
        for idx in reversed(range(len(s.loops))):
            lv, d = s.loops[idx]
            di = LOOP_DIMS.index(d)
            units = (n0 if lv == 0 else n1) if s.spatial[lv] == d else 1
            step = (T0[d] if lv == 0 else T1[d]) * units
            cur = pos_b0[di] if lv == 0 else pos_r1[di]
            nxt = nxt_b0[di] if lv == 0 else nxt_r1[di]
            end = D[d] if lv == 0 else _min(T0[d], D[d] - pos_b0[di])
            with m.If(carry[idx + 1]):
                with m.If(cur + step < end):
                    m.d.comb += nxt.eq(cur + step)
                with m.Else():
                    m.d.comb += [nxt.eq(0), carry[idx].eq(1)]

        with m.If(start):
            m.d.sync += [running.eq(1), done.eq(0), cycles.eq(0), more.eq(1),
                         ld.valid.eq(0), cp.valid.eq(0), dr.valid.eq(0), go.eq(0)]
            m.d.sync += [p.eq(0) for p in pos_b0 + pos_r1]
        with m.Elif(running):
            m.d.sync += [cycles.eq(cycles + 1), go.eq(0)]
            with m.If(~go & ~engines_busy):
                with m.If(work):
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
                        m.d.sync += more.eq(~carry[0])
                with m.Else():
                    m.d.sync += [running.eq(0), done.eq(1)]

        # ---- per-PE tiles ----------------------------------------------------------------------
        def tile(desc: _Desc, di: int, u0, u1):
            """(start, extent) of loop dim di for the PE at (u0, u1) in the step of desc."""
            d = LOOP_DIMS[di]
            tag = f"{desc.valid.name[:2]}_{d}_{u0 if isinstance(u0, int) else 'g'}_{u1 if isinstance(u1, int) else 'g'}"
            base = wire(m, desc.b0[di] + (u0 * T0[d] if s.spatial[0] == d else 0), f"{tag}_base", COORD + 1)
            start = wire(m, base + desc.r1[di] + (u1 * T1[d] if s.spatial[1] == d else 0), f"{tag}_start", COORD + 1)
            end = wire(m, _min(_min(start + T1[d], base + T0[d]), D[d]), f"{tag}_end", COORD + 1)
            ext = wire(m, Mux(end > start, end - start, 0), f"{tag}_ext", COORD)
            return start[:COORD], ext

        def union(desc: _Desc, di: int):
            d = LOOP_DIMS[di]
            start = wire(m, desc.b0[di] + desc.r1[di], f"u_{d}_start", COORD)
            if s.spatial[0] == d:
                end = _min(desc.b0[di] + n0 * T0[d], D[d])
            elif s.spatial[1] == d:
                end = _min(_min(start + n1 * T1[d], desc.b0[di] + T0[d]), D[d])
            else:
                end = _min(_min(start + T1[d], desc.b0[di] + T0[d]), D[d])
            return start, wire(m, (end - start)[:COORD], f"u_{d}_ext", COORD)

        # ---- loader: walk each reloaded tensor's union box, W words a cycle -------------------
        ub = [union(ld, di) for di in range(4)]
        (k_s, k_n), (c_s, c_n), (y_s, y_n), (x_s, x_n) = ub
        in_box_start = [Const(0, COORD), c_s, wire(m, (y_s * st)[:COORD], "in_y0"), wire(m, (x_s * st)[:COORD], "in_x0")]
        in_box_ext = [Const(1, COORD), c_n, wire(m, ((y_n - 1) * st + R)[:COORD], "in_yn"),
                      wire(m, ((x_n - 1) * st + S)[:COORD], "in_xn")]
        w_box_start = [k_s, c_s, Const(0, COORD), Const(0, COORD)]
        w_box_ext = [k_n, c_n, R, S]
        l_active = Signal()
        l_tail = Signal()
        l_weight = Signal()
        l_cnt = [Signal(COORD, name=f"l_cnt{i}") for i in range(4)]
        cur_weight = wire(m, Mux(go, ~ld.ld_in, l_weight), "cur_weight")
        box_start = [wire(m, Mux(cur_weight, a, b), f"box_start{i}", COORD)
                     for i, (a, b) in enumerate(zip(w_box_start, in_box_start))]
        box_ext = [wire(m, Mux(cur_weight, a, b), f"box_ext{i}", COORD)
                   for i, (a, b) in enumerate(zip(w_box_ext, in_box_ext))]
        issuing = wire(m, (go & ld.valid & (ld.ld_in | ld.ld_w)) | (l_active & ~l_tail), "issuing")
        coord = [wire(m, (a + b)[:COORD], f"coord{i}", COORD) for i, (a, b) in enumerate(zip(box_start, l_cnt))]
        # linear L2 address of lane 0
        in_addr = (coord[1] * cfg["in_rows"] + coord[2]) * cfg["in_cols"] + coord[3]
        w_addr = ((coord[0] * D["C"] + coord[1]) * R + coord[2]) * S + coord[3]
        addr = Signal(32)
        m.d.comb += addr.eq(Mux(cur_weight, w_addr, in_addr))
        remaining = wire(m, (box_ext[3] - l_cnt[3])[:COORD], "remaining")
        length = wire(m, Mux(remaining < W, remaining, W), "length")
        for b in range(W):
            # bank b serves lane j = (b - addr) mod W
            j = (b - addr[:lg])[:lg] if W > 1 else 0
            row = wire(m, (addr + j) >> lg, f"bank{b}_row", 32)
            for name, banks in (("input", l2_in), ("weight", l2_w)):
                rd = banks[b][0]
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
        lane_valid = Signal()
        lane_count = Signal(8)
        lane_weight = Signal()
        lane_coord = [Signal(COORD, name=f"lane_c{i}") for i in range(4)]
        lane_addr0 = Signal(lg or 1)
        m.d.sync += [lane_valid.eq(issuing), lane_count.eq(length), lane_weight.eq(cur_weight),
                     lane_addr0.eq(addr[:lg] if lg else 0)]
        m.d.sync += [a.eq(b) for a, b in zip(lane_coord, coord)]
        lane_data = Signal(8 * W)
        for j in range(W):
            bank = (lane_addr0 + j)[:lg] if lg else 0
            word_in = Cat(*[l2_in[b][0].data for b in range(W)]).word_select(bank, 8) if W > 1 else l2_in[0][0].data
            word_w = Cat(*[l2_w[b][0].data for b in range(W)]).word_select(bank, 8) if W > 1 else l2_w[0][0].data
            m.d.comb += lane_data[8 * j: 8 * j + 8].eq(Mux(lane_weight, word_w, word_in))

        # ---- compute engine: one MAC per cycle per PE over the step's tile --------------------
        cp_ext = [tile(cp, di, 0, 0)[1] for di in range(4)]
        c_active = Signal()
        simd = s.simd_lanes
        rs = wire(m, R * S, "filt_rs", COORD)
        mac = {n: Signal(COORD, name=f"mac_{n}") for n in ("k", "c", "y", "x", "f")}
        order = ["k", "c", "y", "x", "f"]
        bounds = dict(zip(order, cp_ext + [rs]))
        steps_by = {"k": 1, "c": 1, "y": 1, "x": 1, "f": simd}   # the lanes take simd filter positions
        c_issue = wire(m, (go & cp.valid) | c_active, "c_issue")
        c_wrap = [Const(1)]
        for n in reversed(order):
            c_wrap.append(wire(m, c_wrap[-1] & (mac[n] + steps_by[n] >= bounds[n]), f"c_wrap_{n}"))
        with m.If(c_issue):
            m.d.sync += c_active.eq(~c_wrap[-1])
            for i, n in enumerate(reversed(order)):
                inner = c_wrap[i]
                with m.If(inner & ~(mac[n] + steps_by[n] >= bounds[n])):
                    m.d.sync += mac[n].eq(mac[n] + steps_by[n])
                with m.Elif(inner):
                    m.d.sync += mac[n].eq(0)

        # ---- drain engine: groups x output tile, reduction tree, L2 read-modify-write --------
        red0, red1 = s.reduction_spatial
        g0 = Signal(COORD)
        g1 = Signal(COORD)
        dk, dy, dx = Signal(COORD), Signal(COORD), Signal(COORD)
        d_active = Signal()
        d_tail = Signal()

        def group_tile(gg0, gg1):
            return [tile(dr, di, gg0, gg1) for di in range(4)]

        cur = group_tile(g0, g1)
        (gk0, gkn), _, (gy0, gyn), (gx0, gxn) = cur
        g_ext = {"K": gkn, "Y": gyn, "X": gxn}

        def valid_group(gg0, gg1):
            return Cat(*[e > 0 for _, e in group_tile(gg0, gg1)]).all()

        has_g1 = not red1 and s.spatial[1] is not None and n1 > 1
        has_g0 = not red0 and s.spatial[0] is not None and n0 > 1
        next_g1_ok = ((g1 + 1 < n1) & valid_group(g0, g1 + 1)) if has_g1 else Const(0)
        next_g0_ok = ((g0 + 1 < n0) & valid_group(g0 + 1, 0)) if has_g0 else Const(0)
        d_issue = wire(m, (go & dr.valid & dr.ends) | (d_active & ~d_tail), "d_issue")
        x_last = wire(m, dx + 1 >= g_ext["X"], "x_last")
        y_last = wire(m, x_last & (dy + 1 >= g_ext["Y"]), "y_last")
        k_last = wire(m, y_last & (dk + 1 >= g_ext["K"]), "k_last")
        with m.If(d_issue):
            m.d.sync += d_active.eq(1)
            with m.If(~x_last):
                m.d.sync += dx.eq(dx + 1)
            with m.Elif(~y_last):
                m.d.sync += [dx.eq(0), dy.eq(dy + 1)]
            with m.Elif(~k_last):
                m.d.sync += [dx.eq(0), dy.eq(0), dk.eq(dk + 1)]
            with m.Else():
                m.d.sync += [dx.eq(0), dy.eq(0), dk.eq(0)]
                with m.If(next_g1_ok):
                    m.d.sync += g1.eq(g1 + 1)
                with m.Elif(next_g0_ok):
                    m.d.sync += [g1.eq(0), g0.eq(g0 + 1)]
                with m.Else():
                    m.d.sync += [g0.eq(0), g1.eq(0), d_tail.eq(1)]
        with m.Elif(d_tail):
            m.d.sync += [d_tail.eq(0), d_active.eq(0)]
        t = s.pe_tile_max
        dr_local = wire(m, (dk * t["Y"] + dy) * t["X"] + dx, "dr_local", COORD)
        out_addr = wire(m, ((gk0 + dk) * D["Y"] + gy0 + dy) * D["X"] + gx0 + dx, "out_addr", 32)
        # reduction tree over the PEs of the current group
        psums = []
        pes = []
        for u0 in range(n0):
            for u1 in range(n1):
                pe = PE(t, s.max_stride, W, s.simd_lanes)
                m.submodules[f"pe_{u0}_{u1}"] = pe
                pes.append((u0, u1, pe))
                in_group = Const(1)
                if not red0 and s.spatial[0] is not None:
                    in_group = in_group & (g0 == u0)
                if not red1 and s.spatial[1] is not None:
                    in_group = in_group & (g1 == u1)
                psums.append(Mux(in_group, pe.psum, 0))
                m.d.comb += [pe.dr_en.eq(d_issue & in_group), pe.dr_bank.eq(dr.bank_ps),
                             pe.dr_addr.eq(dr_local)]
        while len(psums) > 1:
            psums = [wire(m, (psums[i] + psums[i + 1])[:32].as_signed(), "red", signed(32))
                     if i + 1 < len(psums) else psums[i] for i in range(0, len(psums), 2)]
        value_r = Signal(signed(32))
        addr_r = Signal(32)
        write_r = Signal()
        m.d.sync += [value_r.eq(psums[0]), addr_r.eq(out_addr), write_r.eq(d_issue)]
        m.d.comb += [out_rd.addr.eq(Mux(running, out_addr, offset)), out_rd.en.eq(1)]
        m.d.comb += [out_wr.addr.eq(Mux(running, addr_r, offset)),
                     out_wr.data.eq(Mux(running, out_rd.data + value_r, self.bus_wdata)),
                     out_wr.en.eq(Mux(running, write_r, host_out_we))]

        # ---- PE wiring -------------------------------------------------------------------------
        for u0, u1, pe in pes:
            (lk0, lkn), (lc0, lcn), (ly0, lyn), (lx0, lxn) = [tile(ld, di, u0, u1) for di in range(4)]
            m.d.comb += [
                pe.lane_valid.eq(lane_valid), pe.lane_count.eq(lane_count), pe.lane_weight.eq(lane_weight),
                pe.lane_a.eq(lane_coord[0]), pe.lane_b.eq(lane_coord[1]),
                pe.lane_c.eq(lane_coord[2]), pe.lane_d.eq(lane_coord[3]), pe.lane_data.eq(lane_data),
                pe.ld_bank_in.eq(ld.bank_in), pe.ld_bank_w.eq(ld.bank_w),
                pe.ld_k0.eq(lk0), pe.ld_kn.eq(lkn), pe.ld_c0.eq(lc0), pe.ld_cn.eq(lcn),
                pe.ld_y0.eq(ly0 * st), pe.ld_yn.eq(Mux(lyn > 0, (lyn - 1) * st + R, 0)),
                pe.ld_x0.eq(lx0 * st), pe.ld_xn.eq(Mux(lxn > 0, (lxn - 1) * st + S, 0)),
                pe.mac_en.eq(c_issue), pe.stride.eq(st),
                pe.cp_bank_in.eq(cp.bank_in), pe.cp_bank_w.eq(cp.bank_w), pe.cp_bank_ps.eq(cp.bank_ps),
            ]
            m.d.comb += [getattr(pe, f"mac_{n}").eq(mac[n]) for n in order]
            m.d.comb += [pe.filt_s.eq(S), pe.filt_rs.eq(rs)]
            ext = [tile(cp, di, u0, u1)[1] for di in range(4)]
            m.d.comb += [pe.cp_kn.eq(ext[0]), pe.cp_cn.eq(ext[1]), pe.cp_yn.eq(ext[2]), pe.cp_xn.eq(ext[3])]

        m.d.comb += engines_busy.eq(l_active | c_active | d_active)
        return m

"""One processing element: double-buffered L1 scratchpads for its input and weight tiles in LUT
RAM, a double-buffered partial-sum tile (in LUT RAM too when it holds two or more of the drain's
runs), and an int8 x int8 -> int32 multiply-accumulate.

The PE is the part the array replicates, so it holds only what differs from PE to PE; every
quantity that is the same for a whole class of PEs is computed once in the top level and
broadcast (:mod:`.accelerator`):

- **load**: L2 holds each tensor with the PEs' classes innermost (``docs/timing.md``, "Load"),
  so the words of a NoC chunk that a PE takes sit at lanes fixed when the hardware is
  generated: the top level wires those lanes to the PE (``in_taps``, ``w_taps``: ``P`` words,
  the PE's banks for the tensor), with the L1 row the loader counts, how many of them the chunk
  holds and whether the chunk is the PE's (its tensor; with more classes than lanes, its
  phase).  The PE registers them at its input and writes its banks in the next cycle: an
  addressed write, one row a chunk.  An input spread along ``X`` in overlapping windows (``xp``)
  comes as the union's rows instead: the PE aligns its window off the lanes
  (:func:`align_row`), told a cycle before where it falls (``win_near``, ``win_lo``, once per
  class), and writes the words inside its window.
- **compute**: the compute engine broadcasts the L1 addresses of the SIMD lanes' operands and of
  the partial sum, and a per-PE enable that is already masked by the PE's own tile; the PE
  registers them at its input, reads its banks' row (LUT RAM reads as it is addressed) and
  chooses the bank.
- **drain**: reads (and clears) up to ``drain_lanes`` consecutive partial sums of a row a cycle
  into the reduction tree (``HwStructure.drain_lanes``: few, so that a large tile sits in memories
  one LUT RAM cell deep).
"""

import functools
import operator
from types import SimpleNamespace

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, ResetSignal, Signal, Value, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from amaranth.lib.memory import Memory

from costmodel.hwgen_preset.rules import TIMING, ingress, input_span, l1_shape, l1_words

from .common import multiply, pipe, registered, wire

__all__ = ["PE", "PE_MODULE", "PSUM_RAM_MIN_ROWS", "align_row", "pe_instance", "pick", "row_window", "shifts_rows"]

#: The Verilog module name of the PE: every position of the array is an instance of it.
PE_MODULE = "accelgen_pe"

#: Rows of drain runs (words / drain lanes) from which a PE keeps its partial sums in LUT RAM, a
#: memory for each buffer and lane, instead of a register each.
PSUM_RAM_MIN_ROWS = 2


def row_window(cols: int, lanes: int) -> int:
    """Bits of a row's lane window: the row's first word sits at lane ``v - (cols - 1)`` with
    ``0 <= v < lanes + cols - 1`` when any of its ``cols`` words is on the ``lanes`` lanes."""
    return max(1, (lanes + cols - 1).bit_length())


def shifts_rows(W: int, n: int) -> bool:
    """Whether :func:`align_row` aligns a row of ``n`` words off ``W`` lanes with a logarithmic
    shifter (else a ``W``:1 mux per word, the smaller for short lanes)."""
    bits = row_window(n, W)
    return n * (W - 1) > sum(min(n + 2 ** b - 1, n - 1 + W) for b in range(bits))


def align_row(m: Module, lanes, W: int, n: int, q_next, tag: str) -> list:
    """The ``n`` words ``ext[q + i]`` (``i < n``) of ``ext`` = ``n - 1`` zero words followed by
    the ``W`` lanes of ``lanes`` (the PE's register of them): a row whose first word is on lane
    ``q - (n - 1)``, aligned; ``q`` is ``q_next`` registered (the shift is worked out a cycle
    before the lanes).

    With short lanes (:func:`shifts_rows` false) each word is a ``W``:1 mux.  Otherwise it is a
    logarithmic shifter with only the outputs each stage needs (stage ``b``, bit ``b`` of ``q``,
    from the output side, keeps ``n + 2**b - 1`` words: about ``n * log2(W) + 2 * W`` two-input
    muxes a bit instead of ``n * (W - 1)``; W = 64, n = 16: 240 against 1,008).  Each bit of the
    words is shifted by its own kept copy of the shift: the eight bit planes are separate
    networks, so no register selects all of a wide stage's muxes."""
    ext = [Const(0, 8)] * (n - 1) + [lanes[8 * j: 8 * j + 8] for j in range(W)]
    bits = row_window(n, W)
    need = [n + 2 ** b - 1 for b in range(bits + 1)]
    if W == 1:
        return [lanes[:8].as_signed()] * n
    if not shifts_rows(W, n):
        # short lanes: a W:1 mux per word is the smaller (a word off the lanes reads some
        # lane: it is not written)
        lane_bits = max(1, (W - 1).bit_length())
        q = registered(m, q_next, f"{tag}_q", bits)
        return [lanes.word_select((q + i - (n - 1))[:lane_bits], 8).as_signed() for i in range(n)]
    planes = []
    q_next = wire(m, q_next, f"{tag}_q_d", bits)
    for j in range(8):
        q = pipe(m, q_next, f"{tag}_q{j}")
        x = [w[j] for w in ext]
        for b in reversed(range(bits)):
            width = min(need[b], len(x))
            step = 2 ** b
            x = [wire(m, Mux(q[b], x[i + step] if i + step < len(x) else 0, x[i]), f"{tag}_s{b}_{i}_{j}")
                 for i in range(width)]
        planes.append(list(x) + [Const(0, 1)] * max(0, n - len(x)))
    return [Cat(*(planes[j][i] for j in range(8))).as_signed() for i in range(n)]


def at_least(x, k: int):
    """``x >= k`` for an unsigned ``x`` and a constant ``k``, as ANDs and ORs of ``x``'s bits
    from the top down (synthesis maps a comparison to a carry chain, which a constant does not
    need)."""
    x = Value.cast(x)
    if k <= 0:
        return Const(1, 1)
    if k >= 2 ** len(x):
        return Const(0, 1)
    ge = Const(1, 1)                 # x's bits below i, against k's, are at least as large
    for i in range(len(x)):
        ge = (x[i] & ge) if k >> i & 1 else (x[i] | ge)
    return ge


def pick(words: list, addr):
    """``words[addr]`` (0 past the end) as a mux tree on ``addr``'s bits: a continuous assignment
    in Verilog, not a ``case`` in an ``always @*`` block, which Icarus leaves unknown until one
    of its inputs first changes (a register read at its reset address before any write)."""
    addr = Value.cast(addr)
    width = len(words[0])
    level = list(words) + [Const(0, width)] * (2 ** len(addr) - len(words))
    # (two-way choices, not a shift by the address: Yosys's resource sharing weighs every
    # pair of shifts in the design, quadratic in the PEs, and took most of an hour on small)
    for i in range(len(addr)):
        level = [Mux(addr[i], level[2 * j + 1], level[2 * j]) for j in range(len(level) // 2)]
    return level[0]


class PE(wiring.Component):
    """One PE of structure ``s`` (its largest tile, its NoC, its SIMD lanes, the partial sums the
    drain reads a cycle: ``s.drain_lanes``)."""

    def __init__(self, s):
        t = s.pe_tile_max
        drain_lanes = s.drain_lanes
        self.tile = dict(t)
        self.max_stride = s.max_stride
        self.lanes = W = s.noc_words_per_cycle
        self.simd = s.simd_lanes        # MAC lanes: consecutive filter positions r*S+s of one window
        self.drain_lanes = drain_lanes  # partial sums read a cycle: consecutive words of a row
        self.ingress = {name: ingress(s, name) for name in ("input", "weight")}
        self.shape = l1_shape(s)        # tensor -> (banks, rows)
        self.window = self.ingress["input"].window_x
        self.words = l1_words(t, s.max_stride)
        self.in_cols = input_span(t["X"], s.max_stride, t["S"])       # a window's columns
        n_out = self.words["output"]
        # partial sums in LUT RAM when the tile has PSUM_RAM_MIN_ROWS rows or more of drain runs
        # (else a register each: _psums_in_registers)
        lg = (drain_lanes - 1).bit_length()
        in_ram = (drain_lanes == 1 << lg and t["X"] % drain_lanes == 0
                  and n_out // drain_lanes >= PSUM_RAM_MIN_ROWS)
        self.psum_rows = n_out // drain_lanes if in_ram else 0
        self.psum_depth = 1 << max(1, (self.psum_rows - 1).bit_length()) if in_ram else 0
        taps = {name: In(unsigned(8 * banks)) for name, (banks, _) in self.shape.items()}
        if self.window:
            taps["input"] = In(unsigned(8 * W))                          # the lanes: the PE aligns its window
        super().__init__({
            # -- load: the words of the chunk on the NoC this PE takes, and where they go
            "in_taps": taps["input"], "w_taps": taps["weight"],
            "ld_we_in": In(1), "ld_we_w": In(1),                 # the chunk is this PE's (tensor, phase)
            "ld_row": In(range(max(2, max(rows for _, rows in self.shape.values())))),
            "ld_count": In(range(max(b for b, _ in self.shape.values()) + 1)),   # its words: banks 0 .. count-1
            "ld_bank_in": In(1), "ld_bank_w": In(1),
            # (a window: the lanes' count two cycles early, where the window falls a cycle early,
            # and the window's columns in the step loaded)
            "lane_len": In(range(W + 1)), "win_near": In(1), "win_lo": In(row_window(self.in_cols, W)),
            "ld_xn": In(range(self.in_cols + 1)),
            # -- compute: operand addresses per SIMD lane, the partial sum's, the enable
            "mac_en": In(1),
            **{f"rd_in_{j}": In(range(max(2, self._words("input")))) for j in range(self.simd)},
            **{f"rd_w_{j}": In(range(max(2, self._words("weight")))) for j in range(self.simd)},
            "rd_on": In(self.simd),                     # lane j's filter position is inside the filter
            "ps_addr": In(range(max(2, n_out))),
            "cp_bank_in": In(1), "cp_bank_w": In(1), "cp_bank_ps": In(1),
            # -- drain
            "dr_en": In(1), "dr_bank": In(1),
            "dr_addr": In(range(max(2, n_out))),          # words dr_addr .. dr_addr+dr_len-1
            "dr_len": In(range(drain_lanes + 1)),
            "psum": Out(unsigned(32 * drain_lanes)),      # word j in bits [32j, 32j+32)
        })

    @property
    def psum_clear_cycles(self) -> int:
        """Cycles after reset in which the PE clears its partial sums (memories are not reset),
        during which the top level ignores ``start``: 0 when they are registers."""
        return self.psum_depth

    def _words(self, name: str) -> int:
        banks, rows = self.shape[name]
        return banks * rows

    def _window(self, m: Module, lanes, we) -> tuple[list, list]:
        """A window's row off the lanes (an input spread along ``X`` in overlapping windows): its
        ``in_cols`` words aligned (:func:`align_row`), and whether the PE takes each: on the
        lanes, inside its window's columns in the step, the chunk its (``we``).  Its first word
        is on lane ``lo - (n - 1)`` (``win_lo``, ``win_near``: a register of the top level, a
        cycle before the lanes, computed once for each class of PEs); word ``x`` is on the lanes
        when ``lo >= n - 1 - x`` and ``room = lane_len + n - 1 - lo > x``: one subtraction, then
        comparisons with constants."""
        W, n = self.lanes, self.in_cols
        lane_len = pipe(m, self.lane_len, "lane_len_r")           # (two cycles before the lanes)
        lo, near = self.win_lo, self.win_near
        wb = len(lo)
        aligned = align_row(m, pipe(m, lanes, "lane_data_r"), W, n, lo, "win")
        room = wire(m, lane_len + (n - 1) - Cat(lo, Const(0, 1)).as_signed(), "win_room", signed(wb + 2))
        enables = []
        for x in range(n):
            on_lanes = ~room[-1] & at_least(room[:wb + 1], x + 1) & at_least(lo, n - 1 - x)
            hit = registered(m, near & (x < self.ld_xn) & on_lanes, f"win_hit{x}")
            enables.append(we & hit)
        return [a.as_unsigned() for a in aligned], enables

    # ---- partial sums: two buffers (the compute engine accumulates into one while the drain reads
    # and clears the other), each word read, added to the product and written in one cycle
    # (stage 5), or read (and cleared) by the drain ---------------------------------------------
    def _psums_in_registers(self, m: Module, mac, bank_pre, addr_pre, drain) -> None:
        """Each partial sum a register: for a tile of one row a drain run, which the drain reads
        whole in one cycle (``drain_lanes`` words, the row), or of runs that do not divide it."""
        n_out, L, t = self.words["output"], self.drain_lanes, self.tile
        psums = [[Signal(signed(32), name=f"output{b}_{i}") for i in range(n_out)] for b in range(2)]
        # (the partial sum's read: each byte with its own stage-4 copy of the bank and the
        # address, so no register reaches all 32 bits' muxes, the adder's inputs)
        slices = []
        for j in range(4):
            k = pipe(m, bank_pre, f"ps_old_k{j}")
            a = pipe(m, addr_pre, f"ps_old_a{j}") if n_out > 1 else None
            words = [[w[8 * j: 8 * j + 8] for w in psums[b]] for b in range(2)]
            slices.append(Mux(k, words[1][0], words[0][0]) if a is None
                          else Mux(k, pick(words[1], a), pick(words[0], a)))
        ps_old = wire(m, Cat(*slices), "ps_old", signed(32))
        total = wire(m, ps_old + mac.prod, "mac", signed(32))
        words = [wire(m, Mux(drain.bank, psums[1][i], psums[0][i]), f"dr_word{i}", signed(32))
                 for i in range(n_out)]
        # When L divides the X tile, the drain's runs start at multiples of L (a row of the
        # tile is X words, drain.py's walk): lane j then reads only words L * s + j, the run's
        # slot s found by comparing the address with constants, an AND-OR of n_out / L words a
        # bit (the efficiency table's kcp PE on small: 16 lanes, one slot, no choice) in place
        # of an n_out:1 mux a lane
        slotted = L > 1 and t["X"] % L == 0
        if slotted:
            at_slot = ([Const(1, 1)] if n_out == L else
                       [wire(m, drain.addr == L * k, f"dr_slot{k}") for k in range(n_out // L)])
            for j in range(L):
                picked = [Mux(at_slot[k], words[L * k + j], 0) for k in range(n_out // L)]
                m.d.comb += self.psum[32 * j: 32 * j + 32].eq(functools.reduce(operator.or_, picked))
        else:
            for j in range(L):
                a = wire(m, drain.addr + j, f"dr_a{j}", range(n_out + L + 1))
                m.d.comb += self.psum[32 * j: 32 * j + 32].eq(words[0] if n_out == 1 else pick(words, a))
        for i in range(n_out):
            if L == 1:
                cleared = drain.en & (drain.addr == i)
            elif slotted:
                cleared = drain.en & at_slot[i // L] & at_least(drain.len, i % L + 1)
            else:
                cleared = drain.en & (i < drain.addr + drain.len)
                if i < 2 ** len(drain.addr) - 1:          # (else dr_addr <= i always)
                    cleared = cleared & (drain.addr <= i)
            cleared = wire(m, cleared, f"dr_clr{i}")
            written = wire(m, mac.we & (mac.addr == i), f"ps_we{i}")
            for b in range(2):
                # (a clear and a write never meet: the bank drained is not the one computed)
                with m.If(cleared & (drain.bank == b)):
                    m.d.sync += psums[b][i].eq(0)
                with m.Elif(written & (mac.bank == b)):
                    m.d.sync += psums[b][i].eq(total)

    def _psums_in_ram(self, m: Module, mac, bank_pre, addr_pre, drain) -> None:
        """The partial sums in LUT RAM (a memory with an asynchronous read port and a write port,
        which synthesis maps to distributed RAM: an ECP5's 16x4 cells, a Xilinx's RAM32M/64M),
        one for each buffer and drain lane: word ``i`` (``i = row * L + j``, ``L`` the drain's
        lanes, a power of two dividing the X tile) is row ``row`` of lane ``j``'s memory.  A
        drain run (``L`` words from a multiple of ``L``) is one row of every lane; the compute
        engine's word one row of one lane.

        Each memory has one read and one write port, shared: the drain's address while the drain
        reads that buffer, else the compute engine's (they never use one buffer in the same
        cycle).  The drain clears what it reads (a write of 0); for ``psum_depth`` cycles after
        reset the PE clears every row (memories are not reset; until then the top level ignores
        ``start``: ``psum_clear_cycles``)."""
        L, depth = self.drain_lanes, self.psum_depth
        lg, rbits = (L - 1).bit_length(), (depth - 1).bit_length()
        # the clear after reset: every row, one a cycle
        sweep_row = Signal(rbits, name="ps_sweep_row")
        sweeping = Signal(name="ps_sweeping", init=1)
        with m.If(sweeping):
            m.d.sync += sweep_row.eq(sweep_row + 1)
            with m.If(sweep_row == depth - 1):
                m.d.sync += sweeping.eq(0)
        mems = [[Memory(shape=signed(32), depth=depth, init=[]) for _ in range(L)] for _ in range(2)]
        data = [[None] * L for _ in range(2)]
        ram_writes = []
        for b in range(2):
            # whether the drain reads this buffer, and the row read: registers, of the drain's
            # inputs and of the compute engine's stage-3 address (the read's address is then a
            # register, the write's a choice of two, ahead of the read, add and write)
            here = self.dr_en & (self.dr_bank == b)
            drained = pipe(m, here, f"dr_here{b}")
            rd_row = pipe(m, Mux(here, self.dr_addr[lg:lg + rbits], addr_pre[lg:lg + rbits]), f"ps_rd_row{b}")
            for j, mem in enumerate(mems[b]):
                m.submodules[f"psum{b}_{j}"] = mem
                rp = mem.read_port(domain="comb")
                wp = mem.write_port()
                m.d.comb += rp.addr.eq(rd_row)
                data[b][j] = rp.data
                cleared = drained & (at_least(drain.len, j + 1) if L > 1 else 1)
                written = mac.we & (mac.bank == b) & (mac.addr[:lg] == j if L > 1 else 1)
                m.d.comb += [wp.addr.eq(Mux(sweeping, sweep_row, rd_row)),
                             wp.en.eq(sweeping | cleared | written)]
                ram_writes.append((wp, sweeping | drained))
        # (the compute engine's read: each byte chosen by its own stage-4 copy of the bank and
        # lane, so no register reaches all 32 bits' muxes)
        slices = []
        for k in range(4):
            sel = Cat(pipe(m, addr_pre[:lg], f"ps_old_l{k}"), pipe(m, bank_pre, f"ps_old_k{k}")) if L > 1 else \
                pipe(m, bank_pre, f"ps_old_k{k}")
            words = [data[b][j][8 * k: 8 * k + 8] for b in range(2) for j in range(L)]
            slices.append(pick(words, sel))
        ps_old = wire(m, Cat(*slices), "ps_old", signed(32))
        total = wire(m, ps_old + mac.prod, "mac", signed(32))
        for wp, clears in ram_writes:
            m.d.comb += wp.data.eq(Mux(clears, 0, total))
        for j in range(L):
            m.d.comb += self.psum[32 * j: 32 * j + 32].eq(Mux(drain.bank, data[1][j], data[0][j]))

    def elaborate(self, platform):
        m = Module()

        # ---- L1: per tensor, banks of LUT RAM (double-buffered: the buffer is the address's top
        # bit), a chunk's words written at the row the loader counts, read by the compute
        # engine's address (row = address // banks, bank = address % banks) -----------------
        mems = {}
        for name, (banks, rows) in self.shape.items():
            depth = 1 << max(1, (rows - 1).bit_length())
            mems[name] = [Memory(shape=unsigned(8), depth=2 * depth, init=[]) for _ in range(banks)]
            for j, mem in enumerate(mems[name]):
                m.submodules[f"l1_{name}_{j}"] = mem
        row = pipe(m, self.ld_row, "ld_row_r")
        count = pipe(m, self.ld_count, "ld_count_r")
        for name, taps, we, bank_in in (("input", self.in_taps, self.ld_we_in, self.ld_bank_in),
                                        ("weight", self.w_taps, self.ld_we_w, self.ld_bank_w)):
            banks, rows = self.shape[name]
            we = pipe(m, we, f"ld_we_{name}_r")
            buf = pipe(m, bank_in, f"ld_buf_{name}_r")
            if name == "input" and self.window:
                words, enables = self._window(m, taps, we)
            else:
                data = pipe(m, taps, f"{name}_taps_r")
                words = [data[8 * j: 8 * j + 8] for j in range(banks)]
                enables = [we & at_least(count, j + 1) for j in range(banks)]
            for j, mem in enumerate(mems[name]):
                wp = mem.write_port()
                rbits = len(wp.addr) - 1
                m.d.comb += [wp.addr.eq(Cat(row[:rbits], buf)), wp.data.eq(words[j] if j < len(words) else 0),
                             wp.en.eq(enables[j] if j < len(enables) else 0)]

        def read(name, bank, addr, tag):
            """The word at ``addr`` of buffer ``bank`` of ``name``'s L1: every bank read at the
            row (LUT RAM reads as it is addressed), then the bank chosen."""
            banks, _ = self.shape[name]
            lg = (banks - 1).bit_length()
            outs = []
            for j, mem in enumerate(mems[name]):
                rp = mem.read_port(domain="comb")
                rbits = len(rp.addr) - 1
                m.d.comb += rp.addr.eq(Cat((addr >> lg)[:rbits], bank))
                outs.append(rp.data)
            if banks == 1:
                return wire(m, outs[0], tag, signed(8))
            return wire(m, Cat(*outs).word_select(addr[:lg], 8), tag, signed(8))

        # ---- multiply-accumulate: five stages (docs/timing.md, COMPUTE_LATENCY) -----------
        # 0. the broadcast registered at the PE's input (its wires run from register to register);
        # 1. read the SIMD lanes' operands from L1 (consecutive filter positions of one window)
        #    into registers beside the L1;  2. one lane: into the multiplier block's input
        #    registers; more: each lane's product;  3. the product, in the block's output
        #    register (one lane), or the first levels of the lanes' adder tree;  4. the product
        #    (or the rest of the tree) in a register beside the partial sums;  5. read, add and
        #    write the partial sum.
        # (Stages 2 and 4 are the wires to and from the multiplier: an FPGA's multiplier blocks
        # stand in a few rows, and on a full device a PE's may be placed far from its L1 and its
        # partial sums; on small, 64 PEs on an LFE5U-85F, the placer put some blocks 40-94 tiles
        # away, and neither the L1 read nor the partial sum's add fitted 10 ns with that wire.)
        # The next step's issues follow its last issue's stages at the same pace (each stage
        # carries its issue's buffers), and the last writes land before the drain reads (below).
        assert TIMING.compute_latency_cycles == 0 and TIMING.drain_wait_cycles == 5, "five stages, then the drain"
        # (the product of int8 operands, or the sum of the lanes' products, fits this many bits)
        pw = 16 + (self.simd - 1).bit_length()
        rd_on = pipe(m, self.rd_on, "rd_on_r")
        if self.simd == 1:
            # one lane: the operands (the input's 0 off the filter) and the product are the
            # registers of one multiplier (an FPGA's multiplier block and its own registers).
            # Each bit of an operand is read by its own copy of the address and the bank (the
            # registers at the PE's input), beside its mux: the read's wires are short, and the
            # wire into the multiplier block is what the path has left.  (A copy for every 2, 4
            # or 8 bits costs 58-95 LUT4 more on tiny's PE: the muxes map worse.)
            x_in = read("input", pipe(m, self.cp_bank_in, "cp_bank_in_r"), pipe(m, self.rd_in_0, "rd_in_r0"), "x_in0")
            w_in = read("weight", pipe(m, self.cp_bank_w, "cp_bank_w_r"), pipe(m, self.rd_w_0, "rd_w_r0"), "w_in0")
            x_r = registered(m, Mux(rd_on[0], x_in, 0), "x_r0", signed(8), reset_less=True)
            w_r = registered(m, w_in, "w_r0", signed(8), reset_less=True)
            prod_m = multiply(m, x_r, w_r, pw, "prod_m", both_signed=True)
        else:
            # (the operands' banks, registered with the addresses)
            bank_in = pipe(m, self.cp_bank_in, "cp_bank_in_r")
            bank_w = pipe(m, self.cp_bank_w, "cp_bank_w_r")
            rd_in = [pipe(m, getattr(self, f"rd_in_{j}"), f"rd_in_r{j}") for j in range(self.simd)]
            rd_w = [pipe(m, getattr(self, f"rd_w_{j}"), f"rd_w_r{j}") for j in range(self.simd)]
            x_r = [Signal(signed(8), name=f"x_r{j}", reset_less=True) for j in range(self.simd)]
            w_r = [Signal(signed(8), name=f"w_r{j}", reset_less=True) for j in range(self.simd)]
            on_r = Signal(self.simd, name="on_r")
            for j in range(self.simd):
                m.d.sync += [x_r[j].eq(read("input", bank_in, rd_in[j], f"x_in{j}")),
                             w_r[j].eq(read("weight", bank_w, rd_w[j], f"w_in{j}"))]
            m.d.sync += on_r.eq(rd_on)
            products = [registered(m, Mux(on_r[j], x_r[j] * w_r[j], 0), f"prod{j}", signed(17), reset_less=True)
                        for j in range(self.simd)]
            # the lanes' adder tree, its first half of levels registered at stage 3, the rest at
            # stage 4 (with two lanes, their sum, then a copy of it beside the partial sums)
            levels = (self.simd - 1).bit_length()
            for level in range(levels):
                products = [wire(m, products[i] + products[i + 1], "lane_sum", signed(pw)) if i + 1 < len(products)
                            else products[i] for i in range(0, len(products), 2)]
                if level + 1 == (levels + 1) // 2:
                    products = [registered(m, p, f"lane_sum{level}_{i}", signed(pw), reset_less=True)
                                for i, p in enumerate(products)]
            prod_m = products[0]
        # (the operands and products are data, without reset: the partial sums' writes wait
        # for mac_we, which the reset clears)
        prod_r = registered(m, prod_m, "prod_r", signed(pw), reset_less=True)
        stages = (1, 2, 3, 4)                                       # stage 1, 2, 3, 4 of the issue
        we = [Signal(name=f"mac_we{k}") for k in stages]
        addr = [Signal.like(self.ps_addr, name=f"ps_addr{k}") for k in stages]
        bank = [Signal(name=f"ps_bank{k}") for k in stages]
        mac_en = pipe(m, self.mac_en, "mac_en_r")
        ps_addr = pipe(m, self.ps_addr, "ps_addr_r")
        bank_ps = pipe(m, self.cp_bank_ps, "cp_bank_ps_r")
        m.d.sync += [we[0].eq(mac_en), addr[0].eq(ps_addr), bank[0].eq(bank_ps)]
        m.d.sync += [r[k].eq(r[k - 1]) for r in (we, addr, bank) for k in range(1, len(stages))]
        # What the drain tells the PEs is registered at each PE's input, like the broadcasts
        # above, so a drain issue reads at d+1: seven cycles or more after the step's last MAC
        # issue e (the drain issues from its go + DRAIN_WAIT, e + 6 or later), whose write
        # landed at e+6.  (A lane past the row, j >= dr_len, reads a word the drain ignores.)
        # (memories register the drain's enable and address per buffer: _psums_in_ram)
        drain = SimpleNamespace(bank=pipe(m, self.dr_bank, "dr_bank_r"), len=pipe(m, self.dr_len, "dr_len_r"))
        mac_write = SimpleNamespace(we=we[-1], addr=addr[-1], bank=bank[-1], prod=prod_r)
        if self.psum_rows:
            self._psums_in_ram(m, mac_write, bank[-2], addr[-2], drain)
        else:
            drain.en, drain.addr = pipe(m, self.dr_en, "dr_en_r"), pipe(m, self.dr_addr, "dr_addr_r")
            self._psums_in_registers(m, mac_write, bank[-2], addr[-2], drain)
        return m


def pe_instance(m: Module, name: str, pe: PE) -> SimpleNamespace:
    """An instance of the PE module (:data:`PE_MODULE`, emitted once from ``pe``) at ``name``:
    one Signal per port of ``pe``'s signature, to be wired by the caller.  The array is then one
    module definition, whatever its size, instead of a copy per position."""
    pe._MustUse__silence = True        # only its signature is used here; emit elaborates its own
    ports = {}
    args = {"i_clk": ClockSignal("sync"), "i_rst": ResetSignal("sync")}
    for member_name, member in pe.signature.members.items():
        sig = Signal(member.shape, name=f"{name}__{member_name}")
        ports[member_name] = sig
        args[f"{'i' if member.flow == In else 'o'}_{member_name}"] = sig
    m.submodules[name] = Instance(PE_MODULE, **args)
    return SimpleNamespace(**ports)

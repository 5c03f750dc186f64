"""One processing element: double-buffered L1 scratchpads for its input and weight tiles, a
double-buffered partial-sum tile, and an int8 x int8 -> int32 multiply-accumulate.

The PE is the part the array replicates, so it holds only what differs from PE to PE; every
quantity that is the same for a whole class of PEs is computed once in the top level and
broadcast (:mod:`.accelerator`):

- **load**: the distribution NoC shows it up to ``W`` consecutive L2 words a cycle, which the
  PE registers at its input (the broadcast's wires run from register to register; with a wide
  NoC, the first stages of its row aligners may come before that register, :func:`align_row`).
  The top level gives each PE its tile's extents in the step being loaded and, for each L1 row
  (a run of consecutive L2 words), where the row falls on the lanes (``near`` and a narrow
  window ``lo``), computed once per class of PEs whose tiles start at the same L2 address (the
  class's distance from lane 0 plus the row's offset) and registered a cycle before the lanes
  arrive (two when the aligners' first stages come early).  With the lanes' count and tensor
  (which come early too), the PE then registers which of its words each L1 word takes.  The
  row's words are then aligned off the lanes at once (:func:`align_row`: a logarithmic shifter
  when the NoC is wide, a ``W``:1 mux per word when it is narrow), their lanes checked with
  narrow arithmetic, and the PE captures every word inside its tile: one word reaches every PE
  that needs it in the same cycle (the multicast and the halo).
- **compute**: the compute engine broadcasts the L1 addresses of the SIMD lanes' operands and of
  the partial sum, and a per-PE enable that is already masked by the PE's own tile; the PE
  registers them at its input.
- **drain**: reads (and clears) up to ``drain_lanes`` consecutive partial sums of a row a cycle
  into the reduction tree.
"""

import functools
import operator
from types import SimpleNamespace

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, ResetSignal, Signal, Value, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from costmodel.hwgen_preset.rules import input_span, l1_words

from .common import multiply, pipe, registered, wire

__all__ = ["EARLY_STAGES", "PE", "PE_MODULE", "align_row", "early_words", "pe_instance", "pick", "row_window",
           "shifts_rows"]

#: The Verilog module name of the PE: every position of the array is an instance of it.
PE_MODULE = "accelgen_pe"


def row_window(cols: int, lanes: int) -> int:
    """Bits of a row's lane window: the row's first word sits at lane ``v - (cols - 1)`` with
    ``0 <= v < lanes + cols - 1`` when any of its ``cols`` words is on the ``lanes`` lanes."""
    return max(1, (lanes + cols - 1).bit_length())


def shifts_rows(W: int, n: int) -> bool:
    """Whether :func:`align_row` aligns a row of ``n`` words off ``W`` lanes with a logarithmic
    shifter (else a ``W``:1 mux per word, the smaller for short lanes)."""
    bits = row_window(n, W)
    return n * (W - 1) > sum(min(n + 2 ** b - 1, n - 1 + W) for b in range(bits))


#: Stages of a row's logarithmic shifter (the widest: the largest shifts) that work on the lanes
#: as they arrive, before the PE's register of them, with the shift of a cycle earlier, where
#: :func:`early_words` allows it.
EARLY_STAGES = 3


def _early_split(W: int, n: int) -> int:
    """The first shifter stage (bit of the shift) after the PE's register of the lanes, when the
    stages above it come early."""
    return max(0, row_window(n, W) - EARLY_STAGES)


def early_words(W: int, lengths: list[int]) -> int:
    """Words the registers after the early stages of the row aligners of ``lengths`` words
    would hold (0 when none is a shifter).  Each aligner has its own, where one register of the
    ``W`` lanes serves them all otherwise: a PE takes the early stages when these hold at most
    ``2 W`` words (small's PE: 3 aligners of 3 words, 54 words; one of the efficiency table's
    ``xp`` PEs, 24 aligners: 432 words, which would triple its registers)."""
    return sum(min(n + 2 ** _early_split(W, n) - 1, n - 1 + W) for n in lengths if shifts_rows(W, n))


def align_row(m: Module, lanes, W: int, n: int, q_next, tag: str, early: bool = False) -> list:
    """The ``n`` words ``ext[q + i]`` (``i < n``) of ``ext`` = ``n - 1`` zero words followed by
    the ``W`` lanes of ``lanes``: a row whose first word is on lane ``q - (n - 1)``, aligned.

    With short lanes (:func:`shifts_rows` false) ``lanes`` is the PE's register of the lanes,
    ``q`` is ``q_next`` registered (the shift is worked out a cycle before the lanes) and each
    word is a ``W``:1 mux.  Otherwise it is a logarithmic shifter with only the outputs each
    stage needs (stage ``b``, bit ``b`` of ``q``, from the output side, keeps ``n + 2**b - 1``
    words: about ``n * log2(W) + 2 * W`` two-input muxes a bit instead of ``n * (W - 1)``;
    W = 64, n = 16: 240 against 1,008), on that register of the lanes; or, ``early``, on the
    broadcast as it arrives, a cycle before, with ``q_next`` the shift two cycles before the
    lanes' register: its first :data:`EARLY_STAGES` stages come before the register (which then
    holds ``n + 2**b - 1`` words, not ``W``) and the rest after it.  Each bit of the words is
    shifted by its own kept copies of the shift: the eight bit planes are separate networks, so
    no register selects all of a wide stage's muxes (W = 64: 528 of them), while within a plane
    one register still selects a stage's every mux and synthesis can merge two stages into one
    wider mux (a copy per group of words would part those: +47 % LUT4 on small's PE)."""
    ext = [Const(0, 8)] * (n - 1) + [lanes[8 * j: 8 * j + 8] for j in range(W)]
    bits = row_window(n, W)
    need = [n + 2 ** b - 1 for b in range(bits + 1)]
    if not shifts_rows(W, n):
        # short lanes (W = 4): a W:1 mux per word is the smaller
        # (a word off the lanes reads some lane: its capture is not enabled)
        lane_bits = max(1, (W - 1).bit_length())
        if W == 1:
            return [lanes[:8].as_signed()] * n
        q = registered(m, q_next, f"{tag}_q", bits)
        return [lanes.word_select((q + i - (n - 1))[:lane_bits], 8).as_signed() for i in range(n)]
    planes = []
    q_next = wire(m, q_next, f"{tag}_q_d", bits)
    split = _early_split(W, n) if early else bits
    for j in range(8):
        q = pipe(m, q_next, f"{tag}_q{j}")               # (early: a cycle before the lanes' register)
        x = [w[j] for w in ext]
        for b in reversed(range(bits)):
            if early and b == split - 1:                  # the PE's register of the (partly aligned) lanes
                x, q = list(registered(m, Cat(*x), f"{tag}_lanes{j}")), pipe(m, q, f"{tag}_ql{j}")
            width = min(need[b], len(x))
            step = 2 ** b
            x = [wire(m, Mux(q[b], x[i + step] if i + step < len(x) else 0, x[i]), f"{tag}_s{b}_{i}_{j}")
                 for i in range(width)]
        if early and split == 0:
            x = list(registered(m, Cat(*x), f"{tag}_lanes{j}"))
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
    width = len(words[0])
    padded = list(words) + [Const(0, width)] * (2 ** len(addr) - len(words))
    return Cat(*padded).word_select(addr, width)


class PE(wiring.Component):
    """A PE sized by its largest tile: ``tile`` gives K C Y X R S maxima and ``max_stride``."""

    def __init__(self, tile: dict[str, int], max_stride: int, lanes: int, simd: int = 1, drain_lanes: int = 1):
        self.tile = dict(tile)
        self.max_stride = max_stride
        self.lanes = lanes          # NoC words per cycle
        self.simd = simd            # MAC lanes: consecutive filter positions r*S+s of one window
        self.drain_lanes = drain_lanes  # partial sums read a cycle: consecutive words of a row
        t = self.tile
        self.in_rows = input_span(t["Y"], max_stride, t["R"])
        self.in_cols = input_span(t["X"], max_stride, t["S"])
        self.words = l1_words(t, max_stride)
        # the rows' windows come two cycles before the lanes, not one, when the row aligners'
        # first stages work on the lanes before the PE registers them (:func:`early_words`)
        self.early_windows = 0 < early_words(lanes, self.shifter_lengths()) <= 2 * lanes
        rows = self.in_rows
        super().__init__({
            # -- load: the NoC's lanes, this PE's distance from lane 0 and its tile in the step loaded
            "lane_len": In(range(lanes + 1)),           # in two cycles, lanes 0 .. lane_len-1 hold words (0: none)
            "lane_weight": In(1),                       # ... of which tensor: 0 input, 1 weight
            "lane_data": In(unsigned(8 * lanes)),
            "ld_bank_in": In(1), "ld_bank_w": In(1),
            "ld_cn": In(range(t["C"] + 1)), "ld_kn": In(range(t["K"] + 1)),
            "ld_yn": In(range(rows + 1)), "ld_xn": In(range(self.in_cols + 1)),   # input rows, columns
            "filt_r": In(range(t["R"] + 1)), "filt_s": In(range(t["S"] + 1)),
            # where each L1 row falls on the lanes of two cycles later (a register of the top level,
            # computed once for each class of PEs, :meth:`l1_rows`): near, and its window lo
            **{f"{row}_near": In(1) for _, row, n in self.l1_rows()},
            **{f"{row}_lo": In(row_window(n, lanes)) for _, row, n in self.l1_rows()},
            # -- compute: operand addresses per SIMD lane, the partial sum's, the enable
            "mac_en": In(1),
            **{f"rd_in_{j}": In(range(max(2, self.words["input"]))) for j in range(simd)},
            **{f"rd_w_{j}": In(range(max(2, self.words["weight"]))) for j in range(simd)},
            "rd_on": In(simd),                          # lane j's filter position is inside the filter
            "ps_addr": In(range(max(2, self.words["output"]))),
            "cp_bank_in": In(1), "cp_bank_w": In(1), "cp_bank_ps": In(1),
            # -- drain
            "dr_en": In(1), "dr_bank": In(1),
            "dr_addr": In(range(max(2, self.words["output"]))),   # words dr_addr .. dr_addr+dr_len-1
            "dr_len": In(range(drain_lanes + 1)),
            "psum": Out(unsigned(32 * drain_lanes)),              # word j in bits [32j, 32j+32)
        })

    def shifter_lengths(self) -> list[int]:
        """The words each of the PE's row aligners outputs: aligner ``p`` serves input row ``p``
        and weight row ``p`` (the bus carries one tensor a cycle), as long as the longer."""
        by = {"input": [], "weight": []}
        for name, _, n in self.l1_rows():
            by[name].append(n)
        return [max(by[name][p] for name in by if p < len(by[name]))
                for p in range(max(len(by["input"]), len(by["weight"])))]

    def l1_rows(self) -> list[tuple[str, str, int]]:
        """The L1 rows, in L1 order: (tensor, port prefix, length in words).  An input row is
        ``in_{c}_{y}`` (``in_cols`` words), a weight row ``w_{k}_{c}_{r}`` (``S`` words)."""
        t = self.tile
        return ([("input", f"in_{c}_{y}", self.in_cols) for c in range(t["C"]) for y in range(self.in_rows)]
                + [("weight", f"w_{k}_{c}_{r}", t["S"]) for k in range(t["K"]) for c in range(t["C"])
                   for r in range(t["R"])])

    def elaborate(self, platform):
        m = Module()
        t = self.tile
        rows, cols = self.in_rows, self.in_cols
        regs = {
            name: [[Signal(signed(8) if name != "output" else signed(32), name=f"{name}{b}_{i}")
                    for i in range(self.words[name])] for b in range(2)]
            for name in ("input", "weight", "output")
        }

        # ---- capture from the NoC --------------------------------------------------------
        # An L1 row of n words whose first word is at lane v - (n - 1) has words on the lanes
        # only when v < lanes + n - 1.  v is the same for every PE of a class (its distance from
        # lane 0 plus the row's offset), so the top level computes it once per class and row and
        # gives the PE two registers, a cycle before the lanes: ``near`` (v < lanes + n - 1) and
        # the window ``lo`` (v's low bits, :func:`row_window`).
        W = self.lanes
        # (the lanes' count and tensor come two cycles before the lanes, registered here)
        lane_len = pipe(m, self.lane_len, "lane_len_r")
        lane_weight = pipe(m, self.lane_weight, "lane_weight_r")
        in_lanes = {"input": [], "weight": []}       # (row valid, port prefix, row length n, words [(i, inner, inside)])
        rows_of = iter(self.l1_rows())
        i = 0
        for c_l in range(t["C"]):
            for y_l in range(rows):
                ok = (~lane_weight) & (c_l < self.ld_cn) & (y_l < self.ld_yn)
                _, row, n = next(rows_of)
                in_lanes["input"].append((ok, row, n, [(i + x, x, x < self.ld_xn) for x in range(n)]))
                i += n
        i = 0
        for k_l in range(t["K"]):
            for c_l in range(t["C"]):
                for r in range(t["R"]):
                    ok = lane_weight & (k_l < self.ld_kn) & (c_l < self.ld_cn) & (r < self.filt_r)
                    _, row, n = next(rows_of)
                    in_lanes["weight"].append((ok, row, n, [(i + s_, s_, s_ < self.filt_s) for s_ in range(n)]))
                    i += n
        # Each row's lane window; the row's words are aligned off the lanes by a shifter that an
        # input row and a weight row share (the bus carries one tensor a cycle, ``lane_weight``):
        # shifter p aligns input row p or weight row p, sized by the longer of the two.  Word
        # ``inner`` of a row of ``n`` words is on lane ``lo - (n - 1) + inner``, which is output
        # ``inner`` of a shifter of ``N >= n`` words driven with ``lo + (N - n)``.
        # The windows, the lanes' count and tensor come early (the window a cycle before the
        # lanes, the count and tensor registered here a cycle before), so which words each L1
        # word takes, and each shifter's shift, are registers when the lanes arrive, and only
        # the lanes' data reach the shifters then.
        # (with early windows, the shifters' first stages read them as they come, the rest of
        # the capture a register of them, here, a cycle later)
        windows, early_lo = {}, {}
        for name in ("input", "weight"):
            for row, (ok, port, n, words) in enumerate(in_lanes[name]):
                lo, near = getattr(self, f"{port}_lo"), getattr(self, f"{port}_near")
                early_lo[name, row] = lo
                if self.early_windows:
                    lo, near = registered(m, lo, f"{port}_lo_r"), registered(m, near, f"{port}_near_r")
                windows[name, row] = (wire(m, ok & near, f"{name}_near{row}"), lo, len(lo))
        lane_data = None                                # the broadcast's end register, where a row needs it
        aligned_rows = {}
        for p, N in enumerate(self.shifter_lengths()):
            users = [(name, in_lanes[name][p][2]) for name in ("input", "weight") if p < len(in_lanes[name])]
            wbN = row_window(N, W)

            # (the shift is a register, worked out a cycle before the lanes from the window and
            # the tensor, which come early: the shifter's muxes read registers only)
            early = self.early_windows and shifts_rows(W, N)

            def shifted(name, n):
                lo = early_lo[name, p] if early else windows[name, p][1]
                return (lo + (N - n))[:wbN] if N > n else lo
            if len(users) == 1:
                q_next = shifted(*users[0])
            else:
                q_next = Mux(self.lane_weight if early else lane_weight, shifted(*users[1]), shifted(*users[0]))
            if early:
                aligned = align_row(m, self.lane_data, W, N, q_next, f"row{p}", early=True)
            else:
                if lane_data is None:
                    lane_data = pipe(m, self.lane_data, "lane_data_r")
                aligned = align_row(m, lane_data, W, N, q_next, f"row{p}")
            for name, _ in users:
                aligned_rows[name, p] = aligned
        # (the banks the words go to, registered here too: they change at a shift and reach this
        # register two cycles later, well before the step's first capture, six or more cycles
        # after the shift; the step before's last captures keep the old bank the longer)
        for name, bank in (("input", pipe(m, self.ld_bank_in, "ld_bank_in_r")),
                           ("weight", pipe(m, self.ld_bank_w, "ld_bank_w_r"))):
            for row, (ok, v, n, words) in enumerate(in_lanes[name]):
                near, lo, wb = windows[name, row]
                aligned = aligned_rows[name, row]
                # word ``inner`` is on lane lo - (n - 1) + inner, so on the lanes when
                # lo >= n - 1 - inner and room = lane_len + n - 1 - lo > inner: one subtraction a
                # row, then each word compares lo and room with constants (AND-OR trees, not
                # carry chains)
                room = wire(m, lane_len + (n - 1) - Cat(lo, Const(0, 1)).as_signed(), f"{name}_room{row}",
                            signed(wb + 2))
                for idx, inner, inside in words:
                    on_lanes = ~room[-1] & at_least(room[:wb + 1], inner + 1) & at_least(lo, n - 1 - inner)
                    hit = registered(m, near & inside & on_lanes, f"{name}{idx}_hit")
                    for b in range(2):
                        with m.If(hit & (bank == b)):
                            m.d.sync += regs[name][b][idx].eq(aligned[inner])

        # ---- multiply-accumulate: three stages (docs/timing.md, COMPUTE_LATENCY) ----------
        # 0. the broadcast registered at the PE's input (its wires run from register to register);
        # 1. read the SIMD lanes' operands from L1 (consecutive filter positions of one window);
        # 2. multiply (and add the lanes);  3. read, add and write the partial sum.
        # The next step's issue overlaps stages 2 and 3 (it reads operands only); the compute
        # engine stays busy one cycle after its last issue, and the one write that lands in the
        # next slot (the last issue's) lands before the drain reads (below).
        def read(name, bank, addr, shape, tag):
            if len(regs[name][0]) == 1:
                return wire(m, Mux(bank, regs[name][1][0], regs[name][0][0]), tag, shape)
            return wire(m, Mux(bank, pick(regs[name][1], addr), pick(regs[name][0], addr)), tag, shape)

        def read_sliced(name, bank, addr, piece, tag):
            """A word of ``name`` read in slices of ``piece`` bits, each slice with its own
            register of ``bank`` and ``addr`` (of their values a cycle before), kept beside its
            muxes, so no register reaches all the word's muxes."""
            width = len(regs[name][0][0])
            slices = []
            for j in range(width // piece):
                k = pipe(m, bank, f"{tag}_k{j}")
                a = pipe(m, addr, f"{tag}_a{j}") if len(regs[name][0]) > 1 else None
                words = [[w[piece * j: piece * j + piece] for w in regs[name][b]] for b in range(2)]
                slices.append(Mux(k, words[1][0], words[0][0]) if a is None
                              else Mux(k, pick(words[1], a), pick(words[0], a)))
            return wire(m, Cat(*slices), tag, signed(width))
        rd_on = pipe(m, self.rd_on, "rd_on_r")
        n_out = self.words["output"]
        if self.simd == 1:
            # one lane: the operands (the input's 0 off the filter) and the product are the
            # registers of one multiplier (an FPGA's multiplier block and its own registers).
            # Each bit of an operand is read by its own copy of the address and the bank (the
            # registers at the PE's input), beside its mux: the read's wires are short, and the
            # wire into the multiplier block is what the path has left.  (A copy for every 2, 4
            # or 8 bits costs 58-95 LUT4 more on tiny's PE: the muxes map worse.)
            x_in = read_sliced("input", self.cp_bank_in, self.rd_in_0, 1, "x_in0")
            w_in = read_sliced("weight", self.cp_bank_w, self.rd_w_0, 1, "w_in0")
            prod_r = multiply(m, Mux(rd_on[0], x_in, 0), w_in, 32, "prod_r", both_signed=True)
        else:
            # (the operands' banks, registered with the addresses)
            bank_in = pipe(m, self.cp_bank_in, "cp_bank_in_r")
            bank_w = pipe(m, self.cp_bank_w, "cp_bank_w_r")
            rd_in = [pipe(m, getattr(self, f"rd_in_{j}"), f"rd_in_r{j}") for j in range(self.simd)]
            rd_w = [pipe(m, getattr(self, f"rd_w_{j}"), f"rd_w_r{j}") for j in range(self.simd)]
            x_r = [Signal(signed(8), name=f"x_r{j}") for j in range(self.simd)]
            w_r = [Signal(signed(8), name=f"w_r{j}") for j in range(self.simd)]
            on_r = Signal(self.simd, name="on_r")
            for j in range(self.simd):
                m.d.sync += [x_r[j].eq(read("input", bank_in, rd_in[j], signed(8), f"x_in{j}")),
                             w_r[j].eq(read("weight", bank_w, rd_w[j], signed(8), f"w_in{j}"))]
            m.d.sync += on_r.eq(rd_on)
            products = [wire(m, Mux(on_r[j], x_r[j] * w_r[j], 0), f"prod{j}", signed(17)) for j in range(self.simd)]
            while len(products) > 1:              # the lanes' adder tree
                products = [wire(m, products[i] + products[i + 1], "lane_sum", signed(32)) if i + 1 < len(products)
                            else products[i] for i in range(0, len(products), 2)]
            prod_r = Signal(signed(32), name="prod_r")
            m.d.sync += prod_r.eq(products[0])
        we = [Signal(name=f"mac_we{k}") for k in (1, 2)]            # stage 1, 2 of the issue
        addr = [Signal.like(self.ps_addr, name=f"ps_addr{k}") for k in (1, 2)]
        bank = [Signal(name=f"ps_bank{k}") for k in (1, 2)]
        mac_en = pipe(m, self.mac_en, "mac_en_r")
        ps_addr = pipe(m, self.ps_addr, "ps_addr_r")
        bank_ps = pipe(m, self.cp_bank_ps, "cp_bank_ps_r")
        m.d.sync += [we[0].eq(mac_en), addr[0].eq(ps_addr), bank[0].eq(bank_ps),
                     we[1].eq(we[0]), addr[1].eq(addr[0]), bank[1].eq(bank[0])]
        we_r, addr_r, bank_r = we[1], addr[1], bank[1]
        # (the partial sum's read: each byte with its own stage-2 copy of the bank and the
        # address, so no register reaches all 32 bits' muxes, the adder's inputs)
        ps_old = read_sliced("output", bank[0], addr[0], 8, "ps_old")
        mac = wire(m, ps_old + prod_r, "mac", signed(32))

        # ---- drain: read, clear ------------------------------------------------------------
        # What the drain tells the PEs is registered at each PE's input, like the broadcasts
        # above, so a drain issue reads at d+1: five cycles or more after the step's last MAC
        # issue e (the drain issues from its go + DRAIN_WAIT, e + 4 or later), whose write
        # landed at e+4.  (A lane past the row, j >= dr_len, reads a word the drain ignores.)
        dr_en = pipe(m, self.dr_en, "dr_en_r")
        dr_bank = pipe(m, self.dr_bank, "dr_bank_r")
        dr_addr = pipe(m, self.dr_addr, "dr_addr_r")
        dr_len = pipe(m, self.dr_len, "dr_len_r")
        L = self.drain_lanes
        words = [wire(m, Mux(dr_bank, regs["output"][1][i], regs["output"][0][i]), f"dr_word{i}", signed(32))
                 for i in range(n_out)]
        # When L divides the X tile, the drain's runs start at multiples of L (a row of the
        # tile is X words, drain.py's walk): lane j then reads only words L * s + j, the run's
        # slot s found by comparing the address with constants, an AND-OR of n_out / L words a
        # bit (the efficiency table's kcp PE on small: 16 lanes, one slot, no choice) in place
        # of an n_out:1 mux a lane
        slotted = L > 1 and t["X"] % L == 0
        if slotted:
            at_slot = ([Const(1, 1)] if n_out == L else
                       [wire(m, dr_addr == L * k, f"dr_slot{k}") for k in range(n_out // L)])
            for j in range(L):
                picked = [Mux(at_slot[k], words[L * k + j], 0) for k in range(n_out // L)]
                m.d.comb += self.psum[32 * j: 32 * j + 32].eq(functools.reduce(operator.or_, picked))
        else:
            for j in range(L):
                a = wire(m, dr_addr + j, f"dr_a{j}", range(n_out + L + 1))
                m.d.comb += self.psum[32 * j: 32 * j + 32].eq(words[0] if n_out == 1 else pick(words, a))
        for i in range(n_out):
            if L == 1:
                cleared = dr_en & (dr_addr == i)
            elif slotted:
                cleared = dr_en & at_slot[i // L] & at_least(dr_len, i % L + 1)
            else:
                cleared = dr_en & (i < dr_addr + dr_len)
                if i < 2 ** len(dr_addr) - 1:          # (else dr_addr <= i always)
                    cleared = cleared & (dr_addr <= i)
            cleared = wire(m, cleared, f"dr_clr{i}")
            written = wire(m, we_r & (addr_r == i), f"ps_we{i}")
            for b in range(2):
                # (a clear and a write never meet: the bank drained is not the one computed)
                with m.If(cleared & (dr_bank == b)):
                    m.d.sync += regs["output"][b][i].eq(0)
                with m.Elif(written & (bank_r == b)):
                    m.d.sync += regs["output"][b][i].eq(mac)
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

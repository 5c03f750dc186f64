"""One processing element: double-buffered L1 scratchpads for its input and weight tiles, a
double-buffered partial-sum tile, and an int8 x int8 -> int32 multiply-accumulate.

The PE keeps no schedule of its own.  The distribution NoC shows it up to ``W`` words a cycle,
each with its tensor and coordinates; the PE captures every word inside its tile (the tile it is
told for the step being loaded), which is how one word reaches every PE that needs it in the same
cycle.  The compute engine broadcasts tile-local coordinates; the drain reads (and clears) up to
``drain_lanes`` consecutive partial sums of a row a cycle into the reduction tree.
"""

from types import SimpleNamespace

from amaranth.hdl import Array, ClockSignal, Const, Instance, Module, Mux, ResetSignal, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from costmodel.hwgen_preset.rules import LOOP_DIMS, input_span, l1_words

from .common import COORD, tile_extent, wire

__all__ = ["PE", "PE_MODULE", "pe_instance"]

#: The Verilog module name of the PE: every position of the array is an instance of it.
PE_MODULE = "accelgen_pe"

class PE(wiring.Component):
    """A PE sized by its largest tile: ``tile`` gives K C Y X R S maxima and ``max_stride``."""

    def __init__(self, tile: dict[str, int], max_stride: int, lanes: int, simd: int = 1, drain_lanes: int = 1,
                 abits: int = 24, spatial: tuple = (None, None)):
        self.tile = dict(tile)
        self.max_stride = max_stride
        self.lanes = lanes          # NoC words per cycle
        self.simd = simd            # MAC lanes: consecutive filter positions r*S+s of one window
        self.drain_lanes = drain_lanes  # partial sums read a cycle: consecutive words of a row
        self.abits = abits          # L2 word addresses
        self.spatial = tuple(spatial)  # the dimension each level spreads (its units' tiles move along it)
        t = self.tile
        self.in_rows = input_span(t["Y"], max_stride, t["R"])
        self.in_cols = input_span(t["X"], max_stride, t["S"])
        self.words = l1_words(t, max_stride)
        c = COORD
        super().__init__({
            # -- load: the NoC's lanes and this PE's tile of the step being loaded
            "lane_valid": In(1),                        # lanes 0 .. lane_count-1 hold words
            "lane_count": In(8),
            "lane_weight": In(1),                       # tensor on the bus: 0 input, 1 weight
            "lane_addr": In(abits),                     # L2 address of lane 0's word
            "lane_data": In(unsigned(8 * lanes)),
            "ld_bank_in": In(1), "ld_bank_w": In(1),
            "ld_in_base": In(abits), "ld_w_base": In(abits),   # L2 address of this PE's first word
            # the steps being loaded and computed (b0, r1 per loop dim), the layer's sizes and tiles,
            # and where this PE's tiles start from the step's (see tile_extent): it works out its
            # own tiles, so the top level only broadcasts
            **{f"{desc}_{part}_{d}": In(c) for desc in ("ld", "cp") for part in ("b0", "r1") for d in LOOP_DIMS},
            **{f"{name}_{d}": In(c) for name in ("t0", "t1", "dim") for d in LOOP_DIMS},
            "off0": In(c), "off1": In(c),
            "in_plane": In(abits), "in_row": In(abits),        # L2 strides: channel, row
            "w_crs": In(abits), "w_rs": In(abits),             # filter, filter channel
            "filt_r": In(c),
            # -- compute
            "mac_en": In(1),
            "mac_k": In(c), "mac_c": In(c), "mac_y": In(c), "mac_x": In(c),
            "mac_f": In(c),                             # first filter position r*S+s of the lanes
            "filt_s": In(c), "filt_rs": In(c),          # S and R*S of the layer
            "stride_y": In(max(1, max_stride.bit_length())),
            "stride_x": In(max(1, max_stride.bit_length())),
            "cp_bank_in": In(1), "cp_bank_w": In(1), "cp_bank_ps": In(1),
            # -- drain
            "dr_en": In(1), "dr_bank": In(1), "dr_addr": In(c),   # words dr_addr .. dr_addr+dr_len-1
            "dr_len": In(range(drain_lanes + 1)),
            "psum": Out(unsigned(32 * drain_lanes)),              # word j in bits [32j, 32j+32)
        })

    def elaborate(self, platform):
        m = Module()
        t = self.tile
        rows, cols = self.in_rows, self.in_cols
        regs = {
            name: [[Signal(signed(8) if name != "output" else signed(32), name=f"{name}{b}_{i}")
                    for i in range(self.words[name])] for b in range(2)]
            for name in ("input", "weight", "output")
        }

        # ---- this PE's tiles of the step being loaded and of the step being computed --------
        ext = {}
        for desc in ("ld", "cp"):
            for d in LOOP_DIMS:
                off0 = self.off0 if self.spatial[0] == d else Const(0, COORD)
                off1 = self.off1 if self.spatial[1] == d else Const(0, COORD)
                ext[desc, d] = tile_extent(m, f"{desc}_{d}", getattr(self, f"{desc}_b0_{d}"), getattr(self, f"{desc}_r1_{d}"),
                                           getattr(self, f"t0_{d}"), getattr(self, f"t1_{d}"), getattr(self, f"dim_{d}"),
                                           off0, off1)[1]
        ld_kn, ld_cn = ext["ld", "K"], ext["ld", "C"]
        ld_yn = wire(m, Mux(ext["ld", "Y"] > 0, input_span(ext["ld", "Y"], self.stride_y, self.filt_r), 0)[:COORD],
                     "ld_yn", COORD)                                   # input rows and columns
        ld_xn = wire(m, Mux(ext["ld", "X"] > 0, input_span(ext["ld", "X"], self.stride_x, self.filt_s), 0)[:COORD],
                     "ld_xn", COORD)

        # ---- capture from the NoC --------------------------------------------------------
        # The lanes carry consecutive L2 words from lane 0's address.  Each row of L1 words (a
        # run along the innermost dimension) knows its own L2 address, base + constant multiples
        # of the layer's strides; a word's lane is its distance from lane 0.
        A = self.abits
        lanes_len = wire(m, Mux(self.lane_valid, self.lane_count, 0), "lanes_len", 8)
        lane_bits = max(1, (self.lanes - 1).bit_length())
        rows_of = {"input": [], "weight": []}         # (row valid, row - lane 0 address, words)
        c_term = [wire(m, (c_l * self.in_plane)[:A], f"in_c{c_l}", A) for c_l in range(t["C"])]
        y_term = [wire(m, (y_l * self.in_row)[:A], f"in_y{y_l}", A) for y_l in range(rows)]
        for c_l in range(t["C"]):
            for y_l in range(rows):
                rel = wire(m, (self.ld_in_base + c_term[c_l] + y_term[y_l] - self.lane_addr)[:A], f"in_rel_{c_l}_{y_l}", A)
                ok = wire(m, ~self.lane_weight & (c_l < ld_cn) & (y_l < ld_yn), f"in_row_{c_l}_{y_l}")
                rows_of["input"].append((ok, rel, [(x_l, x_l < ld_xn) for x_l in range(cols)]))
        k_term = [wire(m, (k_l * self.w_crs)[:A], f"w_k{k_l}", A) for k_l in range(t["K"])]
        cw_term = [wire(m, (c_l * self.w_rs)[:A], f"w_c{c_l}", A) for c_l in range(t["C"])]
        r_term = [wire(m, (r * self.filt_s)[:A], f"w_r{r}", A) for r in range(t["R"])]
        for k_l in range(t["K"]):
            for c_l in range(t["C"]):
                for r in range(t["R"]):
                    rel = wire(m, (self.ld_w_base + k_term[k_l] + cw_term[c_l] + r_term[r] - self.lane_addr)[:A],
                               f"w_rel_{k_l}_{c_l}_{r}", A)
                    ok = wire(m, self.lane_weight & (k_l < ld_kn) & (c_l < ld_cn) & (r < self.filt_r),
                              f"w_row_{k_l}_{c_l}_{r}")
                    rows_of["weight"].append((ok, rel, [(s_, s_ < self.filt_s) for s_ in range(t["S"])]))
        for name, bank in (("input", self.ld_bank_in), ("weight", self.ld_bank_w)):
            i = 0
            for ok, rel, words in rows_of[name]:
                for inner, inside in words:
                    d = wire(m, (rel + inner)[:A], f"{name}{i}_d", A)
                    hit = wire(m, ok & inside & (d < lanes_len), f"{name}{i}_hit")
                    data = self.lane_data.word_select(d[:lane_bits], 8).as_signed() if self.lanes > 1 \
                        else self.lane_data[:8].as_signed()
                    for b in range(2):
                        with m.If(hit & (bank == b)):
                            m.d.sync += regs[name][b][i].eq(data)
                    i += 1

        # ---- multiply-accumulate: SIMD lanes take consecutive filter positions -----------
        ps_a = wire(m, (self.mac_k * t["Y"] + self.mac_y) * t["X"] + self.mac_x, "ps_a", 16)
        base_in = wire(m, self.mac_c * (rows * cols) + self.mac_y * self.stride_y * cols + self.mac_x * self.stride_x,
                       "base_in", 16)
        base_w = wire(m, (self.mac_k * t["C"] + self.mac_c) * (t["R"] * t["S"]), "base_w", 16)
        max_rs = t["R"] * t["S"]
        products = []
        for lane in range(self.simd):
            f = wire(m, self.mac_f + lane, f"f{lane}", 16)
            r = Signal(range(t["R"] + 1), name=f"r{lane}")
            s_ = Signal(range(t["S"] + 1), name=f"s{lane}")
            with m.Switch(self.filt_s):       # r, s = divmod(f, S) for each S the design allows
                for sv in range(1, t["S"] + 1):
                    with m.Case(sv):
                        m.d.comb += [r.eq(Array([Const(v // sv, r.shape()) for v in range(max_rs)])[f]),
                                     s_.eq(Array([Const(v % sv, s_.shape()) for v in range(max_rs)])[f])]
            in_a = wire(m, base_in + r * cols + s_, f"in_a{lane}", 16)
            w_a = wire(m, base_w + r * t["S"] + s_, f"w_a{lane}", 16)
            x_in = wire(m, Mux(self.cp_bank_in, Array(regs["input"][1])[in_a], Array(regs["input"][0])[in_a]),
                        f"x_in{lane}", signed(8))
            w_in = wire(m, Mux(self.cp_bank_w, Array(regs["weight"][1])[w_a], Array(regs["weight"][0])[w_a]),
                        f"w_in{lane}", signed(8))
            products.append(wire(m, Mux(f < self.filt_rs, x_in * w_in, 0), f"prod{lane}", signed(17)))
        while len(products) > 1:              # the lanes' adder tree
            products = [wire(m, products[i] + products[i + 1], "lane_sum", signed(32)) if i + 1 < len(products)
                        else products[i] for i in range(0, len(products), 2)]
        ps_old = wire(m, Mux(self.cp_bank_ps, Array(regs["output"][1])[ps_a], Array(regs["output"][0])[ps_a]),
                      "ps_old", signed(32))
        inside = wire(m, (self.mac_k < ext["cp", "K"]) & (self.mac_c < ext["cp", "C"])
                      & (self.mac_y < ext["cp", "Y"]) & (self.mac_x < ext["cp", "X"]), "inside")
        mac = Signal(signed(32))
        m.d.comb += mac.eq(ps_old + products[0])

        # ---- drain: read, clear ------------------------------------------------------------
        # (a lane past the row, j >= dr_len, reads a word the drain ignores)
        for j in range(self.drain_lanes):
            a = wire(m, self.dr_addr + j, f"dr_a{j}", 16)
            m.d.comb += self.psum[32 * j: 32 * j + 32].eq(
                Mux(self.dr_bank, Array(regs["output"][1])[a], Array(regs["output"][0])[a]))
        cleared = [wire(m, self.dr_en & (self.dr_addr == i) if self.drain_lanes == 1 else
                        self.dr_en & (self.dr_addr <= i) & ((i - self.dr_addr)[:16] < self.dr_len), f"dr_clr{i}")
                   for i in range(self.words["output"])]
        for b in range(2):
            for i, reg in enumerate(regs["output"][b]):
                with m.If(self.mac_en & inside & (self.cp_bank_ps == b) & (ps_a == i)):
                    m.d.sync += reg.eq(mac)
                with m.Elif(cleared[i] & (self.dr_bank == b)):
                    m.d.sync += reg.eq(0)
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

"""Helpers every part of the generated hardware shares: the coordinate width, named wires, and
constant multiples (shifts and adds) and input spans without a multiplier."""

from __future__ import annotations

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, ResetSignal, Signal, Value, signed

__all__ = ["COORD", "Copies", "NextState", "MUL_ECP5_MACRO", "MUL_MODULE", "MUL_VERILOG", "PIPE_MODULE", "PIPE_VERILOG",
           "READERS_PER_COPY", "by_stride", "fanout", "kept_copy", "multiply", "rotate", "pipe", "registered", "span", "times",
           "wire"]

COORD = 16          # bits of a coordinate or extent


def wire(m: Module, expr, name: str, shape=None) -> Signal:
    """``expr`` as a named wire: Amaranth copies an expression into every place it is used, so
    anything used twice is computed once into a signal."""
    value = Value.cast(expr)
    sig = Signal(shape if shape is not None else value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig


def registered(m: Module, expr, name: str, shape=None, reset_less: bool = False) -> Signal:
    """``expr`` as a named register (the value of the cycle before), like :func:`wire`.
    ``reset_less``: data that a reset need not clear (its readers wait for control registers
    that it does clear): synthesis gives it no reset input, so the reset net's fanout (on an
    ECP5 a net of general routing across the device) shrinks, and its registers pack with
    others whatever their reset."""
    value = Value.cast(expr)
    # (src_loc_at: the register's `src` attribute names the caller, so synthesis reports count
    # it with the part of the design that made it: accelgen.synth's by_source)
    reg = Signal(shape if shape is not None else value.shape(), name=name, reset_less=reset_less, src_loc_at=1)
    m.d.sync += reg.eq(value)
    return reg


#: The Verilog module of :func:`pipe`.
PIPE_MODULE = "accelgen_pipe"
PIPE_VERILOG = f"""\
// {PIPE_MODULE}: a register that synthesis must keep as it is: at the receiving end of a
// broadcast (one per receiver), or a copy of a register beside the logic that reads it.  Copies
// of it have equal inputs; `keep` stops synthesis from merging them back into one register whose
// output carries the fanout and wire length the copy is there to cut.
module {PIPE_MODULE} #(parameter WIDTH = 1) (clk, d, q);
  input  wire             clk;
  input  wire [WIDTH-1:0] d;
  output wire [WIDTH-1:0] q;
  (* keep = "true" *) reg [WIDTH-1:0] r = {{WIDTH{{1'b0}}}};
  (* keep *)
  always @(posedge clk)
    r <= d;
  assign q = r;
endmodule
"""


def pipe(m: Module, expr, name: str, shape=None) -> Signal:
    """``expr`` registered in an instance of :data:`PIPE_MODULE`, initially 0, with no reset,
    that synthesis keeps: at the receiving end of a broadcast every receiver (each PE) keeps its
    own copy, which Yosys and vendor tools would otherwise merge, since they all register the same
    value, so the broadcast's wires run from a register to registers; likewise a copy of a
    register beside one group of its readers (``Geometry.operand``)."""
    value = Value.cast(expr)
    shape = shape if shape is not None else value.shape()
    q = Signal(shape, name=name)
    _pipe_instance(m, value, q)
    return q


def _pipe_instance(m: Module, value, q: Signal) -> None:
    d = wire(m, value, f"{q.name}_d", q.shape())
    # (src_loc_at: the instance's `src` attribute names the code that asked for the register,
    # two calls up, not this line: accelgen.synth's by_source)
    m.submodules[f"{q.name}_pipe"] = Instance(PIPE_MODULE, p_WIDTH=len(q), i_clk=ClockSignal("sync"), i_d=d, o_q=q,
                                              src_loc_at=2)


#: Readers (L2 banks, NoC lanes, PEs) that one kept copy of a register serves, where the one
#: register would reach all of them across the device (:class:`Copies`)
READERS_PER_COPY = 8


class Copies(list):
    """Kept copies of a register for ``count`` readers, one for each :data:`READERS_PER_COPY`
    of them (at least one), ``make(i)`` making copy ``i``; :meth:`of` gives a reader its copy."""

    def __init__(self, count: int, make):
        super().__init__(make(i) for i in range(max(1, count // READERS_PER_COPY)))
        self.count = count

    def of(self, reader: int):
        return self[reader * len(self) // self.count]


def fanout(m: Module, d, name: str, readers: int, shape=None, *, clear: bool = False) -> Copies:
    """A register that ``readers`` spread over the device read (the PEs), as kept copies, one
    for each :data:`READERS_PER_COPY` of them (:class:`Copies`), each taking ``d`` (the
    register's next value) at the clock edge as the one register would: the same stage, no cycle
    more, and each copy's net reaches its group only (on ``small`` one register's wire to a far
    PE's input register was 13.3 ns).  ``clear``: a control bit the reset clears (a copy has no
    reset: it takes 0 while the reset is asserted)."""
    value = Value.cast(d)
    shape = shape if shape is not None else value.shape()
    if clear:
        value = value & ~ResetSignal()
    return Copies(readers, lambda i: pipe(m, value, f"{name}_f{i}", shape))


def kept_copy(m: Module, name: str, shape, updates, q: Signal | None = None) -> Signal:
    """A register that synthesis keeps apart from its twin, which takes the same ``updates``
    (``(condition, value)`` pairs, the first true one taken; else it holds): a copy of a
    register for one group of its readers, so the twin's fanout stays with its own.  ``updates``
    may be a function of the copy (an update that adds to the register adds to its own copy).
    ``q``: a signal made before the updates could be (the copy is then that signal)."""
    q = Signal(shape, name=name) if q is None else q
    if callable(updates):
        updates = updates(q)
    d = q
    for cond, value in reversed(updates):
        d = Mux(cond, value, d)
    _pipe_instance(m, d, q)
    return q


#: The Verilog module of :func:`multiply`.
MUL_MODULE = "accelgen_mul"
_MUL_REGS = """\
    begin : {block}
      reg {kind}[AW-1:0] a_r = 0;
      reg {kind}[BW-1:0] b_r = 0;
      reg {kind}[PW-1:0] p_r = 0;
      always @(posedge clk) begin
        if (ce_a) a_r <= a;
        if (ce_b) b_r <= b;
        if (ce_p) p_r <= a_r * b_r;
      end
      assign p = p_r;
    end"""
_MUL_BEHAVIOUR = ("    if (SIGNED)\n" + _MUL_REGS.format(block="smul", kind="signed ") + " else\n"
                  + _MUL_REGS.format(block="umul", kind="") + "\n")
#: The macro that maps :data:`MUL_MODULE` onto an ECP5 ``MULT18X18D`` with its own registers
#: (``accelgen.synth`` defines it for the ``ecp5`` target): Yosys 0.23 maps a product to the
#: block but leaves the registers around it in the fabric, about 3.5 ns of wire away on each side.
MUL_ECP5_MACRO = "ACCELGEN_ECP5_DSP"
MUL_VERILOG = f"""\
// {MUL_MODULE}: p = a * b (SIGNED: both signed), PW bits, with a register at each input (taken
// when ce_a, ce_b) and one at the output (taken when ce_p): two cycles from a and b to p.  The
// registers have no reset; they start at 0.  With `define {MUL_ECP5_MACRO} (ECP5, operands of at
// most 18 bits) it is one MULT18X18D whose own registers are these, so its paths are the wires
// to and from the block, not also the multiplier; otherwise any tool maps the behaviour.
module {MUL_MODULE} #(parameter AW = 16, parameter BW = 16, parameter PW = 32, parameter SIGNED = 0)
    (clk, ce_a, ce_b, ce_p, a, b, p);
  input  wire          clk;
  input  wire          ce_a;
  input  wire          ce_b;
  input  wire          ce_p;
  input  wire [AW-1:0] a;
  input  wire [BW-1:0] b;
  output wire [PW-1:0] p;
  generate
`ifdef {MUL_ECP5_MACRO}
    if (AW <= 18 && BW <= 18 && PW <= 36) begin : dsp
      wire [17:0] a_x = SIGNED ? {{{{(18-AW){{a[AW-1]}}}}, a}} : {{{{(18-AW){{1'b0}}}}, a}};
      wire [17:0] b_x = SIGNED ? {{{{(18-BW){{b[BW-1]}}}}, b}} : {{{{(18-BW){{1'b0}}}}, b}};
      wire [35:0] p_x;
      MULT18X18D #(.REG_INPUTA_CLK("CLK0"), .REG_INPUTA_CE("CE0"), .REG_INPUTA_RST("RST0"),
                   .REG_INPUTB_CLK("CLK0"), .REG_INPUTB_CE("CE1"), .REG_INPUTB_RST("RST0"),
                   .REG_OUTPUT_CLK("CLK0"), .REG_OUTPUT_CE("CE2"), .REG_OUTPUT_RST("RST0"),
                   .GSR("DISABLED"), .RESETMODE("SYNC")) mult (
        .A0(a_x[0]), .A1(a_x[1]), .A2(a_x[2]), .A3(a_x[3]), .A4(a_x[4]), .A5(a_x[5]), .A6(a_x[6]), .A7(a_x[7]), .A8(a_x[8]), .A9(a_x[9]), .A10(a_x[10]), .A11(a_x[11]), .A12(a_x[12]), .A13(a_x[13]), .A14(a_x[14]), .A15(a_x[15]), .A16(a_x[16]), .A17(a_x[17]),
        .B0(b_x[0]), .B1(b_x[1]), .B2(b_x[2]), .B3(b_x[3]), .B4(b_x[4]), .B5(b_x[5]), .B6(b_x[6]), .B7(b_x[7]), .B8(b_x[8]), .B9(b_x[9]), .B10(b_x[10]), .B11(b_x[11]), .B12(b_x[12]), .B13(b_x[13]), .B14(b_x[14]), .B15(b_x[15]), .B16(b_x[16]), .B17(b_x[17]),
        .C0(1'b0), .C1(1'b0), .C2(1'b0), .C3(1'b0), .C4(1'b0), .C5(1'b0), .C6(1'b0), .C7(1'b0), .C8(1'b0), .C9(1'b0), .C10(1'b0), .C11(1'b0), .C12(1'b0), .C13(1'b0), .C14(1'b0), .C15(1'b0), .C16(1'b0), .C17(1'b0),
        .SIGNEDA(SIGNED ? 1'b1 : 1'b0), .SIGNEDB(SIGNED ? 1'b1 : 1'b0), .SOURCEA(1'b0), .SOURCEB(1'b0),
        .CLK0(clk), .CLK1(1'b0), .CLK2(1'b0), .CLK3(1'b0), .CE0(ce_a), .CE1(ce_b), .CE2(ce_p), .CE3(1'b0),
        .RST0(1'b0), .RST1(1'b0), .RST2(1'b0), .RST3(1'b0),
        .P0(p_x[0]), .P1(p_x[1]), .P2(p_x[2]), .P3(p_x[3]), .P4(p_x[4]), .P5(p_x[5]), .P6(p_x[6]), .P7(p_x[7]), .P8(p_x[8]), .P9(p_x[9]), .P10(p_x[10]), .P11(p_x[11]), .P12(p_x[12]), .P13(p_x[13]), .P14(p_x[14]), .P15(p_x[15]), .P16(p_x[16]), .P17(p_x[17]), .P18(p_x[18]), .P19(p_x[19]), .P20(p_x[20]), .P21(p_x[21]), .P22(p_x[22]), .P23(p_x[23]), .P24(p_x[24]), .P25(p_x[25]), .P26(p_x[26]), .P27(p_x[27]), .P28(p_x[28]), .P29(p_x[29]), .P30(p_x[30]), .P31(p_x[31]), .P32(p_x[32]), .P33(p_x[33]), .P34(p_x[34]), .P35(p_x[35]));
      assign p = p_x[PW-1:0];
    end else
`endif
{_MUL_BEHAVIOUR}  endgenerate
endmodule
"""


def rotate(m: Module, words: list, by, name: str, shape, *, down: bool = False, stages=None) -> list:
    """``words`` rotated by the run-time amount ``by`` (its low lg(len(words)) bits; a power of
    two of words): word ``j`` of the result is ``words[(j + by) mod n]``, or ``words[(j - by) mod
    n]`` when ``down``.  lg(n) stages of two-way choices (each word moved by 2^k places or kept),
    not an n-way choice per word; each stage a named wire, since Amaranth copies an expression
    into every place it is used and each stage reads the one before twice.  ``by`` may be a list
    of equal copies (:func:`pipe`, a power of two of them), copy ``i`` choosing the ``i``-th
    group of positions in every stage, so no one net drives the choices of all the words.
    ``stages`` (a range of bit numbers; all of them by default): a part of the rotation, so a
    register may stand between two parts."""
    n = len(words)
    assert n & (n - 1) == 0, "a power of two of words"
    copies = [Value.cast(c) for c in by] if isinstance(by, (list, tuple)) else [Value.cast(by)]
    assert len(copies) & (len(copies) - 1) == 0 and len(copies) <= n, "a power of two of copies, at most one a word"
    per = n // len(copies)
    sign = -1 if down else 1
    for k in (range((n - 1).bit_length()) if stages is None else stages):
        words = [wire(m, Mux(copies[j // per][k], words[(j + sign * (1 << k)) % n], words[j]), f"{name}{k}_{j}", shape)
                 for j in range(n)]
    return words


def multiply(m: Module, a, b, width: int, name: str, *, both_signed: bool = False, ce_a=1, ce_b=1,
             ce_p=1) -> Signal:
    """``a * b`` (``width`` bits; ``both_signed``: both operands signed) as an instance of
    :data:`MUL_MODULE`: ``a`` and ``b`` registered (when ``ce_a``, ``ce_b``), their product
    registered (when ``ce_p``), so two cycles later; an FPGA maps it onto one multiplier block
    with those registers inside it."""
    a, b = Value.cast(a), Value.cast(b)
    p = Signal(signed(width) if both_signed else width, name=name)
    m.submodules[f"{name}_mul"] = Instance(
        MUL_MODULE, p_AW=len(a), p_BW=len(b), p_PW=width, p_SIGNED=int(both_signed), i_clk=ClockSignal("sync"),
        i_ce_a=Value.cast(ce_a), i_ce_b=Value.cast(ce_b), i_ce_p=Value.cast(ce_p),
        i_a=wire(m, a, f"{name}_a", len(a)), i_b=wire(m, b, f"{name}_b", len(b)), o_p=p)
    return p


def times(k: int, x):
    """``k * x`` for a constant ``k >= 0``, as shifts and adds (a tree, so about log2 of ``k``'s
    set bits deep): Yosys maps a product by a constant to a DSP multiplier, which an FPGA keeps
    for the MACs.  The result is wide enough for any ``x``."""
    assert k >= 0
    x = Value.cast(x)
    terms = [x.as_unsigned() << b for b in range(k.bit_length()) if k >> b & 1]
    if not terms:
        return Const(0, 1)
    while len(terms) > 1:
        terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
    return terms[0]


def by_stride(x, stride, max_stride: int):
    """``x * stride`` for a run-time ``stride`` of 1 to ``max_stride``: one mux (indexed by the
    stride, balanced) over the constant multiples (shifts and adds), not a multiplier, since a
    stride is small."""
    x = Value.cast(x)
    options = [times(k, x) for k in range(1, max_stride + 1)]
    if max_stride == 1:
        return options[0]
    width = max(len(o) for o in options)
    index = (Value.cast(stride) - 1)[:max(1, (max_stride - 1).bit_length())]
    padded = options + [options[-1]] * (2 ** len(index) - len(options))
    return Cat(*[Cat(o, Const(0, width - len(o))) if len(o) < width else o for o in padded]).word_select(index, width)


def span(n, stride, filt, max_stride: int):
    """Input rows (or columns) that ``n >= 1`` outputs read, ``(n - 1) * stride + filt``
    (``costmodel.hwgen_preset.rules.input_span``), for a run-time ``stride`` of at most the
    design's ``max_stride``: ``n * stride`` (:func:`by_stride`) plus ``filt - stride``, the
    difference beside the multiples rather than ``n - 1`` before them."""
    return by_stride(n, stride, max_stride) + (Value.cast(filt) - stride)


class NextState:
    """Next-state wires for some registers: ``nx += stmts`` drives them (the rest of
    ``stmts`` goes to the sync domain as usual), ``nx[reg]`` is the value ``reg`` takes at the
    clock edge, and each register keeps its value unless assigned."""

    def __init__(self, m: Module, regs: list):
        self.m = m
        self.next = {id(r): Signal.like(r, name=f"{r.name}_next") for r in regs}
        for r in regs:
            m.d.comb += self.next[id(r)].eq(r)
            m.d.sync += r.eq(self.next[id(r)])

    def __getitem__(self, reg):
        return self.next[id(reg)]

    def __iadd__(self, stmts):
        for stmt in stmts if isinstance(stmts, (list, tuple)) else [stmts]:
            target = self.next.get(id(stmt.lhs)) if isinstance(stmt.lhs, Signal) else None
            if target is not None:
                self.m.d.comb += target.eq(stmt.rhs)
            else:
                self.m.d.sync += stmt
        return self

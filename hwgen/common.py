"""Helpers every part of the generated hardware shares: the coordinate width, named wires, and
constant multiples (shifts and adds) and input spans without a multiplier."""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Const, Instance, Module, Mux, Signal, Value

__all__ = ["COORD", "PIPE_MODULE", "PIPE_VERILOG", "pipe", "registered", "span", "times", "wire"]

COORD = 16          # bits of a coordinate or extent


def wire(m: Module, expr, name: str, shape=None) -> Signal:
    """``expr`` as a named wire: Amaranth copies an expression into every place it is used, so
    anything used twice is computed once into a signal."""
    value = Value.cast(expr)
    sig = Signal(shape if shape is not None else value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig


def registered(m: Module, expr, name: str, shape=None) -> Signal:
    """``expr`` as a named register (the value of the cycle before), like :func:`wire`."""
    value = Value.cast(expr)
    reg = Signal(shape if shape is not None else value.shape(), name=name)
    m.d.sync += reg.eq(value)
    return reg


#: The Verilog module of :func:`pipe`.
PIPE_MODULE = "accelgen_pipe"
PIPE_VERILOG = f"""\
// {PIPE_MODULE}: a register at the receiving end of a broadcast, one per receiver.  Copies of it
// have equal inputs; `keep` stops synthesis from merging them back into one register whose
// output carries the broadcast's fanout and wire length.
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
    """``expr`` registered at the receiving end of a broadcast (an instance of
    :data:`PIPE_MODULE`, initially 0, with no reset): every receiver (each PE) keeps its own
    copy, which Yosys and vendor tools would otherwise merge, since they all register the same
    value.  The broadcast's wires then run from a register to registers."""
    value = Value.cast(expr)
    shape = shape if shape is not None else value.shape()
    d = wire(m, value, f"{name}_d", shape)
    q = Signal(shape, name=name)
    m.submodules[f"{name}_pipe"] = Instance(PIPE_MODULE, p_WIDTH=len(q), i_clk=ClockSignal("sync"), i_d=d, o_q=q)
    return q


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


def span(n, stride, filt, max_stride: int):
    """Input rows (or columns) that ``n >= 1`` outputs read, ``(n - 1) * stride + filt``
    (``costmodel.hwgen_preset.rules.input_span``), for a run-time ``stride`` of at most the
    design's ``max_stride``: a mux over the constant multiples (shifts and adds), not a
    multiplier, since a stride is small."""
    n1 = (Value.cast(n) - 1)[:len(Value.cast(n))]
    prod = times(max_stride, n1)
    for k in reversed(range(1, max_stride)):
        prod = Mux(stride == k, times(k, n1), prod)
    return prod + filt

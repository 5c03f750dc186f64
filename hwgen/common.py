"""Helpers every part of the generated hardware shares: the coordinate width, named wires, and
constant multiples (shifts and adds) and input spans without a multiplier."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, Value

__all__ = ["COORD", "wire", "registered", "span", "times"]

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

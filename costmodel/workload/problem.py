"""The analysed problem of a layer: its loop dimensions, the tensors each dimension indexes, and
which input dimensions slide over which filter dimensions.

This is the one place that knows how a convolution or a GEMM becomes loops and tensors; the
analysis itself is generic over it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

from .layers import GEMM, Conv2D, Layer, analysed_layer

__all__ = ["Tensor", "Problem", "problem_of", "problems_of", "CONV_TENSOR_DIMS"]

#: Which dimensions index which tensor of a dense convolution (``Y``/``X``: rows and columns of
#: the tensor itself, so the input's are input coordinates and the output's output coordinates).
CONV_TENSOR_DIMS: dict[str, tuple[str, ...]] = {
    "input": ("C", "Y", "X"), "weight": ("K", "C", "R", "S"), "output": ("K", "Y", "X")}


@dataclass(frozen=True)
class Tensor:
    name: str                 # "input", "weight" or "output"
    dims: tuple[str, ...]     # dimensions that index it (input coordinates for convolutions)
    is_output: bool = False


@dataclass(frozen=True)
class Problem:
    """Loop dims (``Y``/``X`` in input coordinates plus the derived output ``Y'``/``X'``),
    tensors, and overlaps ``{reference dim: sliding dim}`` (``Y`` slides over ``R``)."""

    kind: str                           # "conv2d" or "gemm"
    layer_type: str                     # MAESTRO's: CONV, DSCONV, GEMM
    dims: dict[str, int]
    tensors: tuple[Tensor, ...]
    overlaps: dict[str, str]
    strides: dict[str, int] = field(default_factory=dict)   # per reference dim, e.g. {"Y": 2}
    allowed_dims: tuple[str, ...] = ()
    repeat: int = 1                     # how many times the analysed problem runs for the layer

    # Derived once per problem (the analysis reads them for every level and sub-problem).
    @cached_property
    def inputs(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.tensors if not t.is_output)

    @cached_property
    def output(self) -> Tensor:
        return next(t for t in self.tensors if t.is_output)

    def input_vars(self) -> list[str]:
        """Every dimension some input tensor is indexed by, sorted (MAESTRO's order for the
        directives it adds for unmentioned dimensions)."""
        return sorted({d for t in self.inputs for d in t.dims})


def _tensor_table() -> dict[tuple[str, tuple[str, ...]], tuple[Tensor, ...]]:
    """The tensors of a dense convolution (``conv2d``), a depthwise one and a GEMM, by kind and
    batch dimension (if any): immutable, so each combination is built once."""
    table = {}
    for b in ((), ("N",)):
        table["conv2d", b] = (Tensor("input", b + CONV_TENSOR_DIMS["input"]),
                              Tensor("weight", CONV_TENSOR_DIMS["weight"]),
                              Tensor("output", b + CONV_TENSOR_DIMS["output"], is_output=True))
        table["depthwise", b] = (Tensor("input", b + ("C", "Y", "X")), Tensor("weight", ("C", "R", "S")),
                                 Tensor("output", b + ("C", "Y", "X"), is_output=True))
    for b in ((), ("B",)):
        table["gemm", b] = (Tensor("input", b + ("M", "K")), Tensor("weight", b + ("K", "N")),
                            Tensor("output", b + ("M", "N"), is_output=True))
    return table


_TENSOR_SETS = _tensor_table()


def _phases(out: int, stride: int, dilation: int) -> tuple[int, tuple[tuple[int, int], ...]]:
    """A dilated axis as interleaved undilated convolutions: their stride, and ``(outputs, count)``
    per length of them (at most two lengths, the longer first).

    Output ``y`` reads rows ``y*stride + r*dilation``.  With ``g = gcd(stride, dilation)`` only
    every g-th row is read; of those, the outputs ``y = j (mod dilation/g)`` (phase ``j``) read one
    residue class of rows with the undilated filter and stride ``stride/g``.  The classes are
    disjoint, so the axis is exactly the sum of ``dilation/g`` undilated convolutions: the first
    ``out % (dilation/g)`` phases have one output more than the others."""
    g = math.gcd(stride, dilation)
    step, classes = stride // g, dilation // g
    short, longer = divmod(out, classes)     # `longer` phases of short + 1 outputs, the rest of short
    return step, tuple((n, count) for n, count in ((short + 1, longer), (short, classes - longer)) if n and count)


def problem_of(layer: Layer, *, with_batch: bool = False) -> Problem:
    """The analysed problem of a layer that is one (every layer but a dilated convolution whose
    phases differ in length, see :func:`problems_of`)."""
    parts = problems_of(layer, with_batch=with_batch)
    if len(parts) != 1:
        raise ValueError(f"layer {layer.name!r} is analysed as {len(parts)} problems, not one; use problems_of")
    return parts[0]


def problems_of(layer: Layer, *, with_batch: bool = False) -> tuple[Problem, ...]:
    """The analysed problems of one layer, run one after another: one group of a grouped
    convolution, and one batch item of a batched GEMM unless ``with_batch`` (the dataflow maps the
    batch ``B``); ``repeat`` says how many times each runs.  For convolutions ``with_batch`` keeps
    a batch ``N`` of size 1 (a dataflow that names ``N``); a batch larger than 1 is always
    analysed.  A transposed convolution is analysed as its equivalent direct one; a dilated axis
    as interleaved undilated convolutions (:func:`_phases`): one problem when they are equally
    long, else one per length (two per axis, so at most four), each exact."""
    layer = analysed_layer(layer)
    dims = layer.dims()
    if isinstance(layer, GEMM):
        tensors = _TENSOR_SETS["gemm", ("B",) if with_batch else ()]
        if with_batch:
            dims = {"B": layer.batch, **dims}
        return (Problem("gemm", "GEMM", dict(dims), tensors, {}, {}, ("B", "M", "N", "K"),
                        1 if with_batch else layer.batch),)
    assert isinstance(layer, Conv2D)
    batch = with_batch or dims["N"] > 1
    n = ("N",) if batch else ()
    if not batch:
        dims = {k: v for k, v in dims.items() if k != "N"}
    tensors = _TENSOR_SETS["depthwise" if layer.depthwise else "conv2d", n]
    axes = []       # per axis: (reference dim, filter dim, stride, dilated, (outputs, count) per length)
    for ref, filt, out, stride, dilation in (("Y", "R", layer.Yo, layer.stride_y, layer.dilation_y),
                                             ("X", "S", layer.Xo, layer.stride_x, layer.dilation_x)):
        assert stride is not None and dilation is not None
        step, lengths = _phases(out, stride, dilation)
        axes.append((ref, filt, step, dilation > 1, lengths))
    allowed = ("N", "K", "C", "Y", "X", "R", "S", "Y'", "X'")
    (ref_y, filt_y, step_y, dil_y, ys), (ref_x, filt_x, step_x, dil_x, xs) = axes
    parts = []
    for (out_y, count_y), (out_x, count_x) in ((y, x) for y in ys for x in xs):
        full = dict(dims)
        strides = {}
        for ref, filt, step, dilated, out in ((ref_y, filt_y, step_y, dil_y, out_y),
                                              (ref_x, filt_x, step_x, dil_x, out_x)):
            if step > dims[filt]:
                # Windows further apart than they are wide never touch the rows between them:
                # analyse only the rows some window reads, back to back (stride = filter size).
                full[ref] = out * dims[filt]
                strides[ref] = dims[filt]
            else:
                full[ref] = (out - 1) * step + dims[filt] if dilated else dims[ref]
                strides[ref] = step
            full[ref + "'"] = out
        parts.append(Problem("conv2d", layer.layer_type, full, tensors, {"Y": "R", "X": "S"}, strides, allowed,
                             layer.repeat * count_y * count_x))
    return tuple(parts)

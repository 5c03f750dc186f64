"""The analysed problem of a layer: its loop dimensions, the tensors each dimension indexes, and
which input dimensions slide over which filter dimensions.

This is the one place that knows how a convolution or a GEMM becomes loops and tensors; the
analysis itself is generic over it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..base import AccelgenError
from .layers import GEMM, Conv2D, Layer, analysed_layer

__all__ = ["Tensor", "Problem", "problem_of", "CONV_TENSOR_DIMS"]

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

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.tensors if not t.is_output)

    @property
    def output(self) -> Tensor:
        return next(t for t in self.tensors if t.is_output)

    def input_vars(self) -> list[str]:
        """Every dimension some input tensor is indexed by, sorted (MAESTRO's order for the
        directives it adds for unmentioned dimensions)."""
        return sorted({d for t in self.inputs for d in t.dims})


def _dilated_axis(layer: Conv2D, axis: str, out: int, stride: int, dilation: int, filt: int) -> tuple[int, int, int]:
    """A dilated axis as interleaved undilated convolutions: ``(input rows, stride, count)`` of one.

    Output ``y`` reads rows ``y*stride + r*dilation``.  With ``g = gcd(stride, dilation)`` only
    every g-th row is read; of those, the outputs ``y = j (mod dilation/g)`` read one residue
    class of rows with the undilated filter and stride ``stride/g``.  The classes are disjoint, so
    the analysis runs one of them ``dilation/g`` times, which is exact (MACs and traffic) when
    every class has the same number of outputs."""
    g = math.gcd(stride, dilation)
    step, classes = stride // g, dilation // g
    if out == 1:
        classes = 1
    if out % classes:
        dim = "Y'" if axis == "y" else "X'"
        raise AccelgenError(
            f"dilation_{axis}={dilation} with stride_{axis}={stride} interleaves {classes} undilated "
            f"convolutions, which the step model analyses exactly only when {dim}={out} is a multiple of "
            f"{classes}; pad the input to such a size, or use dilation 1", where=f"layer {layer.name!r}")
    sub = out // classes
    return (sub - 1) * step + filt, step, classes


def problem_of(layer: Layer, *, with_batch: bool = False) -> Problem:
    """The analysed problem of one layer: one group of a grouped convolution, and one batch item
    of a batched GEMM unless ``with_batch`` (the dataflow maps the batch ``B``); ``repeat`` says
    how many times it runs.  For convolutions ``with_batch`` keeps a batch ``N`` of size 1 (a
    dataflow that names ``N``); a batch larger than 1 is always analysed.  A transposed
    convolution is analysed as its equivalent direct one; a dilated axis as interleaved
    undilated convolutions (:func:`_dilated_axis`)."""
    layer = analysed_layer(layer)
    dims = layer.dims()
    if isinstance(layer, GEMM):
        b = ("B",) if with_batch else ()
        tensors = (Tensor("input", b + ("M", "K")), Tensor("weight", b + ("K", "N")),
                   Tensor("output", b + ("M", "N"), is_output=True))
        if with_batch:
            dims = {"B": layer.batch, **dims}
        return Problem("gemm", "GEMM", dict(dims), tensors, {}, {}, ("B", "M", "N", "K"),
                       1 if with_batch else layer.batch)
    assert isinstance(layer, Conv2D)
    batch = with_batch or dims["N"] > 1
    n = ("N",) if batch else ()
    if not batch:
        dims = {k: v for k, v in dims.items() if k != "N"}
    if layer.depthwise:
        tensors = (Tensor("input", n + ("C", "Y", "X")), Tensor("weight", ("C", "R", "S")),
                   Tensor("output", n + ("C", "Y", "X"), is_output=True))
    else:
        tensors = (Tensor("input", n + CONV_TENSOR_DIMS["input"]), Tensor("weight", CONV_TENSOR_DIMS["weight"]),
                   Tensor("output", n + CONV_TENSOR_DIMS["output"], is_output=True))
    full = dict(dims)
    strides = {}
    repeat = layer.repeat
    for ref, filt, out, stride, dilation in (("Y", "R", layer.Yo, layer.stride_y, layer.dilation_y),
                                             ("X", "S", layer.Xo, layer.stride_x, layer.dilation_x)):
        rows = dims[ref]
        assert stride is not None and dilation is not None
        if dilation > 1:
            rows, stride, classes = _dilated_axis(layer, ref.lower(), out, stride, dilation, dims[filt])
            out //= classes
            repeat *= classes
        if stride > dims[filt]:
            # Windows further apart than they are wide never touch the rows between them:
            # analyse only the rows some window reads, back to back (stride = filter size).
            full[ref] = out * dims[filt]
            strides[ref] = dims[filt]
        else:
            full[ref] = rows
            strides[ref] = stride
        full[ref + "'"] = out
    allowed = ("N", "K", "C", "Y", "X", "R", "S", "Y'", "X'")
    return Problem("conv2d", layer.layer_type, full, tensors, {"Y": "R", "X": "S"}, strides, allowed,
                   repeat)

"""One ONNX node -> one layer's fields (:mod:`.onnx_import` walks the graph), and the MACs of
the nodes that multiply but have no layer here.

* ``Conv`` (``ConvInteger``, ``QLinearConv``), 1-D or 2-D: per-axis strides, dilations and exact
  per-side pads (``auto_pad`` resolved); a 1-D convolution is a 2-D one of height 1.
* ``ConvTranspose``: a convtranspose2d layer (pads, ``output_padding``, ``output_shape`` and
  ``auto_pad`` resolved as the operator defines them).
* ``Gemm`` after ``transA``/``transB``; ``MatMul`` with its leading dimensions as rows (a shared
  right operand) or as the batch (attention).
* Not modelled, counted: ``LSTM``/``GRU``/``RNN`` ``seq * batch * (|W| + |R|)`` (every gate's
  input and recurrent matrix-vector product), ``Einsum`` the product of every index's size (one
  MAC per point of the index space, for two or more operands), ``Attention`` ``B * H * Sq * Skv *
  (Dqk + Dv)``, ``DeformConv`` its convolution's MACs (the bilinear sampling not counted).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..base import AccelgenError
from .onnx_graph import Shapes

__all__ = ["attributes", "conv_fields", "conv_transpose_fields", "gemm_fields", "matmul_fields", "unmodelled_macs"]


def attributes(onnx: Any, node: Any) -> dict[str, Any]:
    out = {}
    for attr in node.attribute:
        value = onnx.helper.get_attribute_value(attr)
        out[attr.name] = value.decode() if isinstance(value, bytes) else value
    return out


def _ints(attrs: dict[str, Any], key: str, axes: int, minimum: int, where: str) -> list[int]:
    values = list(attrs.get(key, [minimum] * axes))
    if len(values) != axes or min(values) < minimum:
        what = "positive" if minimum else "non-negative"
        raise AccelgenError(f"{key} must be {axes} {what} integers, not {values!r}", where=where)
    return values


def _conv_pads(attrs: dict[str, Any], size: list[int], window: list[int], strides: list[int],
               where: str) -> tuple[list[int], list[int]]:
    """Padding before and after each spatial axis of a convolution, ``auto_pad`` resolved."""
    axes = len(size)
    auto = attrs.get("auto_pad", "NOTSET")
    if auto == "NOTSET":
        pads = _ints(attrs, "pads", 2 * axes, 0, where)
        return pads[:axes], pads[axes:]
    if auto == "VALID":
        return [0] * axes, [0] * axes
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise AccelgenError(f"auto_pad must be NOTSET, VALID, SAME_UPPER or SAME_LOWER, not {auto!r}", where=where)
    totals = [max((-(-n // s) - 1) * s + k - n, 0) for n, k, s in zip(size, window, strides)]
    small = [t // 2 for t in totals]
    large = [t - h for t, h in zip(totals, small)]
    return (small, large) if auto == "SAME_UPPER" else (large, small)


def _window(onnx: Any, node: Any, x: tuple[int, ...], w: tuple[int, ...], where: str,
            op: str) -> tuple[dict[str, Any], int, list[int], list[int], list[int]]:
    axes = len(x) - 2
    if axes not in (1, 2) or len(w) != len(x):
        raise AccelgenError(f"only 1-D and 2-D {op}s are modelled; input {list(x)}, weight {list(w)}", where=where)
    attrs = attributes(onnx, node)
    kernel = list(w[2:])
    return attrs, axes, kernel, _ints(attrs, "strides", axes, 1, where), _ints(attrs, "dilations", axes, 1, where)


def _as_2d(axes: int, *per_axis: list[int], neutral: tuple[int, ...]) -> list[list[int]]:
    """1-D values as 2-D ones of height 1 (``neutral`` gives the height axis's value of each)."""
    return [list(v) if axes == 2 else [n, *v] for v, n in zip(per_axis, neutral)]


def _pad_fields(begins: list[int], ends: list[int]) -> dict[str, int]:
    return {"pad_top": begins[0], "pad_bottom": ends[0], "pad_left": begins[1], "pad_right": ends[1]}


def conv_fields(onnx: Any, node: Any, x: tuple[int, ...], w: tuple[int, ...], where: str) -> dict[str, Any]:
    attrs, axes, kernel, strides, dilations = _window(onnx, node, x, w, where, "convolution")
    n, c, *size = x
    k, c_per_group = w[0], w[1]
    group = attrs.get("group", 1)
    if c_per_group * group != c:
        raise AccelgenError(f"the weight has {c_per_group} input channels per group and group={group}, "
                            f"but the input has {c} channels", where=where)
    window = [d * (r - 1) + 1 for d, r in zip(dilations, kernel)]
    begins, ends = _conv_pads(attrs, size, window, strides, where)
    size, kernel, strides, dilations, begins, ends = _as_2d(
        axes, size, kernel, strides, dilations, begins, ends, neutral=(1, 1, 1, 1, 0, 0))
    return {"type": "conv2d", "N": n, "K": k, "C": c, "Y": size[0], "X": size[1], "R": kernel[0],
            "S": kernel[1], "stride_y": strides[0], "stride_x": strides[1], "dilation_y": dilations[0],
            "dilation_x": dilations[1], "groups": group, **_pad_fields(begins, ends)}


def conv_transpose_fields(onnx: Any, node: Any, x: tuple[int, ...], w: tuple[int, ...], where: str) -> dict[str, Any]:
    attrs, axes, kernel, strides, dilations = _window(onnx, node, x, w, where, "transposed convolution")
    n, c, *size = x
    if w[0] != c:
        raise AccelgenError(f"the weight has {w[0]} input channels, the input {c}", where=where)
    group = attrs.get("group", 1)
    k = w[1] * group
    extra = _ints(attrs, "output_padding", axes, 0, where) if "output_padding" in attrs else [0] * axes
    full = [s * (length - 1) + e + d * (r - 1) + 1 for s, length, e, d, r in zip(strides, size, extra, dilations, kernel)]
    auto = attrs.get("auto_pad", "NOTSET")
    if "output_shape" in attrs or auto in ("SAME_UPPER", "SAME_LOWER"):
        target = list(attrs["output_shape"])[-axes:] if "output_shape" in attrs else [length * s for length, s in
                                                                                       zip(size, strides)]
        totals = [f - t for f, t in zip(full, target)]
        if min(totals) < 0:
            raise AccelgenError(f"output_shape {target} is larger than the full output {full}; expected at most it",
                                where=where)
        half = [t // 2 for t in totals]
        begins, ends = (half, [t - h for t, h in zip(totals, half)]) if auto == "SAME_UPPER" else \
            ([t - h for t, h in zip(totals, half)], half)
    elif auto == "VALID":
        begins, ends = [0] * axes, [0] * axes
    elif auto == "NOTSET":
        pads = _ints(attrs, "pads", 2 * axes, 0, where)
        begins, ends = pads[:axes], pads[axes:]
    else:
        raise AccelgenError(f"auto_pad must be NOTSET, VALID, SAME_UPPER or SAME_LOWER, not {auto!r}", where=where)
    size, kernel, strides, dilations, begins, ends, extra = _as_2d(
        axes, size, kernel, strides, dilations, begins, ends, extra, neutral=(1, 1, 1, 1, 0, 0, 0))
    return {"type": "convtranspose2d", "N": n, "K": k, "C": c, "Y": size[0], "X": size[1], "R": kernel[0],
            "S": kernel[1], "stride_y": strides[0], "stride_x": strides[1], "dilation_y": dilations[0],
            "dilation_x": dilations[1], "groups": group, "output_pad_y": extra[0], "output_pad_x": extra[1],
            **_pad_fields(begins, ends)}


def gemm_fields(onnx: Any, node: Any, a: tuple[int, ...], b: tuple[int, ...], where: str) -> dict[str, Any]:
    if len(a) != 2 or len(b) != 2:
        raise AccelgenError(f"Gemm takes 2-D operands, not {list(a)} and {list(b)}", where=where)
    attrs = attributes(onnx, node)
    m, k = reversed(a) if attrs.get("transA", 0) else a
    k_b, n = reversed(b) if attrs.get("transB", 0) else b
    if k != k_b:
        raise AccelgenError(f"A has K={k} but B has K={k_b}", where=where)
    return {"type": "gemm", "M": m, "N": n, "K": k}


def matmul_fields(a: tuple[int, ...], b: tuple[int, ...], where: str) -> dict[str, Any]:
    if not a or not b:
        raise AccelgenError(f"MatMul takes operands of at least one dimension, not {list(a)} and {list(b)}",
                            where=where)
    a = (1, *a) if len(a) == 1 else a   # a vector is one row of A, or one column of B
    b = (*b, 1) if len(b) == 1 else b
    (m, k), (k_b, n) = a[-2:], b[-2:]
    if k != k_b:
        raise AccelgenError(f"A {list(a)} has K={k} but B {list(b)} has K={k_b}", where=where)
    lead_a, lead_b = a[:-2], b[:-2]
    if math.prod(lead_b) == 1:  # one B for every leading index of A: those are more rows of one GEMM
        return {"type": "gemm", "M": math.prod(a[:-1]), "N": n, "K": k}
    width = max(len(lead_a), len(lead_b))
    batch = 1
    for da, db in zip((1,) * (width - len(lead_a)) + lead_a, (1,) * (width - len(lead_b)) + lead_b):
        if da != db and 1 not in (da, db):
            raise AccelgenError(f"leading dimensions of {list(a)} and {list(b)} do not broadcast", where=where)
        batch *= max(da, db)
    return {"type": "gemm", "M": m, "N": n, "K": k, "batch": batch}


# --- MACs of the nodes without a layer ------------------------------------------------------------

def _recurrent(attrs: dict[str, Any], shape: Callable[[int], tuple[int, ...] | None]) -> int | None:
    x, w, r = shape(0), shape(1), shape(2)
    if x is None or w is None or r is None or len(x) != 3:
        return None
    seq, batch = (x[1], x[0]) if attrs.get("layout", 0) else (x[0], x[1])
    return seq * batch * (math.prod(w) + math.prod(r))


def _einsum(attrs: dict[str, Any], shapes: list[tuple[int, ...] | None]) -> int | None:
    terms = str(attrs.get("equation", "")).replace(" ", "").split("->")[0].split(",")
    if len(terms) != len(shapes) or any(s is None for s in shapes):
        return None
    if len(terms) < 2:
        return 0                       # one operand: a transpose, trace or sum, no multiplies
    sizes: dict[str, int] = {}
    ellipsis: list[tuple[int, ...]] = []
    for term, shape in zip(terms, shapes):
        assert shape is not None
        head, dots, tail = term.partition("...")
        spread = len(shape) - len(head) - len(tail)
        if spread < 0 or (not dots and spread):
            return None
        ellipsis.append(tuple(shape[len(head):len(head) + spread]))
        for letter, size in zip(head + tail, shape[:len(head)] + shape[len(head) + spread:]):
            sizes[letter] = max(sizes.get(letter, 1), size)
    width = max(len(e) for e in ellipsis)
    broadcast = [max(e[i - width + len(e)] if i - width + len(e) >= 0 else 1 for e in ellipsis) for i in range(width)]
    return math.prod(sizes.values()) * math.prod(broadcast)


def _attention(attrs: dict[str, Any], shape: Callable[[int], tuple[int, ...] | None]) -> int | None:
    q, k, v = shape(0), shape(1), shape(2)
    if q is None or k is None or v is None or len(q) != len(k) or len(q) not in (3, 4):
        return None
    if len(q) == 4:                                           # [B, heads, seq, head size]
        return q[0] * q[1] * q[2] * k[2] * (q[3] + v[3])
    heads_q, heads_kv = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
    if not heads_q or not heads_kv:
        return None
    return q[0] * q[1] * k[1] * (q[2] + heads_q * v[2] // heads_kv)  # [B, seq, heads * head size]


def unmodelled_macs(onnx: Any, node: Any, shapes: Shapes) -> int | None:
    """The MACs of a node that has no layer here, where its shapes define them; else ``None``."""
    def shape(i: int) -> tuple[int, ...] | None:
        return shapes.get(node.input[i]) if len(node.input) > i and node.input[i] else None

    if node.domain not in ("", "ai.onnx"):
        return None
    attrs = attributes(onnx, node)
    if node.op_type in ("LSTM", "GRU", "RNN"):
        return _recurrent(attrs, shape)
    if node.op_type == "Einsum":
        return _einsum(attrs, [shape(i) for i in range(len(node.input))])
    if node.op_type == "Attention":
        return _attention(attrs, shape)
    if node.op_type == "DeformConv":
        w, out = shape(1), shapes.get(node.output[0]) if node.output else None
        return None if w is None or out is None else out[0] * math.prod(out[1:]) * math.prod(w[1:])
    return None

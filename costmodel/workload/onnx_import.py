"""Networks from ONNX files: the layers that multiply, and a report of every node that was not modelled.

    model, report = load_onnx("mobilenetv2.onnx")
    print(report.summary())     # not modelled (no MACs here): 35 Clip, 10 Add, 1 GlobalAveragePool, ...

Sizes come from ONNX shape inference, so the graph's own tensors give every layer's shape:

* ``Conv`` (and the quantised ``ConvInteger``/``QLinearConv``), 2-D or 1-D (a 1-D convolution is a
  2-D one of height 1), dilation 1, any ``group`` -> a conv2d layer with those groups (``group ==
  C`` is depthwise).  A :class:`~costmodel.workload.Conv2D` has one symmetric padding and one
  stride.  Pads that differ per side or per axis (``auto_pad=SAME_UPPER`` with stride 2, a 1x7
  filter padded 0x3) keep their exact padded extent: the common part is the padding and the rest is
  counted into the input size.  The analysed problem lives in padded input coordinates, so it is
  the same problem: same outputs, same MACs, same traffic; the report notes each such layer.
  Strides that differ per axis are refused, unless an axis has a single output position.
* ``Gemm`` -> a gemm layer ``out[M, N] = A[M, K] @ B[K, N]`` after ``transA``/``transB``.
* ``MatMul`` (and ``MatMulInteger``/``QLinearMatMul``) ``[..., M, K] @ [..., K, N]``.  When the right
  operand is the same for every leading index (a weight), the leading dimensions of the left one
  are more rows: ``M`` is their product, as the zoo's ``M = tokens``.  Otherwise (attention's
  ``Q K^T`` and ``P V``) ``batch`` is the product of the broadcast leading dimensions.

Every other node does no MACs in this model (activations, additions, pooling, normalisation,
Softmax, reshapes) and goes into the :class:`ImportReport`, never an error.  Nodes that do multiply
but have no layer here (``ConvTranspose``, ``Einsum``, recurrent cells), nodes of other domains and
control flow (whose subgraphs are not walked) are reported as possibly carrying MACs.

Each layer then passes the YAML workloads' door (:func:`~costmodel.workload_yaml.layer_from_dict`).
Every failure is one :class:`AccelgenError` line naming the file and, where there is one, the node:
a file that does not parse, a dynamic or unknown shape, dilation > 1.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..base import AccelgenError, read_bytes
from .layers import Layer, Model
from .yaml_io import layer_from_dict

__all__ = ["load_onnx", "ImportReport", "SkippedOps"]

_ONNX_DOMAINS = ("", "ai.onnx")
# Modelled op types -> the positions of their two operands (data and weight, or A and B).
_CONV_OPS = {"Conv": (0, 1), "ConvInteger": (0, 1), "QLinearConv": (0, 3)}
_MATMUL_OPS = {"MatMul": (0, 1), "MatMulInteger": (0, 1), "QLinearMatMul": (0, 3)}
# Standard op types that multiply-accumulate but have no layer here: reported as such, not guessed at.
_MAC_OPS_NOT_MODELLED = frozenset({
    "ConvTranspose", "QLinearConvTranspose", "DeformConv", "Einsum", "LSTM", "GRU", "RNN", "Attention",
})
_SHOWN_NODES = 3       # node names per op type in the one-line summary
_MESSAGE_CHARS = 240   # of a message quoted from onnx


@dataclass(frozen=True)
class SkippedOps:
    """The nodes of one op type that are not modelled, in graph order."""

    op_type: str                   # ``Relu``; ``com.microsoft.FusedConv`` outside the ONNX domain
    nodes: tuple[str, ...]
    may_carry_macs: bool

    @property
    def count(self) -> int:
        return len(self.nodes)

    def to_dict(self) -> dict[str, Any]:
        return {"op_type": self.op_type, "count": self.count, "may_carry_macs": self.may_carry_macs,
                "nodes": list(self.nodes)}


@dataclass(frozen=True)
class ImportReport:
    """What an ONNX import left out (most frequent op type first) and how it mapped odd cases."""

    source: str
    skipped: tuple[SkippedOps, ...] = ()
    notes: tuple[str, ...] = ()

    def summary(self) -> str:
        """One line: ``not modelled (no MACs here): 12 Relu, 3 Add; may carry MACs, not
        modelled: 1 ConvTranspose (up1)``."""
        plain = [f"{s.count} {s.op_type}" for s in self.skipped if not s.may_carry_macs]
        risky = [f"{s.count} {s.op_type} ({_names(s.nodes)})" for s in self.skipped if s.may_carry_macs]
        parts = ([f"not modelled (no MACs here): {', '.join(plain)}"] if plain else []) + \
                ([f"may carry MACs, not modelled: {', '.join(risky)}"] if risky else [])
        return "; ".join(parts) or "every node modelled"

    def to_dict(self) -> dict[str, Any]:
        return {"not_modelled": [s.to_dict() for s in self.skipped], "import_notes": list(self.notes)}


def _names(nodes: Sequence[str]) -> str:
    shown = ", ".join(nodes[:_SHOWN_NODES])
    return shown + (f" +{len(nodes) - _SHOWN_NODES} more" if len(nodes) > _SHOWN_NODES else "")


def _quote(exc: BaseException) -> str:
    """An onnx/protobuf message as one short clause."""
    text = " ".join(re.sub(r"\[ShapeInferenceError\]|Inference error\(s\):", " ", str(exc)).split())
    text = text or type(exc).__name__
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS - 3] + "..."


# --- reading and checking the file ----------------------------------------------------------------

def _import_onnx(where: str) -> Any:
    try:
        import onnx
        import onnx.inliner
        import onnx.shape_inference
    except ImportError:
        raise AccelgenError("reading ONNX files needs the 'onnx' package; install it with: pip install onnx",
                            where=where) from None
    return onnx


def _read_model(onnx: Any, path: str | os.PathLike[str], where: str) -> Any:
    """The parsed, checked model with local functions inlined and every shape inferred."""
    data = read_bytes(path, "an ONNX model")
    if not data:
        raise AccelgenError("empty file; expected an ONNX model", where=where)
    try:
        proto = onnx.load_model_from_string(data)
    except Exception:  # noqa: BLE001 - protobuf's DecodeError, or onnx's own complaints
        raise AccelgenError("not an ONNX model: the file does not parse as one (truncated, or another format?)",
                            where=where) from None
    try:  # from the path, so that tensors stored in external data files are found and checked
        onnx.checker.check_model(where)
    except Exception as exc:  # noqa: BLE001 - ValidationError, or a file that changed underneath
        raise AccelgenError(f"not a valid ONNX model ({_quote(exc)})", where=where) from None
    try:
        if proto.functions:
            proto = onnx.inliner.inline_local_functions(proto)
        return onnx.shape_inference.infer_shapes(proto, strict_mode=True, data_prop=True)
    except Exception as exc:  # noqa: BLE001 - InferenceError and friends
        raise AccelgenError(f"shape inference failed: {_quote(exc)}", where=where) from None


class _Shapes:
    """Static tensor shapes after inference; a dynamic or unknown one is refused, naming the node."""

    def __init__(self, graph: Any) -> None:
        self._dims: dict[str, tuple[Any, ...] | None] = {}
        for info in (*graph.input, *graph.value_info, *graph.output):
            tensor = info.type.tensor_type
            self._dims[info.name] = tuple(tensor.shape.dim) if tensor.HasField("shape") else None
        self._static = {t.name: tuple(t.dims) for t in graph.initializer}
        self._static.update({t.values.name: tuple(t.dims) for t in graph.sparse_initializer})
        self._producer = {out: node for node in graph.node for out in node.output}

    def of(self, tensor: str, where: str) -> tuple[int, ...]:
        if tensor in self._static:
            return self._static[tensor]
        dims = self._dims.get(tensor)
        if dims is None:
            producer = self._producer.get(tensor)
            origin = (f" (it comes from {producer.op_type} node {producer.name!r}, whose output ONNX "
                      "cannot infer)" if producer is not None else "")
            raise AccelgenError(f"the shape of {tensor!r} is unknown after shape inference{origin}", where=where)
        if all(d.WhichOneof("value") == "dim_value" for d in dims):
            return tuple(d.dim_value for d in dims)
        shown = ", ".join(str(d.dim_value) if d.WhichOneof("value") == "dim_value" else d.dim_param or "?"
                          for d in dims)
        raise AccelgenError(f"{tensor!r} has a dynamic shape [{shown}]; accelgen needs fixed sizes (fix them in "
                            "the file, e.g. with onnx.tools.update_model_dims)", where=where)


def _attributes(onnx: Any, node: Any) -> dict[str, Any]:
    out = {}
    for attr in node.attribute:
        value = onnx.helper.get_attribute_value(attr)
        out[attr.name] = value.decode() if isinstance(value, bytes) else value
    return out


# --- one node -> one layer's fields ---------------------------------------------------------------

def _pads(attrs: dict[str, Any], size: list[int], kernel: list[int], strides: list[int],
          where: str) -> tuple[list[int], list[int]]:
    """Padding before and after each spatial axis, ``auto_pad`` resolved."""
    axes = len(size)
    auto = attrs.get("auto_pad", "NOTSET")
    if auto == "NOTSET":
        pads = list(attrs.get("pads", [0] * 2 * axes))
        if len(pads) != 2 * axes or min(pads) < 0:
            raise AccelgenError(f"pads must be {2 * axes} non-negative integers, not {pads!r}", where=where)
        return pads[:axes], pads[axes:]
    if auto == "VALID":
        return [0] * axes, [0] * axes
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise AccelgenError(f"auto_pad must be NOTSET, VALID, SAME_UPPER or SAME_LOWER, not {auto!r}", where=where)
    totals = [max((-(-n // s) - 1) * s + k - n, 0) for n, k, s in zip(size, kernel, strides)]
    small = [t // 2 for t in totals]
    large = [t - h for t, h in zip(totals, small)]
    return (small, large) if auto == "SAME_UPPER" else (large, small)


def _conv_fields(onnx: Any, node: Any, x: tuple[int, ...], w: tuple[int, ...], where: str,
                 notes: list[str]) -> dict[str, Any]:
    axes = len(x) - 2
    if axes not in (1, 2) or len(w) != len(x):
        raise AccelgenError(f"only 1-D and 2-D convolutions are modelled; input {list(x)}, weight {list(w)}",
                            where=where)
    attrs = _attributes(onnx, node)
    dilations = list(attrs.get("dilations", [1] * axes))
    if any(d != 1 for d in dilations):
        raise AccelgenError(f"dilations {dilations} are not modelled; accelgen's convolutions have dilation 1",
                            where=where)
    n, c, *size = x
    k, c_per_group, *kernel = w
    group = attrs.get("group", 1)
    if c_per_group * group != c:
        raise AccelgenError(f"the weight has {c_per_group} input channels per group and group={group}, "
                            f"but the input has {c} channels", where=where)
    strides = list(attrs.get("strides", [1] * axes))
    if len(strides) != axes or min(strides) < 1:
        raise AccelgenError(f"strides must be {axes} positive integers, not {strides!r}", where=where)
    begins, ends = _pads(attrs, size, kernel, strides, where)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    pads_shown = f"pads {begins + ends}" if auto_pad == "NOTSET" else f"auto_pad {auto_pad}"
    input_shown = "x".join(map(str, size))
    if axes == 1:  # a 1-D convolution is a 2-D one of height 1
        size, kernel, strides, begins, ends = [1, *size], [1, *kernel], strides * 2, [0, *begins], [0, *ends]
    extents = [length + b + e for length, b, e in zip(size, begins, ends)]
    # A stride matters only on an axis with more than one output position.
    used = {s for s, extent, r in zip(strides, extents, kernel) if extent - r >= s}
    if len(used) > 1:
        raise AccelgenError(f"strides {strides} differ per axis; a layer here has one stride", where=where)
    padding = min(extents[0] - size[0], extents[1] - size[1]) // 2
    y, x_size = extents[0] - 2 * padding, extents[1] - 2 * padding
    if [y, x_size] != size:
        notes.append(f"{node.name or node.output[0]}: {pads_shown} on a {input_shown} input analysed as "
                     f"padding {padding} on {y}x{x_size} (same padded extent, outputs and MACs)")
    return {"type": "conv2d", "N": n, "K": k, "C": c, "Y": y, "X": x_size, "R": kernel[0], "S": kernel[1],
            "stride": used.pop() if used else strides[1], "padding": padding, "groups": group}


def _gemm_fields(onnx: Any, node: Any, a: tuple[int, ...], b: tuple[int, ...], where: str) -> dict[str, Any]:
    if len(a) != 2 or len(b) != 2:
        raise AccelgenError(f"Gemm takes 2-D operands, not {list(a)} and {list(b)}", where=where)
    attrs = _attributes(onnx, node)
    m, k = reversed(a) if attrs.get("transA", 0) else a
    k_b, n = reversed(b) if attrs.get("transB", 0) else b
    if k != k_b:
        raise AccelgenError(f"A has K={k} but B has K={k_b}", where=where)
    return {"type": "gemm", "M": m, "N": n, "K": k}


def _matmul_fields(a: tuple[int, ...], b: tuple[int, ...], where: str) -> dict[str, Any]:
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


# --- the graph ------------------------------------------------------------------------------------

def _may_carry_macs(onnx: Any, node: Any) -> bool:
    if node.domain not in _ONNX_DOMAINS or node.op_type in _MAC_OPS_NOT_MODELLED:
        return True
    graph_kinds = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    return any(attr.type in graph_kinds for attr in node.attribute)   # If, Loop, Scan: not walked


def _layer_name(node: Any, index: int, taken: set[str]) -> str:
    """The node's name (else its first output's), whitespace-free and unique in the model."""
    base = "_".join((node.name or (node.output[0] if node.output else "") or f"{node.op_type}_{index}").split())
    name, count = base, 1
    while name in taken:
        count += 1
        name = f"{base}#{count}"
    taken.add(name)
    return name


def load_onnx(path: str | os.PathLike[str]) -> tuple[Model, ImportReport]:
    """The layers of an ONNX model that carry MACs, and a report of the nodes that were not modelled.

    The model is named after the file's stem.  Raises :class:`AccelgenError` (one line naming the
    file and the node) for a file that is not a valid ONNX model, a modelled node whose shapes are
    dynamic or unknown or that uses a construct without a layer here (dilation > 1, a 3-D
    convolution), and a model with no Conv, Gemm or MatMul node at all.
    """
    where = os.fspath(path)
    onnx = _import_onnx(where)
    graph = _read_model(onnx, path, where).graph
    shapes = _Shapes(graph)
    layers: list[Layer] = []
    skipped: dict[tuple[str, bool], list[str]] = {}
    notes: list[str] = []
    taken: set[str] = set()
    for index, node in enumerate(graph.node):
        op = node.op_type
        node_where = f"{where}: {op} node {node.name or (node.output[0] if node.output else index)!r}"
        modelled = node.domain in _ONNX_DOMAINS and op in (*_CONV_OPS, "Gemm", *_MATMUL_OPS)
        if not modelled:
            label = op if node.domain in _ONNX_DOMAINS else f"{node.domain}.{op}"
            name = node.name or (node.output[0] if node.output else f"{op}_{index}")
            skipped.setdefault((label, _may_carry_macs(onnx, node)), []).append(name)
            continue
        first, second = _CONV_OPS.get(op) or _MATMUL_OPS.get(op) or (0, 1)
        if len(node.input) <= second or not node.input[first] or not node.input[second]:
            raise AccelgenError(f"expected operands at inputs {first} and {second}", where=node_where)
        a, b = shapes.of(node.input[first], node_where), shapes.of(node.input[second], node_where)
        if op in _CONV_OPS:
            fields = _conv_fields(onnx, node, a, b, node_where, notes)
        elif op == "Gemm":
            fields = _gemm_fields(onnx, node, a, b, node_where)
        else:
            fields = _matmul_fields(a, b, node_where)
        name = _layer_name(node, index, taken)
        layers.append(layer_from_dict({"name": name, **fields}, where=node_where, path=fields["type"]))
    ordered = sorted(skipped.items(), key=lambda item: -len(item[1]))  # stable: ties keep graph order
    report = ImportReport(where, tuple(SkippedOps(op, tuple(names), risky) for (op, risky), names in ordered),
                          tuple(notes))
    if not layers:
        raise AccelgenError(f"no Conv, Gemm or MatMul node to analyse ({report.summary()})", where=where)
    model_name = "_".join(Path(where).stem.split()) or "onnx_model"
    return Model(model_name, tuple(layers)), report

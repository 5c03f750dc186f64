"""Reading an ONNX file for :mod:`.onnx_import`: parse, check, fix the inputs' dynamic sizes,
inline local functions, infer every shape; then the static shape of any tensor, or one line
naming the node whose shape is unknown and the op its input came from.

Dynamic inputs: ``input_shapes`` (``--input-shape NAME=D0,D1,...``) gives an input's whole shape.
Without it a symbolic first dimension (the batch) alone becomes 1, with a note; any other dynamic
dimension is refused in one line naming the input, the dimension and its symbolic name.  The
fixed sizes are written into the graph's inputs and shape inference runs with ``data_prop``, so
the shapes computed inside the graph (``Shape -> Slice -> Concat -> Resize`` or ``Reshape``)
become numbers too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..base import AccelgenError, read_bytes

__all__ = ["Shapes", "import_onnx", "parse_input_shape", "quote", "read_model"]

_MESSAGE_CHARS = 240   # of a message quoted from onnx
_SHAPE_RE = re.compile(r"\s*([^=\s][^=]*?)\s*=\s*([0-9]+(?:\s*,\s*[0-9]+)*)\s*")


def quote(exc: BaseException) -> str:
    """An onnx/protobuf message as one short clause."""
    text = " ".join(re.sub(r"\[ShapeInferenceError\]|Inference error\(s\):", " ", str(exc)).split())
    text = text or type(exc).__name__
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS - 3] + "..."


def parse_input_shape(text: str, option: str = "--input-shape") -> tuple[str, tuple[int, ...]]:
    """``NAME=D0,D1,...`` -> ``(NAME, (D0, D1, ...))``; every size a positive integer."""
    match = _SHAPE_RE.fullmatch(text)
    if match is None:
        raise AccelgenError(f"expected NAME=D0,D1,... (e.g. x=1,3,640,640), not {text!r}", where=option)
    sizes = tuple(int(v) for v in match.group(2).split(","))
    if min(sizes) < 1:
        raise AccelgenError(f"sizes of {match.group(1)!r} must be positive integers, not {list(sizes)}",
                            where=option)
    return match.group(1), sizes


def import_onnx(where: str) -> Any:
    try:
        import onnx
        import onnx.inliner
        import onnx.shape_inference
    except ImportError:
        raise AccelgenError("reading ONNX files needs the 'onnx' package; install it with: pip install onnx",
                            where=where) from None
    return onnx


def _dim_text(dim: Any) -> str:
    return str(dim.dim_value) if dim.WhichOneof("value") == "dim_value" else dim.dim_param or "?"


def _fix_inputs(graph: Any, input_shapes: Mapping[str, Sequence[int]], where: str) -> list[str]:
    """Write fixed sizes into the graph's (non-initializer) inputs; the notes of defaulted batches."""
    weights = {t.name for t in graph.initializer}
    inputs = [info for info in graph.input if info.name not in weights]
    names = [info.name for info in inputs]
    for name, sizes in input_shapes.items():
        if name not in names:
            raise AccelgenError(f"--input-shape names {name!r}, which is not an input of the model; its inputs: "
                                f"{', '.join(names) or 'none'}", where=where)
        if isinstance(sizes, (str, bytes)) or any(isinstance(v, bool) or not isinstance(v, int) or v < 1
                                                  for v in sizes):
            raise AccelgenError(f"--input-shape {name}: sizes must be positive integers, not {sizes!r}", where=where)
    notes: list[str] = []
    changed = False
    for info in inputs:
        tensor = info.type.tensor_type
        given = input_shapes.get(info.name)
        if given is not None:
            if tensor.HasField("shape") and len(tensor.shape.dim) != len(given):
                shown = ", ".join(_dim_text(d) for d in tensor.shape.dim)
                raise AccelgenError(f"--input-shape {info.name}={','.join(map(str, given))} has {len(given)} "
                                    f"dimensions, the input has {len(tensor.shape.dim)} [{shown}]", where=where)
            tensor.shape.ClearField("dim")
            for size in given:
                tensor.shape.dim.add().dim_value = size
            changed = True
            continue
        if not tensor.HasField("shape"):
            raise AccelgenError(f"input {info.name!r} has no shape; give it with --input-shape {info.name}=D0,D1,...",
                                where=where)
        dims = list(tensor.shape.dim)
        dynamic = [i for i, d in enumerate(dims) if d.WhichOneof("value") != "dim_value"]
        later = [i for i in dynamic if i > 0]
        if later:
            i = later[0]
            shown = ", ".join(_dim_text(d) for d in dims)
            symbol = f" ({dims[i].dim_param!r})" if dims[i].dim_param else ""
            example = ",".join(str(d.dim_value) if j not in dynamic else "N" for j, d in enumerate(dims))
            raise AccelgenError(f"input {info.name!r} [{shown}] has dynamic dimension {i}{symbol}; give its size "
                                f"with --input-shape {info.name}={example}", where=where)
        if dynamic:
            symbol = dims[0].dim_param or "?"
            dims[0].dim_value = 1
            notes.append(f"input {info.name!r}: dynamic batch dimension {symbol!r} set to 1 "
                         f"(give --input-shape {info.name}=... for another)")
            changed = True
    if changed:
        # Shapes recorded for the old sizes would contradict the new ones: infer them afresh.
        graph.ClearField("value_info")
        for out in graph.output:
            out.type.tensor_type.ClearField("shape")
    return notes


def read_model(onnx: Any, path: str | os.PathLike[str], where: str,
               input_shapes: Mapping[str, Sequence[int]]) -> tuple[Any, list[str]]:
    """The parsed, checked model with fixed input sizes, local functions inlined and every shape
    inferred; and the notes of what was defaulted."""
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
        raise AccelgenError(f"not a valid ONNX model ({quote(exc)})", where=where) from None
    notes = _fix_inputs(proto.graph, input_shapes, where)
    try:
        if proto.functions:
            proto = onnx.inliner.inline_local_functions(proto)
        return onnx.shape_inference.infer_shapes(proto, strict_mode=True, data_prop=True), notes
    except Exception as exc:  # noqa: BLE001 - InferenceError and friends
        raise AccelgenError(f"shape inference failed: {quote(exc)}", where=where) from None


class Shapes:
    """Static tensor shapes after inference; a dynamic or unknown one is refused, naming the node
    and the op its tensor came from."""

    def __init__(self, graph: Any) -> None:
        self._dims: dict[str, tuple[Any, ...] | None] = {}
        for info in (*graph.input, *graph.value_info, *graph.output):
            tensor = info.type.tensor_type
            self._dims[info.name] = tuple(tensor.shape.dim) if tensor.HasField("shape") else None
        self._static = {t.name: tuple(t.dims) for t in graph.initializer}
        self._static.update({t.values.name: tuple(t.dims) for t in graph.sparse_initializer})
        self._producer = {out: node for node in graph.node for out in node.output}

    def get(self, tensor: str) -> tuple[int, ...] | None:
        """The static shape, or ``None`` when it is unknown or dynamic."""
        if tensor in self._static:
            return self._static[tensor]
        dims = self._dims.get(tensor)
        if dims is None or not all(d.WhichOneof("value") == "dim_value" for d in dims):
            return None
        return tuple(d.dim_value for d in dims)

    def _origin(self, tensor: str, what: str) -> str:
        producer = self._producer.get(tensor)
        return (f" (it comes from {producer.op_type} node {producer.name or producer.output[0]!r}, whose output "
                f"ONNX {what})" if producer is not None else "")

    def of(self, tensor: str, where: str) -> tuple[int, ...]:
        shape = self.get(tensor)
        if shape is not None:
            return shape
        dims = self._dims.get(tensor)
        if dims is None:
            raise AccelgenError(f"the shape of {tensor!r} is unknown after shape inference"
                                f"{self._origin(tensor, 'cannot infer')}", where=where)
        shown = ", ".join(_dim_text(d) for d in dims)
        raise AccelgenError(f"{tensor!r} has a dynamic shape [{shown}] after shape inference"
                            f"{self._origin(tensor, 'infers only partly')}; give the model's inputs fixed sizes "
                            "with --input-shape NAME=D0,D1,...", where=where)

"""Networks from ONNX files: the layers that multiply, and a report of every node that was not modelled.

    model, report = load_onnx("det.onnx", input_shapes={"x": (1, 3, 640, 640)})
    print(report.summary())     # not modelled (no MACs here): 35 Clip, 10 Add, ...

Sizes come from ONNX shape inference after the inputs' dynamic sizes are fixed
(:mod:`.onnx_graph`: ``input_shapes``, or a symbolic batch alone set to 1 with a note), so the
graph's own tensors give every layer's shape.  The modelled nodes (:mod:`.onnx_ops`): ``Conv``
(and the quantised forms) with per-axis strides, dilations and exact per-side pads; ``ConvTranspose``
as a convtranspose2d layer; ``Gemm``; ``MatMul``.

Every other node does no MACs in this model (activations, additions, pooling, normalisation,
Softmax, reshapes, resizes) and goes into the :class:`ImportReport`, never an error.  Nodes that
do multiply but have no layer here (``Einsum``, recurrent cells, ``Attention``, ``DeformConv``),
nodes of other domains and control flow (whose subgraphs are not walked) are reported as carrying
MACs, with their count where their shapes define one and "MACs not defined" where not, and the
report's total says how many MACs the model's totals leave out.

Each layer then passes the YAML workloads' door (:func:`~costmodel.workload_yaml.layer_from_dict`).
Every failure is one :class:`AccelgenError` line naming the file and, where there is one, the node:
a file that does not parse, a dynamic input without a size, a shape inference leaves unknown.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base import AccelgenError
from .layers import Layer, Model
from .onnx_graph import Shapes, import_onnx, read_model
from .onnx_ops import conv_fields, conv_transpose_fields, gemm_fields, matmul_fields, unmodelled_macs
from .yaml_io import layer_from_dict

__all__ = ["ImportReport", "SkippedOps", "load_onnx"]

_ONNX_DOMAINS = ("", "ai.onnx")
# Modelled op types -> the positions of their two operands (data and weight, or A and B).
_CONV_OPS = {"Conv": (0, 1), "ConvInteger": (0, 1), "QLinearConv": (0, 3)}
_MATMUL_OPS = {"MatMul": (0, 1), "MatMulInteger": (0, 1), "QLinearMatMul": (0, 3)}
_MODELLED = (*_CONV_OPS, "ConvTranspose", "Gemm", *_MATMUL_OPS)
# Standard op types that multiply-accumulate but have no layer here: reported with their MACs.
_MAC_OPS_NOT_MODELLED = frozenset({
    "QLinearConvTranspose", "DeformConv", "Einsum", "LSTM", "GRU", "RNN", "Attention",
})
_SHOWN_NODES = 3       # node names per op type in the one-line summary


@dataclass(frozen=True)
class SkippedOps:
    """The nodes of one op type that are not modelled, in graph order; of those that may carry
    MACs, the MACs counted and the nodes whose count is not defined."""

    op_type: str                   # ``Relu``; ``com.microsoft.FusedConv`` outside the ONNX domain
    nodes: tuple[str, ...]
    may_carry_macs: bool
    macs: int = 0                  # summed over the nodes with a defined count
    uncounted: tuple[str, ...] = ()   # nodes whose MACs are not defined by their shapes

    @property
    def count(self) -> int:
        return len(self.nodes)

    def macs_text(self) -> str:
        if len(self.uncounted) == self.count:
            return "MACs not defined"
        text = f"{self.macs:,} MACs"
        return text + (f" + {len(self.uncounted)} node(s) with MACs not defined" if self.uncounted else "")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op_type": self.op_type, "count": self.count, "may_carry_macs": self.may_carry_macs,
                               "nodes": list(self.nodes)}
        if self.may_carry_macs:
            out["macs"] = None if len(self.uncounted) == self.count else self.macs
            out["macs_not_defined"] = list(self.uncounted)
        return out


@dataclass(frozen=True)
class ImportReport:
    """What an ONNX import left out (most frequent op type first) and how it mapped odd cases."""

    source: str
    skipped: tuple[SkippedOps, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def macs_not_modelled(self) -> int:
        """MACs of the nodes without a layer, where defined (see :attr:`uncounted_nodes`)."""
        return sum(s.macs for s in self.skipped)

    @property
    def uncounted_nodes(self) -> tuple[str, ...]:
        return tuple(n for s in self.skipped for n in s.uncounted)

    def summary(self) -> str:
        """One line: ``not modelled (no MACs here): 12 Relu, 3 Add; may carry MACs, not
        modelled: 1 LSTM (lstm1) 1,024 MACs; total MACs not modelled: 1,024``."""
        plain = [f"{s.count} {s.op_type}" for s in self.skipped if not s.may_carry_macs]
        risky = [f"{s.count} {s.op_type} ({_names(s.nodes)}) {s.macs_text()}" for s in self.skipped if s.may_carry_macs]
        parts = ([f"not modelled (no MACs here): {', '.join(plain)}"] if plain else [])
        if risky:
            uncounted = len(self.uncounted_nodes)
            total = f"total MACs not modelled: {self.macs_not_modelled:,}"
            total += f" + {uncounted} node(s) with MACs not defined" if uncounted else ""
            parts += [f"may carry MACs, not modelled: {', '.join(risky)}", total]
        return "; ".join(parts) or "every node modelled"

    def to_dict(self) -> dict[str, Any]:
        return {"not_modelled": [s.to_dict() for s in self.skipped], "macs_not_modelled": self.macs_not_modelled,
                "macs_not_defined_nodes": list(self.uncounted_nodes), "import_notes": list(self.notes)}


def _names(nodes: Sequence[str]) -> str:
    shown = ", ".join(nodes[:_SHOWN_NODES])
    return shown + (f" +{len(nodes) - _SHOWN_NODES} more" if len(nodes) > _SHOWN_NODES else "")


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


def _node_fields(onnx: Any, node: Any, shapes: Shapes, where: str) -> dict[str, Any]:
    op = node.op_type
    first, second = _CONV_OPS.get(op) or _MATMUL_OPS.get(op) or (0, 1)
    if len(node.input) <= second or not node.input[first] or not node.input[second]:
        raise AccelgenError(f"expected operands at inputs {first} and {second}", where=where)
    a, b = shapes.of(node.input[first], where), shapes.of(node.input[second], where)
    if op in _CONV_OPS:
        return conv_fields(onnx, node, a, b, where)
    if op == "ConvTranspose":
        return conv_transpose_fields(onnx, node, a, b, where)
    if op == "Gemm":
        return gemm_fields(onnx, node, a, b, where)
    return matmul_fields(a, b, where)


def _check_output(layer: Layer, node: Any, shapes: Shapes, where: str) -> None:
    """The layer's output size must be the one ONNX inferred (a convolution's pads read right)."""
    out = shapes.get(node.output[0]) if node.output else None
    if out is None or getattr(layer, "Yo", None) is None or len(out) not in (3, 4):
        return
    mine = [layer.Yo, layer.Xo][-(len(out) - 2):]          # type: ignore[union-attr]
    if list(out[2:]) != mine:
        raise AccelgenError(f"the layer gives a {'x'.join(map(str, mine))} output, ONNX infers "
                            f"{'x'.join(map(str, out[2:]))}", where=where)


def load_onnx(path: str | os.PathLike[str], input_shapes: Mapping[str, Sequence[int]] | None = None
              ) -> tuple[Model, ImportReport]:
    """The layers of an ONNX model that carry MACs, and a report of the nodes that were not modelled.

    ``input_shapes`` maps an input's name to its full shape, for inputs with dynamic sizes.  The
    model is named after the file's stem.  Raises :class:`AccelgenError` (one line naming the
    file and the node) for a file that is not a valid ONNX model, a dynamic input without a size,
    a modelled node whose shapes inference leaves unknown or that uses a construct without a layer
    here (a 3-D convolution), and a model with no Conv, ConvTranspose, Gemm or MatMul node at all.
    """
    where = os.fspath(path)
    onnx = import_onnx(where)
    proto, notes = read_model(onnx, path, where, dict(input_shapes or {}))
    graph = proto.graph
    shapes = Shapes(graph)
    layers: list[Layer] = []
    skipped: dict[tuple[str, bool], list[tuple[str, int | None]]] = {}
    taken: set[str] = set()
    for index, node in enumerate(graph.node):
        op = node.op_type
        node_where = f"{where}: {op} node {node.name or (node.output[0] if node.output else index)!r}"
        if not (node.domain in _ONNX_DOMAINS and op in _MODELLED):
            label = op if node.domain in _ONNX_DOMAINS else f"{node.domain}.{op}"
            name = node.name or (node.output[0] if node.output else f"{op}_{index}")
            risky = _may_carry_macs(onnx, node)
            macs = unmodelled_macs(onnx, node, shapes) if risky else 0
            skipped.setdefault((label, risky), []).append((name, macs))
            continue
        fields = _node_fields(onnx, node, shapes, node_where)
        layer = layer_from_dict({"name": _layer_name(node, index, taken), **fields}, where=node_where,
                                path=fields["type"])
        _check_output(layer, node, shapes, node_where)
        layers.append(layer)
    ordered = sorted(skipped.items(), key=lambda item: -len(item[1]))  # stable: ties keep graph order
    report = ImportReport(where, tuple(
        SkippedOps(op, tuple(n for n, _ in nodes), risky, sum(m or 0 for _, m in nodes),
                   tuple(n for n, m in nodes if m is None)) for (op, risky), nodes in ordered), tuple(notes))
    if not layers:
        raise AccelgenError(f"no Conv, ConvTranspose, Gemm or MatMul node to analyse ({report.summary()})",
                            where=where)
    model_name = "_".join(Path(where).stem.split()) or "onnx_model"
    return Model(model_name, tuple(layers)), report

"""ONNX import: networks built here with ``onnx.helper`` (no downloads) must give exactly the zoo's
hand-written layers; what is not modelled is reported; bad files and unsupported constructs are
one-line errors naming the file and the node."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelgen import cli
from costmodel.base import AccelgenError
from costmodel.workload import zoo
from costmodel.workload.layers import GEMM, Conv2D
from costmodel.workload.onnx_import import load_onnx

ROOT = Path(__file__).resolve().parents[1]
ACCELGEN = Path(sys.executable).parent / "accelgen"


class Net:
    """A graph under construction.  Weights are graph inputs with a shape and no data, so that a
    whole MobileNetV2 is a few kilobytes; shape inference needs nothing more."""

    def __init__(self, opset: int = 17) -> None:
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.domains: dict[str, int] = {}
        self._count = 0

    def input(self, name: str, shape: list[Any]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        return name

    def const(self, value: Any, dtype: str = "float32") -> str:
        import numpy as np
        name = f"const{len(self.initializers)}"
        self.initializers.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
        return name

    def node(self, op: str, inputs: list[str], name: str | None = None, domain: str = "", **attrs: Any) -> str:
        self._count += 1
        name = name or f"{op.lower()}{self._count}"
        if domain:
            self.domains[domain] = 1
        self.nodes.append(helper.make_node(op, inputs, [f"{name}:out"], name=name, domain=domain, **attrs))
        return f"{name}:out"

    def conv(self, name: str, x: str, c_in: int, c_out: int, k: int, stride: int = 1, group: int = 1,
             pad: int | None = None) -> str:
        w = self.input(f"{name}.weight", [c_out, c_in // group, k, k])
        p = k // 2 if pad is None else pad
        return self.node("Conv", [x, w], name, kernel_shape=[k, k], strides=[stride, stride], pads=[p] * 4,
                         group=group)

    def linear(self, name: str, x: str, n_in: int, n_out: int) -> str:
        """torch's Linear as exported: Gemm(transB) on 2-D inputs."""
        w = self.input(f"{name}.weight", [n_out, n_in])
        b = self.input(f"{name}.bias", [n_out])
        return self.node("Gemm", [x, w, b], name, transB=1)

    def save(self, path: Path, output: str, rank: int, dtype: int = TensorProto.FLOAT) -> Path:
        outputs = [helper.make_tensor_value_info(output, dtype, [None] * rank)]
        graph = helper.make_graph(self.nodes, path.stem, self.inputs, outputs, initializer=self.initializers)
        opsets = [helper.make_opsetid("", self.opset)] + [helper.make_opsetid(d, v) for d, v in self.domains.items()]
        onnx.save(helper.make_model(graph, opset_imports=opsets), path)
        return path


# --- networks, written from their papers / torchvision, independently of the zoo ------------------

def mobilenet_v2_onnx(path: Path) -> Path:
    """torchvision's MobileNetV2 graph: ReLU6 as Clip, residual Adds, global pooling, Flatten, Gemm."""
    net = Net()
    lo, hi = net.const(0.0), net.const(6.0)

    def relu6(x: str) -> str:
        return net.node("Clip", [x, lo, hi])

    x = relu6(net.conv("conv_stem", net.input("image", [1, 3, 224, 224]), 3, 32, 3, stride=2))
    c_in, index = 32, 1
    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1)]
    for t, c, n, s in settings:
        for i in range(n):
            stride, hidden, block = (s if i == 0 else 1), c_in * t, f"block{index}"
            y = relu6(net.conv(f"{block}.expand", x, c_in, hidden, 1)) if t != 1 else x
            y = relu6(net.conv(f"{block}.dw", y, hidden, hidden, 3, stride=stride, group=hidden))
            y = net.conv(f"{block}.project", y, hidden, c, 1)
            x = net.node("Add", [x, y]) if stride == 1 and c_in == c else y
            c_in, index = c, index + 1
    x = relu6(net.conv("conv_head", x, c_in, 1280, 1))
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x])])
    return net.save(path, net.linear("fc", x, 1280, 1000), 2)


def resnet50_onnx(path: Path, batch: int) -> Path:
    """torchvision's ResNet-50 (stride on the 3x3 conv) with BatchNorm, ReLU, MaxPool and Adds."""
    net = Net()

    def bn_relu(x: str, relu: bool = True) -> str:
        c = net.const([1.0])  # shapes do not matter to the import; BatchNorm is reported, not checked
        x = net.node("Mul", [x, c])
        return net.node("Relu", [x]) if relu else x

    x = bn_relu(net.conv("conv1", net.input("images", [batch, 3, 224, 224]), 3, 64, 7, stride=2))
    x = net.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c_in = 64
    for stage, (planes, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], 1):
        for b in range(blocks):
            p, s = f"layer{stage}.{b}", stride if b == 0 else 1
            y = bn_relu(net.conv(f"{p}.conv1", x, c_in, planes, 1))
            y = bn_relu(net.conv(f"{p}.conv2", y, planes, planes, 3, stride=s))
            y = bn_relu(net.conv(f"{p}.conv3", y, planes, planes * 4, 1), relu=False)
            shortcut = bn_relu(net.conv(f"{p}.downsample", x, c_in, planes * 4, 1, stride=s), relu=False) \
                if b == 0 else x
            x, c_in = net.node("Relu", [net.node("Add", [y, shortcut])]), planes * 4
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x])])
    return net.save(path, net.linear("fc", x, 2048, 1000), 2)


def bert_block_onnx(path: Path, seq_len: int, batch: int) -> Path:
    """One BERT-base encoder block as torch exports it: MatMul + Add per projection, heads split by
    Reshape/Transpose, batched MatMuls for the attention, Softmax, LayerNorm, erf GELU."""
    hidden, heads, head_dim, ffn = 768, 12, 64, 3072
    net = Net()
    x = net.input("hidden_states", [batch, seq_len, hidden])

    def proj(name: str, x: str, n_in: int, n_out: int) -> str:
        y = net.node("MatMul", [x, net.input(f"{name}.weight", [n_in, n_out])], name)
        return net.node("Add", [y, net.input(f"{name}.bias", [n_out])])

    def heads_first(x: str, perm: list[int]) -> str:
        x = net.node("Reshape", [x, net.const([batch, seq_len, heads, head_dim], "int64")])
        return net.node("Transpose", [x], perm=perm)

    def layer_norm(x: str, name: str) -> str:
        return net.node("LayerNormalization", [x, net.input(f"{name}.gamma", [hidden]),
                                               net.input(f"{name}.beta", [hidden])], axis=-1)

    q = heads_first(proj("q_proj", x, hidden, hidden), [0, 2, 1, 3])
    k = heads_first(proj("k_proj", x, hidden, hidden), [0, 2, 3, 1])      # K^T directly
    v = heads_first(proj("v_proj", x, hidden, hidden), [0, 2, 1, 3])
    scores = net.node("Div", [net.node("MatMul", [q, k], "attn_scores"), net.const(8.0)])
    context = net.node("MatMul", [net.node("Softmax", [scores], axis=-1), v], "attn_context")
    context = net.node("Reshape", [net.node("Transpose", [context], perm=[0, 2, 1, 3]),
                                   net.const([batch, seq_len, hidden], "int64")])
    x = layer_norm(net.node("Add", [proj("out_proj", context, hidden, hidden), x]), "ln1")
    h = proj("ffn1", x, hidden, ffn)
    gelu = net.node("Mul", [net.node("Mul", [h, net.const(0.5)]),
                            net.node("Add", [net.node("Erf", [net.node("Div", [h, net.const(2 ** 0.5)])]),
                                             net.const(1.0)])])
    x = layer_norm(net.node("Add", [proj("ffn2", gelu, ffn, hidden), x]), "ln2")
    return net.save(path, x, 3)


# --- equal to the zoo ------------------------------------------------------------------------------

def test_mobilenet_v2_equals_the_zoo(tmp_path: Path) -> None:
    model, report = load_onnx(mobilenet_v2_onnx(tmp_path / "mobilenetv2.onnx"))
    expected = zoo.mobilenet_v2()
    assert [layer.name for layer in model.layers] == [layer.name for layer in expected.layers]
    assert model.layers == expected.layers          # every shape, stride, padding and group
    assert model == expected and model.macs == expected.macs == 300_774_272
    assert sum(layer.depthwise for layer in model.layers if isinstance(layer, Conv2D)) == 17
    assert {s.op_type: s.count for s in report.skipped} == {"Clip": 35, "Add": 10, "GlobalAveragePool": 1,
                                                             "Flatten": 1}
    assert not any(s.may_carry_macs for s in report.skipped) and report.notes == ()
    assert report.summary() == "not modelled (no MACs here): 35 Clip, 10 Add, 1 GlobalAveragePool, 1 Flatten"


def test_resnet50_with_batch_equals_the_zoo(tmp_path: Path) -> None:
    model, report = load_onnx(resnet50_onnx(tmp_path / "resnet50.onnx", batch=2))
    assert model == zoo.resnet50(batch=2)          # N = 2 from the input shape, fc M = 2
    assert {s.op_type: s.count for s in report.skipped} == {"Mul": 53, "Relu": 49, "Add": 16, "MaxPool": 1,
                                                             "GlobalAveragePool": 1, "Flatten": 1}


@pytest.mark.parametrize(("seq_len", "batch"), [(128, 1), (64, 2)])
def test_bert_block_equals_the_zoo(tmp_path: Path, seq_len: int, batch: int) -> None:
    model, report = load_onnx(bert_block_onnx(tmp_path / "bert_base.onnx", seq_len, batch))
    expected = zoo.bert_base_block(seq_len=seq_len, batch=batch)
    assert model == expected and model.macs == expected.macs
    scores = model.layers[3]
    assert isinstance(scores, GEMM) and (scores.M, scores.N, scores.K, scores.batch) == (seq_len, seq_len, 64,
                                                                                         12 * batch)
    counts = {s.op_type: s.count for s in report.skipped}
    assert counts["Softmax"] == 1 and counts["Reshape"] == 4 and counts["LayerNormalization"] == 2
    assert counts["Add"] == 9 and counts["Erf"] == 1


# --- mapping details, against hand-written layers --------------------------------------------------

def test_padding_strides_groups_and_gemm_forms(tmp_path: Path) -> None:
    net = Net()
    x = net.input("x", [1, 8, 16, 16])
    w = net.input("w_same", [16, 8, 3, 3])
    x = net.node("Conv", [x, w], "same_s2", strides=[2, 2], auto_pad="SAME_UPPER")     # pads 1 after only
    x = net.node("Conv", [x, net.input("w_valid", [16, 16, 2, 2])], "valid", auto_pad="VALID")
    x = net.node("Conv", [x, net.input("w_1x7", [16, 4, 1, 7])], "grouped_1x7", group=4, pads=[0, 3, 0, 3])
    x = net.node("Conv", [x, net.input("w_dwx2", [32, 1, 3, 3])], "dw_x2", group=16, pads=[1, 1, 1, 1])
    x = net.node("Conv", [x, net.input("w_rows", [8, 32, 3, 7])], "rows", strides=[2, 5])  # X: one output
    x = net.node("Flatten", [x])
    a = net.node("Transpose", [x], perm=[1, 0])                                        # [8*3*1, 1]
    g = net.node("Gemm", [a, net.input("b", [10, 24])], "gemm_tt", transA=1, transB=1)
    y = net.node("MatMul", [net.input("vec", [10]), net.input("mat", [3, 10, 10])], "vec_mat")
    net.save(tmp_path / "mix.onnx", net.node("Add", [g, y]), 2)
    model, report = load_onnx(tmp_path / "mix.onnx")
    assert model.layers == (
        Conv2D("same_s2", K=16, C=8, Y=16, X=16, R=3, S=3, stride=2, pad_top=0, pad_bottom=1, pad_left=0,
               pad_right=1),                                             # SAME_UPPER: the odd pad after
        Conv2D("valid", K=16, C=16, Y=8, X=8, R=2, S=2),
        Conv2D("grouped_1x7", K=16, C=16, Y=7, X=7, R=1, S=7, groups=4, pad_left=3, pad_right=3),
        Conv2D("dw_x2", K=32, C=16, Y=7, X=7, R=3, S=3, padding=1, groups=16),
        Conv2D("rows", K=8, C=32, Y=7, X=7, R=3, S=7, stride_y=2, stride_x=5),
        GEMM("gemm_tt", M=1, N=10, K=24),
        GEMM("vec_mat", M=1, N=10, K=10, batch=3),
    )
    assert [layer.macs for layer in model.layers[:2]] == [16 * 8 * 9 * 8 * 8, 16 * 16 * 4 * 7 * 7]
    assert report.notes == ()


def test_conv1d_and_quantised_ops(tmp_path: Path) -> None:
    net = Net()
    x = net.node("Conv", [net.input("x", [2, 4, 20]), net.input("w", [6, 4, 5])], "conv1d", strides=[3], pads=[2, 2])
    q = net.node("QuantizeLinear", [x, net.const(0.1), net.const(0, "uint8")])
    wq = net.node("QuantizeLinear", [net.input("w2", [6, 6, 1]), net.const(0.1), net.const(0, "uint8")])
    y = net.node("ConvInteger", [q, wq], "conv_int")
    net.save(tmp_path / "q.onnx", y, 3, TensorProto.INT32)
    model, _ = load_onnx(tmp_path / "q.onnx")
    assert model.layers == (Conv2D("conv1d", N=2, K=6, C=4, Y=1, X=20, R=1, S=5, stride_x=3, pad_left=2,
                                   pad_right=2),
                            Conv2D("conv_int", N=2, K=6, C=6, Y=1, X=7, R=1, S=1))


def test_report_flags_ops_that_may_carry_macs(tmp_path: Path) -> None:
    net = Net()
    x = net.node("Conv", [net.input("x", [1, 4, 8, 8]), net.input("w", [4, 4, 3, 3])], "c1", pads=[1, 1, 1, 1])
    x = net.node("ConvTranspose", [x, net.input("wt", [4, 4, 2, 2])], "up1", strides=[2, 2])
    x = net.node("Einsum", [x, net.input("e", [4, 4])], "mix", equation="nchw,cd->ndhw")
    x = net.node("FancyOp", [x], "custom", domain="com.example")
    for _ in range(4):
        x = net.node("Relu", [x])
    net.save(tmp_path / "odd.onnx", x, 4)
    model, report = load_onnx(tmp_path / "odd.onnx")
    assert [layer.name for layer in model.layers] == ["c1", "up1"]
    einsum = 1 * 4 * 16 * 16 * 4                  # n c h w d: one MAC per point of the index space
    assert report.summary() == ("not modelled (no MACs here): 4 Relu; may carry MACs, not modelled: "
                                f"1 Einsum (mix) {einsum:,} MACs, 1 com.example.FancyOp (custom) MACs not defined; "
                                f"total MACs not modelled: {einsum:,} + 1 node(s) with MACs not defined")
    as_json = report.to_dict()
    assert [(s["op_type"], s.get("macs")) for s in as_json["not_modelled"]] == [
        ("Relu", None), ("Einsum", einsum), ("com.example.FancyOp", None)]
    assert as_json["macs_not_modelled"] == einsum and as_json["macs_not_defined_nodes"] == ["custom"]
    assert report.to_dict()["not_modelled"][0] == {"op_type": "Relu", "count": 4, "may_carry_macs": False,
                                                   "nodes": ["relu5", "relu6", "relu7", "relu8"]}


def test_unnamed_and_repeated_node_names_become_unique_layer_names(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [8, 8])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["my out"]),
             helper.make_node("MatMul", ["my out", "w"], ["y1"], name="mm"),
             helper.make_node("MatMul", ["y1", "w"], ["y2"], name="mm")]
    y = helper.make_tensor_value_info("y2", TensorProto.FLOAT, [4, 8])
    model_proto = helper.make_model(helper.make_graph(nodes, "g", [x, w], [y]),
                                    opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model_proto, tmp_path / "my net.onnx")
    model, _ = load_onnx(tmp_path / "my net.onnx")
    assert model.name == "my_net" and [layer.name for layer in model.layers] == ["my_out", "mm", "mm#2"]



def test_local_functions_are_inlined_and_control_flow_is_flagged(tmp_path: Path) -> None:
    proj = helper.make_function("local", "Proj", ["x", "w"], ["y"],
                                [helper.make_node("MatMul", ["x", "w"], ["t"], name="mm"),
                                 helper.make_node("Relu", ["t"], ["y"], name="act")],
                                opset_imports=[helper.make_opsetid("", 17)])
    branch = helper.make_graph([helper.make_node("Identity", ["y2"], ["z"])], "branch", [],
                               [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 8])])
    nodes = [helper.make_node("Proj", ["x", "w"], ["y1"], name="p1", domain="local"),
             helper.make_node("Proj", ["y1", "w"], ["y2"], name="p2", domain="local"),
             helper.make_node("If", ["cond"], ["out"], name="maybe", then_branch=branch, else_branch=branch)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8]),
                                           helper.make_tensor_value_info("w", TensorProto.FLOAT, [8, 8]),
                                           helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [4, 8])])
    onnx.save(helper.make_model(graph, functions=[proj], opset_imports=[helper.make_opsetid("", 17),
                                                                        helper.make_opsetid("local", 1)]),
              tmp_path / "fn.onnx")
    model, report = load_onnx(tmp_path / "fn.onnx")
    assert [(layer.name, layer.macs) for layer in model.layers] == [("mm__1", 256), ("mm__2", 256)]
    assert report.summary() == ("not modelled (no MACs here): 2 Relu; may carry MACs, not modelled: 1 If (maybe) "
                                "MACs not defined; total MACs not modelled: 0 + 1 node(s) with MACs not defined")

# --- errors: one line, naming the file and the node ------------------------------------------------

def _error(path: Path) -> str:
    with pytest.raises(AccelgenError) as info:
        load_onnx(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path) + ": "), message
    return message


def _one_conv(tmp_path: Path, x_shape: list[Any], w_shape: list[int], **attrs: Any) -> Path:
    net = Net()
    y = net.node("Conv", [net.input("x", x_shape), net.input("w", w_shape)], "c1", **attrs)
    return net.save(tmp_path / "conv.onnx", y, len(x_shape))


def test_malformed_files(tmp_path: Path) -> None:
    good = _one_conv(tmp_path, [1, 3, 8, 8], [4, 3, 3, 3]).read_bytes()
    cases = {"truncated.onnx": good[: len(good) // 2], "yaml.onnx": b"name: x\nlayers: []\n",
             "random.onnx": bytes(range(256)) * 4}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        assert "not an ONNX model: the file does not parse as one" in _error(tmp_path / name), name
    (tmp_path / "empty.onnx").write_bytes(b"")
    assert _error(tmp_path / "empty.onnx").endswith("empty file; expected an ONNX model")
    assert _error(tmp_path / "missing.onnx").endswith("no such file")
    (tmp_path / "no_opset.onnx").write_bytes(b"\x08\x07")      # ir_version 7 and nothing else
    assert "not a valid ONNX model (" in _error(tmp_path / "no_opset.onnx")


def test_invalid_graphs_are_refused_by_checker_or_shape_inference(tmp_path: Path) -> None:
    net = Net()
    net.save(tmp_path / "bad_op.onnx", net.node("Conv2", [net.input("x", [1, 3, 8, 8])], "c1"), 4)
    assert "not a valid ONNX model (No Op registered for Conv2" in _error(tmp_path / "bad_op.onnx")
    net = Net()
    net.save(tmp_path / "bad_mm.onnx", net.node("MatMul", [net.input("a", [2, 3]), net.input("b", [4, 5])], "mm"), 2)
    message = _error(tmp_path / "bad_mm.onnx")
    assert "shape inference failed: (op_type:MatMul, node name: mm): Incompatible dimensions" in message


def test_unknown_shape_names_the_producer(tmp_path: Path) -> None:
    net = Net()
    x = net.node("FancyOp", [net.input("x", [1, 3, 8, 8])], "custom", domain="com.example")
    net.save(tmp_path / "u.onnx", net.node("Conv", [x, net.input("w", [4, 3, 3, 3])], "c1"), 4)
    assert _error(tmp_path / "u.onnx").endswith(
        "Conv node 'c1': the shape of 'custom:out' is unknown after shape inference (it comes from FancyOp "
        "node 'custom', whose output ONNX cannot infer)")


@pytest.mark.parametrize(("x_shape", "w_shape", "attrs", "message"), [
    pytest.param([1, 3, 4, 8, 8], [4, 3, 3, 3, 3], {},
                 "Conv node 'c1': only 1-D and 2-D convolutions are modelled; input [1, 3, 4, 8, 8], "
                 "weight [4, 3, 3, 3, 3]", id="conv3d"),
    pytest.param([0, 3, 8, 8], [4, 3, 3, 3], {},  # the YAML door's own words
                 "Conv node 'c1': conv2d.N must be a positive integer, not 0", id="zero-batch"),
])
def test_unsupported_constructs(tmp_path: Path, x_shape: list[Any], w_shape: list[int], attrs: dict[str, Any],
                                message: str) -> None:
    assert _error(_one_conv(tmp_path, x_shape, w_shape, **attrs)).endswith(message)


def test_model_without_mac_nodes(tmp_path: Path) -> None:
    net = Net()
    net.save(tmp_path / "relu.onnx", net.node("Relu", [net.input("x", [1, 4])]), 2)
    assert _error(tmp_path / "relu.onnx").endswith(
        "no Conv, ConvTranspose, Gemm or MatMul node to analyse (not modelled (no MACs here): 1 Relu)")


def test_missing_onnx_package_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _one_conv(tmp_path, [1, 3, 8, 8], [4, 3, 3, 3])
    monkeypatch.setitem(sys.modules, "onnx", None)   # `import onnx` now raises ImportError
    assert _error(path).endswith("reading ONNX files needs the 'onnx' package; install it with: pip install onnx")


def test_importing_costmodel_does_not_import_onnx() -> None:
    code = "import sys, costmodel, accelgen.cli; sys.exit('onnx' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# --- the command line ------------------------------------------------------------------------------

def small_cnn_onnx(path: Path) -> Path:
    net = Net()
    x = net.node("Relu", [net.conv("conv1", net.input("x", [1, 3, 32, 32]), 3, 16, 3, stride=2)])
    y = net.node("Relu", [net.conv("dw", x, 16, 16, 3, group=16)])
    x = net.node("Add", [x, net.conv("pw", y, 16, 16, 1)])
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x])])
    return net.save(path, net.linear("fc", x, 16, 10), 2)


def test_cli_analyze_onnx(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.chdir(ROOT)
    path = str(small_cnn_onnx(tmp_path / "small.onnx"))
    summary = "not modelled (no MACs here): 2 Relu, 1 Add, 1 GlobalAveragePool, 1 Flatten"
    code = cli.main(["analyze", "--model", path, "--dataflow", "kcp", "--hw", "configs/hw/small.yaml"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert f"small ({path}, 4 layers" in out and "TOTAL" in out and "dsconv" in out
    assert f"Imported from {path}:\n  {summary}\n" in out
    assert cli.main(["analyze", "--model", path, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [layer["layer"] for layer in doc["layers"]] == ["conv1", "dw", "pw", "fc"]
    assert doc["not_modelled"][1] == {"op_type": "Add", "count": 1, "may_carry_macs": False, "nodes": ["add6"]}
    assert doc["import_notes"] == []
    assert cli.main(["analyze", "--model", path, "--format", "csv"]) == 0
    assert capsys.readouterr().err == f"accelgen: note: {path}: {summary}\n"


def test_cli_bad_onnx_is_one_line_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00garbage\xff" * 10)
    proc = subprocess.run([str(ACCELGEN), "analyze", "--model", str(bad), "--dataflow", "kcp", "--hw",
                           "configs/hw/small.yaml"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (f"accelgen: error: {bad}: not an ONNX model: the file does not parse as one "
                           "(truncated, or another format?)\n")

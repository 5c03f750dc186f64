"""ONNX networks as they are exported: dynamic input sizes, per-axis strides, dilation, asymmetric
pads, ConvTranspose, shapes computed inside the graph, and MAC-carrying nodes without a layer.

Every layer and MAC count is checked against an independent computation: onnx's own reference
evaluator runs the graph on random data, and the MACs follow from the shapes it produced (and, for
ConvTranspose, its output is recomputed from our equivalent direct convolution in numpy).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from test_onnx import Net

from accelgen import cli
from costmodel.base import AccelgenError
from costmodel.workload.layers import GEMM, Conv2D, ConvTranspose2D
from costmodel.workload.onnx_import import load_onnx
from costmodel.workload.spec import input_shapes_from_texts, workload_from_spec

_H, _W, _T, _B, _I, _HID = 32, 100, 5, 2, 6, 7     # image; LSTM sequence, batch, input, hidden


def ocr_like(path: Path) -> Path:
    """A text-recogniser-shaped graph: dynamic batch and image size, strides [2, 1], asymmetric
    pads, a dilated conv, a ConvTranspose, a Resize and a Reshape whose sizes are computed from
    Shape, a MatMul head, and an LSTM beside it."""
    net = Net()
    x = net.input("x", ["batch", 3, "height", "width"])
    x = net.node("Conv", [x, net.input("w1", [8, 3, 3, 3])], "c1", strides=[2, 1], pads=[1, 1, 1, 1])
    x = net.node("Relu", [x])
    x = net.node("Conv", [x, net.input("w2", [8, 1, 3, 3])], "dw2", strides=[2, 1], pads=[0, 1, 1, 1], group=8)
    x = net.node("Conv", [x, net.input("w3", [16, 8, 3, 3])], "dil3", dilations=[2, 2], pads=[2, 1, 2, 3])
    x = net.node("ConvTranspose", [x, net.input("wt", [16, 8, 2, 2])], "up", strides=[2, 2])
    image = net.node("Shape", ["x"], "shape_x")
    hw = net.node("Slice", [image, net.const([2], "int64"), net.const([4], "int64")], "hw")
    sizes = net.node("Concat", [net.const([1, 8], "int64"), hw], "sizes", axis=0)
    x = net.node("Resize", [x, "", "", sizes], "resize", mode="nearest")
    x = net.node("Conv", [x, net.input("w4", [4, 8, 1, 1])], "pw4")
    lead = net.node("Slice", [net.node("Shape", [x], "shape4"), net.const([0], "int64"), net.const([2], "int64")])
    x = net.node("Reshape", [x, net.node("Concat", [lead, net.const([-1], "int64")], axis=0)], "flat")
    x = net.node("Transpose", [x], "tokens", perm=[0, 2, 1])
    head = net.node("MatMul", [x, net.input("wh", [4, 10])], "head")
    seq = net.input("seq", [_T, "batch_seq", _I])
    net.node("LSTM", [seq, net.input("lw", [1, 4 * _HID, _I]), net.input("lr", [1, 4 * _HID, _HID])], "lstm",
             hidden_size=_HID)
    net.node("Einsum", [head, net.input("e", [10, 3])], "mix", equation="btc,cd->btd")
    return net.save(path, head, 3)


def _run(path: Path, shapes: dict[str, tuple[int, ...]], names: list[str]
         ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Random inputs (at ``shapes`` where the file's are dynamic) and the named tensors onnx's
    reference evaluator computes from them."""
    import onnx
    model = onnx.load(path)
    rng = np.random.default_rng(0)
    feeds = {}
    for info in model.graph.input:
        dims = shapes.get(info.name) or tuple(d.dim_value for d in info.type.tensor_type.shape.dim)
        feeds[info.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds, dict(zip(names, ReferenceEvaluator(model).run(names, feeds)))


def test_dynamic_sizes_need_the_flag(tmp_path: Path) -> None:
    path = ocr_like(tmp_path / "rec.onnx")
    with pytest.raises(AccelgenError) as info:
        load_onnx(path)
    assert str(info.value) == (f"{path}: input 'x' [batch, 3, height, width] has dynamic dimension 2 ('height'); "
                               "give its size with --input-shape x=N,3,N,N")


def test_layers_and_macs_match_the_reference_evaluator(tmp_path: Path) -> None:
    path = ocr_like(tmp_path / "rec.onnx")
    shapes = {"x": (1, 3, _H, _W), "seq": (_T, _B, _I)}
    model, report = load_onnx(path, input_shapes=shapes)
    _, values = _run(path, shapes, ["c1:out", "dw2:out", "dil3:out", "up:out", "pw4:out", "head:out"])
    ran = {name: value.shape for name, value in values.items()}
    c1, dw2, dil3, up, pw4, head = model.layers
    assert [layer.name for layer in model.layers] == ["c1", "dw2", "dil3", "up", "pw4", "head"]
    assert c1 == Conv2D("c1", K=8, C=3, Y=_H, X=_W, R=3, S=3, stride_y=2, stride_x=1, padding=1)
    assert dw2 == Conv2D("dw2", K=8, C=8, Y=ran["c1:out"][2], X=_W, R=3, S=3, stride_y=2, stride_x=1, groups=8,
                         pad_top=0, pad_left=1, pad_bottom=1, pad_right=1)
    assert (dil3.dilation_y, dil3.dilation_x, dil3.pad_top, dil3.pad_left, dil3.pad_bottom, dil3.pad_right) == \
        (2, 2, 2, 1, 2, 3)
    assert isinstance(up, ConvTranspose2D) and (up.K, up.C, up.groups, up.stride) == (8, 16, 1, 2)
    assert head == GEMM("head", M=_H * _W, N=10, K=4)              # the Reshape's computed shape: H*W rows
    for layer, name, taps in ((c1, "c1:out", 3 * 9), (dw2, "dw2:out", 1 * 9), (dil3, "dil3:out", 8 * 9),
                              (pw4, "pw4:out", 8)):
        n, k, ho, wo = ran[name]
        assert (layer.Yo, layer.Xo) == (ho, wo)
        assert layer.macs == n * k * ho * wo * taps                  # taps: C/groups * R * S
    n, c, h, w = ran["dil3:out"]
    assert up.macs == n * h * w * c * 8 * 2 * 2                      # scatter: every input x every tap
    assert (up.Yo, up.Xo) == ran["up:out"][2:]
    lstm, einsum = _T * _B * 4 * _HID * (_I + _HID), _H * _W * 10 * 3
    assert report.macs_not_modelled == lstm + einsum and report.uncounted_nodes == ()
    assert f"1 LSTM (lstm) {lstm:,} MACs" in report.summary()
    assert report.summary().endswith(f"total MACs not modelled: {lstm + einsum:,}")


def _conv_transpose_numpy(layer: ConvTranspose2D, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The transposed convolution as our equivalent direct one: zero-insert, pad (or crop), then
    a stride-1 correlation with the flipped filter, one group at a time."""
    conv = layer.equivalent_conv()
    n, c, h, wd = x.shape
    stuffed = np.zeros((n, c, (h - 1) * layer.stride_y + 1, (wd - 1) * layer.stride_x + 1))
    stuffed[:, :, ::layer.stride_y, ::layer.stride_x] = x
    reach_y, reach_x = layer.window_y - 1, layer.window_x - 1
    top, left = reach_y - layer.pad_top, reach_x - layer.pad_left
    bottom, right = reach_y - layer.pad_bottom + layer.output_pad_y, reach_x - layer.pad_right + layer.output_pad_x
    stuffed = stuffed[:, :, max(-top, 0): stuffed.shape[2] - max(-bottom, 0), max(-left, 0): stuffed.shape[3] - max(-right, 0)]
    assert stuffed.shape[2:] == (conv.Y, conv.X)
    padded = np.pad(stuffed, ((0, 0), (0, 0), (conv.pad_top, conv.pad_bottom), (conv.pad_left, conv.pad_right)))
    g, k = layer.groups, layer.K
    out = np.zeros((n, k, conv.Yo, conv.Xo))
    for group in range(g):
        cs, ks = slice(group * c // g, (group + 1) * c // g), slice(group * k // g, (group + 1) * k // g)
        flipped = w[cs, :, ::-1, ::-1]                               # [C/g, K/g, R, S]
        for r in range(layer.R):
            for s in range(layer.S):
                patch = padded[:, cs, r * conv.dilation_y: r * conv.dilation_y + conv.Yo,
                               s * conv.dilation_x: s * conv.dilation_x + conv.Xo]
                out[:, ks] += np.einsum("nchw,ck->nkhw", patch, flipped[:, :, r, s])
    return out


def _reference_conv_transpose(x: np.ndarray, w: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    """onnx's reference ConvTranspose, one group at a time (its own grouped form reshapes the
    weight wrongly), concatenated over the output channels."""
    groups = attrs.get("group", 1)
    single = {k: v for k, v in attrs.items() if k != "group"}
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], **single)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, None),
                                            helper.make_tensor_value_info("w", TensorProto.DOUBLE, None)],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)])
    evaluator = ReferenceEvaluator(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    c = x.shape[1] // groups
    return np.concatenate([evaluator.run(None, {"x": x[:, g * c:(g + 1) * c], "w": w[g * c:(g + 1) * c]})[0]
                           for g in range(groups)], axis=1)


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 2]},
    {"strides": [2, 3], "pads": [1, 0, 0, 2], "output_padding": [1, 0]},
    {"strides": [3, 1], "dilations": [2, 1], "pads": [4, 0, 0, 0], "group": 2},   # pad > reach: a crop
    {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"strides": [2, 2], "output_shape": [9, 8]},
])
def test_conv_transpose_is_its_equivalent_convolution(tmp_path: Path, attrs: dict[str, Any]) -> None:
    net = Net()
    y = net.node("ConvTranspose", [net.input("x", [1, 4, 4, 4]), net.input("w", [4, 6 // attrs.get("group", 1), 3, 2])],
                 "up", **attrs)
    path = net.save(tmp_path / "up.onnx", y, 4)
    model, _ = load_onnx(path)
    (layer,) = model.layers
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 4, 4, 4)), rng.standard_normal((4, 6 // layer.groups, 3, 2))
    expected = _reference_conv_transpose(x, w, attrs)
    assert (1, layer.K, layer.Yo, layer.Xo) == expected.shape
    np.testing.assert_allclose(_conv_transpose_numpy(layer, x, w), expected, rtol=1e-4, atol=1e-4)
    # scatter form: every input element meets every weight of its channel, once
    assert layer.macs == w.size * x.shape[2] * x.shape[3]


def test_a_dynamic_batch_alone_defaults_to_one_with_a_note(tmp_path: Path) -> None:
    net = Net()
    y = net.conv("c1", net.input("images", ["N", 3, 16, 16]), 3, 8, 3, stride=2)
    model, report = load_onnx(net.save(tmp_path / "b.onnx", y, 4))
    assert model.layers == (Conv2D("c1", K=8, C=3, Y=16, X=16, R=3, S=3, stride=2, padding=1),)
    assert report.notes == (("input 'images': dynamic batch dimension 'N' set to 1 (give --input-shape images=... "
                             "for another)"),)
    model, report = load_onnx(tmp_path / "b.onnx", {"images": (4, 3, 16, 16)})
    assert model.layers[0].N == 4 and report.notes == ()


@pytest.mark.parametrize(("shapes", "message"), [
    ({"img": (1, 3, 8, 8)}, "--input-shape names 'img', which is not an input of the model; its inputs: x, w"),
    ({"x": (1, 3, 8)}, "--input-shape x=1,3,8 has 3 dimensions, the input has 4 [b, 3, h, 8]"),
    ({"x": (1, 3, 0, 8)}, "--input-shape x: sizes must be positive integers, not (1, 3, 0, 8)"),
])
def test_bad_input_shapes_are_one_line(tmp_path: Path, shapes: dict[str, tuple[int, ...]], message: str) -> None:
    net = Net()
    y = net.node("Conv", [net.input("x", ["b", 3, "h", 8]), net.input("w", [4, 3, 3, 3])], "c1")
    path = net.save(tmp_path / "d.onnx", y, 4)
    with pytest.raises(AccelgenError) as info:
        load_onnx(path, shapes)
    assert str(info.value) == f"{path}: {message}"


@pytest.mark.parametrize(("texts", "message"), [
    (["x"], "--input-shape: expected NAME=D0,D1,... (e.g. x=1,3,640,640), not 'x'"),
    (["x=1,a"], "--input-shape: expected NAME=D0,D1,... (e.g. x=1,3,640,640), not 'x=1,a'"),
    (["x=1,0"], "--input-shape: sizes of 'x' must be positive integers, not [1, 0]"),
    (["x=1", "x=2"], "--input-shape: input 'x' is given twice"),
])
def test_input_shape_texts(texts: list[str], message: str) -> None:
    with pytest.raises(AccelgenError) as info:
        input_shapes_from_texts(texts)
    assert str(info.value) == message
    assert input_shapes_from_texts(["x = 1, 3,8", "y=2"]) == {"x": (1, 3, 8), "y": (2,)}
    with pytest.raises(AccelgenError, match="--input-shape applies to ONNX models"):
        workload_from_spec("resnet50", input_shapes={"x": (1,)})


def test_a_shape_left_dynamic_by_inference_names_the_node(tmp_path: Path) -> None:
    net = Net()
    x = net.input("x", [1, 3, 8, 8])
    idx = net.node("NonZero", [net.node("Reshape", [x, net.const([-1], "int64")], "flat")], "nz")
    x = net.node("Reshape", [x, net.node("Concat", [net.const([1, 3, 8], "int64"),
                                                    net.node("Slice", [net.node("Shape", [idx]), net.const([1], "int64"),
                                                                       net.const([2], "int64")])], axis=0)], "r")
    path = net.save(tmp_path / "nz.onnx", net.node("Conv", [x, net.input("w", [4, 3, 1, 1])], "c1"), 4)
    with pytest.raises(AccelgenError) as info:
        load_onnx(path)
    text = str(info.value)
    assert text.startswith(f"{path}: Conv node 'c1': ") and "\n" not in text
    assert "it comes from Reshape node 'r'" in text and "--input-shape" in text


def test_cli_analyze_takes_input_shapes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = ocr_like(tmp_path / "rec.onnx")
    assert cli.main(["analyze", "--model", str(path), "--input-shape", f"x=1,3,{_H},{_W}",
                     "--input-shape", f"seq={_T},{_B},{_I}", "--hw", "small", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["layers"]) == 6
    lstm = _T * _B * 4 * _HID * (_I + _HID)
    assert {s["op_type"]: s.get("macs") for s in data["not_modelled"]}["LSTM"] == lstm
    assert data["macs_not_modelled"] == lstm + _H * _W * 10 * 3
    assert cli.main(["analyze", "--model", str(path), "--hw", "small"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("give its size with --input-shape x=N,3,N,N\n")

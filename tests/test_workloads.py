"""Layers' exact MAC counts, the workload YAML door and inline layer specs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.base import AccelgenError
from costmodel.workload.layers import GEMM, Conv2D
from costmodel.workload.yaml_io import load_workload_yaml, parse_layer_spec, parse_workload_yaml, workload_from_dict

CONFIGS = Path(__file__).resolve().parent.parent / "configs" / "workloads"


# -- exact MAC counts ---------------------------------------------------------------------------
@pytest.mark.parametrize(("layer", "yo", "macs"), [
    # K * (C/groups) * R * S * Y' * X' * N, Y' = (Y + 2p - R) // stride + 1
    (Conv2D("plain", K=8, C=4, Y=6, X=6, R=3, S=3), 4, 8 * 4 * 9 * 4 * 4),
    (Conv2D("padded", K=8, C=4, Y=6, X=6, R=3, S=3, padding=1), 6, 8 * 4 * 9 * 6 * 6),
    (Conv2D("strided", K=8, C=4, Y=7, X=7, R=3, S=3, stride=2, padding=1), 4, 8 * 4 * 9 * 4 * 4),
    (Conv2D("uneven", K=2, C=3, Y=8, X=8, R=3, S=3, stride=2), 3, 2 * 3 * 9 * 3 * 3),   # (8-3)//2+1
    (Conv2D("batched", K=8, C=4, Y=6, X=6, R=3, S=3, N=3), 4, 3 * 8 * 4 * 9 * 4 * 4),
    (Conv2D("depthwise", K=8, C=8, Y=8, X=8, R=3, S=3, padding=1, groups=8), 8, 8 * 1 * 9 * 8 * 8),
    (Conv2D("grouped", K=8, C=4, Y=5, X=5, R=3, S=3, groups=2), 3, 8 * 2 * 9 * 3 * 3),
    (Conv2D("stem", K=64, C=3, Y=224, X=224, R=7, S=7, stride=2, padding=3), 112, 118_013_952),
])
def test_conv_macs_are_exact(layer: Conv2D, yo: int, macs: int) -> None:
    assert layer.Yo == yo and layer.Xo == yo
    assert layer.macs == macs


@pytest.mark.parametrize(("y", "r", "stride", "padding"), [(6, 3, 1, 0), (7, 3, 2, 1), (224, 7, 2, 3), (9, 2, 3, 1)])
def test_output_size_matches_a_numpy_sliding_window(y: int, r: int, stride: int, padding: int) -> None:
    padded = np.zeros((y + 2 * padding, y + 2 * padding))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (r, r))[::stride, ::stride]
    layer = Conv2D("c", K=1, C=1, Y=y, X=y, R=r, S=r, stride=stride, padding=padding)
    assert windows.shape[:2] == (layer.Yo, layer.Xo)


def test_gemm_macs_are_exact() -> None:
    assert GEMM("g", M=4, N=8, K=16).macs == 512
    assert GEMM("scores", M=512, N=512, K=64, batch=12).macs == 201_326_592


# -- YAML files ---------------------------------------------------------------------------------
def test_example_configs_load() -> None:
    tiny = load_workload_yaml(CONFIGS / "tiny_cnn.yaml")
    assert [layer.name for layer in tiny.layers] == ["conv1", "conv2", "dw3", "pw4", "fc"]
    assert tiny.layers[1] == Conv2D("conv2", K=16, C=8, Y=16, X=16, R=3, S=3, stride=2, padding=1)
    assert tiny.layers[2] == Conv2D("dw3", K=16, C=16, Y=8, X=8, R=3, S=3, padding=1, groups=16)
    assert tiny.layers[2].depthwise
    assert tiny.layers[4] == GEMM("fc", M=1, N=10, K=2048)
    # 8*3*9*256 + 16*8*9*64 + 16*1*9*64 + 32*16*64 + 10*2048
    assert tiny.macs == 55_296 + 73_728 + 9_216 + 32_768 + 20_480 == 191_488
    bert = load_workload_yaml(CONFIGS / "bert_tiny.yaml")
    assert bert.name == "bert_tiny"
    assert bert.layers[1] == GEMM("attn_scores", M=64, N=64, K=64, batch=2)
    assert all(isinstance(layer, GEMM) for layer in bert.layers)


def test_defaults_are_filled_and_name_defaults_to_the_stem(tmp_path: Path) -> None:
    path = tmp_path / "mynet.yaml"
    path.write_text("layers:\n  - {name: c, type: conv2d, K: 2, C: 3, Y: 4, X: 4, R: 3, S: 3}\n"
                    "  - {name: d, type: dwconv, C: 3, K: 3, groups: 3, Y: 4, X: 4, R: 3, S: 3, padding: 1}\n"
                    "  - {name: g, type: gemm, M: 1, N: 2, K: 3}\n")
    model = load_workload_yaml(path)
    assert model.name == "mynet"
    assert model.layers == (Conv2D("c", K=2, C=3, Y=4, X=4, R=3, S=3, N=1, stride=1, padding=0, groups=1),
                            Conv2D("d", K=3, C=3, Y=4, X=4, R=3, S=3, padding=1, groups=3),
                            GEMM("g", M=1, N=2, K=3, batch=1))


_GOOD = "{name: c1, type: conv2d, K: 4, C: 2, Y: 6, X: 6, R: 3, S: 3}"


@pytest.mark.parametrize(("text", "message"), [
    (f"name: n\nlayers:\n  - {_GOOD}\n  - {{name: c2, type: gemm, M: 1, N: 1, K: 1}}\n"
     "  - {name: c3, type: conv2d, K: abc, C: 2, Y: 6, X: 6, R: 3, S: 3}\n",
     "layers[2].K must be a positive integer, not 'abc'"),
    ("layers:\n  - {name: c1, type: conv2d, K: 0, C: 2, Y: 6, X: 6, R: 3, S: 3}\n",
     "layers[0].K must be a positive integer, not 0"),
    ("layers:\n  - {name: c1, type: conv2d, K: 4, C: 2, Y: 6.5, X: 6, R: 3, S: 3}\n",
     "layers[0].Y must be a positive integer, not 6.5"),
    ("layers:\n  - {name: c1, type: conv2d, K: true, C: 2, Y: 6, X: 6, R: 3, S: 3}\n",
     "layers[0].K must be a positive integer, not True"),
    ("layers:\n  - {name: c1, type: conv2d, K: 4, C: 2, Y: 6, X: 6, R: 3, S: 3, padding: -1}\n",
     "layers[0].padding must be a non-negative integer, not -1"),
    ("layers:\n  - {name: c1, type: conv2d, K: 4, C: 2, Y: 6, X: 6, R: 3, S: 3, stirde: 2}\n",
     "layers[0].stirde is not a field of a conv2d layer; expected name, type, K, C, Y, X, R, S, "
     "stride, stride_y, stride_x, padding, pad_top, pad_bottom, pad_left, pad_right, dilation, "
     "dilation_y, dilation_x, groups, N"),
    ("layers:\n  - {name: c1, type: conv2d, C: 2, Y: 6, X: 6, R: 3, S: 3}\n",
     "layers[0].K is missing; a conv2d layer needs K, C, Y, X, R, S"),
    ("layers:\n  - {name: c1, type: conv3d, K: 4}\n",
     "layers[0].type must be one of conv2d, dwconv, convtranspose2d, gemm, not 'conv3d'"),
    ("layers:\n  - {name: c1, K: 4}\n", "layers[0].type is missing; expected one of conv2d, dwconv, convtranspose2d, gemm"),
    ("layers:\n  - {type: gemm, M: 1, N: 1, K: 1}\n", "layers[0].name is missing"),
    ("layers:\n  - {name: my layer, type: gemm, M: 1, N: 1, K: 1}\n",
     "layers[0].name must be a non-empty string without spaces, not 'my layer'"),
    ("layers:\n  - {name: 7, type: gemm, M: 1, N: 1, K: 1}\n",
     "layers[0].name must be a non-empty string without spaces, not 7"),
    ("layers:\n  - {name: d, type: dwconv, C: 8, K: 4, Y: 6, X: 6, R: 3, S: 3}\n",
     "layers[0].K of a dwconv layer must equal C=8, not 4"),
    ("layers:\n  - {name: c1, type: conv2d, K: 4, C: 3, Y: 6, X: 6, R: 3, S: 3, groups: 2}\n",
     "layers[0]: groups=2 must divide C=3 and K=4"),
    ("layers:\n  - {name: c1, type: conv2d, K: 4, C: 2, Y: 2, X: 6, R: 3, S: 3}\n",
     "layers[0]: the 3x3 filter is larger than the padded 2x6 input"),
    (f"layers:\n  - {_GOOD}\n  - {_GOOD}\n", "layers[1].name 'c1' repeats layers[0].name"),
    ("layers: []\n", "layers must be a non-empty list of layers, not []"),
    ("name: n\n", "layers must be a non-empty list of layers, not None"),
    ("layers:\n  - 5\n", "layers[0] must be a mapping with name, type and sizes, not 5"),
    (f"layers:\n  - {_GOOD}\nversion: 2\n", "version is not a workload field; expected name, layers"),
    ("- 1\n- 2\n", "expected a mapping with 'name' and 'layers', not [1, 2]"),
    ("", "empty file; expected a mapping with 'name' and 'layers'"),
    ("layers:\n  - {name: c1, type: gemm, M: 1, N: 1, K: 1, K: 2}\n",
     "not valid YAML (line 2: duplicate key 'K')"),
    ("layers: [\n  {name: c1\n", "not valid YAML (line 3: expected ',' or '}', but got '<stream end>')"),
    ("name: a: b\n", "not valid YAML (line 1: mapping values are not allowed here)"),
])
def test_bad_yaml_files_name_file_field_and_value(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(AccelgenError) as info:
        load_workload_yaml(path)
    assert str(info.value) == f"{path}: {message}"
    assert "\n" not in str(info.value)


def test_unreadable_files(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(AccelgenError, match="^" + str(missing) + ": no such file$"):
        load_workload_yaml(missing)
    with pytest.raises(AccelgenError, match="is a directory"):
        load_workload_yaml(tmp_path)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(AccelgenError, match=r"bin.yaml: not UTF-8 text \(byte 6\)$"):
        load_workload_yaml(binary)


def test_bad_scalars_that_pyyaml_itself_chokes_on() -> None:
    # PyYAML raises ValueError (not YAMLError) for an impossible date: still one of ours.
    with pytest.raises(AccelgenError, match=r"^s: not valid YAML \(month must be in 1\.\.12\)$"):
        parse_workload_yaml("when: 2001-13-01\n", "s")


# -- inline specs -------------------------------------------------------------------------------
def test_layer_specs() -> None:
    assert parse_layer_spec("conv2d:K=8,C=4,Y=6,X=6,R=3,S=3,stride=1", name="c") == \
        Conv2D("c", K=8, C=4, Y=6, X=6, R=3, S=3, stride=1)
    assert parse_layer_spec("gemm:M=4,N=8,K=16") == GEMM("gemm:M=4,N=8,K=16", M=4, N=8, K=16)
    assert parse_layer_spec(" dwconv: C=8, Y=6, X=6, R=3, S=3, pad=1, name=dw ") == \
        Conv2D("dw", K=8, C=8, Y=6, X=6, R=3, S=3, padding=1, groups=8)


@pytest.mark.parametrize("layer", [
    Conv2D("a", K=8, C=4, Y=6, X=6, R=3, S=3),
    Conv2D("b", K=8, C=4, Y=7, X=5, R=3, S=1, N=2, stride=2, padding=1, groups=2),
    Conv2D("c", K=16, C=16, Y=8, X=8, R=3, S=3, padding=1, groups=16),
    GEMM("d", M=3, N=5, K=7, batch=4),
])
def test_describe_round_trips(layer: Conv2D | GEMM) -> None:
    assert parse_layer_spec(layer.describe(), name=layer.name) == layer


@pytest.mark.parametrize(("spec", "message"), [
    ("conv2d:K=abc,C=4,Y=6,X=6,R=3,S=3", "K must be a positive integer, not 'abc'"),
    ("conv2d:K=8,C=4,Y=6,X=6,R=3", "S is missing; a conv2d layer needs K, C, Y, X, R, S"),
    ("gemm:M=4,N=8,K=16,Q=1", "Q is not a field of a gemm layer; expected name, type, M, N, K, batch"),
    ("gemm:M=4,M=5,N=8,K=16", "M is given twice"),
    ("gemm:M=4,N=8,,K=16", "expected KEY=VALUE, found ''"),
    ("gemm:M=-4,N=8,K=16", "M must be a positive integer, not '-4'"),
    ("conv3d:K=1", "type must be one of conv2d, dwconv, convtranspose2d, gemm, not 'conv3d'"),
    ("gemm", "expected TYPE:KEY=VALUE,... with TYPE one of conv2d, dwconv, convtranspose2d, gemm"),
    ("conv2d:K=8,C=4,Y=6,X=6,R=3,S=3,groups=3", "groups=3 must divide C=4 and K=8"),
])
def test_bad_layer_specs(spec: str, message: str) -> None:
    with pytest.raises(AccelgenError) as info:
        parse_layer_spec(spec)
    assert str(info.value) == f"layer spec {spec!r}: {message}"


# -- property tests: whatever the input, only AccelgenError escapes ------------------------------
_FIELDS = ["name", "type", "layers", "K", "C", "Y", "X", "R", "S", "N", "M", "stride", "padding",
           "groups", "batch", "pad", "conv2d", "gemm", "dwconv"]
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**20), st.floats(allow_nan=True),
                     st.text(max_size=8), st.sampled_from(_FIELDS))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(_FIELDS), st.integers(), st.text(max_size=4)), inner, max_size=6)),
    max_leaves=25)
_layer_dicts = st.fixed_dictionaries(
    {"name": st.one_of(st.sampled_from(["a", "b", "c"]), _scalars), "type": st.sampled_from(["conv2d", "dwconv", "gemm", "x"])},
    optional={k: st.one_of(st.integers(-1, 9), _scalars) for k in ["K", "C", "Y", "X", "R", "S", "N", "M", "stride",
                                                                    "padding", "groups", "batch", "pad"]})
_documents = st.one_of(_values, st.fixed_dictionaries(
    {"layers": st.lists(st.one_of(_layer_dicts, _values), max_size=4)}, optional={"name": _scalars}))


def _only_accelgen_errors(call: object, *args: object) -> None:
    try:
        call(*args)  # type: ignore[operator]
    except AccelgenError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_random_text_into_yaml_loader(text: str) -> None:
    _only_accelgen_errors(parse_workload_yaml, text, "fuzz.yaml")


@settings(max_examples=300, deadline=None)
@given(_documents)
def test_random_documents_into_yaml_loader(document: object) -> None:
    _only_accelgen_errors(workload_from_dict, document)
    try:
        text = yaml.safe_dump(document)
    except (yaml.YAMLError, ValueError):
        return
    _only_accelgen_errors(parse_workload_yaml, text, "fuzz.yaml")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_random_text_into_layer_spec(spec: str) -> None:
    _only_accelgen_errors(parse_layer_spec, spec)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["conv2d", "dwconv", "gemm", "", "x"]),
       st.lists(st.tuples(st.sampled_from(_FIELDS + ["", "=", " "]), st.one_of(st.integers(-2, 40).map(str),
                                                                               st.text(max_size=5))), max_size=9))
def test_structured_layer_specs(kind: str, pairs: list[tuple[str, str]]) -> None:
    _only_accelgen_errors(parse_layer_spec, kind + ":" + ",".join(f"{k}={v}" for k, v in pairs))


@settings(max_examples=200, deadline=None)
@given(k=st.integers(1, 64), c=st.integers(1, 64), y=st.integers(1, 40), r=st.integers(1, 7),
       stride=st.integers(1, 4), padding=st.integers(0, 3), n=st.integers(1, 4))
def test_valid_conv_specs_build_the_layer_they_describe(k: int, c: int, y: int, r: int, stride: int,
                                                        padding: int, n: int) -> None:
    spec = f"conv2d:K={k},C={c},Y={y},X={y},R={r},S={r},stride={stride},padding={padding},N={n}"
    try:
        layer = parse_layer_spec(spec, name="l")
    except AccelgenError as exc:
        assert y + 2 * padding < r and "filter is larger" in str(exc)
        return
    yo = (y + 2 * padding - r) // stride + 1
    assert layer.macs == n * k * c * r * r * yo * yo

"""MAESTRO ``.m`` files: layers, dataflow text, and one-line errors with line numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.base import AccelgenError
from costmodel.workload.layers import GEMM, Conv2D
from costmodel.workload.maestro_files import load_maestro_file, parse_maestro_text, read_maestro_file

DATA = Path(__file__).resolve().parent / "data" / "maestro"


def test_conv_dsconv_gemm_with_constants_and_comments() -> None:
    model, dataflows = load_maestro_file(DATA / "small_cnn_kcp.m")
    assert model.name == "small_cnn"
    conv, dw, pw, fc = model.layers
    assert conv == Conv2D("CONV1", K=16, C=8, Y=33, X=33, R=3, S=3, stride=2, padding=0)
    assert conv.Yo == 16 and conv.macs == 16 * 8 * 9 * 16 * 16
    assert dw == Conv2D("DW2", K=16, C=16, Y=16, X=16, R=3, S=3, groups=16)   # DSCONV: K=C=groups
    assert dw.depthwise and dw.macs == 16 * 9 * 14 * 14
    assert pw == Conv2D("PW3", K=32, C=16, Y=14, X=14, R=1, S=1, N=2)
    assert fc == GEMM("FC4", M=4, N=10, K=6272)                                 # M from Constant KTile
    assert dataflows[0] == ("SpatialMap(1,1) K; TemporalMap(8,8) C; TemporalMap(Sz(R),Sz(R)) R; "
                            "TemporalMap(Sz(S),Sz(S)) S; TemporalMap(Sz(R),1) Y; TemporalMap(Sz(S),1) X; "
                            "Cluster(8,P); SpatialMap(1,1) C; TemporalMap(Sz(R),1) Y; TemporalMap(Sz(S),1) X; "
                            "TemporalMap(Sz(R),Sz(R)) R; TemporalMap(Sz(S),Sz(S)) S")
    assert dataflows[1] == ("SpatialMap(1,1) C; TemporalMap(Sz(R),1) Y; TemporalMap(Sz(S),1) X; "
                            "TemporalMap(Sz(R),Sz(R)) R; TemporalMap(Sz(S),Sz(S)) S")
    assert dataflows[2] == dataflows[1]   # no Dataflow block: MAESTRO reuses the previous one
    assert dataflows[3] == "TemporalMap(1,1) N; SpatialMap(1,1) M; TemporalMap(64,64) K; Cluster(64,L); SpatialMap(1,1) K"


def test_stride_is_per_axis() -> None:
    """MAESTRO's ``Stride {X: 2, Y: 1}`` sets each axis; outputs and MACs follow per axis."""
    text = ("Network n {\nLayer L {\nType: CONV\nStride { X: 2, Y: 1 }\n"
            "Dimensions { K: 4, C: 2, R: 3, S: 3, Y: 8, X: 9 }\n}\n}\n")
    model, _ = parse_maestro_text(text)
    (layer,) = model.layers
    assert (layer.stride_y, layer.stride_x, layer.stride) == (1, 2, None)
    yo, xo = (8 - 3) // 1 + 1, (9 - 3) // 2 + 1
    assert (layer.Yo, layer.Xo) == (yo, xo) and layer.macs == 4 * 2 * 3 * 3 * yo * xo


def test_gemm_and_bmm() -> None:
    pairs = read_maestro_file(DATA / "gemm_tiles.m")
    assert [layer for layer, _ in pairs] == [GEMM("PROJ", M=32, N=64, K=256),
                                             GEMM("SCORES", M=32, N=32, K=16, batch=4)]
    assert pairs[0][1] == ("TemporalMap(4,4) N; SpatialMap(2,2) M; TemporalMap(16,16) K; Cluster(16,P); "
                           "TemporalMap(4,4) N; TemporalMap(2,2) M; SpatialMap(1,1) K")
    assert pairs[1][1] == "TemporalMap(1,1) B; SpatialMap(Sz(M),Sz(M)) M; TemporalMap(Sz(K),Sz(K)) K; TemporalMap(1,1) N"


def test_model_only_file_and_repeated_names() -> None:
    model, dataflows = load_maestro_file(DATA / "model_only.m")
    assert dataflows == [None] * 4
    assert [layer.name for layer in model.layers] == ["CONV2_1_1", "CONV2_1_2", "CONV2_1_Residual",
                                                      "CONV2_1_Residual#2"]
    assert model.layers[1] == Conv2D("CONV2_1_2", K=16, C=16, Y=15, X=15, R=3, S=3, stride=2)
    assert model.macs == 16 * 32 * 14 * 14 + 16 * 16 * 9 * 7 * 7 + 2 * 16 * 7 * 7


def test_tokenizer_quirks() -> None:
    # MAESTRO's separators include '-' and '>'; braces may touch words; CRLF line ends; a missing comma.
    text = ("Constant T 4;\r\nNetwork {\r\nLayer CONV-1{Type: CONV\r\n"
            "Dimensions {K:T C:3,R:3,S:3,Y:8,X:8}// trailing\r\n"
            "Dataflow{SpatialMap(T,T)->K;Cluster(Sz(R),P);}}}\r\n")
    model, dataflows = parse_maestro_text(text, "q.m", default_name="q")
    assert model.name == "q"
    assert model.layers == (Conv2D("CONV-1", K=4, C=3, Y=8, X=8, R=3, S=3),)
    assert dataflows == ["SpatialMap(4,4) K; Cluster(Sz(R),P)"]


_LAYER = "Layer L {\nType: CONV\nDimensions { K: 4, C: 2, R: 3, S: 3, Y: 8, X: 8 }\n"


@pytest.mark.parametrize(("text", "message"), [
    ("Network n {\nLayer L {\nType: CONV\nDimensions K: 64 }\n}\n}\n", "4: expected '{' after 'Dimensions', found 'K'"),
    ("Network n {\n" + _LAYER + "Dataflow {\n TemporalMap(Foo,1) K;\n}\n}\n}\n",
     "6: expected an integer, a Constant or Sz(DIM) for the size of TemporalMap after 'TemporalMap', found 'Foo'"),
    ("Network n {\n" + _LAYER + "Dataflow {\n SpatialMap(1,1) M;\n}\n}\n}\n",
     "6: expected a CONV dimension (N, K, C, R, S, Y, X, Y', X') in the Dataflow of layer 'L', found 'M'"),
    ("Network n {\n" + _LAYER + "Dataflow {\n TemporalMap(Sz(Q),1) K;\n}\n}\n}\n",
     "6: Sz(Q) in layer 'L' names no dimension of its Dimensions"),
    ("Network n {\n" + _LAYER + "Dataflow {\n TemporalMap(0,1) K;\n}\n}\n}\n",
     "6: the size of TemporalMap must be a positive integer, not 0"),
    ("Network n {\n" + _LAYER + "Dataflow {\n Cluster(4, Q);\n}\n}\n}\n",
     "6: expected 'P' or 'L' after 'Cluster(4', found 'Q'"),
    ("Network n {\n" + _LAYER + "Dataflow {\n Spatialmap(1,1) K;\n}\n}\n}\n",
     "6: expected 'TemporalMap', 'SpatialMap', 'Cluster' or '}' in the Dataflow of layer 'L', found 'Spatialmap'"),
    ("Network n {\nLayer L {\nType: POOL\n}\n}\n", ("3: layer type 'POOL' is not supported; "
                                                    "expected one of CONV, DSCONV, GEMM, BMM")),
    ("Network n {\nLayer L {\nType: CONVV\n}\n}\n",
     "3: expected a layer type (CONV, DSCONV, GEMM, BMM) after 'Type', found 'CONVV'"),
    ("Network n {\nLayer L {\nType: CONV\nDimensions { K: 4, C: abc }\n}\n}\n",
     "4: expected an integer or a Constant for the size of C after 'C', found 'abc'"),
    ("Network n {\nLayer L {\nType: CONV\nDimensions { K: 4, C: 2, R: 3, Y: 8, X: 8 }\n}\n}\n",
     "4: layer 'L': Dimensions lacks S"),
    ("Network n {\nLayer L {\nType: GEMM\nDimensions { M: 4, N: 2, K: 3, Y: 8 }\n}\n}\n",
     "4: expected a GEMM dimension (M, N, K) in layer 'L', found 'Y'"),
    ("Network n {\nLayer L {\nType: DSCONV\nDimensions { K: 2, C: 2, R: 3, S: 3, Y: 8, X: 8 }\n}\n}\n",
     "4: layer 'L': a DSCONV layer has K: 1, not 2"),
    ("Network n {\nLayer L {\nType: TRCONV\nDimensions { K: 4, C: 2, R: 3, S: 3, Y: 8, X: 8 }\n}\n}\n",
     ("3: layer type 'TRCONV' is not supported (a .m layer gives no padding or output size to pin down its "
      "meaning); expected one of CONV, DSCONV, GEMM, BMM, or a convtranspose2d layer in a workload YAML")),
    ("Network n {\nLayer L {\nType: CONV\nDimensions { K: 4, C: 2, R: 3, S: 3, Y: 2, X: 8 }\n}\n}\n",
     "2: layer 'L': the 3x3 filter is larger than the padded 2x8 input"),
    ("Network n {\nLayer L {\nDimensions { K: 4, C: 2, R: 3, S: 3, Y: 8, X: 8 }\n}\n}\n", "2: layer 'L' has no 'Type'"),
    ("Network n {\nLayer L {\nType: CONV\nType: GEMM\n}\n}\n", "4: expected one 'Type' in layer 'L', found a second"),
    ("Network n {\nLayer L {\nType: CONV\nPadding { X: 1 }\n}\n}\n",
     "4: expected 'Type', 'Stride', 'Dimensions', 'Dataflow' or '}' in layer 'L', found 'Padding'"),
    ("Network n {\n" + _LAYER, "4: expected '}' closing layer 'L' (line 2), found end of file"),
    ("Network n {\n}\n", "2: Network 'n' has no layers"),
    ("// nothing\n", "1: expected a 'Network' block, found end of file"),
    ("Constant 5 5;\n", "1: expected a constant name after 'Constant', found '5'"),
    ("Network n {\n" + _LAYER + "}\n}\nNetwork m {\n", "7: expected one 'Network' per file, found a second one"),
    ("Layer L {\n", "1: expected 'Constant' or 'Network', found 'Layer'"),
])
def test_errors_name_file_line_and_token(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.m"
    path.write_text(text)
    with pytest.raises(AccelgenError) as info:
        load_maestro_file(path)
    assert str(info.value) == f"{path}:{message}"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(AccelgenError) as info:
        load_maestro_file(tmp_path / "vgg.m")
    assert str(info.value) == f"{tmp_path / 'vgg.m'}: no such file"


def test_accelerator_blocks_are_skipped() -> None:
    text = "Accelerator {\n PE { NumPEs: 128 }\n}\nNetwork n {\n" + _LAYER + "}\n}\n"
    model, dataflows = parse_maestro_text(text)
    assert model.layers[0].name == "L" and dataflows == [None]


# -- property tests: whatever the input, only AccelgenError escapes ------------------------------
_WORDS = ["Network", "Layer", "Constant", "Type", "CONV", "DSCONV", "GEMM", "BMM", "POOL", "Stride",
          "Dimensions", "Dataflow", "TemporalMap", "SpatialMap", "Cluster", "Sz", "P", "L", "{", "}",
          "K", "C", "R", "S", "Y", "X", "N", "M", "B", "Y'", "T", "0", "1", "3", "8", "64",
          "99999999999999999999", "//", "(", ")", ",", ":", ";", "-", ">", "\n", "abc"]


def _only_accelgen_errors(text: str) -> None:
    try:
        parse_maestro_text(text, "fuzz.m")
    except AccelgenError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_random_text_into_maestro_reader(text: str) -> None:
    _only_accelgen_errors(text)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), max_size=60), st.sampled_from([" ", "\t", "", "\n"]))
def test_token_soup_into_maestro_reader(words: list[str], joiner: str) -> None:
    _only_accelgen_errors(joiner.join(words))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_real_files_into_maestro_reader(data: st.DataObject) -> None:
    text = (DATA / data.draw(st.sampled_from(["small_cnn_kcp.m", "gemm_tiles.m", "model_only.m"]))).read_text()
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 40)))
    _only_accelgen_errors(text[:start] + data.draw(st.sampled_from(_WORDS + [""])) + text[end:])

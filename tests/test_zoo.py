"""The model zoo: exact MAC totals derived by hand, checked against published figures."""

from __future__ import annotations

import re

import pytest

from costmodel.base import AccelgenError
from costmodel.workload.layers import GEMM, Conv2D, Model
from costmodel.workload.zoo import ZOO, alexnet, bert_base_block, get_model, mobilenet_v2, resnet50, vgg16


def _close(value: int, published: float) -> bool:
    return abs(value - published) <= 0.02 * published


def test_alexnet_total() -> None:
    # torchvision AlexNet at 224x224: 55x55 after conv1, pools to 27, 13, 6.
    per_layer = [
        64 * 3 * 11 * 11 * 55 * 55,     # conv1  11x11/4 pad 2     70,276,800
        192 * 64 * 5 * 5 * 27 * 27,     # conv2   5x5 pad 2       223,948,800
        384 * 192 * 3 * 3 * 13 * 13,    # conv3                   112,140,288
        256 * 384 * 3 * 3 * 13 * 13,    # conv4                   149,520,384
        256 * 256 * 3 * 3 * 13 * 13,    # conv5                    99,680,256
        9216 * 4096, 4096 * 4096, 4096 * 1000,  # fc6-8            58,621,952
    ]
    assert sum(per_layer) == 714_188_480
    assert alexnet().macs == 714_188_480
    assert _close(alexnet().macs, 0.714e9)  # torchvision: 0.71 GFLOPS (multiply-adds)


def test_vgg16_total() -> None:
    # A 3x3 pad-1 conv keeps the size: K*C*9*H*W.  Two convs per block, three from block 3.
    big = 1_849_688_064   # 64*64*9*224^2 = 128*128*9*112^2 = 256*256*9*56^2 = 512*512*9*28^2
    first = 924_844_032   # a block's first conv: 128*64*9*112^2 = 256*128*9*56^2 = 512*256*9*28^2
    assert big == 64 * 64 * 9 * 224 * 224 and first == 128 * 64 * 9 * 112 * 112
    convs = 64 * 3 * 9 * 224 * 224 + big + first + big + first + 2 * big + first + 2 * big \
        + 3 * 512 * 512 * 9 * 14 * 14
    fcs = 25088 * 4096 + 4096 * 4096 + 4096 * 1000
    assert convs == 15_346_630_656 and fcs == 123_633_664
    assert vgg16().macs == convs + fcs == 15_470_264_320
    assert _close(vgg16().macs, 15.47e9)


def test_resnet50_total() -> None:
    # v1.5 bottleneck (stride on the 3x3).  A non-first block of every stage costs the same
    # 218,365,952 MACs: (4p*p + 9p*p + p*4p) * H*W with p*H stage-invariant (64*56 = 128*28 ...).
    identity = 64 * 256 * 56 * 56 + 64 * 64 * 9 * 56 * 56 + 256 * 64 * 56 * 56
    assert identity == 218_365_952
    stage1_first = 64 * 64 * 3136 + 64 * 64 * 9 * 3136 + 256 * 64 * 3136 + 256 * 64 * 3136   # 231,211,008
    # Stages 2-4, first block: 1x1 at the input size, 3x3/2, 1x1 and a strided 1x1 projection.
    strided_first = 128 * 256 * 56 * 56 + 128 * 128 * 9 * 28 * 28 + 512 * 128 * 28 * 28 + 512 * 256 * 28 * 28
    assert strided_first == 372_506_624
    conv1 = 64 * 3 * 7 * 7 * 112 * 112                 # 118,013,952
    total = conv1 + stage1_first + 2 * identity + 3 * strided_first + (3 + 5 + 2) * identity + 2048 * 1000
    assert total == 4_089_184_256
    model = resnet50()
    assert model.macs == total
    assert _close(model.macs, 4.09e9)   # "4.1 GFLOPs" (multiply-adds), torchvision 4.09
    layers = {layer.name: layer for layer in model.layers}
    assert layers["conv1"] == Conv2D("conv1", K=64, C=3, Y=224, X=224, R=7, S=7, stride=2, padding=3)
    assert layers["layer2.0.conv1"].stride == 1 and layers["layer2.0.conv2"].stride == 2  # v1.5
    assert layers["layer2.0.downsample"] == Conv2D("layer2.0.downsample", K=512, C=256, Y=56, X=56, R=1, S=1,
                                                   stride=2)
    assert layers["layer4.2.conv3"].Yo == 7
    assert layers["fc"] == GEMM("fc", M=1, N=1000, K=2048)
    assert len(model.layers) == 1 + 16 * 3 + 4 + 1


def test_mobilenet_v2_total() -> None:
    # (input channels, expansion, output channels, input size, output size) per inverted residual.
    blocks = [(32, 1, 16, 112, 112), (16, 6, 24, 112, 56), (24, 6, 24, 56, 56),
              (24, 6, 32, 56, 28), (32, 6, 32, 28, 28), (32, 6, 32, 28, 28),
              (32, 6, 64, 28, 14), *[(64, 6, 64, 14, 14)] * 3,
              (64, 6, 96, 14, 14), (96, 6, 96, 14, 14), (96, 6, 96, 14, 14),
              (96, 6, 160, 14, 7), (160, 6, 160, 7, 7), (160, 6, 160, 7, 7), (160, 6, 320, 7, 7)]
    total = 32 * 3 * 9 * 112 * 112 + 1280 * 320 * 7 * 7 + 1280 * 1000
    for cin, t, cout, size, out in blocks:
        hidden = cin * t
        total += (cin * hidden * size * size if t != 1 else 0) + hidden * 9 * out * out + hidden * cout * out * out
    assert total == 300_774_272
    model = mobilenet_v2()
    assert model.macs == total
    assert _close(model.macs, 0.30e9)   # "300M MACs" (Sandler et al. 2018, Table 3)
    dws = [layer for layer in model.layers if isinstance(layer, Conv2D) and layer.depthwise]
    assert len(dws) == 17 and all(layer.groups == layer.C == layer.K for layer in dws)
    assert [layer.stride for layer in dws if layer.stride != 1] == [2, 2, 2, 2]
    assert model.layers[1].name == "block1.dw"   # t = 1: no expansion conv


def test_bert_base_block() -> None:
    model = bert_base_block()
    by_name = {layer.name: layer for layer in model.layers}
    assert by_name["q_proj"] == GEMM("q_proj", M=512, N=768, K=768)
    assert by_name["attn_scores"] == GEMM("attn_scores", M=512, N=512, K=64, batch=12)
    assert by_name["attn_context"] == GEMM("attn_context", M=512, N=64, K=512, batch=12)
    assert by_name["ffn1"] == GEMM("ffn1", M=512, N=3072, K=768)
    assert by_name["ffn2"] == GEMM("ffn2", M=512, N=768, K=3072)
    projections = 4 * 512 * 768 * 768            # Q, K, V, output: 1,207,959,552
    attention = 2 * 12 * 512 * 512 * 64          # scores and context: 402,653,184
    ffn = 2 * 512 * 768 * 3072                   # 2,415,919,104
    assert model.macs == projections + attention + ffn == 4_026_531_840
    # 12 such blocks are BERT-base's ~48.3 GMACs at 512 tokens.
    assert bert_base_block(seq_len=128).macs == 4 * 128 * 768 * 768 + 2 * 12 * 128 * 128 * 64 + 2 * 128 * 768 * 3072


@pytest.mark.parametrize("name", sorted(ZOO))
def test_registry_models_are_well_formed(name: str) -> None:
    model = get_model(name)
    assert isinstance(model, Model) and model.name == name
    assert len({layer.name for layer in model.layers}) == len(model.layers)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)*", layer.name) for layer in model.layers)
    assert get_model(name) == model   # deterministic, built on call


def test_batch_scales_macs() -> None:
    assert resnet50(batch=4).macs == 4 * resnet50().macs
    assert alexnet(batch=2).macs == 2 * alexnet().macs


def test_unknown_model_lists_known_names() -> None:
    with pytest.raises(AccelgenError) as info:
        get_model("resnet18")
    assert str(info.value) == ("model zoo: unknown model 'resnet18'; "
                               "known models: alexnet, bert_base, mobilenetv2, resnet50, vgg16")

"""Built-in model zoo: published layer shapes of a few reference networks, no downloads.

The zoo exists so that golden-number tests, the CLI and the design-space search can name a real
network without shipping weights or importing a framework.  Shapes follow torchvision (the de facto
reference for published MAC counts) unless a docstring says otherwise.

Conventions shared by every model here:

* Only layers that multiply are listed (convolutions, fully-connected layers, matmuls); pooling,
  normalisation, activations and residual additions do no MACs in this model and are left out.
  The spatial size of each conv is the true input size *after* any preceding pooling.
* A fully-connected layer is ``GEMM(M=batch, N=out_features, K=in_features)``: one row of
  activations per image (``out[M, N] = A[M, K] @ W[K, N]``), so it is analysed with MAESTRO's GEMM
  mapping rather than as a 1x1 conv on a 1x1 image.  Both give the same MAC count.
* Layer names are unique, readable and close to torchvision's module paths (``layer1.0.conv2``).
"""

from __future__ import annotations

from typing import Callable

from ..base import AccelgenError
from .layers import GEMM, Conv2D, Layer, Model

__all__ = ["alexnet", "vgg16", "resnet50", "mobilenet_v2", "bert_base_block", "ZOO", "get_model"]


def _conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def _fc(name: str, in_features: int, out_features: int, batch: int) -> GEMM:
    return GEMM(name, M=batch, N=out_features, K=in_features)


def alexnet(batch: int = 1) -> Model:
    """AlexNet as in torchvision (the "one weird trick" variant, 224x224 input).

    torchvision's channel counts (64, 192, 384, 256, 256) and ungrouped conv2/4/5 are used instead
    of the 2012 paper's two-GPU split (96, 256, 384, 384, 256 with groups=2): that is the variant
    whose MAC count (~0.71 G) is quoted everywhere today.
    """
    n = batch
    layers: list[Layer] = [
        Conv2D("conv1", K=64, C=3, Y=224, X=224, R=11, S=11, N=n, stride=4, padding=2),   # -> 55
        Conv2D("conv2", K=192, C=64, Y=27, X=27, R=5, S=5, N=n, padding=2),              # pool -> 27
        Conv2D("conv3", K=384, C=192, Y=13, X=13, R=3, S=3, N=n, padding=1),             # pool -> 13
        Conv2D("conv4", K=256, C=384, Y=13, X=13, R=3, S=3, N=n, padding=1),
        Conv2D("conv5", K=256, C=256, Y=13, X=13, R=3, S=3, N=n, padding=1),
        _fc("fc6", 256 * 6 * 6, 4096, n),                                                # pool -> 6x6
        _fc("fc7", 4096, 4096, n),
        _fc("fc8", 4096, 1000, n),
    ]
    return Model("alexnet", tuple(layers))


#: VGG-16 (configuration "D"): output channels per conv, "M" marks a 2x2 max-pool.
_VGG16_CFG: tuple[int | str, ...] = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M",
                                     512, 512, 512, "M", 512, 512, 512, "M")


def vgg16(batch: int = 1) -> Model:
    """VGG-16 (Simonyan & Zisserman 2014, configuration D) on 224x224: thirteen 3x3 pad-1 convs
    named ``conv{block}_{i}`` as in the paper, then fc6/fc7/fc8."""
    layers: list[Layer] = []
    size, channels, block, index = 224, 3, 1, 1
    for item in _VGG16_CFG:
        if item == "M":
            size, block, index = size // 2, block + 1, 1
            continue
        assert isinstance(item, int)
        layers.append(Conv2D(f"conv{block}_{index}", K=item, C=channels, Y=size, X=size, R=3, S=3,
                             N=batch, padding=1))
        channels, index = item, index + 1
    layers += [_fc("fc6", 512 * 7 * 7, 4096, batch), _fc("fc7", 4096, 4096, batch),
               _fc("fc8", 4096, 1000, batch)]
    return Model("vgg16", tuple(layers))


def resnet50(batch: int = 1) -> Model:
    """ResNet-50 as in torchvision, i.e. "v1.5": in a downsampling bottleneck the stride sits on
    the 3x3 conv (``layerN.0.conv2``), not on the first 1x1 as in the 2015 paper.  The projection
    shortcut of each stage's first block is ``layerN.0.downsample`` (1x1, same stride)."""
    n = batch
    layers: list[Layer] = [Conv2D("conv1", K=64, C=3, Y=224, X=224, R=7, S=7, N=n, stride=2, padding=3)]
    size = _conv_out(_conv_out(224, 7, 2, 3), 3, 2, 1)  # conv1 -> 112, 3x3/2 max-pool -> 56
    in_ch = 64
    for stage, (planes, blocks, stride) in enumerate(((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)), 1):
        for b in range(blocks):
            s = stride if b == 0 else 1
            out_ch = planes * 4
            p = f"layer{stage}.{b}"
            out_size = _conv_out(size, 3, s, 1)
            layers += [
                Conv2D(f"{p}.conv1", K=planes, C=in_ch, Y=size, X=size, R=1, S=1, N=n),
                Conv2D(f"{p}.conv2", K=planes, C=planes, Y=size, X=size, R=3, S=3, N=n, stride=s, padding=1),
                Conv2D(f"{p}.conv3", K=out_ch, C=planes, Y=out_size, X=out_size, R=1, S=1, N=n),
            ]
            if b == 0:
                layers.append(Conv2D(f"{p}.downsample", K=out_ch, C=in_ch, Y=size, X=size, R=1, S=1, N=n,
                                     stride=s))
            in_ch, size = out_ch, out_size
    layers.append(_fc("fc", 2048, 1000, n))
    return Model("resnet50", tuple(layers))


#: MobileNetV2 inverted-residual settings (expansion t, output channels c, repeats n, stride s).
_MBV2_CFG: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


def mobilenet_v2(batch: int = 1) -> Model:
    """MobileNetV2 (width 1.0, 224x224) as in torchvision.  Each inverted residual is
    ``block{i}.expand`` (1x1, absent when t = 1), ``block{i}.dw`` (3x3 depthwise, groups = C = K,
    carrying the block's stride) and ``block{i}.project`` (1x1), numbered 1..17 in network order."""
    n = batch
    layers: list[Layer] = [Conv2D("conv_stem", K=32, C=3, Y=224, X=224, R=3, S=3, N=n, stride=2, padding=1)]
    size, in_ch, index = _conv_out(224, 3, 2, 1), 32, 1
    for t, c, repeats, stride in _MBV2_CFG:
        for r in range(repeats):
            s = stride if r == 0 else 1
            hidden = in_ch * t
            p = f"block{index}"
            if t != 1:
                layers.append(Conv2D(f"{p}.expand", K=hidden, C=in_ch, Y=size, X=size, R=1, S=1, N=n))
            layers.append(Conv2D(f"{p}.dw", K=hidden, C=hidden, Y=size, X=size, R=3, S=3, N=n,
                                 stride=s, padding=1, groups=hidden))
            size = _conv_out(size, 3, s, 1)
            layers.append(Conv2D(f"{p}.project", K=c, C=hidden, Y=size, X=size, R=1, S=1, N=n))
            in_ch, index = c, index + 1
    layers += [Conv2D("conv_head", K=1280, C=in_ch, Y=size, X=size, R=1, S=1, N=n),
               _fc("fc", 1280, 1000, n)]
    return Model("mobilenetv2", tuple(layers))


def bert_base_block(seq_len: int = 512, batch: int = 1) -> Model:
    """The GEMMs of one BERT-base encoder block (hidden 768, 12 heads of 64, FFN 3072).

    Convention: ``out[M, N] = A[M, K] @ B[K, N]`` with ``M`` the tokens (``seq_len * batch`` rows
    of activations), ``N`` the output features and ``K`` the reduction.  Projections and the FFN
    are plain GEMMs over all tokens; the two attention matmuls are per (sequence, head), hence
    ``GEMM.batch = 12 * batch``:

    * ``q_proj``/``k_proj``/``v_proj``/``out_proj``: M = tokens, N = 768, K = 768
    * ``attn_scores`` (Q K^T):   M = seq_len, N = seq_len, K = 64
    * ``attn_context`` (P V):    M = seq_len, N = 64, K = seq_len
    * ``ffn1``: N = 3072, K = 768;  ``ffn2``: N = 768, K = 3072

    Softmax, layer norm, bias and GELU do no MACs here and are omitted.
    """
    hidden, heads, head_dim, ffn = 768, 12, 64, 3072
    tokens = seq_len * batch
    layers: list[Layer] = [
        GEMM("q_proj", M=tokens, N=hidden, K=hidden),
        GEMM("k_proj", M=tokens, N=hidden, K=hidden),
        GEMM("v_proj", M=tokens, N=hidden, K=hidden),
        GEMM("attn_scores", M=seq_len, N=seq_len, K=head_dim, batch=heads * batch),
        GEMM("attn_context", M=seq_len, N=head_dim, K=seq_len, batch=heads * batch),
        GEMM("out_proj", M=tokens, N=hidden, K=hidden),
        GEMM("ffn1", M=tokens, N=ffn, K=hidden),
        GEMM("ffn2", M=tokens, N=hidden, K=ffn),
    ]
    return Model("bert_base", tuple(layers))


#: Registry of the zoo by the name the CLI and YAML configs use.  Values build the model on call,
#: so importing this module does no work.
ZOO: dict[str, Callable[[], Model]] = {
    "alexnet": alexnet,
    "vgg16": vgg16,
    "resnet50": resnet50,
    "mobilenetv2": mobilenet_v2,
    "bert_base": bert_base_block,
}


def get_model(name: str) -> Model:
    """The zoo model called ``name``; a miss lists the known names so a typo is fixed in one go."""
    try:
        factory = ZOO[name]
    except (KeyError, TypeError):
        known = ", ".join(sorted(ZOO))
        raise AccelgenError(f"unknown model {name!r}; known models: {known}", where="model zoo") from None
    return factory()

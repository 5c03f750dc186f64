"""What the host puts in the generated accelerator's L2 and registers for one layer: the L2
layouts, the configuration registers and the numpy reference.  The host driver
(:mod:`hwgen.host`, over AXI) and the cocotb bench (``sim_tests/tb_accel.py``) use it.

The core's own host bus (``accelgen_top``, see ``docs/timing.md``; the IP top level
``accelgen_axi_top`` of :mod:`hwgen.axi` drives it): one word bus, ``bus_addr[n:n+4]`` selects a
region (``n = host_offset_bits(l2_words)``, 20 unless an L2 region holds more than 2**20 words).

========  =======================================================================
region    contents
========  =======================================================================
0 ctrl    word 0: write 1 = start; 1: status (bit 0 busy, bit 1 done); 2: cycles
          (start to done); 16+i: configuration register ``CONFIG_REGS[i]``
1 input   int8, ``[C][rows][cols]`` (padding and stride compaction done here) with the PEs'
          classes innermost (:func:`interleaved`)
2 weight  int8, ``[K][C][R][S]`` with the PEs' classes innermost
3 output  int32, layout ``[K][Y'][X']``; the host clears it before ``start``
========  =======================================================================

Reads return data on the cycle after ``bus_re``.  A GEMM ``A[M,K] @ B[K,N]`` runs as the 1x1
convolution ``input = A^T`` (``[K][1][M]``: M along the output columns), ``weight = B^T`` (``[N][K][1][1]``), output
``(A @ B)^T``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costmodel.base import AccelgenError
from costmodel.hwgen_preset.rules import (host_offset_bits, ingress, input_mode, l1_pitches, l2_axes, l2_coefficients,
                                          weight_merged)
from costmodel.hwgen_preset.structure import HwStructure, LayerTiles
from costmodel.workload.layers import GEMM, Conv2D, Layer

from .geometry import CONFIG_REGS
from .hostbus import CTRL, REGION

__all__ = ["Job", "make_job", "interleaved", "config_registers", "natural_layout", "reference_output", "random_operands", "bus_address"]


def bus_address(region: str, offset: int, offset_bits: int = 20) -> int:
    """The bus address of word ``offset`` of ``region`` on a design whose word offsets have
    ``offset_bits`` bits (:func:`costmodel.hwgen_preset.rules.host_offset_bits`)."""
    return (REGION[region] << offset_bits) | offset


@dataclass
class Job:
    """Everything a driver writes and what it must read back."""

    config: dict[str, int]
    input_words: list[int]          # int8 values, L2 layout
    weight_words: list[int]
    output_words: int
    expected: list[int]             # int32, L2 layout
    offset_bits: int = 20           # of the design's host bus

    def address(self, region: str, offset: int) -> int:
        return bus_address(region, offset, self.offset_bits)

    def writes(self) -> list[tuple[int, int]]:
        """(bus address, value) in order: configuration, L2 input, L2 weight, cleared outputs."""
        out = [(self.address("ctrl", CTRL["config"] + i), self.config[name])
               for i, name in enumerate(CONFIG_REGS)]
        out += [(self.address("input", i), v & 0xFF) for i, v in enumerate(self.input_words)]
        out += [(self.address("weight", i), v & 0xFF) for i, v in enumerate(self.weight_words)]
        out += [(self.address("output", i), 0) for i in range(self.output_words)]
        return out

    def as_dict(self) -> dict:
        return {"config": self.config, "input_words": self.input_words, "weight_words": self.weight_words,
                "output_words": self.output_words, "expected": self.expected, "offset_bits": self.offset_bits}

    @classmethod
    def from_dict(cls, d: dict) -> "Job":
        return cls(dict(d["config"]), list(d["input_words"]), list(d["weight_words"]), int(d["output_words"]),
                   list(d["expected"]), int(d["offset_bits"]))


def random_operands(layer: Layer, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random int8 operands: ``(x[C,Y,X], w[K,C,R,S])`` for a convolution, ``(A, B)`` for a GEMM."""
    rng = np.random.default_rng(seed)
    if isinstance(layer, GEMM):
        return (rng.integers(-128, 128, (layer.M, layer.K), dtype=np.int64),
                rng.integers(-128, 128, (layer.K, layer.N), dtype=np.int64))
    assert isinstance(layer, Conv2D)
    return (rng.integers(-128, 128, (layer.C, layer.Y, layer.X), dtype=np.int64),
            rng.integers(-128, 128, (layer.K, layer.C, layer.R, layer.S), dtype=np.int64))


def _padded(layer: Conv2D, x: np.ndarray) -> np.ndarray:
    """``x[C, Y, X]`` padded exactly per side."""
    return np.pad(x, ((0, 0), (layer.pad_top, layer.pad_bottom), (layer.pad_left, layer.pad_right)))


def reference_output(layer: Layer, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's answer: ``[K, Y', X']`` for a convolution, ``[M, N]`` for a GEMM (int64)."""
    if isinstance(layer, GEMM):
        return a @ b
    assert isinstance(layer, Conv2D) and layer.groups == 1 and layer.N == 1
    x = _padded(layer, a)
    sy, sx, dy, dx = layer.stride_y, layer.stride_x, layer.dilation_y, layer.dilation_x
    oy, ox = layer.Yo, layer.Xo
    out = np.zeros((layer.K, oy, ox), dtype=np.int64)
    for r in range(layer.R):
        for s in range(layer.S):
            patch = x[:, r * dy: r * dy + (oy - 1) * sy + 1: sy, s * dx: s * dx + (ox - 1) * sx + 1: sx]
            out += np.einsum("kc,cyx->kyx", b[:, :, r, s], patch)
    return out


def _input_layout(layer: Conv2D, x: np.ndarray, tiles: LayerTiles) -> np.ndarray:
    """Pad exactly per side, then keep only the rows (columns) some window reads when the stride
    of that axis is wider than the filter (the hardware then sees stride = filter size)."""
    xp = _padded(layer, x)
    if layer.stride_y > layer.R:
        rows = [y * layer.stride_y + r for y in range(layer.Yo) for r in range(layer.R)]
        xp = xp[:, rows, :]
    if layer.stride_x > layer.S:
        cols = [x_ * layer.stride_x + s for x_ in range(layer.Xo) for s in range(layer.S)]
        xp = xp[:, :, cols]
    assert xp.shape[1:] == (tiles.in_rows, tiles.in_cols), (xp.shape, tiles)
    return xp


def natural_layout(layer: Layer, tiles: LayerTiles, a: np.ndarray, b: np.ndarray):
    """``(input [C][rows][cols], weight [K][C][R][S], expected outputs [K][Y'][X'] flattened)``
    before the L2 layout interleaves the PEs' classes (:func:`interleaved`): the input padded
    and compacted (:func:`_input_layout`); a GEMM as its 1x1 convolution."""
    if isinstance(layer, GEMM):
        return a.T.reshape(layer.K, 1, layer.M), b.T.reshape(layer.N, layer.K, 1, 1), (a @ b).T.reshape(-1)
    assert isinstance(layer, Conv2D)
    return _input_layout(layer, a, tiles), b, reference_output(layer, a, b).reshape(-1)


def config_registers(structure: HwStructure, tiles: LayerTiles) -> dict[str, int]:
    """The configuration registers of one layer (:data:`hwgen.geometry.CONFIG_REGS`): its sizes,
    strides and tiles, and what the host works out from them for the hardware (the L2 layout's
    strides, how the loader sends each tensor's boxes, the PEs' L1 pitches)."""
    d = tiles.dims
    config = {"K": d["K"], "C": d["C"], "Y": d["Y"], "X": d["X"], "R": d["R"], "S": d["S"],
              "stride_y": tiles.stride_y, "stride_x": tiles.stride_x, "in_rows": tiles.in_rows,
              "in_cols": tiles.in_cols}
    for dim in ("K", "C", "Y", "X"):
        config[f"t0_{dim}"] = tiles.t0[dim]
        config[f"t1_{dim}"] = tiles.t1[dim]
    ci = l2_coefficients(structure, tiles, ingress(structure, "input"))
    cw = l2_coefficients(structure, tiles, ingress(structure, "weight"))
    pitch = l1_pitches(structure, tiles)
    config.update({"in_sc": ci["C"], "in_sy": ci["Y"], "in_sx": ci["X"], "in_run_row": ci["run_Y"],
                   "in_run_ch": ci["run_C"], "w_sk": cw["K"], "w_sc": cw["C"], "w_run_k": cw["run_K"],
                   "in_mode": input_mode(structure, tiles), "w_merge": int(weight_merged(structure, tiles)),
                   "l1_in_row": pitch["in_row"], "l1_in_ch": pitch["in_ch"], "l1_w_k": pitch["w_k"]})
    return config


def interleaved(s: HwStructure, tiles: LayerTiles, tensor: str, x: np.ndarray) -> np.ndarray:
    """``x`` (input ``[C][rows][cols]`` or weight ``[K][C][R][S]``) as L2 holds it
    (``docs/timing.md``, "Load"): along each dimension the tensor's ingress interleaves
    (:func:`costmodel.hwgen_preset.rules.ingress`), the blocks of (units x tile) outermost (the
    last padded with zeros), then the dimensions in their order with that dimension's index
    within the unit's tile, then the class (the units, the level-0 one first) innermost."""
    axes = l2_axes(s, tiles, ingress(s, tensor))
    # (pad each axis to blocks x units x within, then split it so)
    x = np.pad(x, [(0, b * n * w - size) for (_, b, n, w), size in zip(axes, x.shape)])
    shape = [v for _, b, n, w in axes for v in (b, n, w)]
    k = len(axes)
    level = [0 if s.spatial[0] == d else 1 for d, *_ in axes]
    order = ([3 * a for a in range(k)] + [3 * a + 2 for a in range(k)]
             + [3 * a + 1 for a in sorted(range(k), key=lambda a: level[a])])
    return x.reshape(shape).transpose(order).reshape(-1)


def make_job(structure: HwStructure, tiles: LayerTiles, layer: Layer, a: np.ndarray, b: np.ndarray,
             l2_words: dict[str, int]) -> Job:
    """Lay out one layer's operands for the generated design; refuse what does not fit its L2."""
    if tiles.repeat != 1:
        raise AccelgenError(f"the layer runs {tiles.repeat} times (groups or batch); the driver runs "
                            "one group / batch item at a time: give a layer with groups=1, N=1, batch=1",
                            where=f"layer {layer.name!r}")
    xin, w, expected = natural_layout(layer, tiles, a, b)
    xin, w = interleaved(structure, tiles, "input", xin), interleaved(structure, tiles, "weight", w)
    sizes = {"input": xin.size, "weight": w.size, "output": expected.size}
    for name, words in sizes.items():
        if words > l2_words[name]:
            raise AccelgenError(f"the layer's {name} needs {words} L2 words, the generated L2 holds "
                                f"{l2_words[name]}", where=f"layer {layer.name!r}")
    config = config_registers(structure, tiles)
    return Job(config, [int(v) for v in xin.reshape(-1)], [int(v) for v in w.reshape(-1)],
               int(expected.size), [int(v) for v in expected], host_offset_bits(l2_words))

"""Workloads: convolution and matrix-multiply layers, and models (named, ordered layer lists).

A convolution is analysed over ``N K C Y X R S`` (Y/X in input coordinates, padding included);
a GEMM over its own ``M N K``.  :meth:`dims` gives the analysed problem and :attr:`repeat` how
many times it runs (groups, batch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union

from ..base import AccelgenError

__all__ = ["Conv2D", "GEMM", "Layer", "Model"]

def _positive(layer: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AccelgenError(f"{name} must be a positive integer, not {value!r}", where=f"layer {layer!r}")
    return value


@dataclass(frozen=True)
class Conv2D:
    """A 2-D convolution.  ``Y``/``X`` are input sizes *before* padding; ``K`` output channels,
    ``C`` input channels; ``groups == C == K`` is depthwise.  Dilation is 1."""

    name: str
    K: int
    C: int
    Y: int
    X: int
    R: int
    S: int
    N: int = 1
    stride: int = 1
    padding: int = 0
    groups: int = 1
    kind: Literal["conv2d"] = field(default="conv2d", init=False, repr=False)

    def __post_init__(self) -> None:
        for dim in ("K", "C", "Y", "X", "R", "S", "N", "stride", "groups"):
            _positive(self.name, dim, getattr(self, dim))
        if isinstance(self.padding, bool) or not isinstance(self.padding, int) or self.padding < 0:
            raise AccelgenError(f"padding must be a non-negative integer, not {self.padding!r}",
                                where=f"layer {self.name!r}")
        if self.C % self.groups or self.K % self.groups:
            raise AccelgenError(f"groups={self.groups} must divide C={self.C} and K={self.K}",
                                where=f"layer {self.name!r}")
        if self.Y + 2 * self.padding < self.R or self.X + 2 * self.padding < self.S:
            raise AccelgenError(
                f"the {self.R}x{self.S} filter is larger than the padded "
                f"{self.Y + 2 * self.padding}x{self.X + 2 * self.padding} input", where=f"layer {self.name!r}")

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.C

    @property
    def Yo(self) -> int:
        return (self.Y + 2 * self.padding - self.R) // self.stride + 1

    @property
    def Xo(self) -> int:
        return (self.X + 2 * self.padding - self.S) // self.stride + 1

    @property
    def macs(self) -> int:
        """Exact multiply-accumulates: ``N * K * (C/groups) * R * S * Y' * X'``."""
        return self.N * self.K * (self.C // self.groups) * self.R * self.S * self.Yo * self.Xo

    def dims(self) -> dict[str, int]:
        """The analysis problem: ``N K C Y X R S`` in padded input coordinates.

        A depthwise layer is analysed as MAESTRO's DSCONV: one filter per channel, ``K = 1`` and
        ``C`` channels that are never reduced.  A grouped (non-depthwise) layer is analysed one
        group at a time; :attr:`repeat` is the number of groups.
        """
        if self.depthwise:
            k, c = 1, self.C
        else:
            k, c = self.K // self.groups, self.C // self.groups
        return {"N": self.N, "K": k, "C": c, "Y": self.Y + 2 * self.padding,
                "X": self.X + 2 * self.padding, "R": self.R, "S": self.S}

    @property
    def repeat(self) -> int:
        """How many times the analysed problem runs (groups of a grouped, non-depthwise conv;
        a depthwise layer with a channel multiplier runs once per multiplier)."""
        return self.groups if not self.depthwise else self.K // self.groups

    @property
    def layer_type(self) -> str:
        return "DSCONV" if self.depthwise else "CONV"

    def describe(self) -> str:
        extra = f",stride={self.stride}" if self.stride != 1 else ""
        extra += f",pad={self.padding}" if self.padding else ""
        extra += f",groups={self.groups}" if self.groups != 1 else ""
        n = f"N={self.N}," if self.N != 1 else ""
        return f"conv2d:{n}K={self.K},C={self.C},Y={self.Y},X={self.X},R={self.R},S={self.S}{extra}"


@dataclass(frozen=True)
class GEMM:
    """``out[M, N] = A[M, K] @ B[K, N]``, repeated ``batch`` times (attention matmuls)."""

    name: str
    M: int
    N: int
    K: int
    batch: int = 1
    kind: Literal["gemm"] = field(default="gemm", init=False, repr=False)

    def __post_init__(self) -> None:
        for dim in ("M", "N", "K", "batch"):
            _positive(self.name, dim, getattr(self, dim))

    @property
    def macs(self) -> int:
        return self.batch * self.M * self.N * self.K

    @property
    def repeat(self) -> int:
        return self.batch

    @property
    def layer_type(self) -> str:
        return "GEMM"

    def dims(self) -> dict[str, int]:
        """The analysis problem in GEMM's own dimensions, as MAESTRO's GEMM layer type has them:
        input ``A[M, K]``, weight ``B[K, N]``, output ``O[M, N]``; ``batch`` repeats it."""
        return {"M": self.M, "N": self.N, "K": self.K}

    def describe(self) -> str:
        b = f",batch={self.batch}" if self.batch != 1 else ""
        return f"gemm:M={self.M},N={self.N},K={self.K}{b}"


Layer = Union[Conv2D, GEMM]


@dataclass(frozen=True)
class Model:
    """A named, ordered list of layers."""

    name: str
    layers: tuple[Layer, ...]

    def __post_init__(self) -> None:
        if not self.layers:
            raise AccelgenError("a model needs at least one layer", where=f"model {self.name!r}")
        names = [layer.name for layer in self.layers]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise AccelgenError(f"layer names must be unique, {dup[0]!r} repeats", where=f"model {self.name!r}")

    @property
    def macs(self) -> int:
        return sum(layer.macs for layer in self.layers)

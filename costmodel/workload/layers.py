"""Workloads: convolution and matrix-multiply layers, and models (named, ordered layer lists).

A convolution is analysed over ``N K C Y X R S`` (Y/X in input coordinates, padding included);
a GEMM over its own ``M N K``.  :meth:`dims` gives the analysed problem and :attr:`repeat` how
many times it runs (groups, batch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union

from ..base import AccelgenError

__all__ = ["Conv2D", "ConvTranspose2D", "GEMM", "Layer", "Model", "analysed_layer"]

def _positive(layer: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AccelgenError(f"{name} must be a positive integer, not {value!r}", where=f"layer {layer!r}")
    return value


def _non_negative(layer: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AccelgenError(f"{name} must be a non-negative integer, not {value!r}", where=f"layer {layer!r}")
    return value


#: Per-axis (and per-side) fields and the shorthand that sets all of them at once.
_SHORTHANDS: dict[str, tuple[str, ...]] = {
    "stride": ("stride_y", "stride_x"),
    "padding": ("pad_top", "pad_bottom", "pad_left", "pad_right"),
    "dilation": ("dilation_y", "dilation_x"),
}
_NEUTRAL = {"stride": 1, "padding": 0, "dilation": 1}


def _resolve_window(layer: object) -> None:
    """Fill each per-axis field from its shorthand (or the neutral value), check every one, and
    set the shorthand to the common value (``None`` when the axes or sides differ).  Equality and
    hashing compare only the per-axis fields, so ``stride=2`` equals ``stride_y=2, stride_x=2``."""
    name = layer.name  # type: ignore[attr-defined]
    for short, fields in _SHORTHANDS.items():
        given = getattr(layer, short)
        check = _non_negative if short == "padding" else _positive
        if given is not None:
            check(name, short, given)
        for f in fields:
            value = getattr(layer, f)
            if value is None:
                value = _NEUTRAL[short] if given is None else given
            elif given is not None and value != given:
                raise AccelgenError(f"{short}={given!r} and {f}={value!r} disagree; give one of them",
                                    where=f"layer {name!r}")
            object.__setattr__(layer, f, check(name, f, value))
        values = {getattr(layer, f) for f in fields}
        object.__setattr__(layer, short, values.pop() if len(values) == 1 else None)


def _window_spec(layer: object) -> str:
    """The inline-spec keys of the window fields that differ from the neutral values."""
    out = ""
    for short, fields in _SHORTHANDS.items():
        common = getattr(layer, short)
        if common is None:
            out += "".join(f",{f}={getattr(layer, f)}" for f in fields)
        elif common != _NEUTRAL[short]:
            out += f",{'pad' if short == 'padding' else short}={common}"
    return out


@dataclass(frozen=True)
class _ConvFields:
    """The fields a convolution and a transposed convolution share (see :class:`Conv2D`)."""

    name: str
    K: int
    C: int
    Y: int
    X: int
    R: int
    S: int
    N: int = 1
    stride: int | None = field(default=None, compare=False)
    padding: int | None = field(default=None, compare=False)
    groups: int = 1
    stride_y: int | None = None
    stride_x: int | None = None
    pad_top: int | None = None
    pad_bottom: int | None = None
    pad_left: int | None = None
    pad_right: int | None = None
    dilation: int | None = field(default=None, compare=False)
    dilation_y: int | None = None
    dilation_x: int | None = None

    def _check_fields(self) -> None:
        for dim in ("K", "C", "Y", "X", "R", "S", "N", "groups"):
            _positive(self.name, dim, getattr(self, dim))
        _resolve_window(self)
        if self.C % self.groups or self.K % self.groups:
            raise AccelgenError(f"groups={self.groups} must divide C={self.C} and K={self.K}",
                                where=f"layer {self.name!r}")

    @property
    def window_y(self) -> int:
        """Rows one filter window spans: ``dilation_y*(R-1) + 1``."""
        return self.dilation_y * (self.R - 1) + 1          # type: ignore[operator]

    @property
    def window_x(self) -> int:
        return self.dilation_x * (self.S - 1) + 1          # type: ignore[operator]

    def _spec(self, kind: str, extra: str = "") -> str:
        extra = _window_spec(self) + extra + (f",groups={self.groups}" if self.groups != 1 else "")
        n = f"N={self.N}," if self.N != 1 else ""
        return f"{kind}:{n}K={self.K},C={self.C},Y={self.Y},X={self.X},R={self.R},S={self.S}{extra}"


@dataclass(frozen=True)
class Conv2D(_ConvFields):
    """A 2-D convolution.  ``Y``/``X`` are input sizes *before* padding; ``K`` output channels,
    ``C`` input channels; ``groups == C == K`` is depthwise.

    ``stride_y``/``stride_x``, ``pad_top``/``pad_bottom``/``pad_left``/``pad_right`` and
    ``dilation_y``/``dilation_x`` are per axis (per side); ``stride``, ``padding`` and ``dilation``
    are shorthands setting every axis (side) at once, and read back as the common value, or
    ``None`` when the axes differ.  Output rows: ``(Y + pad_top + pad_bottom - dilation_y*(R-1) - 1)
    // stride_y + 1``."""

    kind: Literal["conv2d"] = field(default="conv2d", init=False, repr=False)

    def __post_init__(self) -> None:
        self._check_fields()
        if self.padded_y < self.window_y or self.padded_x < self.window_x:
            dil = f" (dilated to {self.window_y}x{self.window_x})" if self.dilation != 1 else ""
            raise AccelgenError(
                f"the {self.R}x{self.S} filter{dil} is larger than the padded "
                f"{self.padded_y}x{self.padded_x} input", where=f"layer {self.name!r}")

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.C

    @property
    def padded_y(self) -> int:
        return self.Y + self.pad_top + self.pad_bottom    # type: ignore[operator]

    @property
    def padded_x(self) -> int:
        return self.X + self.pad_left + self.pad_right    # type: ignore[operator]

    @property
    def Yo(self) -> int:
        return (self.padded_y - self.window_y) // self.stride_y + 1   # type: ignore[operator]

    @property
    def Xo(self) -> int:
        return (self.padded_x - self.window_x) // self.stride_x + 1   # type: ignore[operator]

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
        return {"N": self.N, "K": k, "C": c, "Y": self.padded_y, "X": self.padded_x, "R": self.R, "S": self.S}

    @property
    def repeat(self) -> int:
        """How many times the analysed problem runs (groups of a grouped, non-depthwise conv;
        a depthwise layer with a channel multiplier runs once per multiplier)."""
        return self.groups if not self.depthwise else self.K // self.groups

    @property
    def layer_type(self) -> str:
        return "DSCONV" if self.depthwise else "CONV"

    def describe(self) -> str:
        return self._spec("conv2d")


@dataclass(frozen=True)
class ConvTranspose2D(_ConvFields):
    """A 2-D transposed convolution (ONNX ``ConvTranspose``): ``Y``/``X`` are its *input* sizes,
    ``C`` input and ``K`` output channels, the pads crop the output, ``output_pad_y``/``_x`` add
    rows/columns at its end.  Output rows: ``stride_y*(Y-1) + dilation_y*(R-1) + 1 + output_pad_y
    - pad_top - pad_bottom``.

    :attr:`macs` is the true count, the scatter form's: every input element times every tap of its
    group's filters, ``N * C * (K/groups) * R * S * Y * X``.  It is analysed (cycles, traffic) as
    :meth:`equivalent_conv`, the direct convolution over the zero-inserted, padded input that an
    array of direct-convolution PEs runs: that one also multiplies the inserted zeros, so its
    executed MACs (``step_macs``) exceed :attr:`macs` and the utilisation shows the waste."""

    output_pad_y: int = 0
    output_pad_x: int = 0
    kind: Literal["convtranspose2d"] = field(default="convtranspose2d", init=False, repr=False)

    def __post_init__(self) -> None:
        self._check_fields()
        for axis, stride, dilation in (("y", self.stride_y, self.dilation_y), ("x", self.stride_x, self.dilation_x)):
            extra = _non_negative(self.name, f"output_pad_{axis}", getattr(self, f"output_pad_{axis}"))
            if extra >= max(stride, dilation):   # type: ignore[type-var]
                raise AccelgenError(f"output_pad_{axis}={extra} must be smaller than the stride or the "
                                    f"dilation of its axis ({max(stride, dilation)})",  # type: ignore[type-var]
                                    where=f"layer {self.name!r}")
        if self.Yo < 1 or self.Xo < 1:
            raise AccelgenError(f"the pads crop the {self.Yo + self.pad_top + self.pad_bottom}x"  # type: ignore[operator]
                                f"{self.Xo + self.pad_left + self.pad_right} output to nothing",  # type: ignore[operator]
                                where=f"layer {self.name!r}")

    @property
    def Yo(self) -> int:
        return (self.stride_y * (self.Y - 1) + self.window_y + self.output_pad_y  # type: ignore[operator]
                - self.pad_top - self.pad_bottom)

    @property
    def Xo(self) -> int:
        return (self.stride_x * (self.X - 1) + self.window_x + self.output_pad_x  # type: ignore[operator]
                - self.pad_left - self.pad_right)

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.C

    @property
    def macs(self) -> int:
        """Exact (scatter form): ``N * C * (K/groups) * R * S * Y * X``."""
        return self.N * self.C * (self.K // self.groups) * self.R * self.S * self.Y * self.X

    def equivalent_conv(self) -> Conv2D:
        """The direct convolution computing the same output: stride 1 over the input with
        ``stride - 1`` zeros between neighbours, padded by ``dilation*(R-1) - pad`` (plus the
        output padding at the end); a negative pad crops that input instead."""
        sizes: dict[str, int] = {}
        for axis, size, stride, first, last, reach, extra in (
                ("y", self.Y, self.stride_y, self.pad_top, self.pad_bottom, self.window_y - 1, self.output_pad_y),
                ("x", self.X, self.stride_x, self.pad_left, self.pad_right, self.window_x - 1, self.output_pad_x)):
            before, after = reach - first, reach - last + extra     # type: ignore[operator]
            spread = stride * (size - 1) + 1                            # type: ignore[operator]
            sizes[axis] = spread - max(-before, 0) - max(-after, 0)
            sizes[axis + "0"], sizes[axis + "1"] = max(before, 0), max(after, 0)
            if sizes[axis] < 1:
                # The pads crop every input row: the outputs kept read only padding (their own
                # output padding).  One of those zero rows stands in as the input row.
                rest = before + spread + after - 1       # the padded rows but the one standing in
                sizes[axis] = 1
                sizes[axis + "0"], sizes[axis + "1"] = (rest, 0) if after < 0 else (0, rest)
        return Conv2D(self.name, K=self.K, C=self.C, Y=sizes["y"], X=sizes["x"], R=self.R, S=self.S,
                      N=self.N, groups=self.groups, stride=1, pad_top=sizes["y0"], pad_bottom=sizes["y1"],
                      pad_left=sizes["x0"], pad_right=sizes["x1"], dilation_y=self.dilation_y,
                      dilation_x=self.dilation_x)

    def dims(self) -> dict[str, int]:
        return self.equivalent_conv().dims()

    @property
    def repeat(self) -> int:
        return self.equivalent_conv().repeat

    @property
    def layer_type(self) -> str:
        return self.equivalent_conv().layer_type

    def describe(self) -> str:
        extra = "".join(f",output_pad_{a}={v}" for a, v in (("y", self.output_pad_y), ("x", self.output_pad_x)) if v)
        return self._spec("convtranspose2d", extra)


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


Layer = Union[Conv2D, ConvTranspose2D, GEMM]


def analysed_layer(layer: Layer) -> Conv2D | GEMM:
    """The layer the analysis sees: a transposed convolution's equivalent direct one."""
    return layer.equivalent_conv() if isinstance(layer, ConvTranspose2D) else layer


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

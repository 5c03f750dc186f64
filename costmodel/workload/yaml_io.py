"""Workload YAML files and inline layer specs, validated at the door.

Everything after this module trusts its :class:`~costmodel.workload.Model`: every field is checked
here, defaults are filled here and unknown keys are rejected here (ZigZag style), so a typo such as
``stirde: 2`` fails loudly instead of silently analysing stride 1.  Every failure is one
:class:`AccelgenError` line naming the file, the field path, the offending value and what was
expected, e.g. ``configs/x.yaml: layers[2].K must be a positive integer, not 'abc'``.

File schema::

    name: mynet                     # optional, defaults to the file's stem
    layers:
      - {name: c1, type: conv2d, K: 64, C: 3, Y: 224, X: 224, R: 3, S: 3,
         stride: 1, padding: 1, groups: 1, N: 1}          # stride/padding/groups/N optional
      - {name: dw, type: dwconv, C: 64, Y: 56, X: 56, R: 3, S: 3}   # groups = K = C
      - {name: c2, type: conv2d, K: 8, C: 8, Y: 32, X: 100, R: 3, S: 3,
         stride_y: 2, stride_x: 1, pad_top: 0, pad_bottom: 1, dilation: 2}  # per axis / per side
      - {name: up, type: convtranspose2d, K: 8, C: 16, Y: 20, X: 20, R: 2, S: 2, stride: 2}
      - {name: fc, type: gemm, M: 1, N: 1000, K: 4096, batch: 1}    # batch optional

``stride``, ``padding`` and ``dilation`` set every axis (side) at once; ``stride_y``/``stride_x``,
``pad_top``/``pad_bottom``/``pad_left``/``pad_right`` and ``dilation_y``/``dilation_x`` set one (a
shorthand and a per-axis field that disagree are refused).

Inline specs (``conv2d:K=8,C=4,Y=6,X=6,R=3,S=3,stride=1``, ``gemm:M=4,N=8,K=16``) take the same
keys, plus ``pad`` as an alias of ``padding`` so that :meth:`Conv2D.describe` round-trips.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal, Mapping

from ..base import AccelgenError, load_yaml, read_text
from .layers import GEMM, Conv2D, ConvTranspose2D, Layer, Model

__all__ = ["load_workload_yaml", "parse_workload_yaml", "workload_from_dict", "layer_from_dict",
           "parse_layer_spec", "LAYER_TYPES"]

LayerType = Literal["conv2d", "dwconv", "convtranspose2d", "gemm"]
LAYER_TYPES: tuple[LayerType, ...] = ("conv2d", "dwconv", "convtranspose2d", "gemm")

# Per layer type: the required fields (positive integers), then the optional ones and their defaults
# (``padding`` may be 0; a ``None`` default is derived from other fields below).
_REQUIRED: dict[str, tuple[str, ...]] = {
    "conv2d": ("K", "C", "Y", "X", "R", "S"),
    "dwconv": ("C", "Y", "X", "R", "S"),
    "convtranspose2d": ("K", "C", "Y", "X", "R", "S"),
    "gemm": ("M", "N", "K"),
}
# The window fields: a shorthand (stride, padding, dilation) or its per-axis / per-side fields.
_WINDOW: dict[str, int | None] = {
    "stride": None, "stride_y": None, "stride_x": None,
    "padding": None, "pad_top": None, "pad_bottom": None, "pad_left": None, "pad_right": None,
    "dilation": None, "dilation_y": None, "dilation_x": None}
_DEFAULTS: dict[str, dict[str, int | None]] = {
    "conv2d": {**_WINDOW, "groups": 1, "N": 1},
    # K and groups of a depthwise layer are implied by C; if given they must agree with it.
    "dwconv": {**_WINDOW, "N": 1, "K": None, "groups": None},
    "convtranspose2d": {**_WINDOW, "groups": 1, "N": 1, "output_pad_y": 0, "output_pad_x": 0},
    "gemm": {"batch": 1},
}
_MAY_BE_ZERO = ("padding", "pad_top", "pad_bottom", "pad_left", "pad_right", "output_pad_y", "output_pad_x")
_TOP_KEYS = ("name", "layers")
_INT_RE = re.compile(r"[0-9]{1,18}")  # ASCII digits only; 18 keeps int() far from its size guard


def _fail(where: str, message: str) -> AccelgenError:
    return AccelgenError(message, where=where)


def _show(value: object, limit: int = 60) -> str:
    """``repr`` cut to one readable line: a whole mis-indented document is not a useful value."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _key(key: object) -> str:
    """A key as written in a field path: bare when it is a plain word, quoted otherwise."""
    return key if isinstance(key, str) and key.isidentifier() else _show(key)


def _check_name(where: str, path: str, value: object) -> str:
    """Names travel into reports, CLI arguments and ``.m`` files, hence no whitespace."""
    if not isinstance(value, str) or not value or any(ch.isspace() for ch in value):
        raise _fail(where, f"{path} must be a non-empty string without spaces, not {_show(value)}")
    return value


def _check_int(where: str, path: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        what = "a positive integer" if minimum >= 1 else "a non-negative integer"
        raise _fail(where, f"{path} must be {what}, not {_show(value)}")
    return value


def _build_layer(where: str, prefix: str, kind: object, fields: Mapping[Any, object], name: str) -> Layer:
    """Validate ``fields`` for a layer of type ``kind`` and build it.  ``prefix`` is the field
    path before each key (``layers[2].`` in a file, empty in an inline spec)."""
    if not isinstance(kind, str) or kind not in LAYER_TYPES:
        raise _fail(where, f"{prefix}type must be one of {', '.join(LAYER_TYPES)}, not {_show(kind)}")
    required, defaults = _REQUIRED[kind], _DEFAULTS[kind]
    allowed = required + tuple(defaults)
    for key in fields:
        if key not in allowed:
            raise _fail(where, f"{prefix}{_key(key)} is not a field of a {kind} layer; "
                               f"expected name, type, {', '.join(allowed)}")
    values: dict[str, int] = {}
    for key in required:
        if key not in fields:
            raise _fail(where, f"{prefix}{key} is missing; a {kind} layer needs {', '.join(required)}")
        values[key] = _check_int(where, prefix + key, fields[key], minimum=1)
    for key, default in defaults.items():
        if key in fields:
            values[key] = _check_int(where, prefix + key, fields[key], minimum=0 if key in _MAY_BE_ZERO else 1)
        elif default is not None:
            values[key] = default
    if kind == "dwconv":
        channels = values["C"]
        for key in ("K", "groups"):
            if values.setdefault(key, channels) != channels:
                raise _fail(where, f"{prefix}{key} of a dwconv layer must equal C={channels}, not {values[key]!r}")
    try:
        if kind == "gemm":
            return GEMM(name, **values)
        if kind == "convtranspose2d":
            return ConvTranspose2D(name, **values)
        return Conv2D(name, **values)
    except AccelgenError as exc:  # shape checks that span fields (groups, filter vs input)
        text = str(exc)
        if exc.where and text.startswith(exc.where + ": "):
            text = text[len(exc.where) + 2:]  # the layer is named by ``where``/``prefix`` already
        raise _fail(where, f"{prefix.rstrip('.')}: {text}" if prefix else text) from None


def layer_from_dict(data: object, *, where: str = "<dict>", path: str = "layer") -> Layer:
    """One layer from a parsed mapping (``name``, ``type`` and the type's fields)."""
    if not isinstance(data, dict):
        raise _fail(where, f"{path} must be a mapping with name, type and sizes, not {_show(data)}")
    if "name" not in data:
        raise _fail(where, f"{path}.name is missing")
    if "type" not in data:
        raise _fail(where, f"{path}.type is missing; expected one of {', '.join(LAYER_TYPES)}")
    name = _check_name(where, f"{path}.name", data["name"])
    fields = {k: v for k, v in data.items() if k not in ("name", "type")}
    return _build_layer(where, f"{path}.", data["type"], fields, name)


def workload_from_dict(data: object, *, where: str = "<dict>", default_name: str = "workload") -> Model:
    """A model from an already-parsed document; the whole schema is checked here."""
    if not isinstance(data, dict):
        raise _fail(where, f"expected a mapping with 'name' and 'layers', not {_show(data)}")
    for key in data:
        if key not in _TOP_KEYS:
            raise _fail(where, f"{_key(key)} is not a workload field; expected {', '.join(_TOP_KEYS)}")
    name = _check_name(where, "name", data.get("name", default_name))
    layers = data.get("layers")
    if not isinstance(layers, list) or not layers:
        raise _fail(where, f"layers must be a non-empty list of layers, not {_show(layers)}")
    built: list[Layer] = []
    first_index: dict[str, int] = {}
    for i, item in enumerate(layers):
        layer = layer_from_dict(item, where=where, path=f"layers[{i}]")
        if layer.name in first_index:
            raise _fail(where, f"layers[{i}].name {layer.name!r} repeats layers[{first_index[layer.name]}].name")
        first_index[layer.name] = i
        built.append(layer)
    return Model(name, tuple(built))


def parse_workload_yaml(text: str, source: str = "<string>", *, default_name: str = "workload") -> Model:
    """A model from YAML text; ``source`` names it in errors (the CLI passes the path)."""
    data = load_yaml(text, source, empty="a mapping with 'name' and 'layers'")
    return workload_from_dict(data, where=source, default_name=default_name)


def load_workload_yaml(path: str | os.PathLike[str]) -> Model:
    """Load a workload YAML file; the model name defaults to the file's stem."""
    where = os.fspath(path)
    p = Path(path)
    text = read_text(path, "a workload YAML file")
    return parse_workload_yaml(text, where, default_name=p.stem or "workload")


def parse_layer_spec(spec: str, *, name: str | None = None) -> Layer:
    """One layer from ``type:KEY=VALUE,...`` (``name=`` may be one of the pairs).

    The layer's name defaults to the spec text itself, which is unique and self-describing in a
    report.  Values must be plain decimal integers.
    """
    where = f"layer spec {spec!r}"
    if not isinstance(spec, str):
        raise AccelgenError(f"a layer spec must be a string, not {_show(spec)}")
    kind, colon, body = spec.strip().partition(":")
    kind = kind.strip()
    if not colon:
        raise _fail(where, "expected TYPE:KEY=VALUE,... with TYPE one of " + ", ".join(LAYER_TYPES))
    fields: dict[str, object] = {}
    for item in body.split(","):
        key, eq, value = (part.strip() for part in item.partition("="))
        if not eq or not key:
            raise _fail(where, f"expected KEY=VALUE, found {_show(item.strip())}")
        key = "padding" if key == "pad" else key
        if key in fields:
            raise _fail(where, f"{key} is given twice")
        fields[key] = int(value) if key != "name" and _INT_RE.fullmatch(value) else value
    spec_name = fields.pop("name", None)
    if spec_name is not None and name is not None:
        raise _fail(where, "name is given both in the spec and as an argument")
    layer_name = _check_name(where, "name", name if name is not None else
                             spec_name if spec_name is not None else "".join(spec.split()))
    return _build_layer(where, "", kind, fields, layer_name)

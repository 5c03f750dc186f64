"""MAESTRO's own ``.m`` model / mapping files, read into our layers plus dataflow text.

Reading MAESTRO's files directly lets us compare against its published figures on exactly the
layers and mappings it used.  The grammar is MAESTRO's DFSL (``DFSL_parser.hpp``):

* Tokens are separated by space, tab, ``,`` ``-`` ``>`` ``(`` ``)`` ``:`` ``;``; ``//`` comments
  run to the end of the line.  We also split ``{``/``}`` off their neighbours and accept CR.
* ``Constant NAME VALUE;`` at top level names an integer usable later as a size.
* ``Network NAME { Layer NAME { Type: T  Stride {X: s, Y: s}  Dimensions {D: n, ...}
  Dataflow { TemporalMap(a,b) D;  SpatialMap(a,b) D;  Cluster(n, P|L); ... } } ... }``
  where ``a``/``b``/``n`` are integers, Constants or ``Sz(D)`` (the full size of dimension D).

Meaning, as MAESTRO defines it: ``Y``/``X`` are input sizes without padding (padding 0);
``Stride {X: sx, Y: sy}`` is per axis (``stride_x``, ``stride_y``);
``DSCONV`` writes ``K: 1`` and filters each of the ``C`` channels separately, which is our
``Conv2D(K=C, C=C, groups=C)``; ``GEMM`` ``Dimensions {N, K, M}`` is ``out[M,N] = A[M,K] B[K,N]``;
``BMM`` adds a batch ``B``.  A layer without a Dataflow block reuses the previous layer's dataflow,
as MAESTRO does, so a model-only file yields ``None`` for every layer.  MAESTRO tolerates repeated
layer names (its own MobileNetV2 and ResNet-50 files have some); we keep the first and rename a
later one ``NAME#2``, ``NAME#3``... because our :class:`Model` needs unique names.

Errors are one line: ``file:line: expected '{' after 'Dimensions', found 'K'``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..base import AccelgenError, read_text
from .layers import GEMM, Conv2D, Layer, Model

__all__ = ["parse_maestro_text", "read_maestro_file", "load_maestro_file"]

_SEPARATORS = re.compile(r"[\s,\->():;]+")
_INT = re.compile(r"[0-9]{1,18}")  # ASCII only (int() would take other scripts' digits)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_SUPPORTED_TYPES = ("CONV", "DSCONV", "GEMM", "BMM")
_UNSUPPORTED_TYPES = ("FC", "POOL", "TRCONV", "NGCONV", "LSTM", "RESIDUAL_IDENTITY")
#: Dimensions a ``Dimensions`` block may declare, and which of them it must declare, per type.
_DIMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "CONV": (("N", "K", "C", "R", "S", "Y", "X"), ("K", "C", "R", "S", "Y", "X")),
    "DSCONV": (("N", "K", "C", "R", "S", "Y", "X"), ("C", "R", "S", "Y", "X")),
    "GEMM": (("M", "N", "K"), ("M", "N", "K")),
    "BMM": (("B", "M", "N", "K"), ("M", "N", "K")),
}
#: Output-coordinate names MAESTRO also accepts as directive targets of a convolution.
_CONV_OUTPUT_DIMS = ("Y'", "X'")
_ALL_DIMS = ("N", "K", "C", "R", "S", "Y", "X", "M", "B", "G")
_LAYER_KEYWORDS = ("Type", "Stride", "Dimensions", "Dataflow")
_KEYWORDS = frozenset(("Constant", "Network", "Layer", "Accelerator", "{", "}") + _LAYER_KEYWORDS)


@dataclass(frozen=True)
class _Token:
    text: str
    line: int


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    for number, line in enumerate(text.split("\n"), 1):  # as MAESTRO's getline: '\n' ends a line
        code = line.split("//", 1)[0].replace("{", " { ").replace("}", " } ")
        tokens += [_Token(t, number) for t in _SEPARATORS.split(code) if t]
    return tokens


@dataclass
class _LayerDraft:
    """What a ``Layer { ... }`` block said, with the tokens kept for error positions."""

    name: str
    start: _Token
    type_token: _Token | None = None
    dims_token: _Token | None = None
    stride: dict[str, tuple[int, _Token]] = field(default_factory=dict)
    dims: dict[str, tuple[int, _Token]] = field(default_factory=dict)
    directives: list[str] | None = None
    dim_refs: list[_Token] = field(default_factory=list)     # the D each Map directive targets
    sizeof_refs: list[_Token] = field(default_factory=list)  # the D of ``Sz(D)`` only


class _Parser:
    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self.tokens = _tokenize(text)
        self.pos = 0
        self.last_line = max(1, len(text.rstrip("\n").split("\n")))
        self.constants: dict[str, int] = {}

    # -- token stream -------------------------------------------------------------------------
    def error(self, token: _Token | None, message: str) -> AccelgenError:
        line = token.line if token is not None else self.last_line
        return AccelgenError(message, where=f"{self.source}:{line}")

    def peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str, after: str | None) -> _Token:
        token = self.peek()
        if token is None:
            place = f" after {after!r}" if after is not None else ""
            raise self.error(None, f"expected {expected}{place}, found end of file")
        self.pos += 1
        return token

    def expect(self, text: str, after: str) -> _Token:
        token = self.take(repr(text), after)
        if token.text != text:
            raise self.error(token, f"expected {text!r} after {after!r}, found {token.text!r}")
        return token

    def integer(self, what: str, after: str, *, choices: str = "an integer or a Constant") -> int:
        """A positive integer literal or a Constant."""
        token = self.take(f"{choices} for {what}", after)
        value = self.constants.get(token.text)
        if value is None:
            if not _INT.fullmatch(token.text):
                raise self.error(token, f"expected {choices} for {what} after {after!r}, found {token.text!r}")
            value = int(token.text)
        if value < 1:
            raise self.error(token, f"{what} must be a positive integer, not {value}")
        return value

    # -- top level ----------------------------------------------------------------------------
    def parse(self, default_name: str) -> tuple[Model, list[str | None]]:
        result: tuple[Model, list[str | None]] | None = None
        while (token := self.peek()) is not None:
            self.pos += 1
            if token.text == "Constant":
                name = self.take("a constant name", "Constant")
                if not _NAME.fullmatch(name.text) or name.text in _KEYWORDS:
                    raise self.error(name, f"expected a constant name after 'Constant', found {name.text!r}")
                self.constants[name.text] = self.integer(f"constant {name.text}", name.text)
            elif token.text == "Network":
                if result is not None:
                    raise self.error(token, "expected one 'Network' per file, found a second one")
                result = self.network(token, default_name)
            elif token.text == "Accelerator":
                self.skip_block(token)
            else:
                raise self.error(token, f"expected 'Constant' or 'Network', found {token.text!r}")
        if result is None:
            raise self.error(None, "expected a 'Network' block, found end of file")
        return result

    def skip_block(self, opener: _Token) -> None:
        """Hardware blocks are not ours to read here (``costmodel.hardware`` owns hardware)."""
        self.expect("{", opener.text)
        depth = 1
        while depth:
            token = self.take(f"'}}' closing {opener.text!r} (line {opener.line})", None)
            depth += {"{": 1, "}": -1}.get(token.text, 0)

    def block_name(self, keyword: _Token) -> str | None:
        """The words between a keyword and its ``{``; MAESTRO's '-' separator splits names such as
        ``CONV-1``, which we join back with '-'."""
        words: list[str] = []
        while True:
            token = self.take("'{'", keyword.text)
            if token.text == "{":
                return "-".join(words) if words else None
            if token.text in _KEYWORDS:
                after = " ".join([keyword.text, *words])
                raise self.error(token, f"expected '{{' after {after!r}, found {token.text!r}")
            words.append(token.text)

    def network(self, opener: _Token, default_name: str) -> tuple[Model, list[str | None]]:
        name = self.block_name(opener) or default_name
        layers: list[Layer] = []
        dataflows: list[str | None] = []
        used: set[str] = set()
        while True:
            token = self.take(f"'Layer' or '}}' closing Network {name!r} (line {opener.line})", None)
            if token.text == "}":
                break
            if token.text != "Layer":
                raise self.error(token, f"expected 'Layer' or '}}' in Network {name!r}, found {token.text!r}")
            draft = self.layer_block(token, len(layers) + 1)
            if draft.name in used:
                suffix = 2
                while f"{draft.name}#{suffix}" in used:
                    suffix += 1
                draft.name = f"{draft.name}#{suffix}"
            used.add(draft.name)
            layers.append(self.build(draft))
            if draft.directives:
                dataflows.append("; ".join(draft.directives))
            else:
                dataflows.append(dataflows[-1] if dataflows else None)
        if not layers:
            raise self.error(token, f"Network {name!r} has no layers")
        return Model(name, tuple(layers)), dataflows

    # -- layers -------------------------------------------------------------------------------
    def layer_block(self, opener: _Token, index: int) -> _LayerDraft:
        draft = _LayerDraft(self.block_name(opener) or f"layer{index}", opener)
        seen: set[str] = set()
        while True:
            token = self.take(f"'}}' closing layer {draft.name!r} (line {opener.line})", None)
            if token.text == "}":
                return draft
            if token.text not in _LAYER_KEYWORDS:
                raise self.error(token, f"expected 'Type', 'Stride', 'Dimensions', 'Dataflow' or '}}' in "
                                        f"layer {draft.name!r}, found {token.text!r}")
            if token.text in seen:
                raise self.error(token, f"expected one {token.text!r} in layer {draft.name!r}, found a second")
            seen.add(token.text)
            if token.text == "Type":
                kind = self.take("a layer type", "Type")
                if kind.text == "TRCONV":
                    raise self.error(kind, "layer type 'TRCONV' is not supported (a .m layer gives no "
                                           "padding or output size to pin down its meaning); expected one of "
                                           f"{', '.join(_SUPPORTED_TYPES)}, or a convtranspose2d layer in "
                                           "a workload YAML")
                if kind.text in _UNSUPPORTED_TYPES:
                    raise self.error(kind, f"layer type {kind.text!r} is not supported; "
                                           f"expected one of {', '.join(_SUPPORTED_TYPES)}")
                if kind.text not in _SUPPORTED_TYPES:
                    raise self.error(kind, f"expected a layer type ({', '.join(_SUPPORTED_TYPES)}) after "
                                           f"'Type', found {kind.text!r}")
                draft.type_token = kind
            elif token.text == "Stride":
                draft.stride = self.size_block(token, ("X", "Y"), "stride")
            elif token.text == "Dimensions":
                draft.dims, draft.dims_token = self.size_block(token, _ALL_DIMS, "size"), token
            else:
                self.dataflow_block(token, draft)

    def size_block(self, opener: _Token, names: tuple[str, ...], what: str) -> dict[str, tuple[int, _Token]]:
        self.expect("{", opener.text)
        sizes: dict[str, tuple[int, _Token]] = {}
        while True:
            token = self.take(f"a dimension or '}}' closing {opener.text!r} (line {opener.line})", None)
            if token.text == "}":
                return sizes
            if token.text not in names:
                raise self.error(token, f"expected a dimension ({', '.join(names)}) or '}}' in "
                                        f"{opener.text!r}, found {token.text!r}")
            if token.text in sizes:
                raise self.error(token, f"expected one {token.text!r} in {opener.text!r}, found a second")
            sizes[token.text] = (self.integer(f"the {what} of {token.text}", token.text), token)

    def map_size(self, directive: str, draft: _LayerDraft) -> str:
        token = self.take("a size", directive)
        if token.text == "Sz":
            dim = self.take("a dimension", "Sz")
            draft.sizeof_refs.append(dim)
            return f"Sz({dim.text})"
        self.pos -= 1
        return str(self.integer(f"the size of {directive}", directive,
                                choices="an integer, a Constant or Sz(DIM)"))

    def dataflow_block(self, opener: _Token, draft: _LayerDraft) -> None:
        self.expect("{", opener.text)
        draft.directives = []
        while True:
            token = self.take(f"a directive or '}}' closing 'Dataflow' (line {opener.line})", None)
            if token.text == "}":
                return
            if token.text in ("TemporalMap", "SpatialMap"):
                size = self.map_size(token.text, draft)
                offset = self.map_size(token.text, draft)
                dim = self.take("a dimension", f"{token.text}({size},{offset})")
                draft.dim_refs.append(dim)
                draft.directives.append(f"{token.text}({size},{offset}) {dim.text}")
            elif token.text == "Cluster":
                size = self.map_size("Cluster", draft)
                kind = self.take("'P' or 'L'", f"Cluster({size}")
                if kind.text not in ("P", "L"):
                    raise self.error(kind, f"expected 'P' or 'L' after 'Cluster({size}', found {kind.text!r}")
                draft.directives.append(f"Cluster({size},{kind.text})")
            else:
                raise self.error(token, f"expected 'TemporalMap', 'SpatialMap', 'Cluster' or '}}' in the "
                                        f"Dataflow of layer {draft.name!r}, found {token.text!r}")

    def build(self, draft: _LayerDraft) -> Layer:
        """Check the layer's parts against each other and make our layer from them."""
        where = f"layer {draft.name!r}"
        if draft.type_token is None:
            raise self.error(draft.start, f"{where} has no 'Type'")
        kind = draft.type_token.text
        if draft.dims_token is None:
            raise self.error(draft.start, f"{where} has no 'Dimensions'")
        allowed, required = _DIMS[kind]
        for name, (_, token) in draft.dims.items():
            if name not in allowed:
                raise self.error(token, f"expected a {kind} dimension ({', '.join(allowed)}) in {where}, "
                                        f"found {name!r}")
        missing = [d for d in required if d not in draft.dims]
        if missing:
            raise self.error(draft.dims_token, f"{where}: Dimensions lacks {', '.join(missing)}")
        targets = allowed + (_CONV_OUTPUT_DIMS if kind in ("CONV", "DSCONV") else ())
        for token in draft.dim_refs:
            if token.text not in targets:
                raise self.error(token, f"expected a {kind} dimension ({', '.join(targets)}) in the "
                                        f"Dataflow of {where}, found {token.text!r}")
        for token in draft.sizeof_refs:
            if token.text not in draft.dims and not (token.text == "N" and "N" in allowed):
                raise self.error(token, f"Sz({token.text}) in {where} names no dimension of its Dimensions")
        size = {name: value for name, (value, _) in draft.dims.items()}
        stride = {name: value for name, (value, _) in draft.stride.items()}
        sx, sy = stride.get("X", 1), stride.get("Y", 1)
        if kind in ("GEMM", "BMM") and (sx != 1 or sy != 1):
            raise self.error(draft.stride["X" if sx != 1 else "Y"][1],
                             f"{where}: a {kind} layer has no stride, found {max(sx, sy)}")
        if kind == "DSCONV" and size.get("K", 1) != 1:
            raise self.error(draft.dims["K"][1], f"{where}: a DSCONV layer has K: 1, not {size['K']}")
        try:  # the layer's own checks, e.g. a filter larger than its input
            if kind in ("GEMM", "BMM"):
                return GEMM(draft.name, M=size["M"], N=size["N"], K=size["K"], batch=size.get("B", 1))
            k, groups = (size["C"], size["C"]) if kind == "DSCONV" else (size["K"], 1)
            return Conv2D(draft.name, K=k, C=size["C"], Y=size["Y"], X=size["X"], R=size["R"], S=size["S"],
                          N=size.get("N", 1), stride_y=sy, stride_x=sx, groups=groups)
        except AccelgenError as exc:
            raise self.error(draft.start, str(exc)) from None

def parse_maestro_text(text: str, source: str = "<string>", *,
                       default_name: str = "network") -> tuple[Model, list[str | None]]:
    """A model and its per-layer dataflow text from ``.m`` source; ``source`` names it in errors.

    Each dataflow is the layer's directives as written, ``"; "``-joined without a trailing ``;``,
    with Constants substituted and ``Sz(D)`` kept verbatim, e.g.
    ``"SpatialMap(1,1) K; TemporalMap(64,64) C; Cluster(64,P); SpatialMap(1,1) C"``.
    """
    return _Parser(text, source).parse(default_name)


def _read(path: str | os.PathLike[str]) -> tuple[str, str, str]:
    where = os.fspath(path)
    p = Path(path)
    return read_text(path, "a MAESTRO .m file"), where, p.stem or "network"


def load_maestro_file(path: str | os.PathLike[str]) -> tuple[Model, list[str | None]]:
    """The file's network as a :class:`Model` (named by ``Network NAME``, else the file's stem)
    and, index for index, each layer's dataflow text or ``None``."""
    text, where, stem = _read(path)
    return parse_maestro_text(text, where, default_name=stem)


def read_maestro_file(path: str | os.PathLike[str]) -> list[tuple[Layer, str | None]]:
    """``(layer, dataflow text or None)`` per layer, in file order."""
    model, dataflows = load_maestro_file(path)
    return list(zip(model.layers, dataflows))

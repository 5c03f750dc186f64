"""The built-in dataflow library.

Each entry is a *template*: the directive strings MAESTRO ships for that dataflow, with the
cluster size and tile sizes left as parameters filled from the layer and the hardware, so ``kcp``
is as valid on 8 PEs as on 1024.  :func:`library_dataflow` returns the filled-in directives, which
the CLI always shows.  With the defaults on 64 PEs or more the strings are exactly the ones in
MAESTRO's reference runs (``tests/data``).

Each template's tile sizes are parameters (``kcp``'s ``cluster``, ``yrp``'s ``k_tile``, ...), and
every template takes an ``order``: the outer level's TemporalMaps sorted by the position of their
dimension in it (``"YXC"``: Y outermost; dims it leaves out keep the template's order after the
named ones).  The design-space search makes them free variables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Mapping

from ..base import AccelgenError
from ..workload.layers import GEMM, Conv2D, Layer, analysed_layer
from .directives import CONV_DIMS, GEMM_DIMS, Cluster, Dataflow, TemporalMap, parse_dataflow

__all__ = ["LIBRARY", "library_dataflow", "default_dataflow", "is_library_name", "canonical_name",
           "describe_library", "parse_order", "dataflow_label", "parse_library_call"]


@dataclass(frozen=True)
class _Template:
    name: str
    title: str
    layer_kind: str                     # "conv2d" or "gemm"
    render: Callable[..., str]
    params: str                         # what the template fills in, for the docs
    defaults: Mapping[str, int] = field(default_factory=dict)   # its tile-size parameters


def _x_tile(layer: Layer, t: int) -> str:
    """An output-column tile of ``t`` (the window it reads, as ``yxp`` writes it); MAESTRO's own
    one-column ``Sz(S),1`` when ``t`` is 1."""
    return "TemporalMap(Sz(S),1) X" if t == 1 else f"TemporalMap({t + layer.S - 1},{t}) X"   # type: ignore[union-attr]


def _kcp(layer: Layer, num_pes: int, cluster: int = 64, k_tile: int = 1, c_tile: int = 1, x_tile: int = 1) -> str:
    if isinstance(layer, Conv2D) and layer.depthwise:
        # A depthwise layer has no K to spread: channels across the PEs (MAESTRO's DSCONV KC-P).
        return ("SpatialMap(1,1) C; TemporalMap(Sz(R),1) Y; TemporalMap(Sz(S),1) X; "
                "TemporalMap(Sz(R),Sz(R)) R; TemporalMap(Sz(S),Sz(S)) S")
    c = min(cluster, num_pes)
    x = _x_tile(layer, x_tile)
    return (f"SpatialMap({k_tile},{k_tile}) K; TemporalMap({c * c_tile},{c * c_tile}) C; TemporalMap(Sz(R),Sz(R)) R; "
            f"TemporalMap(Sz(S),Sz(S)) S; TemporalMap(Sz(R),1) Y; {x}; "
            f"Cluster({c},P); SpatialMap({c_tile},{c_tile}) C; TemporalMap(Sz(R),1) Y; {x}; "
            f"TemporalMap(Sz(R),Sz(R)) R; TemporalMap(Sz(S),Sz(S)) S")


def _yrp(layer: Layer, num_pes: int, k_tile: int = 16) -> str:
    k = "" if isinstance(layer, Conv2D) and layer.depthwise else f"TemporalMap({k_tile},{k_tile}) K; "
    return ("SpatialMap(1,1) Y'; TemporalMap(1,1) X'; TemporalMap(1,1) C; " + k +
            "TemporalMap(Sz(R),Sz(R)) R; TemporalMap(Sz(S),Sz(S)) S; Cluster(Sz(R),P); "
            "SpatialMap(1,1) Y; SpatialMap(1,1) R; TemporalMap(Sz(S),Sz(S)) S")


def _yxp(layer: Layer, num_pes: int, x_tile: int = 8) -> str:
    assert isinstance(layer, Conv2D)
    t = min(x_tile, num_pes)
    k = "" if layer.depthwise else "TemporalMap(1,1) K; "
    return (k + f"TemporalMap(1,1) C; SpatialMap(Sz(R),1) Y; TemporalMap({t + layer.S - 1},{t}) X; "
            f"Cluster({t},P); SpatialMap(Sz(S),1) X; TemporalMap(Sz(R),Sz(R)) R; "
            "TemporalMap(Sz(S),Sz(S)) S")


def _xp(layer: Layer, num_pes: int, k_tile: int = 1, c_tile: int = 1) -> str:
    k = "" if isinstance(layer, Conv2D) and layer.depthwise else f"TemporalMap({k_tile},{k_tile}) K; "
    return (k + f"TemporalMap({c_tile},{c_tile}) C; TemporalMap(Sz(R),1) Y; SpatialMap(Sz(S),1) X; "
            "TemporalMap(Sz(R),Sz(R)) R; TemporalMap(Sz(S),Sz(S)) S")


def _cp(layer: Layer, num_pes: int, k_tile: int = 1, x_tile: int = 1) -> str:
    k = "" if isinstance(layer, Conv2D) and layer.depthwise else f"TemporalMap({k_tile},{k_tile}) K; "
    return (k + f"TemporalMap(Sz(R),1) Y; {_x_tile(layer, x_tile)}; TemporalMap(Sz(R),Sz(R)) R; "
            "TemporalMap(Sz(S),Sz(S)) S; SpatialMap(1,1) C")


def _nmk(layer: Layer, num_pes: int, k_tile: int = 64, m_tile: int = 1, n_tile: int = 1) -> str:
    t = min(k_tile, num_pes)
    return (f"TemporalMap({n_tile},{n_tile}) N; SpatialMap({m_tile},{m_tile}) M; TemporalMap({t},{t}) K; "
            f"Cluster({t},P); TemporalMap({n_tile},{n_tile}) N; TemporalMap({m_tile},{m_tile}) M; SpatialMap(1,1) K")


LIBRARY: dict[str, _Template] = {
    t.name: t for t in (
        _Template("kcp", "NVDLA-like: K across clusters, C across the PEs of a cluster", "conv2d", _kcp,
                  "cluster size = min(cluster, PEs), cluster 64; K tile k_tile 1; C tile per PE c_tile 1; "
                  "output columns per step x_tile 1",
                  {"cluster": 64, "k_tile": 1, "c_tile": 1, "x_tile": 1}),
        _Template("yrp", "Eyeriss-like row stationary: output rows across clusters of R PEs", "conv2d",
                  _yrp, "K tile k_tile 16; cluster = R", {"k_tile": 16}),
        _Template("yxp", "ShiDianNao-like: output rows x columns across the array", "conv2d", _yxp,
                  "X tile t = min(x_tile, PEs), x_tile 8, window t+S-1", {"x_tile": 8}),
        _Template("xp", "output columns across the PEs", "conv2d", _xp, "K tile k_tile 1; C tile c_tile 1",
                  {"k_tile": 1, "c_tile": 1}),
        _Template("cp", "input channels across the PEs (spatial reduction)", "conv2d", _cp,
                  "K tile k_tile 1; output columns per step x_tile 1", {"k_tile": 1, "x_tile": 1}),
        _Template("nmk", "GEMM: M across clusters, K across the PEs of a cluster", "gemm", _nmk,
                  "K tile / cluster = min(k_tile, PEs), k_tile 64; M tile m_tile 1; N tile n_tile 1",
                  {"k_tile": 64, "m_tile": 1, "n_tile": 1}),
    )
}
_ALIASES = {"kc-p": "kcp", "yr-p": "yrp", "yx-p": "yxp", "x-p": "xp", "c-p": "cp", "nlr": "cp"}


def is_library_name(name: str) -> bool:
    return name.lower() in LIBRARY or name.lower() in _ALIASES


def canonical_name(name: str) -> str:
    """The library's own name for ``name`` (``KC-P`` -> ``kcp``)."""
    return _ALIASES.get(name.lower(), name.lower())


def library_dataflow(name: str, layer: Layer, num_pes: int, **params: Any) -> Dataflow:
    """The library dataflow ``name`` filled in for ``layer`` on ``num_pes`` PEs; ``params`` set
    its tile sizes (positive integers) and ``order`` (see the module doc)."""
    key = canonical_name(name)
    template = LIBRARY.get(key)
    if template is None:
        raise AccelgenError(f"unknown dataflow {name!r}; the library has {', '.join(LIBRARY)} "
                            "(or give a YAML / .m file)", where="--dataflow")
    layer = analysed_layer(layer)     # a transposed convolution runs as its direct equivalent
    kind = "gemm" if isinstance(layer, GEMM) else "conv2d"
    if template.layer_kind != kind:
        raise AccelgenError(f"library dataflow {key!r} is for {template.layer_kind} layers, not the "
                            f"{kind} layer {layer.name!r}", where="--dataflow")
    order = params.pop("order", None)
    check_params(key, params)
    dataflow = _parsed(template.render(layer, num_pes, **params), key)
    if order is not None:
        dataflow = _reordered(dataflow, tuple(parse_order(order, kind, where=f"dataflow {key!r}: order")))
    return dataflow


def check_params(name: str, params: Mapping[str, Any]) -> None:
    """Tile-size parameters of library dataflow ``name``: known names, positive integers."""
    template = LIBRARY[canonical_name(name)]
    allowed = [*template.defaults, "order"]
    for param, value in params.items():
        if param not in template.defaults and param != "order":
            raise AccelgenError(f"{name} has no parameter {param!r}; expected one of {', '.join(allowed)}",
                                where=f"dataflow {name!r}")
        if param != "order" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise AccelgenError(f"{param} must be a positive integer, not {value!r}", where=f"dataflow {name!r}")


_ORDER_TOKEN = re.compile(r"[A-Z]'?")


def parse_order(text: object, kind: str, *, where: str) -> list[str]:
    """A loop order such as ``"YXC"`` or ``"X'CK"``: dimensions, outermost first, each once."""
    dims = GEMM_DIMS if kind == "gemm" else CONV_DIMS
    if not isinstance(text, str) or not text or _ORDER_TOKEN.sub("", text):
        raise AccelgenError(f"must be a string of dimensions such as 'YXC' (from {' '.join(dims)}), "
                            f"not {text!r}", where=where)
    tokens = _ORDER_TOKEN.findall(text)
    for token in tokens:
        if token not in dims:
            raise AccelgenError(f"{text!r} names {token!r}, not a dimension of a {kind} layer "
                                f"(expected some of {' '.join(dims)})", where=where)
    if len(set(tokens)) != len(tokens):
        raise AccelgenError(f"{text!r} names a dimension twice", where=where)
    return tokens


def _reordered(dataflow: Dataflow, order: tuple[str, ...]) -> Dataflow:
    """The outer level's TemporalMaps re-sorted by ``order`` (SpatialMaps keep their places)."""
    directives = list(dataflow.directives)
    end = next((i for i, d in enumerate(directives) if isinstance(d, Cluster)), len(directives))
    slots = [i for i in range(end) if isinstance(directives[i], TemporalMap)]
    temporal = [directives[i] for i in slots]
    rank = {dim: i for i, dim in enumerate(order)}
    temporal.sort(key=lambda d: rank.get(d.dim, len(order)))   # stable: the rest keep their order
    for i, d in zip(slots, temporal):
        directives[i] = d
    return Dataflow._trusted(tuple(directives), dataflow.name)


def dataflow_label(name: str, params: Mapping[str, Any]) -> str:
    """``kcp`` or ``kcp(cluster=32,order=YXC)``: a family with its parameters, for tables."""
    if not params:
        return name
    return f"{name}({','.join(f'{k}={v}' for k, v in params.items())})"


_CALL = re.compile(r"^\s*([A-Za-z][A-Za-z-]*)\s*\((.*)\)\s*$")


def parse_library_call(text: str, *, where: str = "--dataflow") -> tuple[str, dict[str, Any]] | None:
    """``kcp(cluster=8,x_tile=14)`` -> ``("kcp", {"cluster": 8, "x_tile": 14})``: a library
    template with its parameters (integers; ``order`` a string of dimensions), checked; a plain
    library name -> its parameters ``{}``; ``None`` when ``text`` names no template."""
    if is_library_name(text):
        return canonical_name(text), {}
    m = _CALL.match(text)
    if m is None or not is_library_name(m.group(1)):
        return None
    name = canonical_name(m.group(1))
    params: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in m.group(2).split(","))):
        key, eq, value = (part.strip() for part in item.partition("="))
        if not eq or not key:
            raise AccelgenError(f"{text!r}: {item!r} is not name=value; expected e.g. {name}(k_tile=4)", where=where)
        if key in params:
            raise AccelgenError(f"{text!r} sets {key!r} twice", where=where)
        params[key] = value if key == "order" else (int(value) if value.isdigit() else value)
    check_params(name, params)
    if "order" in params:
        parse_order(params["order"], LIBRARY[name].layer_kind, where=f"dataflow {name!r}: order")
    return name, params


@lru_cache(maxsize=1024)
def _parsed(text: str, name: str) -> Dataflow:
    """Parsing is the costly part of a library look-up and depends on the rendered text alone (a
    :class:`Dataflow` is immutable, so the parsed one can be shared)."""
    return parse_dataflow(text, name=name)


def default_dataflow(layer: Layer, num_pes: int) -> Dataflow:
    """The library's choice for a layer given no dataflow of its kind: ``nmk`` for GEMMs,
    ``kcp`` for convolutions."""
    return library_dataflow("nmk" if isinstance(layer, GEMM) else "kcp", layer, num_pes)


def describe_library() -> list[tuple[str, str, str, str]]:
    return [(t.name, t.layer_kind, t.title, t.params) for t in LIBRARY.values()]

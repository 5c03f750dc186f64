"""The built-in dataflow library.

Each entry is a *template*: the directive strings MAESTRO ships for that dataflow, with the
cluster size and tile sizes left as parameters filled from the layer and the hardware, so ``kcp``
is as valid on 8 PEs as on 1024.  :func:`library_dataflow` returns the filled-in directives, which
the CLI always shows.  With the defaults on 64 PEs or more the strings are exactly the ones in
MAESTRO's reference runs (``tests/data``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from ._errors import AccelgenError
from .dataflow import Dataflow, parse_dataflow
from .workload import GEMM, Conv2D, Layer

__all__ = ["LIBRARY", "library_dataflow", "default_dataflow", "is_library_name", "canonical_name",
           "describe_library"]


@dataclass(frozen=True)
class _Template:
    name: str
    title: str
    layer_kind: str                     # "conv2d" or "gemm"
    render: Callable[[Layer, int], str]
    params: str                         # what the template fills in, for the docs


def _kcp(layer: Layer, num_pes: int, cluster: int = 64) -> str:
    if isinstance(layer, Conv2D) and layer.depthwise:
        # A depthwise layer has no K to spread: channels across the PEs (MAESTRO's DSCONV KC-P).
        return ("SpatialMap(1,1) C; TemporalMap(Sz(R),1) Y; TemporalMap(Sz(S),1) X; "
                "TemporalMap(Sz(R),Sz(R)) R; TemporalMap(Sz(S),Sz(S)) S")
    c = min(cluster, num_pes)
    return (f"SpatialMap(1,1) K; TemporalMap({c},{c}) C; TemporalMap(Sz(R),Sz(R)) R; "
            f"TemporalMap(Sz(S),Sz(S)) S; TemporalMap(Sz(R),1) Y; TemporalMap(Sz(S),1) X; "
            f"Cluster({c},P); SpatialMap(1,1) C; TemporalMap(Sz(R),1) Y; TemporalMap(Sz(S),1) X; "
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


def _xp(layer: Layer, num_pes: int) -> str:
    k = "" if isinstance(layer, Conv2D) and layer.depthwise else "TemporalMap(1,1) K; "
    return (k + "TemporalMap(1,1) C; TemporalMap(Sz(R),1) Y; SpatialMap(Sz(S),1) X; "
            "TemporalMap(Sz(R),Sz(R)) R; TemporalMap(Sz(S),Sz(S)) S")


def _cp(layer: Layer, num_pes: int) -> str:
    k = "" if isinstance(layer, Conv2D) and layer.depthwise else "TemporalMap(1,1) K; "
    return (k + "TemporalMap(Sz(R),1) Y; TemporalMap(Sz(S),1) X; TemporalMap(Sz(R),Sz(R)) R; "
            "TemporalMap(Sz(S),Sz(S)) S; SpatialMap(1,1) C")


def _nmk(layer: Layer, num_pes: int, k_tile: int = 64) -> str:
    t = min(k_tile, num_pes)
    return (f"TemporalMap(1,1) N; SpatialMap(1,1) M; TemporalMap({t},{t}) K; Cluster({t},P); "
            "TemporalMap(1,1) N; TemporalMap(1,1) M; SpatialMap(1,1) K")


LIBRARY: dict[str, _Template] = {
    t.name: t for t in (
        _Template("kcp", "NVDLA-like: K across clusters, C across the PEs of a cluster", "conv2d", _kcp,
                  "cluster size = min(64, PEs)"),
        _Template("yrp", "Eyeriss-like row stationary: output rows across clusters of R PEs", "conv2d",
                  _yrp, "K tile 16; cluster = R"),
        _Template("yxp", "ShiDianNao-like: output rows x columns across the array", "conv2d", _yxp,
                  "X tile t = min(8, PEs), window t+S-1"),
        _Template("xp", "output columns across the PEs", "conv2d", _xp, "none"),
        _Template("cp", "input channels across the PEs (spatial reduction)", "conv2d", _cp, "none"),
        _Template("nmk", "GEMM: M across clusters, K across the PEs of a cluster", "gemm", _nmk,
                  "K tile / cluster = min(64, PEs)"),
    )
}
_ALIASES = {"kc-p": "kcp", "yr-p": "yrp", "yx-p": "yxp", "x-p": "xp", "c-p": "cp", "nlr": "cp"}


def is_library_name(name: str) -> bool:
    return name.lower() in LIBRARY or name.lower() in _ALIASES


def canonical_name(name: str) -> str:
    """The library's own name for ``name`` (``KC-P`` -> ``kcp``)."""
    return _ALIASES.get(name.lower(), name.lower())


def library_dataflow(name: str, layer: Layer, num_pes: int) -> Dataflow:
    """The library dataflow ``name`` filled in for ``layer`` on ``num_pes`` PEs."""
    key = canonical_name(name)
    template = LIBRARY.get(key)
    if template is None:
        raise AccelgenError(f"unknown dataflow {name!r}; the library has {', '.join(LIBRARY)} "
                            "(or give a YAML / .m file)", where="--dataflow")
    kind = "gemm" if isinstance(layer, GEMM) else "conv2d"
    if template.layer_kind != kind:
        raise AccelgenError(f"library dataflow {key!r} is for {template.layer_kind} layers, not the "
                            f"{kind} layer {layer.name!r}", where="--dataflow")
    return _parsed(template.render(layer, num_pes), key)


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

"""What a user types for a dataflow, to a dataflow, and a dataflow to the directives analysed for
one layer: the one place that resolves a dataflow spec (the CLI, the search, the generator and
the RTL test matrix all call it).

A spec is a library name (``kcp``: a template filled in per layer and array), a built-in dataflow
file by name (``kcp_x2``, shipped in ``configs/dataflows``), a dataflow file (``.yaml``, ``.m``),
or directive text (``"SpatialMap(1,1) K; TemporalMap(4,4) C; ..."``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Union

from ..base import CONFIGS, AccelgenError
from ..workload.layers import GEMM, Layer
from .directives import GEMM_DIMS, Dataflow, parse_dataflow
from .library import LIBRARY, dataflow_label as library_label, default_dataflow, library_dataflow, parse_library_call
from .yaml_io import DATAFLOW_SUFFIXES, load_dataflow

if TYPE_CHECKING:
    from ..hardware.hardware import Hardware

__all__ = ["DataflowSpec", "dataflow_from_spec", "resolve_dataflow", "dataflow_kind", "dataflow_label",
           "builtin_dataflow_files", "applies_to"]

#: A library name (canonical, lower case), a parsed dataflow, or None (the library default).
DataflowSpec = Union[str, Dataflow, None]
_BUILTIN = CONFIGS / "dataflows"


def builtin_dataflow_files() -> tuple[str, ...]:
    """Names of the dataflow files shipped with the package."""
    return tuple(sorted(p.stem for p in _BUILTIN.glob("*.yaml")))


def dataflow_from_spec(spec: str, option: str = "--dataflow") -> DataflowSpec:
    """A library name (canonical, with its parameters if given: ``kcp(x_tile=7)``), or the parsed
    dataflow of a file or of directive text."""
    call = parse_library_call(spec, where=option)
    if call is not None:
        return library_label(*call)
    if Path(spec).suffix.lower() in DATAFLOW_SUFFIXES or Path(spec).exists():
        return load_dataflow(spec)
    if "map(" in spec.lower() or ";" in spec:
        return parse_dataflow(spec, name=option)
    if spec in builtin_dataflow_files():
        return load_dataflow(_BUILTIN / f"{spec}.yaml")
    raise AccelgenError(f"unknown dataflow {spec!r}; the library has {', '.join(LIBRARY)} (or give a "
                        f"{', '.join(DATAFLOW_SUFFIXES)} dataflow file, a built-in one: "
                        f"{', '.join(builtin_dataflow_files())}, or directive text)", where=option)


def resolve_dataflow(spec: DataflowSpec, layer: Layer, hw: Hardware | int) -> Dataflow:
    """The dataflow analysed for ``layer`` on ``hw`` (a hardware description, or just its PE
    count): a library template filled in for the array, a parsed dataflow as it is, or
    (``None``) the library default for the layer's kind."""
    num_pes = hw if isinstance(hw, int) else hw.num_pes
    if spec is None:
        return default_dataflow(layer, num_pes)
    if isinstance(spec, str):
        name, params = _call(spec)
        return library_dataflow(name, layer, num_pes, **params)
    return spec


def _call(spec: str) -> tuple[str, dict]:
    call = parse_library_call(spec)
    if call is None:
        raise AccelgenError(f"unknown dataflow {spec!r}; the library has {', '.join(LIBRARY)}", where="--dataflow")
    return call


def dataflow_kind(spec: DataflowSpec) -> str:
    """``gemm`` or ``conv2d``: which layers a dataflow is written for."""
    if isinstance(spec, str):
        return LIBRARY[_call(spec)[0]].layer_kind
    assert isinstance(spec, Dataflow)
    dims = spec.dims()
    return "gemm" if "M" in dims and dims <= set(GEMM_DIMS) else "conv2d"


def dataflow_label(spec: DataflowSpec) -> str:
    return spec if isinstance(spec, str) else spec.name if isinstance(spec, Dataflow) else "?"


def applies_to(spec: DataflowSpec, layer: Layer) -> bool:
    """Whether ``spec`` is written for the kind of ``layer``."""
    return spec is None or (dataflow_kind(spec) == "gemm") == isinstance(layer, GEMM)

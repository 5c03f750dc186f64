"""Design-point files: one hardware and its dataflows, as the design-space search writes them and
``accelgen analyze --design`` (and later ``emit``) reads them::

    design_point: {search: demo, model: tiny_cnn, preset: maestro, point: 1234, rank: 1,
                   objectives: {runtime_cycles: 9232, energy_pj: 13649182.8}}
    hardware: {...}                                  # a hardware description (configs/hw schema)
    dataflows:                                       # library family + parameters per layer kind
      conv2d: {family: kcp, params: {cluster: 16, order: CRSYX}}
      gemm: {family: nmk, params: {k_tile: 64}}
    layers:                                          # optional: per-layer choices (override)
      conv1: {family: yrp, params: {k_tile: 8}}
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from .base import AccelgenError, load_yaml, read_text
from .dataflow.directives import Dataflow
from .dataflow.library import LIBRARY, check_params, library_dataflow, parse_order
from .hardware.hardware import Hardware, hardware_from_dict
from .hardware.tables import show
from .workload.layers import GEMM, Layer

__all__ = ["Design", "load_design", "design_from_dict"]

_TOP = ("design_point", "hardware", "dataflows", "layers")


@dataclass(frozen=True)
class Design:
    hardware: Hardware
    dataflows: Mapping[str, tuple[str, dict[str, Any]]]            # layer kind -> (family, params)
    layers: Mapping[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)
    source: str = "<design>"

    def dataflow_for(self, layer: Layer, num_pes: int | None = None) -> Dataflow:
        kind = "gemm" if isinstance(layer, GEMM) else "conv2d"
        spec = self.layers.get(layer.name) or self.dataflows.get(kind)
        if spec is None:
            raise AccelgenError(f"has no dataflow for the {kind} layer {layer.name!r} (dataflows.{kind} or "
                                f"layers.{layer.name})", where=self.source)
        family, params = spec
        return library_dataflow(family, layer, num_pes or self.hardware.num_pes, **params)


def _spec(where: str, path: str, value: object) -> tuple[str, dict[str, Any]]:
    if not isinstance(value, Mapping) or set(value) - {"family", "params"} or "family" not in value:
        raise AccelgenError(f"{path} must be a mapping {{family: NAME, params: {{...}}}}, not {show(value)}",
                            where=where)
    family, params = value["family"], value.get("params") or {}
    if family not in LIBRARY:
        raise AccelgenError(f"{path}.family must be one of {', '.join(LIBRARY)}, not {show(family)}", where=where)
    if not isinstance(params, Mapping):
        raise AccelgenError(f"{path}.params must be a mapping, not {show(params)}", where=where)
    try:
        check_params(family, {k: v for k, v in params.items() if k != "order"})
        if "order" in params:
            parse_order(params["order"], LIBRARY[family].layer_kind, where="order")
    except AccelgenError as err:
        raise AccelgenError(f"{path}.params: {err}", where=where) from None
    return family, dict(params)


def design_from_dict(doc: object, where: str = "<design>") -> Design:
    if not isinstance(doc, Mapping) or "hardware" not in doc:
        raise AccelgenError(f"expected a design point with 'hardware' and 'dataflows', not {show(doc)}", where=where)
    for key in doc:
        if key not in _TOP:
            raise AccelgenError(f"unknown field {show(key)} (allowed: {', '.join(_TOP)})", where=where)
    hw = hardware_from_dict(doc["hardware"], where=f"{where}: hardware")
    dataflows = doc.get("dataflows") or {}
    if not isinstance(dataflows, Mapping) or set(dataflows) - {"conv2d", "gemm"}:
        raise AccelgenError(f"dataflows must map conv2d and/or gemm to {{family, params}}, not {show(dataflows)}",
                            where=where)
    kinds = {kind: _spec(where, f"dataflows.{kind}", v) for kind, v in dataflows.items()}
    layers = doc.get("layers") or {}
    if not isinstance(layers, Mapping):
        raise AccelgenError(f"layers must map layer names to {{family, params}}, not {show(layers)}", where=where)
    per_layer = {str(name): _spec(where, f"layers.{name}", v) for name, v in layers.items()}
    info = doc.get("design_point") or {}
    return Design(hw, kinds, per_layer, info if isinstance(info, Mapping) else {}, where)


def load_design(path: str | os.PathLike[str]) -> Design:
    where = os.fspath(path)
    return design_from_dict(load_yaml(read_text(path, "a design-point file"), where,
                                      empty="a design point with 'hardware' and 'dataflows'"), where)

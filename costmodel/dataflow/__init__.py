"""Dataflows: the data-centric directives (``SpatialMap``, ``TemporalMap``, ``Cluster``), their
YAML / ``.m`` files, the built-in library of templates, and the one resolver of what a user types.

* :mod:`.directives` — the directive types and the parser of directive text
* :mod:`.yaml_io` — dataflow files
* :mod:`.library` — ``kcp``, ``yrp``, ``yxp``, ``xp``, ``cp``, ``nmk``: templates filled in per layer
* :mod:`.spec` — a name, a file or directive text to a dataflow, and a dataflow to directives for a layer
"""

from .directives import CONV_DIMS, GEMM_DIMS, Cluster, Dataflow, SpatialMap, Sz, TemporalMap, parse_dataflow
from .library import LIBRARY, default_dataflow, library_dataflow
from .spec import DataflowSpec, dataflow_from_spec, dataflow_kind, resolve_dataflow
from .yaml_io import DATAFLOW_SUFFIXES, load_dataflow

__all__ = ["CONV_DIMS", "GEMM_DIMS", "Cluster", "Dataflow", "SpatialMap", "Sz", "TemporalMap", "parse_dataflow",
           "LIBRARY", "default_dataflow", "library_dataflow", "DataflowSpec", "dataflow_from_spec",
           "dataflow_kind", "resolve_dataflow", "DATAFLOW_SUFFIXES", "load_dataflow"]

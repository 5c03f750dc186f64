"""Dataflow files, validated at the door: a YAML directive list or a MAESTRO ``.m`` file.

YAML schema (``configs/dataflows/*.yaml``)::

    name: kcp_64                    # optional, defaults to the file's stem
    directives:                     # outermost first; or one multi-line string
      - SpatialMap(1,1) K
      - TemporalMap(64,64) C
      - Cluster(64,P)
      - SpatialMap(1,1) C

A ``.m`` file contributes its first ``Dataflow { ... }`` block.  Every problem is one
:class:`~costmodel.AccelgenError` line naming the file, the field and the offending value.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..base import AccelgenError, load_yaml, read_text
from ..workload.maestro_files import read_maestro_file
from .directives import Dataflow, parse_dataflow

__all__ = ["load_dataflow", "dataflow_from_dict", "DATAFLOW_SUFFIXES"]

DATAFLOW_SUFFIXES: tuple[str, ...] = (".yaml", ".yml", ".m")
_FIELDS = ("name", "directives")


def _show(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def dataflow_from_dict(data: object, *, where: str, default_name: str) -> Dataflow:
    """A dataflow from a parsed YAML document; ``where`` names the file in errors."""
    if not isinstance(data, dict):
        raise AccelgenError(f"expected a mapping with 'directives' (and optionally 'name'), not {_show(data)}",
                            where=where)
    for key in data:
        if key not in _FIELDS:
            raise AccelgenError(f"{_show(key)} is not a dataflow field; expected {', '.join(_FIELDS)}",
                                where=where)
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name or any(ch.isspace() for ch in name):
        raise AccelgenError(f"name must be a non-empty string without spaces, not {_show(name)}", where=where)
    if "directives" not in data:
        raise AccelgenError("directives is missing; expected a list of directive strings", where=where)
    directives = data["directives"]
    if isinstance(directives, list):
        for index, item in enumerate(directives):
            if not isinstance(item, str):
                raise AccelgenError(f"directives[{index}] must be a directive string such as "
                                    f"'SpatialMap(1,1) K', not {_show(item)}", where=where)
            if item.count("(") != item.count(")"):  # YAML's [a, b] splits 'SpatialMap(1,1) K' at the comma
                raise AccelgenError(f"directives[{index}] {_show(item)} has unbalanced parentheses; in a "
                                    "[...] list quote each directive (commas separate the items)", where=where)
    elif not isinstance(directives, str):
        raise AccelgenError("directives must be a list of directive strings or one multi-line string, "
                            f"not {_show(directives)}", where=where)
    # Parse under the file's name so that every directive error names the file.
    parsed = parse_dataflow(directives, name=where)
    return Dataflow(parsed.directives, name)


def load_dataflow(path: str | os.PathLike[str]) -> Dataflow:
    """Read a ``.yaml``/``.yml`` dataflow file, or the first Dataflow block of a MAESTRO ``.m``."""
    where = os.fspath(path)
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in DATAFLOW_SUFFIXES:
        raise AccelgenError(f"unknown dataflow file type {p.suffix!r}; expected one of "
                            f"{', '.join(DATAFLOW_SUFFIXES)}", where=where)
    if suffix == ".m":
        for layer, text in read_maestro_file(p):
            if text is not None:
                return parse_dataflow(text, name=f"{p.stem}:{layer.name}")
        raise AccelgenError("has no Dataflow block; expected a layer with 'Dataflow { ... }'", where=where)
    data = load_yaml(read_text(path, "a dataflow file"), where, empty="a mapping with 'directives'")
    return dataflow_from_dict(data, where=where, default_name=p.stem or "dataflow")

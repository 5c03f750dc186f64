"""Data-centric dataflow directives (MAESTRO's notation) and their parser.

A dataflow is an ordered list, outermost first, of

* ``TemporalMap(size, offset) D`` — every unit of the level gets the same ``size``-long range of
  dimension ``D``; the range slides by ``offset`` each step;
* ``SpatialMap(size, offset) D`` — unit ``i`` of the level gets the range starting at ``i*offset``;
* ``Cluster(n)`` — everything below acts inside groups of ``n`` units (one level down).

Sizes and offsets are integers or ``Sz(D)``, the full size of ``D``, resolved against a layer by
:meth:`Dataflow.resolve`.  Text is parsed with :func:`parse_dataflow`; every problem raises an
:class:`~costmodel.AccelgenError` naming the directive and the offending value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Literal, Union

from ._errors import AccelgenError

__all__ = [
    "Sz", "TemporalMap", "SpatialMap", "Cluster", "Directive", "MapDirective", "Dataflow",
    "parse_dataflow", "CONV_DIMS", "GEMM_DIMS",
]

#: Dimensions a dataflow may name for each layer kind.  ``Y'``/``X'`` are output rows/columns.
CONV_DIMS: tuple[str, ...] = ("N", "K", "C", "Y", "X", "R", "S", "Y'", "X'")
GEMM_DIMS: tuple[str, ...] = ("M", "N", "K")
_ALL_DIMS = frozenset(CONV_DIMS + GEMM_DIMS)


@dataclass(frozen=True)
class Sz:
    """``Sz(D)``: the full size of dimension ``D`` in the layer being analysed."""

    dim: str

    def __str__(self) -> str:
        return f"Sz({self.dim})"


Size = Union[int, Sz]


def _size_text(value: Size) -> str:
    return str(value)


@dataclass(frozen=True)
class TemporalMap:
    size: Size
    offset: Size
    dim: str
    kind: Literal["temporal"] = "temporal"

    def __str__(self) -> str:
        return f"TemporalMap({_size_text(self.size)},{_size_text(self.offset)}) {self.dim}"


@dataclass(frozen=True)
class SpatialMap:
    size: Size
    offset: Size
    dim: str
    kind: Literal["spatial"] = "spatial"

    def __str__(self) -> str:
        return f"SpatialMap({_size_text(self.size)},{_size_text(self.offset)}) {self.dim}"


@dataclass(frozen=True)
class Cluster:
    size: Size
    kind: Literal["cluster"] = "cluster"

    def __str__(self) -> str:
        return f"Cluster({_size_text(self.size)},P)"


MapDirective = Union[TemporalMap, SpatialMap]
Directive = Union[TemporalMap, SpatialMap, Cluster]


def _check_positive(where: str, what: str, value: object) -> None:
    if isinstance(value, Sz):
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AccelgenError(f"{what} must be a positive integer or Sz(D), not {value!r}", where=where)


@dataclass(frozen=True)
class Dataflow:
    """A validated directive list.  ``name`` is the library name or file it came from."""

    directives: tuple[Directive, ...]
    name: str = "dataflow"

    def __post_init__(self) -> None:
        if not self.directives:
            raise AccelgenError("a dataflow needs at least one directive", where=self.name)
        for index, directive in enumerate(self.directives, start=1):
            where = f"{self.name}: directive {index} {str(directive)!r}"
            if isinstance(directive, Cluster):
                _check_positive(where, "Cluster size", directive.size)
                continue
            if directive.dim not in _ALL_DIMS:
                raise AccelgenError(
                    f"unknown dimension {directive.dim!r}; expected one of {' '.join(sorted(_ALL_DIMS))}",
                    where=where)
            _check_positive(where, "size", directive.size)
            _check_positive(where, "offset", directive.offset)
            for part in (directive.size, directive.offset):
                if isinstance(part, Sz) and part.dim not in _ALL_DIMS:
                    raise AccelgenError(f"Sz() of unknown dimension {part.dim!r}", where=where)
            if (isinstance(directive.size, int) and isinstance(directive.offset, int)
                    and directive.offset > directive.size):
                raise AccelgenError(
                    f"offset {directive.offset} is larger than size {directive.size}: the map would "
                    "skip elements; expected offset <= size", where=where)
        for level, maps in enumerate(self.levels()):
            where = f"{self.name}: level {level}"
            if not maps:
                raise AccelgenError("a cluster level needs at least one directive", where=where)
            spatial = [d for d in maps if isinstance(d, SpatialMap)]
            if not spatial:
                raise AccelgenError("no SpatialMap at this level; expected one or two", where=where)
            if len(spatial) > 2:
                raise AccelgenError(f"{len(spatial)} SpatialMaps at this level; expected one or two",
                                    where=where)
            seen: set[str] = set()
            for d in maps:
                if d.dim in seen:
                    raise AccelgenError(f"dimension {d.dim!r} is mapped twice at this level", where=where)
                seen.add(d.dim)

    # -- structure ---------------------------------------------------------------------------
    def levels(self) -> list[list[MapDirective]]:
        """The map directives of each cluster level, outermost level first."""
        out: list[list[MapDirective]] = [[]]
        for directive in self.directives:
            if isinstance(directive, Cluster):
                out.append([])
            else:
                out[-1].append(directive)
        return out

    def cluster_sizes(self) -> list[Size]:
        return [d.size for d in self.directives if isinstance(d, Cluster)]

    def dims(self) -> set[str]:
        return {d.dim for d in self.directives if not isinstance(d, Cluster)}

    # -- resolution --------------------------------------------------------------------------
    def resolve(self, dims: dict[str, int], *, kind: str, allowed: Iterable[str]) -> Dataflow:
        """Replace every ``Sz(D)`` by the layer's size and check the dims exist for this layer."""
        allowed = tuple(allowed)

        def value(part: Size, where: str) -> int:
            if isinstance(part, int):
                return part
            if part.dim not in dims:
                raise AccelgenError(f"Sz({part.dim}) names no dimension of a {kind} layer "
                                    f"(expected one of {' '.join(allowed)})", where=where)
            return dims[part.dim]

        out: list[Directive] = []
        for index, directive in enumerate(self.directives, start=1):
            where = f"{self.name}: directive {index} {str(directive)!r}"
            if isinstance(directive, Cluster):
                out.append(Cluster(value(directive.size, where)))
                continue
            if directive.dim not in allowed:
                raise AccelgenError(f"dimension {directive.dim!r} is not a dimension of a {kind} layer "
                                    f"(expected one of {' '.join(allowed)})", where=where)
            cls = type(directive)
            out.append(cls(value(directive.size, where), value(directive.offset, where), directive.dim))
        return Dataflow(tuple(out), self.name)

    def __str__(self) -> str:
        return "; ".join(str(d) for d in self.directives)


# ---------------------------------------------------------------------------------------------
# Parsing
_DIM = r"[A-Za-z]'?"
_SIZE = rf"(?:\d+|Sz\s*\(\s*{_DIM}\s*\))"
_MAP_RE = re.compile(
    rf"^(TemporalMap|SpatialMap)\s*\(\s*({_SIZE})\s*,\s*({_SIZE})\s*\)\s*({_DIM})$")
_CLUSTER_RE = re.compile(rf"^Cluster\s*\(\s*({_SIZE})\s*(?:,\s*([PpLl])\s*)?\)$")
_SZ_RE = re.compile(rf"^Sz\s*\(\s*({_DIM})\s*\)$")


def _parse_size(text: str) -> Size:
    match = _SZ_RE.match(text)
    if match:
        return Sz(match.group(1).upper())
    return int(text)


def parse_directive(text: str, where: str) -> Directive:
    """One directive, e.g. ``SpatialMap(1,1) K`` or ``Cluster(64, P)``."""
    src = " ".join(text.split())
    match = _MAP_RE.match(src)
    if match:
        cls = TemporalMap if match.group(1) == "TemporalMap" else SpatialMap
        return cls(_parse_size(match.group(2)), _parse_size(match.group(3)), match.group(4).upper())
    match = _CLUSTER_RE.match(src)
    if match:
        return Cluster(_parse_size(match.group(1)))
    raise AccelgenError(
        f"cannot parse directive {src!r}; expected 'TemporalMap(size,offset) D', "
        "'SpatialMap(size,offset) D' or 'Cluster(n)' (size/offset an integer or Sz(D))", where=where)


def parse_dataflow(text: str | Iterable[str], name: str = "dataflow") -> Dataflow:
    """Parse directives separated by ``;`` or newlines (``//`` comments allowed), or a list of
    directive strings, into a validated :class:`Dataflow`."""
    if isinstance(text, str):
        lines = [line.split("//", 1)[0] for line in text.splitlines()]
        parts = [p.strip() for p in ";".join(lines).split(";")]
    else:
        parts = []
        for index, item in enumerate(text, start=1):
            if not isinstance(item, str):
                raise AccelgenError(f"directive {index} must be a string, not {item!r}", where=name)
            parts.extend(p.strip() for p in item.split(";"))
    directives = []
    for part in parts:
        if part:
            directives.append(parse_directive(part, f"{name}: directive {len(directives) + 1}"))
    return Dataflow(tuple(directives), name)

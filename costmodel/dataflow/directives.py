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

from ..base import AccelgenError

__all__ = [
    "Sz", "TemporalMap", "SpatialMap", "Cluster", "Directive", "MapDirective", "Dataflow",
    "parse_dataflow", "CONV_DIMS", "GEMM_DIMS",
]

#: Dimensions a dataflow may name for each layer kind.  ``Y'``/``X'`` are output rows/columns.
CONV_DIMS: tuple[str, ...] = ("N", "K", "C", "Y", "X", "R", "S", "Y'", "X'")
GEMM_DIMS: tuple[str, ...] = ("B", "M", "N", "K")   # B: the batch of a batched GEMM
_ALL_DIMS = frozenset(CONV_DIMS + GEMM_DIMS)


@dataclass(frozen=True)
class Sz:
    """``Sz(D)``: the full size of dimension ``D`` in the layer being analysed."""

    dim: str

    def __str__(self) -> str:
        return f"Sz({self.dim})"


Size = Union[int, Sz]


@dataclass(frozen=True)
class _Map:
    """What both maps are: a ``size``-long range of ``dim`` that slides by ``offset``."""

    size: Size
    offset: Size
    dim: str

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.size},{self.offset}) {self.dim}"


@dataclass(frozen=True)
class TemporalMap(_Map):
    kind: Literal["temporal"] = "temporal"


@dataclass(frozen=True)
class SpatialMap(_Map):
    kind: Literal["spatial"] = "spatial"


@dataclass(frozen=True)
class Cluster:
    size: Size
    kind: Literal["cluster"] = "cluster"
    mode: Literal["P", "L"] = "P"     # MAESTRO's physical / logical cluster; analysed alike

    def __str__(self) -> str:
        return f"Cluster({self.size},{self.mode})"


MapDirective = Union[TemporalMap, SpatialMap]
Directive = Union[TemporalMap, SpatialMap, Cluster]


def _where(name: str, index: int, directive: Directive) -> str:
    return f"{name}: directive {index} {str(directive)!r}"


def _is_positive_int(value: object) -> bool:
    return type(value) is int and value >= 1      # exact type: bool (an int subclass) is refused


def _check_positive(name: str, index: int, directive: Directive, what: str, value: object) -> None:
    if isinstance(value, Sz) or _is_positive_int(value):
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AccelgenError(f"{what} must be a positive integer or Sz(D), not {value!r}",
                            where=_where(name, index, directive))


def _check_directive(name: str, index: int, directive: Directive) -> None:
    """One directive's own checks (the error names it; the text is only built on failure)."""
    if isinstance(directive, Cluster):
        _check_positive(name, index, directive, "Cluster size", directive.size)
        return
    size, offset = directive.size, directive.offset
    if type(size) is int and type(offset) is int and 1 <= offset <= size and directive.dim in _ALL_DIMS:
        return                                      # the common case: nothing to report
    if directive.dim not in _ALL_DIMS:
        raise AccelgenError(
            f"unknown dimension {directive.dim!r}; expected one of {' '.join(sorted(_ALL_DIMS))}",
            where=_where(name, index, directive))
    _check_positive(name, index, directive, "size", size)
    _check_positive(name, index, directive, "offset", offset)
    for part in (size, offset):
        if isinstance(part, Sz) and part.dim not in _ALL_DIMS:
            raise AccelgenError(f"Sz() of unknown dimension {part.dim!r}", where=_where(name, index, directive))
    if isinstance(size, int) and isinstance(offset, int) and offset > size:
        raise AccelgenError(
            f"offset {offset} is larger than size {size}: the map would "
            "skip elements; expected offset <= size", where=_where(name, index, directive))


@dataclass(frozen=True)
class Dataflow:
    """A validated directive list.  ``name`` is the library name or file it came from."""

    directives: tuple[Directive, ...]
    name: str = "dataflow"

    def __post_init__(self) -> None:
        if not self.directives:
            raise AccelgenError("a dataflow needs at least one directive", where=self.name)
        for index, directive in enumerate(self.directives, start=1):
            _check_directive(self.name, index, directive)
        for level, maps in enumerate(self.levels()):
            spatial = sum(isinstance(d, SpatialMap) for d in maps)
            if maps and 0 < spatial <= 2 and len({d.dim for d in maps}) == len(maps):
                continue                                    # the common case: nothing to report
            where = f"{self.name}: level {level}"
            if not maps:
                raise AccelgenError("a cluster level needs at least one directive", where=where)
            if not spatial:
                raise AccelgenError("no SpatialMap at this level; expected one or two", where=where)
            if spatial > 2:
                raise AccelgenError(f"{spatial} SpatialMaps at this level; expected one or two",
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

        def value(part: Size, index: int, directive: Directive) -> int:
            if isinstance(part, int):
                return part
            if part.dim not in dims:
                raise AccelgenError(f"Sz({part.dim}) names no dimension of a {kind} layer "
                                    f"(expected one of {' '.join(allowed)})",
                                    where=_where(self.name, index, directive))
            return dims[part.dim]

        out: list[Directive] = []
        filled: list[int] = []
        for index, directive in enumerate(self.directives, start=1):
            cluster = isinstance(directive, Cluster)
            if not cluster and directive.dim not in allowed:
                raise AccelgenError(f"dimension {directive.dim!r} is not a dimension of a {kind} layer "
                                    f"(expected one of {' '.join(allowed)})",
                                    where=_where(self.name, index, directive))
            size = directive.size
            offset = size if cluster else directive.offset
            if type(size) is int and type(offset) is int and not (cluster and directive.mode != "P"):
                out.append(directive)             # immutable and already checked: keep it
            elif cluster:
                out.append(Cluster(value(size, index, directive)))   # analysed as (and shown) P
                filled.append(index)
            else:
                out.append(type(directive)(value(size, index, directive), value(offset, index, directive),
                                           directive.dim))
                filled.append(index)
        for index in filled:                      # a filled-in size may break a directive's rule
            _check_directive(self.name, index, out[index - 1])
        return Dataflow._trusted(tuple(out), self.name)   # same levels and dims as self: valid

    @classmethod
    def _trusted(cls, directives: tuple[Directive, ...], name: str) -> Dataflow:
        """A dataflow whose directives are known to pass every check (no re-validation)."""
        dataflow = object.__new__(cls)
        object.__setattr__(dataflow, "directives", directives)
        object.__setattr__(dataflow, "name", name)
        return dataflow

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


_MAX_SIZE_DIGITS = 12   # no layer dimension comes near 10**12


def _parse_size(text: str, where: str) -> Size:
    match = _SZ_RE.match(text)
    if match:
        return Sz(match.group(1).upper())
    if len(text) > _MAX_SIZE_DIGITS:
        raise AccelgenError(f"size {text[:20]}... has {len(text)} digits; expected at most "
                            f"{_MAX_SIZE_DIGITS}", where=where)
    return int(text)


#: Directives parsed so far, by their text with its spaces normalised (a directive is immutable;
#: a mapping search renders thousands of dataflows from the same few dozen directives).
_PARSED: dict[str, Directive] = {}


def parse_directive(text: str, where: str) -> Directive:
    """One directive, e.g. ``SpatialMap(1,1) K`` or ``Cluster(64, P)``."""
    src = " ".join(text.split())
    got = _PARSED.get(src)
    if got is None:
        got = _parse_directive(src, where)
        if len(_PARSED) < 4096:
            _PARSED[src] = got
    return got


def _parse_directive(src: str, where: str) -> Directive:
    match = _MAP_RE.match(src)
    if match:
        cls = TemporalMap if match.group(1) == "TemporalMap" else SpatialMap
        return cls(_parse_size(match.group(2), where), _parse_size(match.group(3), where),
                   match.group(4).upper())
    match = _CLUSTER_RE.match(src)
    if match:
        return Cluster(_parse_size(match.group(1), where), mode=(match.group(2) or "P").upper())  # type: ignore[arg-type]
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

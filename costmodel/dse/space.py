"""Design spaces: a YAML file of hardware ranges and dataflow families, validated at the door.

Schema (``configs/space/*.yaml``); every value is a scalar (pinned), a list, ``{pow2: [lo, hi]}``
(the powers of two from ``lo`` to ``hi``) or ``{range: [start, stop, step]}`` (``stop`` included)::

    name: edge-demo
    base: small                      # built-in hardware or a hardware YAML: every field not searched
    hardware:
      num_pes: {pow2: [16, 64]}
      simd_lanes: [1, 2]
      l1_bytes_per_pe: {pow2: [256, 1024]}
      l2_bytes: {range: [65536, 262144, 65536]}
      offchip_bw_words_per_cycle: [8, 16]
      noc:                           # per cluster level, outermost first; one entry: every level
        - {bandwidth_words_per_cycle: [16, 64], latency_cycles: 1, hops: 1}
    dataflows:                       # library families and their free parameters ({}: defaults)
      kcp: {cluster: {pow2: [16, 64]}, order: [CRSYX, YXCRS]}
      xp: {}
      nmk: {k_tile: [16, 64]}
    search: {mode: exhaustive, seed: 0, chunk_points: 65536}   # or mode: random, samples: N
    constraints: ["area_mm2 <= 2"]

Every problem is one :class:`~costmodel.AccelgenError` line naming the file, the field path, the
value and what was expected.
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..base import AccelgenError, load_yaml, read_text
from ..dataflow.library import LIBRARY, parse_order
from ..hardware.hardware import BUILTIN_HARDWARE, Hardware, builtin_hardware, load_hardware
from ..hardware.tables import MAX_INT, show

__all__ = ["Space", "DataflowChoice", "NoCAxes", "load_space", "space_from_dict", "SEARCH_MODES"]

SEARCH_MODES = ("exhaustive", "random")
_TOP = ("name", "base", "hardware", "dataflows", "search", "constraints")
_HW = ("num_pes", "simd_lanes", "l1_bytes_per_pe", "l2_bytes", "offchip_bw_words_per_cycle", "noc")
_NOC = ("bandwidth_words_per_cycle", "latency_cycles", "hops")
_SEARCH = ("mode", "samples", "seed", "chunk_points", "per_layer_dataflow")
#: The slowest bandwidth a space may name: keeps every cycle count far inside int64.
MIN_BANDWIDTH = 1 / 1024


@dataclass(frozen=True)
class DataflowChoice:
    """One filled-in choice of a library family: its name and parameter values."""

    family: str
    params: tuple[tuple[str, Any], ...]

    @property
    def kind(self) -> str:
        return LIBRARY[self.family].layer_kind

    def as_dict(self) -> dict[str, Any]:
        return {"family": self.family, "params": dict(self.params)}

    def label(self) -> str:
        if not self.params:
            return self.family
        return f"{self.family}({','.join(f'{k}={v}' for k, v in self.params)})"

    def short(self) -> str:
        """``kcp[16,YXC]``: the parameter values only, for narrow tables."""
        return self.family + (f"[{','.join(str(v) for _, v in self.params)}]" if self.params else "")


@dataclass(frozen=True)
class NoCAxes:
    bandwidth_words_per_cycle: tuple[float, ...]
    latency_cycles: tuple[int, ...]
    hops: tuple[int, ...]


@dataclass(frozen=True)
class Space:
    """A validated design space: value lists per hardware axis and dataflow choices per layer
    kind, plus the search settings.  ``base`` supplies every hardware field not searched."""

    name: str
    source: str
    base: Hardware
    num_pes: tuple[int, ...]
    simd_lanes: tuple[int, ...]
    l1_bytes_per_pe: tuple[int, ...]
    l2_bytes: tuple[int, ...]
    offchip_bw_words_per_cycle: tuple[float, ...]
    noc: tuple[NoCAxes, ...]
    conv_dataflows: tuple[DataflowChoice, ...]
    gemm_dataflows: tuple[DataflowChoice, ...]
    mode: str
    samples: int
    seed: int
    chunk_points: int
    per_layer_dataflow: bool
    constraints: tuple[str, ...]
    raw: Mapping[str, Any]                  # the document as read (for the checkpoint fingerprint)


# --- value forms ----------------------------------------------------------------------------------

def _fail(where: str, path: str, expected: str, value: object) -> AccelgenError:
    return AccelgenError(f"{path} must be {expected}, not {show(value)}", where=where)


class _Kind:
    """What one axis accepts: ``int`` (>= minimum) or ``bw`` (positive number or 'inf')."""

    def __init__(self, kind: str, minimum: int = 1) -> None:
        self.kind, self.minimum = kind, minimum

    @property
    def expected(self) -> str:
        if self.kind == "bw":
            return f"a number >= {MIN_BANDWIDTH:g} or 'inf'"
        return "a positive integer" if self.minimum == 1 else "a non-negative integer"

    def check(self, where: str, path: str, value: object) -> float | int:
        if self.kind == "bw":
            if isinstance(value, str) and value.strip().lower() in ("inf", ".inf"):
                return math.inf
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) \
                    or value < MIN_BANDWIDTH or (isinstance(value, int) and value > MAX_INT):
                raise _fail(where, path, self.expected, value)
            return int(value) if float(value).is_integer() and not math.isinf(value) else value
        if isinstance(value, bool) or not isinstance(value, int) or value < self.minimum or value > MAX_INT:
            raise _fail(where, path, self.expected, value)
        return value


_INT, _NONNEG, _BW = _Kind("int"), _Kind("int", 0), _Kind("bw")


def _values(where: str, path: str, spec: object, kind: _Kind) -> tuple[Any, ...]:
    """A scalar, a list, ``{pow2: [lo, hi]}`` or ``{range: [start, stop, step]}``."""
    if isinstance(spec, Mapping):
        if len(spec) != 1 or next(iter(spec)) not in ("pow2", "range"):
            raise _fail(where, path, "a value, a list, {pow2: [lo, hi]} or {range: [start, stop, step]}", spec)
        form, args = next(iter(spec.items()))
        sub = f"{path}.{form}"
        want = 2 if form == "pow2" else 3
        if not isinstance(args, list) or len(args) != want:
            raise _fail(where, sub, f"a list of {want} numbers", args)
        if form == "pow2":
            lo, hi = (_power_of_two(where, f"{sub}[{i}]", a) for i, a in enumerate(args))
            if lo > hi:
                raise AccelgenError(f"{sub} goes from {lo} down to {hi}; expected [lo, hi] with lo <= hi",
                                    where=where)
            values = [1 << e for e in range(lo.bit_length() - 1, hi.bit_length())]
        else:
            start, stop, step = (_number(where, f"{sub}[{i}]", a) for i, a in enumerate(args))
            if step <= 0 or stop < start:
                raise AccelgenError(f"{sub} must have start <= stop and a positive step, not {show(args)}",
                                    where=where)
            count = int((stop - start) // step) + 1
            if count > 1_000_000:
                raise _fail(where, sub, "at most 1000000 values", args)
            values = [start + i * step for i in range(count)]
        return tuple(kind.check(where, f"{sub}", v) for v in values)
    items = spec if isinstance(spec, list) else [spec]
    if not items:
        raise _fail(where, path, "a non-empty list", spec)
    out = tuple(kind.check(where, f"{path}[{i}]" if isinstance(spec, list) else path, v)
                for i, v in enumerate(items))
    if len(set(out)) != len(out):
        raise AccelgenError(f"{path} lists a value twice: {show(spec)}", where=where)
    return out


def _power_of_two(where: str, path: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value & (value - 1) \
            or value > MAX_INT:
        raise _fail(where, path, "a power of two", value)
    return value


def _number(where: str, path: str, value: object) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(where, path, "a finite number", value)
    return value


def _keys(where: str, path: str, mapping: object, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(mapping, Mapping):
        raise _fail(where, path or "the top level", f"a mapping of {', '.join(allowed)}", mapping)
    for key in mapping:
        if key not in allowed:
            inside = f" in {path}" if path else ""
            raise AccelgenError(f"unknown field {show(key)}{inside} (allowed: {', '.join(allowed)})", where=where)
    return mapping


# --- the document -----------------------------------------------------------------------------

def space_from_dict(doc: object, where: str = "<space>") -> Space:
    """Validate a parsed space document and fill its defaults."""
    doc = _keys(where, "", doc, _TOP)
    name = doc.get("name", Path(where).stem or "space")
    if not isinstance(name, str) or not name.strip():
        raise _fail(where, "name", "a non-empty string", name)
    base_spec = doc.get("base", "small")
    if not isinstance(base_spec, str) or not base_spec:
        raise _fail(where, "base", f"a built-in hardware name ({', '.join(BUILTIN_HARDWARE)}) or a hardware file",
                    base_spec)
    if base_spec in BUILTIN_HARDWARE:
        base = builtin_hardware(base_spec)
    else:
        path = Path(base_spec)
        if not path.is_absolute():
            path = Path(where).parent / path
        base = load_hardware(path)
    hw = _keys(where, "hardware", doc.get("hardware", {}), _HW)

    def axis(key: str, kind: _Kind, default: Any) -> tuple[Any, ...]:
        return _values(where, f"hardware.{key}", hw[key], kind) if key in hw else (default,)

    noc_spec = hw.get("noc")
    if noc_spec is None:
        levels = tuple(NoCAxes((lvl.bandwidth_words_per_cycle,), (lvl.latency_cycles,), (lvl.hops,))
                       for lvl in base.noc)
    else:
        if not isinstance(noc_spec, list) or not noc_spec:
            raise _fail(where, "hardware.noc", "a non-empty list of {bandwidth_words_per_cycle, latency_cycles, hops}",
                        noc_spec)
        levels = tuple(_noc_level(where, f"hardware.noc[{i}]", spec, base.noc[min(i, len(base.noc) - 1)])
                       for i, spec in enumerate(noc_spec))
    conv, gemm = _dataflows(where, doc.get("dataflows"))
    search = _keys(where, "search", doc.get("search", {}), _SEARCH)
    mode = search.get("mode", "exhaustive")
    if mode not in SEARCH_MODES:
        raise _fail(where, "search.mode", f"one of {', '.join(SEARCH_MODES)}", mode)
    samples = search.get("samples", 100_000)
    seed = search.get("seed", 0)
    chunk = search.get("chunk_points", 65_536)
    for key, value, low in (("samples", samples, 1), ("seed", seed, 0), ("chunk_points", chunk, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low or value > MAX_INT:
            raise _fail(where, f"search.{key}", "a positive integer" if low else "a non-negative integer", value)
    per_layer = search.get("per_layer_dataflow", False)
    if not isinstance(per_layer, bool):
        raise _fail(where, "search.per_layer_dataflow", "true or false", per_layer)
    constraints = doc.get("constraints", [])
    if not isinstance(constraints, list) or not all(isinstance(c, str) for c in constraints):
        raise _fail(where, "constraints", "a list of strings such as 'area_mm2 <= 2'", constraints)
    return Space(
        name=name.strip(), source=where, base=base,
        num_pes=axis("num_pes", _INT, base.num_pes),
        simd_lanes=axis("simd_lanes", _INT, base.simd_lanes),
        l1_bytes_per_pe=axis("l1_bytes_per_pe", _INT, base.l1_bytes_per_pe),
        l2_bytes=axis("l2_bytes", _INT, base.l2_bytes),
        offchip_bw_words_per_cycle=axis("offchip_bw_words_per_cycle", _BW, base.offchip_bw_words_per_cycle),
        noc=levels, conv_dataflows=conv, gemm_dataflows=gemm, mode=mode, samples=samples, seed=seed,
        chunk_points=chunk, per_layer_dataflow=per_layer, constraints=tuple(constraints), raw=doc)


def _noc_level(where: str, path: str, spec: object, default: Any) -> NoCAxes:
    spec = _keys(where, path, spec, _NOC)

    def axis(key: str, kind: _Kind, value: Any) -> tuple[Any, ...]:
        return _values(where, f"{path}.{key}", spec[key], kind) if key in spec else (value,)

    return NoCAxes(axis("bandwidth_words_per_cycle", _BW, default.bandwidth_words_per_cycle),
                   axis("latency_cycles", _NONNEG, default.latency_cycles), axis("hops", _INT, default.hops))


def _dataflows(where: str, spec: object) -> tuple[tuple[DataflowChoice, ...], tuple[DataflowChoice, ...]]:
    """Every family's choices: the product of its parameters' values (families in file order)."""
    if spec is None:
        spec = {name: {} for name in LIBRARY}
    spec = _keys(where, "dataflows", spec, tuple(LIBRARY))
    if not spec:
        raise _fail(where, "dataflows", f"a mapping of library families ({', '.join(LIBRARY)})", spec)
    out: dict[str, list[DataflowChoice]] = {"conv2d": [], "gemm": []}
    for family, params in spec.items():
        template = LIBRARY[family]
        path = f"dataflows.{family}"
        params = _keys(where, path, {} if params is None else params, (*template.defaults, "order"))
        names, values = [], []
        for param, value in params.items():
            names.append(param)
            if param == "order":
                items = value if isinstance(value, list) else [value]
                for i, item in enumerate(items):
                    sub = f"{path}.order[{i}]" if isinstance(value, list) else f"{path}.order"
                    parse_order(item, template.layer_kind, where=f"{where}: {sub}")
                if len(set(items)) != len(items):
                    raise AccelgenError(f"{path}.order lists a value twice: {show(value)}", where=where)
                values.append(tuple(items))
            else:
                values.append(_values(where, f"{path}.{param}", value, _INT))
        for combo in itertools.product(*values):
            out[template.layer_kind].append(DataflowChoice(family, tuple(zip(names, combo))))
    return tuple(out["conv2d"]), tuple(out["gemm"])


def load_space(path: str | os.PathLike[str]) -> Space:
    """Read and validate a space YAML file."""
    where = os.fspath(path)
    data = load_yaml(read_text(path, "a design-space file"), where, empty="a mapping with 'hardware' and 'dataflows'")
    return space_from_dict(data, where)

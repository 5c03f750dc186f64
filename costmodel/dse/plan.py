"""A search plan: a space, a model, objectives and constraints, and the enumeration of the space.

Every design point has a flat index in a mixed-radix enumeration of the axes, outermost first:
the PE count, the dataflow choice of the convolutions and of the GEMMs (absent when every layer
picks its own best dataflow, or when the model has no layer of that kind), then the timing axes
(SIMD lanes; bandwidth, latency and hops of each NoC level), then the buffers and off-chip
bandwidth.  Points that share the outer axes share the step model's structure; points that share
the timing axes too share their cycles.  Nothing is materialised: a chunk of flat indices is
decoded with integer arithmetic.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..base import AccelgenError
from ..fpga import FPGA_METRICS, FPGA_TARGETS, find_part, load_model
from ..hardware.hardware import Hardware, NoCLevel
from ..hwgen_preset.structure import check_layer
from ..workload.layers import GEMM, Layer, Model
from .space import DataflowChoice, Space

__all__ = ["Plan", "Constraint", "OBJECTIVES", "METRICS", "parse_objectives", "parse_constraint", "make_plan",
           "part_constraints"]

#: Objective names on the command line -> the metric minimised (the FPGA figures of
#: :mod:`costmodel.fpga`'s model: ``luts``, ``ffs``, ``dsps``, ``brams``).
OBJECTIVES = {"runtime": "runtime_cycles", "energy": "energy_pj", "edp": "edp_pj_cycles", "area": "area_mm2",
              "power": "power_mw", **{name: name for name in FPGA_METRICS}}
#: Every metric a constraint may bound, with its unit (for tables and plot axes).
METRICS = {
    "runtime_cycles": "cycles", "runtime_us": "µs", "energy_pj": "pJ", "edp_pj_cycles": "pJ·cycles",
    "area_mm2": "mm²", "power_mw": "mW", "num_pes": "PEs", "simd_lanes": "lanes",
    "l1_bytes_per_pe": "B", "l2_bytes": "B", "noc_bw_words_per_cycle": "words/cycle",
    "offchip_bw_words_per_cycle": "words/cycle", **FPGA_METRICS,
}
_OPS: dict[str, Callable[[Any, Any], Any]] = {"<=": operator.le, ">=": operator.ge, "<": operator.lt,
                                              ">": operator.gt}
_CONSTRAINT = re.compile(r"^\s*([a-z0-9_]+)\s*(<=|>=|<|>)\s*([-+0-9.eE]+|inf)\s*$")


@dataclass(frozen=True)
class Constraint:
    metric: str
    op: str
    bound: float

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.bound:g}"

    def holds(self, values: np.ndarray) -> np.ndarray:
        return _OPS[self.op](values, self.bound)


def parse_objectives(text: str, where: str = "--objectives") -> tuple[str, ...]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not 1 <= len(names) <= 3:
        raise AccelgenError(f"expected one to three objectives separated by commas, not {text!r}", where=where)
    metrics = []
    for name in names:
        metric = OBJECTIVES.get(name, name if name in OBJECTIVES.values() else None)
        if metric is None:
            raise AccelgenError(f"unknown objective {name!r}; expected some of {', '.join(OBJECTIVES)}", where=where)
        if metric in metrics:
            raise AccelgenError(f"objective {name!r} is given twice", where=where)
        metrics.append(metric)
    return tuple(metrics)


def parse_constraint(text: str, where: str = "--constraint") -> Constraint:
    match = _CONSTRAINT.match(text)
    if match is None:
        raise AccelgenError(f"expected METRIC<=VALUE (or >=, <, >), e.g. area_mm2<=2, not {text!r}", where=where)
    metric, op, value = match.groups()
    if metric not in METRICS:
        raise AccelgenError(f"unknown metric {metric!r} in {text!r}; expected one of {', '.join(METRICS)}",
                            where=where)
    try:
        bound = float(value)
    except ValueError:
        raise AccelgenError(f"{value!r} in {text!r} is not a number", where=where) from None
    if math.isnan(bound):
        raise AccelgenError(f"{value!r} in {text!r} is not a number", where=where)
    return Constraint(metric, op, bound)


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Plan:
    """What a search needs, picklable (workers and Ray tasks rebuild their caches from it)."""

    space: Space
    model: Model
    objectives: tuple[str, ...]
    constraints: tuple[Constraint, ...]
    preset: str
    per_layer: bool
    axes: tuple[Axis, ...]
    structural: int                 # the first `structural` axes fix the step model's structure
    timing: int                     # the next `timing` axes fix the cycles
    conv_axis: int | None           # index of the conv / GEMM dataflow axes, if enumerated
    gemm_axis: int | None
    fpga_target: str = "ecp5"       # the FPGA model of the metrics luts, ffs, dsps, brams

    @property
    def accelerators(self) -> int:
        """How many accelerators a point is built as: one per layer kind of the model (convolution,
        GEMM), as ``accelgen emit --design`` and ``accelgen flow`` generate it."""
        return max(1, len(_kinds(self.model.layers)))

    @property
    def uses_fpga(self) -> bool:
        """Whether an objective or a constraint is an FPGA figure."""
        return any(m in FPGA_METRICS for m in (*self.objectives, *(c.metric for c in self.constraints)))

    @property
    def size(self) -> int:
        return math.prod(len(a.values) for a in self.axes)

    @property
    def total_points(self) -> int:
        """Points the search visits: the whole space, or the samples of a random search."""
        return self.space.samples if self.space.mode == "random" else self.size

    def radices(self) -> list[int]:
        return [len(a.values) for a in self.axes]

    def strides(self) -> list[int]:
        out, stride = [], 1
        for radix in reversed(self.radices()):
            out.append(stride)
            stride *= radix
        return out[::-1]

    def decode(self, flat: np.ndarray) -> list[np.ndarray]:
        """Each axis' value index for every flat index."""
        return [(flat // s) % r for s, r in zip(self.strides(), self.radices())]

    def point_axes(self, flat: int) -> dict[str, Any]:
        """One point's value on every axis."""
        index = [int(i[0]) for i in self.decode(np.array([flat], dtype=np.int64))]
        return {a.name: a.values[i] for a, i in zip(self.axes, index)}

    def choices(self, kind: str) -> tuple[DataflowChoice, ...]:
        return self.space.gemm_dataflows if kind == "gemm" else self.space.conv_dataflows

    def hardware(self, flat: int) -> Hardware:
        """The hardware of one point: the base with every searched field set."""
        v = self.point_axes(flat)
        levels = tuple(NoCLevel(v[f"noc[{i}].bandwidth_words_per_cycle"], v[f"noc[{i}].latency_cycles"],
                                v[f"noc[{i}].hops"]) for i in range(len(self.space.noc)))
        from dataclasses import replace
        return replace(self.space.base, name=f"{self.space.name}-{flat}", num_pes=v["num_pes"],
                       simd_lanes=v["simd_lanes"], l1_bytes_per_pe=v["l1_bytes_per_pe"], l2_bytes=v["l2_bytes"],
                       offchip_bw_words_per_cycle=v["offchip_bw_words_per_cycle"], noc=levels)

    def point_dataflows(self, flat: int) -> dict[str, DataflowChoice]:
        """The shared dataflow choice of each layer kind at a point (not in per-layer mode)."""
        v = self.point_axes(flat)
        return {kind: v[f"{kind}_dataflow"] for kind in ("conv2d", "gemm") if f"{kind}_dataflow" in v}

    def fingerprint(self) -> str:
        """Identifies the search (not its budget): a checkpoint resumes only the same one."""
        doc = {"space": _jsonable(self.space.raw), "model": [(l.name, l.describe()) for l in self.model.layers],
               "objectives": self.objectives, "constraints": [str(c) for c in self.constraints],
               "preset": self.preset, "per_layer": self.per_layer, "mode": self.space.mode,
               "samples": self.space.samples, "seed": self.space.seed, "chunk": self.space.chunk_points}
        if self.uses_fpga:
            doc["fpga_target"] = self.fpga_target
        return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value if isinstance(value, (int, str, bool, type(None))) else repr(value)


def _kinds(layers: tuple[Layer, ...]) -> set[str]:
    return {"gemm" if isinstance(layer, GEMM) else "conv2d" for layer in layers}


def make_plan(space: Space, model: Model, objectives: tuple[str, ...], constraints: tuple[Constraint, ...],
              preset: str, per_layer: bool | None = None, fpga_target: str = "ecp5") -> Plan:
    per_layer = space.per_layer_dataflow if per_layer is None else per_layer
    if fpga_target not in FPGA_TARGETS:
        raise AccelgenError(f"unknown FPGA target {fpga_target!r}; expected one of {', '.join(FPGA_TARGETS)}",
                            where="--fpga-target")
    if preset == "hwgen":
        for layer in model.layers:
            check_layer(layer)      # refuses, once and with its reason, a layer no generated design runs
    kinds = _kinds(model.layers)
    for kind, label in (("conv2d", "convolution"), ("gemm", "GEMM")):
        if kind in kinds and not (space.gemm_dataflows if kind == "gemm" else space.conv_dataflows):
            families = "nmk" if kind == "gemm" else "kcp, yrp, yxp, xp or cp"
            raise AccelgenError(f"dataflows has no {label} family but {model.name} has {label} layers; "
                                f"expected one of {families}", where=space.source)
    axes = [Axis("num_pes", space.num_pes)]
    conv_axis = gemm_axis = None
    if not per_layer:
        if "conv2d" in kinds:
            conv_axis = len(axes)
            axes.append(Axis("conv2d_dataflow", space.conv_dataflows))
        if "gemm" in kinds:
            gemm_axis = len(axes)
            axes.append(Axis("gemm_dataflow", space.gemm_dataflows))
    structural = len(axes)
    axes.append(Axis("simd_lanes", space.simd_lanes))
    for i, level in enumerate(space.noc):
        axes += [Axis(f"noc[{i}].bandwidth_words_per_cycle", level.bandwidth_words_per_cycle),
                 Axis(f"noc[{i}].latency_cycles", level.latency_cycles), Axis(f"noc[{i}].hops", level.hops)]
    timing = len(axes) - structural
    axes += [Axis("l1_bytes_per_pe", space.l1_bytes_per_pe), Axis("l2_bytes", space.l2_bytes),
             Axis("offchip_bw_words_per_cycle", space.offchip_bw_words_per_cycle)]
    plan = Plan(space, model, objectives, constraints, preset, per_layer, tuple(axes), structural, timing,
                conv_axis, gemm_axis, fpga_target)
    if plan.uses_fpga:
        load_model(fpga_target)     # a target with no fitted model is refused here, not in a worker
    if plan.size >= 2**62:
        raise AccelgenError(f"the space has {plan.size:.3g} points; at most 2**62 can be enumerated",
                            where=space.source)
    return plan


def part_constraints(name: str) -> tuple[Constraint, ...]:
    """The constraints that a design fits FPGA part ``name`` (:data:`costmodel.fpga.PARTS`):
    ``luts``, ``ffs``, ``dsps`` and ``brams`` at most what it holds."""
    return tuple(Constraint(metric, "<=", float(limit)) for metric, limit in find_part(name).limits().items())

"""Evaluating chunks of design points: runtime, energy, area and feasibility per point.

A preset plugs in as an evaluator: :class:`VectorEvaluator` for ``maestro`` (structure once per
distinct layer x dataflow x PE count, cycles vectorised over the points), :class:`~.hwgen_eval.HwgenEvaluator`
for ``hwgen`` (each layer once per distinct combination of what the preset reads), and
:class:`ScalarEvaluator` for any preset of :data:`costmodel.analysis.PRESETS` — it calls
:func:`~costmodel.analysis.analyze_layer` point by point (slow, exact by definition), and is what
the vectorised one is tested against.  Both give, per point, the numbers ``analyze_model`` gives
for that hardware and those dataflows: runtime = sum of the layers' cycles, energy = the layers'
totals added in layer order, area of the hardware, feasible = every layer fits.

With ``per_layer`` each layer takes, among the space's dataflows of its kind, the one that fits
and minimises the first of runtime / energy / EDP among the objectives (ties: the first listed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

from ..analysis import analyze_layer, buffer_bytes, energy_terms, layer_structure
from ..base import AccelgenError
from ..dataflow.library import library_dataflow
from ..fpga import FPGA_METRICS, estimate_arrays
from ..hardware.hardware import Hardware
from ..maestro.timing import Timing
from ..workload.layers import GEMM, Layer
from .plan import Plan

__all__ = ["Metrics", "Evaluator", "VectorEvaluator", "ScalarEvaluator", "metric", "area_of", "kind_of"]


@dataclass
class Metrics:
    """Per point of a chunk (in the order given)."""

    flat: np.ndarray
    valid: np.ndarray            # every layer's dataflow applies
    feasible: np.ndarray         # valid and every layer fits (L1, L2, off-chip bandwidth)
    runtime_cycles: np.ndarray   # int64
    energy_pj: np.ndarray        # float64
    area_mm2: np.ndarray         # float64


class Evaluator(Protocol):
    def evaluate(self, flat: np.ndarray) -> Metrics: ...

    def layer_choices(self, flat: int) -> list[int] | None:
        """Per layer, the index of the dataflow chosen (per-layer mode), else None."""


def _criterion(plan: Plan) -> str:
    return next((m for m in plan.objectives if m in ("runtime_cycles", "energy_pj", "edp_pj_cycles")),
                "runtime_cycles")


def area_of(plan: Plan, idx: list[np.ndarray]) -> np.ndarray:
    """``Hardware.area_mm2`` over arrays, in its order of operations (bit-identical)."""
    a = plan.space.base.area
    col = {axis.name: np.asarray(axis.values)[i] for axis, i in zip(plan.axes, idx)
           if axis.name in ("num_pes", "simd_lanes", "l1_bytes_per_pe", "l2_bytes")}
    pe_um2 = a.mac_um2 * col["simd_lanes"] + col["l1_bytes_per_pe"] * a.l1_um2_per_byte + a.noc_um2_per_pe
    return (col["num_pes"] * pe_um2 + col["l2_bytes"] * a.l2_um2_per_byte + a.controller_um2) / 1e6


@dataclass
class _LayerEval:
    """One layer under one dataflow on one PE count: its structure and hardware-free figures."""

    parts: tuple[tuple[Callable[[Timing], list[np.ndarray]], int], ...]   # per part: runtimes, repeat
    l1_bytes: int
    l2_bytes: int
    energy_base: float           # mac + l1 + l2, added in analyze_layer's order
    noc_words: int               # every repeat's: times hops x noc_pj is the NoC energy
    noc_pj: float
    dram_pj: float
    dram_words: int

    def runtime_cycles(self, timing: Timing) -> np.ndarray | None:
        """The layer's cycles at every timing point (its parts run one after another), or None
        where a part maps no work onto the array."""
        total = None
        for runtimes, repeat in self.parts:
            cycles = runtimes(timing)[-1].astype(np.int64) * repeat
            if np.any(cycles <= 0):
                return None
            total = cycles if total is None else total + cycles
        return total


class VectorEvaluator:
    """The ``maestro`` preset over arrays of points."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.base = plan.space.base
        unique: dict[tuple[str, str], int] = {}
        self.layer_of: list[int] = []             # model layer -> its distinct shape
        self.shapes: list[Layer] = []
        for layer in plan.model.layers:
            key = (type(layer).__name__, layer.describe())
            if key not in unique:
                unique[key] = len(self.shapes)
                self.shapes.append(layer)
            self.layer_of.append(unique[key])
        self._cache: dict[tuple[int, int, int], _LayerEval | None] = {}
        self.criterion = _criterion(plan)

    def _layer(self, shape: int, choice: int, num_pes: int) -> _LayerEval | None:
        key = (shape, choice, num_pes)
        if key in self._cache:
            return self._cache[key]
        layer = self.shapes[shape]
        spec = self.plan.choices(kind_of(layer))[choice]
        hw = self.base
        try:
            df = library_dataflow(spec.family, layer, num_pes, **dict(spec.params))
            s = layer_structure(layer, df, num_pes, multicast=hw.multicast, spatial_reduction=hw.spatial_reduction)
        except AccelgenError:
            self._cache[key] = None
            return None
        l1, l2 = buffer_bytes(s, hw)
        terms, noc_pj = energy_terms(s, hw)
        dram = s.l2_writes["input"] + s.l2_writes["weight"] + s.l2_reads["output"]
        out = _LayerEval(tuple((p.compiled.runtimes, p.repeat) for p in s.parts), l1, l2,
                         terms["mac"] + terms["l1"] + terms["l2"], s.noc_words, noc_pj, terms["dram"], dram)
        self._cache[key] = out
        return out

    def evaluate(self, flat: np.ndarray) -> Metrics:
        return self._evaluate(np.asarray(flat, dtype=np.int64))[0]

    def layer_choices(self, flat: int) -> list[int] | None:
        if not self.plan.per_layer:
            return None
        return self._evaluate(np.array([flat], dtype=np.int64), choices=True)[1]

    def _evaluate(self, flat: np.ndarray, choices: bool = False) -> tuple[Metrics, list[int] | None]:
        plan = self.plan
        order = np.argsort(flat, kind="stable")
        sorted_flat = flat[order]
        idx = plan.decode(sorted_flat)
        n = len(flat)
        runtime = np.zeros(n, dtype=np.int64)
        energy = np.zeros(n, dtype=np.float64)
        valid = np.zeros(n, dtype=bool)
        feasible = np.zeros(n, dtype=bool)
        strides = plan.strides()
        inner = strides[plan.structural - 1]
        group = sorted_flat // inner
        starts = [0, *(np.flatnonzero(np.diff(group)) + 1).tolist(), n]
        picked: list[int] | None = None
        for a, b in zip(starts[:-1], starts[1:]):
            if a == b:
                continue
            sl = slice(a, b)
            picked = self._group(sorted_flat[sl], [i[sl] for i in idx], runtime[sl], energy[sl], valid[sl],
                                 feasible[sl], choices)
        area = area_of(plan, idx)
        inverse = np.empty_like(order)
        inverse[order] = np.arange(n)
        metrics = Metrics(flat, valid[inverse], feasible[inverse], runtime[inverse], energy[inverse], area[inverse])
        return metrics, picked

    def _timing(self, idx: list[np.ndarray], first: np.ndarray) -> tuple[Timing, np.ndarray]:
        """The timing of the distinct timing-axis combinations (``first``: where each starts)."""
        plan = self.plan
        s = plan.structural
        at = [i[first] for i in idx[s:s + plan.timing]]
        bw_values, bw_idx, heads = [], [], []
        hops0 = None
        for level in range(len(plan.space.noc)):
            axes = plan.axes[s + 1 + 3 * level: s + 4 + 3 * level]
            latency = np.asarray(axes[1].values, dtype=np.int64)[at[2 + 3 * level]]
            hops = np.asarray(axes[2].values, dtype=np.int64)[at[3 + 3 * level]]
            bw_values.append(axes[0].values)
            bw_idx.append(at[1 + 3 * level])
            heads.append(hops * latency - 1)
            if hops0 is None:
                hops0 = hops
        assert hops0 is not None
        timing = Timing(len(first), plan.axes[s].values, at[0], tuple(bw_values), tuple(bw_idx), tuple(heads))
        return timing, hops0

    def _group(self, flat: np.ndarray, idx: list[np.ndarray], runtime: np.ndarray, energy: np.ndarray,
               valid: np.ndarray, feasible: np.ndarray, want_choices: bool) -> list[int] | None:
        plan = self.plan
        num_pes = plan.space.num_pes[int(idx[0][0])]
        timing_key = flat // plan.strides()[plan.structural + plan.timing - 1]
        change = np.empty(len(flat), dtype=bool)
        change[0] = True
        np.not_equal(timing_key[1:], timing_key[:-1], out=change[1:])
        first = np.flatnonzero(change)
        inv = np.cumsum(change) - 1
        timing, hops0 = self._timing(idx, first)
        rest = plan.structural + plan.timing
        l1 = np.asarray(plan.axes[rest].values, dtype=np.int64)[idx[rest]]
        l2 = np.asarray(plan.axes[rest + 1].values, dtype=np.int64)[idx[rest + 1]]
        offchip = np.asarray(plan.axes[rest + 2].values, dtype=np.float64)[idx[rest + 2]]
        if not plan.per_layer:
            return self._shared(num_pes, idx, timing, hops0, inv, l1, l2, offchip, runtime, energy, valid, feasible)
        per_shape: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None] = {}
        picked: list[int] = []
        for shape in self.layer_of:
            if shape not in per_shape:
                per_shape[shape] = self._shape(shape, num_pes, idx, timing, hops0, inv, l1, l2, offchip)
            found = per_shape[shape]
            if found is None:
                return None
            rt, e, _, choice = found
            runtime += rt
            energy += e
            if want_choices:
                picked.append(int(choice[0]))
        valid[:] = True
        ok = np.ones(len(flat), dtype=bool)
        for found in per_shape.values():
            assert found is not None
            ok &= found[2]
        feasible[:] = ok
        return picked if want_choices else None

    def _shared(self, num_pes: int, idx: list[np.ndarray], timing: Timing, hops0: np.ndarray, inv: np.ndarray,
                l1: np.ndarray, l2: np.ndarray, offchip: np.ndarray, runtime: np.ndarray, energy: np.ndarray,
                valid: np.ndarray, feasible: np.ndarray) -> None:
        """One dataflow per layer kind: the model's sums are formed over the distinct timing
        combinations (layer order kept, so the float sums are analyze_model's), then gathered."""
        plan = self.plan
        per_shape: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        need = np.zeros(timing.n, dtype=np.float64)      # the largest off-chip words/cycle of a layer
        l1_need = l2_need = 0
        for shape in dict.fromkeys(self.layer_of):
            axis = plan.gemm_axis if kind_of(self.shapes[shape]) == "gemm" else plan.conv_axis
            assert axis is not None
            ev = self._layer(shape, int(idx[axis][0]), num_pes)
            if ev is None:
                return
            rt_u = ev.runtime_cycles(timing)
            if rt_u is None:
                return
            per_shape[shape] = (rt_u, (ev.energy_base + (ev.noc_words * hops0) * ev.noc_pj) + ev.dram_pj)
            np.maximum(need, ev.dram_words / rt_u, out=need)
            l1_need, l2_need = max(l1_need, ev.l1_bytes), max(l2_need, ev.l2_bytes)
        total_rt = np.zeros(timing.n, dtype=np.int64)
        total_e = np.zeros(timing.n, dtype=np.float64)
        for shape in self.layer_of:
            rt_u, e_u = per_shape[shape]
            total_rt += rt_u
            total_e += e_u
        runtime[:] = total_rt[inv]
        energy[:] = total_e[inv]
        valid[:] = True
        feasible[:] = (l1_need <= l1) & (l2_need <= l2) & ~(need[inv] > offchip)

    def _shape(self, shape: int, num_pes: int, idx: list[np.ndarray], timing: Timing, hops0: np.ndarray,
               inv: np.ndarray, l1: np.ndarray, l2: np.ndarray, offchip: np.ndarray):
        """Runtime, energy, fit and dataflow choice of one distinct layer at every point."""
        plan = self.plan
        kind = kind_of(self.shapes[shape])
        if plan.per_layer:
            candidates = list(range(len(plan.choices(kind))))
        else:
            axis = plan.gemm_axis if kind == "gemm" else plan.conv_axis
            assert axis is not None
            candidates = [int(idx[axis][0])]
        best = None
        for choice in candidates:
            ev = self._layer(shape, choice, num_pes)
            if ev is None:
                continue
            rt_u = ev.runtime_cycles(timing)
            if rt_u is None:
                continue
            e_u = (ev.energy_base + (ev.noc_words * hops0) * ev.noc_pj) + ev.dram_pj
            need = ev.dram_words / rt_u
            rt, e = rt_u[inv], e_u[inv]
            fits = (ev.l1_bytes <= l1) & (ev.l2_bytes <= l2) & ~(need[inv] > offchip)
            if not plan.per_layer:
                return rt, e, fits, np.full(len(inv), choice)
            score = {"runtime_cycles": rt.astype(np.float64), "energy_pj": e, "edp_pj_cycles": e * rt}[self.criterion]
            score = np.where(fits, score, np.inf)
            if best is None:
                best = [rt, e, fits, np.full(len(inv), choice), score]
                continue
            better = score < best[4]
            for slot, value in enumerate((rt, e, fits, choice, score)):
                best[slot] = np.where(better, value, best[slot])
        if best is None:
            return None
        return best[0], best[1], best[2], best[3]


def kind_of(layer: Layer) -> str:
    return "gemm" if isinstance(layer, GEMM) else "conv2d"


class ScalarEvaluator:
    """Any preset, one point and one layer at a time through ``analyze_layer``."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.criterion = _criterion(plan)

    def evaluate(self, flat: np.ndarray) -> Metrics:
        flat = np.asarray(flat, dtype=np.int64)
        rows = [self._point(int(f))[0] for f in flat]
        return Metrics(flat, np.array([r[0] for r in rows], dtype=bool), np.array([r[1] for r in rows], dtype=bool),
                       np.array([r[2] for r in rows], dtype=np.int64), np.array([r[3] for r in rows], dtype=np.float64),
                       np.array([r[4] for r in rows], dtype=np.float64))

    def layer_choices(self, flat: int) -> list[int] | None:
        return self._point(flat)[1] if self.plan.per_layer else None

    def _point(self, flat: int) -> tuple[tuple[bool, bool, int, float, float], list[int]]:
        plan = self.plan
        hw = plan.hardware(flat)
        shared = plan.point_dataflows(flat)
        runtime, energy, fits, picked = 0, 0.0, True, []
        for layer in plan.model.layers:
            kind = kind_of(layer)
            options = list(range(len(plan.choices(kind)))) if plan.per_layer else \
                [plan.choices(kind).index(shared[kind])]
            best: tuple[float, Any, int] | None = None
            for choice in options:
                result = self._analyze(layer, choice, hw)
                if result is None:
                    continue
                if not plan.per_layer:
                    best = (0.0, result, choice)
                    break
                if not result.feasible:
                    continue
                score = {"runtime_cycles": float(result.runtime_cycles), "energy_pj": result.energy_pj["total"],
                         "edp_pj_cycles": result.energy_pj["total"] * result.runtime_cycles}[self.criterion]
                if best is None or score < best[0]:
                    best = (score, result, choice)
            if best is None:
                if plan.per_layer and any(self._analyze(layer, c, hw) is not None for c in options):
                    fits = False        # valid, but no dataflow fits: record the first valid one
                    best = next((0.0, r, c) for c in options if (r := self._analyze(layer, c, hw)) is not None)
                else:
                    return (False, False, 0, 0.0, 0.0), []
            result = best[1]
            runtime += result.runtime_cycles
            energy = energy + result.energy_pj["total"]
            fits = fits and result.feasible
            picked.append(best[2])
        return (True, fits, runtime, energy, hw.area_mm2()), picked

    def _analyze(self, layer: Layer, choice: int, hw: Hardware):
        spec = self.plan.choices(kind_of(layer))[choice]
        try:
            df = library_dataflow(spec.family, layer, hw.num_pes, **dict(spec.params))
            return analyze_layer(layer, df, hw, self.plan.preset)
        except AccelgenError:
            return None


def metric(plan: Plan, m: Metrics, name: str) -> np.ndarray:
    """One metric per point: an objective, a hardware parameter or an FPGA figure of
    :mod:`costmodel.fpga`'s model on ``plan.fpga_target`` (for constraints and tables)."""
    clock = plan.space.base.clock_mhz
    if name in ("runtime_cycles", "energy_pj", "area_mm2"):
        return getattr(m, name)
    with np.errstate(divide="ignore", invalid="ignore"):
        if name == "edp_pj_cycles":
            return m.energy_pj * m.runtime_cycles
        if name == "runtime_us":
            return m.runtime_cycles / clock
        if name == "power_mw":
            return m.energy_pj * clock / m.runtime_cycles / 1000.0
    idx = plan.decode(m.flat)
    by_name = {a.name: (a, i) for a, i in zip(plan.axes, idx)}

    def column(axis_name: str, dtype: type) -> np.ndarray:
        axis, i = by_name[axis_name]
        return np.asarray(axis.values, dtype=dtype)[i]

    if name in FPGA_METRICS:
        # One accelerator per layer kind of the model, each of the point's parameters and of its
        # kind's dataflow family (the generated design's buses and L2 banks are the top NoC
        # level's width): the sum of the two.  Per-layer dataflows leave an accelerator's family
        # to its first layer's choice, which is not seen here: the largest of the families of
        # its kind that the generator builds bounds it.
        from ..fpga import FAMILIES
        sizes = (column("num_pes", np.int64), column("simd_lanes", np.int64),
                 column("noc[0].bandwidth_words_per_cycle", np.float64), column("l2_bytes", np.int64))
        total = np.zeros(len(m.flat), dtype=np.float64)
        for kind in ("conv2d", "gemm"):
            if kind not in {kind_of(layer) for layer in plan.model.layers}:
                continue
            families = [c.family for c in plan.choices(kind)]
            axis = plan.conv_axis if kind == "conv2d" else plan.gemm_axis
            if axis is not None:
                figure = estimate_arrays(plan.fpga_target, families, idx[axis], *sizes)[name]
            else:
                built = [j for j, f in enumerate(families) if f in FAMILIES] or [0]
                figure = np.max([estimate_arrays(plan.fpga_target, families, np.full(len(m.flat), j), *sizes)[name]
                                 for j in built], axis=0)
            total = total + figure
        return total
    if name == "noc_bw_words_per_cycle":
        levels = [np.asarray(by_name[f"noc[{k}].bandwidth_words_per_cycle"][0].values, dtype=np.float64)[
            by_name[f"noc[{k}].bandwidth_words_per_cycle"][1]] for k in range(len(plan.space.noc))]
        return np.max(np.stack(levels), axis=0)
    axis, i = by_name[name]
    return np.asarray(axis.values, dtype=np.float64)[i]

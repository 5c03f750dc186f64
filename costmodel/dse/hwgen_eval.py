"""The ``hwgen`` preset over chunks of design points (:class:`HwgenEvaluator`): each layer
analysed once per distinct combination of what the preset reads of a point, the model's sums
formed as the scalar path forms them, L2's check and the area vectorised."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import AccelgenError
from ..dataflow.library import library_dataflow
from ..hardware.hardware import Hardware
from ..hwgen_preset.preset import hwgen_figures, l1_candidates
from ..hwgen_preset.rules import l1_bytes
from ..workload.layers import Layer
from .evaluate import Metrics, ScalarEvaluator, area_of, kind_of
from .plan import Plan

__all__ = ["HwgenEvaluator"]


#: The axes the ``hwgen`` preset reads of a point, L2 aside (:class:`HwgenEvaluator`), in this order.
_HWGEN_READS = ("num_pes", "conv2d_dataflow", "gemm_dataflow", "simd_lanes", "noc[0].bandwidth_words_per_cycle",
                "noc[0].hops", "l1_bytes_per_pe")
#: Designs (a few kB each) an :class:`HwgenEvaluator` keeps: a search revisits one mostly within a chunk.
_MAX_DESIGNS = 4096


class HwgenEvaluator:
    """The ``hwgen`` preset over arrays of points (shared dataflows; the per-layer mode runs
    :class:`ScalarEvaluator`).  The preset reads of a point only :data:`_HWGEN_READS` and L2 (not
    the NoC latency, nor the inner levels, nor the off-chip bandwidth); L1 only picks the
    structure (a sliding input where it fits, :func:`~costmodel.hwgen_preset.preset.l1_candidates`)
    or refuses it, and L2 decides only feasibility (each layer's regions against ``l2_split``).
    So each layer's design (its structure for every L1) is made once per PE count, dataflow,
    lanes and NoC width, each structure the points' L1 picks is analysed once per NoC hops (its
    schedule in closed form, :mod:`costmodel.hwgen_preset.closed`), the model's sums are formed
    in layer order (the scalar path's float sums), and L2's check and the area are vectorised."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self._keys = [i for i, axis in enumerate(plan.axes) if axis.name in _HWGEN_READS]
        self._dataflows: dict[tuple, Any] = {}       # (shape, choice, PEs) -> the dataflow, or None if refused
        self._designs: dict[tuple, Any] = {}         # (shape, choice, PEs, width, lanes) -> dataflow, structures, L1s
        self._cache: dict[tuple, Any] = {}           # (the same, structure, hops) -> runtime, energy, L2 regions
        self._hardwares: dict[tuple, Hardware] = {}  # (PEs, lanes, width, hops) -> a point's hardware
        self._scalar = ScalarEvaluator(plan)        # (per-layer mode)
        unique: dict[tuple[str, str], int] = {}
        self.shapes: list[Layer] = []                # the distinct layers, and per model layer its own and its kind
        self._layers: list[int] = []
        self._runs: list[tuple[int, int, str]] = []  # (first, end, kind) of each run of layers of one kind
        for i, layer in enumerate(plan.model.layers):
            shape = unique.setdefault((type(layer).__name__, layer.describe()), len(unique))
            if shape == len(self.shapes):
                self.shapes.append(layer)
            self._layers.append(shape)
            if self._runs and self._runs[-1][2] == kind_of(layer):
                self._runs[-1] = (self._runs[-1][0], i + 1, kind_of(layer))
            else:
                self._runs.append((i, i + 1, kind_of(layer)))
        self._prefixes: dict[tuple, Any] = {}        # (run, choices so far, the rest of a combination) -> its sums

    def layer_choices(self, flat: int) -> list[int] | None:
        return self._scalar.layer_choices(flat)

    def evaluate(self, flat: np.ndarray) -> Metrics:
        if self.plan.per_layer:
            return self._scalar.evaluate(flat)
        plan = self.plan
        flat = np.asarray(flat, dtype=np.int64)
        idx = plan.decode(flat)
        key = np.zeros(len(flat), dtype=np.int64)
        for axis in self._keys:
            key = key * len(plan.axes[axis].values) + idx[axis]
        unique, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        n = len(unique)
        valid = np.zeros(n, dtype=bool)
        runtime = np.zeros(n, dtype=np.int64)
        energy = np.zeros(n, dtype=np.float64)
        need = np.zeros((n, 3), dtype=np.int64)          # the largest input, weight, output L2 regions
        for u, row in enumerate(zip(*self._columns(idx, first))):
            found = self._combination(row, int(flat[first[u]]))
            if found is not None:
                valid[u], (runtime[u], energy[u], need[u]) = True, found
        at = [a.name for a in plan.axes].index("l2_bytes")
        l2 = np.asarray(plan.axes[at].values, dtype=np.int64)[idx[at]]
        need_p = need[inverse]
        fits = (need_p[:, 0] <= l2 // 4) & (need_p[:, 1] <= l2 // 4) & (need_p[:, 2] <= l2 // 8)   # (l2_split)
        ok = valid[inverse]
        return Metrics(flat, ok, ok & fits, np.where(ok, runtime[inverse], 0), np.where(ok, energy[inverse], 0.0),
                       area_of(plan, idx))

    def _columns(self, idx: list[np.ndarray], first: np.ndarray) -> list[list]:
        """Per axis of :data:`_HWGEN_READS`, its value at the points ``first`` (a dataflow axis:
        the index of the first equal choice, as ScalarEvaluator finds it; an absent axis: None)."""
        at = {self.plan.axes[a].name: a for a in self._keys}
        out = []
        for name in _HWGEN_READS:
            values = self.plan.axes[at[name]].values if name in at else ()
            if name.endswith("_dataflow"):
                values = tuple(values.index(v) for v in values)
            out.append([values[i] for i in idx[at[name]][first].tolist()] if name in at else [None] * len(first))
        return out

    def _combination(self, row: tuple, flat: int) -> tuple[int, float, tuple[int, int, int]] | None:
        """Runtime, energy and the largest L2 regions of the model at one combination ``row`` of
        the axes the preset reads (``flat``: a point of it), or None if a layer is refused.

        The sums run in layer order (energy is a float sum, as the scalar path forms it) and are
        kept at the end of each run of layers of one kind, keyed by the choices of the kinds
        seen so far: combinations that differ only in a later kind's dataflow (ResNet-50's
        convolutions before its one GEMM) share the sums up to it."""
        rest = (row[0], *row[3:])
        chosen = {"conv2d": None, "gemm": None}
        state: tuple | None = (0, 0.0, (0, 0, 0))
        for r, (start, end, kind) in enumerate(self._runs):
            chosen[kind] = choice = row[2] if kind == "gemm" else row[1]
            key = (r, chosen["conv2d"], chosen["gemm"], rest)
            if key in self._prefixes:
                state = self._prefixes[key]
            else:
                runtime, energy, need = state          # type: ignore[misc]
                for shape in self._layers[start:end]:
                    found = self._layer(shape, choice, row, flat)
                    if found is None:
                        state = None
                        break
                    runtime += found[0]
                    energy = energy + found[1]
                    need = tuple(map(max, need, found[2]))
                else:
                    state = (runtime, energy, need)
                if len(self._prefixes) >= _MAX_DESIGNS:
                    self._prefixes.clear()
                self._prefixes[key] = state
            if state is None:
                return None
        return state

    def _layer(self, shape: int, choice: int, row: tuple, flat: int):
        """One layer's runtime, energy and L2 regions at the point ``flat`` (of the combination
        ``row``) with dataflow ``choice``, or None if the preset refuses it: the structure the
        point's L1 picks among its design's."""
        num_pes, _, _, lanes, width, hops, l1 = row
        design_key = (shape, choice, num_pes, width, lanes)
        design = self._designs.get(design_key)
        if design is None:
            if len(self._designs) >= _MAX_DESIGNS:
                self._designs.clear()
            design = self._designs[design_key] = self._design(shape, choice, self._hardware(row, flat))
        if not design:
            return None
        dataflow, structures, l1_bytes = design
        pick = next((i for i, need in enumerate(l1_bytes) if need <= l1), None)
        if pick is None:
            return None                             # (no structure fits: hwgen_structure refuses the L1)
        key = (*design_key, pick, hops)
        if key not in self._cache:
            try:
                found = hwgen_figures(self.shapes[shape], dataflow, self._hardware(row, flat), structures[pick])
            except AccelgenError:
                self._cache[key] = None
            else:
                sizes = found.sizes
                self._cache[key] = (found.runtime_cycles, found.energy["total"],
                                    (sizes["input"], sizes["weight"], sizes["output"]))
        return self._cache[key]

    def _design(self, shape: int, choice: int, hw: Hardware) -> tuple:
        """The layer's dataflow and design on ``hw``: its structure for every L1
        (:func:`~costmodel.hwgen_preset.preset.l1_candidates`) and the L1 bytes each needs;
        empty if the dataflow or the design is refused whatever the L1."""
        layer = self.shapes[shape]
        key = (shape, choice, hw.num_pes)
        if key not in self._dataflows:          # (it depends on the PEs alone of the hardware)
            spec = self.plan.choices(kind_of(layer))[choice]
            try:
                self._dataflows[key] = library_dataflow(spec.family, layer, hw.num_pes, **dict(spec.params))
            except AccelgenError:
                self._dataflows[key] = None
        df = self._dataflows[key]
        if df is None:
            return ()
        try:
            structures = tuple(l1_candidates(df, layer, hw, fit=[layer]))
            return df, structures, tuple(l1_bytes(s.l1_words()) for s in structures)
        except AccelgenError:
            return ()

    def _hardware(self, row: tuple, flat: int) -> Hardware:
        """The hardware of the point ``flat`` (of the combination ``row``), made once per PE count,
        lanes, NoC width and hops: the preset reads nothing else of it but L1, the design's choice."""
        key = (row[0], *row[3:6])
        if key not in self._hardwares:
            self._hardwares[key] = self.plan.hardware(flat)
        return self._hardwares[key]

"""The RTL test matrix, read from ``cases.yaml``: every dataflow x its layer shapes x the
arrays, plus random shapes, plus the efficiency cases of ``make validate-rtl``.

One case set serves three models: numpy (numerics), the ``hwgen`` preset (cycles) and the RTL
on Icarus and Verilator (both)."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from costmodel.base import AccelgenError, load_yaml, read_text
from costmodel.dataflow.spec import DataflowSpec, dataflow_from_spec, resolve_dataflow
from costmodel.hardware import Hardware, NoCLevel, builtin_hardware
from costmodel.hwgen_preset.closed import hwgen_cycles
from costmodel.hwgen_preset.preset import hwgen_structure, l2_split
from costmodel.hwgen_preset.structure import tiles_of
from costmodel.workload import Layer, parse_layer_spec

__all__ = ["CASES_FILE", "ARRAYS", "CASES", "DATAFLOWS", "EFFICIENCY", "RANDOM_PER_CASE", "array", "dataflow_spec",
           "layers", "random_layers", "run_case"]

CASES_FILE = Path(__file__).resolve().parent / "cases.yaml"


@lru_cache(maxsize=1)
def _cases() -> dict[str, Any]:
    data = load_yaml(read_text(CASES_FILE, "an RTL case table"), str(CASES_FILE), empty="the RTL case table")
    shapes = data["shapes"]
    for name, entry in data["dataflows"].items():
        for key in ("shapes", "random"):
            if entry[key] not in shapes:
                raise AccelgenError(f"dataflows.{name}.{key} is {entry[key]!r}; expected one of "
                                    f"{', '.join(shapes)}", where=str(CASES_FILE))
    return data


ARRAYS: tuple[str, ...] = tuple(_cases()["matrix_arrays"])
DATAFLOWS: dict[str, tuple[str, ...]] = {
    name: tuple(_cases()["shapes"][entry["shapes"]]) for name, entry in _cases()["dataflows"].items()}
#: (dataflow, array, layer, simulators) of the efficiency table.
EFFICIENCY: tuple[tuple[str, str, str, tuple[str, ...]], ...] = tuple(
    (e["dataflow"], e["array"], e["layer"], tuple(e.get("sims", ("icarus", "verilator"))))
    for e in _cases()["efficiency"])
RANDOM_PER_CASE: int = int(_cases()["random_shapes_per_case"])
#: (dataflow, array) of the matrix: every dataflow on ``matrix_arrays``, or on its own ``arrays``;
#: random shapes are added on the first array of each dataflow.
CASES: tuple[tuple[str, str], ...] = tuple(
    (name, arr) for name, entry in _cases()["dataflows"].items() for arr in entry.get("arrays", ARRAYS))


def random_array(dataflow: str) -> str:
    """The array a dataflow's random shapes run on: the first of its arrays."""
    return next(arr for name, arr in CASES if name == dataflow)


def dataflow_spec(name: str) -> DataflowSpec:
    """A library name, or a built-in dataflow file by name."""
    return dataflow_from_spec(name)


def array(name: str) -> Hardware:
    """An array of ``cases.yaml``: its built-in base with the listed fields replaced."""
    spec = dict(_cases()["arrays"][name])
    hw = builtin_hardware(spec.pop("base"))
    if "noc" in spec:
        spec["noc"] = tuple(NoCLevel(**level) for level in spec["noc"])
    return replace(hw, name=name, **spec)


def layers(dataflow: str) -> list[Layer]:
    return [parse_layer_spec(spec, name=f"L{i}") for i, spec in enumerate(DATAFLOWS[dataflow])]


def random_layers(dataflow: str, seed: int, count: int) -> list[Layer]:
    """Random shapes, every dimension drawn on its own: sizes, filter rows and columns (up to
    3x3; ``conv3x3`` dataflows keep 3x3), the stride of each axis (up to 3) and the padding of each
    side (up to 2)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    family = _cases()["dataflows"][dataflow]["random"]
    out = []
    while len(out) < count:
        if family == "gemm":
            spec = f"gemm:M={rng.integers(1, 10)},N={rng.integers(1, 10)},K={rng.integers(1, 20)}"
        else:
            r, s = (3, 3) if family == "conv3x3" else (int(v) for v in rng.integers(1, 4, size=2))
            sy, sx = (int(v) for v in rng.integers(1, 4, size=2))
            top, bottom, left, right = (int(v) for v in rng.integers(0, 3, size=4))
            y, x = (int(v) for v in rng.integers(1, 9, size=2))
            if y + top + bottom < r or x + left + right < s:
                continue                                   # no output pixel: draw again
            spec = (f"conv2d:K={rng.integers(1, 8)},C={rng.integers(1, 12)},Y={y},X={x},R={r},S={s},"
                    f"stride_y={sy},stride_x={sx},pad_top={top},pad_bottom={bottom},pad_left={left},"
                    f"pad_right={right}")
        out.append(parse_layer_spec(spec, name=f"R{len(out)}"))
    return out


def run_case(dataflow: str, array_name: str, sim: str, extra=(), reuse: bool = False,
             abort_midway: bool = False) -> list[dict]:
    """Run the dataflow's layers (and ``extra`` ones) on one generated design in ``sim``.
    Returns one row per layer: shape, predicted and measured cycles, bit-exactness, utilisation.
    With ``abort_midway``, each layer is first started and the design reset halfway through
    its run."""
    from .driver import make_job, random_operands
    from .runner import run_jobs, timeout_cycles

    hw = array(array_name)
    todo = list(layers(dataflow)) + list(extra)
    spec = dataflow_spec(dataflow)
    structure = hwgen_structure(resolve_dataflow(spec, todo[0], hw), todo[0], hw, fit=todo)
    l2 = l2_split(hw)
    jobs, meta = [], {}
    for i, layer in enumerate(todo):
        df = resolve_dataflow(spec, layer, hw)
        tiles = tiles_of(structure, df, layer)
        a, b = random_operands(layer, seed=i)
        job = make_job(structure, tiles, layer, a, b, l2)
        predicted = hwgen_cycles(structure, tiles)
        jobs.append((layer.name, job, timeout_cycles(predicted)))
        meta[layer.name] = (layer, predicted, job.expected)
    rows = []
    abort = {name: predicted // 2 for name, (_, predicted, _) in meta.items()} if abort_midway else None
    for result in run_jobs(structure, l2, jobs, sim, reuse=reuse, abort_after=abort):
        layer, predicted, expected = meta[result["name"]]
        measured = result["measured_cycles"]
        rows.append({"dataflow": dataflow, "array": array_name, "pes": hw.num_pes,
                     "noc_words_per_cycle": structure.noc_words_per_cycle, "sim": sim,
                     "layer": layer.describe(), "predicted_cycles": predicted, "measured_cycles": measured,
                     "difference": measured - predicted, "bit_exact": result["outputs"] == expected,
                     "irq_cycles": result.get("irq_cycles"), "streams": result.get("streams"),
                     "rtl_utilization": layer.macs / (hw.num_pes * hw.simd_lanes * measured) if measured > 0 else 0.0})
    return rows

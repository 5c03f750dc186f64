"""The RTL test matrix as data: every dataflow x its layer shapes x two array sizes.

One case set serves three models: numpy (numerics), the ``hwgen`` preset (cycles) and the RTL
on Icarus and Verilator (both).  Adding a shape or a dataflow is one line here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from costmodel.hardware import NoCLevel, builtin_hardware
from costmodel.workload_yaml import parse_layer_spec

CONV_LAYERS = (
    "conv2d:K=5,C=3,Y=6,X=7,R=3,S=3",                 # 3x3, nothing divides the tiles
    "conv2d:K=6,C=10,Y=4,X=4,R=1,S=1",                # 1x1
    "conv2d:K=3,C=5,Y=7,X=6,R=3,S=3,stride=2,pad=1",  # stride 2 with padding
    "conv2d:K=4,C=6,Y=6,X=5,R=1,S=1,stride=2",        # stride wider than the filter
)
GEMM_LAYERS = (
    "gemm:M=5,N=3,K=7",
    "gemm:M=4,N=8,K=16",
    "gemm:M=9,N=2,K=3",
    "gemm:M=1,N=5,K=11",
)
CONV3X3_LAYERS = (
    "conv2d:K=5,C=6,Y=6,X=9,R=3,S=3",
    "conv2d:K=3,C=5,Y=7,X=6,R=3,S=3,stride=2,pad=1",
    "conv2d:K=2,C=9,Y=5,X=5,R=3,S=3,pad=1",
    "conv2d:K=4,C=3,Y=8,X=7,R=3,S=3",
)
DATAFLOWS = {"kcp": CONV_LAYERS, "cp": CONV_LAYERS, "xp": CONV_LAYERS, "nmk": GEMM_LAYERS,
             # a directive file of kcp's shape with other tiles, loop order and cluster size
             "kcp_x2": CONV3X3_LAYERS}
_ROOT = Path(__file__).resolve().parents[1]


def dataflow_spec(name: str):
    """A library name, or a dataflow file of ``configs/dataflows/``."""
    from costmodel.dataflow_io import load_dataflow
    from costmodel.library import is_library_name
    return name if is_library_name(name) else load_dataflow(_ROOT / "configs" / "dataflows" / f"{name}.yaml")


def array(name: str):
    """The two array sizes of the matrix: ``tiny`` (8 PEs, a 4-word NoC) and a 4-PE array with a
    2-word NoC and 2 SIMD lanes per PE; L2 cut to what the shapes need so the simulators build
    quickly."""
    hw = builtin_hardware("tiny")
    if name == "tiny8":
        return replace(hw, name="tiny8", l2_bytes=4096)
    assert name == "tiny4"
    return replace(hw, name="tiny4", num_pes=4, simd_lanes=2, l2_bytes=4096, noc=(NoCLevel(2, 1),))


ARRAYS = ("tiny8", "tiny4")


def layers(dataflow: str):
    return [parse_layer_spec(spec, name=f"L{i}") for i, spec in enumerate(DATAFLOWS[dataflow])]


def random_layers(dataflow: str, seed: int, count: int):
    """Random shapes within the generated buffers (filters up to 3x3, stride up to 2)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        if dataflow == "nmk":
            spec = f"gemm:M={rng.integers(1, 10)},N={rng.integers(1, 10)},K={rng.integers(1, 20)}"
        else:
            r = 3 if dataflow == "kcp_x2" else int(rng.choice([1, 3]))
            stride = int(rng.integers(1, 3))
            pad = int(rng.integers(0, 2)) if r == 3 else 0
            y, x = (int(rng.integers(max(r, 2), 9)) for _ in range(2))
            spec = (f"conv2d:K={rng.integers(1, 8)},C={rng.integers(1, 12)},Y={y},X={x},R={r},S={r},"
                    f"stride={stride},pad={pad}")
        out.append(parse_layer_spec(spec, name=f"R{i}"))
    return out


def run_case(dataflow: str, array_name: str, sim: str, extra=()):
    """Run the dataflow's layers (and ``extra`` ones) on one generated design in ``sim``.
    Returns one row per layer: shape, predicted and measured cycles, bit-exactness, utilisation."""
    from costmodel.analysis import resolve_dataflow
    from costmodel.hwgen_model import hwgen_structure, l2_split
    from costmodel.hwgen_schedule import hwgen_cycles, tiles_of

    from .host import make_job, random_operands
    from .sim import run_jobs

    hw = array(array_name)
    todo = list(layers(dataflow)) + list(extra)
    spec = dataflow_spec(dataflow)
    structure = hwgen_structure(resolve_dataflow(spec, todo[0], hw), todo[0], hw)
    l2 = l2_split(hw)
    jobs, meta = [], {}
    for i, layer in enumerate(todo):
        df = resolve_dataflow(spec, layer, hw)
        tiles = tiles_of(structure, df, layer)
        a, b = random_operands(layer, seed=i)
        job = make_job(structure, tiles, layer, a, b, l2)
        predicted = hwgen_cycles(structure, tiles)
        jobs.append((layer.name, job, 2 * predicted + 1000))
        meta[layer.name] = (layer, predicted, job.expected)
    rows = []
    for result in run_jobs(structure, l2, jobs, sim):
        layer, predicted, expected = meta[result["name"]]
        measured = result["measured_cycles"]
        rows.append({"dataflow": dataflow, "array": array_name, "pes": hw.num_pes,
                     "noc_words_per_cycle": structure.noc_words_per_cycle, "sim": sim,
                     "layer": layer.describe(), "predicted_cycles": predicted, "measured_cycles": measured,
                     "difference": measured - predicted, "bit_exact": result["outputs"] == expected,
                     "rtl_utilization": layer.macs / (hw.num_pes * hw.simd_lanes * measured) if measured > 0 else 0.0})
    return rows

"""What a user types for a workload (``--model``), to a model: the one resolver.

A zoo name (``resnet50``), a built-in workload file by name (``tiny_cnn``, shipped in
``configs/workloads``), an inline layer (``conv2d:K=8,C=4,Y=6,X=6,R=3,S=3``), or a file: workload
YAML, a MAESTRO ``.m`` model (which also gives each layer's Dataflow text) or an ONNX network
(which also reports the nodes it did not model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..base import CONFIGS, AccelgenError
from .layers import Model
from .maestro_files import load_maestro_file
from .onnx_graph import parse_input_shape
from .onnx_import import ImportReport, load_onnx
from .yaml_io import LAYER_TYPES, load_workload_yaml, parse_layer_spec
from .zoo import ZOO, get_model

__all__ = ["WORKLOAD_SUFFIXES", "Workload", "builtin_workloads", "input_shapes_from_texts", "workload_from_spec"]

WORKLOAD_SUFFIXES = (".yaml", ".yml", ".m", ".onnx")
_BUILTIN = CONFIGS / "workloads"


def builtin_workloads() -> tuple[str, ...]:
    """Names of the workload files shipped with the package."""
    return tuple(sorted(p.stem for p in _BUILTIN.glob("*.yaml")))


@dataclass(frozen=True)
class Workload:
    """A model and where it came from; a MAESTRO ``.m`` file also gives each layer's Dataflow text,
    an ONNX file the report of the nodes that were not modelled."""

    model: Model
    source: str                                   # "zoo", "inline", "builtin:NAME" or the file's path
    layer_dataflows: tuple[str | None, ...] | None = None
    import_report: ImportReport | None = None


def input_shapes_from_texts(texts: Sequence[str], option: str = "--input-shape") -> dict[str, tuple[int, ...]]:
    """``["x=1,3,640,640", ...]`` -> ``{"x": (1, 3, 640, 640)}``; an input named twice is refused."""
    shapes: dict[str, tuple[int, ...]] = {}
    for text in texts:
        name, sizes = parse_input_shape(text, option)
        if name in shapes:
            raise AccelgenError(f"input {name!r} is given twice", where=option)
        shapes[name] = sizes
    return shapes


def workload_from_spec(spec: str, option: str = "--model",
                       input_shapes: Mapping[str, Sequence[int]] | None = None) -> Workload:
    """The model ``spec`` names; ``option`` names where it was given, for errors.  ``input_shapes``
    fixes an ONNX model's dynamic input sizes (``{"x": (1, 3, 640, 640)}``); it is refused for
    anything else."""
    if input_shapes and Path(spec).suffix.lower() != ".onnx":
        raise AccelgenError(f"--input-shape applies to ONNX models; {spec!r} is not an .onnx file", where=option)
    if spec in ZOO:
        return Workload(get_model(spec), "zoo")
    if spec.split(":", 1)[0].lower() in LAYER_TYPES and ":" in spec:
        return Workload(Model("layer", (parse_layer_spec(spec, name="layer"),)), "inline")
    suffix = Path(spec).suffix.lower()
    if suffix in (".yaml", ".yml"):
        return Workload(load_workload_yaml(spec), spec)
    if suffix == ".m":
        model, dataflows = load_maestro_file(spec)
        return Workload(model, spec, tuple(dataflows))
    if suffix == ".onnx":
        model, report = load_onnx(spec, input_shapes)
        return Workload(model, spec, import_report=report)
    if Path(spec).exists():
        raise AccelgenError("is not a workload file; expected a built-in model name or a file ending in "
                            f"{', '.join(WORKLOAD_SUFFIXES)}", where=spec)
    if spec in builtin_workloads():
        return Workload(load_workload_yaml(_BUILTIN / f"{spec}.yaml"), f"builtin:{spec}")
    raise AccelgenError(f"unknown model {spec!r}; built-in models: {', '.join((*ZOO, *builtin_workloads()))} "
                        "(or give a workload .yaml, a MAESTRO .m or an .onnx file)", where=option)

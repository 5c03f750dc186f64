"""accelgen's analytical cost model: workloads, dataflows, hardware, and the analysis.

    from costmodel import get_model, builtin_hardware, analyze_model
    result = analyze_model(get_model("resnet50"), builtin_hardware("small"), dataflow="kcp")
"""

from .analysis import PRESETS, LayerResult, ModelResult, analyze_layer, analyze_model, resolve_dataflow
from .base import AccelgenError
from .dataflow.directives import Cluster, Dataflow, SpatialMap, Sz, TemporalMap, parse_dataflow
from .dataflow.library import LIBRARY, default_dataflow, library_dataflow
from .hardware.hardware import Hardware, NoCLevel, builtin_hardware, hardware_from_dict, load_hardware
from .workload.layers import GEMM, Conv2D, Layer, Model
from .workload.onnx_import import ImportReport, SkippedOps, load_onnx
from .workload.yaml_io import load_workload_yaml, parse_layer_spec
from .workload.zoo import ZOO, get_model

__all__ = [
    "AccelgenError",
    "PRESETS", "LayerResult", "ModelResult", "analyze_layer", "analyze_model", "resolve_dataflow",
    "Cluster", "Dataflow", "SpatialMap", "Sz", "TemporalMap", "parse_dataflow",
    "Hardware", "NoCLevel", "builtin_hardware", "hardware_from_dict", "load_hardware",
    "LIBRARY", "default_dataflow", "library_dataflow",
    "ImportReport", "SkippedOps", "load_onnx",
    "GEMM", "Conv2D", "Layer", "Model", "load_workload_yaml", "parse_layer_spec",
    "ZOO", "get_model",
]

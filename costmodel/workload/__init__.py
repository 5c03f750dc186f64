"""Workloads: layers (:class:`Conv2D`, :class:`GEMM`) and models, the built-in zoo, and the
loaders of workload YAML, MAESTRO ``.m`` files and ONNX networks.

* :mod:`.layers` — the layer and model types
* :mod:`.problem` — how a layer becomes loop dimensions and tensors (both presets read it)
* :mod:`.zoo` — AlexNet, VGG16, ResNet-50, MobileNetV2, a BERT block
* :mod:`.yaml_io`, :mod:`.maestro_files`, :mod:`.onnx_import` — the file loaders
* :mod:`.spec` — one function from what a user types (``--model``) to a model
"""

from .layers import GEMM, Conv2D, Layer, Model
from .onnx_import import ImportReport, SkippedOps, load_onnx
from .spec import Workload, workload_from_spec
from .yaml_io import load_workload_yaml, parse_layer_spec
from .zoo import ZOO, get_model

__all__ = ["GEMM", "Conv2D", "Layer", "Model", "ImportReport", "SkippedOps", "load_onnx",
           "Workload", "workload_from_spec", "load_workload_yaml", "parse_layer_spec", "ZOO", "get_model"]

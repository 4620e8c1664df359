"""Models from outside: :func:`from_onnx` (ONNX, via the ``onnx`` package); a read graph
as plain data and back (:func:`graph_to_doc`, :func:`graph_from_doc`)."""
from __future__ import annotations

from .graph import ImportError_, OnnxLimits, graph_flops
from .graph_doc import graph_from_doc, graph_to_doc
from .onnx import from_onnx, graph_to_relax
from .onnx_reader import SUPPORTED_OPS, read_onnx

__all__ = ["from_onnx", "graph_to_relax", "read_onnx", "ImportError_", "OnnxLimits",
           "SUPPORTED_OPS", "graph_flops", "graph_to_doc", "graph_from_doc"]

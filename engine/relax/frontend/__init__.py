"""Models from outside: :func:`from_onnx` (ONNX, via the ``onnx`` package)."""
from __future__ import annotations

from .graph import ImportError_
from .onnx import from_onnx
from .onnx_reader import SUPPORTED_OPS, OnnxLimits

__all__ = ["from_onnx", "ImportError_", "OnnxLimits", "SUPPORTED_OPS"]

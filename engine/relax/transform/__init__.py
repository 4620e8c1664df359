"""Relax passes with TVM's names: ``BindParams`` (weights -> constants); :class:`Pass` and
:class:`Sequential` for writing and chaining passes."""
from .base import Pass, Sequential, TransformError
from .bind_params import BindParams

__all__ = ["Pass", "Sequential", "TransformError", "BindParams"]

"""``tvm.tirx`` (TVM 0.27; the course's ``tvm.tir``): the engine's IR classes under TVM's
names, ``const``, ``floordiv``/``floormod``, and the submodules ``expr``, ``stmt``,
``stmt_functor``, ``function``, ``buffer``, ``analysis``; ``IndexMap``."""
from __future__ import annotations

from engine.ir.buffer import Range
from engine.ir.expr import const

from . import analysis, buffer, expr, function, stmt, stmt_functor
from .buffer import Buffer, BufferRegion, decl_buffer, is_buffer_var
from .ops import floordiv, floormod
from .expr import *  # noqa: F403 - the expression classes
from .expr import __all__ as _expr_names
from .function import PrimFunc, TensorIntrin
from .index_map import IndexMap
from .stmt import *  # noqa: F403 - the statement classes
from .stmt import __all__ as _stmt_names
from .stmt_functor import post_order_visit, pre_order_visit

__all__ = ["const", "floordiv", "floormod", "Range", "Buffer", "BufferRegion", "decl_buffer",
           "is_buffer_var",
           "PrimFunc", "TensorIntrin", "IndexMap", "analysis", "post_order_visit", "pre_order_visit", "expr", "stmt",
           "stmt_functor", "function", "buffer", *_expr_names, *_stmt_names]

"""``tvm.tirx.function``: ``PrimFunc`` and ``TensorIntrin`` (``register(name, desc, impl)``,
``get(name)``: the engine's registry of tensor intrinsics).

``PrimFunc`` is the engine's :class:`engine.ir.function.PrimFunc` under TVM's constructor,
``PrimFunc(params, body, ret_type=None, buffer_map=None, attrs=None)``: a function of no
name of its own (TVM's module names it; here ``main``), whose ``body`` may be any statement
(TVM's tests build one around a loop nest to compare it). ``isinstance(f, PrimFunc)`` holds
for every engine PrimFunc."""
from __future__ import annotations

from typing import Any

from engine.ir.function import PrimFunc as _EnginePrimFunc
from engine.schedule.tensor_intrin import TensorIntrin

__all__ = ["PrimFunc", "TensorIntrin"]


class _PrimFuncType(type):
    """The engine's PrimFunc seen through TVM's constructor (see the module docstring)."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _EnginePrimFunc)

    def __subclasscheck__(cls, sub: type) -> bool:
        return isinstance(sub, type) and issubclass(sub, _EnginePrimFunc)

    def __call__(cls, params, body, ret_type: Any = None, buffer_map: Any = None,
                 attrs: Any = None, span: Any = None) -> _EnginePrimFunc:
        params = [buffer_map[p] if buffer_map and p in buffer_map else p for p in params]
        pairs = tuple(dict(attrs).items()) if attrs else ()
        name = dict(pairs).get("global_symbol", "main")
        return _EnginePrimFunc(str(name), tuple(params), body, pairs)


class PrimFunc(metaclass=_PrimFuncType):
    """TVM's ``tvm.tirx.PrimFunc(params, body, ...)``: builds the engine's PrimFunc."""

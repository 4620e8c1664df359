"""``BindParams``: weights become constants of the module.

Before (the course's ``MyModuleMixture``)::

    @R.function
    def main(x: Tensor((1, 784), "float32"), w0: Tensor((128, 784), "float32"), ...):
        with R.dataflow():
            lv0 = R.call_tir(linear0, (x, w0, b0), (1, 128), dtype="float32")
            ...

After ``relax.transform.BindParams("main", {"w0": w0, "b0": b0, ...})(mod)``::

    @R.function
    def main(x: Tensor((1, 784), "float32")) -> Tensor((1, 10), "float32"):
        with R.dataflow():
            lv0 = R.call_tir(linear0, (x, meta[relay.Constant][0], meta[relay.Constant][1]), ...)
            ...

The parameters are matched by name; each array must have the parameter's shape and dtype.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.ir.function import IRModule

from .. import expr as X
from ..functor import substitute
from ..struct_info import TensorStructInfo
from .base import Pass, TransformError


def _array(v: Any) -> np.ndarray:
    if isinstance(v, X.Constant):
        return v.data.array
    numpy = getattr(v, "numpy", None)
    if not isinstance(v, np.ndarray) and callable(numpy):
        v = numpy()
    return np.asarray(v)


class BindParams(Pass):
    """Bind the parameters of ``func_name`` named in ``params`` ({name: array}) as
    constants (TVM's ``relax.transform.BindParams``)."""

    name = "BindParams"

    def __init__(self, func_name: str, params: dict):
        if not isinstance(func_name, str):
            raise TransformError(f"BindParams needs the function's name, got {func_name!r}")
        if not isinstance(params, dict):
            raise TransformError("BindParams needs a dict {parameter name: array}")
        self.func_name = func_name
        self.params = dict(params)

    def transform_module(self, mod: IRModule) -> IRModule:
        if self.func_name not in mod:
            raise TransformError(f"BindParams: the module has no function "
                                 f"{self.func_name!r} (it has: {', '.join(mod.names())})")
        f = mod[self.func_name]
        if not isinstance(f, X.Function):
            raise TransformError(f"BindParams: {self.func_name} is not a Relax function")
        by_name = {p.name_hint: p for p in f.params}
        unknown = [k for k in self.params if k not in by_name]
        if unknown:
            raise TransformError(f"BindParams: {self.func_name} has no parameter "
                                 f"{', '.join(map(repr, unknown))} (its parameters: "
                                 f"{', '.join(by_name)})")
        mapping = {}
        for key, value in self.params.items():
            p = by_name[key]
            a = _array(value)
            si = p.struct_info
            if isinstance(si, TensorStructInfo):
                if a.dtype != np.dtype(si.dtype) or (si.shape is not None and
                                                     a.shape != si.shape):
                    raise TransformError(
                        f"BindParams: {key} is a {si.dtype} tensor of shape {si.shape} in "
                        f"{self.func_name}, but the array given is {a.dtype} {a.shape}")
            mapping[p] = value if isinstance(value, X.Constant) else X.const(a)
        body = substitute(f.body, mapping)
        params = tuple(p for p in f.params if p.name_hint not in self.params)
        return mod.with_function(self.func_name, f.replace(params=params, body=body))

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
A symbolic size of a bound parameter's shape (``w0: R.Tensor(("n", "m"), "float32")``, the
course's current ``MyModuleMixture``) takes the array's size, as TVM's ``BindParams`` does:
the size is replaced by that number everywhere in the function (``x: R.Tensor((1, "m"))``
becomes ``R.Tensor((1, 784))``), and two arrays giving one size two values are refused.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.ir import expr as E
from engine.ir.function import IRModule

from .. import expr as X
from ..functor import ExprMutator, substitute
from ..struct_info import TensorStructInfo, TupleStructInfo, shape_text
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
        sizes: dict = {}      # symbolic size (an int64 Var) -> the number an array gives it
        for key, value in self.params.items():
            p = by_name[key]
            a = _array(value)
            si = p.struct_info
            if isinstance(si, TensorStructInfo):
                self._match(key, si, a, sizes)
            mapping[p] = value if isinstance(value, X.Constant) else X.const(a)
        body = substitute(f.body, mapping)
        params = tuple(p for p in f.params if p.name_hint not in self.params)
        f = f.replace(params=params, body=body)
        if sizes:
            f = _BindSizes(sizes).visit_function_sizes(f)
        return mod.with_function(self.func_name, f)

    def _match(self, key: str, si: TensorStructInfo, a: np.ndarray, sizes: dict) -> None:
        if a.dtype != np.dtype(si.dtype) or (si.shape is not None and (
                len(a.shape) != len(si.shape) or any(
                    not isinstance(d, E.Var) and d != n for d, n in zip(si.shape, a.shape)))):
            shape = "?" if si.shape is None else shape_text(si.shape)
            raise TransformError(
                f"BindParams: {key} is a {si.dtype} tensor of shape {shape} in "
                f"{self.func_name}, but the array given is {a.dtype} {a.shape}")
        for d, n in zip(si.shape or (), a.shape):
            if isinstance(d, E.Var):
                if sizes.get(d, n) != n:
                    raise TransformError(
                        f"BindParams: {key} gives the size {d.name} the value {n}, but an "
                        f"earlier array gave it {sizes[d]}")
                sizes[d] = int(n)


def _sized(si: object, sizes: dict) -> object:
    """``si`` with the symbolic sizes in ``sizes`` replaced by their numbers (``si`` itself
    when it has none of them)."""
    if isinstance(si, TensorStructInfo) and si.shape is not None:
        if any(isinstance(d, E.Var) and d in sizes for d in si.shape):
            return si.replace(shape=tuple(sizes.get(d, d) if isinstance(d, E.Var) else d
                                          for d in si.shape))
    elif isinstance(si, TupleStructInfo):
        fields = tuple(_sized(f, sizes) for f in si.fields)
        if any(a is not b for a, b in zip(fields, si.fields)):
            return si.replace(fields=fields)
    return si


class _BindSizes(ExprMutator):
    """Symbolic sizes become numbers in a function: its parameters', bindings' and calls'
    struct infos (a variable whose struct info changes is a new variable, used everywhere
    the old one was)."""

    def __init__(self, sizes: dict):
        self.sizes = sizes
        self.vars: dict = {}

    def _var(self, v: X.Var) -> X.Var:
        si = _sized(v.struct_info, self.sizes)
        if si is v.struct_info:
            return v
        new = v.replace(struct_info=si)
        self.vars[id(v)] = new
        return new

    def visit_var(self, e: X.Var) -> X.Var:
        return self.vars.get(id(e), e)

    def visit_call(self, e: X.Call) -> X.Call:
        call = super().visit_call(e)
        sinfo_args = tuple(_sized(s, self.sizes) for s in call.sinfo_args)
        si = _sized(call.struct_info, self.sizes)
        if si is call.struct_info and all(a is b for a, b in zip(sinfo_args, call.sinfo_args)):
            return call
        return call.replace(sinfo_args=sinfo_args, struct_info=si)

    def visit_binding(self, b: X.VarBinding) -> X.VarBinding:
        value = self.visit(b.value)
        var = self._var(b.var)
        return b if value is b.value and var is b.var else X.VarBinding(var, value)

    def visit_function_sizes(self, f: X.Function) -> X.Function:
        params = tuple(self._var(p) for p in f.params)
        body = self.visit_seq(f.body)
        return f.replace(params=params, body=body,
                         ret_struct_info=_sized(f.ret_struct_info, self.sizes))

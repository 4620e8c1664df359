"""``LegalizeOps()``: every high-level Relax operator becomes a ``call_tir`` of a TensorIR
function made with :mod:`engine.te` and :mod:`engine.topi` (TVM's pass of that name).

Before::

    @R.function
    def main(x: R.Tensor((1, 784), "float32"), w0: R.Tensor((784, 128), "float32"), ...):
        with R.dataflow():
            lv0 = R.matmul(x, w0)
            lv1 = R.add(lv0, b0)
            lv2 = R.nn.relu(lv1)
            ...

After::

    @T.prim_func
    def matmul(A: T.Buffer((1, 784), "float32"), B: T.Buffer((784, 128), "float32"),
               T_matmul: T.Buffer((1, 128), "float32")):
        for ax0, ax1, k in T.grid(1, 128, 784):
            with T.block("T_matmul"): ...

    @R.function
    def main(...):
        with R.dataflow():
            lv0 = R.call_tir(matmul, (x, w0), out_sinfo=R.Tensor((1, 128), dtype="float32"))
            lv1 = R.call_tir(add, (lv0, b0), out_sinfo=R.Tensor((1, 128), dtype="float32"))
            lv2 = R.call_tir(relu, (lv1,), out_sinfo=R.Tensor((1, 128), dtype="float32"))

One PrimFunc per call, named after the operator (``add``, ``add1``, ... as TVM names them);
its parameters are the operator's tensor operands (``A``, ``B``, ...) then the output.
Operators without a TensorIR form are left for the virtual machine to run.
"""
from __future__ import annotations

from typing import Any, Callable

from engine import te, topi
from engine.ir.function import IRModule
from engine.topi.broadcast import compute_nd

from ..expr import Call, GlobalVar, Op, ShapeExpr, VarBinding, call_tir
from ..struct_info import TensorStructInfo
from .rewrite import ModulePass, fresh_name, map_bindings, relax_functions

__all__ = ["LegalizeOps", "LEGALIZE", "legalize_call"]


def _attrs(call: Call) -> dict[str, Any]:
    return dict(call.attrs)


def _conv2d(t: list, call: Call) -> te.Tensor:
    a = _attrs(call)
    if a.get("data_layout", "NCHW") != "NCHW" or a.get("kernel_layout", "OIHW") != "OIHW":
        raise topi.TopiError("conv2d: only NCHW data and OIHW weights have a TensorIR form")
    pad = a.get("padding", 0)
    pad = tuple(pad) if isinstance(pad, (list, tuple)) else pad
    return topi.conv2d_nchw(t[0], t[1], tuple(a.get("strides", (1, 1))), pad,
                            tuple(a.get("dilation", (1, 1))), int(a.get("groups", 1)))


def _ewise_fma(t: list, call: Call) -> te.Tensor:
    a, b, c = t
    if not tuple(a.shape) == tuple(b.shape) == tuple(c.shape):
        raise topi.TopiError(f"ewise_fma: the operands must have one shape, got {a.shape}, "
                             f"{b.shape} and {c.shape}")
    return compute_nd(tuple(a.shape), lambda *i: a[i] * b[i] + c[i], "T_ewise_fma")


def _reshape(t: list, call: Call) -> te.Tensor:
    shape = call.args[1]
    if not isinstance(shape, ShapeExpr):
        raise topi.TopiError("reshape: the new shape must be a constant shape such as (1, 784)")
    return topi.reshape(t[0], shape.values)


#: Relax operator -> (name of the PrimFunc, its te body from the operand tensors)
LEGALIZE: dict[str, tuple[str, Callable[[list, Call], te.Tensor]]] = {
    "relax.add": ("add", lambda t, c: topi.add(t[0], t[1])),
    "relax.subtract": ("subtract", lambda t, c: topi.subtract(t[0], t[1])),
    "relax.multiply": ("multiply", lambda t, c: topi.multiply(t[0], t[1])),
    "relax.divide": ("divide", lambda t, c: topi.divide(t[0], t[1])),
    "relax.matmul": ("matmul", lambda t, c: topi.matmul(t[0], t[1])),
    "relax.nn.relu": ("relu", lambda t, c: topi.relu(t[0])),
    "relax.nn.softmax": ("softmax", lambda t, c: topi.softmax(t[0], _attrs(c).get("axis", -1))),
    "relax.permute_dims": ("transpose",
                           lambda t, c: topi.permute_dims(t[0], _attrs(c).get("axes"))),
    "relax.reshape": ("reshape", _reshape),
    "relax.nn.conv2d": ("conv2d", _conv2d),
    "relax.ewise_fma": ("ewise_fma", _ewise_fma),
}

_PARAM_NAMES = "ABCDEFGH"


def legalize_call(call: Call, name: str):
    """The PrimFunc computing the high-level ``call`` and the tensor operands it takes."""
    fname, body = LEGALIZE[call.op.name]
    tensors = [a for a in call.args if not isinstance(a, ShapeExpr)]
    phs = []
    for i, arg in enumerate(tensors):
        si = arg.struct_info
        if not isinstance(si, TensorStructInfo) or si.shape is None:
            raise topi.TopiError(f"{call.op.name}: operand {i} is not a tensor of known shape")
        phs.append(te.placeholder(si.shape, si.dtype, name=_PARAM_NAMES[i]))
    out = body(phs, call)
    out_si = call.struct_info
    if isinstance(out_si, TensorStructInfo) and out_si.shape is not None and (
            tuple(out.shape) != tuple(out_si.shape) or out.dtype != out_si.dtype):
        raise topi.TopiError(f"{call.op.name}: the TensorIR form computes a {out.dtype} "
                             f"tensor of shape {out.shape}, the call expects "
                             f"{out_si.describe()}")
    return te.create_prim_func(phs + [out], name=name), tensors, fname


class LegalizeOps(ModulePass):
    """Lower every high-level operator call to ``R.call_tir`` of a new TensorIR function
    (see the module docstring)."""

    name = "LegalizeOps"

    def transform_module(self, mod: IRModule) -> IRModule:
        funcs = dict(mod.items())
        for fname, func in relax_functions(mod):
            def lower(binding: VarBinding) -> VarBinding:
                value = binding.value
                if not (isinstance(value, Call) and isinstance(value.op, Op)
                        and value.op.name in LEGALIZE):
                    return binding
                base = LEGALIZE[value.op.name][0]
                name = fresh_name(base, funcs)
                prim, tensors, _ = legalize_call(value, name)
                funcs[name] = prim
                return VarBinding(binding.var, call_tir(GlobalVar(name), tensors,
                                                        value.struct_info))
            funcs[fname] = map_bindings(func, lower)
        return IRModule(tuple(funcs.items()))


"""engine.te — TVM's tensor-expression frontend, producing TensorIR PrimFuncs.

The course's mm_relu, written with te::

    from engine import te
    A = te.placeholder((128, 128), "float32", name="A")
    B = te.placeholder((128, 128), "float32", name="B")
    k = te.reduce_axis((0, 128), "k")
    Y = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((128, 128), lambda i, j: te.max(Y[i, j], 0), name="C")
    func = te.create_prim_func([A, B, C], name="mm_relu")

``te.sum/max/min(expr, axis=...)`` are reductions; ``te.max(a, b)`` / ``te.min(a, b)``
with two expressions are element-wise (as in TVM); ``te.comm_reducer(fcombine,
fidentity)`` makes a reduction of one or several values (argmax: an index and a value, a
stage of two outputs).  Like TVM's te, this module
deliberately shadows the builtins ``sum``, ``max``, ``min``, ``abs``, ``round``, ``all`` and
``any``; use it as ``te.sum(...)``.  Intrinsics (``te.exp``, ``te.sqrt``,
...) build :class:`engine.ir.Call` nodes.
"""
from __future__ import annotations

from typing import Any

from engine.ir import expr as _E
from engine.ir.dtype import is_float as _is_float

from .create import create_prim_func
from .regions import access_region, infer_block_regions
from .tensor import (CommReducer, ComputeOp, PlaceholderOp, Reduce, ReduceAxis, TeError, Tensor,
                     _as_expr, comm_reducer, compute, identity_value, placeholder, reduce_axis,
                     reduction, var)

__all__ = [
    "placeholder", "compute", "reduce_axis", "sum", "max", "min", "comm_reducer", "CommReducer",
    "create_prim_func",
    "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "abs", "fabs", "floor",
    "ceil", "round", "trunc", "sin", "cos", "erf", "power", "if_then_else", "const", "cast",
    "max_value", "min_value", "all", "any", "Tensor", "ReduceAxis", "Reduce", "TeError", "ComputeOp",
    "PlaceholderOp", "infer_block_regions", "access_region", "identity_value", "var",
]


def sum(expr: Any, axis: Any = None, where: Any = None, init: Any = None) -> Reduce:  # noqa: A001
    """Sum reduction: ``te.sum(A[i, k] * B[k, j], axis=k)`` (axis: one axis or a list).

    ``init`` replaces the starting value 0 (e.g. a bias); ``where`` keeps only the
    iterations where the condition holds."""
    return reduction("sum", expr, axis, where, init)


def max(expr: Any, axis: Any = None, where: Any = None, init: Any = None) -> Any:  # noqa: A001
    """``te.max(expr, axis=k)``: max reduction (identity: the dtype's lowest value);
    ``te.max(a, b)``: element-wise maximum of two expressions (as in TVM, the second
    argument is a reduction axis only when it is a reduce axis or a list of them)."""
    return _minmax("max", _E.Max, expr, axis, where, init)


def min(expr: Any, axis: Any = None, where: Any = None, init: Any = None) -> Any:  # noqa: A001
    """``te.min(expr, axis=k)``: min reduction (identity: the dtype's highest value);
    ``te.min(a, b)``: element-wise minimum of two expressions."""
    return _minmax("min", _E.Min, expr, axis, where, init)


def _is_axis_arg(axis: Any) -> bool:
    if isinstance(axis, ReduceAxis):
        return True
    return (isinstance(axis, (list, tuple)) and len(axis) > 0
            and all(isinstance(a, ReduceAxis) for a in axis))


def _minmax(kind: str, cls: type, expr: Any, axis: Any, where: Any, init: Any) -> Any:
    if axis is None:
        raise TeError(f"te.{kind} needs either axis= (a reduction, e.g. te.{kind}(A[i, k], "
                      f"axis=k)) or a second value (element-wise, e.g. te.{kind}(x, 0))")
    if _is_axis_arg(axis):
        return reduction(kind, expr, axis, where, init)
    if where is not None or init is not None:
        raise TeError(f"te.{kind}: where= and init= only apply to reductions; the second "
                      "argument must then be a reduce axis (te.reduce_axis)")
    a, b = expr, axis
    if isinstance(a, (int, float)) and not isinstance(b, (int, float)):
        b = _as_expr(b, f"second argument of te.{kind}")
        a = _as_expr(a, f"first argument of te.{kind}", b.dtype)
    else:
        a = _as_expr(a, f"first argument of te.{kind}")
        b = _as_expr(b, f"second argument of te.{kind}", a.dtype)
    return _E.binary(cls, a, b)


def const(value: Any, dtype: str | None = None) -> _E.PrimExpr:
    """A constant: ``te.const(0.5, "float32")``; without a dtype, ints are int32 and
    floats float32 (as in TVM)."""
    try:
        return _E.const(value, dtype)
    except Exception as exc:  # noqa: BLE001 - re-raised with the te error type
        raise TeError(f"te.const({value!r}, {dtype!r}): {exc}") from None


def all(*conds: Any) -> _E.PrimExpr:  # noqa: A001
    """Logical and of all conditions (``tvm.tir.all``): ``te.all(i >= 1, i < n + 1)``."""
    return _fold_bool("all", _E.And, conds)


def any(*conds: Any) -> _E.PrimExpr:  # noqa: A001
    """Logical or of all conditions (``tvm.tir.any``)."""
    return _fold_bool("any", _E.Or, conds)


def _fold_bool(name: str, cls: type, conds: tuple) -> _E.PrimExpr:
    if len(conds) == 1 and isinstance(conds[0], (list, tuple)):
        conds = tuple(conds[0])
    if not conds:
        raise TeError(f"te.{name} needs at least one condition")
    exprs = [_as_expr(c, f"condition of te.{name}") for c in conds]
    out = exprs[0]
    for e in exprs[1:]:
        out = _E.binary(cls, out, e)
    return out


def max_value(dtype: str) -> _E.PrimExpr:
    """The largest value of ``dtype`` (finite for floats), like ``tvm.te.max_value``."""
    return identity_value("min", dtype)


def min_value(dtype: str) -> _E.PrimExpr:
    """The lowest value of ``dtype`` (finite for floats), like ``tvm.te.min_value``."""
    return identity_value("max", dtype)


def cast(value: Any, dtype: str) -> _E.PrimExpr:
    """Convert ``value`` to ``dtype`` (C semantics: float -> int truncates)."""
    return _as_expr(value, "argument of te.cast").astype(dtype)


def _float_arg(op: str, x: Any) -> _E.PrimExpr:
    e = _as_expr(x, f"argument of te.{op}")
    if not _is_float(e.dtype):
        e = e.astype("float32")
    return e


def _unary(op: str):
    def f(x: Any) -> _E.PrimExpr:
        e = _float_arg(op, x)
        return _E.Call(e.dtype, op, (e,))
    f.__name__ = op
    f.__doc__ = f"``T.{op}(x)`` element-wise (integers are converted to float32)."
    return f


exp = _unary("exp")
exp2 = _unary("exp2")
log = _unary("log")
log2 = _unary("log2")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
fabs = _unary("fabs")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")  # noqa: A001
trunc = _unary("trunc")
sin = _unary("sin")
cos = _unary("cos")
erf = _unary("erf")


def abs(x: Any) -> _E.PrimExpr:  # noqa: A001
    """Absolute value (integers stay integers)."""
    e = _as_expr(x, "argument of te.abs")
    return _E.Call(e.dtype, "abs", (e,))


def power(x: Any, y: Any) -> _E.PrimExpr:
    """``x ** y`` for floats."""
    a = _float_arg("power", x)
    b = _as_expr(y, "exponent of te.power", a.dtype)
    if b.dtype != a.dtype:
        b = b.astype(a.dtype)
    return _E.Call(a.dtype, "pow", (a, b))


def if_then_else(cond: Any, then_value: Any, else_value: Any) -> _E.PrimExpr:
    """``T.if_then_else(cond, a, b)``: ``a`` where cond holds, else ``b``; only the chosen
    value is evaluated (so it may guard an out-of-range read, as in padding)."""
    c = _as_expr(cond, "condition of te.if_then_else")
    if isinstance(then_value, (int, float)) and not isinstance(else_value, (int, float)):
        b = _as_expr(else_value, "else value of te.if_then_else")
        a = _as_expr(then_value, "then value of te.if_then_else", b.dtype)
    else:
        a = _as_expr(then_value, "then value of te.if_then_else")
        b = _as_expr(else_value, "else value of te.if_then_else", a.dtype)
    if a.dtype != b.dtype:
        a, b = _E._unify(a, b)
    if c.dtype != "bool":
        c = _E.binary(_E.NE, c, 0)
    return _E.Call(a.dtype, "if_then_else", (c, a, b))


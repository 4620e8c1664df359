"""Tensors, operations and reductions of the tensor-expression (te) frontend.

A :class:`Tensor` is either an input (:func:`placeholder`) or the result of a
:func:`compute` stage.  Indexing a tensor, ``A[i, k]``, builds an ordinary
:class:`engine.ir.BufferLoad` on the tensor's buffer, so the bodies of compute stages
are plain IR expressions.  :func:`create_prim_func` (in :mod:`engine.te.create`)
turns a set of tensors into a TensorIR :class:`~engine.ir.PrimFunc`.

Reductions (``te.sum``, ``te.max``, ``te.min`` with ``axis=``, and the reducers made by
:func:`comm_reducer`) return a :class:`Reduce`, which is only allowed as the *whole* body
of a compute stage — as in TVM. A reducer over several values (argmax: an index and a
value) returns one per value, and the stage has one output tensor per value.
"""
from __future__ import annotations

import inspect
import weakref
from typing import Any, Callable

import numpy as np

from engine.ir import expr as E
from engine.ir.buffer import Buffer, Range
from engine.ir.dtype import (DTypeError, check_dtype, element_of, is_bool, is_float, is_int,
                              lanes_of)
from engine.ir.functor import post_order_visit
from engine.ir.node import node

__all__ = ["TeError", "Tensor", "ReduceAxis", "Reduce", "CommReducer", "PlaceholderOp",
           "ComputeOp", "placeholder", "compute", "reduce_axis", "reduction", "comm_reducer",
           "identity_value"]


class TeError(ValueError):
    """A tensor expression that cannot be built (bad shape, misuse of a reduction, ...)."""


# buffer -> tensor, so that the inputs of a compute stage can be found from its body
_TENSOR_OF_BUFFER: "weakref.WeakKeyDictionary[Buffer, Tensor]" = weakref.WeakKeyDictionary()


def _as_expr(v: Any, what: str = "value", dtype_hint: str | None = None) -> E.PrimExpr:
    """Python number / Var / ReduceAxis / PrimExpr -> PrimExpr, with a clear error."""
    if isinstance(v, Reduce):
        raise TeError(
            f"a reduction (te.{v.combiner}) cannot be used inside another expression "
            f"(here as the {what}); make it the whole body of its own te.compute stage and "
            "use that tensor instead")
    if isinstance(v, Tensor):
        raise TeError(f"tensor {v.name!r} must be indexed (e.g. {v.name}[i, j]) "
                      f"before it can be used as the {what}")
    if isinstance(v, np.generic):
        v = v.item()
    try:
        return E.convert(v, dtype_hint)
    except TypeError:
        raise TeError(f"cannot use {v!r} ({type(v).__name__}) as the {what}; "
                      "expected a number or a tensor expression") from None


def _as_index(v: Any, tensor: str, dim: int) -> E.PrimExpr:
    if isinstance(v, float) or (isinstance(v, np.floating)):
        raise TeError(f"index {dim} of {tensor}[...] is the float {v!r}; indices must be integers")
    e = _as_expr(v, f"index {dim} of {tensor}[...]")
    if not is_int(e.dtype):
        raise TeError(f"index {dim} of {tensor}[...] has dtype {e.dtype}; indices must be integers")
    if lanes_of(e.dtype) != 1:
        raise TeError(f"index {dim} of {tensor}[...] must be a scalar, got dtype {e.dtype}")
    return e


def _symbolic_dim(s: E.PrimExpr, what: str, d: int) -> E.PrimExpr:
    """A symbolic dimension (``n`` of ``n = te.var("n")``, or ``n * 2``): a scalar integer
    expression of free variables (TVM's symbolic shapes)."""
    if not is_int(s.dtype) or lanes_of(s.dtype) != 1:
        raise TeError(f"{what}: dimension {d} of the shape has dtype {s.dtype}; a symbolic "
                      "size is a scalar integer such as te.var(\"n\")")
    bad: list = []

    def fn(n):
        if isinstance(n, (E.BufferLoad, ReduceAxis)) or (isinstance(n, E.Call)):
            bad.append(n)
    post_order_visit(s, fn)
    if bad:
        raise TeError(f"{what}: dimension {d} of the shape reads a tensor, calls a function "
                      "or uses a reduce axis; a symbolic size is made of te.var variables")
    return s


def _shape_tuple(shape: Any, what: str) -> tuple:
    """The shape as a tuple of ints (constant dimensions) and integer expressions
    (symbolic ones, made of ``te.var`` variables)."""
    if isinstance(shape, (int, np.integer, E.PrimExpr)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TeError(f"{what}: shape must be a tuple of positive integers, got {shape!r}")
    out: list = []
    for d, s in enumerate(shape):
        if isinstance(s, E.IntImm):
            s = s.value
        if isinstance(s, np.integer):
            s = int(s)
        if isinstance(s, E.PrimExpr) and not isinstance(s, bool):
            out.append(_symbolic_dim(s, what, d))
            continue
        if isinstance(s, bool) or not isinstance(s, int):
            raise TeError(f"{what}: dimension {d} of the shape is {s!r}; shapes must be "
                          "positive integer constants or symbolic sizes (te.var)")
        if s <= 0:
            raise TeError(f"{what}: dimension {d} of the shape is {s}; it must be at least 1")
        out.append(s)
    return tuple(out)


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name.isidentifier():
        raise TeError(f"{what}: name must be a Python identifier such as 'A', got {name!r}")
    return name


@node
class ReduceAxis(E.Var):
    """A reduction axis from :func:`reduce_axis` (TVM's ``IterVar`` of kind reduce).

    It *is* a variable, so it can be used in any index expression (``A[i, k]``,
    ``i * 2 + k``); ``dom`` is the :class:`~engine.ir.Range` it iterates over and
    ``var`` returns the axis itself (TVM's ``IterVar.var``).  Reduce axes never appear in
    a created PrimFunc: :func:`create_prim_func` replaces them by block iter vars.
    """

    dom: Any = None

    @property
    def var(self) -> "ReduceAxis":
        return self

    def __repr__(self) -> str:
        lo, ext = E.as_const_int(self.dom.min), E.as_const_int(self.dom.extent)
        if lo is None or ext is None:
            return f"reduce_axis(({self.dom.min!r}, {self.dom.extent!r}), name={self.name!r})"
        return f"reduce_axis(({lo}, {lo + ext}), name={self.name!r})"


def reduce_axis(dom: Any, name: str = "rv") -> ReduceAxis:
    """A reduction axis over ``dom`` = ``(begin, end)`` (half-open) or an extent.

    ``te.reduce_axis((0, 128), name="k")`` iterates ``k = 0, 1, ..., 127``.
    """
    _check_name(name, "te.reduce_axis")
    if isinstance(dom, Range):
        lo, ext = E.as_const_int(dom.min), E.as_const_int(dom.extent)
        if lo == 0 and ext is None and isinstance(dom.extent, E.PrimExpr):
            ext_e = _symbolic_dim(dom.extent, f"te.reduce_axis(name={name!r})", 1)
            return ReduceAxis(name, ext_e.dtype, Range(E.IntImm(ext_e.dtype, 0), ext_e))
    elif isinstance(dom, (tuple, list)) and len(dom) == 2:
        lo, hi = (E.as_const_int(d) if isinstance(d, E.PrimExpr) and
                  E.as_const_int(d) is not None else d for d in dom)
        if isinstance(lo, np.integer):
            lo = int(lo)
        if isinstance(hi, np.integer):
            hi = int(hi)
        if lo == 0 and isinstance(hi, E.PrimExpr) and not isinstance(hi, bool):
            # (0, n) with a symbolic n: k = 0, 1, ..., n - 1
            ext_e = _symbolic_dim(hi, f"te.reduce_axis(name={name!r})", 1)
            return ReduceAxis(name, ext_e.dtype, Range(E.IntImm(ext_e.dtype, 0), ext_e))
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (lo, hi)):
            raise TeError(f"te.reduce_axis({dom!r}): the bounds must be integer constants "
                          "(or (0, n) with a symbolic size n)")
        ext = hi - lo
    elif isinstance(dom, (int, np.integer)) and not isinstance(dom, bool):
        lo, ext = 0, int(dom)
    else:
        raise TeError(f"te.reduce_axis: dom must be (begin, end), e.g. (0, 128), got {dom!r}")
    if lo is None or ext is None:
        raise TeError(f"te.reduce_axis({dom!r}): the bounds must be integer constants")
    if ext <= 0:
        raise TeError(f"te.reduce_axis({dom!r}, name={name!r}) is empty; "
                      "end must be greater than begin")
    return ReduceAxis(name, "int32", Range(E.IntImm("int32", lo), E.IntImm("int32", ext)))


# ---------------------------------------------------------------------------
def identity_value(combiner: str, dtype: str) -> E.PrimExpr:
    """The identity element of a reduction: 0 for sum, the lowest value of the dtype for
    max and the highest for min (TVM's ``min_value``/``max_value``: finite for floats)."""
    base = element_of(dtype)
    if combiner == "sum":
        return E.const(0, base) if not is_bool(base) else E.IntImm("bool", 0)
    if is_float(base):
        info = np.finfo(np.dtype(base))
        value = float(info.min) if combiner == "max" else float(info.max)
        return E.FloatImm(base, value)
    if is_bool(base):
        return E.IntImm("bool", 0 if combiner == "max" else 1)
    info = np.iinfo(np.dtype(base))
    return E.IntImm(base, int(info.min) if combiner == "max" else int(info.max))


class Reduce:
    """``te.sum(expr, axis=k)`` and friends: a commutative reduction of ``source`` over
    ``axes``, starting from ``init`` (the combiner's identity when ``None``), counting only
    iterations where ``condition`` holds (when given).  Only valid as a compute body.

    ``combiner`` is "sum", "max" or "min", or a :class:`CommReducer` (``te.comm_reducer``):
    then ``sources`` are the values it reduces together (one per output of the compute
    stage) and this is output ``value_index`` of them."""

    __slots__ = ("combiner", "source", "axes", "init", "condition", "sources", "value_index")

    def __init__(self, combiner, source: E.PrimExpr, axes: tuple, init, condition,
                 sources: tuple | None = None, value_index: int = 0):
        self.combiner = combiner
        self.source = source
        self.axes = axes
        self.init = init
        self.condition = condition
        self.sources = (source,) if sources is None else tuple(sources)
        self.value_index = value_index

    @property
    def dtype(self) -> str:
        return self.source.dtype

    def __repr__(self) -> str:
        name = self.combiner if isinstance(self.combiner, str) else self.combiner.name
        return f"te.{name}({self.source!r}, axis={list(self.axes)!r})"

    def _nested(self, *_a):
        name = self.combiner if isinstance(self.combiner, str) else self.combiner.name
        raise TeError(
            f"a reduction (te.{name}) must be the whole body of a te.compute; "
            "to combine it with other arithmetic, compute the reduction in its own stage "
            "and use that tensor in the next stage")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _nested
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = _nested
    __mod__ = __rmod__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = _nested

    def __bool__(self):
        self._nested()


class CommReducer:
    """A commutative reducer over one or more values (TVM's ``CommReducer``): ``result[i]``
    combines the accumulated values ``lhs`` with the new ones ``rhs``; ``identity[i]`` is
    where output ``i`` starts. Made by :func:`comm_reducer`."""

    def __init__(self, lhs: tuple, rhs: tuple, result: tuple, identity: tuple, name: str):
        self.lhs, self.rhs, self.result, self.identity = lhs, rhs, result, identity
        self.name = name

    def __repr__(self) -> str:
        return f"CommReducer({self.name!r}, {len(self.lhs)} value(s))"


def comm_reducer(fcombine: Callable, fidentity: Callable, name: str = "reduce") -> Callable:
    """A reduction of one or more values, as TVM's ``te.comm_reducer``::

        argmax = te.comm_reducer(
            lambda x, y: (T.Select(x[1] >= y[1], x[0], y[0]),
                          T.Select(x[1] >= y[1], x[1], y[1])),
            lambda t0, t1: (te.const(-1, t0), te.min_value(t1)), name="argmax")
        idx, val = te.compute((n,), lambda i: argmax((k, A[i, k]), axis=k), name="T")

    ``fcombine(x, y)`` gets the accumulated and the new values (tuples when several, single
    variables when one) and returns the combined ones; ``fidentity(*dtypes)`` the starting
    values. Called as ``reducer(expr or tuple of exprs, axis=, where=, init=)``: a
    reduction, or one per value (the outputs of one compute stage)."""
    if not callable(fcombine) or not callable(fidentity):
        raise TeError("te.comm_reducer(fcombine, fidentity): both must be functions")

    def reducer(expr: Any, axis: Any = None, where: Any = None, init: Any = None):
        many = isinstance(expr, (list, tuple))
        exprs = tuple(expr) if many else (expr,)
        if not exprs:
            raise TeError(f"te.comm_reducer {name!r}: nothing to reduce")
        srcs = tuple(_as_expr(e, f"argument of the reducer {name!r}") for e in exprs)
        if many and init is not None:
            raise TeError(f"te.comm_reducer {name!r}: init= is supported for one value only")
        dtypes = [s.dtype for s in srcs]
        lhs = tuple(E.Var(f"x_{i}" if many else "x", d) for i, d in enumerate(dtypes))
        rhs = tuple(E.Var(f"y_{i}" if many else "y", d) for i, d in enumerate(dtypes))
        res = fcombine(lhs, rhs) if many else fcombine(lhs[0], rhs[0])
        ident = fidentity(*dtypes)
        res = tuple(res) if isinstance(res, (list, tuple)) else (res,)
        ident = tuple(ident) if isinstance(ident, (list, tuple)) else (ident,)
        if len(res) != len(srcs) or len(ident) != len(srcs):
            raise TeError(f"te.comm_reducer {name!r}: fcombine and fidentity must return "
                          f"{len(srcs)} value(s), one per reduced value")
        res = tuple(_as_expr(r, f"result of the reducer {name!r}", d).astype(d)
                    for r, d in zip(res, dtypes))
        ident = tuple(_as_expr(v, f"identity of the reducer {name!r}", d).astype(d)
                      for v, d in zip(ident, dtypes))
        comb = CommReducer(lhs, rhs, res, ident, name)
        outs = tuple(reduction(comb, s, axis, where, init, srcs, i)
                     for i, s in enumerate(srcs))
        return outs if many else outs[0]

    reducer.__name__ = name
    return reducer


def reduction(combiner: Any, source: Any, axis: Any, where: Any = None,
              init: Any = None, sources: tuple | None = None, value_index: int = 0) -> Reduce:
    """Build a :class:`Reduce` (shared by ``te.sum``, ``te.max``, ``te.min`` and the
    reducers of :func:`comm_reducer`)."""
    comb = combiner
    combiner = comb if isinstance(comb, str) else comb.name
    src = _as_expr(source, f"argument of te.{combiner}")
    if lanes_of(src.dtype) != 1:
        raise TeError(f"te.{combiner}: the reduced value must be a scalar, got {src.dtype}")
    if axis is None:
        raise TeError(f"te.{combiner} needs axis=, e.g. te.{combiner}(A[i, k], axis=k) "
                      "with k = te.reduce_axis((0, n), name='k')")
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    if not axes:
        raise TeError(f"te.{combiner}: axis= must name at least one reduce axis")
    for a in axes:
        if not isinstance(a, ReduceAxis):
            raise TeError(f"te.{combiner}: axis= must hold reduce axes made by "
                          f"te.reduce_axis, got {a!r}")
    if len({id(a) for a in axes}) != len(axes):
        raise TeError(f"te.{combiner}: the same reduce axis is listed twice in axis=")
    cond = None if where is None else _as_expr(where, f"where= of te.{combiner}")
    ini = None if init is None else _as_expr(init, f"init= of te.{combiner}", src.dtype)
    if ini is not None and ini.dtype != src.dtype:
        ini = ini.astype(src.dtype)
    return Reduce(comb, src, axes, ini, cond, sources, value_index)


# ---------------------------------------------------------------------------
class PlaceholderOp:
    """The operation of an input tensor."""

    def __init__(self, name: str):
        self.name = name
        self.inputs: tuple = ()

    def __repr__(self) -> str:
        return f"PlaceholderOp({self.name!r})"


class ComputeOp:
    """The operation of a compute stage: ``axis`` (one Var per output dimension, named
    after fcompute's parameters), ``body`` (a PrimExpr, a :class:`Reduce`, or a tuple of
    the reductions of one :func:`comm_reducer` — a stage of several outputs) and the
    tensors it reads (``inputs``, in first-use order). ``outputs``: its tensors."""

    def __init__(self, name: str, axis: tuple, body, inputs: tuple, tag: str = "",
                 attrs: dict | None = None):
        self.name = name
        self.axis = axis
        self.body = body
        self.inputs = inputs
        self.tag = tag
        self.attrs = dict(attrs or {})
        self.outputs: tuple = ()

    @property
    def reductions(self) -> tuple:
        """The body's reductions (one per output), or () when it is no reduction."""
        if isinstance(self.body, Reduce):
            return (self.body,)
        return self.body if isinstance(self.body, tuple) else ()

    @property
    def reduce_axis(self) -> tuple:
        red = self.reductions
        return red[0].axes if red else ()

    def __repr__(self) -> str:
        return f"ComputeOp({self.name!r})"


class Tensor:
    """A te tensor: ``shape`` (ints), ``dtype``, ``name`` and the producing ``op``.

    ``A[i, j]`` (or ``A(i, j)``) reads an element and builds an IR expression.
    """

    __slots__ = ("op", "shape", "dtype", "name", "buffer", "value_index", "__weakref__")

    def __init__(self, op, shape: tuple, dtype: str, name: str, value_index: int = 0,
                 buffer_name: str | None = None):
        self.op = op
        self.shape = shape
        self.dtype = dtype
        self.name = name
        self.value_index = value_index
        self.buffer = Buffer(buffer_name or name, shape, dtype)
        _TENSOR_OF_BUFFER[self.buffer] = self

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices: Any) -> E.BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != len(self.shape):
            raise TeError(f"{self.name} has {len(self.shape)} dimension(s) (shape "
                          f"{self.shape}) but was indexed with {len(indices)} index(es)")
        idx = tuple(_as_index(v, self.name, d) for d, v in enumerate(indices))
        return E.BufferLoad(self.buffer, idx)

    def __call__(self, *indices: Any) -> E.BufferLoad:
        return self[indices]

    def __repr__(self) -> str:
        return f"Tensor(name={self.name!r}, shape={self.shape}, dtype={self.dtype!r})"

    def _no_arith(self, *_a):
        raise TeError(f"te tensors are not arrays: write the element-wise computation "
                      f"with te.compute, e.g. te.compute({self.shape}, lambda *i: "
                      f"{self.name}[i] + ...)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _no_arith
    __truediv__ = __rtruediv__ = __neg__ = _no_arith


def tensor_of_buffer(buf: Buffer) -> "Tensor | None":
    return _TENSOR_OF_BUFFER.get(buf)


def placeholder(shape: Any, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor: ``A = te.placeholder((128, 128), "float32", name="A")``."""
    _check_name(name, "te.placeholder")
    shp = _shape_tuple(shape, f"te.placeholder(name={name!r})")
    try:
        check_dtype(dtype)
    except DTypeError as exc:
        raise TeError(f"te.placeholder(name={name!r}): {exc}") from None
    if lanes_of(dtype) != 1 or dtype == "handle":
        raise TeError(f"te.placeholder(name={name!r}): dtype must be a scalar type such as "
                      f"'float32', got {dtype!r}")
    return Tensor(PlaceholderOp(name), shp, dtype, name)


def _param_names(fcompute: Callable, ndim: int, name: str) -> list[str]:
    try:
        sig = inspect.signature(fcompute)
    except (TypeError, ValueError):
        return [f"i{d}" for d in range(ndim)]
    params = list(sig.parameters.values())
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return [f"i{d}" for d in range(ndim)]
    positional = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                   inspect.Parameter.POSITIONAL_OR_KEYWORD)
                  and p.default is inspect.Parameter.empty]
    if len(positional) != ndim:
        raise TeError(f"te.compute(name={name!r}): the output has {ndim} dimension(s) but "
                      f"fcompute takes {len(positional)} argument(s) "
                      f"({', '.join(p.name for p in positional) or 'none'}); give it one "
                      "argument per output dimension, e.g. lambda i, j: ...")
    return [p.name for p in positional]


def compute(shape: Any, fcompute: Callable, name: str = "compute", tag: str = "",
            attrs: dict | None = None) -> Tensor:
    """A new tensor whose element at ``(i, j, ...)`` is ``fcompute(i, j, ...)``.

    ``fcompute`` receives one :class:`~engine.ir.Var` per output dimension (named after its
    own parameters) and returns an expression, or a reduction made by ``te.sum`` /
    ``te.max`` / ``te.min``::

        k = te.reduce_axis((0, 128), name="k")
        Y = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    """
    _check_name(name, "te.compute")
    shp = _shape_tuple(shape, f"te.compute(name={name!r})")
    if not callable(fcompute):
        raise TeError(f"te.compute(name={name!r}): fcompute must be a function such as "
                      f"lambda i, j: ..., got {fcompute!r}")
    names = _param_names(fcompute, len(shp), name)
    # an axis takes the dtype of its dimension (int64 for te.var("n", "int64"), as TVM)
    axis = tuple(E.Var(n, "int32" if isinstance(ext, int) else ext.dtype)
                 for n, ext in zip(names, shp))
    body = fcompute(*axis)
    if isinstance(body, (list, tuple)):
        return _multi_output(shp, axis, tuple(body), name, tag, attrs)
    if not isinstance(body, Reduce):
        body = _as_expr(body, f"result of te.compute(name={name!r})")
        if lanes_of(body.dtype) != 1 or body.dtype == "handle":
            raise TeError(f"te.compute(name={name!r}): the result must be a scalar number, "
                          f"got dtype {body.dtype}")
    inputs = _find_inputs(body)
    _check_vars(body, axis, name)
    op = ComputeOp(name, axis, body, inputs, tag, attrs)
    out = Tensor(op, shp, body.dtype, name)
    op.outputs = (out,)
    return out


def _multi_output(shp: tuple, axis: tuple, body: tuple, name: str, tag: str,
                  attrs: dict | None) -> list:
    """The outputs of a compute stage whose fcompute returned the reductions of one
    :func:`comm_reducer` over several values (TVM's multi-output compute): tensors
    ``<name>.v0``, ``<name>.v1``, ... (buffers ``<name>_v0``, ...)."""
    first = body[0] if body else None
    if not isinstance(first, Reduce) or isinstance(first.combiner, str) or \
            len(body) != len(first.sources) or \
            any(not isinstance(r, Reduce) or r.combiner is not first.combiner or
                r.value_index != i for i, r in enumerate(body)):
        raise TeError(f"te.compute(name={name!r}): fcompute returned {len(body)} values; "
                      "several outputs are supported only as the values of one "
                      "te.comm_reducer reduction, in order")
    inputs = _find_inputs(first)
    _check_vars(first, axis, name)
    op = ComputeOp(name, axis, body, inputs, tag, attrs)
    outs = [Tensor(op, shp, r.dtype, f"{name}.v{i}", i, f"{name}_v{i}")
            for i, r in enumerate(body)]
    op.outputs = tuple(outs)
    return outs


def _exprs_of(body) -> list:
    if isinstance(body, Reduce):
        out = list(body.sources)
        if body.init is not None:
            out.append(body.init)
        if body.condition is not None:
            out.append(body.condition)
        return out
    return [body]


def _find_inputs(body) -> tuple:
    seen: dict[int, Tensor] = {}

    def fn(n):
        if isinstance(n, E.BufferLoad):
            t = _TENSOR_OF_BUFFER.get(n.buffer)
            if t is None:
                raise TeError(f"buffer {n.buffer.name!r} read in a te.compute is not a te "
                              "tensor; read te.placeholder/te.compute tensors only")
            seen.setdefault(id(t), t)

    for e in _exprs_of(body):
        post_order_visit(e, fn)
    return tuple(seen.values())


def _check_vars(body, axis: tuple, name: str) -> None:
    allowed = {id(v) for v in axis}
    red = body.axes if isinstance(body, Reduce) else ()
    allowed_red = {id(a): a for a in red}
    problems: list[str] = []

    def fn(n):
        if isinstance(n, E.Var) and id(n) not in allowed and id(n) not in allowed_red \
                and n not in _FREE_VARS:
            problems.append(n.name)

    for e in _exprs_of(body):
        post_order_visit(e, fn)
    if problems:
        v = problems[0]
        raise TeError(
            f"te.compute(name={name!r}) uses the variable {v!r}, which is neither one of its "
            "own index arguments nor a reduce axis listed in axis= of its te.sum/max/min; "
            "pass every reduce axis you index with to the reduction")


#: the variables made by :func:`var`: free in any compute body (a symbolic size, a scalar
#: parameter)
_FREE_VARS: "weakref.WeakSet[E.Var]" = weakref.WeakSet()


def var(name: str = "tindex", dtype: str = "int32") -> E.Var:
    """A free scalar variable (TVM's ``te.var``): a symbolic size (``te.placeholder((n,
    m))``) or, listed in ``create_prim_func``'s arguments, a scalar parameter."""
    try:
        check_dtype(dtype)
    except DTypeError as exc:
        raise TeError(f"te.var(name={name!r}): {exc}") from None
    if lanes_of(dtype) != 1 or dtype == "handle":
        raise TeError(f"te.var(name={name!r}): dtype must be a scalar type, got {dtype!r}")
    v = E.Var(name, dtype)
    _FREE_VARS.add(v)
    return v

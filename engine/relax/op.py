"""The high-level Relax operators of the subset: their script names, attributes, the
struct info of their result, and their meaning as numpy code.

Each :class:`OpDef` is one operator: ``R.matmul(a, b)``, ``R.add(a, b)``, ``R.nn.relu(x)``,
``R.nn.conv2d(x, w, strides=..., padding=...)``, ``R.nn.softmax(x, axis=-1)``,
``R.permute_dims(x, axes=...)``, ``R.reshape(x, shape)`` ... ``infer`` checks the operands
and gives the result's :class:`TensorStructInfo` (an :class:`OpError` says what is wrong);
``compute`` is the operator's meaning on numpy arrays (what the virtual machine runs when an
operator was not lowered to TensorIR, and the reference lowering is tested against).

More operators are added with :func:`register_op`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .expr import Call, Expr, Op, ShapeExpr
from .struct_info import ObjectStructInfo, ShapeStructInfo, TensorStructInfo


class OpError(ValueError):
    """Operands or attributes an operator cannot take (the message says which and why)."""


@dataclass(frozen=True)
class OpDef:
    """One operator: ``name`` (``relax.nn.relu``), ``script`` (``R.nn.relu``), the names of
    its tensor operands ``inputs``, its attributes with their defaults ``attrs``, the
    result's struct info ``infer(sinfos, attrs)`` and its numpy meaning
    ``compute(arrays, attrs)``."""

    name: str
    script: str
    inputs: tuple
    attrs: tuple  # ((name, default), ...)
    infer: Callable[[list, dict], TensorStructInfo]
    compute: Callable[[list, dict], np.ndarray]
    doc: str = ""
    shape_inputs: frozenset = field(default_factory=frozenset)  # operands that are shapes


OPS: dict[str, OpDef] = {}
BY_SCRIPT: dict[str, OpDef] = {}


def register_op(op: OpDef) -> OpDef:
    """Add an operator (its ``name`` and ``script`` spelling must be new)."""
    if op.name in OPS or op.script in BY_SCRIPT:
        raise ValueError(f"operator {op.name} is already registered")
    OPS[op.name] = op
    BY_SCRIPT[op.script] = op
    return op


def _tensor(si: Any, what: str) -> TensorStructInfo:
    if not isinstance(si, TensorStructInfo) or si.shape is None:
        raise OpError(f"{what} must be a tensor of known shape, got "
                      f"{si.describe() if hasattr(si, 'describe') else si!r}")
    return si


def _same_dtype(op: str, a: TensorStructInfo, b: TensorStructInfo) -> str:
    if a.dtype != b.dtype:
        raise OpError(f"{op}: the operands have different dtypes ({a.dtype} and {b.dtype}); "
                      "cast one with R.astype first")
    return a.dtype


def _broadcast(op: str, a: tuple, b: tuple) -> tuple:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise OpError(f"{op}: shapes {a} and {b} do not broadcast (numpy's rule: trailing "
                      "dimensions equal or 1)") from None


# ---------------------------------------------------------------- elementwise binary
def _binary(name: str, fn: Callable) -> None:
    script = "R." + name

    def infer(s: list, attrs: dict) -> TensorStructInfo:
        a, b = _tensor(s[0], f"{script}'s first operand"), _tensor(s[1], f"{script}'s second "
                                                                         "operand")
        return TensorStructInfo(_broadcast(script, a.shape, b.shape), _same_dtype(script, a, b))

    def compute(x: list, attrs: dict) -> np.ndarray:
        return fn(x[0], x[1]).astype(x[0].dtype, copy=False)

    register_op(OpDef("relax." + name, script, ("x1", "x2"), (), infer, compute,
                      f"elementwise {name} with numpy broadcasting"))


_binary("add", np.add)
_binary("subtract", np.subtract)
_binary("multiply", np.multiply)


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):
        return np.floor_divide(a, b)
    return np.divide(a, b)


_binary("divide", _divide)


# ---------------------------------------------------------------- ewise_fma
def _fma_infer(s: list, attrs: dict) -> TensorStructInfo:
    a, b, c = (_tensor(s[i], f"R.ewise_fma's operand {i + 1}") for i in range(3))
    if not a.shape == b.shape == c.shape:
        raise OpError(f"R.ewise_fma: the three operands must have the same shape (no "
                      f"broadcasting), got {a.shape}, {b.shape} and {c.shape}")
    _same_dtype("R.ewise_fma", a, b)
    return TensorStructInfo(a.shape, _same_dtype("R.ewise_fma", a, c))


def _fma(x: list, attrs: dict) -> np.ndarray:
    return (x[0] * x[1] + x[2]).astype(x[0].dtype, copy=False)


register_op(OpDef("relax.ewise_fma", "R.ewise_fma", ("x1", "x2", "x3"), (), _fma_infer, _fma,
                  "x1 * x2 + x3, element by element (TVM's fused multiply-add operator)"))


# ---------------------------------------------------------------- unary
def _unary(name: str, script: str, fn: Callable, doc: str) -> None:
    def infer(s: list, attrs: dict) -> TensorStructInfo:
        a = _tensor(s[0], f"{script}'s operand")
        return TensorStructInfo(a.shape, a.dtype)

    def compute(x: list, attrs: dict) -> np.ndarray:
        return fn(x[0]).astype(x[0].dtype, copy=False)

    register_op(OpDef(name, script, ("x",), (), infer, compute, doc))


_unary("relax.nn.relu", "R.nn.relu", lambda a: np.maximum(a, np.zeros((), a.dtype)),
       "max(x, 0)")


# ---------------------------------------------------------------- matmul
def _matmul_infer(s: list, attrs: dict) -> TensorStructInfo:
    a = _tensor(s[0], "R.matmul's first operand")
    b = _tensor(s[1], "R.matmul's second operand")
    if a.ndim == 0 or b.ndim == 0:
        raise OpError("R.matmul: the operands must have at least one dimension")
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim >= 2 else b.shape[0]
    if ka != kb:
        raise OpError(f"R.matmul: the reduction dimensions differ: {a.shape} @ {b.shape} "
                      f"({ka} vs {kb})")
    batch = _broadcast("R.matmul", a.shape[:-2], b.shape[:-2])
    out = batch + (a.shape[-2:-1] if a.ndim >= 2 else ()) + (b.shape[-1:] if b.ndim >= 2
                                                               else ())
    dtype = attrs.get("out_dtype") or _same_dtype("R.matmul", a, b)
    return TensorStructInfo(out, dtype)


def _matmul(x: list, attrs: dict) -> np.ndarray:
    dtype = attrs.get("out_dtype") or x[0].dtype
    return np.matmul(x[0], x[1]).astype(dtype, copy=False)


register_op(OpDef("relax.matmul", "R.matmul", ("x1", "x2"), (("out_dtype", None),),
                  _matmul_infer, _matmul, "numpy.matmul"))


# ---------------------------------------------------------------- softmax
def _softmax_infer(s: list, attrs: dict) -> TensorStructInfo:
    a = _tensor(s[0], "R.nn.softmax's operand")
    axis = attrs["axis"]
    if not -a.ndim <= axis < a.ndim:
        raise OpError(f"R.nn.softmax: axis {axis} is out of range for {a.ndim} dimensions")
    if not a.dtype.startswith("float"):
        raise OpError(f"R.nn.softmax needs a float tensor, got {a.dtype}")
    return TensorStructInfo(a.shape, a.dtype)


def _softmax(x: list, attrs: dict) -> np.ndarray:
    a = x[0]
    e = np.exp(a - np.max(a, axis=attrs["axis"], keepdims=True))
    return (e / np.sum(e, axis=attrs["axis"], keepdims=True)).astype(a.dtype, copy=False)


register_op(OpDef("relax.nn.softmax", "R.nn.softmax", ("data",), (("axis", -1),),
                  _softmax_infer, _softmax, "exp(x - max) / sum(exp(x - max)) along axis"))


# ---------------------------------------------------------------- permute_dims
def _permute_infer(s: list, attrs: dict) -> TensorStructInfo:
    a = _tensor(s[0], "R.permute_dims's operand")
    axes = attrs["axes"]
    if axes is None:
        axes = tuple(reversed(range(a.ndim)))
    axes = tuple(ax % a.ndim if -a.ndim <= ax < a.ndim else ax for ax in axes)
    if sorted(axes) != list(range(a.ndim)):
        raise OpError(f"R.permute_dims: axes {attrs['axes']} are not a permutation of the "
                      f"{a.ndim} dimensions")
    return TensorStructInfo(tuple(a.shape[i] for i in axes), a.dtype)


def _permute(x: list, attrs: dict) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(x[0], attrs["axes"]))


register_op(OpDef("relax.permute_dims", "R.permute_dims", ("x",), (("axes", None),),
                  _permute_infer, _permute, "numpy.transpose"))


# ---------------------------------------------------------------- reshape
def _reshape_shape(a: TensorStructInfo, shape: tuple) -> tuple:
    if sum(1 for d in shape if d == -1) > 1:
        raise OpError(f"R.reshape: at most one dimension may be -1, got {shape}")
    if any(d < -1 or d == 0 for d in shape):
        raise OpError(f"R.reshape: dimensions must be positive (or one -1), got {shape}")
    known = 1
    for d in shape:
        if d != -1:
            known *= d
    if -1 in shape:
        if a.size % known:
            raise OpError(f"R.reshape: {a.size} elements do not fill a shape {shape}")
        shape = tuple(a.size // known if d == -1 else d for d in shape)
    elif known != a.size:
        raise OpError(f"R.reshape: a tensor of shape {a.shape} ({a.size} elements) cannot "
                      f"take the shape {shape} ({known} elements)")
    return shape


def _reshape_infer(s: list, attrs: dict) -> TensorStructInfo:
    a = _tensor(s[0], "R.reshape's operand")
    if not isinstance(s[1], ShapeStructInfo):
        raise OpError("R.reshape's second operand must be a shape such as (2, 3)")
    return TensorStructInfo(_reshape_shape(a, s[1].values), a.dtype)


def _reshape(x: list, attrs: dict) -> np.ndarray:
    return np.ascontiguousarray(x[0]).reshape(tuple(x[1]))


register_op(OpDef("relax.reshape", "R.reshape", ("x", "shape"), (), _reshape_infer, _reshape,
                  "numpy.reshape", frozenset({1})))


# ---------------------------------------------------------------- conv2d
def _pair(v: Any, what: str) -> tuple:
    v = (v, v) if isinstance(v, int) else tuple(v)
    if len(v) == 1:
        v = v * 2
    if len(v) != 2:
        raise OpError(f"R.nn.conv2d: {what} needs 1 or 2 values, got {v}")
    return v


def conv2d_padding(padding: Any) -> tuple:
    """(top, left, bottom, right) from 1, 2 or 4 values (TVM's rule)."""
    p = (padding,) if isinstance(padding, int) else tuple(padding)
    if len(p) == 1:
        return p * 4
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    if len(p) == 4:
        return p
    raise OpError(f"R.nn.conv2d: padding needs 1, 2 or 4 values, got {padding}")


def _conv2d_infer(s: list, attrs: dict) -> TensorStructInfo:
    x = _tensor(s[0], "R.nn.conv2d's data")
    w = _tensor(s[1], "R.nn.conv2d's weight")
    if attrs["data_layout"] != "NCHW" or attrs["kernel_layout"] != "OIHW" or \
            attrs["out_layout"] not in (None, "NCHW"):
        raise OpError("R.nn.conv2d: only data_layout=\"NCHW\" and kernel_layout=\"OIHW\" are "
                      "supported")
    if x.ndim != 4 or w.ndim != 4:
        raise OpError(f"R.nn.conv2d: data and weight must be 4-D (NCHW, OIHW), got "
                      f"{x.shape} and {w.shape}")
    sh, sw = _pair(attrs["strides"], "strides")
    dh, dw = _pair(attrs["dilation"], "dilation")
    pt, pl, pb, pr = conv2d_padding(attrs["padding"])
    g = attrs["groups"]
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    if min(sh, sw, dh, dw, g) < 1 or min(pt, pl, pb, pr) < 0:
        raise OpError("R.nn.conv2d: strides, dilation and groups must be positive, padding "
                      "not negative")
    if c % g or o % g or ci * g != c:
        raise OpError(f"R.nn.conv2d: {c} input channels with groups={g} need weight of "
                      f"shape (O, {c // g if c % g == 0 else '?'}, kh, kw) with O divisible "
                      f"by {g}, got {w.shape}")
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise OpError(f"R.nn.conv2d: the kernel {w.shape[2:]} does not fit the padded input "
                      f"{(h + pt + pb, wd + pl + pr)}")
    dtype = attrs["out_dtype"] or _same_dtype("R.nn.conv2d", x, w)
    return TensorStructInfo((n, o, oh, ow), dtype)


def _conv2d(x: list, attrs: dict) -> np.ndarray:
    data, weight = x
    sh, sw = _pair(attrs["strides"], "strides")
    dh, dw = _pair(attrs["dilation"], "dilation")
    pt, pl, pb, pr = conv2d_padding(attrs["padding"])
    g = attrs["groups"]
    dtype = attrs["out_dtype"] or data.dtype
    acc = np.float64 if np.issubdtype(np.dtype(dtype), np.floating) else np.int64
    padded = np.pad(data.astype(acc), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, c, _, _ = data.shape
    o, ci, kh, kw = weight.shape
    oh = (padded.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (padded.shape[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow), acc)
    per = o // g
    for gi in range(g):
        xs = padded[:, gi * ci:(gi + 1) * ci]
        ws = weight[gi * per:(gi + 1) * per].astype(acc)
        for r in range(kh):
            for q in range(kw):
                win = xs[:, :, r * dh:r * dh + sh * (oh - 1) + 1:sh,
                         q * dw:q * dw + sw * (ow - 1) + 1:sw]
                out[:, gi * per:(gi + 1) * per] += np.einsum("nchw,oc->nohw", win,
                                                            ws[:, :, r, q])
    return out.astype(dtype)


register_op(OpDef("relax.nn.conv2d", "R.nn.conv2d", ("data", "weight"),
                  (("strides", (1, 1)), ("padding", (0, 0)), ("dilation", (1, 1)),
                   ("groups", 1), ("data_layout", "NCHW"), ("kernel_layout", "OIHW"),
                   ("out_layout", None), ("out_dtype", None)),
                  _conv2d_infer, _conv2d, "2-D convolution, NCHW data and OIHW weight"))


def get_op(name: str) -> OpDef:
    op = OPS.get(name)
    if op is None:
        raise OpError(f"unknown Relax operator {name!r}")
    return op


def normalize_attrs(op: OpDef, given: dict) -> tuple:
    """The operator's attributes in its order, defaults filled in, as ``(key, value)``
    pairs (lists become tuples; unknown names raise OpError)."""
    known = dict(op.attrs)
    for k in given:
        if k not in known:
            allowed = ", ".join(known) or "none"
            raise OpError(f"{op.script} has no attribute {k!r} (it has: {allowed})")
    out = []
    for k, default in op.attrs:
        v = given.get(k, default)
        if isinstance(v, list):
            v = tuple(v)
        out.append((k, v))
    return tuple(out)


# ================================================================ the Python API
# ``relax.op.add(a, b)``, ``relax.op.nn.relu(x)``, ...: a Call of the operator with its
# struct info inferred from the operands (left to ``BlockBuilder.normalize`` when an operand
# has none yet), as TVM's ``relax.op`` functions build them.
def make_call(name: str, *args: Any, **attrs: Any) -> Any:
    """A Call of the operator ``name`` on ``args`` with ``attrs`` (defaults filled in)."""
    opdef = get_op(name)
    operands = []
    for i, a in enumerate(args):
        if i in opdef.shape_inputs and isinstance(a, (list, tuple)):
            a = ShapeExpr(tuple(a))
        if not isinstance(a, Expr):
            raise OpError(f"{opdef.script}: operand {i + 1} must be a Relax expression (a "
                          f"Var, a call, relax.const(...)), got {type(a).__name__}")
        operands.append(a)
    norm = normalize_attrs(opdef, attrs)
    sinfos = [a.struct_info for a in operands]
    if any(type(s) is ObjectStructInfo for s in sinfos):
        return Call(Op(name), tuple(operands), norm)  # inferred by BlockBuilder.normalize
    return Call(Op(name), tuple(operands), norm, (), opdef.infer(sinfos, dict(norm)))


def add(x1: Any, x2: Any) -> Any:
    """``x1 + x2`` with numpy broadcasting (``R.add``)."""
    return make_call("relax.add", x1, x2)


def subtract(x1: Any, x2: Any) -> Any:
    """``x1 - x2`` (``R.subtract``)."""
    return make_call("relax.subtract", x1, x2)


def multiply(x1: Any, x2: Any) -> Any:
    """``x1 * x2`` (``R.multiply``)."""
    return make_call("relax.multiply", x1, x2)


def divide(x1: Any, x2: Any) -> Any:
    """``x1 / x2`` (``R.divide``)."""
    return make_call("relax.divide", x1, x2)


def ewise_fma(x1: Any, x2: Any, x3: Any) -> Any:
    """``x1 * x2 + x3``, element by element, the three of one shape (``R.ewise_fma``)."""
    return make_call("relax.ewise_fma", x1, x2, x3)


def matmul(x1: Any, x2: Any, out_dtype: str | None = None) -> Any:
    """``numpy.matmul(x1, x2)`` (``R.matmul``)."""
    return make_call("relax.matmul", x1, x2, out_dtype=out_dtype)


def permute_dims(x: Any, axes: Any = None) -> Any:
    """``numpy.transpose(x, axes)`` (``R.permute_dims``)."""
    return make_call("relax.permute_dims", x, axes=None if axes is None else tuple(axes))


def reshape(x: Any, shape: Any) -> Any:
    """``x`` with the shape ``shape`` (``R.reshape``)."""
    return make_call("relax.reshape", x, shape)


def linear(data: Any, weight: Any, bias: Any = None, out_dtype: str | None = None) -> Any:
    """``data @ weight.T + bias`` (``weight`` is ``(out_features, in_features)``, as
    PyTorch keeps it). As TVM's, not an operator of its own: ``add(matmul(data,
    permute_dims(weight)), bias)``, which ``BlockBuilder.emit`` binds as three calls."""
    res = matmul(data, permute_dims(weight), out_dtype=out_dtype)
    return res if bias is None else add(res, bias)


class _Nn:
    """``relax.op.nn``: the neural-network operators."""

    @staticmethod
    def relu(data: Any) -> Any:
        """``max(data, 0)`` (``R.nn.relu``)."""
        return make_call("relax.nn.relu", data)

    @staticmethod
    def softmax(data: Any, axis: int = -1) -> Any:
        """``R.nn.softmax(data, axis)``."""
        return make_call("relax.nn.softmax", data, axis=axis)

    @staticmethod
    def conv2d(data: Any, weight: Any, strides: Any = (1, 1), padding: Any = (0, 0),
               dilation: Any = (1, 1), groups: int = 1, data_layout: str = "NCHW",
               kernel_layout: str = "OIHW", out_layout: Any = None,
               out_dtype: Any = None) -> Any:
        """``R.nn.conv2d`` (NCHW data, OIHW weight)."""
        return make_call("relax.nn.conv2d", data, weight, strides=strides, padding=padding,
                         dilation=dilation, groups=groups, data_layout=data_layout,
                         kernel_layout=kernel_layout, out_layout=out_layout,
                         out_dtype=out_dtype)


nn = _Nn()

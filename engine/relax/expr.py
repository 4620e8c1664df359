"""The Relax IR: expressions, bindings, blocks and functions (immutable, as the TensorIR).

A Relax function is the graph level of a model (the course's chapter 3)::

    @R.function
    def main(x: Tensor((1, 784), "float32"), w0: ..., b0: ...):
        with R.dataflow():
            lv0 = R.call_tir(linear0, (x, w0, b0), (1, 128), dtype="float32")
            out = R.call_tir("env.relu", (lv0,), (1, 128), dtype="float32")
            R.output(out)
        return out

is a :class:`Function` whose ``body`` is a :class:`SeqExpr`: a :class:`DataflowBlock` of
two :class:`VarBinding` s and the returned ``out``. ``lv0`` is a :class:`DataflowVar`
(visible only inside its block), ``out`` a :class:`Var` (``R.output`` makes it visible after
the block). ``R.call_tir(linear0, ...)`` is a :class:`Call` of the operator
``Op("relax.call_tir")`` with the arguments ``(GlobalVar("linear0"), Tuple((x, w0, b0)))``
and the output's struct info in ``sinfo_args`` (TVM's layout); a string callee is an
:class:`ExternFunc`. Every expression carries its ``struct_info``.
"""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from engine.ir.node import Node, Pairs, node

from .struct_info import (ObjectStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
                          TupleStructInfo)


class Expr(Node):
    """Base of the Relax expressions (each has a ``struct_info``)."""

    __slots__ = ()


@node
class Var(Expr):
    """A variable: a parameter, or the name of a binding visible after its block.

    Compared structurally by position of first sight (as TensorIR variables), not by name.
    """

    name_hint: str
    struct_info: StructInfo

    __hash__ = object.__hash__
    #: engine.ir.structural binds such nodes one to one instead of comparing their fields
    structural_var = True


@node
class DataflowVar(Var):
    """A variable bound inside a dataflow block and visible only there."""

    __hash__ = object.__hash__


@node
class GlobalVar(Expr):
    """The name of a function of the module (``linear0`` in ``R.call_tir(linear0, ...)``)."""

    name_hint: str
    struct_info: StructInfo = ObjectStructInfo()

    __hash__ = object.__hash__


@node
class ExternFunc(Expr):
    """A function found at run time by its registered name (``"env.linear"``)."""

    global_symbol: str
    struct_info: StructInfo = ObjectStructInfo()

    __hash__ = object.__hash__


@node
class Op(Expr):
    """A Relax operator (``relax.call_tir``, ``relax.matmul``, ...) by name.

    Two are equal (and hash alike) when they name the same operator, as TVM's operators
    are one object per name: ``call.op == Op.get("relax.add")``, ``call.op in op_map``."""

    name: str
    struct_info: StructInfo = ObjectStructInfo()

    def __eq__(self, other: Any) -> bool:
        return self is other or (type(other) is Op and other.name == self.name)

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(("relax.Op", self.name))

    @staticmethod
    def get(name: str) -> "Op":
        """The operator named ``name`` (TVM's ``tvm.ir.Op.get("relax.add")``): one object
        per name; equal to every ``Op`` of that name."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"an operator is named by a string such as 'relax.add', got "
                             f"{name!r}")
        op = _OPS_BY_NAME.get(name)
        if op is None:
            op = _OPS_BY_NAME[name] = Op(name)
        return op


_OPS_BY_NAME: dict[str, Op] = {}


class ConstantData:
    """The immutable array of a :class:`Constant`: equal to another when dtype, shape and
    bytes are; its ``repr`` names a digest of the bytes (so structural hashing sees the
    data without printing it)."""

    __slots__ = ("array", "_digest")

    def __init__(self, array: Any):
        a = np.array(array, copy=True, order="C")
        a.setflags(write=False)
        self.array = a
        self._digest = hashlib.blake2b(a.tobytes(), digest_size=12).hexdigest()

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ConstantData) and self.array.dtype == other.array.dtype \
            and self.array.shape == other.array.shape and self._digest == other._digest \
            and np.array_equal(self.array, other.array)

    def __hash__(self) -> int:
        return hash(self._digest)

    def __repr__(self) -> str:
        return f"ConstantData({self.array.dtype}{list(self.array.shape)}:{self._digest})"


@node
class Constant(Expr):
    """A constant tensor (a bound weight prints as ``meta[relay.Constant][i]``)."""

    data: ConstantData
    struct_info: StructInfo

    __hash__ = object.__hash__

    @staticmethod
    def of(array: Any, dtype: str | None = None) -> "Constant":
        a = np.asarray(array)
        if dtype is not None:
            a = a.astype(dtype)
        data = ConstantData(a)
        return Constant(data, TensorStructInfo(data.array.shape, str(data.array.dtype)))


@node
class ShapeExpr(Expr):
    """A shape as a value: ``R.shape([2, 3])`` (also the shape argument of ``R.reshape``)."""

    values: tuple
    struct_info: StructInfo = None  # type: ignore[assignment]

    __hash__ = object.__hash__

    def __post_init__(self):
        values = tuple(int(v) for v in self.values)
        object.__setattr__(self, "values", values)
        if self.struct_info is None:
            object.__setattr__(self, "struct_info", ShapeStructInfo(values))


@node
class Tuple(Expr):
    """``(a, b, ...)``."""

    fields: tuple
    struct_info: StructInfo = None  # type: ignore[assignment]

    __hash__ = object.__hash__

    def __post_init__(self):
        object.__setattr__(self, "fields", tuple(self.fields))
        if self.struct_info is None:
            object.__setattr__(self, "struct_info",
                               TupleStructInfo(tuple(f.struct_info for f in self.fields)))


@node
class TupleGetItem(Expr):
    """``t[i]``."""

    tuple_value: Expr
    index: int
    struct_info: StructInfo = None  # type: ignore[assignment]

    __hash__ = object.__hash__

    def __post_init__(self):
        if self.struct_info is None:
            si = self.tuple_value.struct_info
            if not isinstance(si, TupleStructInfo) or not 0 <= self.index < len(si.fields):
                raise ValueError(f"item {self.index} of a value that is not a tuple with "
                                 f"that many fields ({si.describe()})")
            object.__setattr__(self, "struct_info", si.fields[self.index])


@node
class Call(Expr):
    """``op(args...)``: ``op`` an :class:`Op`, a :class:`GlobalVar` (a Relax function of the
    module) or an :class:`ExternFunc`; ``attrs`` a tuple of ``(key, value)`` pairs;
    ``sinfo_args`` the output struct infos of ``call_tir``/``call_dps_packed``."""

    op: Expr
    args: tuple
    attrs: tuple = ()
    sinfo_args: tuple = ()
    struct_info: StructInfo = ObjectStructInfo()

    __hash__ = object.__hash__

    def __post_init__(self):
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "attrs", tuple(self.attrs or ()))   # TVM's Call(op, args,
        object.__setattr__(self, "sinfo_args", tuple(self.sinfo_args or ()))  # None, None)

    def attr(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default


@node
class VarBinding(Node):
    """``var = value``."""

    var: Var
    value: Expr

    __hash__ = object.__hash__


@node
class BindingBlock(Node):
    """Bindings outside a dataflow block (they may have side effects)."""

    bindings: tuple

    __hash__ = object.__hash__

    def __post_init__(self):
        object.__setattr__(self, "bindings", tuple(self.bindings))


@node
class DataflowBlock(BindingBlock):
    """``with R.dataflow(): ...; R.output(...)``: side-effect-free bindings; the
    :class:`Var` s among them are its outputs, the :class:`DataflowVar` s are local."""

    __hash__ = object.__hash__


@node
class SeqExpr(Expr):
    """Blocks of bindings, then the value of ``body``."""

    blocks: tuple
    body: Expr
    struct_info: StructInfo = None  # type: ignore[assignment]

    __hash__ = object.__hash__

    def __post_init__(self):
        object.__setattr__(self, "blocks", tuple(self.blocks))
        if self.struct_info is None:
            object.__setattr__(self, "struct_info", self.body.struct_info)


@node
class Function(Expr):
    """A Relax function: ``params`` (Vars), ``body`` (a SeqExpr), the declared return
    struct info ``ret_struct_info`` and ``attrs`` (``(key, value)`` pairs)."""

    name: str
    params: tuple
    body: SeqExpr
    ret_struct_info: StructInfo
    attrs: tuple = ()

    __hash__ = object.__hash__

    def __post_init__(self):
        object.__setattr__(self, "params", tuple(self.params))
        attrs = self.attrs.items() if isinstance(self.attrs, dict) else (self.attrs or ())
        object.__setattr__(self, "attrs", Pairs(tuple(attrs)))   # also read by key

    @property
    def struct_info(self) -> StructInfo:
        return ObjectStructInfo()

    def attr(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def with_attr(self, key: Any, value: Any = None) -> "Function":
        """A copy with the attribute ``key`` set to ``value`` (TVM's ``with_attr``; a dict
        sets several), in place when it was already there, else last."""
        out = self
        for k, v in (key.items() if isinstance(key, dict) else [(key, value)]):
            attrs = (tuple((a, v if a == k else b) for a, b in out.attrs)
                     if k in out.attrs.keys() else tuple(out.attrs) + ((k, v),))
            out = out.replace(attrs=attrs)
        return out

    def bindings(self):
        """Every binding of the body, in order."""
        for block in self.body.blocks:
            yield from block.bindings

    def script(self) -> str:
        from engine.ir import display
        return display.render("script", self)

    def show(self, **_style: Any) -> None:
        """Print the TVMScript text (TVM's ``show()``; style options accepted, ignored)."""
        print(self.script())


def call_tir(callee: Expr, args: Any, out_sinfo: StructInfo) -> Call:
    """``R.call_tir(callee, args, out_sinfo)`` (``callee`` a GlobalVar or ExternFunc)."""
    args_t = args if isinstance(args, Tuple) else Tuple(tuple(args))
    return Call(Op("relax.call_tir"), (callee, args_t), (), (out_sinfo,), out_sinfo)


def call_dps_packed(callee: ExternFunc, args: Any, out_sinfo: StructInfo) -> Call:
    """``R.call_dps_packed("env.f", args, out_sinfo)``."""
    args_t = args if isinstance(args, Tuple) else Tuple(tuple(args))
    return Call(Op("relax.call_dps_packed"), (callee, args_t), (), (out_sinfo,), out_sinfo)


def const(value: Any, dtype: str | None = None) -> Constant:
    """``relax.const(value, dtype)``: a constant tensor from a number or an array."""
    return Constant.of(value, dtype)

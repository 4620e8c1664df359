"""Expressions of the IR (TVM's PrimExpr family).

Arithmetic operators build nodes, as in TVM::

    i = Var("i", "int32")
    e = i * 4 + 1          # Add(Mul(i, IntImm(4)), IntImm(1))
    e // 4, e % 4          # FloorDiv, FloorMod
    i < 8                  # LT  (use engine.ir.structural_equal for structural ==)

``a == b`` builds an :class:`EQ` node whose truth value is ``a is b`` (TVM's rule),
so ``x in list_of_vars`` and dict look-ups keep working by identity.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from .dtype import (TypeInfo, check_dtype, element_of, is_bool, is_float, is_int, lanes_of,
                    with_lanes)
from .node import Node, node

__all__ = [
    "PrimExpr", "Var", "IntImm", "FloatImm", "StringImm", "Add", "Sub", "Mul", "Div", "Mod",
    "FloorDiv", "FloorMod", "Min", "Max", "EQ", "NE", "LT", "LE", "GT", "GE", "And", "Or",
    "Not", "Select", "Cast", "Call", "BufferLoad", "BufferField", "Ramp", "Broadcast", "Let",
    "BinaryOp", "CmpOp", "const", "convert", "INTRINSICS", "OPAQUE_CALLS", "BITWISE",
    "bitwise",
]


class PrimExpr(Node):
    """Base class: every expression has a ``dtype`` string."""

    __slots__ = ()
    dtype: str

    # identity semantics for hashing; == builds an EQ node
    __hash__ = object.__hash__

    def __bool__(self):
        raise TypeError(
            f"cannot use the symbolic expression {self!r} as a Python bool; "
            "compare structure with engine.structural_equal")

    # arithmetic -----------------------------------------------------------
    def __add__(self, o): return _binary(Add, self, o)
    def __radd__(self, o): return _binary(Add, o, self)
    def __sub__(self, o): return _binary(Sub, self, o)
    def __rsub__(self, o): return _binary(Sub, o, self)
    def __mul__(self, o): return _binary(Mul, self, o)
    def __rmul__(self, o): return _binary(Mul, o, self)
    def __truediv__(self, o): return _binary(Div, self, o)
    def __rtruediv__(self, o): return _binary(Div, o, self)
    def __floordiv__(self, o): return _binary(FloorDiv, self, o)
    def __rfloordiv__(self, o): return _binary(FloorDiv, o, self)
    def __mod__(self, o): return _binary(FloorMod, self, o)
    def __rmod__(self, o): return _binary(FloorMod, o, self)
    def __neg__(self): return _binary(Sub, const(0, self.dtype), self)
    def __lt__(self, o): return _binary(LT, self, o)
    def __le__(self, o): return _binary(LE, self, o)
    def __gt__(self, o): return _binary(GT, self, o)
    def __ge__(self, o): return _binary(GE, self, o)
    def __eq__(self, o): return _binary(EQ, self, o)  # type: ignore[override]
    def __ne__(self, o): return _binary(NE, self, o)  # type: ignore[override]
    def __and__(self, o): return _logic("bitwise_and", And, self, o)
    def __rand__(self, o): return _logic("bitwise_and", And, o, self)
    def __or__(self, o): return _logic("bitwise_or", Or, self, o)
    def __ror__(self, o): return _logic("bitwise_or", Or, o, self)
    def __xor__(self, o): return bitwise("bitwise_xor", self, o)
    def __rxor__(self, o): return bitwise("bitwise_xor", o, self)
    def __lshift__(self, o): return bitwise("shift_left", self, o)
    def __rlshift__(self, o): return bitwise("shift_left", o, self)
    def __rshift__(self, o): return bitwise("shift_right", self, o)
    def __rrshift__(self, o): return bitwise("shift_right", o, self)

    def __invert__(self):
        return bitwise("bitwise_not", self) if is_int(self.dtype) else Not(self)

    @property
    def ty(self) -> Any:
        """TVM 0.27's type of an expression (its ``dtype``)."""
        return TypeInfo(self.dtype)

    def astype(self, dtype: str) -> "PrimExpr":
        return self if self.dtype == dtype else Cast(dtype, self)


@node
class Var(PrimExpr):
    """A variable (loop variable, block iter variable, ...). Compared by identity."""

    name: str
    dtype: str = "int32"

    def __post_init__(self):
        check_dtype(self.dtype)

    @property
    def ty(self) -> Any:
        """TVM 0.27's type of a variable (its ``dtype``)."""
        return TypeInfo(self.dtype)


@node
class IntImm(PrimExpr):
    dtype: str
    value: int

    def __post_init__(self):
        check_dtype(self.dtype)
        object.__setattr__(self, "value", int(self.value))

    def __int__(self) -> int:
        """``int(IntImm)`` is its value, as TVM's (a buffer's constant shape read as ints)."""
        return self.value


@node
class FloatImm(PrimExpr):
    dtype: str
    value: float

    def __post_init__(self):
        check_dtype(self.dtype)
        object.__setattr__(self, "value", float(self.value))


@node
class StringImm(PrimExpr):
    value: str
    dtype: str = "handle"


class BinaryOp(PrimExpr):
    """Arithmetic binary operation; ``dtype`` is that of its operands."""

    __slots__ = ()
    a: PrimExpr
    b: PrimExpr
    symbol = "?"

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.a.dtype


class CmpOp(BinaryOp):
    """Comparison; ``dtype`` is bool (with the lanes of its operands)."""

    __slots__ = ()

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return with_lanes("bool", lanes_of(self.a.dtype))


@node
class Add(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "+"


@node
class Sub(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "-"


@node
class Mul(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "*"


@node
class Div(BinaryOp):
    """True division for floats, truncating division for integers (C semantics)."""

    a: PrimExpr
    b: PrimExpr
    symbol = "/"


@node
class Mod(BinaryOp):
    """Truncating modulo (C ``%``); the script writes ``T.truncmod``."""

    a: PrimExpr
    b: PrimExpr
    symbol = "%"


@node
class FloorDiv(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "//"


@node
class FloorMod(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "%"


@node
class Min(BinaryOp):
    a: PrimExpr
    b: PrimExpr


@node
class Max(BinaryOp):
    a: PrimExpr
    b: PrimExpr


@node
class EQ(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "=="

    def __bool__(self):  # TVM: (x == y) is truthy iff same object; constants fold
        return _same(self.a, self.b)


@node
class NE(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "!="

    def __bool__(self):
        return not _same(self.a, self.b)


def _same(a: PrimExpr, b: PrimExpr) -> bool:
    """The truth of ``a == b`` in Python: the same object, or two constants of the same
    value (TVM folds ``IntImm(1) == T.bool(True)`` to true before asking)."""
    if a is b:
        return True
    const = (IntImm, FloatImm)
    a = a.value if type(a) is Cast and type(a.value) in const else a  # a constant widened
    b = b.value if type(b) is Cast and type(b.value) in const else b  # by unification
    return type(a) in const and type(b) in const and a.value == b.value


@node
class LT(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "<"


@node
class LE(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "<="


@node
class GT(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = ">"


@node
class GE(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = ">="


@node
class And(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "and"


@node
class Or(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "or"


@node
class Not(PrimExpr):
    a: PrimExpr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.a.dtype


@node
class Select(PrimExpr):
    """``T.Select(cond, a, b)``: both branches evaluated, value chosen."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.true_value.dtype


@node
class Cast(PrimExpr):
    dtype: str
    value: PrimExpr

    def __post_init__(self):
        check_dtype(self.dtype)


# name -> number of arguments; result dtype follows the first argument unless noted.
INTRINSICS: dict[str, int] = {
    "exp": 1, "exp2": 1, "log": 1, "log2": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1,
    "sigmoid": 1, "fabs": 1, "abs": 1, "floor": 1, "ceil": 1, "round": 1, "trunc": 1,
    "sin": 1, "cos": 1, "erf": 1, "pow": 2, "fma": 3, "if_then_else": 3,
    "likely": 1, "bitwise_and": 2, "bitwise_or": 2, "bitwise_xor": 2, "bitwise_not": 1,
    "shift_left": 2, "shift_right": 2,
}
#: the integer intrinsics (TVM's ``T.bitwise_and`` .. ``T.shift_right``; ``a & b``, ``a << b``
#: on integer expressions): two's-complement bits of one integer dtype; a shift by a
#: negative amount or by the width or more is undefined (the interpreter refuses it),
#: ``shift_right`` of a signed value is arithmetic
BITWISE = frozenset({"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
                     "shift_left", "shift_right"})


#: TVM's builtins that opaque code uses -> the dtype of their result (None: given by the
#: call, ``T.type_annotation("float32")``). The engine reads, prints, compares and
#: schedules them; of them it compiles only ``assume`` (a fact about the inputs the
#: program may rely on: it computes nothing). ``tvm_access_ptr(type_annotation, B.data,
#: offset, extent, mask)`` is a pointer into B's storage for mask 1 (read), 2 (write) or 3.
OPAQUE_CALLS: dict[str, str | None] = {
    "tvm_access_ptr": "handle", "type_annotation": None, "tvm_mma_sync": "handle",
    "tvm_bmma_sync": "handle", "tvm_fill_fragment": "handle",
    "tvm_load_matrix_sync": "handle", "tvm_store_matrix_sync": "handle", "assume": "bool",
}


@node
class Call(PrimExpr):
    """Intrinsic call, e.g. ``T.exp(x)``: ``op`` names an entry of :data:`INTRINSICS`."""

    dtype: str
    op: str
    args: tuple

    def __post_init__(self):
        check_dtype(self.dtype)
        object.__setattr__(self, "args", tuple(self.args))


@node
class BufferLoad(PrimExpr):
    """``A[i, j]``: the element of a buffer (a vector when an index is a Ramp)."""

    buffer: Any  # engine.ir.buffer.Buffer
    indices: tuple

    def __post_init__(self):
        object.__setattr__(self, "indices", tuple(convert(i) for i in self.indices))

    @property
    def dtype(self) -> str:  # type: ignore[override]
        lanes = 1
        for idx in self.indices:
            lanes = max(lanes, lanes_of(idx.dtype))
        return with_lanes(self.buffer.dtype, lanes)


@node
class BufferField(PrimExpr):
    """``B.data`` (the address of the buffer's storage: a ``handle``) or ``B.elem_offset``
    (the offset of its first element in that storage), as opaque code uses them:
    ``T.tvm_access_ptr(T.type_annotation("float32"), B.data, 0, 128, 1)`` (what
    ``B.access_ptr("r")`` builds), ``T.call_extern("f", C.data, C.elem_offset, ...)``.

    A buffer used so is *opaquely* accessed: nothing says which elements the code behind
    the address reads or writes, so the schedule treats the whole buffer as read and
    written (unless a ``T.tvm_access_ptr`` says which), and refuses to inline it. The
    engine compiles ``elem_offset`` (a constant, or the offset of a ``T.match_buffer``
    view) but not ``data``: only opaque calls take it, which it cannot compile."""

    buffer: Any  # engine.ir.buffer.Buffer
    field: str   # "data" | "elem_offset"

    FIELDS = ("data", "elem_offset")

    def __post_init__(self):
        if self.field not in self.FIELDS:
            raise ValueError(f"a buffer has no field {self.field!r} here (only "
                             f"{', '.join(self.FIELDS)})")

    @property
    def dtype(self) -> str:  # type: ignore[override]
        if self.field == "data":
            return "handle"
        return "int64" if any(getattr(d, "dtype", "int32") == "int64"
                              for d in self.buffer.shape) else "int32"


@node
class Ramp(PrimExpr):
    """Vector ``[base, base + stride, ..., base + (lanes-1)*stride]`` (after vectorize)."""

    base: PrimExpr
    stride: PrimExpr
    lanes: int

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return with_lanes(self.base.dtype, self.lanes)


@node
class Broadcast(PrimExpr):
    """Vector of ``lanes`` copies of a scalar."""

    value: PrimExpr
    lanes: int

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return with_lanes(self.value.dtype, self.lanes)


@node
class Let(PrimExpr):
    var: Var
    value: PrimExpr
    body: PrimExpr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.body.dtype


# ---------------------------------------------------------------------------
def const(value: Any, dtype: str | None = None) -> PrimExpr:
    """A constant of the given dtype (inferred from the Python value when omitted)."""
    if isinstance(value, PrimExpr):
        return value if dtype is None else value.astype(dtype)
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32" if -2**31 <= value < 2**31 else "int64"
        elif isinstance(value, float):
            dtype = "float32"
        else:
            raise TypeError(f"cannot make an IR constant from {value!r}")
    if is_float(dtype):
        return FloatImm(dtype, float(value))
    if is_int(dtype) or is_bool(dtype):
        if isinstance(value, float):
            if not value.is_integer() and not math.isinf(value):
                raise TypeError(f"{value!r} is not an integer constant for dtype {dtype}")
        return IntImm(dtype, int(value))
    raise TypeError(f"cannot make a constant of dtype {dtype}")


def convert(value: Any, dtype_hint: str | None = None) -> PrimExpr:
    """Python number/bool or PrimExpr -> PrimExpr (numbers take ``dtype_hint`` if compatible)."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, bool):
        return IntImm("bool", int(value))
    if isinstance(value, int):
        if dtype_hint is not None and (is_int(dtype_hint) or is_float(dtype_hint)):
            return const(value, element_of(dtype_hint))
        return const(value)
    if isinstance(value, float):
        if dtype_hint is not None and is_float(dtype_hint):
            return FloatImm(element_of(dtype_hint), value)
        return FloatImm("float32", value)
    raise TypeError(f"cannot use {value!r} ({type(value).__name__}) as an IR expression")


_INT_RANK = {"int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 3, "uint32": 3,
             "int64": 4, "uint64": 4}


def _unify(a: PrimExpr, b: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
    """Insert casts so both operands share a dtype (int -> wider int -> float)."""
    ta, tb = a.dtype, b.dtype
    if ta == tb:
        return a, b
    ea, eb = element_of(ta), element_of(tb)
    if ea == eb:
        return a, b  # differing lanes: codegen broadcasts
    if is_float(ta) and not is_float(tb):
        return a, Cast(with_lanes(ea, lanes_of(tb)), b)
    if is_float(tb) and not is_float(ta):
        return Cast(with_lanes(eb, lanes_of(ta)), a), b
    if is_float(ta) and is_float(tb):
        wide = ea if int(ea[5:]) >= int(eb[5:]) else eb
    elif is_bool(ta) or is_bool(tb):
        wide = eb if is_bool(ta) else ea
    else:
        wide = ea if _INT_RANK.get(ea, 0) >= _INT_RANK.get(eb, 0) else eb
    return (a if ea == wide else Cast(with_lanes(wide, lanes_of(ta)), a),
            b if eb == wide else Cast(with_lanes(wide, lanes_of(tb)), b))


def _binary(cls, a, b) -> PrimExpr:
    if not isinstance(a, PrimExpr):
        a = convert(a, b.dtype if isinstance(b, PrimExpr) else None)
    if not isinstance(b, PrimExpr):
        b = convert(b, a.dtype)
    a, b = _unify(a, b)
    return cls(a, b)


def bitwise(op: str, a: Any, b: Any = None) -> "Call":
    """``T.<op>(a, b)`` of :data:`BITWISE` (``T.bitwise_not(a)`` with one operand): the
    operands integers, unified to one dtype as arithmetic does."""
    if b is None:
        a = convert(a)
        if not is_int(a.dtype):
            raise TypeError(f"{op} needs an integer, got {a.dtype}")
        return Call(a.dtype, op, (a,))
    if not isinstance(a, PrimExpr):
        a = convert(a, b.dtype if isinstance(b, PrimExpr) else None)
    if not isinstance(b, PrimExpr):
        b = convert(b, a.dtype)
    a, b = _unify(a, b)
    if not (is_int(a.dtype) and is_int(b.dtype)):
        raise TypeError(f"{op} needs integers, got {a.dtype} and {b.dtype}")
    return Call(a.dtype if lanes_of(a.dtype) >= lanes_of(b.dtype) else b.dtype, op, (a, b))


def _logic(op: str, cls, a: Any, b: Any) -> PrimExpr:
    """``a & b`` / ``a | b``: logical on booleans, bitwise on integers (as TVM)."""
    da = a.dtype if isinstance(a, PrimExpr) else ("bool" if isinstance(a, bool) else "int32")
    db = b.dtype if isinstance(b, PrimExpr) else ("bool" if isinstance(b, bool) else "int32")
    if is_int(da) and is_int(db):
        return bitwise(op, a, b)
    return _binary(cls, a, b)


def binary(cls, a, b) -> PrimExpr:
    """Public builder: ``binary(Min, x, 0)`` with dtype unification."""
    return _binary(cls, a, b)


def is_const_int(e: Any, value: int | None = None) -> bool:
    if isinstance(e, int) and not isinstance(e, bool):
        return value is None or e == value
    return isinstance(e, IntImm) and (value is None or e.value == value)


def as_const_int(e: Any) -> int | None:
    if isinstance(e, int) and not isinstance(e, bool):
        return e
    if isinstance(e, IntImm):
        return e.value
    return None


def seq_convert(values: Sequence[Any]) -> tuple:
    return tuple(convert(v) for v in values)

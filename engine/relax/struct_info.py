"""What a Relax value is: the *struct info* of tensors, tuples and shapes.

A tensor's shape is a tuple of sizes (or unknown, with only its number of dimensions, as
in the course's printed ``Tensor(None, "float32", ndim = 2)``); a size is an int or a
*symbolic size*, an ``int64`` :class:`engine.ir.expr.Var` (``R.Tensor(("n", 784),
"float32")``: one variable per name in a function, bound by the virtual machine from the
arguments' shapes).

* :class:`TensorStructInfo` — ``Tensor((1, 784), "float32")`` / ``R.Tensor((1, 784),
  dtype="float32")``;
* :class:`TupleStructInfo` — ``R.Tuple(R.Tensor(...), ...)``;
* :class:`ShapeStructInfo` — the value of ``R.shape([2, 3])`` (a shape as a value);
* :class:`ObjectStructInfo` — anything else (what ``R.Object`` stands for).
"""
from __future__ import annotations

from engine.ir import expr as E
from engine.ir.node import Node, node


def _size(s: object) -> object:
    """A size: an int, or a symbolic size (an integer Var) kept as it is."""
    return s if isinstance(s, E.Var) else int(s)


def same_dim(a: object, b: object) -> bool:
    """Two sizes are the same: equal ints, or the same symbolic variable."""
    if isinstance(a, E.Var) or isinstance(b, E.Var):
        return a is b
    return a == b


def same_shape(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None:
        return a is b
    return len(a) == len(b) and all(same_dim(x, y) for x, y in zip(a, b))


def is_symbolic(si: object) -> bool:
    """Does ``si`` (or one of its fields) have a symbolic size?"""
    if isinstance(si, TensorStructInfo):
        return si.shape is not None and any(isinstance(d, E.Var) for d in si.shape)
    if isinstance(si, TupleStructInfo):
        return any(is_symbolic(f) for f in si.fields)
    return False


def shape_text(shape: tuple) -> str:
    """``(n, 784)``: a shape as the messages write it."""
    items = [d.name if isinstance(d, E.Var) else str(d) for d in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


class StructInfo(Node):
    """Base of the struct infos."""

    __slots__ = ()


@node
class TensorStructInfo(StructInfo):
    """A tensor: ``shape`` (a tuple of ints, or None when unknown), ``dtype``, ``ndim``
    (-1 when unknown)."""

    shape: tuple | None
    dtype: str
    ndim: int = -1

    __hash__ = object.__hash__

    def __post_init__(self):
        if self.shape is not None:
            shape = tuple(_size(s) for s in self.shape)
            object.__setattr__(self, "shape", shape)
            if self.ndim not in (-1, len(shape)):
                raise ValueError(f"a tensor of shape {shape} has {len(shape)} dimensions, "
                                 f"not ndim={self.ndim}")
            object.__setattr__(self, "ndim", len(shape))

    @property
    def size(self) -> int:
        """The number of elements (the shape must be known and not symbolic)."""
        n = 1
        for s in self.shape or ():
            n *= s
        return n

    def describe(self) -> str:
        shape = "?" if self.shape is None else shape_text(self.shape)
        return f"{self.dtype} tensor of shape {shape}"


@node
class TupleStructInfo(StructInfo):
    """A tuple of values."""

    fields: tuple

    __hash__ = object.__hash__

    def __post_init__(self):
        object.__setattr__(self, "fields", tuple(self.fields))

    def describe(self) -> str:
        return "tuple of (" + ", ".join(f.describe() for f in self.fields) + ")"


@node
class ShapeStructInfo(StructInfo):
    """A shape used as a value (``R.shape([2, 3])``): its ``values``."""

    values: tuple

    __hash__ = object.__hash__

    def describe(self) -> str:
        return f"shape {self.values}"


@node
class ObjectStructInfo(StructInfo):
    """Any value (nothing more is known)."""

    __hash__ = object.__hash__

    def describe(self) -> str:
        return "object"


def same_struct_info(a: StructInfo, b: StructInfo) -> bool:
    """True when ``a`` and ``b`` describe the same values."""
    if type(a) is not type(b):
        return False
    if isinstance(a, TensorStructInfo):
        return same_shape(a.shape, b.shape) and a.dtype == b.dtype and a.ndim == b.ndim
    if isinstance(a, TupleStructInfo):
        return len(a.fields) == len(b.fields) and all(
            same_struct_info(x, y) for x, y in zip(a.fields, b.fields))
    if isinstance(a, ShapeStructInfo):
        return a.values == b.values
    return True


def fits(value: StructInfo, declared: StructInfo) -> bool:
    """True when a value described by ``value`` may be used where ``declared`` is asked
    (an unknown shape or ndim in ``declared`` accepts any)."""
    if isinstance(declared, ObjectStructInfo):
        return True
    if type(value) is not type(declared):
        return False
    if isinstance(declared, TensorStructInfo):
        if value.dtype != declared.dtype:
            return False
        if declared.shape is not None:
            return same_shape(value.shape, declared.shape)
        return declared.ndim == -1 or value.ndim in (-1, declared.ndim)
    if isinstance(declared, TupleStructInfo):
        return len(value.fields) == len(declared.fields) and all(
            fits(v, d) for v, d in zip(value.fields, declared.fields))
    if isinstance(declared, ShapeStructInfo):
        return value.values == declared.values
    return True

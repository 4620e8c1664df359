"""The ``T`` namespace for Python code written like the course::

    from engine.script import tir as T

    @T.prim_func
    def add_one(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in T.grid(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] + T.float32(1)

``@T.prim_func`` reads the function's source with :func:`inspect.getsource` and hands it to
the script parser; the body is never executed.  Every other name (``T.Buffer``, ``T.grid``,
``T.float32``, ...) is a harmless placeholder here: the real meaning comes from the parser.
They exist so that the decorated code imports cleanly (parameter annotations such as
``T.Buffer((8,), "float32")`` are evaluated by Python when the ``def`` runs).

A name the function's text uses without defining it may come from its Python
surroundings, as in TVM: a variable of an enclosing function (a closure's cell) or of the
module, when its value is a plain constant — a number, a string (``T.Buffer(14, dtype)``
with ``dtype = "int8"`` outside), a constant ``IntImm``/``FloatImm``, or a tuple/list of
those (a shape). The parser looks such a name up in that table of values; no text is
evaluated. A Python function of the surroundings may be *called* in the text, as TVM
allows: the parser calls it with the arguments' values (expressions, numbers, strings)
and uses the expression it returns — code of the caller's own module, which the parser of
a text (``engine.parse``: no surroundings) never runs.
"""
from __future__ import annotations

import inspect
import sys
import types
import textwrap
from typing import Any

from .errors import ScriptError

__all__ = ["prim_func", "Buffer", "handle"]


class _Placeholder:
    """Stands for a TVMScript name in imported code: callable, indexable, has attributes."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> "_Placeholder":
        return _Placeholder(f"{self._name}(...)")

    def __getitem__(self, item: Any) -> "_Placeholder":
        return _Placeholder(f"{self._name}[...]")

    def __getattr__(self, name: str) -> "_Placeholder":
        if name.startswith("__"):
            raise AttributeError(name)
        return _Placeholder(f"{self._name}.{name}")

    def __repr__(self) -> str:
        return f"T.{self._name}"


Buffer = _Placeholder("Buffer")
handle = _Placeholder("handle")


def _source_of(obj: Any) -> tuple[str, int, int, str | None]:
    """Dedented source, its first line number - 1, the removed indent, the file name."""
    try:
        lines, start = inspect.getsourcelines(obj)
    except (OSError, TypeError) as e:
        name = getattr(obj, "__qualname__", repr(obj))
        raise ScriptError(f"cannot read the source of {name} ({e}); define it in a .py file, "
                          "or pass the script text to engine.parse") from None
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = 0
    for a, b in zip(text.splitlines(), dedented.splitlines()):
        if b.strip():
            indent = len(a) - len(b)
            break
    try:
        filename = inspect.getsourcefile(obj)
    except TypeError:
        filename = None
    return dedented, max(start - 1, 0), indent, filename


def _namespaces(func: Any) -> set[str]:
    g = getattr(func, "__globals__", {}) or {}
    me = sys.modules[__name__]
    return {k for k, v in g.items() if v is me}


#: how deep and how long a captured tuple/list may be (a shape, a list of sizes)
_CAPTURE_DEPTH = 3
_CAPTURE_ITEMS = 64


def _plain(v: Any, depth: int = 0) -> bool:
    """Is ``v`` a value the parser may use for a captured name: a constant, or (at the top)
    a Python function, which the text may call to build an expression (TVM's helpers
    that return ``PrimExpr``s, ``f(4, A[vi], vi % 8, dtype="float16")``)?"""
    if isinstance(v, (bool, int, float, str)):
        return True
    if depth == 0 and isinstance(v, types.FunctionType):
        return True
    if isinstance(v, (tuple, list)):
        return depth < _CAPTURE_DEPTH and len(v) <= _CAPTURE_ITEMS and \
            all(_plain(x, depth + 1) for x in v)
    from engine.ir import expr as E
    return type(v) in (E.IntImm, E.FloatImm, E.StringImm)


def captured_names(func: Any) -> dict[str, Any]:
    """The plain constants (:func:`_plain`) ``func``'s text may name from outside: the
    variables of the enclosing functions it uses (its closure), over the module's
    globals."""
    out: dict[str, Any] = {}
    for k, v in (getattr(func, "__globals__", None) or {}).items():
        if isinstance(k, str) and _plain(v):
            out[k] = v
    code = getattr(func, "__code__", None)
    cells = getattr(func, "__closure__", None) or ()
    for name, cell in zip(getattr(code, "co_freevars", ()), cells):
        try:
            v = cell.cell_contents
        except ValueError:  # a cell not filled yet
            continue
        if _plain(v):
            out[name] = v
        else:
            out.pop(name, None)   # the closure's variable hides a global of that name
    return out


def prim_func(func: Any = None, **options: Any) -> Any:
    """Decorator: the decorated Python function's TVMScript body as a ``PrimFunc``.

    Also usable as ``@T.prim_func(private=True)``: a function without a global symbol, named
    by its key in ``IRModule({"main": f})`` (other options are accepted and ignored).
    Errors are :class:`ScriptError` with the line/column in the original file.
    """
    if func is None:
        return lambda f: prim_func(f, **options)
    from .parser import parse_function_source
    text, line_offset, indent, filename = _source_of(func)
    out = parse_function_source(text, _namespaces(func), line_offset, indent, filename,
                                captured=captured_names(func))
    return out.replace(private=True) if options.get("private") is True else out


_SCALARS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16", "float32", "float64", "bool"}


class _Scalar(_Placeholder):
    """``T.int32``, ``T.float32``, ... in imported code: a placeholder in annotations, and
    called on a number outside a prim_func (``T.int32(32)``, ``T.bool(True)``, as TVM's
    Python allows) the constant itself (IntImm / FloatImm)."""

    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], (bool, int, float)):
            from engine.ir import expr as E
            value = args[0]
            if self._name.startswith("float"):
                return E.FloatImm(self._name, float(value))
            return E.IntImm(self._name, int(value))
        return super().__call__(*args, **kwargs)


def _builders() -> dict:
    """``T.<name>`` called outside TVMScript (in a Python helper a prim_func's text calls,
    as TVM's ``lambda t, lo, hi: T.min(T.max(t, lo), hi)``): builds the expression."""
    from engine.ir import expr as E

    def two(cls):
        return lambda a, b: E.binary(cls, a, b)

    return {
        "min": two(E.Min), "max": two(E.Max), "floordiv": two(E.FloorDiv),
        "floormod": two(E.FloorMod), "truncdiv": two(E.Div), "truncmod": two(E.Mod),
        "Cast": lambda dtype, v: E.Cast(dtype, E.convert(v)),
        "cast": lambda v, dtype: E.Cast(dtype, E.convert(v)),
        "Select": lambda c, a, b: E.Select(E.convert(c), *_same_type(a, b)),
        "if_then_else": lambda c, a, b: E.Call(_same_type(a, b)[0].dtype, "if_then_else",
                                               (E.convert(c), *_same_type(a, b))),
    }


def _same_type(a: Any, b: Any) -> tuple:
    from engine.ir import expr as E
    if isinstance(a, E.PrimExpr) and not isinstance(b, E.PrimExpr):
        return a, E.convert(b, a.dtype)
    if isinstance(b, E.PrimExpr) and not isinstance(a, E.PrimExpr):
        return E.convert(a, b.dtype), b
    return E.convert(a), E.convert(b)


def __getattr__(name: str) -> Any:  # T.grid, T.float32, T.axis, ... in imported code
    if name.startswith("__"):
        raise AttributeError(name)
    if name in _SCALARS:
        return _Scalar(name)
    builder = _builders().get(name)
    if builder is not None:
        return builder
    return _Placeholder(name)

"""TVMScript parser: text -> IRModule, with Python's ``ast`` only (user text is never
compiled to code objects, evaluated or executed).

Accepted input (what the course notebooks, TVM's printers and our printer produce):

* a class decorated ``@tvm.script.ir_module`` / ``@I.ir_module`` / ``@ir_module`` holding
  ``@T.prim_func`` functions, or one or more bare ``@T.prim_func`` functions;
* leading ``import``/``from ... import`` lines (ignored; ``from tvm.script import tir as X``
  makes ``X`` a name of the tir namespace, besides the default ``T`` and ``tir``);
* parameters ``A: T.Buffer((128, 128), "float32")``, ``T.Buffer[(128, 128), "float32"]``,
  ``T.Buffer([128, 128], dtype="float32")``, or ``a: T.handle`` with
  ``A = T.match_buffer(a, (128, 128), "float32")``;
* ``T.block``/``T.sblock``, ``T.alloc_buffer``/``T.sblock_alloc_buffer``, ``T.axis.*``,
  ``T.init``, ``T.reads``/``T.writes`` (inferred when missing), ``T.where``, ``T.block_attr``,
  ``T.func_attr``, loops over ``T.grid``/``range``/``T.serial``/``T.parallel``/
  ``T.vectorized``/``T.unroll``, ``if``/``else``, ``T.evaluate``, let bindings
  (``x: T.int32 = v``, ``with T.LetStmt(v) as x:``), ``with T.allocate(...) as X:``.

Every problem raises :class:`ScriptError` with the line and column.
"""
from __future__ import annotations

import ast
import difflib
import math
import re
import warnings
from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.dtype import (DTypeError, SCALAR_DTYPES, is_bool, is_float, is_int, lanes_of,
                             split_lanes)
from engine.ir.function import IRModule, PrimFunc

from .errors import ScriptError
from .printer import call_result_dtype
from .regions import infer_block_regions

__all__ = ["parse", "parse_function_source", "ScriptError"]

_TRUE = None  # created lazily (IntImm("bool", 1))

_LOOP_KINDS = {"serial": S.ForKind.SERIAL, "range": S.ForKind.SERIAL,
               "parallel": S.ForKind.PARALLEL, "vectorized": S.ForKind.VECTORIZED,
               "unroll": S.ForKind.UNROLLED}

_DTYPE_HINT = "(use float32, float64, int32, int64, ...)"
_DTYPE_LIKE = re.compile(r"^(u?int|float|bool|handle)\w*$")

# T.<name> functions usable in expressions (value = how many positional args; None: any)
_EXPR_FUNCS = {
    "Cast": 2, "cast": 2, "Select": 3, "if_then_else": 3, "max": 2, "min": 2,
    "truncdiv": 2, "truncmod": 2, "floordiv": 2, "floormod": 2, "Ramp": 3, "Broadcast": 2,
    "call_extern": None, "call_intrin": None, "call_pure_extern": None, "Let": 3,
    "max_value": 1, "min_value": 1, "infinity": 1,
}
# T.<name> only meaningful as statements / loop iterators / declarations
_STMT_FUNCS = {
    "block", "sblock", "init", "reads", "writes", "where", "block_attr", "func_attr",
    "alloc_buffer", "sblock_alloc_buffer", "match_buffer", "evaluate", "grid", "serial",
    "parallel", "vectorized", "unroll", "axis", "axis.spatial", "axis.reduce", "axis.S",
    "axis.R", "axis.remap", "Buffer", "handle", "prim_func", "LetStmt", "allocate", "var",
}
_KNOWN_T = set(_EXPR_FUNCS) | _STMT_FUNCS | set(E.INTRINSICS) | set(SCALAR_DTYPES)

_BUFFER_KWARGS = {"dtype", "scope", "strides", "elem_offset", "align", "offset_factor",
                  "buffer_type", "axis_separators", "data"}

_AST_NAMES = {
    ast.Lambda: "a lambda", ast.IfExp: "a conditional expression (use T.Select or "
    "T.if_then_else)", ast.Dict: "a dict", ast.Set: "a set", ast.ListComp: "a list "
    "comprehension", ast.SetComp: "a set comprehension", ast.DictComp: "a dict comprehension",
    ast.GeneratorExp: "a generator", ast.Await: "await", ast.Yield: "yield",
    ast.YieldFrom: "yield from", ast.JoinedStr: "an f-string", ast.List: "a list",
    ast.Tuple: "a tuple", ast.Starred: "a starred expression", ast.Slice: "a slice",
    ast.NamedExpr: "an assignment expression (:=)",
}


def _true():
    global _TRUE
    if _TRUE is None:
        _TRUE = E.IntImm("bool", 1)
    return _TRUE


def _extent_of(mn: E.PrimExpr, end: E.PrimExpr) -> E.PrimExpr:
    """The extent of ``[mn, end)`` (the inverse of the printer's ``end_of``)."""
    if type(mn) is E.IntImm and type(end) is E.IntImm:
        return E.IntImm(end.dtype, end.value - mn.value)
    if type(mn) is E.IntImm and mn.value == 0:
        return end
    if type(end) is E.Add:
        from engine.ir.structural import structural_equal
        if structural_equal(end.a, mn):
            return end.b
    return E.binary(E.Sub, end, mn)


class _BlockCtx:
    __slots__ = ("name", "iter_vars", "iter_values", "predicate", "reads", "writes",
                 "annotations", "alloc_buffers", "init", "node")

    def __init__(self, name: str, node: ast.AST):
        self.name = name
        self.node = node
        self.iter_vars: list[S.IterVar] = []
        self.iter_values: list = []
        self.predicate = None
        self.reads = None
        self.writes = None
        self.annotations = None
        self.alloc_buffers: list[Buffer] = []
        self.init = None


class _Handle:
    """A ``T.handle`` parameter waiting for its ``T.match_buffer``."""

    __slots__ = ("name", "buffer")

    def __init__(self, name: str):
        self.name = name
        self.buffer: Buffer | None = None


class _Parser:
    def __init__(self, source: str, namespaces: set | None = None, line_offset: int = 0,
                 col_offset: int = 0, filename: str | None = None):
        self.source = source
        self.lines = source.splitlines()
        self.ns = {"T", "tir"} | set(namespaces or ())
        self.line_offset = line_offset
        self.col_offset = col_offset
        self.filename = filename
        self.current: ast.AST | None = None

    # ------------------------------------------------------------------ errors
    def err(self, node: Any, msg: str) -> ScriptError:
        line = getattr(node, "lineno", None)
        col = getattr(node, "col_offset", None)
        if line is not None and col is not None:
            text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
            col = len(text.encode("utf-8")[:col].decode("utf-8", errors="replace")) + 1
            return ScriptError(msg, line + self.line_offset, col + self.col_offset,
                               self.filename)
        return ScriptError(msg, None if line is None else line + self.line_offset, None,
                           self.filename)

    # ------------------------------------------------------------------ scopes
    def lookup(self, name: str) -> Any:
        for scope in reversed(self.scopes):
            v = scope.get(name)
            if v is not None:
                return v
        return None

    def declare(self, name: str, value: Any) -> None:
        self.scopes[-1][name] = value

    # ------------------------------------------------------------------ namespace
    def tname(self, node: Any) -> str | None:
        """``T.axis.remap`` -> "axis.remap"; builtins -> "builtin.<name>"; else None."""
        parts = []
        while type(node) is ast.Attribute:
            parts.append(node.attr)
            node = node.value
        if type(node) is not ast.Name:
            return None
        if node.id in self.ns and parts:
            return ".".join(reversed(parts))
        if not parts and node.id in ("range", "max", "min", "abs") and \
                self.lookup(node.id) is None:
            return "builtin." + node.id
        return None

    def dotted(self, node: Any) -> str:
        parts = []
        while type(node) is ast.Attribute:
            parts.append(node.attr)
            node = node.value
        if type(node) is ast.Name:
            parts.append(node.id)
            return ".".join(reversed(parts))
        return ""

    def unknown_t(self, node: Any, name: str) -> ScriptError:
        base = name.split(".")[0]
        if base not in _KNOWN_T and (_DTYPE_LIKE.match(base) or difflib.get_close_matches(
                base, SCALAR_DTYPES, n=1, cutoff=0.8)):
            return self.dtype_error(node, base)
        close = difflib.get_close_matches(name, sorted(_KNOWN_T), n=1)
        hint = f"; did you mean T.{close[0]}?" if close else ""
        return self.err(node, f"unknown function T.{name}{hint}")

    def dtype_error(self, node: Any, s: str) -> ScriptError:
        close = difflib.get_close_matches(str(s), SCALAR_DTYPES, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return self.err(node, f"unknown dtype {str(s)!r} {_DTYPE_HINT}{hint}")

    def dtype(self, node: Any, s: Any) -> str:
        if not isinstance(s, str):
            raise self.err(node, f"a dtype must be a string such as \"float32\", got {s!r}")
        try:
            split_lanes(s)
        except DTypeError:
            raise self.dtype_error(node, s) from None
        return s

    def dtype_arg(self, node: ast.AST) -> str:
        """A dtype written as "float32" or as T.float32."""
        if type(node) is ast.Constant:
            return self.dtype(node, node.value)
        f = self.tname(node)
        if f is not None:
            return self.dtype(node, f)
        raise self.err(node, "expected a dtype such as \"float32\"")

    # ------------------------------------------------------------------ arguments
    def call_args(self, call: ast.Call, fname: str, nmin: int, nmax: int | None,
                  kwargs: set = frozenset()) -> tuple[list, dict]:
        for a in call.args:
            if type(a) is ast.Starred:
                raise self.err(a, f"T.{fname} does not accept *arguments")
        kw = {}
        for k in call.keywords:
            if k.arg is None:
                raise self.err(k, f"T.{fname} does not accept **arguments")
            if k.arg not in kwargs:
                allowed = ", ".join(sorted(kwargs)) or "none"
                raise self.err(k, f"T.{fname} has no argument {k.arg!r} (allowed: {allowed})")
            kw[k.arg] = k.value
        n = len(call.args)
        if n < nmin or (nmax is not None and n > nmax):
            if nmax is None:
                want = f"at least {nmin}"
            elif nmin == nmax:
                want = str(nmin)
            else:
                want = f"{nmin} to {nmax}"
            raise self.err(call, f"T.{fname} takes {want} positional argument(s), got {n}")
        return list(call.args), kw

    def int_const(self, node: ast.AST, what: str) -> int:
        v = self.expr(node)
        if isinstance(v, bool) or not isinstance(v, int):
            if type(v) is E.IntImm and not is_bool(v.dtype):
                return v.value
            raise self.err(node, f"{what} must be an integer constant")
        return v

    def literal(self, node: ast.AST) -> Any:
        """Annotation / attribute values: numbers, strings, booleans, lists, expressions."""
        t = type(node)
        if t is ast.Constant:
            if node.value is None or isinstance(node.value, (bool, int, float, str)):
                return node.value
            raise self.err(node, f"unsupported constant {node.value!r}")
        if t in (ast.List, ast.Tuple):
            return tuple(self.literal(x) for x in node.elts)
        if t is ast.Dict:
            raise self.err(node, "nested dicts are not supported as attribute values")
        if t is ast.UnaryOp and type(node.op) is ast.USub and type(node.operand) is \
                ast.Constant and isinstance(node.operand.value, (int, float)) and \
                not isinstance(node.operand.value, bool):
            return -node.operand.value
        v = self.expr(node)
        if type(v) is E.FloatImm and v.dtype == "float64" and (math.isinf(v.value)
                                                               or math.isnan(v.value)):
            return v.value
        return v

    def attr_dict(self, node: ast.AST, fname: str) -> tuple:
        if type(node) is not ast.Dict:
            raise self.err(node, f"T.{fname} expects a dict such as {{\"key\": value}}")
        out = []
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise self.err(v, "**unpacking is not supported in attribute dicts")
            if type(k) is not ast.Constant or not isinstance(k.value, str):
                raise self.err(k, "attribute keys must be strings")
            out.append((k.value, self.literal(v)))
        return tuple(out)

    # ------------------------------------------------------------------ expressions
    def expr(self, n: ast.AST) -> Any:
        """Parse an expression: a PrimExpr, or a plain Python number/bool/str constant."""
        try:
            return self._expr(n)
        except (ScriptError, RecursionError):
            raise
        except (TypeError, ValueError, ArithmeticError, AttributeError, KeyError,
                IndexError) as e:
            raise self.err(n, str(e)) from None

    def prim(self, n: ast.AST, hint: str | None = None) -> E.PrimExpr:
        v = self.expr(n)
        return self.to_prim(n, v, hint)

    def to_prim(self, n: ast.AST, v: Any, hint: str | None = None) -> E.PrimExpr:
        if isinstance(v, E.PrimExpr):
            return v
        if isinstance(v, str):
            return E.StringImm(v)
        if isinstance(v, (bool, int, float)):
            try:
                return E.convert(v, hint)
            except (TypeError, ValueError) as e:
                raise self.err(n, str(e)) from None
        if isinstance(v, Buffer):
            raise self.err(n, f"buffer {v.name!r} used as a value; index it like {v.name}[...]")
        raise self.err(n, "expected an expression")

    def check_value(self, n: ast.AST, v: Any) -> None:
        """Raise a helpful error when ``v`` is not a number or an expression."""
        if isinstance(v, Buffer):
            raise self.err(n, f"buffer {v.name!r} used as a value; index it like "
                              f"{v.name}[...]")
        if isinstance(v, str):
            raise self.err(n, f"expected a number or an expression, got the string {v!r}")

    def index_expr(self, n: ast.AST) -> E.PrimExpr:
        v = self.prim(n)
        if not (is_int(v.dtype)):
            raise self.err(n, f"buffer indices must be integers, got an expression of dtype "
                              f"{v.dtype}")
        return v

    def _expr(self, n: ast.AST) -> Any:
        self.current = n
        t = type(n)
        if t is ast.Constant:
            v = n.value
            if isinstance(v, (bool, int, float, str)):
                return v
            raise self.err(n, f"unsupported constant {v!r}")
        if t is ast.Name:
            v = self.lookup(n.id)
            if v is None:
                if n.id in self.ns:
                    raise self.err(n, f"{n.id!r} is the TVMScript namespace, not a value")
                raise self.err(n, f"undefined name {n.id!r}")
            if isinstance(v, _Handle):
                raise self.err(n, f"{n.id!r} is a T.handle; use the buffer from T.match_buffer")
            return v
        if t is ast.BinOp:
            return self.binop(n)
        if t is ast.UnaryOp:
            v = self.expr(n.operand)
            op = type(n.op)
            if op is ast.USub:
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    return -v
                v = self.to_prim(n.operand, v)
                return E.binary(E.Sub, 0, v)
            if op is ast.UAdd:
                if isinstance(v, (int, float, E.PrimExpr)) and not isinstance(v, bool):
                    return v
                raise self.err(n, "unary + needs a number")
            if op is ast.Not or op is ast.Invert:
                v = self.to_prim(n.operand, v)  # `not False` stays a Not node (no folding)
                if op is ast.Invert and not is_bool(v.dtype):
                    raise self.err(n, "~ is only supported on booleans (bitwise not is not "
                                      "supported)")
                return E.Not(v)
        if t is ast.BoolOp:
            cls = E.And if type(n.op) is ast.And else E.Or
            vals = [self.to_prim(x, self.expr(x)) for x in n.values]
            out = vals[0]
            for v in vals[1:]:
                out = E.binary(cls, out, v)
            return out
        if t is ast.Compare:
            return self.compare(n)
        if t is ast.Call:
            return self.call(n)
        if t is ast.Subscript:
            return self.load(n)
        if t is ast.Attribute:
            f = self.tname(n)
            if f is not None:
                if f in SCALAR_DTYPES:
                    raise self.err(n, f"T.{f} is a dtype; write T.{f}(value) for a constant")
                if f not in _KNOWN_T:
                    raise self.unknown_t(n, f)
                raise self.err(n, f"T.{f} must be called")
            raise self.err(n, f"unsupported attribute access {self.dotted(n) or '...'!r}")
        what = _AST_NAMES.get(t, f"a {t.__name__} expression")
        raise self.err(n, f"unsupported expression: {what}")

    _BINOPS = {ast.Add: E.Add, ast.Sub: E.Sub, ast.Mult: E.Mul, ast.Div: E.Div,
               ast.FloorDiv: E.FloorDiv, ast.Mod: E.FloorMod}

    def binop(self, n: ast.BinOp) -> Any:
        a = self.expr(n.left)
        b = self.expr(n.right)
        op = type(n.op)
        cls = self._BINOPS.get(op)
        if cls is None:
            if op in (ast.BitAnd, ast.BitOr):
                cls = E.And if op is ast.BitAnd else E.Or
                a, b = self.to_prim(n.left, a), self.to_prim(n.right, b)
                if not (is_bool(a.dtype) and is_bool(b.dtype)):
                    raise self.err(n, "& and | are only supported on booleans")
                return E.binary(cls, a, b)
            sym = {ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitXor: "^",
                   ast.MatMult: "@"}.get(op, "?")
            raise self.err(n, f"the operator {sym} is not supported")
        for v, nd in ((a, n.left), (b, n.right)):
            if isinstance(v, str):
                raise self.err(nd, "strings cannot be used in arithmetic")
            if isinstance(v, Buffer):
                self.to_prim(nd, v)  # raises a helpful error
        if not isinstance(a, E.PrimExpr) and not isinstance(b, E.PrimExpr):
            a = self.to_prim(n.left, a)  # keep the node: constants are not folded
        return E.binary(cls, a, b)

    _CMPOPS = {ast.Eq: E.EQ, ast.NotEq: E.NE, ast.Lt: E.LT, ast.LtE: E.LE, ast.Gt: E.GT,
               ast.GtE: E.GE}

    def compare(self, n: ast.Compare) -> Any:
        left_node = n.left
        left = self.expr(n.left)
        out = None
        for op, right_node in zip(n.ops, n.comparators):
            cls = self._CMPOPS.get(type(op))
            if cls is None:
                raise self.err(n, f"the comparison {type(op).__name__} is not supported "
                                  "(use ==, !=, <, <=, >, >=)")
            right = self.expr(right_node)
            for v, nd in ((left, left_node), (right, right_node)):
                if isinstance(v, (str, Buffer)):
                    raise self.err(nd, "only numbers and expressions can be compared")
            a = left
            if not isinstance(a, E.PrimExpr) and not isinstance(right, E.PrimExpr):
                a = self.to_prim(left_node, a)
            c = E.binary(cls, a, right)
            out = c if out is None else E.binary(E.And, out, c)
            left, left_node = right, right_node
        return out

    def buffer_of(self, node: ast.AST, what: str = "index") -> Buffer:
        if type(node) is not ast.Name:
            raise self.err(node, f"only buffers can be indexed (write a buffer name before [...])")
        v = self.lookup(node.id)
        if v is None:
            raise self.err(node, f"undefined name {node.id!r}")
        if not isinstance(v, Buffer):
            raise self.err(node, f"{node.id!r} is not a buffer and cannot be indexed")
        return v

    def subscript_items(self, sl: ast.AST) -> list:
        if type(sl) is ast.Tuple:
            return list(sl.elts)
        return [sl]

    def indices(self, buf: Buffer, sub: ast.Subscript) -> tuple:
        items = self.subscript_items(sub.slice)
        if type(sub.slice) is ast.Tuple and not items:
            items = []
        for it in items:
            if type(it) is ast.Slice:
                raise self.err(it, "slices are only allowed in T.reads/T.writes regions")
        if len(items) != buf.ndim:
            raise self.err(sub, f"buffer {buf.name!r} has {buf.ndim} dimension(s) but is "
                                f"indexed with {len(items)} index(es)")
        return tuple(self.index_expr(it) for it in items)

    def load(self, n: ast.Subscript) -> E.PrimExpr:
        buf = self.buffer_of(n.value)
        return E.BufferLoad(buf, self.indices(buf, n))

    def call(self, n: ast.Call) -> Any:
        f = self.tname(n.func)
        if f is None:
            name = self.dotted(n.func)
            if type(n.func) is ast.Name:
                v = self.lookup(n.func.id)
                if v is not None:
                    raise self.err(n, f"{n.func.id!r} is not a function")
                raise self.err(n, f"unknown function {n.func.id!r}")
            raise self.err(n, f"unknown function {name or 'expression'!r} (TVMScript "
                              f"functions are spelled T.<name>)")
        if f.startswith("builtin."):
            b = f[8:]
            if b in ("max", "min"):
                args, _ = self.call_args(n, b, 2, 2)
                return self.minmax(n, E.Max if b == "max" else E.Min, args)
            if b == "abs":
                args, _ = self.call_args(n, b, 1, 1)
                return self.intrin(n, "abs", args, {})
            raise self.err(n, "range(...) can only be used as a loop iterator")
        # dtype constructors: T.float32(0), T.int64(5), T.float32(x) (a cast)
        if f in SCALAR_DTYPES or (_DTYPE_LIKE.match(f) and "x" in f):
            dtype = self.dtype(n.func, f)
            args, _ = self.call_args(n, f, 0, 1)
            if not args:
                raise self.err(n, f"T.{f}() declares a symbolic variable; use it as a "
                                  f"statement at the top of the function: n = T.{f}()")
            return self.constant(args[0], dtype)
        if f in E.INTRINSICS:
            args, kw = self.call_args(n, f, E.INTRINSICS[f], E.INTRINSICS[f], {"dtype"})
            return self.intrin(n, f, args, kw)
        if f in _EXPR_FUNCS:
            return getattr(self, "f_" + f)(n, f)
        if f in _STMT_FUNCS:
            raise self.err(n, f"T.{f}(...) cannot be used inside an expression")
        raise self.unknown_t(n.func, f)

    def constant(self, node: ast.AST, dtype: str) -> E.PrimExpr:
        v = self.expr(node)
        if isinstance(v, E.PrimExpr):
            return v if v.dtype == dtype else E.Cast(dtype, v)
        if isinstance(v, str):
            if is_float(dtype) and v.strip().lower() in ("inf", "-inf", "+inf", "nan",
                                                         "infinity", "-infinity"):
                return E.FloatImm(dtype, float(v))
            raise self.err(node, f"T.{dtype} needs a number, got the string {v!r}")
        if isinstance(v, (int, float, bool)):
            if is_float(dtype):
                return E.FloatImm(dtype, float(v))
            if isinstance(v, float):
                if not v.is_integer():
                    raise self.err(node, f"T.{dtype} needs an integer, got {v!r}")
                v = int(v)
            if is_bool(dtype):
                return E.IntImm(dtype, int(bool(v)))
            if dtype == "handle":
                raise self.err(node, "handle constants are not supported")
            return E.IntImm(dtype, int(v))
        raise self.err(node, f"T.{dtype} needs a number")

    def minmax(self, n: ast.AST, cls, args: list) -> E.PrimExpr:
        """The two-operand node ``cls(args[0], args[1])`` of T.max, T.min, T.truncdiv,
        T.floormod, ... (two plain numbers: the first becomes a constant first)."""
        a, b = self.expr(args[0]), self.expr(args[1])
        if not isinstance(a, E.PrimExpr) and not isinstance(b, E.PrimExpr):
            a = self.to_prim(args[0], a)
        for v, nd in ((a, args[0]), (b, args[1])):
            self.check_value(nd, v)
        return E.binary(cls, a, b)

    def intrin(self, n: ast.Call, op: str, args: list, kw: dict) -> E.PrimExpr:
        vals = [self.expr(a) for a in args]
        first = next((v for v in vals if isinstance(v, E.PrimExpr)), None)
        hint = first.dtype if first is not None else None
        if op == "if_then_else" and len(vals) == 3:
            cond = self.to_prim(args[0], vals[0], "bool")
            tv, fv = vals[1], vals[2]
            h = tv.dtype if isinstance(tv, E.PrimExpr) else (
                fv.dtype if isinstance(fv, E.PrimExpr) else None)
            pe = [cond, self.to_prim(args[1], tv, h), self.to_prim(args[2], fv, h)]
        else:
            pe = [self.to_prim(a, v, hint) for a, v in zip(args, vals)]
        dtype = self.dtype_arg(kw["dtype"]) if "dtype" in kw else call_result_dtype(op, pe)
        if dtype is None:
            raise self.err(n, f"cannot infer the dtype of T.{op}; add dtype=\"...\"")
        return E.Call(dtype, op, tuple(pe))

    # T.<name>(...) expression functions ------------------------------------
    def f_Cast(self, n, f):
        args, _ = self.call_args(n, f, 2, 2)
        return E.Cast(self.dtype_arg(args[0]), self.prim(args[1]))

    def f_cast(self, n, f):
        args, kw = self.call_args(n, f, 1, 2, {"dtype"})
        if len(args) == 2:
            dnode = args[1]
        elif "dtype" in kw:
            dnode = kw["dtype"]
        else:
            raise self.err(n, "T.cast(value, dtype) needs a dtype")
        return E.Cast(self.dtype_arg(dnode), self.prim(args[0]))

    def f_Select(self, n, f):
        args, _ = self.call_args(n, f, 3, 3)
        c = self.prim(args[0], "bool")
        tv, fv = self.expr(args[1]), self.expr(args[2])
        h = tv.dtype if isinstance(tv, E.PrimExpr) else (
            fv.dtype if isinstance(fv, E.PrimExpr) else None)
        return E.Select(c, self.to_prim(args[1], tv, h), self.to_prim(args[2], fv, h))

    def f_if_then_else(self, n, f):
        args, kw = self.call_args(n, f, 3, 3, {"dtype"})
        return self.intrin(n, "if_then_else", args, kw)

    def f_max(self, n, f):
        args, _ = self.call_args(n, f, 2, 2)
        return self.minmax(n, E.Max, args)

    def f_min(self, n, f):
        args, _ = self.call_args(n, f, 2, 2)
        return self.minmax(n, E.Min, args)

    def _int_binary(self, n, f, cls):
        args, _ = self.call_args(n, f, 2, 2)
        return self.minmax(n, cls, args)

    def f_truncdiv(self, n, f):
        return self._int_binary(n, f, E.Div)

    def f_truncmod(self, n, f):
        return self._int_binary(n, f, E.Mod)

    def f_floordiv(self, n, f):
        return self._int_binary(n, f, E.FloorDiv)

    def f_floormod(self, n, f):
        return self._int_binary(n, f, E.FloorMod)

    def f_Ramp(self, n, f):
        args, _ = self.call_args(n, f, 3, 3)
        base = self.prim(args[0])
        stride = self.prim(args[1], base.dtype)
        lanes = self.int_const(args[2], "the number of lanes")
        if lanes < 1:
            raise self.err(args[2], "the number of lanes must be at least 1")
        return E.Ramp(base, stride, lanes)

    def f_Broadcast(self, n, f):
        args, _ = self.call_args(n, f, 2, 2)
        v = self.prim(args[0])
        lanes = self.int_const(args[1], "the number of lanes")
        if lanes < 1:
            raise self.err(args[1], "the number of lanes must be at least 1")
        return E.Broadcast(v, lanes)

    def _extern(self, n, f):
        args, _ = self.call_args(n, f, 2, None)
        dtype = self.dtype_arg(args[0])
        if type(args[1]) is not ast.Constant or not isinstance(args[1].value, str):
            raise self.err(args[1], f"T.{f} needs the function name as a string")
        vals = tuple(self.prim(a) for a in args[2:])
        return E.Call(dtype, args[1].value, vals)

    f_call_extern = f_call_intrin = f_call_pure_extern = _extern

    def f_Let(self, n, f):
        args, _ = self.call_args(n, f, 3, 3)
        if type(args[0]) is not ast.Name:
            raise self.err(args[0], "T.Let(x, value, body) needs a new variable name first")
        value = self.prim(args[1])
        var = E.Var(args[0].id, value.dtype)
        self.scopes.append({args[0].id: var})
        try:
            body = self.prim(args[2])
        finally:
            self.scopes.pop()
        return E.Let(var, value, body)

    def _limit(self, n, f):
        args, _ = self.call_args(n, f, 1, 1)
        dtype = self.dtype_arg(args[0])
        base = split_lanes(dtype)[0]
        if is_float(base):
            import numpy as np
            fi = np.finfo(base)
            if f == "infinity":
                return E.FloatImm(dtype, math.inf)
            return E.FloatImm(dtype, float(fi.max if f == "max_value" else fi.min))
        if is_int(base):
            if f == "infinity":
                raise self.err(n, f"T.infinity needs a float dtype, got {dtype}")
            bits = int(base.lstrip("uint"))
            if base.startswith("u"):
                lo, hi = 0, 2 ** bits - 1
            else:
                lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
            return E.IntImm(dtype, hi if f == "max_value" else lo)
        raise self.err(n, f"T.{f} needs a numeric dtype, got {dtype}")

    f_max_value = f_min_value = f_infinity = _limit

    # ------------------------------------------------------------------ buffers
    def shape(self, node: ast.AST) -> tuple:
        items = list(node.elts) if type(node) in (ast.Tuple, ast.List) else [node]
        out = []
        for it in items:
            v = self.expr(it)
            if isinstance(v, bool) or isinstance(v, (float, str)):
                raise self.err(it, f"buffer shapes must be integers, got {v!r}")
            if isinstance(v, int):
                if v < 0:
                    raise self.err(it, f"buffer shapes must not be negative, got {v}")
                out.append(E.IntImm("int32" if -2**31 <= v < 2**31 else "int64", v))
                continue
            if isinstance(v, Buffer) or not isinstance(v, E.PrimExpr):
                raise self.err(it, "buffer shapes must be integer constants")
            if not is_int(v.dtype):
                raise self.err(it, f"buffer shapes must be integers, got dtype {v.dtype}")
            if type(v) is E.IntImm:
                if v.value < 0:
                    raise self.err(it, f"buffer shapes must not be negative, got {v.value}")
            elif not self.symbolic_only(v):
                raise self.err(it, "buffer shapes must be constant (or use symbolic "
                                   "variables declared with n = T.int32() at the top of "
                                   "the function)")
            out.append(v)
        return tuple(out)

    def symbolic_only(self, e: E.PrimExpr) -> bool:
        from engine.ir.functor import collect_vars
        return all(id(v) in self.symbolic for v in collect_vars(e))

    def buffer_spec(self, call: ast.AST, fname: str, allow_positional_dtype: bool = True,
                    skip_first: bool = False) -> dict:
        """Shape/dtype/scope/... of T.Buffer(...), T.Buffer[...], T.alloc_buffer(...)."""
        if type(call) is ast.Subscript:  # T.Buffer[(128, 128), "float32"]
            items = self.subscript_items(call.slice)
            if type(call.slice) is ast.Tuple and len(items) >= 1 and \
                    type(items[0]) in (ast.Tuple, ast.List):
                args, kw = items, {}
            else:
                args, kw = [call.slice], {}
            if len(args) > 2:
                raise self.err(call, "T.Buffer[shape, dtype] takes a shape and a dtype")
        else:
            args, kw = self.call_args(call, fname, 1 + skip_first, 3 + skip_first,
                                      _BUFFER_KWARGS)
            if skip_first:
                args = args[1:]
        if not args:
            raise self.err(call, f"T.{fname} needs a shape")
        spec: dict[str, Any] = {"shape": self.shape(args[0])}
        if len(args) >= 2:
            if not allow_positional_dtype:
                raise self.err(args[1], f"T.{fname}: pass the dtype as dtype=\"...\"")
            if "dtype" in kw:
                raise self.err(args[1], f"T.{fname}: the dtype is given twice")
            spec["dtype"] = self.dtype_arg(args[1])
        if len(args) >= 3:
            spec["scope"] = self.scope_arg(args[2])
        if "dtype" in kw:
            spec["dtype"] = self.dtype_arg(kw["dtype"])
        if "scope" in kw:
            spec["scope"] = self.scope_arg(kw["scope"])
        if "strides" in kw:
            spec["strides"] = self.shape(kw["strides"])
        if "elem_offset" in kw:
            spec["elem_offset"] = self.int_const(kw["elem_offset"], "elem_offset")
        if "align" in kw:
            spec["align"] = self.int_const(kw["align"], "align")
        if "data" in kw:
            raise self.err(kw["data"], "T.Buffer(data=...) is not supported")
        return spec

    def scope_arg(self, node: ast.AST) -> str:
        if type(node) is not ast.Constant or not isinstance(node.value, str):
            raise self.err(node, "a storage scope must be a string such as \"local\"")
        from engine.ir.buffer import SCOPES
        if node.value not in SCOPES:
            raise self.err(node, f"unknown storage scope {node.value!r} (use "
                                 f"{', '.join(SCOPES)})")
        return node.value

    def make_buffer(self, node: ast.AST, name: str, spec: dict) -> Buffer:
        try:
            return Buffer(name, spec["shape"], spec.get("dtype", "float32"),
                          spec.get("scope", "global"), spec.get("strides", ()),
                          spec.get("elem_offset", 0), spec.get("align", 64))
        except (TypeError, ValueError) as e:
            raise self.err(node, str(e)) from None

    # ------------------------------------------------------------------ regions
    def region(self, node: ast.AST) -> BufferRegion:
        if type(node) is ast.Name:
            return BufferRegion.full(self.buffer_of(node))
        if type(node) is not ast.Subscript:
            raise self.err(node, "T.reads/T.writes expect buffer regions such as A[vi, 0:128]")
        buf = self.buffer_of(node.value)
        items = self.subscript_items(node.slice)
        if len(items) != buf.ndim:
            raise self.err(node, f"buffer {buf.name!r} has {buf.ndim} dimension(s) but the "
                                 f"region has {len(items)}")
        ranges = []
        for d, it in enumerate(items):
            if type(it) is ast.Slice:
                if it.step is not None:
                    raise self.err(it, "region slices cannot have a step")
                lo = self.index_expr(it.lower) if it.lower is not None else \
                    E.IntImm(buf.shape[d].dtype, 0)
                hi = self.index_expr(it.upper) if it.upper is not None else buf.shape[d]
                if type(lo) is not E.IntImm and type(hi) is E.IntImm:
                    hi = E.IntImm(lo.dtype, hi.value) if hi.dtype != lo.dtype else hi
                ranges.append(Range(lo, _extent_of(lo, hi)))
            else:
                mn = self.index_expr(it)
                ranges.append(Range(mn, E.IntImm(mn.dtype, 1)))
        return BufferRegion(buf, tuple(ranges))

    def regions(self, call: ast.Call, fname: str) -> tuple:
        args, _ = self.call_args(call, fname, 0, None)
        out = []
        for a in args:
            if type(a) in (ast.List, ast.Tuple):
                out.extend(self.region(x) for x in a.elts)
            else:
                out.append(self.region(a))
        return tuple(out)

    # ------------------------------------------------------------------ statements
    def block_ctx(self, node: ast.AST, what: str) -> _BlockCtx:
        if not self.blocks:
            raise self.err(node, f"{what} must be inside a `with T.block(...)` statement")
        return self.blocks[-1]

    def stmts(self, nodes: list) -> Any:
        """Parse a statement list into one Stmt (Evaluate(0) when empty)."""
        out = self.stmt_list(nodes)
        s = S.seq(*out)
        return s if s is not None else S.Evaluate(E.IntImm("int32", 0))

    def stmt_list(self, nodes: list) -> list:
        out: list = []
        i = 0
        while i < len(nodes):
            n = nodes[i]
            rest = nodes[i + 1:]
            try:
                r = self.stmt(n, rest)
            except (ScriptError, RecursionError):
                raise
            except (TypeError, ValueError, ArithmeticError, AttributeError, KeyError,
                    IndexError) as e:
                raise self.err(self.current or n, str(e)) from None
            if r is _CONSUMED:
                break
            if r is not None:
                if isinstance(r, tuple) and r and r[0] is _CONSUMED:
                    out.append(r[1])
                    break
                out.append(r)
            i += 1
        return out

    def stmt(self, n: ast.stmt, rest: list) -> Any:
        self.current = n
        t = type(n)
        if t is ast.For:
            return self.for_(n)
        if t is ast.With:
            return self.with_(n, rest)
        if t is ast.Assign:
            return self.assign(n, rest)
        if t is ast.AnnAssign:
            return self.annassign(n, rest)
        if t is ast.AugAssign:
            return self.augassign(n)
        if t is ast.Expr:
            return self.expr_stmt(n)
        if t is ast.If:
            cond = self.prim(n.test)
            self.scopes.append({})
            self.depth += 1
            then = self.stmts(n.body)
            self.scopes.pop()
            els = None
            if n.orelse:
                self.scopes.append({})
                els = self.stmts(n.orelse)
                self.scopes.pop()
            self.depth -= 1
            return S.IfThenElse(cond, then, els)
        if t is ast.Pass:
            return None
        names = {ast.While: "while loops", ast.Return: "return", ast.FunctionDef:
                 "nested functions", ast.ClassDef: "classes", ast.Import: "import",
                 ast.ImportFrom: "import", ast.Try: "try", ast.Raise: "raise",
                 ast.Assert: "assert", ast.Delete: "del", ast.Global: "global",
                 ast.Nonlocal: "nonlocal", ast.Break: "break", ast.Continue: "continue",
                 ast.AsyncFor: "async for", ast.AsyncWith: "async with",
                 ast.AsyncFunctionDef: "async functions"}
        what = names.get(t, type(n).__name__)
        raise self.err(n, f"unsupported statement: {what} cannot be used in TVMScript")

    def for_(self, n: ast.For) -> S.Stmt:
        if n.orelse:
            raise self.err(n.orelse[0], "for ... else is not supported")
        it = n.iter
        if type(it) is not ast.Call:
            raise self.err(it, "loops must iterate over T.grid(...), range(...), "
                               "T.serial(...), T.parallel(...), T.vectorized(...) or "
                               "T.unroll(...)")
        f = self.tname(it.func)
        if f == "builtin.range":
            f = "range"
        targets = n.target.elts if type(n.target) is ast.Tuple else [n.target]
        for tg in targets:
            if type(tg) is not ast.Name:
                raise self.err(tg, "loop variables must be plain names")
        if f == "grid":
            args, _ = self.call_args(it, "grid", 1, None)
            if len(args) != len(targets):
                raise self.err(it, f"T.grid has {len(args)} extent(s) but the loop "
                                   f"defines {len(targets)} variable(s)")
            loops = []
            for a in args:
                ext = self.loop_bound(a, "T.grid arguments")
                loops.append((E.IntImm(ext.dtype, 0), ext))
            kind, annotations = S.ForKind.SERIAL, ()
        elif f in _LOOP_KINDS:
            if len(targets) != 1:
                raise self.err(n.target, f"{self.fn_label(f)} defines one loop variable; "
                                         "use T.grid for several")
            if f == "range":
                args, kw = self.call_args(it, "range", 1, 3)
                if len(args) == 3:
                    step = self.expr(args[2])
                    if step != 1 or isinstance(step, bool):
                        raise self.err(args[2], "range() with a step other than 1 is not "
                                                "supported; split the loop instead")
                    args = args[:2]
            else:
                args, kw = self.call_args(it, f, 1, 2, {"annotations"})
            lbl = f"{self.fn_label(f)} arguments"
            if len(args) == 1:
                ext = self.loop_bound(args[0], lbl)
                mn = E.IntImm(ext.dtype, 0)
            else:
                mn = self.loop_bound(args[0], lbl)
                end = self.loop_bound(args[1], lbl)
                if mn.dtype != end.dtype:
                    if type(mn) is E.IntImm and type(args[0]) is ast.Constant:
                        mn = E.IntImm(end.dtype, mn.value)
                    elif type(end) is E.IntImm and type(args[1]) is ast.Constant:
                        end = E.IntImm(mn.dtype, end.value)
                    else:
                        raise self.err(it, f"loop bounds have different dtypes ({mn.dtype} "
                                           f"and {end.dtype})")
                ext = _extent_of(mn, end)
            loops = [(mn, ext)]
            kind = _LOOP_KINDS[f]
            annotations = self.attr_dict(kw["annotations"], f) if "annotations" in kw else ()
        elif f is None:
            raise self.err(it, f"cannot loop over {self.dotted(it.func) or 'this'!r}; use "
                               "T.grid, range, T.serial, T.parallel, T.vectorized or T.unroll")
        elif f == "thread_binding":
            raise self.err(it, "T.thread_binding (GPU threads) is not supported on this CPU "
                               "target")
        elif f in _KNOWN_T:
            raise self.err(it, f"cannot loop over T.{f}(...); use T.grid, range, T.serial, "
                               "T.parallel, T.vectorized or T.unroll")
        else:
            raise self.unknown_t(it.func, f)
        self.scopes.append({})
        self.depth += 1
        vars_ = []
        for tg, (mn, ext) in zip(targets, loops):
            v = E.Var(tg.id, ext.dtype)
            self.declare(tg.id, v)
            self.loop_dom[id(v)] = (mn, ext)
            self.keep.append(v)
            vars_.append(v)
        body = self.stmts(n.body)
        self.depth -= 1
        self.scopes.pop()
        for v, (mn, ext) in reversed(list(zip(vars_, loops))):
            body = S.For(v, mn, ext, kind, body, annotations)
        return body

    @staticmethod
    def fn_label(f: str) -> str:
        return "range()" if f == "range" else f"T.{f}()"

    def loop_bound(self, node: ast.AST, what: str) -> E.PrimExpr:
        v = self.expr(node)
        if isinstance(v, bool) or isinstance(v, (float, str)) or isinstance(v, Buffer):
            raise self.err(node, f"bad {what}: expected an integer, got {v!r}" if not
                           isinstance(v, Buffer) else f"bad {what}: got buffer {v.name!r}")
        if isinstance(v, int):
            return E.convert(v)
        if not isinstance(v, E.PrimExpr) or not is_int(v.dtype) or lanes_of(v.dtype) != 1:
            raise self.err(node, f"bad {what}: expected an integer expression, got dtype "
                                 f"{getattr(v, 'dtype', '?')}")
        return v

    # with ---------------------------------------------------------------
    def with_(self, n: ast.With, rest: list) -> Any:
        if len(n.items) != 1:
            raise self.err(n, "use one `with` item per statement")
        item = n.items[0]
        call = item.context_expr
        f = self.tname(call.func) if type(call) is ast.Call else None
        if f in ("block", "sblock"):
            if item.optional_vars is not None:
                raise self.err(item.optional_vars, f"`with T.{f}(...) as x` is not supported")
            return self.block(n, call, f)
        if f == "init":
            self.call_args(call, f, 0, 0)
            ctx = self.block_ctx(n, "with T.init()")
            if ctx.init is not None:
                raise self.err(n, "a block can have only one `with T.init():`")
            self.scopes.append({})
            self.depth += 1
            ctx.init = self.stmts(n.body)
            self.depth -= 1
            self.scopes.pop()
            return None
        if f == "LetStmt":
            args, kw = self.call_args(call, f, 1, 1, {"dtype", "var"})
            if type(item.optional_vars) is not ast.Name:
                raise self.err(n, "write `with T.LetStmt(value) as x:`")
            value = self.prim(args[0])
            dtype = self.dtype_arg(kw["dtype"]) if "dtype" in kw else value.dtype
            var = E.Var(item.optional_vars.id, dtype)
            self.scopes.append({item.optional_vars.id: var})
            self.depth += 1
            body = self.stmts(n.body)
            self.depth -= 1
            self.scopes.pop()
            return S.LetStmt(var, value, body)
        if f == "allocate":
            if type(item.optional_vars) is not ast.Name:
                raise self.err(n, "write `with T.allocate(shape, dtype) as X:`")
            spec = self.buffer_spec(call, f)
            buf = self.make_buffer(call, item.optional_vars.id, spec)
            self.scopes.append({item.optional_vars.id: buf})
            self.depth += 1
            body = self.stmts(n.body)
            self.depth -= 1
            self.scopes.pop()
            return S.Allocate(buf, body)
        if f is None:
            raise self.err(call, "unsupported `with` statement; use `with T.block(\"name\"):` "
                                 "or `with T.init():`")
        if f not in _KNOWN_T:
            raise self.unknown_t(call.func if type(call) is ast.Call else call, f)
        raise self.err(call, f"T.{f} cannot be used in a `with` statement")

    def block(self, n: ast.With, call: ast.Call, f: str) -> S.Stmt:
        args, kw = self.call_args(call, f, 0, 1, {"name_hint", "no_realize"})
        name_node = args[0] if args else kw.get("name_hint")
        name = ""
        if name_node is not None:
            if type(name_node) is not ast.Constant or not isinstance(name_node.value, str):
                raise self.err(name_node, "a block name must be a string such as \"Y\"")
            name = name_node.value
        ctx = _BlockCtx(name, n)
        self.blocks.append(ctx)
        self.scopes.append({})
        self.depth += 1
        self.saw_block = True
        try:
            body = self.stmts(n.body)
        finally:
            self.depth -= 1
            self.scopes.pop()
            self.blocks.pop()
        reads, writes = ctx.reads, ctx.writes
        if reads is None or writes is None:
            r, w = infer_block_regions(body, ctx.init, tuple(ctx.alloc_buffers))
            reads = r if reads is None else reads
            writes = w if writes is None else writes
        block = S.Block(tuple(ctx.iter_vars), reads, writes, name, body, ctx.init,
                        tuple(ctx.alloc_buffers), ctx.annotations or ())
        return S.BlockRealize(tuple(ctx.iter_values),
                              ctx.predicate if ctx.predicate is not None else _true(), block)

    # assignments ----------------------------------------------------------
    def assign(self, n: ast.Assign, rest: list) -> Any:
        if len(n.targets) != 1:
            raise self.err(n, "chained assignments (a = b = ...) are not supported")
        target = n.targets[0]
        value = n.value
        if type(target) is ast.Subscript:
            return self.store(target, value)
        f = self.tname(value.func) if type(value) is ast.Call else None
        if f is not None and f.startswith("axis."):
            return self.axis(n, target, value, f)
        if f == "axis":
            raise self.err(value, "use T.axis.spatial, T.axis.reduce or T.axis.remap")
        if type(target) is not ast.Name:
            if type(target) is ast.Tuple:
                raise self.err(target, "only T.axis.remap(...) can assign several names")
            raise self.err(target, "unsupported assignment target")
        name = target.id
        if name in self.ns:
            raise self.err(target, f"{name!r} is the TVMScript namespace and cannot be "
                                   "assigned")
        if f in ("alloc_buffer", "sblock_alloc_buffer"):
            spec = self.buffer_spec(value, f)
            buf = self.make_buffer(value, name, spec)
            if self.blocks:
                self.blocks[-1].alloc_buffers.append(buf)
            else:
                self.root_allocs.append(buf)
            self.declare(name, buf)
            return None
        if f == "match_buffer":
            return self.match_buffer(n, name, value)
        if f is not None and (f in SCALAR_DTYPES or f == "var") and self.is_symbolic_decl(
                value):
            if self.depth != 0:
                raise self.err(n, "symbolic variables (n = T.int32()) must be declared at the "
                                  "top of the function")
            return None  # declared by the pre-scan
        value_e = self.prim(value)
        return self.let(n, name, value_e, value_e.dtype, rest)

    def is_symbolic_decl(self, value: ast.Call) -> bool:
        f = self.tname(value.func)
        if f in SCALAR_DTYPES:
            return not value.args and not value.keywords
        if f == "var":
            return len(value.args) <= 1 and not value.keywords
        return False

    def annassign(self, n: ast.AnnAssign, rest: list) -> Any:
        if type(n.target) is not ast.Name:
            raise self.err(n.target, "annotated assignments must bind a plain name")
        f = self.tname(n.annotation)
        if f is None or not (f in SCALAR_DTYPES or _DTYPE_LIKE.match(f)):
            raise self.err(n.annotation, "annotate a let binding with a dtype, like "
                                         "x: T.int32 = ...")
        dtype = self.dtype(n.annotation, f)
        if n.value is None:
            raise self.err(n, f"{n.target.id!r} needs a value")
        value = self.prim(n.value, dtype)
        return self.let(n, n.target.id, value, dtype, rest)

    def let(self, n: ast.AST, name: str, value: E.PrimExpr, dtype: str, rest: list) -> Any:
        var = E.Var(name, dtype)
        self.scopes.append({name: var})
        body = self.stmts(rest)
        self.scopes.pop()
        return (_CONSUMED, S.LetStmt(var, value, body))

    def augassign(self, n: ast.AugAssign) -> S.Stmt:
        if type(n.target) is not ast.Subscript:
            raise self.err(n.target, "augmented assignment (+=) needs a buffer element "
                                     "target such as A[i] += 1")
        buf = self.store_buffer(n.target)
        idx = self.indices(buf, n.target)
        cls = self._BINOPS.get(type(n.op))
        if cls is None:
            raise self.err(n, "this augmented assignment operator is not supported")
        v = self.expr(n.value)
        self.check_value(n.value, v)
        return S.BufferStore(buf, E.binary(cls, E.BufferLoad(buf, idx), v), idx)

    def store_buffer(self, target: ast.Subscript) -> Buffer:
        node = target.value
        if type(node) is not ast.Name:
            raise self.err(node, "only buffer elements can be assigned, like A[i, j] = ...")
        v = self.lookup(node.id)
        if v is None:
            raise self.err(node, f"assignment to undeclared buffer {node.id!r} (declare it "
                                 f"as a parameter or with {node.id} = T.alloc_buffer(...))")
        if not isinstance(v, Buffer):
            raise self.err(node, f"{node.id!r} is not a buffer and cannot be assigned "
                                 "with [...]")
        return v

    def store(self, target: ast.Subscript, value: ast.AST) -> S.Stmt:
        buf = self.store_buffer(target)
        idx = self.indices(buf, target)
        v = self.expr(value)
        self.check_value(value, v)
        if isinstance(v, (bool, int, float)):
            v = E.convert(v, buf.dtype)
        return S.BufferStore(buf, v, idx)

    def axis(self, n: ast.Assign, target: ast.AST, call: ast.Call, f: str) -> None:
        ctx = self.block_ctx(n, f"T.{f}")
        kind = f[5:]
        if kind == "remap":
            args, _ = self.call_args(call, f, 2, 2)
            kinds_node, vals_node = args
            if type(kinds_node) is not ast.Constant or not isinstance(kinds_node.value, str):
                raise self.err(kinds_node, "T.axis.remap needs a kind string such as \"SSR\"")
            kinds = kinds_node.value
            bad = [c for c in kinds if c not in "SR"]
            if bad or not kinds:
                raise self.err(kinds_node, f"T.axis.remap kinds must be 'S' (spatial) or 'R' "
                                           f"(reduce), got {kinds!r}")
            if type(vals_node) not in (ast.List, ast.Tuple):
                raise self.err(vals_node, "T.axis.remap needs a list of loop variables, like "
                                          "[i, j, k]")
            targets = target.elts if type(target) is ast.Tuple else [target]
            vals = vals_node.elts
            if not (len(kinds) == len(vals) == len(targets)):
                raise self.err(call, f"T.axis.remap arity mismatch: {len(kinds)} kind(s) "
                                     f"{kinds!r}, {len(vals)} loop variable(s) and "
                                     f"{len(targets)} name(s) on the left")
            defs = []
            for tg, k, vn in zip(targets, kinds, vals):
                if type(tg) is not ast.Name:
                    raise self.err(tg, "block axes must be plain names")
                v = self.expr(vn)
                if type(v) is not E.Var or id(v) not in self.loop_dom:
                    raise self.err(vn, "T.axis.remap binds loop variables only; use "
                                       "T.axis.spatial/T.axis.reduce(extent, expression) for "
                                       "other bindings")
                mn, ext = self.loop_dom[id(v)]
                if not (type(mn) is E.IntImm and mn.value == 0):
                    dom = Range(mn, ext)
                else:
                    dom = Range(E.IntImm(ext.dtype, 0), ext)
                defs.append((tg.id, v, dom, S.IterType.SPATIAL if k == "S" else
                             S.IterType.REDUCE, v.dtype))
        else:
            if kind not in ("spatial", "reduce", "S", "R"):
                if kind in ("scan", "opaque"):
                    raise self.err(call, f"T.axis.{kind} is not supported (use spatial or "
                                         "reduce)")
                raise self.unknown_t(call.func, f)
            if type(target) is not ast.Name:
                raise self.err(target, f"T.axis.{kind} defines one block axis: vi = ...")
            args, kw = self.call_args(call, f, 2, 2, {"dtype"})
            dom_node, val_node = args
            value = self.prim(val_node)
            if not is_int(value.dtype):
                raise self.err(val_node, f"a block axis must be bound to an integer "
                                         f"expression, got dtype {value.dtype}")
            dom = self.axis_dom(dom_node)
            dtype = self.dtype_arg(kw["dtype"]) if "dtype" in kw else value.dtype
            defs = [(target.id, value, dom, S.IterType.SPATIAL if kind in ("spatial", "S")
                     else S.IterType.REDUCE, dtype)]
        for name, value, dom, itype, dtype in defs:
            var = E.Var(name, dtype)
            ctx.iter_vars.append(S.IterVar(var, dom, itype))
            ctx.iter_values.append(value)
            self.declare(name, var)
        return None

    def axis_dom(self, node: ast.AST) -> Range:
        if type(node) in (ast.Tuple, ast.List):
            if len(node.elts) != 2:
                raise self.err(node, "a block axis domain is an extent or a (min, max) pair")
            mn = self.loop_bound(node.elts[0], "axis domain")
            end = self.loop_bound(node.elts[1], "axis domain")
            return Range(mn, _extent_of(mn, end))
        ext = self.loop_bound(node, "axis domain")
        return Range(E.IntImm(ext.dtype, 0), ext)

    def match_buffer(self, n: ast.Assign, name: str, call: ast.Call) -> None:
        if self.depth != 0 or not call.args:
            raise self.err(n, "T.match_buffer(handle, shape, dtype) belongs at the top of "
                              "the function")
        h = call.args[0]
        hv = self.lookup(h.id) if type(h) is ast.Name else None
        if not isinstance(hv, _Handle):
            raise self.err(h, "T.match_buffer's first argument must be a T.handle parameter")
        if hv.buffer is not None:
            raise self.err(h, f"handle {h.id!r} is already matched")
        spec = self.buffer_spec(call, "match_buffer", skip_first=True)
        buf = self.make_buffer(call, name, spec)
        hv.buffer = buf
        self.declare(name, buf)
        return None

    def expr_stmt(self, n: ast.Expr) -> Any:
        v = n.value
        if type(v) is ast.Constant and isinstance(v.value, str):
            return None  # docstring / string comment
        if type(v) is ast.Call:
            f = self.tname(v.func)
            if f in ("reads", "writes"):
                ctx = self.block_ctx(n, f"T.{f}")
                regions = self.regions(v, f)
                if f == "reads":
                    if ctx.reads is not None:
                        raise self.err(n, "T.reads is given twice in this block")
                    ctx.reads = regions
                else:
                    if ctx.writes is not None:
                        raise self.err(n, "T.writes is given twice in this block")
                    ctx.writes = regions
                return None
            if f == "where":
                ctx = self.block_ctx(n, "T.where")
                args, _ = self.call_args(v, f, 1, 1)
                ctx.predicate = self.prim(args[0], "bool")
                return None
            if f == "block_attr":
                ctx = self.block_ctx(n, "T.block_attr")
                args, _ = self.call_args(v, f, 1, 1)
                ctx.annotations = (ctx.annotations or ()) + self.attr_dict(args[0], f)
                return None
            if f == "func_attr":
                if self.depth != 0 or self.blocks:
                    raise self.err(n, "T.func_attr belongs at the top of the function")
                args, _ = self.call_args(v, f, 1, 1)
                self.attrs = self.attrs + self.attr_dict(args[0], f)
                return None
            if f == "evaluate":
                args, _ = self.call_args(v, f, 1, 1)
                return S.Evaluate(self.prim(args[0]))
            if f in ("alloc_buffer", "sblock_alloc_buffer", "match_buffer"):
                raise self.err(n, f"assign the result of T.{f}: X = T.{f}(...)")
            if f is not None and f.startswith("axis"):
                raise self.err(n, f"assign the block axis: vi = T.{f}(...)")
            if f in ("grid", "serial", "parallel", "vectorized", "unroll", "builtin.range"):
                raise self.err(n, f"{'range' if f == 'builtin.range' else 'T.' + f}(...) can "
                                  "only be used in a for loop")
            if f is not None and f not in _KNOWN_T and not f.startswith("builtin."):
                raise self.unknown_t(v.func, f)
            if f is not None and f in _STMT_FUNCS:
                raise self.err(n, f"T.{f}(...) cannot be used as a statement here")
            return S.Evaluate(self.prim(v))
        raise self.err(n, "this expression statement has no effect (use T.evaluate(...) "
                          "or assign it to a buffer element)")

    # ------------------------------------------------------------------ functions
    def function(self, fn: ast.FunctionDef) -> PrimFunc:
        self.scopes = [{}]
        self.blocks: list[_BlockCtx] = []
        self.root_allocs: list[Buffer] = []
        self.loop_dom: dict[int, tuple] = {}
        self.keep: list = []
        self.symbolic: set[int] = set()
        self.attrs: tuple = ()
        self.depth = 0
        self.saw_block = False
        self.current = fn
        a = fn.args
        if a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg or a.defaults:
            raise self.err(fn, f"function {fn.name!r}: parameters must be plain "
                               "`name: T.Buffer(...)` parameters")
        # symbolic variables declared at the top (n = T.int32()) may appear in shapes
        for st in fn.body:
            if type(st) is ast.Assign and len(st.targets) == 1 and \
                    type(st.targets[0]) is ast.Name and type(st.value) is ast.Call and \
                    self.is_symbolic_decl(st.value):
                f = self.tname(st.value.func)
                if f == "var":
                    dtype = self.dtype_arg(st.value.args[0]) if st.value.args else "int32"
                else:
                    dtype = self.dtype(st.value.func, f)
                v = E.Var(st.targets[0].id, dtype)
                self.symbolic.add(id(v))
                self.keep.append(v)
                self.declare(st.targets[0].id, v)
        params: list = []
        for arg in a.args:
            ann = arg.annotation
            if ann is None:
                raise self.err(arg, f"parameter {arg.arg!r} needs a type: "
                                    f"{arg.arg}: T.Buffer((128, 128), \"float32\")")
            if arg.arg in self.ns:
                raise self.err(arg, f"{arg.arg!r} is the TVMScript namespace; rename the "
                                    "parameter")
            target = ann.func if type(ann) is ast.Call else (
                ann.value if type(ann) is ast.Subscript else ann)
            f = self.tname(target)
            if f == "handle" and type(ann) is not ast.Call:
                h = _Handle(arg.arg)
                self.declare(arg.arg, h)
                params.append(h)
                continue
            if f != "Buffer" or type(ann) not in (ast.Call, ast.Subscript):
                raise self.err(ann, f"parameter {arg.arg!r} must be annotated as "
                                    f"T.Buffer(shape, dtype)")
            spec = self.buffer_spec(ann, "Buffer")
            buf = self.make_buffer(ann, arg.arg, spec)
            if self.lookup(arg.arg) is not None and arg.arg in self.scopes[0]:
                raise self.err(arg, f"duplicate parameter name {arg.arg!r}")
            self.declare(arg.arg, buf)
            params.append(buf)
        stmts = self.stmt_list(fn.body)
        final = []
        for p in params:
            if isinstance(p, _Handle):
                if p.buffer is None:
                    raise self.err(fn, f"parameter {p.name!r} is a T.handle without "
                                       f"T.match_buffer({p.name}, shape, dtype)")
                final.append(p.buffer)
            else:
                final.append(p)
        if not self.root_allocs and len(stmts) == 1 and type(stmts[0]) is S.BlockRealize \
                and stmts[0].block.name_hint == "root":
            body = stmts[0]
        elif self.root_allocs or self.saw_block:
            inner = S.seq(*stmts) or S.Evaluate(E.IntImm("int32", 0))
            body = S.BlockRealize((), _true(), S.Block(
                (), (), (), "root", inner, None, tuple(self.root_allocs), ()))
        else:
            body = S.seq(*stmts) or S.Evaluate(E.IntImm("int32", 0))
        return PrimFunc(fn.name, tuple(final), body, self.attrs)

    # ------------------------------------------------------------------ top level
    def decorator_kind(self, fn: Any) -> str | None:
        for d in fn.decorator_list:
            target = d.func if type(d) is ast.Call else d
            name = self.dotted(target)
            last = name.rsplit(".", 1)[-1]
            if last == "prim_func":
                return "prim_func"
            if last == "ir_module":
                return "ir_module"
            if name.startswith("R.") or name.startswith("relax."):
                return "relax"
            return "other:" + (name or "?")
        return None

    def module(self) -> IRModule:
        try:
            tree = _ast_parse(self.source)
        except SyntaxError as e:
            line = e.lineno
            col = e.offset
            return_err = ScriptError(f"Python syntax error: {e.msg}",
                                     None if line is None else line + self.line_offset,
                                     None if col is None else col + self.col_offset,
                                     self.filename)
            raise return_err from None
        except (ValueError, MemoryError) as e:  # e.g. null bytes
            raise ScriptError(f"cannot parse the text: {e}") from None
        funcs: list[ast.FunctionDef] = []
        classes = 0
        for st in tree.body:
            t = type(st)
            if t in (ast.Import, ast.ImportFrom):
                self.note_import(st)
                continue
            if t is ast.Expr and type(st.value) is ast.Constant and \
                    isinstance(st.value.value, str):
                continue
            if t is ast.Pass:
                continue
            if t is ast.ClassDef:
                kind = self.decorator_kind(st)
                if kind is not None and kind != "ir_module":
                    raise self.err(st, f"class {st.name!r} must be decorated with "
                                       "@tvm.script.ir_module (or @I.ir_module)")
                classes += 1
                if classes > 1:
                    raise self.err(st, "only one module class per text")
                for m in st.body:
                    mt = type(m)
                    if mt is ast.FunctionDef:
                        self.check_prim_func(m)
                        funcs.append(m)
                    elif mt is ast.Pass or (mt is ast.Expr and type(m.value) is ast.Constant
                                            and isinstance(m.value.value, str)):
                        continue
                    else:
                        raise self.err(m, "a module class may only contain @T.prim_func "
                                          "functions")
                continue
            if t is ast.FunctionDef:
                self.check_prim_func(st, allow_plain=True)
                funcs.append(st)
                continue
            raise self.err(st, "expected a @tvm.script.ir_module class or @T.prim_func "
                               "functions at the top level")
        if not funcs:
            raise ScriptError("no @T.prim_func function or @tvm.script.ir_module class "
                              "found in the text", None, None, self.filename)
        out = []
        seen = set()
        for fn in funcs:
            if fn.name in seen:
                raise self.err(fn, f"two functions are named {fn.name!r}")
            seen.add(fn.name)
            out.append((fn.name, self.function(fn)))
        return IRModule(tuple(out))

    def check_prim_func(self, fn: ast.FunctionDef, allow_plain: bool = False) -> None:
        kind = self.decorator_kind(fn)
        if kind == "prim_func" or (kind is None and allow_plain):
            return
        if kind == "relax":
            raise self.err(fn, f"function {fn.name!r} is a Relax function; only @T.prim_func "
                               "functions are supported")
        raise self.err(fn, f"function {fn.name!r} must be decorated with @T.prim_func")

    def note_import(self, st: ast.AST) -> None:
        """`from tvm.script import tir as X` / `import tvm.script.tir as X` make X a tir
        namespace name."""
        if type(st) is ast.ImportFrom:
            for alias in st.names:
                if alias.name == "tir":
                    self.ns.add(alias.asname or "tir")
        else:
            for alias in st.names:
                if alias.name.endswith(".tir") and alias.asname:
                    self.ns.add(alias.asname)


class _Consumed:
    __slots__ = ()


_CONSUMED = _Consumed()


def _ast_parse(text: str) -> ast.Module:
    with warnings.catch_warnings():  # e.g. SyntaxWarning for "1if": not the user's concern
        warnings.simplefilter("ignore")
        return ast.parse(text)


def _run(p: _Parser, fn) -> Any:
    try:
        return fn()
    except ScriptError:
        raise
    except RecursionError:
        node = p.current
        err = p.err(node, "the program is too deeply nested to parse") if node is not None \
            else ScriptError("the program is too deeply nested to parse")
        raise err from None
    except Exception as e:  # noqa: BLE001 - never let a raw exception escape
        node = p.current
        msg = f"cannot parse this: {e}" if str(e) else f"cannot parse this ({type(e).__name__})"
        raise (p.err(node, msg) if node is not None else ScriptError(msg)) from None


def parse(text: str) -> IRModule:
    """Parse TVMScript text into an IRModule (raises :class:`ScriptError` on bad input).

    A bare ``@T.prim_func`` is wrapped into a module keyed by its name.
    """
    if not isinstance(text, str):
        raise ScriptError(f"parse() needs the script text as a str, got {type(text).__name__}")
    p = _Parser(text)
    return _run(p, p.module)


def parse_function_source(text: str, namespaces: set | None = None, line_offset: int = 0,
                          col_offset: int = 0, filename: str | None = None) -> PrimFunc:
    """Parse the source of one decorated Python function (used by ``@T.prim_func``)."""
    p = _Parser(text, namespaces, line_offset, col_offset, filename)

    def go() -> PrimFunc:
        try:
            tree = _ast_parse(text)
        except SyntaxError as e:
            raise ScriptError(f"Python syntax error: {e.msg}",
                              None if e.lineno is None else e.lineno + line_offset,
                              None if e.offset is None else e.offset + col_offset,
                              filename) from None
        for st in tree.body:
            if type(st) in (ast.Import, ast.ImportFrom):
                p.note_import(st)
        fns = [st for st in tree.body if type(st) is ast.FunctionDef]
        if len(fns) != 1:
            raise ScriptError("expected the source of exactly one function", None, None,
                              filename)
        for d in fns[0].decorator_list:  # @tx.prim_func: `tx` names the tir namespace
            target = d.func if type(d) is ast.Call else d
            if type(target) is ast.Attribute and target.attr == "prim_func" and \
                    type(target.value) is ast.Name:
                p.ns.add(target.value.id)
        return p.function(fns[0])

    return _run(p, go)

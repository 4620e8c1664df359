"""Expressions: Python expression syntax -> PrimExpr (constants, names, arithmetic,
comparisons, boolean operators, buffer loads, calls of ``T.<dtype>(...)``, ``T.<intrinsic>``
and the builtins ``max``/``min``/``abs``), and the constant / attribute values of
annotations. The ``T.<name>(...)`` expression functions are in :mod:`.intrinsics`.
"""
from __future__ import annotations

import ast
import math
from typing import Any

from engine.ir import expr as E
from engine.ir.buffer import Buffer
from engine.ir.node import AttrMap
from engine.ir.dtype import SCALAR_DTYPES, is_bool, is_float, is_int

from ..errors import ScriptError
from ..printer.exprs import call_result_dtype
from .context import Handle, ParserContext
from .dialect import AST_NAMES, BINOPS, CMPOPS, DTYPE_LIKE, EXPR_FUNCS, KNOWN_T, STMT_FUNCS


def branch_hint(tv: Any, fv: Any) -> str | None:
    """The dtype plain-number branches of a select take: that of the other branch."""
    return tv.dtype if isinstance(tv, E.PrimExpr) else (
        fv.dtype if isinstance(fv, E.PrimExpr) else None)


class ExprParser(ParserContext):
    """Expression parsing (mixed into the parser; see :mod:`.module`)."""

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
            raise self.buffer_as_value(n, v)
        raise self.err(n, "expected an expression")

    def check_value(self, n: ast.AST, v: Any) -> None:
        """Raise a helpful error when ``v`` is not a number or an expression."""
        if isinstance(v, Buffer):
            raise self.buffer_as_value(n, v)
        if isinstance(v, str):
            raise self.err(n, f"expected a number or an expression, got the string {v!r}")

    def buffer_as_value(self, n: ast.AST, buf: Buffer) -> ScriptError:
        return self.err(n, f"buffer {buf.name!r} used as a value; index it like "
                           f"{buf.name}[...]")

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
                v = self.outside(n.id)
                if v is not None:
                    return list(v) if isinstance(v, tuple) else v
                raise self.err(n, f"undefined name {n.id!r}")
            if isinstance(v, Handle):
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
                if op is ast.Invert and is_int(v.dtype):
                    return E.bitwise("bitwise_not", v)
                if op is ast.Invert and not is_bool(v.dtype):
                    raise self.err(n, "~ needs an integer or a boolean")
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
            if type(n.value) is ast.Name and isinstance(self.lookup(n.value.id), Buffer):
                buf = self.lookup(n.value.id)
                if n.attr in E.BufferField.FIELDS:     # B.data, B.elem_offset
                    return E.BufferField(buf, n.attr)
                raise self.err(n, f"buffer {buf.name!r} has no field {n.attr!r} here (only "
                                  f"{', '.join(E.BufferField.FIELDS)})")
            f = self.tname(n)
            if f is not None:
                if f in SCALAR_DTYPES:
                    raise self.err(n, f"T.{f} is a dtype; write T.{f}(value) for a constant")
                if f not in KNOWN_T:
                    raise self.unknown_t(n, f)
                raise self.err(n, f"T.{f} must be called")
            raise self.err(n, f"unsupported attribute access {self.dotted(n) or '...'!r}")
        what = AST_NAMES.get(t, f"a {t.__name__} expression")
        raise self.err(n, f"unsupported expression: {what}")

    def binop(self, n: ast.BinOp) -> Any:
        a = self.expr(n.left)
        b = self.expr(n.right)
        op = type(n.op)
        cls = BINOPS.get(op)
        if cls is None:
            bits = {ast.BitAnd: "bitwise_and", ast.BitOr: "bitwise_or",
                    ast.BitXor: "bitwise_xor", ast.LShift: "shift_left",
                    ast.RShift: "shift_right"}.get(op)
            if bits is not None:
                if isinstance(a, (int, bool)) and isinstance(b, (int, bool)) and \
                        not isinstance(a, E.PrimExpr):
                    a = self.to_prim(n.left, a)
                a, b = self.to_prim(n.left, a), self.to_prim(n.right, b, a.dtype)
                if op in (ast.BitAnd, ast.BitOr) and is_bool(a.dtype) and is_bool(b.dtype):
                    return E.binary(E.And if op is ast.BitAnd else E.Or, a, b)
                if not (is_int(a.dtype) and is_int(b.dtype)):
                    raise self.err(n, "& | ^ << >> need integers (or, for & and |, two "
                                      f"booleans), got {a.dtype} and {b.dtype}")
                return E.bitwise(bits, a, b)
            sym = {ast.Pow: "**", ast.MatMult: "@"}.get(op, "?")
            raise self.err(n, f"the operator {sym} is not supported")
        for v, nd in ((a, n.left), (b, n.right)):
            if isinstance(v, str):
                raise self.err(nd, "strings cannot be used in arithmetic")
            if isinstance(v, Buffer):
                self.to_prim(nd, v)  # raises a helpful error
        if not isinstance(a, E.PrimExpr) and not isinstance(b, E.PrimExpr):
            a = self.to_prim(n.left, a)  # keep the node: constants are not folded
        return E.binary(cls, a, b)

    def compare(self, n: ast.Compare) -> Any:
        left_node = n.left
        left = self.expr(n.left)
        out = None
        for op, right_node in zip(n.ops, n.comparators):
            cls = CMPOPS.get(type(op))
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
            raise self.err(node, "only buffers can be indexed (write a buffer name before [...])")
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
        if f is None and type(n.func) is ast.Attribute and type(n.func.value) is ast.Name \
                and isinstance(self.lookup(n.func.value.id), Buffer):
            return self.buffer_method(n, self.lookup(n.func.value.id))   # B.access_ptr(..)
        if f is None and (type(n.func) is ast.Call or (
                type(n.func) is ast.Name and callable(self.outside(n.func.id)))):
            return self.python_call(n)
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
        if f in SCALAR_DTYPES or (DTYPE_LIKE.match(f) and "x" in f):
            dtype = self.dtype(n.func, f)
            args, _ = self.call_args(n, f, 0, 1)
            if not args:
                raise self.err(n, f"T.{f}() declares a symbolic variable; use it as a "
                                  f"statement at the top of the function: n = T.{f}()")
            return self.constant(args[0], dtype)
        if f in E.INTRINSICS:
            args, kw = self.call_args(n, f, E.INTRINSICS[f], E.INTRINSICS[f], {"dtype"})
            return self.intrin(n, f, args, kw)
        if f in EXPR_FUNCS:
            return getattr(self, "f_" + f)(n, f)
        if f in E.OPAQUE_CALLS:
            return self.opaque_call(n, f)
        if f in STMT_FUNCS:
            raise self.err(n, f"T.{f}(...) cannot be used inside an expression")
        raise self.unknown_t(n.func, f)

    def python_call(self, n: ast.Call, callee: bool = False) -> Any:
        """A call of a Python function of the ``@T.prim_func``'s surroundings (a captured
        name, or what such a call returned): called with the values of its arguments, its
        result an expression, a number, a string — or, called in turn (``f(32)(x)``), a
        function."""
        if type(n.func) is ast.Call:
            fn = self.python_call(n.func, callee=True)
            label = ast.unparse(n.func) if hasattr(ast, "unparse") else "the function"
        else:
            fn = self.outside(n.func.id) if type(n.func) is ast.Name else None
            label = getattr(n.func, "id", "the function")
        if not callable(fn):
            raise self.err(n, f"{label!r} is not a function of this module; TVMScript "
                              "functions are spelled T.<name>")
        for a in n.args:
            if type(a) is ast.Starred:
                raise self.err(a, "*arguments are not read")
        args = [self.expr(a) for a in n.args]
        kwargs = {}
        for k in n.keywords:
            if k.arg is None:
                raise self.err(k, "**arguments are not read")
            kwargs[k.arg] = self.expr(k.value)
        try:
            out = fn(*args, **kwargs)
        except ScriptError:
            raise
        except Exception as e:  # noqa: BLE001 - the helper's own failure, named
            raise self.err(n, f"calling {label}(...) failed: {type(e).__name__}: {e}") \
                from None
        if callee and callable(out) and not isinstance(out, E.PrimExpr):
            return out
        if isinstance(out, (E.PrimExpr, bool, int, float, str)):
            return out
        raise self.err(n, f"{label}(...) gave {type(out).__name__}, not an expression")

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
            h = branch_hint(tv, fv)
            pe = [cond, self.to_prim(args[1], tv, h), self.to_prim(args[2], fv, h)]
        else:
            pe = [self.to_prim(a, v, hint) for a, v in zip(args, vals)]
        dtype = self.dtype_arg(kw["dtype"]) if "dtype" in kw else call_result_dtype(op, pe)
        if dtype is None:
            raise self.err(n, f"cannot infer the dtype of T.{op}; add dtype=\"...\"")
        return E.Call(dtype, op, tuple(pe))

    # ------------------------------------------------------------------ values
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
        if t is ast.Dict:   # a dict value ({"arr": [0, 0], "key": 3}): an AttrMap
            return AttrMap(self.dict_pairs(node))
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
        return self.dict_pairs(node)

    def dict_pairs(self, node: ast.Dict) -> tuple:
        """The ``(key, value)`` pairs of a dict literal of attributes (string keys, each
        once; values as :meth:`literal` reads them)."""
        out = []
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise self.err(v, "**unpacking is not supported in attribute dicts")
            if type(k) is not ast.Constant or not isinstance(k.value, str):
                raise self.err(k, "attribute keys must be strings")
            if any(k.value == q for q, _ in out):
                raise self.err(k, f"the key {k.value!r} appears twice in this dict")
            out.append((k.value, self.literal(v)))
        return tuple(out)


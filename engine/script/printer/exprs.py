"""Expressions and values as text: every PrimExpr with the fewest parentheses Python's
precedence allows (int32 constants as plain ints, other constants with their dtype),
attribute literals, shapes, buffer arguments and buffer regions."""
from __future__ import annotations

import json
import math
from typing import Any

from engine.ir import expr as E
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.dtype import is_float
from engine.ir.node import AttrMap

from .names import NameTable

# Python operator precedence (higher binds tighter)
_P_OR, _P_AND, _P_NOT, _P_CMP, _P_ADD, _P_MUL, _P_UNARY, _P_ATOM = 2, 3, 4, 5, 10, 11, 12, 14

_ARITH = {E.Add: (" + ", _P_ADD), E.Sub: (" - ", _P_ADD), E.Mul: (" * ", _P_MUL),
          E.FloorDiv: (" // ", _P_MUL), E.FloorMod: (" % ", _P_MUL)}
_CMP = {E.EQ: " == ", E.NE: " != ", E.LT: " < ", E.LE: " <= ", E.GT: " > ", E.GE: " >= "}


def call_result_dtype(op: str, args: tuple) -> str | None:
    """The dtype the parser gives ``T.<op>(*args)`` when no ``dtype=`` is written."""
    if not args:
        return None
    if op == "if_then_else":
        return args[1].dtype if len(args) > 1 else None
    return args[0].dtype


def _fmt_float(v: float) -> str:
    if math.isnan(v):
        return '"nan"'
    if math.isinf(v):
        return '"inf"' if v > 0 else '"-inf"'
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


def is_zero_of(e: Any, dtype: str) -> bool:
    return type(e) is E.IntImm and e.value == 0 and e.dtype == dtype


def subscript(name: str, index_texts: list) -> str:
    """``A[i, j]`` (``A[()]`` for a zero-dimensional buffer)."""
    if not index_texts:
        return f"{name}[()]"
    return f"{name}[{', '.join(index_texts)}]"


class ExprPrinter(NameTable):
    """Expression and value printing (mixed into the printer)."""

    def expr_table(self) -> dict:
        """Expression node type -> the bound method printing it."""
        return {
            E.Var: self._var, E.IntImm: self._intimm, E.FloatImm: self._floatimm,
            E.StringImm: self._stringimm, E.Add: self._arith, E.Sub: self._arith,
            E.Mul: self._arith, E.FloorDiv: self._arith, E.FloorMod: self._arith,
            E.Div: self._div, E.Mod: self._mod, E.Min: self._minmax, E.Max: self._minmax,
            E.EQ: self._cmp, E.NE: self._cmp, E.LT: self._cmp, E.LE: self._cmp,
            E.GT: self._cmp, E.GE: self._cmp, E.And: self._boolop, E.Or: self._boolop,
            E.Not: self._not, E.Select: self._select, E.Cast: self._cast, E.Call: self._call,
            E.BufferLoad: self._load, E.Ramp: self._ramp, E.Broadcast: self._broadcast,
            E.Let: self._let_expr, E.BufferField: self._field,
        }

    # ------------------------------------------------------------------ expressions
    def expr(self, e: Any) -> tuple[str, int]:
        fn = self._expr_fn.get(type(e))
        if fn is None:
            if isinstance(e, bool):
                return ("True" if e else "False"), _P_ATOM
            if isinstance(e, int):
                return str(e), (_P_UNARY if e < 0 else _P_ATOM)
            if isinstance(e, float):
                return f"T.float32({_fmt_float(e)})", _P_ATOM
            if isinstance(e, str):
                return json.dumps(e, ensure_ascii=False), _P_ATOM
            return f"<{type(e).__name__}>", _P_ATOM
        return fn(e)

    def ex(self, e: Any) -> str:
        return self.expr(e)[0]

    def _var(self, e):
        n = self.name_of.get(id(e))
        return (n if n is not None else self.name(e)), _P_ATOM

    def _intimm(self, e):
        d = e.dtype
        if d == "int32":
            v = e.value
            return str(v), (_P_UNARY if v < 0 else _P_ATOM)
        if d == "bool" and e.value in (0, 1):
            return ("True" if e.value else "False"), _P_ATOM
        return f"T.{d}({e.value})", _P_ATOM

    def _floatimm(self, e):
        return f"T.{e.dtype}({_fmt_float(e.value)})", _P_ATOM

    def _stringimm(self, e):
        return json.dumps(e.value, ensure_ascii=False), _P_ATOM

    def _infix(self, e, sym: str, p: int, strict_left: bool = False):
        """``a <sym> b`` at precedence ``p``: the right operand is parenthesised when it
        binds no tighter than ``p``, the left one when it binds looser (or, with
        ``strict_left``, no tighter: comparisons do not chain)."""
        a, pa = self.expr(e.a)
        b, pb = self.expr(e.b)
        if pa < p or (strict_left and pa == p):
            a = f"({a})"
        if pb <= p:
            b = f"({b})"
        return a + sym + b, p

    def _arith(self, e):
        sym, p = _ARITH[type(e)]
        return self._infix(e, sym, p)

    def _div(self, e):
        if is_float(e.a.dtype):
            return self._infix(e, " / ", _P_MUL)
        return f"T.truncdiv({self.ex(e.a)}, {self.ex(e.b)})", _P_ATOM

    def _mod(self, e):
        return f"T.truncmod({self.ex(e.a)}, {self.ex(e.b)})", _P_ATOM

    def _minmax(self, e):
        fn = "T.min" if type(e) is E.Min else "T.max"
        return f"{fn}({self.ex(e.a)}, {self.ex(e.b)})", _P_ATOM

    def _cmp(self, e):
        return self._infix(e, _CMP[type(e)], _P_CMP, strict_left=True)

    def _boolop(self, e):
        if type(e) is E.And:
            sym, p = " and ", _P_AND
        else:
            sym, p = " or ", _P_OR
        return self._infix(e, sym, p)

    def _not(self, e):
        a, pa = self.expr(e.a)
        if pa < _P_NOT:
            a = f"({a})"
        return "not " + a, _P_NOT

    def _select(self, e):
        return (f"T.Select({self.ex(e.condition)}, {self.ex(e.true_value)}, "
                f"{self.ex(e.false_value)})"), _P_ATOM

    def _cast(self, e):
        return f'T.Cast("{e.dtype}", {self.ex(e.value)})', _P_ATOM

    def _call(self, e):
        args = e.args
        if e.op in E.OPAQUE_CALLS:
            if e.op == "type_annotation" and not args:
                return f'T.type_annotation("{e.dtype}")', _P_ATOM
            text = ", ".join(self.ex(a) for a in args)
            if e.dtype != E.OPAQUE_CALLS[e.op]:
                text += (", " if text else "") + f'dtype="{e.dtype}"'
            return f"T.{e.op}({text})", _P_ATOM
        arity = E.INTRINSICS.get(e.op)
        if arity is None or arity != len(args) or not all(
                isinstance(a, E.PrimExpr) for a in args):
            parts = [json.dumps(e.dtype), json.dumps(e.op)] + [self.ex(a) for a in args]
            return f"T.call_extern({', '.join(parts)})", _P_ATOM
        text = ", ".join(self.ex(a) for a in args)
        if call_result_dtype(e.op, args) != e.dtype:
            text += f', dtype="{e.dtype}"'
        return f"T.{e.op}({text})", _P_ATOM

    def _load(self, e):
        buf = e.buffer
        n = self.name_of.get(id(buf))
        if n is None:
            n = self.name(buf)
        return subscript(n, [self.ex(i) for i in e.indices]), _P_ATOM

    def _field(self, e):
        buf = e.buffer
        n = self.name_of.get(id(buf))
        if n is None:
            n = self.name(buf)
        return f"{n}.{e.field}", _P_ATOM

    def _ramp(self, e):
        return f"T.Ramp({self.ex(e.base)}, {self.ex(e.stride)}, {e.lanes})", _P_ATOM

    def _broadcast(self, e):
        return f"T.Broadcast({self.ex(e.value)}, {e.lanes})", _P_ATOM

    def _let_expr(self, e):
        value = self.ex(e.value)
        self.push()
        name = self.define(e.var, e.var.name)
        body = self.ex(e.body)
        self.pop()
        return f"T.Let({name}, {value}, {body})", _P_ATOM

    # ------------------------------------------------------------------ helpers
    def end_of(self, mn: Any, extent: Any) -> str:
        """Text of ``min + extent`` as the parser expects it (see parser.context.extent_of)."""
        if type(mn) is E.IntImm and type(extent) is E.IntImm and mn.dtype == extent.dtype:
            return self.ex(E.IntImm(extent.dtype, mn.value + extent.value))
        return self.ex(E.Add(mn, extent))

    def literal(self, v: Any) -> str:
        """Annotation / attribute values: Python literals or expressions."""
        if isinstance(v, bool):
            return "True" if v else "False"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            if math.isnan(v) or math.isinf(v):
                return f'T.float64({_fmt_float(v)})'
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v, ensure_ascii=False)
        if v is None:
            return "None"
        if isinstance(v, (tuple, list)):
            return "[" + ", ".join(self.literal(x) for x in v) + "]"
        if isinstance(v, AttrMap):
            return self.dict_literal(v.items())
        if isinstance(v, dict):
            return self.dict_literal(tuple(v.items()))
        if isinstance(v, E.PrimExpr):
            return self.ex(v)
        return json.dumps(str(v), ensure_ascii=False)

    def dict_literal(self, pairs: tuple, keys: dict | None = None) -> str:
        """``{"key": value, ...}``; ``keys`` renames keys (a dialect's spelling)."""
        keys = keys or {}
        return "{" + ", ".join(f"{self.literal(keys.get(str(k), str(k)))}: {self.literal(v)}"
                               for k, v in pairs) + "}"

    def shape(self, dims: tuple) -> str:
        if len(dims) == 1:
            return f"({self.ex(dims[0])},)"
        return "(" + ", ".join(self.ex(d) for d in dims) + ")"

    def buffer_extra(self, buf: Buffer) -> list[str]:
        extra = []
        if buf.scope != "global":
            extra.append(f'scope="{buf.scope}"')
        if buf.strides:
            extra.append(f"strides={self.shape(buf.strides)}")
        if buf.elem_offset != 0:
            extra.append(f"elem_offset={self.literal(buf.elem_offset)}")
        if buf.align != 64:
            extra.append(f"align={self.literal(buf.align)}")
        return extra

    def buffer_args(self, buf: Buffer) -> str:
        """``shape, "dtype"`` and the non-default properties: T.Buffer(...), T.allocate(...)."""
        return ", ".join([self.shape(buf.shape), f'"{buf.dtype}"'] + self.buffer_extra(buf))

    def buffer_annotation(self, buf: Buffer) -> str:
        return f"T.Buffer({self.buffer_args(buf)})"

    def alloc_text(self, buf: Buffer) -> str:
        parts = [self.shape(buf.shape)]
        if buf.dtype != "float32":
            parts.append(f'dtype="{buf.dtype}"')
        parts += self.buffer_extra(buf)
        return f"T.{self.spell['alloc_buffer']}({', '.join(parts)})"

    def range_text(self, r: Range) -> str:
        return f"Range({self.ex(r.min)}, {self.ex(r.extent)})"

    def region(self, r: BufferRegion) -> str:
        n = self.name(r.buffer)
        parts = []
        for rg in r.region:
            mn, ext = rg.min, rg.extent
            if type(ext) is E.IntImm and ext.value == 1 and ext.dtype == mn.dtype:
                parts.append(self.ex(mn))
            elif is_zero_of(mn, ext.dtype):
                parts.append(f"0:{self.ex(ext)}")
            else:
                parts.append(f"{self.ex(mn)}:{self.end_of(mn, ext)}")
        return subscript(n, parts)


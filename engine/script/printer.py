"""TVMScript printer: IR -> course-2022-style TVMScript text (plus a span map).

``script(mod_or_func)`` returns the text; ``script_with_spans`` also returns, for every
loop, block and statement, the 1-based inclusive line range it occupies (the web app makes
loops/blocks clickable with it).  The printed text parses back with
:func:`engine.script.parse` to a structurally equal program, and printing that again gives
the same text.

Printing rules (as TVM's printer, with the course's 2022 spellings):

* A module prints as ``@tvm.script.ir_module`` ``class Module:`` with one ``@T.prim_func``
  per function; a PrimFunc alone prints from ``@T.prim_func`` at column 0.
* A trivial ``root`` block is elided: ``# with T.block("root"):`` is printed as a comment and
  its ``alloc_buffers`` appear at function level.
* Perfectly nested serial loops starting at 0 without annotations print as one
  ``for i, j in T.grid(m, n):`` line; a lone one as ``T.serial(n)``; other kinds as
  ``T.parallel/T.vectorized/T.unroll``; a non-zero start as ``T.serial(start, stop)``;
  annotations as ``T.serial(n, annotations={...})``.
* Block axes print as one ``T.axis.remap("SSR", [i, j, k])`` line when every axis is bound
  to a distinct enclosing loop variable with the same extent, else one
  ``vj = T.axis.spatial(128, j_0 * 4 + j_1)`` line per axis.
* Expressions use the fewest parentheses Python's precedence allows; int32 constants print
  as plain ints, other constants with their dtype (``T.float32(0)``, ``T.int64(5)``).
* Variables or buffers sharing a name print distinctly (``i``, ``i_1``, ...); names are
  scoped, so sibling loops may both be called ``i``.
"""
from __future__ import annotations

import json
import keyword
import math
from dataclasses import dataclass
from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.dtype import is_float
from engine.ir.function import IRModule, PrimFunc

__all__ = ["Span", "script", "script_with_spans", "repr_node", "call_result_dtype"]


@dataclass(frozen=True)
class Span:
    """Where an IR node is printed: ``kind`` is "loop", "block" or "stmt"; lines are
    1-based and inclusive; ``name`` is the printed loop variable / block name (for a
    statement: the stored buffer's name, or "if", "evaluate", "let", "allocate")."""

    node: Any
    kind: str
    name: str
    start_line: int
    end_line: int


# Python operator precedence (higher binds tighter)
_P_OR, _P_AND, _P_NOT, _P_CMP, _P_ADD, _P_MUL, _P_UNARY, _P_ATOM = 2, 3, 4, 5, 10, 11, 12, 14

_ARITH = {E.Add: (" + ", _P_ADD), E.Sub: (" - ", _P_ADD), E.Mul: (" * ", _P_MUL),
          E.FloorDiv: (" // ", _P_MUL), E.FloorMod: (" % ", _P_MUL)}
_CMP = {E.EQ: " == ", E.NE: " != ", E.LT: " < ", E.LE: " <= ", E.GT: " > ", E.GE: " >= "}
_KIND_FN = {S.ForKind.SERIAL: "T.serial", S.ForKind.PARALLEL: "T.parallel",
            S.ForKind.VECTORIZED: "T.vectorized", S.ForKind.UNROLLED: "T.unroll"}

# names the printer never gives to a variable or buffer (they would shadow the syntax)
RESERVED = frozenset({"T", "tir", "range", "True", "False", "None"}
                     | set(keyword.kwlist))

_TRUE_KINDS = ("bool",)


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


_SANITIZED: dict[str, str] = {}


def _sanitize(hint: Any) -> str:
    """A valid Python identifier derived from a name hint."""
    hint = str(hint)
    out = _SANITIZED.get(hint)
    if out is not None:
        return out
    s = "".join(c if (c.isalnum() or c == "_") and c.isascii() else "_" for c in hint)
    if not s:
        s = "v"
    elif s[0].isdigit():
        s = "v_" + s
    if keyword.iskeyword(s):
        s = s + "_"
    if len(_SANITIZED) < 100000:
        _SANITIZED[hint] = s
    return s


def _is_true(e: Any) -> bool:
    return type(e) is E.IntImm and e.dtype == "bool" and e.value == 1


def _is_zero_of(e: Any, dtype: str) -> bool:
    return type(e) is E.IntImm and e.value == 0 and e.dtype == dtype


def _contains_block(s: Any) -> bool:
    stack = [s]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is S.BlockRealize or t is S.Block:
            return True
        if t is S.SeqStmt:
            stack.extend(x.seq)
        elif t is S.For or t is S.LetStmt or t is S.Allocate:
            stack.append(x.body)
        elif t is S.IfThenElse:
            stack.append(x.then_case)
            if x.else_case is not None:
                stack.append(x.else_case)
    return False


def _uses_any(e: Any, var_ids: set) -> bool:
    """Does expression ``e`` mention one of the variables (by id)?"""
    stack = [e]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is E.IntImm or t is E.FloatImm:
            continue
        if t is E.Var:
            if id(x) in var_ids:
                return True
            continue
        if isinstance(x, E.BinaryOp):
            stack.append(x.a)
            stack.append(x.b)
        elif isinstance(x, E.PrimExpr):
            for name in getattr(x, "__dataclass_fields__", ()):
                v = getattr(x, name)
                if isinstance(v, E.PrimExpr):
                    stack.append(v)
                elif isinstance(v, tuple):
                    stack.extend(y for y in v if isinstance(y, E.PrimExpr))
    return False


class _Printer:
    """One printing job: lines, optional spans, and a scoped name table."""

    def __init__(self, want_spans: bool):
        self.lines: list[str] = []
        self.spans: list[list] | None = [] if want_spans else None
        self._indents = ["    " * i for i in range(64)]
        self.reset_names()
        self._expr_fn = {
            E.Var: self._var, E.IntImm: self._intimm, E.FloatImm: self._floatimm,
            E.StringImm: self._stringimm, E.Add: self._arith, E.Sub: self._arith,
            E.Mul: self._arith, E.FloorDiv: self._arith, E.FloorMod: self._arith,
            E.Div: self._div, E.Mod: self._mod, E.Min: self._minmax, E.Max: self._minmax,
            E.EQ: self._cmp, E.NE: self._cmp, E.LT: self._cmp, E.LE: self._cmp,
            E.GT: self._cmp, E.GE: self._cmp, E.And: self._boolop, E.Or: self._boolop,
            E.Not: self._not, E.Select: self._select, E.Cast: self._cast, E.Call: self._call,
            E.BufferLoad: self._load, E.Ramp: self._ramp, E.Broadcast: self._broadcast,
            E.Let: self._let_expr,
        }
        self._stmt_fn = {
            S.For: self._for, S.BlockRealize: self._realize, S.SeqStmt: self._seq,
            S.BufferStore: self._store, S.IfThenElse: self._if, S.Evaluate: self._evaluate,
            S.LetStmt: self._letstmt, S.Allocate: self._allocate, S.Block: self._bare_block,
        }

    # ------------------------------------------------------------------ names
    def reset_names(self) -> None:
        self.name_of: dict[int, str] = {}
        self.active: set[str] = set(RESERVED)
        self.frames: list[list] = [[]]
        self.free_vars: list[E.Var] = []
        self.loop_of: dict[int, S.For] = {}
        self.keep: list = []  # keeps defined objects alive while their ids are in use

    def _fresh(self, hint: Any) -> str:
        base = _sanitize(hint)
        if base not in self.active:
            return base
        k = 1
        active = self.active
        while f"{base}_{k}" in active:
            k += 1
        return f"{base}_{k}"

    def define(self, obj: Any, hint: Any, frame: int = -1) -> str:
        name = self._fresh(hint)
        self.active.add(name)
        key = id(obj)
        self.frames[frame].append((key, name, self.name_of.get(key)))
        self.name_of[key] = name
        self.keep.append(obj)
        return name

    def push(self) -> None:
        self.frames.append([])

    def pop(self) -> None:
        frame = self.frames.pop()
        for key, name, prev in reversed(frame):
            self.active.discard(name)
            if prev is None:
                self.name_of.pop(key, None)
            else:
                self.name_of[key] = prev

    def name(self, obj: Any) -> str:
        n = self.name_of.get(id(obj))
        if n is None:  # used but never defined: a free variable/buffer, function-wide name
            n = self.define(obj, getattr(obj, "name", "v"), frame=0)
            if isinstance(obj, E.Var):
                self.free_vars.append(obj)
        return n

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
        idx = e.indices
        if not idx:
            return f"{n}[()]", _P_ATOM
        return f"{n}[{', '.join([self.ex(i) for i in idx])}]", _P_ATOM

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
        """Text of ``min + extent`` as the parser expects it (see parser._extent_of)."""
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
        if isinstance(v, dict):
            return self.dict_literal(tuple(v.items()))
        if isinstance(v, E.PrimExpr):
            return self.ex(v)
        return json.dumps(str(v), ensure_ascii=False)

    def dict_literal(self, pairs: tuple) -> str:
        return "{" + ", ".join(f"{self.literal(str(k))}: {self.literal(v)}"
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

    def buffer_annotation(self, buf: Buffer) -> str:
        parts = [self.shape(buf.shape), f'"{buf.dtype}"'] + self.buffer_extra(buf)
        return f"T.Buffer({', '.join(parts)})"

    def alloc_text(self, buf: Buffer) -> str:
        parts = [self.shape(buf.shape)]
        if buf.dtype != "float32":
            parts.append(f'dtype="{buf.dtype}"')
        parts += self.buffer_extra(buf)
        return f"T.alloc_buffer({', '.join(parts)})"

    def region(self, r: BufferRegion) -> str:
        n = self.name(r.buffer)
        if not r.region:
            return f"{n}[()]"
        parts = []
        for rg in r.region:
            mn, ext = rg.min, rg.extent
            if type(ext) is E.IntImm and ext.value == 1 and ext.dtype == mn.dtype:
                parts.append(self.ex(mn))
            elif _is_zero_of(mn, ext.dtype):
                parts.append(f"0:{self.ex(ext)}")
            else:
                parts.append(f"{self.ex(mn)}:{self.end_of(mn, ext)}")
        return f"{n}[{', '.join(parts)}]"

    def emit(self, ind: int, text: str) -> None:
        self.lines.append(self._indents[ind] + text if ind < 64 else "    " * ind + text)

    def span(self, node: Any, kind: str, name: str, start: int) -> list | None:
        if self.spans is None:
            return None
        rec = [node, kind, name, start, start]
        self.spans.append(rec)
        return rec

    # ------------------------------------------------------------------ statements
    def stmt(self, s: Any, ind: int) -> None:
        fn = self._stmt_fn.get(type(s))
        if fn is None:
            if s is None:
                self.emit(ind, "pass")
                return
            self.emit(ind, f"# <{type(s).__name__}>")
            return
        fn(s, ind)

    def _seq(self, s, ind):
        if not s.seq:
            self.emit(ind, "T.evaluate(0)")
            return
        st = self.stmt
        last = len(s.seq) - 1
        for k, x in enumerate(s.seq):
            if k < last and type(x) is S.LetStmt:
                self._letstmt(x, ind, last=False)  # its body must not swallow the rest
            else:
                st(x, ind)

    def _store(self, s, ind):
        start = len(self.lines) + 1
        n = self.name(s.buffer)
        idx = ", ".join([self.ex(i) for i in s.indices]) if s.indices else "()"
        self.emit(ind, f"{n}[{idx}] = {self.ex(s.value)}")
        if self.spans is not None:
            self.span(s, "stmt", n, start)

    def _evaluate(self, s, ind):
        start = len(self.lines) + 1
        self.emit(ind, f"T.evaluate({self.ex(s.value)})")
        if self.spans is not None:
            self.span(s, "stmt", "evaluate", start)

    def _if(self, s, ind, keyword_: str = "if"):
        start = len(self.lines) + 1
        rec = self.span(s, "stmt", "if", start)
        self.emit(ind, f"{keyword_} {self.ex(s.condition)}:")
        self.push()
        self.stmt(s.then_case, ind + 1)
        self.pop()
        els = s.else_case
        if els is not None:
            if type(els) is S.IfThenElse:
                self._if(els, ind, "elif")
            else:
                self.emit(ind, "else:")
                self.push()
                self.stmt(els, ind + 1)
                self.pop()
        if rec is not None:
            rec[4] = len(self.lines)

    def _letstmt(self, s, ind, last: bool = True):
        start = len(self.lines) + 1
        rec = self.span(s, "stmt", "let", start)
        value = self.ex(s.value)
        self.push()
        name = self.define(s.var, s.var.name)
        if last:
            self.emit(ind, f"{name}: T.{s.var.dtype} = {value}")
            self.stmt(s.body, ind)
        else:
            dt = "" if s.var.dtype == s.value.dtype else f', dtype="{s.var.dtype}"'
            self.emit(ind, f"with T.LetStmt({value}{dt}) as {name}:")
            self.stmt(s.body, ind + 1)
        self.pop()
        if rec is not None:
            rec[4] = len(self.lines)

    def _allocate(self, s, ind):
        start = len(self.lines) + 1
        rec = self.span(s, "stmt", "allocate", start)
        buf = s.buffer
        parts = [self.shape(buf.shape), f'"{buf.dtype}"'] + self.buffer_extra(buf)
        self.push()
        name = self.define(buf, buf.name)
        self.emit(ind, f"with T.allocate({', '.join(parts)}) as {name}:")
        self.stmt(s.body, ind + 1)
        self.pop()
        if rec is not None:
            rec[4] = len(self.lines)

    # loops -------------------------------------------------------------
    @staticmethod
    def _gridable(loop: S.For) -> bool:
        ext = loop.extent
        return (loop.kind is S.ForKind.SERIAL and not loop.annotations
                and _is_zero_of(loop.min, ext.dtype) and loop.loop_var.dtype == ext.dtype)

    def _for(self, loop, ind):
        start = len(self.lines) + 1
        chain = [loop]
        if self._gridable(loop):
            ids = {id(loop.loop_var)}
            body = loop.body
            while type(body) is S.For and self._gridable(body) and (
                    type(body.extent) is E.IntImm or not _uses_any(body.extent, ids)):
                chain.append(body)
                ids.add(id(body.loop_var))
                body = body.body
        if len(chain) > 1:
            head = "T.grid(" + ", ".join(self.ex(l.extent) for l in chain) + ")"
        else:
            args = []
            if _is_zero_of(loop.min, loop.extent.dtype):
                args.append(self.ex(loop.extent))
            else:
                args.append(self.ex(loop.min))
                args.append(self.end_of(loop.min, loop.extent))
            if loop.annotations:
                args.append("annotations=" + self.dict_literal(loop.annotations))
            head = f"{_KIND_FN.get(loop.kind, 'T.serial')}({', '.join(args)})"
        self.push()
        names = []
        for l in chain:
            names.append(self.define(l.loop_var, l.loop_var.name))
            self.loop_of[id(l.loop_var)] = l
        self.emit(ind, f"for {', '.join(names)} in {head}:")
        recs = [self.span(l, "loop", n, start) for l, n in zip(chain, names)]
        self.stmt(chain[-1].body, ind + 1)
        for l in chain:
            self.loop_of.pop(id(l.loop_var), None)
        self.pop()
        if self.spans is not None:
            end = len(self.lines)
            for r in recs:
                r[4] = end

    # blocks --------------------------------------------------------------
    def _remappable(self, block: S.Block, values: tuple) -> bool:
        if not block.iter_vars or len(values) != len(block.iter_vars):
            return False
        seen = set()
        for iv, v in zip(block.iter_vars, values):
            if type(v) is not E.Var or id(v) in seen:
                return False
            seen.add(id(v))
            loop = self.loop_of.get(id(v))
            if loop is None or iv.var.dtype != v.dtype:
                return False
            dom = iv.dom
            if not (_is_zero_of(dom.min, dom.extent.dtype)
                    and _is_zero_of(loop.min, loop.extent.dtype)):
                return False
            le, de = loop.extent, dom.extent
            if le is not de:
                if not (type(le) is E.IntImm and type(de) is E.IntImm and le.value == de.value
                        and le.dtype == de.dtype):
                    from engine.ir.structural import structural_equal
                    if not structural_equal(le, de):
                        return False
        return True

    def _realize(self, br, ind):
        self._block(br.block, br.iter_values, br.predicate, ind)

    def _bare_block(self, block, ind):  # a Block outside a BlockRealize (not expected)
        self._block(block, (), None, ind)

    def _block(self, block: S.Block, values: tuple, predicate: Any, ind: int) -> None:
        start = len(self.lines) + 1
        self.emit(ind, f"with T.block({json.dumps(block.name_hint, ensure_ascii=False)}):")
        rec = self.span(block, "block", block.name_hint, start)
        self.push()
        body_ind = ind + 1
        ivs = block.iter_vars
        if ivs:
            if self._remappable(block, values):
                vals = [self.ex(v) for v in values]
                kinds = "".join(iv.iter_type.value for iv in ivs)
                names = [self.define(iv.var, iv.var.name) for iv in ivs]
                self.emit(body_ind, f'{", ".join(names)} = T.axis.remap("{kinds}", '
                                    f'[{", ".join(vals)}])')
            else:
                for k, iv in enumerate(ivs):
                    v = values[k] if k < len(values) else E.IntImm(iv.var.dtype, 0)
                    val = self.ex(v)
                    dom = iv.dom
                    if _is_zero_of(dom.min, dom.extent.dtype):
                        d = self.ex(dom.extent)
                    else:
                        d = f"({self.ex(dom.min)}, {self.end_of(dom.min, dom.extent)})"
                    fn = "spatial" if iv.iter_type is S.IterType.SPATIAL else "reduce"
                    dt = "" if iv.var.dtype == v.dtype else f', dtype="{iv.var.dtype}"'
                    name = self.define(iv.var, iv.var.name)
                    self.emit(body_ind, f"{name} = T.axis.{fn}({d}, {val}{dt})")
        if predicate is not None and not _is_true(predicate):
            self.emit(body_ind, f"T.where({self.ex(predicate)})")
        self.emit(body_ind, f"T.reads({', '.join(self.region(r) for r in block.reads)})")
        self.emit(body_ind, f"T.writes({', '.join(self.region(r) for r in block.writes)})")
        if block.annotations:
            self.emit(body_ind, f"T.block_attr({self.dict_literal(block.annotations)})")
        for buf in block.alloc_buffers:
            text = self.alloc_text(buf)
            self.emit(body_ind, f"{self.define(buf, buf.name)} = {text}")
        if block.init is not None:
            self.emit(body_ind, "with T.init():")
            self.push()
            self.stmt(block.init, body_ind + 1)
            self.pop()
        self.stmt(block.body, body_ind)
        self.pop()
        if rec is not None:
            rec[4] = len(self.lines)

    # ------------------------------------------------------------------ functions
    def func(self, f: PrimFunc, name: str, ind: int) -> None:
        self.reset_names()
        self.emit(ind, "@T.prim_func")
        names = [self.define(p, p.name) for p in f.params]
        params = ", ".join(f"{n}: {self.buffer_annotation(p)}" for n, p in zip(names, f.params))
        self.emit(ind, f"def {_sanitize(name)}({params}):")
        decl_at = len(self.lines)
        first_span = len(self.spans) if self.spans is not None else 0
        body_ind = ind + 1
        if f.attrs:
            self.emit(body_ind, f"T.func_attr({self.dict_literal(f.attrs)})")
        body = f.body
        root = body.block if type(body) is S.BlockRealize else None
        if (root is not None and root.name_hint == "root" and not root.iter_vars
                and not body.iter_values and not root.reads and not root.writes
                and root.init is None and not root.annotations and _is_true(body.predicate)
                and (root.alloc_buffers or _contains_block(root.body))):
            start = len(self.lines) + 1
            self.emit(body_ind, '# with T.block("root"):')
            rec = self.span(root, "block", "root", start)
            for buf in root.alloc_buffers:
                text = self.alloc_text(buf)
                self.emit(body_ind, f"{self.define(buf, buf.name)} = {text}")
            self.stmt(root.body, body_ind)
            if rec is not None:
                rec[4] = len(self.lines)
        else:
            self.stmt(body, body_ind)
        if self.free_vars:  # symbolic variables: declare them right after the signature
            decls = [self._indents[body_ind] + f"{self.name_of[id(v)]} = T.{v.dtype}()"
                     for v in self.free_vars]
            self.lines[decl_at:decl_at] = decls
            if self.spans is not None:
                for rec in self.spans[first_span:]:
                    rec[3] += len(decls)
                    rec[4] += len(decls)

    def module(self, mod: IRModule) -> None:
        self.lines.append("# from tvm.script import tir as T")
        self.lines.append("@tvm.script.ir_module")
        self.lines.append("class Module:")
        if not mod.functions:
            self.lines.append("    pass")
        for k, (name, f) in enumerate(mod.functions):
            if k:
                self.lines.append("")
            self.func(f, name, 1)

    def run(self, obj: Any) -> str:
        if isinstance(obj, IRModule):
            self.module(obj)
        elif isinstance(obj, PrimFunc):
            self.func(obj, obj.name, 0)
        else:
            raise TypeError(f"script() prints an IRModule or a PrimFunc, not {type(obj).__name__}")
        return "\n".join(self.lines) + "\n"


def script(obj: Any) -> str:
    """TVMScript text of an IRModule or PrimFunc (course 2022 syntax)."""
    return _Printer(False).run(obj)


def script_with_spans(obj: Any) -> tuple[str, list[Span]]:
    """``(text, spans)``: the text of :func:`script` and where each loop, block and
    statement is printed (see :class:`Span`)."""
    p = _Printer(True)
    text = p.run(obj)
    return text, [Span(*rec) for rec in p.spans]


def repr_node(node: Any) -> str:
    """Short text for any IR node (one line for expressions). Never raises."""
    try:
        if isinstance(node, (IRModule, PrimFunc)):
            return script(node).rstrip("\n")
        p = _Printer(False)
        if isinstance(node, E.PrimExpr):
            return p.ex(node)
        if isinstance(node, (S.Stmt, S.Block)):
            p.stmt(node, 0)
            return "\n".join(p.lines)
        if isinstance(node, Buffer):
            return f"{node.name}: {p.buffer_annotation(node)}"
        if isinstance(node, BufferRegion):
            return p.region(node)
        if isinstance(node, Range):
            return f"Range({p.ex(node.min)}, {p.ex(node.extent)})"
        if isinstance(node, S.IterVar):
            kind = "spatial" if node.iter_type is S.IterType.SPATIAL else "reduce"
            return (f"IterVar({p.ex(node.var)}: {kind}, "
                    f"dom=Range({p.ex(node.dom.min)}, {p.ex(node.dom.extent)}))")
        return f"<{type(node).__name__}>"
    except Exception:  # noqa: BLE001 - repr must never fail
        return f"<{type(node).__name__} at {id(node):#x}>"

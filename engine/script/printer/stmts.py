"""Statements as text: buffer stores, ``T.evaluate``, ``if``/``elif``/``else``, let bindings,
``with T.allocate``, loops (perfect serial nests as one ``T.grid`` line) and blocks (block
axes as one ``T.axis.remap`` line when they can be), with the line span of each."""
from __future__ import annotations

import json
from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S

from .exprs import ExprPrinter, is_zero_of, subscript

_KIND_FN = {S.ForKind.SERIAL: "T.serial", S.ForKind.PARALLEL: "T.parallel",
            S.ForKind.VECTORIZED: "T.vectorized", S.ForKind.UNROLLED: "T.unroll",
            S.ForKind.THREAD_BINDING: "T.thread_binding"}


def is_true(e: Any) -> bool:
    return type(e) is E.IntImm and e.dtype == "bool" and e.value == 1


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


#: the T.axis function printing each kind of block axis
_AXIS_FUNCTION = {S.IterType.SPATIAL: "spatial", S.IterType.REDUCE: "reduce",
                  S.IterType.SCAN: "scan", S.IterType.OPAQUE: "opaque"}


class ScriptTooLarge(ValueError):
    """The printed text would be longer than the ``max_chars`` asked for."""

    def __init__(self, max_chars: int):
        self.max_chars = max_chars
        super().__init__(f"the program's text is longer than {max_chars} characters")


class StmtPrinter(ExprPrinter):
    """Statement printing into ``self.lines`` (mixed into the printer)."""

    max_chars: int | None = None   # set by the printer: stop beyond this many characters
    chars = 0

    def stmt_table(self) -> dict:
        """Statement node type -> the bound method printing it."""
        return {
            S.For: self._for, S.BlockRealize: self._realize, S.SeqStmt: self._seq,
            S.BufferStore: self._store, S.IfThenElse: self._if, S.Evaluate: self._evaluate,
            S.LetStmt: self._letstmt, S.Allocate: self._allocate, S.Block: self._bare_block,
        }

    def emit(self, ind: int, text: str) -> None:
        line = self._indents[ind] + text if ind < 64 else "    " * ind + text
        if self.max_chars is not None:
            self.chars += len(line) + 1
            if self.chars > self.max_chars:
                raise ScriptTooLarge(self.max_chars)
        self.lines.append(line)

    def span(self, node: Any, kind: str, name: str, start: int) -> list | None:
        if self.spans is None:
            return None
        rec = [node, kind, name, start, start]
        self.spans.append(rec)
        return rec

    def end_span(self, rec: list | None) -> None:
        """Close a span opened by :meth:`span` at the last line printed."""
        if rec is not None:
            rec[4] = len(self.lines)

    def emit_allocs(self, buffers: tuple, ind: int) -> None:
        """``X = T.alloc_buffer(...)`` lines (defining the names)."""
        for buf in buffers:
            text = self.alloc_text(buf)
            self.emit(ind, f"{self.define(buf, buf.name)} = {text}")

    def match_text(self, m: S.MatchBufferRegion) -> str:
        """``X = T.match_buffer(B[vi, 0:4], (4,), "float16", scope="local")`` (defining X;
        the dtype and scope always the source's)."""
        buf = m.buffer
        parts = [self.region(m.source), self.shape(buf.shape)]
        if buf.dtype != "float32":
            parts.append(f'"{buf.dtype}"')
        if buf.scope != "global":
            parts.append(f'scope="{buf.scope}"')
        if buf.strides:   # a tensor intrinsic's ``strides=[sa, 1]``: sa is the source's
            parts.append(f"strides={self.shape(buf.strides)}")
        return f"{self.define(buf, buf.name)} = T.match_buffer({', '.join(parts)})"

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
        target = subscript(n, [self.ex(i) for i in s.indices])
        self.emit(ind, f"{target} = {self.ex(s.value)}")
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
        self.end_span(rec)

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
        self.end_span(rec)

    def _allocate(self, s, ind):
        start = len(self.lines) + 1
        rec = self.span(s, "stmt", "allocate", start)
        buf = s.buffer
        args = self.buffer_args(buf)
        self.push()
        name = self.define(buf, buf.name)
        self.emit(ind, f"with T.allocate({args}) as {name}:")
        self.stmt(s.body, ind + 1)
        self.pop()
        self.end_span(rec)

    # loops -------------------------------------------------------------
    @staticmethod
    def _gridable(loop: S.For) -> bool:
        ext = loop.extent
        return (loop.kind is S.ForKind.SERIAL and not loop.annotations
                and is_zero_of(loop.min, ext.dtype) and loop.loop_var.dtype == ext.dtype)

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
            if is_zero_of(loop.min, loop.extent.dtype):
                args.append(self.ex(loop.extent))
            else:
                args.append(self.ex(loop.min))
                args.append(self.end_of(loop.min, loop.extent))
            if loop.thread_tag:
                args.append(f'thread="{loop.thread_tag}"')
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
        if any(iv.iter_type not in (S.IterType.SPATIAL, S.IterType.REDUCE)
               for iv in block.iter_vars):
            return False                         # T.axis.remap has kinds S and R only
        seen = set()
        for iv, v in zip(block.iter_vars, values):
            if type(v) is not E.Var or id(v) in seen:
                return False
            seen.add(id(v))
            loop = self.loop_of.get(id(v))
            if loop is None or iv.var.dtype != v.dtype:
                return False
            dom = iv.dom
            if not (is_zero_of(dom.min, dom.extent.dtype)
                    and is_zero_of(loop.min, loop.extent.dtype)):
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
        self.emit(ind, f"with T.{self.spell['block']}"
                       f"({json.dumps(block.name_hint, ensure_ascii=False)}):")
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
                    if is_zero_of(dom.min, dom.extent.dtype):
                        d = self.ex(dom.extent)
                    else:
                        d = f"({self.ex(dom.min)}, {self.end_of(dom.min, dom.extent)})"
                    fn = _AXIS_FUNCTION[iv.iter_type]
                    dt = "" if iv.var.dtype == v.dtype else f', dtype="{iv.var.dtype}"'
                    name = self.define(iv.var, iv.var.name)
                    self.emit(body_ind, f"{name} = T.axis.{fn}({d}, {val}{dt})")
        if predicate is not None and not is_true(predicate):
            self.emit(body_ind, f"T.where({self.ex(predicate)})")
        self.emit(body_ind, f"T.reads({', '.join(self.region(r) for r in block.reads)})")
        self.emit(body_ind, f"T.writes({', '.join(self.region(r) for r in block.writes)})")
        if block.annotations:
            self.emit(body_ind, f"T.{self.spell['block_attr']}"
                                f"({self.dict_literal(block.annotations)})")
        self.emit_allocs(block.alloc_buffers, body_ind)
        for m in block.match_buffers:
            self.emit(body_ind, self.match_text(m))
        if block.init is not None:
            self.emit(body_ind, "with T.init():")
            self.push()
            self.stmt(block.init, body_ind + 1)
            self.pop()
        self.stmt(block.body, body_ind)
        self.pop()
        self.end_span(rec)


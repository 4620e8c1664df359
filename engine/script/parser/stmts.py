"""Statements: statement lists, ``if``/``else``, assignments (buffer stores, ``+=``, let
bindings, ``T.alloc_buffer``, ``T.match_buffer``, symbolic variables, block axes) and
expression statements (``T.reads``/``T.writes``, ``T.where``, ``T.block_attr``,
``T.func_attr``, ``T.evaluate``). Loops and ``with`` statements are in :mod:`.blocks`.
"""
from __future__ import annotations

import ast
from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import SCALAR_DTYPES

from ..errors import ScriptError
from .context import CONSUMED, ParserContext, is_docstring, nop
from .dialect import BINOPS, DTYPE_LIKE, FUNC_ATTR_2022, KNOWN_T, STMT_FUNCS, STMT_NAMES


class StmtParser(ParserContext):
    """Statement parsing (mixed into the parser; see :mod:`.module`)."""

    def stmts(self, nodes: list) -> Any:
        """Parse a statement list into one Stmt (Evaluate(0) when empty)."""
        return S.seq(*self.stmt_list(nodes)) or nop()

    def nested(self, nodes: list, scope: dict | None = None) -> Any:
        """Parse a nested body: one level deeper, in a new name scope (``scope``)."""
        self.scopes.append({} if scope is None else scope)
        self.depth += 1
        try:  # (calls stmt_list itself: one Python frame per nesting level, as stmts)
            return S.seq(*self.stmt_list(nodes)) or nop()
        finally:
            self.depth -= 1
            self.scopes.pop()

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
            if r is CONSUMED:
                break
            if r is not None:
                if isinstance(r, tuple) and r and r[0] is CONSUMED:
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
            then = self.nested(n.body)
            els = self.nested(n.orelse) if n.orelse else None
            return S.IfThenElse(cond, then, els)
        if t is ast.Pass:
            return None
        what = STMT_NAMES.get(t, type(n).__name__)
        raise self.err(n, f"unsupported statement: {what} cannot be used in TVMScript")

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
        if type(target) is ast.Tuple and type(value) is ast.Tuple:
            return self.tuple_assign(n, target, value, rest)
        if type(target) is not ast.Name:
            if type(target) is ast.Tuple:
                raise self.err(target, "only T.axis.remap(...) or as many values as names "
                                       "(vi, vj = T.axis.spatial(...), T.axis.spatial(...)) "
                                       "can assign several names")
            raise self.err(target, "unsupported assignment target")
        name = target.id
        if name in self.ns:
            raise self.err(target, f"{name!r} is the TVMScript namespace and cannot be "
                                   "assigned")
        if f in ("alloc_buffer", "sblock_alloc_buffer"):
            buf = self.new_buffer(value, name, f)
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
        if f == "launch_thread":
            return self.launch_thread(name, value, rest)
        if f == "env_thread":
            raise self.err(value, 'write the launch with its axis and extent: '
                                  f'{name} = T.launch_thread("threadIdx.x", 128)')
        value_e = self.prim(value)
        return self.let(n, name, value_e, value_e.dtype, rest)

    def launch_thread(self, name: str, call: ast.Call, rest: list) -> Any:
        """``tx = T.launch_thread("threadIdx.x", 128)`` and the statements after it: a loop
        bound to that thread axis over them (what TVM's launch means; the engine's form is
        ``for tx in T.thread_binding(128, thread="threadIdx.x")``)."""
        args, _ = self.call_args(call, "launch_thread", 2, 2)
        tag = self.thread_tag(args[0])
        ext = self.loop_bound(args[1], "T.launch_thread() extent")
        var = E.Var(name, ext.dtype)
        self.loop_dom[id(var)] = (E.IntImm(ext.dtype, 0), ext)
        self.keep.append(var)
        self.scopes.append({name: var})
        try:
            body = self.stmts(rest)
        finally:
            self.scopes.pop()
        return (CONSUMED, S.For(var, E.IntImm(ext.dtype, 0), ext, S.ForKind.THREAD_BINDING,
                                body, (), tag))

    def tuple_assign(self, n: ast.Assign, target: ast.Tuple, value: ast.Tuple,
                     rest: list) -> Any:
        """``a, b = x, y`` as ``a = x`` then ``b = y`` (each value may not read a name
        assigned on the left: that would need all values first, as Python does)."""
        if len(target.elts) != len(value.elts):
            raise self.err(n, f"{len(target.elts)} names on the left, {len(value.elts)} "
                              "values on the right")
        names = {t.id for t in target.elts if type(t) is ast.Name}
        for v in value.elts:
            if any(type(x) is ast.Name and x.id in names for x in ast.walk(v)):
                raise self.err(v, "a value assigned together with other names reads one of "
                                  "them; assign them one per line")
        parts = [ast.copy_location(ast.Assign(targets=[t], value=v), n)
                 for t, v in zip(target.elts, value.elts)]
        return (CONSUMED, self.stmts(parts + list(rest)))

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
        annotation = n.annotation
        if type(annotation) is ast.Subscript and self.tname(annotation.value) == "let":
            annotation = annotation.slice          # TVM 0.27's x: T.let[T.int32] = ...
        f = self.tname(annotation)
        if f is None or not (f in SCALAR_DTYPES or DTYPE_LIKE.match(f)):
            raise self.err(n.annotation, "annotate a let binding with a dtype, like "
                                         "x: T.int32 = ... (or x: T.let[T.int32] = ...)")
        dtype = self.dtype(annotation, f)
        if n.value is None:
            raise self.err(n, f"{n.target.id!r} needs a value")
        value = self.prim(n.value, dtype)
        return self.let(n, n.target.id, value, dtype, rest)

    def let(self, n: ast.AST, name: str, value: E.PrimExpr, dtype: str, rest: list) -> Any:
        var = E.Var(name, dtype)
        self.scopes.append({name: var})
        body = self.stmts(rest)
        self.scopes.pop()
        return (CONSUMED, S.LetStmt(var, value, body))

    def augassign(self, n: ast.AugAssign) -> S.Stmt:
        if type(n.target) is not ast.Subscript:
            raise self.err(n.target, "augmented assignment (+=) needs a buffer element "
                                     "target such as A[i] += 1")
        buf = self.store_buffer(n.target)
        idx = self.indices(buf, n.target)
        cls = BINOPS.get(type(n.op))
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

    def expr_stmt(self, n: ast.Expr) -> Any:
        v = n.value
        if is_docstring(n):
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
            if f in ("block_attr", "sblock_attr"):
                ctx = self.block_ctx(n, f"T.{f}")
                args, _ = self.call_args(v, f, 1, 1)
                ctx.annotations = (ctx.annotations or ()) + self.attr_dict(args[0], f)
                return None
            if f == "func_attr":
                if self.depth != 0 or self.blocks:
                    raise self.err(n, "T.func_attr belongs at the top of the function")
                args, _ = self.call_args(v, f, 1, 1)
                # TVM 0.27 spells tir.noalias tirx.noalias: the same attribute
                self.attrs = self.attrs + tuple((FUNC_ATTR_2022.get(k, k), x)
                                                for k, x in self.attr_dict(args[0], f))
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
            if f is not None and f not in KNOWN_T and not f.startswith("builtin."):
                raise self.unknown_t(v.func, f)
            if f is not None and f in STMT_FUNCS:
                raise self.err(n, f"T.{f}(...) cannot be used as a statement here")
            return S.Evaluate(self.prim(v))
        raise self.err(n, "this expression statement has no effect (use T.evaluate(...) "
                          "or assign it to a buffer element)")


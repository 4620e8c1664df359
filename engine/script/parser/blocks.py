"""Loops and ``with`` statements: ``for`` over ``T.grid``/``range``/``T.serial``/
``T.parallel``/``T.vectorized``/``T.unroll``; ``with T.block(...)``/``T.sblock`` (and the
block axes ``T.axis.*`` declared inside), ``with T.init()``, ``with T.LetStmt(...) as x``
and ``with T.allocate(...) as X``.
"""
from __future__ import annotations

import ast
from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer, Range
from engine.ir.dtype import is_int, lanes_of
from engine.ir.functor import collect_vars

from ..regions import infer_block_regions
from .context import BlockCtx, ParserContext, const_true, extent_of
from .dialect import KNOWN_T, LOOP_KINDS


class BlockParser(ParserContext):
    """Loop and block parsing (mixed into the parser; see :mod:`.module`)."""

    def block_ctx(self, node: ast.AST, what: str) -> BlockCtx:
        if not self.blocks:
            raise self.err(node, f"{what} must be inside a `with T.block(...)` statement")
        return self.blocks[-1]

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
        elif f in LOOP_KINDS:
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
                ext = extent_of(mn, end)
            loops = [(mn, ext)]
            kind = LOOP_KINDS[f]
            annotations = self.attr_dict(kw["annotations"], f) if "annotations" in kw else ()
        elif f == "thread_binding":
            if len(targets) != 1:
                raise self.err(n.target, "T.thread_binding() defines one loop variable")
            mn, ext, thread_tag, annotations = self.thread_binding_args(it)
            loops = [(mn, ext)]
            kind = S.ForKind.THREAD_BINDING
        elif f is None:
            raise self.err(it, f"cannot loop over {self.dotted(it.func) or 'this'!r}; use "
                               "T.grid, range, T.serial, T.parallel, T.vectorized or T.unroll")
        elif f in KNOWN_T:
            raise self.err(it, f"cannot loop over T.{f}(...); use T.grid, range, T.serial, "
                               "T.parallel, T.vectorized or T.unroll")
        else:
            raise self.unknown_t(it.func, f)
        if kind is not S.ForKind.THREAD_BINDING:
            thread_tag = ""
        scope: dict = {}
        vars_ = []
        for tg, (mn, ext) in zip(targets, loops):
            v = E.Var(tg.id, ext.dtype)
            scope[tg.id] = v
            self.loop_dom[id(v)] = (mn, ext)
            self.keep.append(v)
            vars_.append(v)
        body = self.nested(n.body, scope)
        for v, (mn, ext) in reversed(list(zip(vars_, loops))):
            body = S.For(v, mn, ext, kind, body, annotations, thread_tag)
        return body

    def thread_binding_args(self, it: ast.Call) -> tuple:
        """``T.thread_binding([start,] stop, thread=..., annotations=...)`` (TVM also takes
        the thread as the last positional argument): (min, extent, tag, annotations)."""
        args, kw = self.call_args(it, "thread_binding", 1, 3, {"thread", "annotations"})
        if "thread" not in kw and args and type(args[-1]) is ast.Constant and \
                isinstance(args[-1].value, str):
            kw["thread"], args = args[-1], args[:-1]
        if "thread" not in kw:
            raise self.err(it, 'T.thread_binding needs the thread axis: '
                               'T.thread_binding(128, thread="threadIdx.x")')
        tag = self.thread_tag(kw["thread"])
        if not 1 <= len(args) <= 2:
            raise self.err(it, "T.thread_binding takes the extent, or start and stop, and "
                               "the thread axis")
        lbl = "T.thread_binding() arguments"
        if len(args) == 1:
            ext = self.loop_bound(args[0], lbl)
            mn = E.IntImm(ext.dtype, 0)
        else:
            mn = self.loop_bound(args[0], lbl)
            end = self.loop_bound(args[1], lbl)
            if mn.dtype != end.dtype and type(mn) is E.IntImm:
                mn = E.IntImm(end.dtype, mn.value)
            if mn.dtype != end.dtype:
                raise self.err(it, f"loop bounds have different dtypes ({mn.dtype} and "
                                   f"{end.dtype})")
            ext = extent_of(mn, end)
        annotations = self.attr_dict(kw["annotations"], "thread_binding") \
            if "annotations" in kw else ()
        return mn, ext, tag, annotations

    def thread_tag(self, node: ast.AST) -> str:
        """A thread axis' name, as TVM spells it ("threadIdx.x", "blockIdx.y", "vthread.x";
        TVM's bare "vthread" is "vthread.x")."""
        if type(node) is not ast.Constant or not isinstance(node.value, str):
            raise self.err(node, 'the thread axis is a string such as "threadIdx.x"')
        tag = "vthread.x" if node.value == "vthread" else node.value
        if tag not in S.THREAD_TAGS:
            raise self.err(node, f"unknown thread axis {node.value!r}"[:80] + "; use one of "
                                 + ", ".join(S.THREAD_TAGS))
        return tag

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
            ctx.init = self.nested(n.body)
            return None
        if f == "LetStmt":
            args, kw = self.call_args(call, f, 1, 1, {"dtype", "var"})
            if type(item.optional_vars) is not ast.Name:
                raise self.err(n, "write `with T.LetStmt(value) as x:`")
            value = self.prim(args[0])
            dtype = self.dtype_arg(kw["dtype"]) if "dtype" in kw else value.dtype
            var = E.Var(item.optional_vars.id, dtype)
            body = self.nested(n.body, {item.optional_vars.id: var})
            return S.LetStmt(var, value, body)
        if f == "launch_thread":
            # TVM's `with T.launch_thread("threadIdx.x", 1024) as tx:` — a loop bound to the
            # axis over the body (as `tx = T.launch_thread(...)` over the statements after it)
            if type(item.optional_vars) is not ast.Name:
                raise self.err(n, 'write `with T.launch_thread("threadIdx.x", 128) as tx:`')
            args, _ = self.call_args(call, f, 2, 2)
            tag = self.thread_tag(args[0])
            ext = self.loop_bound(args[1], "T.launch_thread() extent")
            var = E.Var(item.optional_vars.id, ext.dtype)
            self.loop_dom[id(var)] = (E.IntImm(ext.dtype, 0), ext)
            self.keep.append(var)
            body = self.nested(n.body, {item.optional_vars.id: var})
            return S.For(var, E.IntImm(ext.dtype, 0), ext, S.ForKind.THREAD_BINDING, body, (),
                         tag)
        if f == "allocate":
            if type(item.optional_vars) is not ast.Name:
                raise self.err(n, "write `with T.allocate(shape, dtype) as X:`")
            buf = self.new_buffer(call, item.optional_vars.id, f)
            body = self.nested(n.body, {item.optional_vars.id: buf})
            return S.Allocate(buf, body)
        if f is None:
            raise self.err(call, "unsupported `with` statement; use `with T.block(\"name\"):` "
                                 "or `with T.init():`")
        if f not in KNOWN_T:
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
        ctx = BlockCtx(name, n)
        outer_loops = set(self.loop_dom)
        self.blocks.append(ctx)
        self.saw_block = True
        try:
            body = self.nested(n.body)
        finally:
            self.blocks.pop()
        if ctx.iter_vars:
            self.check_no_outer_loop_var(n, name, outer_loops, (body, ctx.init, ctx.reads,
                                                                ctx.writes,
                                                                tuple(ctx.match_buffers)))
        reads, writes = ctx.reads, ctx.writes
        if name == "root" and not self.blocks and not outer_loops and not ctx.iter_vars:
            # a function's root block written out: as TVM's parser (and the engine's
            # implicit root), its regions are not inferred
            reads, writes = reads or (), writes or ()
        if reads is None or writes is None:
            r, w = infer_block_regions(body, ctx.init, tuple(ctx.alloc_buffers),
                                       tuple(ctx.match_buffers))
            reads = r if reads is None else reads
            writes = w if writes is None else writes
        block = S.Block(tuple(ctx.iter_vars), reads, writes, name, body, ctx.init,
                        tuple(ctx.alloc_buffers), ctx.annotations or (),
                        tuple(ctx.match_buffers))
        return S.BlockRealize(tuple(ctx.iter_values),
                              ctx.predicate if ctx.predicate is not None else const_true(), block)

    def check_no_outer_loop_var(self, n: ast.With, name: str, outer_loops: set,
                                parts: tuple) -> None:
        """A block with axes sees the enclosing loops only through its axes' bindings (and
        ``T.where``): its body, init and regions may not use an outer loop variable — the
        schedule's legality checks reason about the axes (TVM refuses such a block too)."""
        for part in parts:
            if part is None:
                continue
            used = next((v for v in collect_vars(part) if id(v) in outer_loops), None)
            if used is not None:
                raise self.err(n, f"block \"{name}\" uses the loop variable {used.name} of an "
                                  f"enclosing loop; inside a block use its axes instead (bind "
                                  f"one with T.axis.spatial(extent, {used.name}) and use that)")

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
            if kind not in ("spatial", "reduce", "S", "R", "scan", "opaque"):
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
            itype = {"spatial": S.IterType.SPATIAL, "S": S.IterType.SPATIAL,
                     "reduce": S.IterType.REDUCE, "R": S.IterType.REDUCE,
                     "scan": S.IterType.SCAN, "opaque": S.IterType.OPAQUE}[kind]
            defs = [(target.id, value, dom, itype, dtype)]
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
            return Range(mn, extent_of(mn, end))
        ext = self.loop_bound(node, "axis domain")
        return Range(E.IntImm(ext.dtype, 0), ext)


"""cache_index: the index arithmetic of a block precomputed into integer buffers.

Which expressions are cached follows TVM's common-subexpression rule: the *computations* a
block's store does are its largest subexpressions that are pure arithmetic (no buffer
load) of at least two nodes (not a lone variable or constant), counted across the store
with equivalent ones (equal once simplified) merged. With ``cse_thresh`` = 0 every
computation of the stored value is cached; with a threshold, a computation met fewer
times than the threshold is replaced by its own computations (counted as often as it),
and only those met at least ``cse_thresh`` times are cached. The cached expressions are
ordered as they first appear (post-order) in the stored value, the most complex first.

Each one gets a buffer ``index_var_<k>`` (one dimension per block axis it uses, sized by
the largest value the axis's binding takes) written by a new block ``index_<k>`` that
sits right before the statement holding the block in its scope, over the loops its axes
are bound to. Those buffers are integer buffers the function allocates, so they are
zero-filled and the bounds proof bounds an index read from them by the values stored
(:mod:`engine.lower.bounds_check`).
"""
from __future__ import annotations

from typing import Any

from engine.arith.simplify import Analyzer, simplify
from engine.ir import expr as E
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.functor import Mutator, post_order_visit, substitute
from engine.ir.stmt import Block, BlockRealize, BufferStore, For, ForKind, IterType, IterVar, seq

from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import flatten_seq
from ._common import binding_map, expect_block, fresh_name, is_int
from .buffers import buffer_names, check_scope, compose, need_attrs, rewrite_stmts


# ------------------------------------------------------------------ the computations
def _kids(e: E.PrimExpr) -> list:
    out = []
    for _, v in e.fields():
        if isinstance(v, E.PrimExpr):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, E.PrimExpr))
    return out


def complexity(e: Any) -> int:
    """The number of expression nodes in ``e``."""
    n = 0

    def count(x):
        nonlocal n
        if isinstance(x, E.PrimExpr):
            n += 1
    post_order_visit(e, count)
    return n


def _eligible(e: E.PrimExpr) -> bool:
    return (not isinstance(e, (E.Ramp, E.Broadcast, E.BufferLoad)) and complexity(e) > 1
            and not any(isinstance(x, E.BufferLoad) for x in _all_nodes(e)))


def _all_nodes(e: Any) -> list:
    out: list = []
    post_order_visit(e, out.append)
    return out


def _computations(e: Any, out: list) -> None:
    """The largest eligible subexpressions of ``e`` (with repeats), in pre-order."""
    if not isinstance(e, E.PrimExpr) or isinstance(e, (E.IntImm, E.FloatImm, E.Var)):
        return
    if _eligible(e):
        out.append(e)
        return
    for k in _kids(e):
        _computations(k, out)


def _key(e: Any) -> Any:
    """A hashable form of ``e`` where variables are themselves (not renamed as in
    ``structural_equal``): ``h - 1`` and ``w - 1`` differ."""
    if isinstance(e, E.Var):
        return ("var", id(e))
    if isinstance(e, tuple):
        return tuple(_key(x) for x in e)
    if hasattr(e, "fields"):
        return (type(e).__name__,) + tuple(_key(v) for _, v in e.fields())
    return e


def _same(a: Any, b: Any) -> bool:
    return _key(a) == _key(b)


class _Table:
    """Computations with their counts, equivalent ones (equal once simplified) merged."""

    def __init__(self):
        self.items: list = []  # [expr, normal form, count]

    def find(self, e: E.PrimExpr):
        norm = simplify(e)
        return next((it for it in self.items if _same(it[1], norm)), None), norm

    def add(self, e: E.PrimExpr, count: int) -> None:
        it, norm = self.find(e)
        if it is None:
            self.items.append([e, norm, count])
        else:
            it[2] += count


def cached_expressions(stores: list, cse_thresh: int) -> list:
    """The expressions TVM's cache_index caches for these stores (see the module doc)."""
    chosen: list = []
    for store in stores:
        found: list = []
        for i in store.indices:
            _computations(i, found)
        _computations(store.value, found)
        table = _Table()
        for e in found:
            table.add(e, 1)
        k = 0
        while k < len(table.items):
            e, _, count = table.items[k]
            if count < cse_thresh:
                subs: list = []
                for kid in _kids(e):
                    _computations(kid, subs)
                for s in subs:
                    table.add(s, count)
            k += 1
        for node in _all_nodes(store.value):
            if not isinstance(node, E.PrimExpr):
                continue
            for it in table.items:
                if it[2] >= cse_thresh and it[2] > 0 and not any(c is it[0] for c in chosen) \
                        and _same(simplify(node), it[1]):
                    chosen.append(it[0])
        chosen.sort(key=lambda x: -complexity(x))
    return chosen


class _Replace(Mutator):
    """Every subexpression equivalent to ``target`` becomes ``load``."""

    def __init__(self, target: E.PrimExpr, load: E.PrimExpr):
        self.norm = simplify(target)
        self.load = load

    def visit(self, n: Any) -> Any:
        if isinstance(n, E.PrimExpr) and not isinstance(n, (E.Var, E.IntImm, E.FloatImm)) \
                and _same(simplify(n), self.norm):
            return self.load
        return super().visit(n)


def _stores(blk: Block) -> list:
    out: list = []
    for part in (blk.init, blk.body):
        if part is not None:
            post_order_visit(part, lambda x: out.append(x) if type(x).__name__ ==
                             "BufferStore" else None)
    return out


def _first_vars(e: Any) -> list:
    seen: list = []
    post_order_visit(e, lambda x: seen.append(x) if isinstance(x, E.Var) and
                     not any(x is s for s in seen) else None)
    return seen


# ------------------------------------------------------------------ the primitive
@register
class CacheIndex(Primitive):
    kind = "CacheIndex"
    method = "cache_index"
    returns = "list"
    attr_kinds = (("storage_scope", "str"), ("cse_thresh", "int"))
    required_attrs = 1

    def call(self, sch, block, storage_scope: str, cse_thresh: int = 0):
        """Precompute the index arithmetic of a block into integer buffers: each cached
        expression is stored by a new block ``index_<k>`` into ``index_var_<k>`` and the
        block loads it from there. Returns the new blocks.

        ``cse_thresh`` (TVM's common-subexpression threshold): 0 caches every computation
        of the stored value; ``n`` caches only the subexpressions met at least ``n`` times.

        It requires: 1) ``storage_scope`` is "global", "local" or "shared"; 2)
        ``cse_thresh`` is an integer >= 0; 3) the block's store computes at least one
        such expression (pure integer or float arithmetic of two nodes or more, no buffer
        load); 4) each cached expression uses only the block's axes, which are bound to
        the loops around the block with values >= 0.

        Before::

            for i, j in T.grid(32, 4):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi * 4 + vj] + A[vj * 32 + vi]

        Call::

            sch.cache_index(sch.get_block("B"), "global")

        After::

            index_var_0 = T.alloc_buffer((32, 4), "int32")
            index_var_1 = T.alloc_buffer((4, 32), "int32")
            for ax0, ax1 in T.grid(32, 4):
                with T.block("index_0"):
                    v0, v1 = T.axis.remap("SS", [ax0, ax1])
                    index_var_0[v0, v1] = v0 * 4 + v1
            for ax0, ax1 in T.grid(4, 32):
                with T.block("index_1"):
                    v0, v1 = T.axis.remap("SS", [ax0, ax1])
                    index_var_1[v0, v1] = v0 * 32 + v1
            for i, j in T.grid(32, 4):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[index_var_0[vi, vj]] + A[index_var_1[vj, vi]]
        """
        return sch._run(self, [block], [storage_scope, cse_thresh])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0])
        got = need_attrs(ctx, attrs, 1, self.method)
        scope = got[0]
        thresh = got[1] if len(got) > 1 and got[1] is not None else 0
        name = blk.name_hint
        check_scope(ctx, f"block {name}", scope)
        if not is_int(thresh) or thresh < 0:
            raise ctx.error(f"block {name}", f"cse_thresh must be an integer >= 0, not "
                            f"{thresh!r} (requirement 2)", "give 0 to cache every index "
                            "computation", highlight=[name])
        exprs = cached_expressions(_stores(blk), thresh)
        if not exprs:
            raise ctx.error(f"block {name}", f"block {name} computes no index expression "
                            "to cache (requirement 3: its store has no pure arithmetic of "
                            "two nodes or more" + (f" met {thresh} times" if thresh else "")
                            + ")", "pick a block whose accesses compute an index, such as "
                            "A[vi * 4 + vj]" + (", or lower cse_thresh" if thresh else ""),
                            highlight=[name])
        idx = ctx.index
        realize = idx.realize[id(blk)]
        bindings = binding_map(realize)
        loops = [a for a in idx.ancestors(realize) if isinstance(a, For)]
        loop_of = {id(lp.loop_var): lp for lp in loops}
        an = Analyzer({lp.loop_var: (E.as_const_int(lp.min),
                                     None if E.as_const_int(lp.min) is None or
                                     E.as_const_int(lp.extent) is None else
                                     E.as_const_int(lp.min) + E.as_const_int(lp.extent) - 1)
                       for lp in loops})
        used = buffer_names(ctx.func)
        block_names = set(idx.blocks)
        nests, stages, buffers, loads = [], [], [], []
        for k, ex in enumerate(exprs):
            axes = _first_vars(ex)
            bad = [v for v in axes if v not in bindings]
            if bad:
                raise ctx.error(f"block {name}", f"the index {ex} uses {bad[0].name}, which "
                                "is not an axis of the block (requirement 4)", "cache_index "
                                "a block with no loop inside it", highlight=[name])
            loop_vars: list = []
            for v in axes:
                for lv in _first_vars(bindings[v]):
                    if id(lv) not in loop_of:
                        raise ctx.error(f"block {name}", f"axis {v.name} is bound to "
                                        f"{bindings[v]}, which is not made of the loops "
                                        "around the block (requirement 4)", "",
                                        highlight=[name])
                    if not any(lv is x for x in loop_vars):
                        loop_vars.append(lv)
            shape = []
            for v in axes:
                lo, hi = an.bound(bindings[v]) or (None, None)
                if lo is None or hi is None or lo < 0:
                    raise ctx.error(f"block {name}", f"axis {v.name}'s binding "
                                    f"{bindings[v]} has no constant range from 0 "
                                    "(requirement 4)", "", highlight=[name])
                shape.append(hi + 1)
            bname = fresh_name(f"index_var_{k}", used)
            used.add(bname)
            buf = Buffer(bname, tuple(E.const(s, "int32") for s in shape), ex.dtype, scope)
            new_loops = [E.Var(f"ax{j}", lv.dtype) for j, lv in enumerate(loop_vars)]
            lmap = dict(zip(loop_vars, new_loops))
            ivs = tuple(IterVar(E.Var(f"v{d}", v.dtype), Range(0, s), IterType.SPATIAL)
                        for d, (v, s) in enumerate(zip(axes, shape)))
            vmap = {v: iv.var for v, iv in zip(axes, ivs)}
            point = tuple(Range(iv.var, E.const(1, iv.var.dtype)) for iv in ivs)
            stage_name = fresh_name(f"index_{k}", block_names)
            block_names.add(stage_name)
            stage = Block(ivs, (), (BufferRegion(buf, point),), stage_name,
                          BufferStore(buf, substitute(ex, vmap), tuple(iv.var for iv in ivs)))
            nest: Any = BlockRealize(tuple(substitute(bindings[v], lmap) for v in axes),
                                     E.IntImm("bool", 1), stage)
            for lv, nl in reversed(list(zip(loop_vars, new_loops))):
                lp = loop_of[id(lv)]
                nest = For(nl, lp.min, lp.extent, ForKind.SERIAL, nest)
            nests.append(nest)
            stages.append(stage)
            buffers.append(buf)
            loads.append((ex, E.BufferLoad(buf, tuple(axes)),
                          BufferRegion(buf, tuple(Range(v, E.const(1, v.dtype)) for v in axes))))

        def rewrite(b: Block) -> Block:
            init, body = b.init, b.body
            for ex, load, _ in loads:
                rep = _Replace(ex, load)
                init = None if init is None else rep.visit(init)
                body = rep.visit(body)
            return b.replace(init=init, body=body,
                             reads=b.reads + tuple(r for _, _, r in loads))

        scope_blk = idx.scope_block(realize)
        pos = next(i for i, c in enumerate(flatten_seq(scope_blk.body))
                   if idx.contains(c, realize))
        edits: dict = {}
        compose(edits, id(blk), rewrite)

        def insert(s: Block) -> Block:
            kids = flatten_seq(s.body)
            return s.replace(body=seq(*(kids[:pos] + nests + kids[pos:])),
                             alloc_buffers=s.alloc_buffers + tuple(buffers))
        compose(edits, id(scope_blk), insert)
        return Result(rewrite_stmts(ctx.func, edits), stages)

    def python_args(self, inputs, attrs, dialect):
        thresh = self.attr(attrs, 1, 0)
        if dialect == "engine":
            return [fmt(inputs[0]), self.attr(attrs, 0), f"cse_thresh={thresh}"]
        return [f"block={fmt(inputs[0])}", f"storage_scope={self.attr(attrs, 0)}",
                f"cse_thresh={thresh}"]

"""Region inference for compute_at and reverse_compute_at (and the cache stages).

For ``compute_at(P, L)`` the moved block must compute, in one iteration of ``L``, every
element its consumers under ``L`` read in that iteration: their read regions are relaxed
over the loops between ``L`` and them (:func:`engine.arith.relax`, here
:func:`access_bounds`), giving a symbolic interval per buffer dimension in the variables of
``L`` and the loops above it. For ``reverse_compute_at(C, L)`` the interval comes from what
the producers under ``L`` write in one iteration; :func:`check_dense` and
:func:`verify_reads` check that this is a region without holes and that everything ``C``
then reads is inside it. The axes of the moved block are solved from these regions in
:mod:`.var_domain`. :func:`executes_once` tells whether a new loop nest runs each instance
of a block once.

Under GPU thread axes compute_at relaxes further, as TVM's ``LoopDomainOfSRefTreePath``
with the buffer's storage scope as ``extra_relax_scope``: a buffer the threads of a block
share (``"shared"``) is computed in each iteration of ``L`` for all of them, its region
relaxed also over the loops bound to ``threadIdx.*`` and ``vthread.*`` at or above ``L``
(:func:`shared_thread_loops`) — the moved block's loops then do not depend on them.
"""
from __future__ import annotations

from typing import Any

from engine.arith import Analyzer, relax
from engine.ir import expr as E
from engine.ir.functor import substitute, uses_var
from engine.ir.stmt import Block, BlockRealize, For, ForKind

from ..registry import Ctx


def loop_ranges(loops) -> dict:
    """Loop variable -> (first, last) value, for the loops with a constant, non-empty range."""
    out = {}
    for lp in loops:
        lo, ext = E.as_const_int(lp.min), E.as_const_int(lp.extent)
        if lo is not None and ext is not None and ext > 0:
            out[lp.loop_var] = (lo, lo + ext - 1)
    return out


def outer_analyzer(ctx: Ctx, node: Any) -> Analyzer:
    """An analyzer knowing the ranges of the loops around (and including) ``node``."""
    loops = [a for a in ctx.index.ancestors(node) if isinstance(a, For)]
    if isinstance(node, For):
        loops.append(node)
    return Analyzer(loop_ranges(loops))


def inner_loops(ctx: Ctx, loop: For, realize: BlockRealize) -> list[For]:
    """The loops around ``realize`` strictly inside ``loop``, outermost first."""
    return [lp for lp in ctx.index.loops_above(realize)
            if lp is not loop and ctx.index.contains(loop, lp)]


#: TVM's storage ranks (runtime::StorageRank) by a scope's head ("shared.dyn" is "shared"):
#: lower is shared by more threads ("warp" has none in the engine's scopes yet)
_STORAGE_RANK = {"global": 0, "shared": 1, "warp": 2, "local": 3}
#: TVM's thread ranks (runtime::ThreadScope): the grid's blocks, then the threads of a block
#: (a virtual thread at the threads' level)
_THREAD_RANK = {"blockIdx": 0, "threadIdx": 1, "vthread": 1}


def relaxes_under_thread(scope: str, tag: str) -> bool:
    """TVM's CanRelaxStorageUnderThread, with its rule that a global buffer relaxes nothing
    beyond the path (LoopDomainOfSRefTreePath): is a buffer of ``scope`` shared by the
    iterations of a loop bound to ``tag``? "shared" (also "shared.dyn"): by threadIdx.* and
    vthread.*; "warp": by threadIdx.x only; "global" and "local": nothing extra (a global
    buffer's elements are computed by the thread that uses them, a local one is the
    thread's own)."""
    storage = _STORAGE_RANK.get(scope.partition(".")[0])
    thread = _THREAD_RANK.get(tag.partition(".")[0])
    if storage is None or thread is None or storage == 0:
        return False
    if storage == 2:
        return tag == "threadIdx.x"
    return storage <= thread


def shared_thread_loops(ctx: Ctx, loop: For, buffer) -> list[For]:
    """The thread-bound loops at or above ``loop`` (``loop`` itself included, up to the
    function's root, as TVM looks) whose threads share ``buffer`` by its storage scope
    (:func:`relaxes_under_thread`), outermost first; ``[]`` for a program without thread
    axes."""
    return thread_loops_sharing(ctx, loop, buffer.scope)


def thread_loops_sharing(ctx: Ctx, loop: For, scope: str) -> list[For]:
    """:func:`shared_thread_loops` for a buffer of storage scope ``scope``."""
    chain = [loop] + [a for a in ctx.index.ancestors(loop) if isinstance(a, For)]
    return [lp for lp in reversed(chain) if lp.kind is ForKind.THREAD_BINDING
            and relaxes_under_thread(scope, lp.thread_tag)]


def access_bounds(ctx: Ctx, blk: Block, region, relax_loops: list[For]):
    """Symbolic [lo, hi] per dimension of one access region of ``blk`` over all iterations
    of ``relax_loops``. None for a dimension that cannot be bounded; None (for all) when
    one of the loops has no constant range."""
    r = ctx.index.realize[id(blk)]
    vmap = {iv.var: v for iv, v in zip(blk.iter_vars, r.iter_values)}
    rr = {}
    for lp in relax_loops:
        lo, ext = E.as_const_int(lp.min), E.as_const_int(lp.extent)
        if lo is None or ext is None:
            return None
        rr[lp.loop_var] = (lo, lo + ext - 1)
    out = []
    for rg in region.region:
        lo_e = substitute(rg.min, vmap)
        hi_e = substitute(E.binary(E.Sub, E.binary(E.Add, rg.min, rg.extent), 1), vmap)
        a, b = relax(lo_e, rr), relax(hi_e, rr)
        if a is None or b is None:
            out.append(None)
        else:
            out.append((a[0], b[1]))
    return out


def _nest_loops(nest) -> tuple[list[For], BlockRealize]:
    """The loops of a new nest, outermost first, and the BlockRealize inside them."""
    loops = []
    cur = nest
    while isinstance(cur, For):
        loops.append(cur)
        cur = cur.body
    return loops, cur


def executes_once(ctx: Ctx, loop: For, nest, blk: Block) -> bool:
    """True when, over all iterations of ``loop`` and the loops around it, the new nest
    runs every instance of ``blk`` exactly once (the loop-to-axis map is a bijection)."""
    loops = [a for a in ctx.index.ancestors(loop) if isinstance(a, For)]
    new_loops, realize = _nest_loops(nest)
    loops = list(reversed(loops)) + [loop] + new_loops
    if not (isinstance(realize.predicate, E.IntImm) and realize.predicate.value == 1):
        return False
    extents = {}
    for lp in loops:
        e = E.as_const_int(lp.extent)
        if e is None or not E.is_const_int(lp.min, 0):
            return False
        extents[id(lp.loop_var)] = e
    used: set = set()
    for iv, val in zip(blk.iter_vars, realize.iter_values):
        terms, const = Analyzer().linear(val)
        radix = []
        for atom, coef in terms.values():
            if not isinstance(atom, E.Var) or id(atom) not in extents or id(atom) in used:
                return False
            used.add(id(atom))
            if extents[id(atom)] > 1:
                radix.append((coef, extents[id(atom)]))
        radix.sort()
        stride = 1
        for coef, ext in radix:
            if coef != stride:
                return False
            stride *= ext
        if not (E.is_const_int(iv.dom.min, const) and E.is_const_int(iv.dom.extent, stride)):
            return False
    return all(id(lp.loop_var) in used or extents[id(lp.loop_var)] == 1 for lp in loops)


def check_dense(ctx: Ctx, x: Block, w, inner: list, blk: Block, loop: For, hl: list):
    """The producer's write region per iteration must be exact (no holes), so the
    consumer never reads an element of it that is not written yet."""
    xr = ctx.index.realize[id(x)]
    vmap = {iv.var: v for iv, v in zip(x.iter_vars, xr.iter_values)}
    inner_vars = {id(lp.loop_var): lp for lp in inner}
    seen: set = set()
    for rg in w.region:
        if not E.is_const_int(rg.extent, 1):
            continue
        idx_e = substitute(rg.min, vmap)
        terms, _ = Analyzer().linear(idx_e)
        radix = []
        for atom, coef in terms.values():
            if isinstance(atom, E.Var) and id(atom) in inner_vars:
                if id(atom) in seen:
                    break
                seen.add(id(atom))
                ext = E.as_const_int(inner_vars[id(atom)].extent)
                radix.append((abs(coef), ext))
            elif any(uses_var(atom, lp.loop_var) for lp in inner):
                radix = None
                break
        else:
            radix.sort()
            stride = 1
            ok = True
            for coef, ext in radix:
                if ext is None or coef != stride:
                    ok = False
                    break
                stride *= ext
            if ok:
                continue
        raise ctx.error(f"block {blk.name_hint}", f"cannot prove that block {x.name_hint} "
                        f"writes a contiguous region of {w.buffer.name} in each iteration "
                        f"of loop {loop.loop_var.name}", "choose an outer loop, or move the "
                        "block before fusing/reordering the producer's loops",
                        highlight=hl + [x.name_hint])


def verify_reads(ctx: Ctx, blk: Block, nest, regions: dict, loop: For, an: Analyzer,
                  hl: list):
    """Everything the moved consumer reads from the producers' buffers in one iteration
    must lie inside what they wrote in that iteration."""
    loops, realize = _nest_loops(nest)
    rr = {lp.loop_var: (0, E.as_const_int(lp.extent) - 1) for lp in loops
          if E.as_const_int(lp.extent) is not None}
    vmap = {iv.var: v for iv, v in zip(blk.iter_vars, realize.iter_values)}
    for r in blk.reads:
        reg = regions.get(id(r.buffer))
        if reg is None:
            continue
        for d, rg in enumerate(r.region):
            lo_e = substitute(rg.min, vmap)
            hi_e = substitute(E.binary(E.Sub, E.binary(E.Add, rg.min, rg.extent), 1), vmap)
            a, b = relax(lo_e, rr), relax(hi_e, rr)
            ok = a is not None and b is not None and reg[d] is not None
            if ok:
                w_lo, w_hi = reg[d]
                d1 = an.bound(an.simplify(a[0] - w_lo))
                d2 = an.bound(an.simplify(w_hi - b[1]))
                ok = d1 is not None and d1[0] is not None and d1[0] >= 0 and \
                    d2 is not None and d2[0] is not None and d2[0] >= 0
            if not ok:
                raise ctx.error(f"block {blk.name_hint}", f"block {blk.name_hint} would read "
                                f"elements of {r.buffer.name} that are not computed yet in "
                                f"this iteration of loop {loop.loop_var.name}",
                                "choose an outer loop", highlight=hl)

"""compute_inline and reverse_compute_inline."""
from __future__ import annotations

import math

from engine.arith import simplify
from engine.ir import expr as E
from engine.ir.buffer import BufferRegion, Range
from engine.ir.functor import Mutator, collect, substitute
from engine.ir.stmt import Block, BufferStore, IterType

from ..registry import Ctx, Primitive, Result, register
from ..tree import replace_stmts
from ._common import conj, expect_block, is_true, true_const


def _reduces(blk: Block) -> bool:
    """True for a reduction block (a reduction axis or an init)."""
    return any(iv.iter_type is IterType.REDUCE for iv in blk.iter_vars) or blk.init is not None


def _inlined_block(ctx: Ctx, inputs) -> tuple[Block, BufferStore]:
    """The block to inline and its single store (the common checks of both primitives)."""
    blk = expect_block(ctx, inputs[0])
    return blk, _single_store(ctx, blk)


def _single_store(ctx: Ctx, blk: Block) -> BufferStore:
    hl = [blk.name_hint]
    if _reduces(blk):
        raise ctx.error(f"block {blk.name_hint}", f"block {blk.name_hint} is a reduction "
                        "block; only blocks whose axes are all spatial can be inlined",
                        "inline element-wise blocks (padding, ReLU, ...)", highlight=hl)
    if not isinstance(blk.body, BufferStore) or blk.alloc_buffers:
        raise ctx.error(f"block {blk.name_hint}", f"the body of block {blk.name_hint} is not "
                        "a single buffer store", "", highlight=hl)
    if len(blk.writes) != 1:
        raise ctx.error(f"block {blk.name_hint}", "the block must write exactly one buffer",
                        "", highlight=hl)
    return blk.body


def _writers(ctx: Ctx, buf) -> list[Block]:
    return [b for b in ctx.index.all_blocks() if any(w.buffer is buf for w in b.writes)]


def _readers(ctx: Ctx, buf) -> list[Block]:
    return [b for b in ctx.index.all_blocks() if any(r.buffer is buf for r in b.reads)]


def _at_own_axes(indices, blk: Block, skip: set = frozenset()) -> bool:
    """True when ``indices`` are exactly the block's axes (but those in ``skip``: ids of
    unit axes standing for their minimum), one index per axis (each once)."""
    ivars = {id(iv.var) for iv in blk.iter_vars} - set(skip)
    return len(indices) == len(ivars) and \
        all(isinstance(i, E.Var) for i in indices) and {id(i) for i in indices} == ivars


def _substituted(region: BufferRegion, vmap: dict, raw: bool = False) -> BufferRegion:
    """``region`` with ``vmap`` substituted into (and, unless ``raw``, simplified in) each
    range's start."""
    return BufferRegion(region.buffer, tuple(
        Range(substitute(rg.min, vmap) if raw else simplify(substitute(rg.min, vmap)),
              rg.extent) for rg in region.region))


def _drop_alloc(ctx: Ctx, func, buf):
    """Remove ``buf`` from the alloc_buffers of the block that allocates it."""
    from ..tree import FuncIndex
    idx = FuncIndex(func)
    for bs in idx.blocks.values():
        for b in bs:
            if any(a is buf for a in b.alloc_buffers):
                nb = b.replace(alloc_buffers=tuple(a for a in b.alloc_buffers if a is not buf))
                return replace_stmts(func, {b: nb})
    return func


def _remove_inlined(ctx: Ctx, blk: Block, buf, mapping: dict) -> Result:
    """Apply ``mapping`` (the rewritten consumers or producer), remove ``blk`` with the loops
    only it uses, and the allocation of ``buf``, which nothing uses any more."""
    mapping[ctx.index.removal_root(ctx.index.realize[id(blk)])] = None
    func = replace_stmts(ctx.func, mapping)
    return Result(_drop_alloc(ctx, func, buf), [])


def _dedup(regions) -> tuple:
    from engine.ir import structural_equal
    out = []
    for r in regions:
        if not any(o.buffer is r.buffer and structural_equal(o.region, r.region) for o in out):
            out.append(r)
    return tuple(out)


@register
class ComputeInline(Primitive):
    kind = "ComputeInline"
    attr_kinds = ()
    method = "compute_inline"

    def call(self, sch, block):
        """Inline a block into its consumers: every read of its output is replaced by
        the expression it computes, and the block (and its buffer) disappear.

        It requires: 1) the block's axes are all spatial (no reduction, no init);
        2) its body is a single store ``B[v0, v1, ...] = expr`` whose indices are its
        axes, each used once; 3) it is the only block writing ``B``, and ``B`` is not a
        function parameter (the block is not an output block); 4) no buffer it reads is
        written after it runs and before its consumers read ``B`` (by a block in between
        or by a consumer), since the inlined reads happen there.

        Before::

            for i, j in T.grid(128, 128):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)
            for i, j in T.grid(128, 128):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = B[vi, vj] + T.float32(1)

        Call::

            sch.compute_inline(sch.get_block("B"))

        After::

            for i, j in T.grid(128, 128):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)
        """
        sch._run(self, [block], [])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk, store = _inlined_block(ctx, inputs)
        bname = blk.name_hint
        buf = store.buffer
        if not _at_own_axes(store.indices, blk):
            raise ctx.error(f"block {bname}", f"block {bname} must store to {buf.name} at "
                            "exactly its own axes (one index per axis)", "",
                            highlight=[bname])
        if any(p is buf for p in ctx.func.params):
            raise ctx.error(f"block {bname}", f"block {bname} writes the function's output "
                            f"{buf.name}, which must stay", "inline intermediate stages "
                            "only; use reverse_compute_inline on the last stage",
                            highlight=[bname])
        writers = _writers(ctx, buf)
        if writers != [blk]:
            others = [w.name_hint for w in writers if w is not blk]
            raise ctx.error(f"block {bname}", f"{buf.name} is also written by block "
                            f"{', '.join(others)}", "", highlight=[bname, *others])
        if any(isinstance(x, E.BufferLoad) and x.buffer is buf
               for x in collect(store.value, E.BufferLoad)):
            raise ctx.error(f"block {bname}", f"block {bname} reads its own output",
                            "", highlight=[bname])
        consumers = _readers(ctx, buf)
        guarded = [b for b in ctx.index.all_blocks() if b is not blk and
                   _loads(ctx.index.realize[id(b)].predicate, buf)]
        consumers += [b for b in guarded if b not in consumers]

        class Inline(Mutator):
            def visit_BufferLoad(self, e):
                idxs = tuple(self.visit(i) for i in e.indices)
                if e.buffer is buf:
                    return substitute(store.value, dict(zip(store.indices, idxs)))
                return e if all(a is b for a, b in zip(idxs, e.indices)) else \
                    E.BufferLoad(e.buffer, idxs)

        _check_inputs_kept(ctx, blk, consumers)
        mapping = {}
        for c in consumers:
            realize = ctx.index.realize[id(c)]
            body = Inline().visit(c.body)
            init = Inline().visit(c.init) if c.init is not None else None
            reads = []
            for r in c.reads:
                if r.buffer is not buf:
                    reads.append(r)
                    continue
                reads += [_read_through(pr, store.indices, r) for pr in blk.reads]
            # a consumer's T.where may read the buffer too (the producer's expression then
            # stands in the predicate, at the loop variables it reads)
            new_block = c.replace(body=body, init=init, reads=_dedup(reads))
            mapping[realize] = realize.replace(block=new_block,
                                               predicate=Inline().visit(realize.predicate))
        return _no_access_left(ctx, blk, buf, _remove_inlined(ctx, blk, buf, mapping),
                               "its expression cannot be put in its place")


def _no_access_left(ctx: Ctx, blk: Block, buf, result: Result, why: str) -> Result:
    """``result``, unless a block still accesses the removed buffer ``buf`` (opaquely, in a
    view or without declaring it)."""
    found = _accessing(result.func, buf)
    ids = {id(f) for f in found}
    # named: the innermost (a block around one that is found, the root, is left out)
    left = [n.name_hint for n in found
            if not any(id(b) in ids for b in collect(n.body, Block))]
    if left:
        raise ctx.error(f"block {blk.name_hint}", f"block{'s' * (len(left) > 1)} "
                        f"{', '.join(left)} access{'es' * (len(left) == 1)} {buf.name} "
                        "opaquely (its address, a T.match_buffer view of it, or a read not "
                        f"declared), so {why}", "", highlight=[blk.name_hint, *left])
    return result


def _read_through(produced, store_indices, consumed) -> BufferRegion:
    """The region of ``produced`` (a region the inlined block reads, in its store's index
    variables) read for the elements of ``consumed`` (a region of the inlined buffer a
    consumer reads): each store index ranges over the consumed region, each dimension's
    start is bounded over that (``A[vi, vj:vj + 3]`` for a consumer reading
    ``B[vi, vj:vj + 3]`` of ``B[vi, vj] = A[vi, vj] * 2``); the whole dimension where the
    start cannot be bounded."""
    from engine.arith import relax
    ranges = {}
    for var, rg in zip(store_indices, consumed.region):
        hi = simplify(rg.min + rg.extent - E.const(1, rg.extent.dtype))
        ranges[var] = (rg.min, hi)
    dims = []
    for rg, size in zip(produced.region, produced.buffer.shape):
        bound = relax(rg.min, ranges)
        if bound is None:
            dims.append(Range(E.const(0, size.dtype) if isinstance(size, E.PrimExpr)
                              else 0, size))
            continue
        lo, hi = bound
        dims.append(Range(lo, simplify(hi - lo + rg.extent)))
    return BufferRegion(produced.buffer, tuple(dims))


def _loads(e, buf) -> bool:
    """True when expression ``e`` loads from ``buf``."""
    return any(x.buffer is buf for x in collect(e, E.BufferLoad))


def _accessing(func, buf) -> list[Block]:
    """The blocks of ``func`` whose body, init or predicate still loads or stores ``buf``,
    takes its address (``B.data``, ``B.access_ptr(..)``: an opaque access) or views a
    region of it (``T.match_buffer(B[..], ..)`` in the block)."""
    from engine.ir.stmt import BlockRealize
    out = []
    kinds = (E.BufferLoad, BufferStore, E.BufferField)
    for r in collect(func.body, BlockRealize):
        b = r.block
        parts = [b.body, b.init, r.predicate, *r.iter_values]
        own = [x for p in parts if p is not None
               for x in collect(p, kinds, into_expressions=True) if x.buffer is buf]
        own += [m for m in getattr(b, "match_buffers", ()) if m.source.buffer is buf]
        if own:
            out.append(b)
    return out


def _spans(region) -> bool:
    """True when a read region is wider than one element in some dimension."""
    return any(not E.is_const_int(rg.extent, 1) for rg in region.region)


@register
class ReverseComputeInline(Primitive):
    kind = "ReverseComputeInline"
    attr_kinds = ()
    method = "reverse_compute_inline"

    def call(self, sch, block):
        """Inline a block into its producer: the producer stores the block's result
        directly, and the block (and the intermediate buffer) disappear.

        It requires: 1) the block's axes are all spatial and its body is a single store;
        2) it reads exactly one intermediate buffer ``B`` produced by one block, at its own
        axes ``B[v0, v1, ...]`` or through a one-to-one affine map of them
        (``B[v // 16, v % 16]``; the producer's extra instances are then guarded away);
        3) that producer stores ``B`` with a single store, and the block is the only
        reader of ``B``; 4) the producer is not a reduction block, or the block copies
        its result unchanged (``C[vj, vi] = B[vi, vj]``: the reduction's init and steps
        then store ``C``); 5) moving the store to where the producer runs changes nothing
        else: the producer does not read ``C``, the block reads ``C`` only at the element
        it stores, and no block in between reads or writes ``C`` or writes what the block
        reads. Axes rebuilt through a map are written as TVM writes them
        (``C[vm + vi * 16]``, unsimplified).

        Before::

            for i, j in T.grid(128, 128):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)
            for i, j in T.grid(128, 128):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = B[vi, vj] + T.float32(1)

        Call::

            sch.reverse_compute_inline(sch.get_block("C"))

        After::

            for i, j in T.grid(128, 128):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)
        """
        sch._run(self, [block], [])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk, store = _inlined_block(ctx, inputs)
        bname = blk.name_hint
        params = {id(p) for p in ctx.func.params}
        cands = [r.buffer for r in blk.reads if id(r.buffer) not in params]
        cands = list({id(b): b for b in cands}.values())
        if len(cands) != 1:
            raise ctx.error(f"block {bname}", f"block {bname} must read exactly one "
                            f"intermediate buffer, it reads {len(cands)}",
                            "reverse-inline blocks that consume one stage",
                            highlight=[bname])
        buf = cands[0]
        writers = _writers(ctx, buf)
        if len(writers) != 1:
            raise ctx.error(f"block {bname}", f"{buf.name} is written by "
                            f"{len(writers)} blocks", "", highlight=[bname])
        prod = writers[0]
        # (a reduction reading the element it updates is checked below)
        readers = [r for r in _readers(ctx, buf) if not (r is prod and _reduces(prod))]
        if readers != [blk]:
            others = [r.name_hint for r in readers if r is not blk]
            raise ctx.error(f"block {bname}", f"{buf.name} is also read by block "
                            f"{', '.join(others)}", "", highlight=[bname, *others])
        if not isinstance(prod.body, BufferStore) or prod.body.buffer is not buf:
            raise ctx.error(f"block {bname}", f"producer {prod.name_hint} is not a single "
                            "store", "", highlight=[bname, prod.name_hint])
        reduction = _reduces(prod)
        if reduction:
            _check_copy_of_reduction(ctx, blk, store, prod, buf)
        loads = [x for x in collect(store.value, E.BufferLoad) if x.buffer is buf] + \
            [x for i in store.indices for x in collect(i, E.BufferLoad) if x.buffer is buf]
        first = loads[0].indices if loads else ()
        from engine.ir import structural_equal
        if not loads or not all(structural_equal(ld.indices, first) for ld in loads):
            raise ctx.error(f"block {bname}", f"block {bname} must read {buf.name} at one "
                            "place only (every read at the same indices)", "",
                            highlight=[bname])
        pstore = prod.body
        realize = ctx.index.realize[id(blk)]
        if not is_true(realize.predicate):
            raise ctx.error(f"block {bname}", f"block {bname} has a predicate (T.where); "
                            "inlined into its producer it would no longer guard the store",
                            "", highlight=[bname])
        prod_realize = ctx.index.realize[id(prod)]
        units = {iv.var: iv.dom.min for iv in blk.iter_vars
                 if E.is_const_int(iv.dom.extent, 1) and not any(
                     x is iv.var for i in first for x in collect(i, E.Var))}
        raw = False          # substitute without simplifying (TVM's inverse's form)
        if _at_own_axes(first, blk, set(map(id, units))):
            vmap = dict(zip(first, pstore.indices))
            guard = _in_consumer_domain(ctx, blk, prod, prod_realize, vmap, buf)
            vmap.update(units)
        else:
            vmap, guard, raw = _inverse_of_load(ctx, blk, prod, prod_realize, first, buf)

        _check_nothing_between(ctx, blk, prod, buf, store.buffer)

        class Repl(Mutator):
            def __init__(self, by):
                self.by = by

            def visit_BufferLoad(self, e):
                if e.buffer is buf:
                    return self.by
                idxs = tuple(self.visit(i) for i in e.indices)
                return e if all(a is b for a, b in zip(idxs, e.indices)) else \
                    E.BufferLoad(e.buffer, idxs)

        new_idx = tuple(substitute(i, vmap) if raw else simplify(substitute(i, vmap))
                        for i in store.indices)
        writes = tuple(_substituted(w, vmap, raw) for w in blk.writes)
        if reduction:
            # the block copies the result unchanged: the reduction's init and update
            # store (and read) the block's output element in place of the buffer's
            out = Repl(E.BufferLoad(store.buffer, new_idx))
            new_prod = prod.replace(
                body=BufferStore(store.buffer, out.visit(pstore.value), new_idx),
                init=BufferStore(store.buffer, out.visit(prod.init.value), new_idx),
                writes=writes, reads=_dedup(r for r in prod.reads if r.buffer is not buf))
        else:
            new_value = substitute(Repl(pstore.value).visit(store.value), vmap)
            reads = list(prod.reads) + [_substituted(r, vmap, raw) for r in blk.reads
                                        if r.buffer is not buf]
            new_prod = prod.replace(body=BufferStore(store.buffer, new_value, new_idx),
                                    writes=writes, reads=_dedup(reads))
        new_realize = prod_realize.replace(
            block=new_prod, predicate=simplify(conj(prod_realize.predicate, guard)))
        return _no_access_left(ctx, blk, buf,
                               _remove_inlined(ctx, blk, buf, {prod_realize: new_realize}),
                               f"it cannot be replaced by {store.buffer.name}")


def _check_copy_of_reduction(ctx: Ctx, blk: Block, store: BufferStore, prod: Block,
                             buf) -> None:
    """A reduction producer (an init, reduction axes) may take in a block that copies its
    result unchanged (``C[...] = B[...]``, the same dtype): its init and every step then
    work on the block's output element instead of ``B``'s, each element still reduced by
    the same instances in the same order. Any other block would be applied to the init and
    to every partial result. The init must be one store of ``B``, and the reduction must
    read ``B`` only at the element it stores."""
    from engine.ir import structural_equal
    bname, pname = blk.name_hint, prod.name_hint
    if not (isinstance(store.value, E.BufferLoad) and store.value.buffer is buf
            and store.buffer.dtype == buf.dtype):
        raise ctx.error(f"block {bname}", f"its producer {pname} is a reduction block, and "
                        f"inlining would apply block {bname} to the init and to every "
                        f"partial result (only a block copying {buf.name} unchanged may be "
                        "inlined into a reduction)", "decompose the reduction and "
                        "reverse_compute_at instead", highlight=[bname, pname])
    pstore, init = prod.body, prod.init
    at = pstore.indices
    loads = [x for p in (pstore.value, getattr(init, "value", None)) if p is not None
             for x in collect(p, E.BufferLoad) if x.buffer is buf]
    if not (isinstance(init, BufferStore) and init.buffer is buf
            and structural_equal(init.indices, at)) or \
            not all(structural_equal(x.indices, at) for x in loads):
        raise ctx.error(f"block {bname}", f"reduction {pname} must initialise {buf.name} "
                        "with one store and read it only at the element it stores, for its "
                        f"result to be reduced in place into the output of {bname}", "",
                        highlight=[bname, pname])


def _top_of(ctx: Ctx, s, below) -> object:
    """The ancestor of ``s`` (or ``s``) directly under ``below``."""
    cur = s
    while ctx.index.parent.get(id(cur)) is not below:
        cur = ctx.index.parent[id(cur)]
    return cur


def _between(ctx: Ctx, first: Block, lasts: list) -> list[Block]:
    """The blocks that may run between ``first`` and the blocks ``lasts`` (conservatively:
    every block inside the loop nest of any of them, or under a loop they all share),
    ``first``, ``lasts`` and the blocks around them left out."""
    from engine.ir.stmt import For
    if not lasts:
        return []
    idx = ctx.index
    reals = [idx.realize[id(b)] for b in [first, *lasts]]
    common = None
    for r in reals:
        ids = [id(a) for a in [r, *idx.ancestors(r)]]
        common = ids if common is None else [a for a in common if a in set(ids)]
    by_id = {id(a): a for r in reals for a in [r, *idx.ancestors(r)]}
    lca = by_id[common[0]]
    outer = None                    # the outermost loop around all, inside their scope
    for a in [lca, *idx.ancestors(lca)]:
        if isinstance(a, Block):
            break
        if isinstance(a, For):
            outer = a
    if outer is not None:
        lo, hi = idx.order[id(outer)], idx.end[id(outer)]
    else:
        tops = [_top_of(ctx, r, lca) for r in reals]
        lo, hi = idx.order[id(tops[0])], max(idx.end[id(t)] for t in tops)
    return [x for x in idx.all_blocks()
            if lo <= idx.order[id(x)] < hi and x is not first and x not in lasts and
            not any(idx.contains(x, r) for r in reals)]


def _accesses(ctx: Ctx, blk: Block) -> list[tuple]:
    """``(buffer, writes)`` for every load and store of ``blk`` (body, init, predicate,
    bindings), every address it takes (``B.data``: read and written) and every region it
    declares (an opaque access, ``B.access_ptr("w")``, is declared so)."""
    r = ctx.index.realize[id(blk)]
    parts = [p for p in (blk.body, blk.init, r.predicate, *r.iter_values) if p is not None]
    out = []
    for p in parts:
        for a in collect(p, (E.BufferLoad, BufferStore, E.BufferField),
                         into_expressions=True):
            out.append((a.buffer, not isinstance(a, E.BufferLoad)))
    out += [(x.buffer, False) for x in blk.reads] + [(x.buffer, True) for x in blk.writes]
    out += [(m.source.buffer, w) for m in getattr(blk, "match_buffers", ())
            for w in (False, True)]
    return out


def _check_nothing_between(ctx: Ctx, blk: Block, prod: Block, buf, out) -> None:
    """The block's store moves to where its producer runs: refused when that changes what
    is read or written. The producer must not read ``out`` (the block's output), nor may
    the block read it elsewhere than the element it stores; and no other block may run
    between the two while reading or writing ``out`` or writing another buffer the block
    reads (:func:`_between`)."""
    from engine.ir import structural_equal
    bname, pname = blk.name_hint, prod.name_hint
    store = blk.body
    p_reads = [x for part in (prod.body, prod.init) if part is not None
               for x in collect(part, E.BufferLoad, into_expressions=True)
               if x.buffer is out]
    if p_reads:
        raise ctx.error(f"block {bname}", f"producer {pname} reads {out.name}, which it "
                        f"would also write once block {bname} is inlined into it", "",
                        highlight=[bname, pname])
    if any(x.buffer is out and not structural_equal(x.indices, store.indices)
           for x in collect(store, E.BufferLoad, into_expressions=True)):
        raise ctx.error(f"block {bname}", f"block {bname} reads {out.name} elsewhere than "
                        "the element it stores; run where its producer runs, it would read "
                        "other elements' new values", "", highlight=[bname])
    others = {id(r.buffer) for r in blk.reads if r.buffer is not buf}
    for r in collect(store, E.BufferLoad, into_expressions=True):
        if r.buffer is not buf and r.buffer is not out:
            others.add(id(r.buffer))
    for x in _between(ctx, prod, [blk]):
        bad = [b for b, w in _accesses(ctx, x) if b is out or (w and id(b) in others)]
        if bad:
            what = f"accesses {out.name}, which inlining would write before it" \
                if bad[0] is out else f"writes {bad[0].name}, which block " \
                f"{bname} reads: inlined, that read would come before this write"
            raise ctx.error(f"block {bname}", f"block {x.name_hint} runs between producer "
                            f"{pname} and block {bname} and {what}",
                            f"move block {x.name_hint} out of the way first",
                            highlight=[bname, pname, x.name_hint])


def _check_inputs_kept(ctx: Ctx, blk: Block, consumers: list) -> None:
    """compute_inline moves the block's reads to where its consumers run: refused when a
    buffer it reads is written from the block's run to the consumers' (by a block in
    between, :func:`_between`, or by a consumer itself), since the moved reads would see
    the new values."""
    bname = blk.name_hint
    read = {id(b) for b, w in _accesses(ctx, blk) if not w}
    for x in [*consumers, *_between(ctx, blk, consumers)]:
        bad = [b for b, w in _accesses(ctx, x) if w and id(b) in read]
        if bad:
            where = "reads its result and" if x in consumers else \
                "runs between it and its consumers and"
            raise ctx.error(f"block {bname}", f"block {x.name_hint} {where} writes "
                            f"{bad[0].name}, which block {bname} reads: inlined, "
                            "that read would come after this write", "",
                            highlight=[bname, x.name_hint])


def _inverse_of_load(ctx: Ctx, blk: Block, prod: Block, prod_realize, indices, buf
                     ) -> tuple[dict, E.PrimExpr, bool]:
    """For a consumer reading ``buf`` at a bijective affine map of its axes (split with
    ``//`` ``%``, fused, permuted: ``B[i // 16, j // 16, i % 16, j % 16]``): each consumer
    axis as an expression of the producer's axes (the map inverted), and the guard keeping
    the producer's instances to those that stand for one of the consumer's.

    The producer must store at its own axes over the whole of ``buf``; the consumer's
    axes may be padded up to the map's natural extents (a 127-wide axis read as
    ``i // 16, i % 16`` ranges over 128 values, the last one guarded away).

    The third value is True when the axes are written in TVM's form
    (:mod:`inline_inverse`), which TVM substitutes into the block without simplifying."""
    from engine.ir.functor import collect_vars, uses_var

    from .index_map_inverse import NotBijective, invert
    from .inline_inverse import tvm_inverse

    bname, pname = blk.name_hint, prod.name_hint
    refuse = ctx.error(f"block {bname}", f"block {bname} reads {buf.name} at indices that "
                       f"are not a one-to-one affine map of its axes onto what {pname} "
                       "computes", "", highlight=[bname, pname])
    shape = [E.as_const_int(s) for s in buf.shape]
    pstore = prod.body
    pvars = {id(iv.var): iv for iv in prod.iter_vars}
    # the producer's store: an axis of its own over each dimension (each once), or the
    # constant 0 on a dimension of extent 1 (``B[v0, T.int64(0), v1]``)
    unit = [n == 1 and E.is_const_int(s, 0) for s, n in zip(pstore.indices, shape)]
    own = [pvars.get(id(s)) if isinstance(s, E.Var) else None
           for s, u in zip(pstore.indices, unit) if not u]
    if None in shape or any(iv is None or not E.is_const_int(iv.dom.min, 0) or
                            E.as_const_int(iv.dom.extent) != n
                            for iv, n in zip(own, [n for n, u in zip(shape, unit) if not u])) \
            or len({id(iv) for iv in own}) != len(own):
        raise refuse
    uvars = [iv.var for iv in blk.iter_vars]
    exts = [E.as_const_int(iv.dom.extent) for iv in blk.iter_vars]
    if None in exts or not all(E.is_const_int(iv.dom.min, 0) for iv in blk.iter_vars):
        raise refuse
    padded = list(exts)
    for k, u in enumerate(uvars):
        dims = [d for d, e in enumerate(indices) if uses_var(e, u)]
        if dims and all(len({id(v) for v in collect_vars(indices[d])}) == 1 for d in dims):
            padded[k] = math.prod(shape[d] for d in dims)
    for attempt in (padded, exts):
        if any(a < e for a, e in zip(attempt, exts)):
            continue
        try:
            got, build = invert(uvars, list(indices), attempt)
        except NotBijective:
            continue
        if list(got) == shape:
            break
    else:
        raise refuse
    stand_in = [E.Var("unit", s.dtype) if u else s for s, u in zip(pstore.indices, unit)]
    olds = build(stand_in)      # (a variable for each constant 0, put back after)
    zero = {v: s for v, s, u in zip(stand_in, pstore.indices, unit) if u}
    olds = [substitute(o, zero) for o in olds]
    vmap = dict(zip(uvars, olds))
    shaped = tvm_inverse(uvars, attempt, list(indices), list(pstore.indices))
    if shaped is not None:       # the same values, written as TVM writes them
        vmap.update(shaped)
    bindings = {iv.var: v for iv, v in zip(prod.iter_vars, prod_realize.iter_values)}
    guard: E.PrimExpr = true_const()
    for old, a, e in zip(olds, attempt, exts):
        if a > e:
            at = substitute(old, bindings)
            guard = conj(guard, E.LT(at, E.const(e, at.dtype)))
    return vmap, guard, shaped is not None


def _in_consumer_domain_of_map(ctx: Ctx, blk: Block, prod: Block, prod_realize, vmap: dict,
                               buf) -> E.PrimExpr:
    """:func:`_in_consumer_domain` for a producer storing at a bijective affine map of its
    axes onto the whole of ``buf``."""
    from .index_map_inverse import NotBijective, invert
    bname, pname = blk.name_hint, prod.name_hint
    refuse = ctx.error(f"block {bname}", f"producer {pname} must store {buf.name} at its "
                       "own axes, or at a one-to-one map of them onto all of it, for its "
                       f"elements to be matched with the instances of {bname}", "",
                       highlight=[bname, pname])
    shape = [E.as_const_int(s) for s in buf.shape]
    pext = [E.as_const_int(iv.dom.extent) for iv in prod.iter_vars]
    if None in shape or None in pext or \
            not all(E.is_const_int(iv.dom.min, 0) for iv in prod.iter_vars):
        raise refuse
    try:
        got, _ = invert([iv.var for iv in prod.iter_vars], list(prod.body.indices), pext)
    except NotBijective:
        raise refuse from None
    if list(got) != shape:
        raise refuse
    bindings = {iv.var: v for iv, v in zip(prod.iter_vars, prod_realize.iter_values)}
    order = list(vmap)                       # the consumer's axes, in the load's order
    guard: E.PrimExpr = true_const()
    for iv in blk.iter_vars:
        if iv.var not in vmap:
            continue                          # a unit axis: its minimum, always
        dim = next(k for k, v in enumerate(order) if v is iv.var)
        lo, n = E.as_const_int(iv.dom.min), E.as_const_int(iv.dom.extent)
        if lo is None or n is None or lo < 0 or lo + n > shape[dim]:
            raise refuse
        at = substitute(vmap[iv.var], bindings)
        if lo > 0:
            guard = conj(guard, E.GE(at, E.const(lo, at.dtype)))
        if lo + n < shape[dim]:
            guard = conj(guard, E.LT(at, E.const(lo + n, at.dtype)))
    return guard


def _in_consumer_domain(ctx: Ctx, blk: Block, prod: Block, prod_realize, vmap: dict,
                        buf) -> E.PrimExpr:
    """The predicate (over the producer's loops) under which an instance of ``prod`` stands
    for an instance of ``blk``: each of the consumer's axes, written as the producer's store
    index, inside the consumer's domain — true when the producer computes no more than
    the consumer reads. A consumer reading elements the producer never computes is refused.

    The producer stores at its own axes (each once, in any order: the elements it computes
    are a box the consumer's domain is compared with), or at a bijective affine map of its
    axes onto the whole of ``buf`` (``C[vi // 16, vi % 16, vj]``, after an earlier
    reverse inline: then it computes every element once)."""
    bname, pname = blk.name_hint, prod.name_hint
    pvars = {id(iv.var): iv for iv in prod.iter_vars}
    axes = [iv for iv in blk.iter_vars if iv.var in vmap]   # (unit axes aside)
    stored = [vmap[iv.var] for iv in axes]
    bindings = {id(iv.var): v for iv, v in zip(prod.iter_vars, prod_realize.iter_values)}
    if not all(isinstance(s, E.Var) and id(s) in pvars for s in stored) or \
            len({id(s) for s in stored}) != len(stored):
        return _in_consumer_domain_of_map(ctx, blk, prod, prod_realize, vmap, buf)
    guard: E.PrimExpr = true_const()
    for iv, s in zip(axes, stored):
        want_lo, want_n = E.as_const_int(iv.dom.min), E.as_const_int(iv.dom.extent)
        have = pvars[id(s)].dom
        have_lo, have_n = E.as_const_int(have.min), E.as_const_int(have.extent)
        if None in (want_lo, want_n, have_lo, have_n):
            raise ctx.error(f"block {bname}", f"the domains of {bname} and {pname} are not "
                            "constant, so it cannot be checked that the producer computes "
                            f"every element of {buf.name} the block reads", "",
                            highlight=[bname, pname])
        if want_lo < have_lo or want_lo + want_n > have_lo + have_n:
            raise ctx.error(f"block {bname}", f"block {bname} reads {buf.name} where producer "
                            f"{pname} does not compute it (axis {iv.var.name} ranges over "
                            f"{want_lo}..{want_lo + want_n - 1}, the producer's "
                            f"{s.name} over {have_lo}..{have_lo + have_n - 1})", "",
                            highlight=[bname, pname])
        at = bindings[id(s)]
        if want_lo > have_lo:
            guard = conj(guard, E.GE(at, E.const(want_lo, at.dtype)))
        if want_lo + want_n < have_lo + have_n:
            guard = conj(guard, E.LT(at, E.const(want_lo + want_n, at.dtype)))
    return guard



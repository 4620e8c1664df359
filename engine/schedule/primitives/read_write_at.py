"""read_at and write_at (TVM's ReadAt / WriteAt): a copy of a buffer made in every iteration
of one loop, and the accesses under that loop moved to the copy.

``read_at(loop, block, i, scope)`` takes the ``i``-th buffer ``block`` reads (``src``), adds a
buffer ``<src>_<scope>`` (``dst``) of the same shape in the scope block, and inserts, in the
loop's body, a block ``<src>_<scope>`` copying the region of ``src`` the loop's body reads
in one iteration into ``dst``, right before the first statement of the body that reads
``src``; that statement and every later one read ``dst`` instead. ``write_at`` is the
reverse: the statements up to the last one that writes ``src`` write (and read) ``dst``,
and a block after it copies the region they wrote back to ``src``. The copy block is
marked ``T.block_attr({"auto_copy": True})`` and its axes are the loops outside ``loop``
the region moves with (TVM's form).

The loop's body is seen, as TVM sees it, as a list of statements (subtrees); which of them
read or write ``src`` is decided by the blocks in them (their declared regions and what
their bodies load and store). The region is the union of the declared regions of the
blocks that read (write) ``src``, their bindings substituted, relaxed over the loops between
each block and ``loop`` (:func:`.cache_regions.relaxed_box`).

TVM checks only the order of the statements. The engine also keeps the program's meaning,
and refuses (each with a sentence naming the block or buffer):

* a region whose extent is not a constant, or that may lie outside the buffer (a guarded
  split's tail: the copy would read or write past its end);
* an access to ``src`` under the loop the analysis does not follow (``B.data``,
  ``T.tvm_access_ptr``, a ``T.match_buffer`` view, a store outside a block), or a load
  (read_at) or store (write_at) outside the copied region;
* ``loop`` (or a loop around it) parallel or vectorized: the iterations would copy into
  the one ``dst`` at once;
* ``src`` allocated under the loop (the copy would be outside its scope);
* for write_at: a region some element of which the blocks may not write in the
  iteration (the copy back would store ``dst``'s stale contents into ``src``), and a load
  of ``src`` in the redirected statements of an element not written into ``dst`` first —
  accepted are a reduction reading its own element whose ``T.init`` runs in the same
  execution of the loop (its reduction loops inside ``loop``, ``loop`` included, starting
  at the reduction's minimum), an element an earlier statement of the same block stores
  every element of, and an element an earlier statement of the loop's body stores in the
  same iteration. A reduction without its init under the loop (``decompose_reduction``
  outside it) would read ``dst`` before anything was written there.
"""
from __future__ import annotations

from typing import Any

from engine.ir import expr as E
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.functor import collect, collect_vars, post_order_visit, substitute
from engine.ir.stmt import (Block, BlockRealize, BufferStore, For, ForKind, IterType, IterVar,
                            MatchBufferRegion, seq)

from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import flatten_seq, stmt_children
from ._common import (affine_bindings, conjuncts, expect_block, expect_loop, fresh_name,
                      is_true)
from .buffers import (BufferSwap, alloc_site, buffer_index_of, buffer_names, check_scope,
                      compose, need_attrs, nth_buffer, rewrite_stmts)
from .cache_regions import Opaque, access_sites, box_within, dense_box, relaxed_box, union_box
from .cache_stage import _index_dtype, location_analyzer, loops_between
from .region_inference import thread_loops_sharing


class _Outer:
    """A block of the loop's body not nested in another block under the loop: its
    subtree's position, its loads and stores of ``src`` (:func:`.cache_regions.access_sites`,
    in the variables around it) and the loops between it and the loop."""

    def __init__(self, ctx: Ctx, blk: Block, pos: int, src: Buffer, loop: For):
        self.blk, self.pos = blk, pos
        r = ctx.index.realize[id(blk)]
        self.realize = r
        vmap = {iv.var: v for iv, v in zip(blk.iter_vars, r.iter_values)}
        conds = [c for c in conjuncts(r.predicate) if not is_true(c)]
        try:
            self.loads, self.stores = access_sites(blk, src, vmap, conds)
        except Opaque as e:
            raise ctx.error(f"block {blk.name_hint}", f"cannot follow the accesses of block "
                            f"{blk.name_hint} to {src.name} (it holds {e})",
                            "copy a buffer accessed by loops, blocks and stores",
                            highlight=[blk.name_hint]) from None
        self.reads = bool(self.loads) or any(x.buffer is src for x in blk.reads)
        self.writes = bool(self.stores) or any(x.buffer is src for x in blk.writes)
        self.loops = loops_between(ctx, blk, loop)


def _outer_realizes(stmt: Any) -> list:
    """The BlockRealizes of ``stmt`` not nested in another block (TVM's pre-order visit
    that stops at a block)."""
    out, stack = [], [stmt]
    while stack:
        s = stack.pop()
        if isinstance(s, BlockRealize):
            out.append(s)
            continue
        stack.extend(reversed(stmt_children(s)))
    return out


def _accesses(node: Any, src: Buffer) -> int:
    """How many loads and stores of ``src`` ``node`` holds."""
    n = [0]

    def fn(x):
        if isinstance(x, (E.BufferLoad, BufferStore)) and x.buffer is src:
            n[0] += 1
    post_order_visit(node, fn)
    return n[0]


def _check_loop(ctx: Ctx, loop: For, src: Buffer, scope_blk: Block) -> None:
    """What the copy needs of the loop: run one iteration after the other (no parallel or
    vectorized loop at or around it), ``src`` allocated outside it, and every access to
    ``src`` under it one the analysis follows."""
    lname = loop.loop_var.name
    for a in [loop] + ctx.index.ancestors(loop):
        if a is scope_blk:
            break
        if isinstance(a, For) and a.kind in (ForKind.PARALLEL, ForKind.VECTORIZED):
            name = a.loop_var.name
            raise ctx.error(f"loop {lname}", f"loop {name} is {a.kind.value}: its iterations "
                            f"would copy {src.name} into one buffer at the same time",
                            f"copy at loop {lname} before making loop {name} {a.kind.value}",
                            highlight=[lname, name])
    site = alloc_site(ctx.func, ctx.index, src)
    if site is not None and ctx.index.contains(loop, site):
        raise ctx.error(f"loop {lname}", f"buffer {src.name} is allocated by block "
                        f"{site.name_hint} under loop {lname}, so a copy in the loop's body "
                        "would be outside its scope", "copy at a loop inside that block",
                        highlight=[lname, site.name_hint])
    fields = [f for f in collect(loop, E.BufferField) if f.buffer is src]
    views = [m for m in collect(loop, MatchBufferRegion, into_expressions=False)
             if m.source.buffer is src]
    if fields or views:
        how = (f"{src.name}.{fields[0].field}" if fields else
               f"a T.match_buffer view ({views[0].buffer.name})")
        raise ctx.error(f"loop {lname}", f"buffer {src.name} is accessed opaquely under loop "
                        f"{lname} ({how}): which elements that code touches is not known, so "
                        "it cannot be moved to the copy", "copy a buffer only loads and "
                        "stores reach", highlight=[lname])


def _subtrees(ctx: Ctx, loop: For, src: Buffer) -> tuple[list, list]:
    """The statements of the loop's body and, per statement, its outer blocks
    (:class:`_Outer`); an access to ``src`` outside every block is refused."""
    subtrees = flatten_seq(loop.body)
    per: list = []
    for pos, s in enumerate(subtrees):
        realizes = _outer_realizes(s)
        if _accesses(s, src) != sum(_accesses(r, src) for r in realizes):
            lname = loop.loop_var.name
            raise ctx.error(f"loop {lname}", f"statement {pos} of loop {lname}'s body "
                            f"accesses {src.name} outside a block", "copy at a loop whose "
                            "body accesses the buffer in blocks", highlight=[lname])
        per.append([_Outer(ctx, r.block, pos, src, loop) for r in realizes])
    return subtrees, per


# ---------------------------------------------------------------------------
# the region
# ---------------------------------------------------------------------------
def _region(ctx: Ctx, loop: For, src: Buffer, blocks: list, is_read: bool, an,
            threads: list = ()) -> list:
    """TVM's region: the union of the declared regions of ``src`` of ``blocks`` (their
    reads for read_at, writes for write_at; a block that declares none: what it loads or
    stores) relaxed over the loops between each and ``loop`` — and over ``threads``, the
    thread loops at and above ``loop`` whose threads share the copy (read_at into
    "shared": the tile the whole thread block reads, as TVM's LoopDomainOfSRefTreePath with
    the storage scope) —, per dimension ``(min, extent)``; refused when an extent is not a
    constant or the region may leave the buffer."""
    lname = loop.loop_var.name
    threads = list(threads)
    boxes = []
    for o in blocks:
        regions = [x for x in (o.blk.reads if is_read else o.blk.writes) if x.buffer is src]
        if regions:
            vmap = {iv.var: v for iv, v in zip(o.blk.iter_vars, o.realize.iter_values)}
            for reg in regions:
                ranges = [(substitute(rg.min, vmap),
                           substitute(E.binary(E.Sub, E.binary(E.Add, rg.min, rg.extent), 1),
                                      vmap)) for rg in reg.region]
                boxes.append(relaxed_box(ranges, [], o.loops + threads, an))
        else:
            for s in (o.loads if is_read else o.stores):
                boxes.append(relaxed_box(s.ranges(), s.conds, o.loops + s.loops + threads,
                                         an))
    box = boxes[0] if len(boxes) == 1 else union_box(boxes, an)
    names = ", ".join(dict.fromkeys(o.blk.name_hint for o in blocks))
    out = []
    for d, size_e in enumerate(src.shape):
        dim = None if box is None else box[d]
        if dim is None:
            raise ctx.error(f"loop {lname}", f"the region of {src.name} that block(s) {names} "
                            f"{'read' if is_read else 'write'} in one iteration of loop "
                            f"{lname} cannot be bounded in dimension {d}",
                            "copy at a loop whose inner loops have constant ranges",
                            highlight=[lname])
        lo, hi = dim
        size = E.as_const_int(size_e)
        clo, chi = E.as_const_int(lo), E.as_const_int(hi)
        if clo is not None and chi is not None and size is not None:
            # a constant region is met with the buffer (an access outside it is not the
            # program's: it does not build)
            dt = lo.dtype
            lo, hi = E.const(max(clo, 0), dt), E.const(min(chi, size - 1), dt)
        ext = an.simplify(hi - lo + 1)
        n = E.as_const_int(ext)
        if n is None or n < 1:
            raise ctx.error(f"loop {lname}", f"the region of {src.name} copied in one "
                            f"iteration of loop {lname} has extent {ext} in dimension {d}, "
                            "not a constant, so the copy has no fixed size",
                            "copy at a loop whose inner loops have constant extents",
                            highlight=[lname])
        lo = an.simplify(lo)
        last = size - 1 if size is not None else an.simplify(size_e - 1)
        lb = an.bound(lo)
        hb = an.bound(an.simplify(hi - size_e))
        if not (lb and lb[0] is not None and lb[0] >= 0 and hb and hb[1] is not None
                and hb[1] < 0):
            raise ctx.error(f"loop {lname}", f"the region of {src.name} copied in one "
                            f"iteration of loop {lname} ({lo} to {an.simplify(hi)} in "
                            f"dimension {d}) may lie outside the buffer (0 to {last}), "
                            "so the copy would access elements that do not exist",
                            "copy at a loop whose iterations stay inside the buffer (a split "
                            "that divides the extent, or a loop inside the guarded one)",
                            highlight=[lname])
        out.append((lo, ext))
    return out


def _closed(region: list) -> list:
    return [(mn, mn + ext - 1) for mn, ext in region]


def _check_inside(ctx: Ctx, loop: For, src: Buffer, blocks: list, region: list, is_read: bool,
                  an) -> None:
    """Every load (read_at) or store (write_at) of ``src`` in ``blocks`` is inside the
    copied region."""
    have = _closed(region)
    verb = "load" if is_read else "store"
    for o in blocks:
        for s in (o.loads if is_read else o.stores):
            need = relaxed_box(s.ranges(), s.conds, o.loops + s.loops, an)
            if need is not None and box_within(need, have, an):
                continue
            bname = o.blk.name_hint
            decl = "T.reads" if is_read else "T.writes"
            raise ctx.error(f"block {bname}", f"block {bname} may {verb} elements of "
                            f"{src.name} outside the region the {decl} of the blocks give, "
                            "which the copy would not hold", f"give the block's {decl} the "
                            "region it accesses", highlight=[bname])


# ---------------------------------------------------------------------------
# write_at: the copy back holds what the iteration wrote
# ---------------------------------------------------------------------------
def _check_covered(ctx: Ctx, loop: For, src: Buffer, blocks: list, region: list, an) -> None:
    """Some store of the redirected blocks writes every element of the region in each
    iteration (else the copy back would store what ``dst`` holds there)."""
    have = _closed(region)
    for o in blocks:
        for s in o.stores:
            box = dense_box(s, o.loops)
            if box is not None and box_within(have, _closed(box), an):
                return
    lname = loop.loop_var.name
    names = ", ".join(dict.fromkeys(o.blk.name_hint for o in blocks if o.stores))
    raise ctx.error(f"loop {lname}", f"cannot prove that block(s) {names} write every element "
                    f"of the region of {src.name} copied back in an iteration of loop {lname} "
                    f"(the copy would store into {src.name} what the new buffer holds there "
                    "instead)", "write_at a loop one iteration of which writes a whole box: "
                    "one store whose indices are an affine map of the loops",
                    highlight=[lname] + names.split(", "))


def _init_first(ctx: Ctx, loop: For, o: _Outer, ld) -> bool:
    """``ld`` reads the element its own reduction block (``o``'s block) writes after its
    T.init, and that init runs first, in the same execution of ``loop``: the block's
    reduction axes are bound to loops inside ``loop`` (or ``loop``), an affine map of them
    that starts at the axes' minimum."""
    blk = o.blk
    if blk.init is None or ld.in_init or not ld.inits or ld.inits[-1] is not blk:
        return False
    if not any(st.in_init is blk and st.last is None and ld.last is None and
               all(_same(a, b) for a, b in zip(st.indices, ld.indices)) for st in o.stores):
        return False
    if not any(not st.in_init and st.last is None and
               all(_same(a, b) for a, b in zip(st.indices, ld.indices)) for st in o.stores):
        return False
    loops = [loop] + o.loops
    inside = {id(lp.loop_var) for lp in loops}
    red = [(iv, v) for iv, v in zip(blk.iter_vars, o.realize.iter_values)
           if iv.iter_type is IterType.REDUCE]
    for _iv, v in red:
        if any(id(x) not in inside for x in collect_vars(v)):
            return False
    got = affine_bindings(list(o.realize.iter_values), loops, o.realize.predicate)
    if not got.ok:
        return False
    first = {lp.loop_var: lp.min for lp in loops}
    for iv, v in red:
        at_first = E.as_const_int(location_analyzer(ctx, loop).simplify(substitute(v, first)))
        if at_first is None or at_first != E.as_const_int(iv.dom.min):
            return False
    return True


def _same(a, b) -> bool:
    from engine.ir.structural import structural_equal
    return structural_equal(a, b)


def _written_before_in_block(o: _Outer, ld, an_b) -> bool:
    """``ld`` reads elements an earlier statement of its block stores every one of."""
    need = relaxed_box(ld.ranges(), ld.conds, ld.loops, an_b)
    for st in o.stores:
        if st.top >= ld.top or st.in_init:
            continue
        box = dense_box(st, [])
        if box is not None and box_within(need, _closed(box), an_b):
            return True
    return False


def _written_before_in_iteration(o: _Outer, ld, earlier: list, an) -> bool:
    """``ld`` reads elements a block of an earlier statement of the loop's body stores
    every one of, in the same iteration."""
    need = relaxed_box(ld.ranges(), ld.conds, o.loops + ld.loops, an)
    for w in earlier:
        for st in w.stores:
            box = dense_box(st, w.loops)
            if box is not None and box_within(need, _closed(box), an):
                return True
    return False


def _check_reads_written(ctx: Ctx, loop: For, src: Buffer, redirected: list, an) -> None:
    """Each load of ``src`` in the statements write_at redirects reads an element written
    into the new buffer before it (which starts empty): see the module docstring."""
    lname = loop.loop_var.name
    for o in redirected:
        if not o.loads:
            continue
        an_b = location_analyzer(ctx, o.blk)
        earlier = [w for w in redirected if w.pos < o.pos]
        for ld in o.loads:
            if _init_first(ctx, loop, o, ld) or _written_before_in_block(o, ld, an_b) or \
                    _written_before_in_iteration(o, ld, earlier, an):
                continue
            bname = o.blk.name_hint
            why = ("its T.init does not run in the same execution of loop "
                   f"{lname}" if o.blk.init is not None else "it has no T.init")
            raise ctx.error(f"block {bname}", f"block {bname} reads {src.name} elements that "
                            f"were not written in the same iteration of loop {lname} before "
                            f"({why}), so it would read the new buffer before anything is "
                            "stored there", "write_at a loop that holds the whole reduction "
                            "with its T.init (decompose_reduction inside that loop, or "
                            "not at all)", highlight=[bname, lname])


# ---------------------------------------------------------------------------
# the copy block
# ---------------------------------------------------------------------------
def _axis_of(ctx: Ctx, loop: For, v: E.Var):
    """The domain of an outer variable a region mentions: a loop at or around ``loop``, or
    an axis of a block around it."""
    for a in [loop] + ctx.index.ancestors(loop):
        if isinstance(a, For) and a.loop_var is v:
            return Range(a.min, a.extent)
        if isinstance(a, Block):
            for iv in a.iter_vars:
                if iv.var is v:
                    return iv.dom
    return None


def _copy_block(ctx: Ctx, loop: For, name: str, copy_from: Buffer, copy_to: Buffer,
                region: list) -> BlockRealize:
    """TVM's MakeBlock: axes ``v0, v1, ...`` for the outer variables the region's mins
    mention (spatial, over their loop's range, bound to them), a body of loops ``ax0,
    ax1, ...`` over the extents storing ``copy_to[min + ax] = copy_from[min + ax]``,
    annotated ``auto_copy``."""
    vmap: dict = {}
    ivs, values = [], []
    mins = []
    for mn, _ext in region:
        for v in collect_vars(mn):
            if v in vmap:
                continue
            dom = _axis_of(ctx, loop, v)
            if dom is None:     # a size of the function (or a let around): kept as it is
                continue
            nv = E.Var(f"v{len(ivs)}", v.dtype)
            vmap[v] = nv
            ivs.append(IterVar(nv, dom, IterType.SPATIAL))
            values.append(v)
        mins.append(substitute(mn, vmap))
    exts = [ext for _mn, ext in region]
    axes = [E.Var(f"ax{d}", _index_dtype(ext, copy_from.shape[d])) for d, ext in
            enumerate(exts)]
    idx = tuple(ax if E.is_const_int(mn, 0) else E.binary(E.Add, mn, ax)
                for mn, ax in zip(mins, axes))
    body: Any = BufferStore(copy_to, E.BufferLoad(copy_from, idx), idx)
    for ax, ext in reversed(list(zip(axes, exts))):
        body = For(ax, E.const(0, ax.dtype), ext, ForKind.SERIAL, body)
    ranges = tuple(Range(mn, ext) for mn, ext in zip(mins, exts))
    block = Block(tuple(ivs), (BufferRegion(copy_from, ranges),),
                  (BufferRegion(copy_to, ranges),), name, body,
                  annotations=(("auto_copy", True),))
    return BlockRealize(tuple(values), E.IntImm("bool", 1), block)


# ---------------------------------------------------------------------------
# the two primitives
# ---------------------------------------------------------------------------
def _read_write_at(ctx: Ctx, inputs, attrs, is_read: bool) -> Result:
    what = "read" if is_read else "write"
    loop = expect_loop(ctx, inputs[0])
    blk = expect_block(ctx, inputs[1])
    index, scope = need_attrs(ctx, attrs, 2, f"{what}_at")[:2]
    check_scope(ctx, f"block {blk.name_hint}", scope)
    src = nth_buffer(ctx, blk, index, what, f"{what}_buffer_index")
    lname = loop.loop_var.name
    scope_blk = ctx.index.scope_block(loop)
    _check_loop(ctx, loop, src, scope_blk)
    subtrees, per = _subtrees(ctx, loop, src)
    r_pos = [i for i, bs in enumerate(per) if any(o.reads for o in bs)]
    w_pos = [i for i, bs in enumerate(per) if any(o.writes for o in bs)]

    def first_block(pos: int, flag: str) -> str:
        return next(o.blk.name_hint for o in per[pos] if getattr(o, flag))

    if is_read:
        if not r_pos:
            raise ctx.error(f"loop {lname}", f"no block under loop {lname} reads {src.name}",
                            f"read_at a loop that holds a block reading {src.name}",
                            highlight=[lname])
        if w_pos and w_pos[-1] >= r_pos[0]:
            w, r = first_block(w_pos[-1], "writes"), first_block(r_pos[0], "reads")
            raise ctx.error(f"block {w}", f"block {w} writes {src.name} in loop {lname} at or "
                            f"after block {r} first reads it, so the copy made before that "
                            "read would go stale", f"read_at a loop inside which {src.name} "
                            "is only read (or written only before it is read)",
                            highlight=[w, r, lname])
        insert, lo, hi = r_pos[0], r_pos[0], len(subtrees)
    else:
        if not w_pos:
            raise ctx.error(f"loop {lname}", f"no block under loop {lname} writes {src.name}",
                            f"write_at a loop that holds a block writing {src.name}",
                            highlight=[lname])
        if r_pos and r_pos[-1] > w_pos[-1]:
            r, w = first_block(r_pos[-1], "reads"), first_block(w_pos[-1], "writes")
            raise ctx.error(f"block {r}", f"block {r} reads {src.name} in loop {lname} after "
                            f"block {w} last writes it, before the copy back would store it",
                            f"write_at a loop in which {src.name} is not read after its last "
                            "write", highlight=[r, w, lname])
        insert, lo, hi = w_pos[-1] + 1, 0, w_pos[-1] + 1
    redirected = [o for bs in per[lo:hi] for o in bs]
    accessing = [o for o in redirected if (o.reads if is_read else o.writes)]
    an = location_analyzer(ctx, loop)
    # read_at into a buffer the threads share: the copy holds what the whole thread block
    # reads (each thread's iteration copies the same tile: the same values). write_at keeps
    # one thread's region: a copy back of the block's tile from one thread would store
    # elements other threads have not written yet.
    threads = thread_loops_sharing(ctx, loop, scope) if is_read else []
    region = _region(ctx, loop, src, accessing, is_read, an, threads)
    _check_inside(ctx, loop, src, redirected, region, is_read, an)
    if not is_read:
        _check_covered(ctx, loop, src, redirected, region, an)
        _check_reads_written(ctx, loop, src, redirected, an)

    dst = Buffer(fresh_name(f"{src.name}_{scope}", buffer_names(ctx.func)), src.shape,
                 src.dtype, scope, (), 0, src.align)
    name = fresh_name(f"{src.name}_{scope}", set(ctx.index.blocks))
    copy = _copy_block(ctx, loop, name, src, dst, region) if is_read else \
        _copy_block(ctx, loop, name, dst, src, region)
    swap = BufferSwap(src, dst)

    def edit_loop(s):
        kids = flatten_seq(s.body)
        kids = [swap.visit(k) if lo <= i < hi else k for i, k in enumerate(kids)]
        return s.replace(body=seq(*(kids[:insert] + [copy] + kids[insert:])))

    edits: dict = {}
    compose(edits, id(loop), edit_loop)
    compose(edits, id(scope_blk), lambda b: b.replace(alloc_buffers=b.alloc_buffers + (dst,)))
    return Result(rewrite_stmts(ctx.func, edits), [copy.block])


def _python_args(prim, inputs, attrs, dialect: str, arg: str) -> list:
    if dialect == "engine":
        return [fmt(inputs[0]), fmt(inputs[1]), prim.attr(attrs, 0), prim.attr(attrs, 1)]
    return [f"loop={fmt(inputs[0])}", f"block={fmt(inputs[1])}", f"{arg}={prim.attr(attrs, 0)}",
            f"storage_scope={prim.attr(attrs, 1)}"]


def _run(prim, sch, loop, block, buffer_index, storage_scope, what: str):
    index = buffer_index_of(sch, block, buffer_index, what, f"{what}_at",
                            f"{what}_buffer_index")
    return sch._run(prim, [loop, block], [index, storage_scope])[0]


@register
class ReadAt(Primitive):
    kind = "ReadAt"
    method = "read_at"
    attr_kinds = (("read_buffer_index", "int"), ("storage_scope", "str"))
    returns = "one"

    def call(self, sch, loop, block, read_buffer_index, storage_scope: str):
        """Copy, in every iteration of ``loop``, the region of a buffer the loop's body
        reads into a new buffer ``<buffer>_<scope>``, and read the copy instead.

        The buffer is the ``read_buffer_index``-th of the block's ``T.reads`` (or its name).
        The copy block (named like the new buffer, marked ``auto_copy``) is inserted right
        before the first statement of the loop's body that reads the buffer; from there on
        every access to the buffer in the body reads the copy. The region copied is what
        the blocks reading the buffer there declare, over the loops between them and
        ``loop``; the copy's axes are the outer loops the region moves with. The new buffer
        has the buffer's shape and is allocated in the scope block. TVM's ReadAt (the
        engine's region relaxes only the loops between the blocks and ``loop``).

        It requires: 1) ``read_buffer_index`` names a buffer the block reads; 2) a block
        under ``loop`` reads it, and none writes it at or after the first statement that
        reads it; 3) the region has constant extents and lies inside the buffer; 4) the
        buffer is accessed under ``loop`` only by loads and stores in blocks (no ``.data``,
        access_ptr or ``T.match_buffer`` view), only inside that region, and allocated
        outside the loop; 5) neither ``loop`` nor a loop around it is parallel or
        vectorized; 6) ``storage_scope`` is "global", "local" or "shared". Returns the
        copy block.

        Before::

            for i_0, j_0, k_0, i_1, j_1, k_1 in T.grid(4, 4, 8, 16, 16, 8):
                with T.block("C"):
                    vi = T.axis.spatial(64, i_0 * 16 + i_1)
                    vj = T.axis.spatial(64, j_0 * 16 + j_1)
                    vk = T.axis.reduce(64, k_0 * 8 + k_1)
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

        Call::

            block_C = sch.get_block("C")
            i_0, j_0, k_0, i_1, j_1, k_1 = sch.get_loops(block_C)
            A_shared = sch.read_at(k_0, block_C, 0, "shared")

        After::

            A_shared = T.alloc_buffer((64, 64), scope="shared")
            for i_0, j_0, k_0 in T.grid(4, 4, 8):
                with T.block("A_shared"):
                    v0, v1 = T.axis.remap("SS", [i_0, k_0])
                    T.reads(A[v0 * 16:v0 * 16 + 16, v1 * 8:v1 * 8 + 8])
                    T.writes(A_shared[v0 * 16:v0 * 16 + 16, v1 * 8:v1 * 8 + 8])
                    T.block_attr({"auto_copy": True})
                    for ax0, ax1 in T.grid(16, 8):
                        A_shared[v0 * 16 + ax0, v1 * 8 + ax1] = A[v0 * 16 + ax0, v1 * 8 + ax1]
                for i_1, j_1, k_1 in T.grid(16, 16, 8):
                    with T.block("C"):
                        ...
                        T.reads(A_shared[vi, vk], B[vk, vj])
                        ...
                        C[vi, vj] = C[vi, vj] + A_shared[vi, vk] * B[vk, vj]
        """
        return _run(self, sch, loop, block, read_buffer_index, storage_scope, "read")

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        return _read_write_at(ctx, inputs, attrs, True)

    def python_args(self, inputs, attrs, dialect):
        return _python_args(self, inputs, attrs, dialect, "read_buffer_index")


@register
class WriteAt(Primitive):
    kind = "WriteAt"
    method = "write_at"
    attr_kinds = (("write_buffer_index", "int"), ("storage_scope", "str"))
    returns = "one"

    def call(self, sch, loop, block, write_buffer_index, storage_scope: str):
        """Write, in every iteration of ``loop``, a buffer into a new buffer
        ``<buffer>_<scope>`` and copy the region written back after the last write.

        The buffer is the ``write_buffer_index``-th of the block's ``T.writes`` (or its
        name). Every access to it in the statements of the loop's body up to the last one
        that writes it goes to the new buffer; a copy block (named like the new buffer,
        marked ``auto_copy``) right after that statement stores the region they write back.
        TVM's WriteAt (the engine's region relaxes only the loops between the blocks and
        ``loop``).

        It requires: 1) ``write_buffer_index`` names a buffer the block writes; 2) a block
        under ``loop`` writes it and none reads it after the last statement that writes
        it; 3) the region has constant extents, lies inside the buffer, and one iteration
        of ``loop`` writes every element of it (one store, its indices an affine map of
        the loops); 4) every load of the buffer in those statements reads an element
        written before in the same iteration — a reduction its own element, with its
        ``T.init`` and its reduction loops inside ``loop`` (the new buffer starts without
        the buffer's contents); 5) the buffer is accessed under ``loop`` only by loads and
        stores in blocks, only inside that region, and allocated outside the loop; 6)
        neither ``loop`` nor a loop around it is parallel or vectorized; 7)
        ``storage_scope`` is "global", "local" or "shared". Returns the copy block.

        Before::

            for i_0, j_0, k_0, i_1, j_1, k_1 in T.grid(4, 4, 8, 16, 16, 8):
                with T.block("C"):
                    vi = T.axis.spatial(64, i_0 * 16 + i_1)
                    vj = T.axis.spatial(64, j_0 * 16 + j_1)
                    vk = T.axis.reduce(64, k_0 * 8 + k_1)
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

        Call::

            block_C = sch.get_block("C")
            i_0, j_0, k_0, i_1, j_1, k_1 = sch.get_loops(block_C)
            C_local = sch.write_at(j_0, block_C, 0, "local")

        After::

            C_local = T.alloc_buffer((64, 64), scope="local")
            for i_0, j_0 in T.grid(4, 4):
                for k_0, i_1, j_1, k_1 in T.grid(8, 16, 16, 8):
                    with T.block("C"):
                        ...
                        T.writes(C_local[vi, vj])
                        with T.init():
                            C_local[vi, vj] = T.float32(0)
                        C_local[vi, vj] = C_local[vi, vj] + A[vi, vk] * B[vk, vj]
                with T.block("C_local"):
                    v0, v1 = T.axis.remap("SS", [i_0, j_0])
                    T.reads(C_local[v0 * 16:v0 * 16 + 16, v1 * 16:v1 * 16 + 16])
                    T.writes(C[v0 * 16:v0 * 16 + 16, v1 * 16:v1 * 16 + 16])
                    T.block_attr({"auto_copy": True})
                    for ax0, ax1 in T.grid(16, 16):
                        C[v0 * 16 + ax0, v1 * 16 + ax1] = C_local[v0 * 16 + ax0, v1 * 16 + ax1]
        """
        return _run(self, sch, loop, block, write_buffer_index, storage_scope, "write")

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        return _read_write_at(ctx, inputs, attrs, False)

    def python_args(self, inputs, attrs, dialect):
        return _python_args(self, inputs, attrs, dialect, "write_buffer_index")

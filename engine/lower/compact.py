"""Buffer compaction and layout of allocated buffers (runs on block-level IR, before
blocks become loops).

TVM's ``PlanAndUpdateBufferAllocationLocation`` + ``CompactBufferAllocation`` +
``storage_align``, done together:

* **Placement.** A buffer a block allocates (``T.alloc_buffer``, never a parameter) is
  allocated at the innermost loop that encloses every access of it — inside that loop's
  body, so each iteration (and, under a ``parallel`` loop, each thread) gets its own copy —
  provided the move is provably safe (see below). Otherwise it stays where it was.
* **Compaction.** The buffer is shaped to the box one iteration of that loop touches (the
  accesses' indices relaxed over the loops inside it, :func:`engine.arith.relax`), and the
  box's minimum (an expression of the outer loop variables) is subtracted from every index.
  After ``cache_write(b, 0, "local")`` + ``reverse_compute_at(writeback, j0)`` the local
  accumulator becomes e.g. a 4x16 tile allocated inside ``j0``: a constant-size ``alloca``
  that LLVM keeps in registers once the micro-kernel is unrolled. A buffer that stays at
  its block is still shrunk to the constant box of all accesses when that is smaller.
* **storage_align.** A block annotation ``{"buffer_dim_align": [[buffer_index, axis,
  factor, offset], ...]}`` (``buffer_index`` into that block's ``writes``) pads the strides
  of the (compacted) buffer innermost outward: ``stride = 1``; for each dim ``d`` from the
  last: if aligned, ``stride += (factor + offset - stride % factor) % factor``;
  ``strides[d] = stride``; ``stride *= shape[d]``. Flattening then uses those strides.

**When a move into loop L is safe** (fresh storage per iteration of L must not lose a value
one iteration hands to the next). With ``W`` the block of the first access in program
order, the move is done only when:

1. ``W`` writes the buffer with a store that fills its box exactly (each index dimension
   is an outer expression plus loop variables inside L whose coefficients are the mixed
   radix of their extents, e.g. ``i1 * 4 + i2`` with ``i2`` in [0, 4); each such loop in
   one dimension only; no ``if``/``T.where`` between L and the store);
2. ``W`` reads the buffer only as the reduction update of its own ``init`` store (same
   indices), and every loop bound to a reduce axis of ``W`` is inside L (TVM's rule: an
   accumulator is never allocated inside its own reduction loop);
3. every access (of ``W`` and of all other blocks) lies inside that box; the other blocks
   share no loop inside L with ``W`` (so ``W`` has completely written the box before
   anyone else touches it);
4. every loop inside L that encloses an access has constant bounds, the box has a
   constant extent, and neither L nor a loop between the allocation and L is vectorized
   or unrolled.

Anything else (non-affine indices, data flowing between iterations of L, predicated
producers from non-divisible splits) keeps the buffer where it was — correct for every
schedule, just not compacted.
"""
from __future__ import annotations


from engine.arith import Analyzer, relax
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import lanes_of
from engine.ir.function import PrimFunc
from engine.ir.functor import Mutator, collect_vars, pre_order_visit, substitute
from engine.ir.structural import structural_equal

from .errors import BuildError
from .extern import opaque_buffers

ALIGN_KEY = "buffer_dim_align"


def aligned_strides(shape: tuple, aligns: dict) -> list[int]:
    """Strides (elements) of a row-major buffer with ``aligns = {axis: (factor, offset)}``
    (see the module docstring); e.g. shape (16, 16) with {0: (16, 1)} gives [17, 1]."""
    strides = [0] * len(shape)
    stride = 1
    for d in range(len(shape) - 1, -1, -1):
        if d in aligns:
            f, o = aligns[d]
            stride += (f + o - stride % f) % f
        strides[d] = stride
        stride *= shape[d]
    return strides


class _Access:
    __slots__ = ("buf", "indices", "store", "order", "path", "guards", "leaf", "in_init")

    def __init__(self, buf, indices, store, order, path, guards, leaf, in_init):
        self.buf, self.indices, self.store, self.order = buf, indices, store, order
        self.path, self.guards, self.leaf, self.in_init = path, guards, leaf, in_init


class _Leaf:
    """A block realize as seen by the accesses inside it."""

    __slots__ = ("block", "values", "depth")

    def __init__(self, block, values, depth):
        self.block, self.values, self.depth = block, values, depth


class _Collector:
    def __init__(self, func_name: str):
        self.func_name = func_name
        self.owner: dict[int, tuple] = {}      # buf id -> (Block, depth)
        self.accesses: dict[int, list] = {}
        self.aligns: dict[int, dict] = {}
        self.ranges: dict[int, tuple | None] = {}  # loop var id -> (lo, hi) | None
        self.order = 0

    # -- expressions
    def expr(self, e, vmap, path, guards, leaf, in_init):
        if e is None or not isinstance(e, E.PrimExpr):
            return

        def fn(x):
            if type(x) is E.BufferLoad and id(x.buffer) in self.owner:
                self.add(x.buffer, x.indices, False, vmap, path, guards, leaf, in_init)
        pre_order_visit(e, fn)

    def add(self, buf, indices, store, vmap, path, guards, leaf, in_init):
        idx = tuple(substitute(i, vmap) if vmap else i for i in indices)
        self.order += 1
        self.accesses.setdefault(id(buf), []).append(
            _Access(buf, idx, store, self.order, tuple(path), tuple(guards), leaf, in_init))

    # -- statements
    def stmt(self, s, vmap, path, guards, leaf, in_init=False):
        if s is None:
            return
        t = type(s)
        if t is S.SeqStmt:
            for x in s.seq:
                self.stmt(x, vmap, path, guards, leaf, in_init)
        elif t is S.BufferStore:
            for i in s.indices:
                self.expr(i, vmap, path, guards, leaf, in_init)
            self.expr(s.value, vmap, path, guards, leaf, in_init)
            if id(s.buffer) in self.owner:
                self.add(s.buffer, s.indices, True, vmap, path, guards, leaf, in_init)
        elif t is S.For:
            self.expr(s.min, vmap, path, guards, leaf, in_init)
            self.expr(s.extent, vmap, path, guards, leaf, in_init)
            lo, ext = E.as_const_int(substitute(s.min, vmap)), E.as_const_int(
                substitute(s.extent, vmap))
            self.ranges[id(s.loop_var)] = ((lo, lo + ext - 1) if lo is not None and ext
                                           is not None and ext > 0 else None)
            self.stmt(s.body, vmap, path + [s], guards, leaf, in_init)
        elif t is S.IfThenElse:
            self.expr(s.condition, vmap, path, guards, leaf, in_init)
            g = guards + [len(path)]
            self.stmt(s.then_case, vmap, path, g, leaf, in_init)
            self.stmt(s.else_case, vmap, path, g, leaf, in_init)
        elif t is S.Evaluate:
            self.expr(s.value, vmap, path, guards, leaf, in_init)
        elif t is S.LetStmt:
            self.expr(s.value, vmap, path, guards, leaf, in_init)
            v2 = dict(vmap)
            v2[s.var] = substitute(s.value, vmap) if vmap else s.value
            self.stmt(s.body, v2, path, guards, leaf, in_init)
        elif t is S.Allocate:
            self.stmt(s.body, vmap, path, guards, leaf, in_init)
        elif t is S.BlockRealize:
            self.block(s, vmap, path, guards, in_init)
        elif t is S.Block:
            self.block(S.BlockRealize((), E.IntImm("bool", 1), s), vmap, path, guards, in_init)

    def block(self, br, vmap, path, guards, in_init):
        blk = br.block
        for b in blk.alloc_buffers:
            self.owner[id(b)] = (blk, len(path))
        for v in br.iter_values:
            self.expr(v, vmap, path, guards, None, in_init)
        self.expr(br.predicate, vmap, path, guards, None, in_init)
        values = [substitute(v, vmap) if vmap else v for v in br.iter_values]
        v2 = dict(vmap)
        for iv, v in zip(blk.iter_vars, values):
            v2[iv.var] = v
        pred = E.as_const_int(br.predicate)
        g = guards if pred is not None and pred != 0 else guards + [len(path)]
        leaf = _Leaf(blk, values, len(path))
        self._aligns(blk)
        if blk.init is not None:
            self.stmt(blk.init, v2, path, g, leaf, True)
        self.stmt(blk.body, v2, path, g, leaf, False)

    def _aligns(self, blk):
        raw = dict(blk.annotations).get(ALIGN_KEY)
        if raw is None:
            return
        where = f"block {blk.name_hint!r} of function {self.func_name!r}"
        try:
            entries = [tuple(e) for e in raw]
        except TypeError:
            raise BuildError(f"the {ALIGN_KEY} annotation of {where} must be a list of "
                             "[buffer_index, axis, factor, offset] lists") from None
        for e in entries:
            if len(e) != 4 or not all(isinstance(x, int) and not isinstance(x, bool)
                                      for x in e):
                raise BuildError(f"the {ALIGN_KEY} entry {list(e)!r} of {where} must be four "
                                 "integers [buffer_index, axis, factor, offset]")
            index, axis, factor, offset = e
            if not 0 <= index < len(blk.writes):
                raise BuildError(f"the {ALIGN_KEY} entry {list(e)!r} of {where} names write "
                                 f"buffer {index}, but the block writes {len(blk.writes)} "
                                 "buffer(s)")
            buf = blk.writes[index].buffer
            if not -buf.ndim <= axis < buf.ndim:
                raise BuildError(f"the {ALIGN_KEY} entry {list(e)!r} of {where}: axis {axis} "
                                 f"is not a dimension of {buf.name!r} ({buf.ndim} dims)")
            if factor < 1 or not 0 <= offset < factor:
                raise BuildError(f"the {ALIGN_KEY} entry {list(e)!r} of {where} needs "
                                 "factor >= 1 and 0 <= offset < factor")
            self.aligns.setdefault(id(buf), {})[axis % buf.ndim] = (factor, offset)


# ---------------------------------------------------------------------------
class _Planner:
    def __init__(self, col: _Collector):
        self.col = col

    def loop_ranges(self, loops) -> dict | None:
        out = {}
        for lp in loops:
            r = self.col.ranges.get(id(lp.loop_var))
            if r is None:
                return None
            out[lp.loop_var] = r
        return out

    def box(self, a: _Access, q: int):
        """Per dim ``(lo_expr, extent)`` of ``a`` over all iterations of ``a.path[q:]``."""
        inner = self.loop_ranges(a.path[q:])
        outer = self.loop_ranges(a.path[:q]) or {}
        if inner is None:
            return None
        an = Analyzer({**outer, **inner})
        out = []
        for idx in a.indices:
            if lanes_of(idx.dtype) != 1:
                return None
            idx = an.simplify(idx)
            r = relax(idx, inner, outer)
            if r is None:
                return None
            lo = Analyzer(outer).simplify(r[0])
            ext = E.as_const_int(Analyzer(outer).simplify(r[1] - r[0] + 1))
            if ext is None or ext < 1:
                return None
            out.append((lo, ext))
        return out

    def exact(self, a: _Access, q: int) -> bool:
        """Does the store ``a`` write every element of its box (module docstring, 1.)?"""
        if any(g >= q for g in a.guards):
            return False
        inner = self.loop_ranges(a.path[q:])
        if inner is None:
            return False
        ranges = {**(self.loop_ranges(a.path[:q]) or {}), **inner}
        an = Analyzer(ranges)
        inner_ids = {id(v) for v in inner}
        used: set[int] = set()
        for idx in a.indices:
            if lanes_of(idx.dtype) != 1:
                return False
            terms, _ = an.linear(an.simplify(idx))
            radix = []
            for atom, coef in terms.values():
                ids = {id(v) for v in collect_vars(atom)}
                if not ids & inner_ids:
                    continue
                if not isinstance(atom, E.Var) or id(atom) in used:
                    return False
                used.add(id(atom))
                lo, hi = inner[atom]
                radix.append((abs(coef), hi - lo + 1))
            # dense: the coefficients are the mixed radix of the extents (i1 * 4 + i2 with
            # i2 in [0, 4) covers [0, 4 * extent(i1)) without holes)
            stride = 1
            for coef, ext in sorted(radix):
                if coef != stride:
                    return False
                stride *= ext
        return True

    def inside(self, a_box, w_box, outer: dict) -> bool:
        an = Analyzer(outer)
        for (lo, ext), (wlo, wext) in zip(a_box, w_box):
            d = an.bound(an.simplify(lo - wlo))
            if d is None or d[0] is None or d[0] < 0:
                return False
            d = an.bound(an.simplify(lo + ext - (wlo + wext)))
            if d is None or d[1] is None or d[1] > 0:
                return False
        return True

    def try_loop(self, accs: list, p: int):
        """The box to allocate inside loop ``path[p]``, or None when the move is unsafe."""
        q = p + 1
        first = min(accs, key=lambda a: a.order)
        leaf = first.leaf
        if leaf is None:
            return None
        mine = [a for a in accs if a.leaf is leaf]
        others = [a for a in accs if a.leaf is not leaf]
        blk = leaf.block
        init_stores = [a for a in mine if a.store and a.in_init]
        if init_stores:
            cands = init_stores
            # reduce axes of W must be driven by loops inside L only
            inner_ids = {id(lp.loop_var) for lp in first.path[q:]}
            for iv, v in zip(blk.iter_vars, leaf.values):
                if iv.iter_type is S.IterType.REDUCE:
                    if any(id(x) not in inner_ids for x in collect_vars(v)):
                        return None
            for a in mine:
                if not a.store and not any(structural_equal(a.indices, s.indices)
                                           for s in init_stores):
                    return None
        else:
            if any(not a.store for a in mine):
                return None
            cands = [a for a in mine if a.store]
        w = None
        for c in cands:
            if self.exact(c, q):
                w = c
                break
        if w is None:
            return None
        w_box = self.box(w, q)
        if w_box is None:
            return None
        w_loops = {id(lp) for lp in w.path[q:]}
        for a in mine:
            w_loops.update(id(lp) for lp in a.path[q:])
        outer = self.loop_ranges(w.path[:q]) or {}
        for a in accs:
            if a.leaf is not leaf and any(id(lp) in w_loops for lp in a.path[q:]):
                return None
            b = self.box(a, q)
            if b is None or not self.inside(b, w_box, outer):
                return None
        del others
        return w_box

    def in_place(self, accs: list, depth: int, buf: Buffer):
        """Constant box of all accesses (clamped to the shape) at the owner block."""
        shape = buf.const_shape()
        boxes = []
        for a in accs:
            b = self.box(a, depth)
            if b is None:
                return None
            boxes.append(b)
        outer = self.loop_ranges(accs[0].path[:depth]) or {}
        an = Analyzer(outer)
        out = []
        for d, n in enumerate(shape):
            # boxes may start at an expression of the loops outside the owner block
            # (``t[vi, j]`` in a block under loop i): union them by constant offsets
            base = boxes[0][d][0]
            lo = hi = None
            for b in boxes:
                off = E.as_const_int(an.simplify(b[d][0] - base))
                if off is None:
                    return None
                lo = off if lo is None else min(lo, off)
                hi = off + b[d][1] - 1 if hi is None else max(hi, off + b[d][1] - 1)
            start = an.simplify(base + lo)
            cs = E.as_const_int(start)
            if cs is not None:  # clamp a constant box to the buffer
                l, h = max(cs, 0), min(cs + hi - lo, n - 1)
                if h < l:
                    return None
                out.append((E.IntImm("int32", l), h - l + 1))
            else:
                out.append((start, hi - lo + 1))
        return out


class _Rewriter(Mutator):
    def __init__(self, plans: dict, at_loop: dict, in_block: dict):
        self.plans = plans          # old buf id -> (new buf, offsets)
        self.at_loop = at_loop      # For id -> [new bufs]
        self.in_block = in_block    # Block id -> {old buf id: new buf | None (moved)}

    def index(self, buf, indices):
        new, offs = self.plans[id(buf)]
        out = []
        for i, o in zip(indices, offs):
            i = self.visit(i)
            if not (isinstance(o, E.IntImm) and o.value == 0):
                o = o if o.dtype == i.dtype else E.Cast(i.dtype, o)
                i = E.Sub(i, o)
            out.append(i)
        return new, tuple(out)

    def visit_BufferLoad(self, e):
        if id(e.buffer) in self.plans:
            new, idx = self.index(e.buffer, e.indices)
            return E.BufferLoad(new, idx)
        return self.generic_visit(e)

    def visit_BufferStore(self, s):
        if id(s.buffer) in self.plans:
            new, idx = self.index(s.buffer, s.indices)
            return S.BufferStore(new, self.visit(s.value), idx)
        return self.generic_visit(s)

    def visit_For(self, s):
        out = self.generic_visit(s)
        bufs = self.at_loop.get(id(s))
        if bufs:
            body = out.body
            for b in reversed(bufs):
                body = S.Allocate(b, body)
            out = S.For(out.loop_var, out.min, out.extent, out.kind, body, out.annotations,
                        out.thread_tag)
        return out

    def visit_Block(self, b):
        out = self.generic_visit(b)
        change = self.in_block.get(id(b))
        if change:
            allocs = []
            for buf in b.alloc_buffers:
                if id(buf) in change:
                    if change[id(buf)] is not None:
                        allocs.append(change[id(buf)])
                else:
                    allocs.append(buf)
            out = out.replace(alloc_buffers=tuple(allocs))
        return out


def compact_buffers(func: PrimFunc) -> PrimFunc:
    """Place, compact and align the buffers ``func`` allocates (see the module docstring)."""
    col = _Collector(func.name)
    col.stmt(func.body, {}, [], [], None)
    if not col.owner:
        return func
    plan = _Planner(col)
    opaque = opaque_buffers(func.body)   # an extern call's pointer: the layout stays
    plans: dict = {}
    at_loop: dict = {}
    in_block: dict = {}
    for bid, (blk, depth) in col.owner.items():
        buf = next(b for b in blk.alloc_buffers if id(b) == bid)
        if buf.strides or buf.elem_offset or bid in opaque:
            continue  # an explicit layout is kept as written, as is one an extern call sees
        try:
            shape = buf.const_shape()
        except ValueError:
            # a symbolic shape: only moved into a loop, as the constant box one iteration
            # touches (the bounds proof, after this, checks every access of the new box)
            shape = None
        accs = col.accesses.get(bid, [])
        box, loop = None, None
        if accs:
            common = list(accs[0].path)
            for a in accs[1:]:
                n = 0
                while n < len(common) and n < len(a.path) and common[n] is a.path[n]:
                    n += 1
                del common[n:]
            for p in range(len(common) - 1, depth - 1, -1):
                if any(lp.kind in (S.ForKind.VECTORIZED, S.ForKind.UNROLLED)
                       for lp in common[depth:p + 1]):
                    continue
                box = plan.try_loop(accs, p)
                if box is not None:
                    loop = common[p]
                    break
            if box is None and shape is not None:
                box = plan.in_place(accs, depth, buf)
            if box is not None and any(E.as_const_int(n) is not None and ext > E.as_const_int(n)
                                       for (_, ext), n in zip(box, buf.shape)):
                box, loop = None, None  # a box wider than the buffer: keep it as written
        if shape is None and (box is None or loop is None):
            continue  # a symbolic shape stays as written (allocated where it is, on the heap)
        new_shape = tuple(ext for _, ext in box) if box is not None else shape
        aligns = col.aligns.get(bid)
        if new_shape == shape and loop is None and not aligns:
            continue
        strides = tuple(aligned_strides(new_shape, aligns)) if aligns else ()
        new = Buffer(buf.name, new_shape, buf.dtype, buf.scope, strides, 0, buf.align)
        offs = tuple(lo for lo, _ in box) if box is not None else \
            tuple(E.IntImm("int32", 0) for _ in buf.shape)
        plans[bid] = (new, offs)
        if loop is not None:
            at_loop.setdefault(id(loop), []).append(new)
            in_block.setdefault(id(blk), {})[bid] = None
        else:
            in_block.setdefault(id(blk), {})[bid] = new
    if not plans:
        return func
    body = _Rewriter(plans, at_loop, in_block).visit(func.body)
    return PrimFunc(func.name, func.params, body, func.attrs)

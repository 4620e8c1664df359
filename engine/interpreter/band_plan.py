"""Which innermost loop nests ("bands") the numpy band evaluator may run, all iterations
at once, without changing the result."""
from __future__ import annotations

from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import lanes_of
from engine.ir.functor import collect_vars, post_order_visit
from engine.te.regions import same_expr

BAND_MIN_LANES = 16          # below this, numpy's per-call overhead outweighs the gain
BAND_MAX_LANES = 1 << 17    # bounds the temporary arrays of one band


class BandPlan:
    """A band: its loops (outermost first), ``cls`` "E" (element-wise) or "R"
    (reduction), the block around the store (or None), the store, the reduction's
    ``(op, term)`` (or None) and the number of lanes (iterations)."""
    __slots__ = ("loops", "cls", "realize", "store", "reduction", "lanes")

    def __init__(self, loops, cls, realize, store, reduction, lanes):
        self.loops = loops
        self.cls = cls
        self.realize = realize
        self.store = store
        self.reduction = reduction
        self.lanes = lanes


def band_plan(s: S.For) -> BandPlan | None:
    """The innermost perfect loop nest under ``s`` that can run as numpy operations.

    Its body must be one BufferStore (alone or as the body of a block without
    allocations).  Either every band loop variable reaches the store's index
    (element-wise: lanes write different elements — checked again at run time) or none
    does and the store is a reduction ``S[idx] = S[idx] op f`` with ``op`` in +, max,
    min and ``f`` not reading ``S`` (lanes are combined in the serial order).
    """
    loops = []
    cur: Any = s
    while isinstance(cur, S.For):
        loops.append(cur)
        cur = cur.body
    info = _band_body(cur)
    if info is None:
        return None
    realize, store = info
    deps = _index_deps(realize, store)
    reduction = _reduction_parts(store, realize)
    cls = None
    band: list[S.For] = []
    lanes = 1
    for lp in reversed(loops):
        lo, ext = E.as_const_int(lp.min), E.as_const_int(lp.extent)
        if lo is None or ext is None or ext < 1:
            break
        c = "E" if id(lp.loop_var) in deps else "R"
        if cls is None:
            if c == "R" and reduction is None:
                return None
            if c == "E" and not _elementwise_ok(store, realize):
                return None
            cls = c
        if c != cls or lanes * ext > BAND_MAX_LANES:
            break
        band.insert(0, lp)
        lanes *= ext
    if not band or lanes < BAND_MIN_LANES:
        return None
    return BandPlan(band, cls, realize, store, reduction, lanes)


def _has_vectors(n: Any) -> bool:
    found = False

    def fn(x):
        nonlocal found
        if isinstance(x, (E.Ramp, E.Broadcast)):
            found = True
        elif isinstance(x, E.PrimExpr) and not isinstance(x, E.StringImm):
            try:
                if lanes_of(x.dtype) > 1:
                    found = True
            except Exception:  # noqa: BLE001 - unusual dtypes: stay serial
                found = True
    post_order_visit(n, fn)
    return found


def _band_body(body: Any):
    """``(realize or None, store)`` when ``body`` can be a band body, else None."""
    realize = None
    store = body
    if isinstance(body, S.BlockRealize):
        blk = body.block
        if blk.alloc_buffers or not isinstance(blk.body, S.BufferStore):
            return None
        if blk.init is not None:
            if not isinstance(blk.init, S.BufferStore) or blk.init.buffer is not blk.body.buffer:
                return None
        realize, store = body, blk.body
        # bindings and predicate are evaluated for all lanes up front: they must not read
        # the buffer the lanes update
        if _loads_of(body.iter_values, blk.body.buffer) or _loads_of(body.predicate,
                                                                     blk.body.buffer):
            return None
    if not isinstance(store, S.BufferStore):
        return None
    buf = store.buffer
    if buf.strides or buf.elem_offset or len(store.indices) != len(buf.shape):
        return None
    if _has_vectors(body):
        return None
    return realize, store


def _index_deps(realize, store) -> set[int]:
    """Ids of the variables (loop vars, through the block bindings) the store index uses."""
    direct = set()
    for i in store.indices:
        direct.update(id(v) for v in collect_vars(i))
    if realize is None:
        return direct
    out = set(direct)
    for iv, val in zip(realize.block.iter_vars, realize.iter_values):
        if id(iv.var) in direct:
            out.update(id(v) for v in collect_vars(val))
    return out


def _loads_of(e: Any, buf: Buffer) -> list:
    out = []

    def fn(x):
        if isinstance(x, E.BufferLoad) and x.buffer is buf:
            out.append(x)
    post_order_visit(e, fn)
    return out


def _at_store_index(indices, store) -> bool:
    """Are ``indices`` the very index expressions of ``store``?"""
    return len(indices) == len(store.indices) and all(
        same_expr(a, b) for a, b in zip(indices, store.indices))


def _init_ok(store, realize) -> bool:
    if realize is None or realize.block.init is None:
        return True
    init = realize.block.init
    return _at_store_index(init.indices, store) and not _loads_of(init.value, store.buffer)


def _elementwise_ok(store, realize) -> bool:
    """Every read of the stored buffer is at the element this lane writes."""
    if not _init_ok(store, realize):
        return False
    for ld in _loads_of(store.value, store.buffer) + [
            ld for i in store.indices for ld in _loads_of(i, store.buffer)]:
        if not _at_store_index(ld.indices, store):
            return False
    return True


def _reduction_parts(store, realize):
    """``(op, f)`` when the store is ``S[idx] = S[idx] op f`` (or ``f op S[idx]``)."""
    v = store.value
    if not isinstance(v, (E.Add, E.Max, E.Min)) or not _init_ok(store, realize):
        return None
    for old, f in ((v.a, v.b), (v.b, v.a)):
        if (isinstance(old, E.BufferLoad) and old.buffer is store.buffer
                and _at_store_index(old.indices, store)
                and not _loads_of(f, store.buffer)
                and not any(_loads_of(i, store.buffer) for i in store.indices)):
            return type(v).__name__, f
    return None

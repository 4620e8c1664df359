"""The commutative reducers rfactor recognises in a reduction block (TVM's ``ReducerRegistry``).

A reduction block is read as a reducer over ``n`` buffers: its ``T.init()`` stores the
reducer's identity into each, and its update stores ``combine(old values, new terms)``.
One buffer (:func:`match_combiner`)::

    with T.init():
        B[vi] = T.float32(0)
    B[vi] = B[vi] + A[vi, vk]                 # sum; also max and min

Two buffers, TVM's form of a reducer over a tuple (``topi.argmax``, an index and a value):
the init stores one identity per buffer, the update binds every combined value with
``T.let`` first and then stores each bound value into its buffer (:func:`match_reduction`)::

    with T.init():
        idx_out[i] = -1
        val_out[i] = T.min_value("float32")
    v_idx: T.int32 = T.Select(val_out[i] >= val[i, k], idx_out[i], idx[i, k])
    v_val: T.float32 = T.Select(val_out[i] >= val[i, k], val_out[i], val[i, k])
    idx_out[i] = v_idx
    val_out[i] = v_val

The two-buffer reducers are TVM's: a pair of sums; argmax and argmin whose ties keep the
accumulated pair (``>=`` / ``<=``, :attr:`Reducer.order_sensitive`: which index a tie gives
depends on the order the elements are met in); and argmax and argmin that break ties by
the smaller index (``topi.argmax``'s ``v > acc or (v == acc and i < acc_i)``), which pick the
best pair of a total order and so do not depend on the order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from engine.ir import expr as E
from engine.ir.node import Node
from engine.ir.stmt import Block, BufferStore, LetStmt, SeqStmt
from engine.ir.structural import structural_equal


def limits(dtype: str):
    """The smallest and largest values of ``dtype`` (TVM's ``min_value``/``max_value``)."""
    import numpy as np
    if dtype.startswith("float"):
        fi = np.finfo(dtype)
        return float(fi.min), float(fi.max)
    ii = np.iinfo(dtype)
    return int(ii.min), int(ii.max)


def const_value(e: Any):
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return e.value
    if isinstance(e, E.Cast):
        return const_value(e.value)
    return None


@dataclass(frozen=True)
class Reducer:
    """A commutative reducer over ``n`` buffers: ``combine(xs, ys)`` the combined values of
    the accumulated ``xs`` and the new ``ys``; ``identities(dtypes)`` the accepted identity
    values of each buffer (a tuple of alternatives per buffer); ``order_sensitive``: a tie
    keeps the accumulated pair, so the result depends on the order of the reduction."""

    name: str
    n: int
    combine: Callable[[list, list], list]
    identities: Callable[[list], list]
    order_sensitive: bool = False


def _lowest(dtype: str) -> tuple:
    lo, _ = limits(dtype)
    return (lo, float("-inf")) if dtype.startswith("float") else (lo,)


def _highest(dtype: str) -> tuple:
    _, hi = limits(dtype)
    return (hi, float("inf")) if dtype.startswith("float") else (hi,)


SINGLE = {
    "sum": Reducer("sum", 1, lambda x, y: [E.Add(x[0], y[0])], lambda d: [(0,)]),
    "max": Reducer("max", 1, lambda x, y: [E.Max(x[0], y[0])], lambda d: [_lowest(d[0])]),
    "min": Reducer("min", 1, lambda x, y: [E.Min(x[0], y[0])], lambda d: [_highest(d[0])]),
}


def _arg_first(cmp) -> Callable:
    """argmax/argmin whose ties keep the accumulated pair (``cmp`` is ``GE`` or ``LE``)."""
    def combine(x, y):
        c = cmp(x[1], y[1])
        return [E.Select(c, x[0], y[0]), E.Select(cmp(x[1], y[1]), x[1], y[1])]
    return combine


def _arg_least_index(cmp) -> Callable:
    """argmax/argmin whose ties take the smaller index (``cmp`` is ``GT`` or ``LT``)."""
    def combine(x, y):
        better = E.Or(cmp(x[1], y[1]), E.And(E.EQ(x[1], y[1]), E.LT(x[0], y[0])))
        return [E.Select(better, x[0], y[0]), E.Select(cmp(x[1], y[1]), x[1], y[1])]
    return combine


PAIRS = (
    Reducer("sum of pairs", 2, lambda x, y: [E.Add(x[0], y[0]), E.Add(x[1], y[1])],
            lambda d: [(0,), (0,)]),
    Reducer("argmax (a tie keeps the index met first)", 2, _arg_first(E.GE),
            lambda d: [(-1,), _lowest(d[1])], order_sensitive=True),
    Reducer("argmax (a tie takes the smaller index)", 2, _arg_least_index(E.GT),
            lambda d: [(-1,), _lowest(d[1])]),
    Reducer("argmin (a tie keeps the index met first)", 2, _arg_first(E.LE),
            lambda d: [(-1,), _highest(d[1])], order_sensitive=True),
    Reducer("argmin (a tie takes the smaller index)", 2, _arg_least_index(E.LT),
            lambda d: [(-1,), _highest(d[1])]),
)


@dataclass
class ReductionMatch:
    """A reduction block read as ``reducer``: ``stores[i]`` stores the combined value of
    buffer ``i`` (``lhs[i]`` its old value, a load at the store's indices; ``rhs[i]`` the new
    term), ``inits[i]`` the value its ``T.init()`` stores; ordered as TVM orders them (the
    order of the update's ``T.let`` bindings)."""

    reducer: Reducer
    stores: list
    lhs: list
    rhs: list
    inits: list


# ---------------------------------------------------------------------------------------
# one buffer
# ---------------------------------------------------------------------------------------
def update_store(block: Block) -> BufferStore | None:
    """The store of a reduction block's update: its body, or — TVM's let form —
    ``v = <value>`` then ``buf[idx] = v`` (read as ``buf[idx] = <value>``); else None."""
    body = block.body
    if isinstance(body, LetStmt) and isinstance(body.body, BufferStore) and \
            body.body.value is body.var:
        return BufferStore(body.body.buffer, body.value, body.body.indices)
    return body if isinstance(body, BufferStore) else None


def uses_load(e: Any, buf) -> bool:
    from engine.ir.functor import collect
    return any(x.buffer is buf for x in collect(e, E.BufferLoad))


def match_combiner(block: Block):
    """Recognise ``init`` / update of a one-buffer reduction block as a commutative reducer.

    Returns ``(kind, store, lhs, rhs)`` with kind "sum", "max" or "min", where the update is
    ``store.buffer[idx] = combine(lhs, rhs)`` and ``lhs`` loads ``store.buffer[idx]``; or a
    string explaining why not."""
    body = update_store(block)
    if body is None:
        return "its body is not a single store (or one value bound by T.let, then stored)"
    init = block.init
    if not isinstance(init, BufferStore) or init.buffer is not body.buffer:
        return "its T.init() does not initialise the buffer it updates"
    v = body.value
    buf, idx = body.buffer, body.indices

    def is_self(x):
        return isinstance(x, E.BufferLoad) and x.buffer is buf and \
            structural_equal(tuple(x.indices), tuple(idx))

    kind = None
    if isinstance(v, E.Add):
        kind = "sum"
    elif isinstance(v, E.Max):
        kind = "max"
    elif isinstance(v, E.Min):
        kind = "min"
    if kind is None:
        return "its update is not a sum, max or min of the buffer's old value"
    if is_self(v.a) and not uses_load(v.b, buf):
        lhs, rhs = v.a, v.b
    elif is_self(v.b) and not uses_load(v.a, buf):
        lhs, rhs = v.b, v.a
    else:
        return "its update does not combine the buffer's old value with a new term"
    if not structural_equal(tuple(init.indices), tuple(idx)):
        return "its T.init() writes other elements than the update"
    val = const_value(init.value)
    if val is None or val not in SINGLE[kind].identities([buf.dtype])[0]:
        want = {"sum": "0", "max": "the smallest value of the type (or -inf)",
                "min": "the largest value of the type (or inf)"}[kind]
        return (f"its T.init() value is not the identity of a {kind} ({want}), so partial "
                "results could not be combined")
    return kind, body, lhs, rhs


# ---------------------------------------------------------------------------------------
# several buffers
# ---------------------------------------------------------------------------------------
def _flat(s: Any) -> list:
    """The statements of an update in order, a ``T.let`` binding as one item (TVM's
    ``Bind`` in a sequence) followed by the statements of its body."""
    out: list = []

    def walk(x):
        if isinstance(x, LetStmt):
            out.append(x)
            walk(x.body)
        elif isinstance(x, SeqStmt):
            for c in x.seq:
                walk(c)
        else:
            out.append(x)

    walk(s)
    return out


def _fill(pat: Any, e: Any, holes: dict, bound: dict) -> bool:
    """Match expression ``e`` against the pattern ``pat`` whose variables in ``holes`` are
    placeholders (TVM's PatternMatcher): a placeholder takes the first expression it meets
    and must meet structurally equal ones afterwards."""
    if isinstance(pat, E.Var) and id(pat) in holes:
        prev = bound.get(id(pat))
        if prev is None:
            bound[id(pat)] = e
            return True
        return structural_equal(prev, e)
    if type(pat) is not type(e):
        return False
    for (_, a), (_, b) in zip(pat.fields(), e.fields()):
        if isinstance(a, Node):
            if not isinstance(b, Node) or not _fill(a, b, holes, bound):
                return False
        elif isinstance(a, tuple):
            if not isinstance(b, tuple) or len(a) != len(b) or \
                    not all(_fill(p, q, holes, bound) if isinstance(p, Node) else p == q
                            for p, q in zip(a, b)):
                return False
        elif a != b:
            return False
    return True


def _read_updates(block: Block, n: int):
    """The ``n`` update stores of a multi-buffer block, in the order of its ``T.let``
    bindings, each storing the bound value; or a string saying which of TVM's conditions
    the update breaks."""
    items = _flat(block.body)
    lets = items[:n]
    if len(lets) < n or not all(isinstance(x, LetStmt) for x in lets) or \
            any(isinstance(x, LetStmt) for x in items[n:]):
        return (f"its update does not bind exactly one value per buffer its T.init() "
                f"initialises ({n}) with T.let before storing them")
    pos = {id(x.var): i for i, x in enumerate(lets)}
    rest = items[n:]
    if len(rest) != n:
        return (f"its update has {len(rest)} statement(s) after the T.let bindings, not one "
                f"store per initialised buffer ({n})")
    stores: list = [None] * n
    for s in rest:
        if not isinstance(s, BufferStore):
            return "a statement after its T.let bindings is not a store"
        i = pos.get(id(s.value)) if isinstance(s.value, E.Var) else None
        if i is None:
            return (f"its update stores {s.value} into {s.buffer.name}, not one of the values "
                    "bound by its T.let bindings")
        if stores[i] is not None:
            return f"its update stores the value {lets[i].var.name} twice"
        if any(t is not None and t.buffer is s.buffer for t in stores):
            return f"its update stores into {s.buffer.name} twice"
        stores[i] = BufferStore(s.buffer, lets[i].value, s.indices)
    return stores


def _same(a, b) -> bool:
    ca, cb = E.as_const_int(a), E.as_const_int(b)
    if ca is not None and cb is not None:
        return ca == cb
    return structural_equal(a, b)


def match_reduction(block: Block) -> ReductionMatch | str:
    """Read a reduction block as one of the reducers above (TVM's conditions on the init and
    the update, then the reducer patterns); a string saying why not otherwise."""
    init = block.init
    if isinstance(init, BufferStore):
        m = match_combiner(block)
        if isinstance(m, str):
            return m
        kind, store, lhs, rhs = m
        return ReductionMatch(SINGLE[kind], [store], [lhs], [rhs], [init.value])
    if not isinstance(init, SeqStmt) or not all(isinstance(s, BufferStore) for s in init.seq):
        return ("its T.init() does not initialise the buffer it updates with a store (nor "
                "the buffers with a sequence of stores)")
    inits = list(init.seq)
    n = len(inits)
    for j, s in enumerate(inits):
        if any(t.buffer is s.buffer for t in inits[:j]):
            return f"its T.init() initialises {s.buffer.name} twice"
    stores = _read_updates(block, n)
    if isinstance(stores, str):
        return stores
    by_buf = {}
    for s in inits:
        if not any(t.buffer is s.buffer for t in stores):
            return (f"its T.init() initialises {s.buffer.name}, which its update does not "
                    "store")
        by_buf[id(s.buffer)] = s
    first = stores[0]
    for s in stores:
        if len(s.buffer.shape) != len(first.buffer.shape) or \
                not all(_same(a, b) for a, b in zip(s.buffer.shape, first.buffer.shape)):
            return (f"it reduces into buffers of different shapes ({first.buffer.name} and "
                    f"{s.buffer.name}), so their partial results cannot share one layout")
        for t in (s, by_buf[id(s.buffer)]):
            if len(t.indices) != len(first.indices) or \
                    not all(_same(a, b) for a, b in zip(t.indices, first.indices)):
                return (f"it stores {t.buffer.name} at other indices than "
                        f"{first.buffer.name}, so it is not one reduction of a tuple")
    init_values = [by_buf[id(s.buffer)].value for s in stores]
    dtypes = [s.buffer.dtype for s in stores]
    for red in PAIRS if n == 2 else ():
        ident = red.identities(dtypes)
        if not all(const_value(v) is not None and const_value(v) in ok
                   for v, ok in zip(init_values, ident)):
            continue
        xs = [E.Var(f"x{i}", d) for i, d in enumerate(dtypes)]
        ys = [E.Var(f"y{i}", d) for i, d in enumerate(dtypes)]
        holes = {id(v): v for v in xs + ys}
        bound: dict = {}
        pats = red.combine(xs, ys)
        if not all(_fill(p, s.value, holes, bound) for p, s in zip(pats, stores)):
            continue
        lhs = [bound.get(id(x)) for x in xs]
        rhs = [bound.get(id(y)) for y in ys]
        if any(v is None for v in lhs + rhs):
            continue
        if not all(isinstance(x, E.BufferLoad) and x.buffer is s.buffer and
                   structural_equal(tuple(x.indices), tuple(s.indices))
                   for x, s in zip(lhs, stores)):
            continue
        if any(uses_load(y, s.buffer) for y in rhs for s in stores):
            continue
        return ReductionMatch(red, stores, lhs, rhs, init_values)
    names = "; ".join(r.name for r in PAIRS)
    return (f"its init and update over {n} buffers are no reducer rfactor knows (over two "
            f"buffers: {names}, each from its identity)")

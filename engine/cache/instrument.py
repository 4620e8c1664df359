"""Instrumentation: turn a program into one that reports every memory access to the simulator.

Two passes around the backend's :func:`engine.lower.lower`:

1. :func:`mark_blocks` (before lowering) puts a *marker* statement at the start and end of
   every block body and init (``Evaluate(IntImm("int64", MAGIC + ...))``, a no-op the
   lowering passes keep in place, also inside vectorized and unrolled loops), so that after
   lowering — when blocks are gone — each access can still be attributed to its block.
2. :func:`instrument` (after lowering) walks the lowered function in execution order and
   inserts, before every ``BufferStore`` (after the loads of its value and indices) and before
   every statement that loads (if-conditions, loop bounds, let values), one call per access::

       Evaluate(Call("int32", "call_extern", (StringImm("__cachesim_access"),
                Call("int64", "address_of", (BufferLoad(buf, (index,)),)),
                IntImm("int64", nbytes), IntImm("int32", buffer_id), IntImm("int32", slot))))

   Loads are listed in the order the code generator evaluates them (operands left to right,
   innermost first); a load under ``if_then_else`` is reported only on the branch taken. A
   vector access (``Ramp`` index) is one call covering its bytes when its lanes are at most a
   line apart (the simulator then counts one access per cache line touched), else one call per
   lane; a ``Broadcast`` index is one scalar access. Markers are removed. Parallel loops become
   serial (the simulator models one core). Selected loops are *sampled*
   (:class:`SamplePlan`): only a few windows of their iterations run, each window preceded by
   warm-up iterations whose accesses are simulated but counted in a spare slot.

Addresses: a parameter's accesses report their real addresses (:func:`engine.cache.simulate`
places the arrays it passes at fixed offsets, see :data:`LAYOUT_ALIGN`); a buffer the
function allocates reports *placed* addresses instead — its first byte at
:func:`placed_base` of its buffer id, beyond any real user-space address — so its simulated
misses do not depend on where it happens to live (a stack frame's layout follows the pass
pipeline the instrumented build was compiled with, and the caller's stack depth; a heap
block follows the allocator).

Slots: accesses are counted per ``(buffer, slot)``; ``slot = region * (nblocks + 1) + block``
where region 0 is the unsampled program, region ``2r - 1`` the first window of the ``r``-th
sampled loop (its first iterations, which stand only for themselves: they include the cold
start) and region ``2r`` its other windows (which stand for all remaining iterations: their
counts are scaled by ``(n - m0) / (k - m0)``, see :attr:`SampledLoop.steady_scale`); block
``nblocks`` means "outside any block"; the last slot collects warm-up accesses.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import bytes_of, element_of, lanes_of
from engine.ir.function import PrimFunc
from engine.ir.functor import Mutator, children, substitute

from .simcore import ACCESS_SYMBOL, BASE_SYMBOL

#: Simulated addresses do not depend on what the process allocated before: the k-th array
#: (the parameters, then the buffers the kernel allocates, by buffer id) starts
#: ``k * LAYOUT_STAGGER`` bytes past a ``LAYOUT_ALIGN`` boundary. 2 MiB covers the way size
#: (size / ways) of every level up to a 32 MiB 16-way L3, so the set each line maps to is
#: the same in every run; the stagger (a page and a line) keeps the arrays' first lines out
#: of one another's sets.
LAYOUT_ALIGN = 2 * 1024 * 1024
LAYOUT_STAGGER = 4096 + 64

#: Where the buffers a kernel allocates are placed in simulated memory: buffer id ``k`` in
#: the ``k``-th span of :data:`PLACED_SPAN` bytes from :data:`PLACED_ORIGIN` (2**48: above
#: every x86-64 user-space address of a 4-level page table, so a placed line never shares a
#: tag with a parameter's real one).
PLACED_ORIGIN = 1 << 48
PLACED_SPAN = 1 << 36


def placed_base(buffer_id: int) -> int:
    """The simulated address of the first byte of allocated buffer ``buffer_id``: a
    :data:`LAYOUT_ALIGN` boundary plus the buffer's stagger (as a parameter's array)."""
    return (PLACED_ORIGIN + buffer_id * PLACED_SPAN
            + buffer_id * LAYOUT_STAGGER % LAYOUT_ALIGN)


MAGIC = 0x5CA0_0000_0000_0000
MAGIC_MASK = 0x7FFF_0000_0000_0000


# ---------------------------------------------------------------------------------------
# 1. block markers (before lowering)
def _marker(block_id: int, end: bool) -> S.Evaluate:
    return S.Evaluate(E.IntImm("int64", MAGIC + 2 * block_id + (1 if end else 0)))


def marker_value(s: Any) -> tuple[int, bool] | None:
    """``(block_id, is_end)`` if ``s`` is a block marker statement, else None."""
    if isinstance(s, S.Evaluate) and isinstance(s.value, E.IntImm) and s.value.dtype == "int64":
        v = s.value.value
        if v >= MAGIC and (v & MAGIC_MASK) == MAGIC:
            off = v - MAGIC
            return off // 2, bool(off % 2)
    return None


class _Marker(Mutator):
    def __init__(self) -> None:
        self.names: list[str] = []

    def visit_Block(self, b: S.Block):
        b = self.generic_visit(b)
        bid = len(self.names)
        self.names.append(b.name_hint)
        changes = {"body": S.seq(_marker(bid, False), b.body, _marker(bid, True))}
        if b.init is not None:
            changes["init"] = S.seq(_marker(bid, False), b.init, _marker(bid, True))
        return b.replace(**changes)


def mark_blocks(func: PrimFunc) -> tuple[PrimFunc, list[str]]:
    """``func`` with block markers, and the block names by block id (see module docstring)."""
    m = _Marker()
    return func.with_body(m.visit(func.body)), m.names


# ---------------------------------------------------------------------------------------
# static access counts (used to plan sampling)
def _const(e: Any) -> int | None:
    return E.as_const_int(e)


class _Counter:
    """Approximate dynamic access counts (cache-line accesses) of lowered statements."""

    def __init__(self, line: int):
        self.line = line
        self.memo: dict[int, float] = {}

    def access_weight(self, buf: Buffer, idx: E.PrimExpr, lanes: int) -> float:
        elem = bytes_of(element_of(buf.dtype))
        if lanes == 1 or isinstance(idx, E.Broadcast):
            return 1.0
        if isinstance(idx, E.Ramp) and _const(idx.stride) is not None:
            st = abs(_const(idx.stride)) * elem
            if st <= self.line:
                return max(1.0, ((lanes - 1) * st + elem) / self.line)
        return float(lanes)

    def expr(self, e: Any) -> float:
        total = 0.0

        def walk(x: Any) -> None:
            nonlocal total
            if isinstance(x, E.BufferLoad):
                for i in x.indices:
                    walk(i)
                total += self.access_weight(x.buffer, x.indices[0] if x.indices else None,
                                            lanes_of(x.dtype))
                return
            if isinstance(x, E.PrimExpr):
                for v in children(x):
                    if isinstance(v, E.PrimExpr):
                        walk(v)
        walk(e)
        return total

    def stmt(self, s: Any) -> float:
        if s is None:
            return 0.0
        key = id(s)
        got = self.memo.get(key)
        if got is not None:
            return got
        if isinstance(s, S.SeqStmt):
            c = sum(self.stmt(x) for x in s.seq)
        elif isinstance(s, S.For):
            c = self.trip(s) * self.stmt(s.body) + self.expr(s.min) + self.expr(s.extent)
        elif isinstance(s, S.BufferStore):
            lanes = max([lanes_of(i.dtype) for i in s.indices] + [1])
            c = (self.expr(s.value) + sum(self.expr(i) for i in s.indices)
                 + self.access_weight(s.buffer, s.indices[0] if s.indices else None, lanes))
        elif isinstance(s, S.IfThenElse):
            c = self.expr(s.condition) + max(self.stmt(s.then_case), self.stmt(s.else_case))
        elif isinstance(s, S.LetStmt):
            c = self.expr(s.value) + self.stmt(s.body)
        elif isinstance(s, S.Allocate):
            c = self.stmt(s.body)
        elif isinstance(s, S.Evaluate):
            c = self.expr(s.value)
        else:
            c = 0.0
        self.memo[key] = c
        return c

    @staticmethod
    def trip(f: S.For) -> int:
        ext = _const(f.extent)
        return max(ext, 0) if ext is not None else 1


# ---------------------------------------------------------------------------------------
# sampling plan
@dataclasses.dataclass
class SampledLoop:
    """One sampled loop: ``k`` of its ``n`` iterations are counted, in ``windows``."""

    loop: S.For
    name: str
    n: int
    k: int
    windows: list  # [(warmup_start, start, length)]
    region: int
    blocks: list = dataclasses.field(default_factory=list)  # block names inside (filled later)

    @property
    def first_len(self) -> int:
        """Iterations in the first window (counted once: they stand for themselves)."""
        return self.windows[0][2] if len(self.windows) > 1 else 0

    @property
    def steady_scale(self) -> float:
        """Scale of the other windows' counts: they stand for all remaining iterations."""
        m0 = self.first_len
        return (self.n - m0) / (self.k - m0)

    @property
    def region0(self) -> int:
        return 2 * self.region - 1

    @property
    def region_steady(self) -> int:
        return 2 * self.region

    def describe(self) -> str:
        return f"estimated from {self.k} of {self.n} iterations of loop {self.name}"


@dataclasses.dataclass
class SamplePlan:
    loops: list
    estimated_total: float
    estimated_simulated: float


def plan_sampling(func: PrimFunc, budget: int, line: int, windows: int = 4) -> SamplePlan:
    """Choose loops to sample so that at most about ``budget`` accesses are simulated.

    Repeatedly takes the heaviest remaining loop nest and, walking down its heaviest path,
    the outermost loop whose iterations are small enough to sample at least ``2 * windows``
    of them; its iteration count is cut to fit the remaining budget.
    """
    cnt = _Counter(line)
    total = cnt.stmt(func.body)
    plan = SamplePlan([], total, total)
    if total <= budget:
        return plan
    # candidate loops: (For, instances, cost_per_iteration)
    cands: list[tuple[S.For, float, float, tuple]] = []

    def walk(s: Any, inst: float, path: tuple) -> None:
        if s is None:
            return
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                walk(x, inst, path)
        elif isinstance(s, S.For):
            body = cnt.stmt(s.body)
            cands.append((s, inst, body, path))
            walk(s.body, inst * cnt.trip(s), path + (id(s),))
        elif isinstance(s, S.IfThenElse):
            walk(s.then_case, inst, path)
            walk(s.else_case, inst, path)
        elif isinstance(s, (S.LetStmt, S.Allocate)):
            walk(s.body, inst, path)

    walk(func.body, 1.0, ())
    chosen: list[tuple] = []
    simulated = total
    min_iters = 2 * windows
    for _ in range(8):
        if simulated <= budget:
            break
        best = None
        for strict in (True, False):
            for f, inst, body, path in cands:
                n = cnt.trip(f)
                if n < min_iters + 2 or body <= 0:
                    continue
                if any(id(c[0]) in path or id(f) in c[5] or c[0] is f for c in chosen):
                    continue  # nested in / around an already sampled loop
                full = inst * n * body
                if strict and inst * min_iters * 1.5 * body > budget:
                    continue  # even a small sample of this loop is too big: look deeper
                # prefer the loop that removes the most work; among equals, the outermost
                key = (full, -len(path))
                if best is None or key > best[0]:
                    best = (key, f, inst, body, path)
            if best is not None:
                break  # no loop's smallest sample fits: take the smallest sample anyway
        if best is None:
            break
        _, f, inst, body, path = best
        n = cnt.trip(f)
        full = inst * n * body
        rest = simulated - full
        avail = max(budget - rest, inst * body * min_iters * 1.5)
        # counted iterations k plus about k/4 warm-up iterations must fit in avail
        k = int(avail / (inst * body * 1.25))
        k = max(min_iters, min(k, n))
        if k >= n:
            continue
        chosen.append((f, k, n, inst, body, path))
        simulated = rest + inst * body * k * 1.25
    for r, (f, k, n, inst, body, path) in enumerate(chosen, start=1):
        plan.loops.append(SampledLoop(f, f.loop_var.name, n, k, _windows(n, k, windows), r))
    plan.estimated_simulated = simulated
    return plan


def _windows(n: int, k: int, w: int) -> list:
    """``w`` windows of together ``k`` iterations spread over ``0..n-1``, with warm-ups."""
    w = max(1, min(w, k))
    sizes = [k // w + (1 if i < k % w else 0) for i in range(w)]
    out = []
    prev_end = 0
    for i, m in enumerate(sizes):
        if w == 1:
            start = 0
        else:
            start = round(i * (n - m) / (w - 1))
        start = max(start, prev_end)
        warm = 0 if i == 0 else min(max(1, m // 4), start - prev_end)
        out.append((start - warm, start, m))
        prev_end = start + m
    return out


# ---------------------------------------------------------------------------------------
# 2. instrumentation (after lowering)
def _addr(buf: Buffer, index: E.PrimExpr) -> E.PrimExpr:
    return E.Call("int64", "address_of", (E.BufferLoad(buf, (index,)),))


def _call(sym: str, *args) -> S.Evaluate:
    return S.Evaluate(E.Call("int32", "call_extern", (E.StringImm(sym),) + tuple(args)))


def scalarize_lane(e: E.PrimExpr, lane: int) -> E.PrimExpr:
    """The scalar value of lane ``lane`` of a vector expression (used for gathers)."""
    if lanes_of(e.dtype) == 1:
        return e
    if isinstance(e, E.Ramp):
        return e.base + e.stride * lane if lane else e.base
    if isinstance(e, E.Broadcast):
        return e.value
    if isinstance(e, E.BufferLoad):
        return E.BufferLoad(e.buffer, tuple(scalarize_lane(i, lane) for i in e.indices))
    if isinstance(e, E.Cast):
        return E.Cast(element_of(e.dtype), scalarize_lane(e.value, lane))
    if isinstance(e, E.BinaryOp):
        return type(e)(scalarize_lane(e.a, lane), scalarize_lane(e.b, lane))
    if isinstance(e, E.Select):
        return E.Select(scalarize_lane(e.condition, lane), scalarize_lane(e.true_value, lane),
                        scalarize_lane(e.false_value, lane))
    if isinstance(e, E.Not):
        return E.Not(scalarize_lane(e.a, lane))
    if isinstance(e, E.Call):
        return E.Call(element_of(e.dtype), e.op, tuple(scalarize_lane(a, lane) for a in e.args))
    if isinstance(e, E.Let):
        return E.Let(e.var, scalarize_lane(e.value, lane), scalarize_lane(e.body, lane))
    raise TypeError(f"cannot take lane {lane} of {type(e).__name__}")


class InstrumentError(Exception):
    pass


class _Instrumenter:
    def __init__(self, func: PrimFunc, nblocks: int, plan: SamplePlan | None, line: int,
                 access_symbol: str = ACCESS_SYMBOL, base_symbol: str = BASE_SYMBOL):
        self.access_symbol = access_symbol
        self.base_symbol = base_symbol
        self.func = func
        self.nblocks = nblocks
        self.line = line
        self.stride = nblocks + 1  # slots per region
        self.nregions = 1 + 2 * (len(plan.loops) if plan else 0)
        self.warm_slot = self.nregions * self.stride
        self.nslots = self.warm_slot + 1
        self.sampled = {id(sl.loop): sl for sl in (plan.loops if plan else [])}
        self.buffers: list[Buffer] = []
        self.buf_ids: dict[int, int] = {}
        self.block_stack: list[int] = []
        self.region = 0
        self.warm = False
        self.slot_blocks: dict[int, set] = {}
        self.accesses_emitted = 0
        for p in func.params:
            self.buf_id(p)
        self.nparams = len(self.buffers)

    # ids -----------------------------------------------------------------------------
    def buf_id(self, buf: Buffer) -> int:
        bid = self.buf_ids.get(id(buf))
        if bid is None:
            bid = len(self.buffers)
            self.buffers.append(buf)
            self.buf_ids[id(buf)] = bid
        return bid

    def slot(self) -> int:
        if self.warm:
            return self.warm_slot
        blk = self.block_stack[-1] if self.block_stack else self.nblocks
        if self.region:
            self.slot_blocks.setdefault(self.region, set()).add(blk)
        return self.region * self.stride + blk

    # accesses --------------------------------------------------------------------------
    def address(self, buf: Buffer, index: E.PrimExpr) -> E.PrimExpr:
        """The address an access to ``buf[index]`` reports: a parameter's real one, an
        allocated buffer's placed one (see the module docstring)."""
        bid = self.buf_id(buf)
        if bid < self.nparams:
            return _addr(buf, index)
        elem = bytes_of(element_of(buf.dtype))
        offset = E.Cast("int64", index) if index.dtype != "int64" else index
        return E.IntImm("int64", placed_base(bid)) + offset * E.IntImm("int64", elem)

    def access_stmts(self, buf: Buffer, index: E.PrimExpr) -> list[S.Stmt]:
        elem = bytes_of(element_of(buf.dtype))
        lanes = lanes_of(index.dtype)
        bid = E.IntImm("int32", self.buf_id(buf))
        slot = E.IntImm("int32", self.slot())
        self.accesses_emitted += 1
        if lanes == 1:
            return [_call(self.access_symbol, self.address(buf, index), E.IntImm("int64", elem),
                          bid, slot)]
        if isinstance(index, E.Broadcast):
            return [_call(self.access_symbol, self.address(buf, index.value),
                          E.IntImm("int64", elem), bid, slot)]
        if isinstance(index, E.Ramp):
            st = _const(index.stride)
            if st is not None and abs(st) * elem <= self.line:
                lo = index.base if st >= 0 else index.base + index.stride * (lanes - 1)
                nbytes = ((lanes - 1) * abs(st) + 1) * elem
                return [_call(self.access_symbol, self.address(buf, lo),
                              E.IntImm("int64", nbytes), bid, slot)]
        return [_call(self.access_symbol, self.address(buf, scalarize_lane(index, i)),
                      E.IntImm("int64", elem), bid, slot) for i in range(lanes)]

    def loads(self, e: Any, lets: tuple = ()) -> list[S.Stmt]:
        """Access statements for every load evaluated by ``e``, in evaluation order."""
        out: list[S.Stmt] = []
        if e is None or not isinstance(e, E.PrimExpr):
            return out
        if isinstance(e, E.BufferLoad):
            for i in e.indices:
                out += self.loads(i, lets)
            if len(e.indices) != 1:
                raise InstrumentError(
                    f"buffer {e.buffer.name} is not flattened (indexed with {len(e.indices)} "
                    "indices); instrument() expects a lowered function")
            out += self._wrap_lets(self.access_stmts(e.buffer, e.indices[0]), lets)
            return out
        if isinstance(e, E.Call) and e.op == "if_then_else":
            c, a, b = e.args
            out += self.loads(c, lets)
            ta, tb = self.loads(a, lets), self.loads(b, lets)
            if ta or tb:
                stmt = S.IfThenElse(c, S.seq(*ta) if ta else S.Evaluate(E.IntImm("int32", 0)),
                                    S.seq(*tb) if tb else None)
                out += self._wrap_lets([stmt], lets) if lanes_of(c.dtype) == 1 else ta + tb
            return out
        if isinstance(e, E.Call) and e.op == "address_of":
            return out  # takes an address, does not load
        if isinstance(e, E.Let):
            out += self.loads(e.value, lets)
            out += self.loads(e.body, lets + ((e.var, e.value),))
            return out
        for v in children(e):
            if isinstance(v, E.PrimExpr):
                out += self.loads(v, lets)
        return out

    @staticmethod
    def _wrap_lets(stmts: list, lets: tuple) -> list:
        if not lets or not stmts:
            return stmts
        body = S.seq(*stmts)
        for var, value in reversed(lets):
            body = S.LetStmt(var, value, body)
        return [body]

    # statements ------------------------------------------------------------------------
    def stmt(self, s: Any) -> Any:
        if s is None:
            return None
        depth = len(self.block_stack)
        try:
            return self._stmt(s)
        finally:
            del self.block_stack[depth:]

    def _stmt(self, s: Any) -> Any:
        if isinstance(s, S.SeqStmt):
            out = []
            for x in s.seq:
                mv = marker_value(x)
                if mv is not None:
                    bid, end = mv
                    if not end:
                        self.block_stack.append(bid)
                    elif self.block_stack and self.block_stack[-1] == bid:
                        self.block_stack.pop()
                    continue
                out.append(self.stmt(x))
            return S.seq(*out) or S.Evaluate(E.IntImm("int32", 0))
        if marker_value(s) is not None:
            return S.Evaluate(E.IntImm("int32", 0))
        if isinstance(s, S.BufferStore):
            pre = []
            for i in s.indices:
                pre += self.loads(i)
            pre += self.loads(s.value)
            if len(s.indices) != 1:
                raise InstrumentError(
                    f"buffer {s.buffer.name} is not flattened; instrument() expects a lowered "
                    "function")
            pre += self.access_stmts(s.buffer, s.indices[0])
            return S.seq(*pre, s)
        if isinstance(s, S.For):
            pre = self.loads(s.min) + self.loads(s.extent)
            sl = self.sampled.get(id(s))
            if sl is not None and not self.warm and self.region == 0:
                return S.seq(*pre, self.sampled_loop(s, sl))
            body = self.stmt(s.body)
            kind = S.ForKind.SERIAL if s.kind in (S.ForKind.PARALLEL, S.ForKind.THREAD_BINDING) \
                else s.kind
            return S.seq(*pre, S.For(s.loop_var, s.min, s.extent, kind, body, s.annotations))
        if isinstance(s, S.IfThenElse):
            pre = self.loads(s.condition)
            return S.seq(*pre, S.IfThenElse(s.condition, self.stmt(s.then_case),
                                            self.stmt(s.else_case)))
        if isinstance(s, S.LetStmt):
            pre = self.loads(s.value)
            return S.seq(*pre, S.LetStmt(s.var, s.value, self.stmt(s.body)))
        if isinstance(s, S.Allocate):
            body = self.stmt(s.body)
            return S.Allocate(s.buffer, S.seq(self.base_record(s.buffer), body))
        if isinstance(s, S.Evaluate):
            return S.seq(*self.loads(s.value), s)
        raise InstrumentError(f"cannot instrument statement {type(s).__name__}; "
                              "instrument() expects a lowered function")

    def base_record(self, buf: Buffer) -> S.Stmt:
        return _call(self.base_symbol, E.IntImm("int32", self.buf_id(buf)),
                     self.address(buf, E.IntImm("int32", 0)))

    def sampled_loop(self, s: S.For, sl: SampledLoop) -> S.Stmt:
        """Windows of ``s``: warm-up iterations (uncounted) then counted iterations."""
        saved_stack = list(self.block_stack)
        parts = []
        kind = S.ForKind.SERIAL
        for w, (warm_start, start, length) in enumerate(sl.windows):
            counted = sl.region0 if w == 0 and len(sl.windows) > 1 else sl.region_steady
            for lo, ext, warm, region in ((warm_start, start - warm_start, True, 0),
                                          (start, length, False, counted)):
                if ext <= 0:
                    continue
                self.block_stack[:] = saved_stack
                self.warm, self.region = warm, region
                body = self.stmt(s.body)
                v = E.Var(s.loop_var.name, s.loop_var.dtype)
                body = substitute(body, {s.loop_var: v})
                mn = s.min + E.IntImm(s.loop_var.dtype, lo) if lo else s.min
                parts.append(S.For(v, mn, E.IntImm(s.extent.dtype, ext), kind, body,
                                   s.annotations))
        self.warm, self.region = False, 0
        self.block_stack[:] = saved_stack
        return S.seq(*parts)

    def run(self) -> PrimFunc:
        body = self.stmt(self.func.body)
        bases = [self.base_record(p) for p in self.func.params]
        return self.func.with_body(S.seq(*bases, body))


@dataclasses.dataclass
class Instrumented:
    """Result of :func:`instrument`: the new function and how to read the counters."""

    func: PrimFunc
    buffers: list  # Buffer objects by buffer id
    nblocks: int
    nslots: int
    nregions: int
    warm_slot: int
    plan: SamplePlan | None
    static_accesses: int


def instrument(lowered: PrimFunc, nblocks: int = 0, plan: SamplePlan | None = None,
               line: int = 64, access_symbol: str = ACCESS_SYMBOL,
               base_symbol: str = BASE_SYMBOL) -> Instrumented:
    """Insert simulator calls into a lowered function (see the module docstring)."""
    ins = _Instrumenter(lowered, nblocks, plan, line, access_symbol, base_symbol)
    func = ins.run()
    if plan:
        for sl in plan.loops:
            sl.blocks = sorted(ins.slot_blocks.get(sl.region0, set())
                               | ins.slot_blocks.get(sl.region_steady, set()))
    return Instrumented(func, ins.buffers, nblocks, ins.nslots, ins.nregions, ins.warm_slot,
                        plan, ins.accesses_emitted)

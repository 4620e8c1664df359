"""Run a lowered GPU function on the CPU with the GPU's semantics, compiled.

::

    from engine.gpu.emulator import emulate, Emulator, RaceError

    emulate(gpu_function, a, b, c)                  # numpy arrays, modified in place
    emu = Emulator(gpu_function)                    # compile once ...
    emu(a, b, c); emu(a2, b2, c2)                   # ... call many times
    emu.kernel_seconds                              # seconds of each kernel, last call
    emulate(gpu_function, a, b, c, check_races=True)   # RaceError on a data race

Each :class:`~engine.gpu.kernel.Kernel` becomes a CPU PrimFunc compiled by the existing
LLVM back end (``engine.build(..., lowered=True)``), as MCUDA does (Stratton, Stone and Hwu,
*MCUDA: an efficient implementation of CUDA kernels for multi-core CPUs*, 2008):

* a loop over the grid's blocks (their linear number; ``blockIdx.x/y/z`` are read back
  from it), a CPU ``parallel`` loop unless races are checked; each block's ``shared``
  buffers are allocated inside it, so they are private to the task that runs the block;
* the kernel's body split at its barriers into barrier-free *regions*, each wrapped in
  *thread loops* over ``threadIdx.z``, ``.y``, ``.x`` (the kernel's own thread variables
  are the loops' variables): every thread of the block runs a region before any runs the
  next, which is what ``__syncthreads()`` guarantees;
* control flow that contains a barrier — a loop like a GEMM's ``k0``, an ``if`` — stays
  outside the thread loops, with thread loops inside it; it must be *uniform* (the same
  for every thread of the block: no thread index, no per-thread value in its bounds or
  condition). A barrier under a thread-dependent condition or loop is refused with an
  :class:`EmulatorError`: on a GPU some threads would never reach it (a deadlock, or
  undefined behaviour);
* per-thread state that lives across a barrier — a ``local`` buffer allocated outside a
  region, a ``let`` variable of a thread-dependent value whose scope spans a barrier — is
  expanded into an array with one copy per thread, indexed by the thread's linear id
  ``tx + bx * (ty + by * tz)`` (``bx``, ``by`` the block's extents).

**Race detection** (``check_races=True``): the kernels are instrumented, still compiled.
Vector code is first made scalar (one statement per lane), then every access of a shared
buffer, and of a global buffer the kernel writes, updates a *shadow* of the element: the
epoch, block and thread of its last writer and of its last two readers (an epoch is the
stretch of one block between two barriers; it grows at each barrier and each block). Two
accesses *conflict* when they come from different threads of one block in the same epoch
(or, for a global buffer, from different blocks of one launch) and one is a write. The
first conflict is written into a small report buffer that Python reads after the kernel,
and raised as :class:`RaceError` (buffer, element, the two threads' ``threadIdx`` and
``blockIdx`` triples, the kinds of access).

A write of the **same value** that another thread wrote in the same epoch is a *redundant
write*, not a race: the course's cooperative fetch with ``threadIdx.y`` left unbound has
every ``ty`` write identical values into the shared tile (TVM emits that; every order
gives the same memory). A read of an element another thread writes in the same epoch is a
race whatever the values. The shadows keep one writer and two readers per element: every
conflict on a shared buffer between threads of one block is seen; a read-write conflict on
a global buffer whose element many threads read may go unreported (two reader slots), a
reported one is always real.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer, base_scope
from engine.ir.dtype import element_of, lanes_of
from engine.ir.function import IRModule, PrimFunc
from engine.ir.functor import Mutator, collect_stmts, pre_order_visit, substitute

from .kernel import BLOCK_AXES, GRID_AXES, GpuFunction, GpuModule, Kernel, is_barrier

__all__ = ["emulate", "Emulator", "EmulatorError", "RaceError", "kernel_to_cpu"]

I32 = "int32"
#: per-thread state expanded past this many bytes is allocated on the heap
_STACK_BYTES = 64 * 1024


class EmulatorError(Exception):
    """A GPU function the emulator cannot run (the message says why)."""


class RaceError(EmulatorError):
    """Two threads touched one element between two barriers (or, for a global buffer, in
    one launch), at least one of them writing it, with different values if both wrote.

    Fields: ``kernel``, ``buffer`` (its name), ``scope`` ("shared" or "global"),
    ``element`` (the flat index), ``threads`` (two ``threadIdx`` triples (x, y, z)),
    ``blocks`` (two ``blockIdx`` triples), ``kinds`` (two of "read"/"write", the earlier
    access first), ``count`` (conflicting accesses seen in that kernel)."""

    def __init__(self, kernel: str, buffer: str, scope: str, element: int, threads: tuple,
                 blocks: tuple, kinds: tuple, count: int):
        self.kernel, self.buffer, self.scope, self.element = kernel, buffer, scope, element
        self.threads, self.blocks, self.kinds, self.count = threads, blocks, kinds, count
        (t1, t2), (b1, b2), (k1, k2) = threads, blocks, kinds
        where = ("between the same two barriers" if b1 == b2
                 else "in different blocks of one launch")
        super().__init__(
            f"data race in kernel {kernel!r} on {scope} buffer {buffer!r}, element {element}: "
            f"thread {t1} of block {b1} {_verb(k1)} it and thread {t2} of block {b2} "
            f"{_verb(k2)} it {where}, and nothing orders the two accesses"
            + ("" if b1 != b2 else " (a __syncthreads() between them is missing)")
            + (f"; {count} conflicting accesses in all" if count > 1 else ""))


def _verb(kind: str) -> str:
    return {"read": "reads", "write": "writes"}[kind]


# ---------------------------------------------------------------------------------------
# small IR helpers
# ---------------------------------------------------------------------------------------
def _c(v: int, dtype: str = I32) -> E.IntImm:
    return E.IntImm(dtype, int(v))


def _as(e: E.PrimExpr, dtype: str) -> E.PrimExpr:
    if e.dtype == dtype:
        return e
    if isinstance(e, E.IntImm):
        return E.IntImm(dtype, e.value)
    return E.Cast(dtype, e)


def _add(a, b):
    return E.binary(E.Add, a, b)


def _mul(a, b):
    return E.binary(E.Mul, a, b)


def _and(*conds):
    out = None
    for c in conds:
        out = c if out is None else E.And(out, c)
    return out


def _or(a, b):
    return E.Or(a, b)


def _has_barrier(s: Any, memo: dict) -> bool:
    key = id(s)
    if key not in memo:
        memo[key] = bool([x for x in collect_stmts(s, S.Evaluate) if is_barrier(x)])
    return memo[key]


def _uses(e: Any, vars_: set, bufs: set) -> bool:
    """Does ``e`` use one of the variables (ids) or load one of the buffers (ids)?"""
    found = [False]

    def fn(n):
        if found[0]:
            return False
        if type(n) is E.Var and id(n) in vars_:
            found[0] = True
        elif isinstance(n, E.BufferLoad) and id(n.buffer) in bufs:
            found[0] = True
        return None
    pre_order_visit(e, fn)
    return found[0]


@dataclass
class _Threads:
    """The launch shape of one kernel and the variables the CPU code gives its indices."""

    kernel: Kernel
    block_var: E.Var          # the block's linear number (the grid loop's variable)

    @property
    def nthreads(self) -> int:
        return self.kernel.threads_per_block

    @property
    def nblocks(self) -> int:
        g = self.kernel.grid
        return g[0] * g[1] * g[2]

    def axis_vars(self, axes) -> list:
        return [(a, self.kernel.thread_vars[a]) for a in axes if a in self.kernel.thread_vars]

    def tid(self) -> E.PrimExpr:
        """The thread's linear id in its block: tx + bx * (ty + by * tz)."""
        bx, by, _ = self.kernel.block
        tv = self.kernel.thread_vars
        parts = [(tv.get("threadIdx.x"), 1), (tv.get("threadIdx.y"), bx),
                 (tv.get("threadIdx.z"), bx * by)]
        out = None
        for v, mult in parts:
            if v is None:
                continue
            term = _as(v, I32) if mult == 1 else _mul(_as(v, I32), _c(mult))
            out = term if out is None else _add(out, term)
        return out if out is not None else _c(0)

    def thread_loops(self, body: S.Stmt) -> S.Stmt:
        """``body`` run by every thread of the block: x innermost."""
        ext = dict(zip(BLOCK_AXES, self.kernel.block))
        for axis, v in self.axis_vars(BLOCK_AXES):       # x, y, z: x ends up innermost
            body = S.For(v, _c(0, v.dtype), _c(ext[axis], v.dtype), S.ForKind.SERIAL, body)
        return body

    def block_lets(self, body: S.Stmt) -> S.Stmt:
        """``blockIdx.x/y/z`` read back from the block's linear number."""
        gx, gy, _ = self.kernel.grid
        b = self.block_var
        vals = {"blockIdx.x": E.FloorMod(b, _c(gx)),
                "blockIdx.y": E.FloorMod(E.FloorDiv(b, _c(gx)), _c(gy)),
                "blockIdx.z": E.FloorDiv(b, _c(gx * gy))}
        for axis, v in reversed(self.axis_vars(GRID_AXES)):
            body = S.LetStmt(v, _as(vals[axis], v.dtype), body)
        return body


# ---------------------------------------------------------------------------------------
# MCUDA: regions, thread loops, expansion of per-thread state
# ---------------------------------------------------------------------------------------
class _Expand(Mutator):
    """Accesses of per-thread buffers expanded to one copy per thread, and per-thread let
    variables read from their arrays."""

    def __init__(self, bufs: dict, lets: dict, tid: E.PrimExpr):
        self.bufs = bufs          # id(old buffer) -> (new buffer, elements per thread)
        self.lets = lets          # id(var) -> array buffer
        self.tid = tid

    def _index(self, buf_entry, idx: tuple) -> tuple:
        new, n = buf_entry
        (i,) = idx
        el = element_of(i.dtype)
        off = _mul(_as(self.tid, el), _c(n, el))
        lanes = lanes_of(i.dtype)
        if lanes > 1:
            off = E.Broadcast(off, lanes)
        return (E.Add(off, i),)

    def visit_BufferLoad(self, n):
        idx = self.visit(n.indices)
        hit = self.bufs.get(id(n.buffer))
        if hit is None:
            return n if idx is n.indices else E.BufferLoad(n.buffer, idx)
        return E.BufferLoad(hit[0], self._index(hit, idx))

    def visit_BufferStore(self, n):
        idx = self.visit(n.indices)
        val = self.visit(n.value)
        hit = self.bufs.get(id(n.buffer))
        if hit is None:
            if idx is n.indices and val is n.value:
                return n
            return S.BufferStore(n.buffer, val, idx)
        return S.BufferStore(hit[0], val, self._index(hit, idx))

    def visit_Var(self, v):
        arr = self.lets.get(id(v))
        if arr is None:
            return v
        return E.BufferLoad(arr, (self.tid,))


class _Mcuda:
    """One kernel body (per thread) -> the body of one block (all its threads)."""

    def __init__(self, th: _Threads, barrier_stmt: S.Stmt | None):
        self.th = th
        self.kernel = th.kernel
        self.barrier_stmt = barrier_stmt
        self.memo: dict = {}
        tv = th.kernel.thread_vars
        self.variant_vars = {id(tv[a]) for a in BLOCK_AXES if a in tv}
        self.private_bufs = {id(a.buffer) for a in collect_stmts(th.kernel.body, S.Allocate)}
        self.exp_bufs: dict = {}
        self.exp_lets: dict = {}
        self.tid = th.tid()

    def run(self, body: S.Stmt) -> S.Stmt:
        if not _has_barrier(body, self.memo):
            return self.region(body)
        return self.sync(body)

    # a barrier-free statement: every thread runs it
    def region(self, s: S.Stmt) -> S.Stmt:
        if self.exp_bufs or self.exp_lets:
            s = _Expand(self.exp_bufs, self.exp_lets, self.tid).visit(s)
        return self.th.thread_loops(s)

    def _variant(self, e: Any) -> bool:
        return _uses(e, self.variant_vars, self.private_bufs)

    def _refuse(self, what: str) -> None:
        raise EmulatorError(
            f"kernel {self.kernel.name!r}: a barrier (__syncthreads()) sits under {what}, "
            "which depends on the thread: on a GPU the threads that skip it never reach the "
            "barrier the others wait at (a deadlock, or undefined behaviour); move the "
            "barrier out of it, or make the condition the same for every thread of a block")

    # a statement that contains a barrier
    def sync(self, s: S.Stmt) -> S.Stmt:
        if is_barrier(s):
            return self.barrier_stmt if self.barrier_stmt is not None else S.Evaluate(_c(0))
        if isinstance(s, S.SeqStmt):
            out, run = [], []
            for x in s.seq:
                if _has_barrier(x, self.memo):
                    if run:
                        out.append(self.region(S.seq(*run)))
                        run = []
                    y = self.sync(x)
                    if not (is_barrier(x) and self.barrier_stmt is None):
                        out.append(y)
                else:
                    run.append(x)
            if run:
                out.append(self.region(S.seq(*run)))
            return S.seq(*out)
        if isinstance(s, S.For):
            if self._variant(s.min) or self._variant(s.extent):
                self._refuse(f"loop {s.loop_var.name} whose bounds")
            return S.For(s.loop_var, s.min, s.extent, S.ForKind.SERIAL, self.sync(s.body),
                         s.annotations)
        if isinstance(s, S.IfThenElse):
            if self._variant(s.condition):
                self._refuse("an if whose condition")
            return S.IfThenElse(s.condition, self._branch(s.then_case),
                                self._branch(s.else_case))
        if isinstance(s, S.LetStmt):
            if not self._variant(s.value):
                return S.LetStmt(s.var, s.value, self.sync(s.body))
            if lanes_of(s.var.dtype) != 1:
                raise EmulatorError(f"kernel {self.kernel.name!r}: the vector variable "
                                    f"{s.var.name} lives across a barrier; not supported")
            arr = Buffer(f"{s.var.name}_per_thread", (self.th.nthreads,), s.var.dtype, "local")
            fill = self.region(S.BufferStore(arr, s.value, (self.tid,)))
            self.variant_vars.add(id(s.var))
            self.exp_lets[id(s.var)] = arr
            self.private_bufs.add(id(arr))
            return S.Allocate(arr, S.seq(fill, self.sync(s.body)))
        if isinstance(s, S.Allocate):
            buf = s.buffer
            try:
                n = 1
                for d in buf.const_shape():
                    n *= d
            except ValueError:
                raise EmulatorError(f"kernel {self.kernel.name!r}: local buffer {buf.name} "
                                    "has a symbolic size") from None
            # a large expansion goes to the heap (a "global" allocation), not a task's stack
            from engine.ir.dtype import bytes_of
            big = n * self.th.nthreads * bytes_of(buf.dtype) > _STACK_BYTES
            new = Buffer(f"{buf.name}_per_thread", (n * self.th.nthreads,), buf.dtype,
                         "global" if big else "local", align=buf.align)
            self.exp_bufs[id(buf)] = (new, n)
            self.private_bufs.add(id(buf))
            return S.Allocate(new, self.sync(s.body))
        raise EmulatorError(f"kernel {self.kernel.name!r}: a barrier inside a "
                            f"{type(s).__name__} statement; not supported")

    def _branch(self, s):
        if s is None:
            return None
        return self.sync(s) if _has_barrier(s, self.memo) else self.region(s)


# ---------------------------------------------------------------------------------------
# race checking: scalarize, then instrument every checked access
# ---------------------------------------------------------------------------------------
def _lane(e: E.PrimExpr, l: E.Var) -> E.PrimExpr:
    """Lane ``l`` of a vector expression (a scalar is the same in every lane)."""
    if lanes_of(e.dtype) == 1:
        return e
    if isinstance(e, E.Ramp):
        return _add(e.base, _mul(_as(l, e.base.dtype), e.stride))
    if isinstance(e, E.Broadcast):
        return e.value
    if isinstance(e, E.BufferLoad):
        return E.BufferLoad(e.buffer, tuple(_lane(i, l) for i in e.indices))
    if isinstance(e, E.BinaryOp):
        return type(e)(_lane(e.a, l), _lane(e.b, l))
    if isinstance(e, E.Not):
        return E.Not(_lane(e.a, l))
    if isinstance(e, E.Select):
        return E.Select(_lane(e.condition, l), _lane(e.true_value, l), _lane(e.false_value, l))
    if isinstance(e, E.Cast):
        return E.Cast(element_of(e.dtype), _lane(e.value, l))
    if isinstance(e, E.Call):
        return E.Call(element_of(e.dtype), e.op, tuple(_lane(a, l) for a in e.args))
    raise EmulatorError(f"race checking cannot take a lane of {type(e).__name__} "
                        f"({e.dtype}); run without check_races")


class _Scalarize:
    """Vector statements -> a loop over their lanes (race checking reasons per element)."""

    def __init__(self):
        self.n = 0

    def _lane_var(self) -> E.Var:
        self.n += 1
        return E.Var(f"lane{self.n}", I32)

    def stmt(self, s):
        if s is None:
            return None
        if isinstance(s, S.SeqStmt):
            return S.seq(*[self.stmt(x) for x in s.seq])
        if isinstance(s, S.BufferStore):
            lanes = max([lanes_of(s.value.dtype)] + [lanes_of(i.dtype) for i in s.indices])
            if lanes == 1:
                return s
            l = self._lane_var()
            return S.For(l, _c(0), _c(lanes), S.ForKind.SERIAL, self.at_lane(s, l))
        if isinstance(s, S.IfThenElse):
            lanes = lanes_of(s.condition.dtype)
            if lanes == 1:
                return S.IfThenElse(s.condition, self.stmt(s.then_case), self.stmt(s.else_case))
            l = self._lane_var()
            return S.For(l, _c(0), _c(lanes), S.ForKind.SERIAL, self.at_lane(s, l))
        if isinstance(s, S.LetStmt):
            if lanes_of(s.var.dtype) > 1:
                return self.stmt(substitute(s.body, {s.var: s.value}))
            return S.LetStmt(s.var, s.value, self.stmt(s.body))
        if isinstance(s, S.For):
            return S.For(s.loop_var, s.min, s.extent, s.kind, self.stmt(s.body), s.annotations,
                         s.thread_tag)
        if isinstance(s, S.Allocate):
            return S.Allocate(s.buffer, self.stmt(s.body))
        return s

    def at_lane(self, s, l):
        if s is None:
            return None
        if isinstance(s, S.SeqStmt):
            return S.seq(*[self.at_lane(x, l) for x in s.seq])
        if isinstance(s, S.BufferStore):
            return S.BufferStore(s.buffer, _lane(s.value, l), tuple(_lane(i, l) for i in s.indices))
        if isinstance(s, S.IfThenElse):
            return S.IfThenElse(_lane(s.condition, l), self.at_lane(s.then_case, l),
                                self.at_lane(s.else_case, l))
        if isinstance(s, S.Evaluate):
            return s
        raise EmulatorError(f"race checking: a {type(s).__name__} under a per-lane condition")


#: the shadow of one element: writer (epoch, block, thread), two readers
_W, _R1, _R2 = 0, 3, 6
_SHADOW = 9
_READ, _WRITE = 1, 2
REPORT_SIZE = 16


class _Instrument:
    """Every access of a checked buffer preceded by its check against the shadow."""

    def __init__(self, th: _Threads, checked: dict, epoch: Buffer, report: Buffer):
        self.th = th
        self.checked = checked      # id(buffer) -> (index, shadow buffer, cross_block)
        self.epoch = epoch
        self.report = report
        self.tid = th.tid()
        self.b = th.block_var
        self.n = 0

    # --- the accesses of an expression, with the conditions they happen under
    def loads(self, e, guard=None, out=None):
        out = [] if out is None else out
        if e is None:
            return out
        if isinstance(e, E.BufferLoad):
            for i in e.indices:
                self.loads(i, guard, out)
            if id(e.buffer) in self.checked:
                out.append((e.buffer, e.indices[0], guard))
            return out
        if isinstance(e, E.Call) and e.op == "if_then_else":
            c, t, f = e.args
            self.loads(c, guard, out)
            self.loads(t, c if guard is None else E.And(guard, c), out)
            nc = E.Not(c)
            self.loads(f, nc if guard is None else E.And(guard, nc), out)
            return out
        if isinstance(e, E.Select):
            c = e.condition
            self.loads(c, guard, out)
            self.loads(e.true_value, c if guard is None else E.And(guard, c), out)
            nc = E.Not(c)
            self.loads(e.false_value, nc if guard is None else E.And(guard, nc), out)
            return out
        if isinstance(e, E.Let):
            inner = self.loads(e.body)
            if inner:
                raise EmulatorError("race checking: a checked buffer read under a let "
                                    "expression; not supported")
            return self.loads(e.value, guard, out)
        if isinstance(e, E.PrimExpr):
            from engine.ir.functor import children
            for k in children(e):
                if isinstance(k, E.PrimExpr):
                    self.loads(k, guard, out)
        return out

    # --- the check code
    def _sh(self, shadow, base, k):
        return E.BufferLoad(shadow, (_add(base, _c(k, base.dtype)),))

    def _concurrent(self, shadow, base, slot, cross_block):
        e_s, b_s, t_s = (self._sh(shadow, base, slot + i) for i in range(3))
        now = E.BufferLoad(self.epoch, (_c(0),))
        same_epoch_other = E.And(E.EQ(e_s, now), E.NE(t_s, self.tid))
        if not cross_block:
            return same_epoch_other
        return E.And(E.GT(e_s, _c(0)), _or(E.NE(b_s, self.b),
                                            E.And(E.EQ(e_s, now), E.NE(t_s, self.tid))))

    def _set(self, shadow, base, slot):
        now = E.BufferLoad(self.epoch, (_c(0),))
        return S.seq(S.BufferStore(shadow, now, (_add(base, _c(slot, base.dtype)),)),
                     S.BufferStore(shadow, self.b, (_add(base, _c(slot + 1, base.dtype)),)),
                     S.BufferStore(shadow, self.tid, (_add(base, _c(slot + 2, base.dtype)),)))

    def _report(self, index, elem, kind1, shadow, base, slot, kind2):
        r = self.report
        cnt = E.BufferLoad(r, (_c(0),))
        vals = [index, _as(elem, I32), _c(kind1), self._sh(shadow, base, slot + 1),
                self._sh(shadow, base, slot + 2), _c(kind2), self.b, self.tid]
        first = S.seq(*[S.BufferStore(r, _as(v, I32), (_c(k + 1),)) for k, v in enumerate(vals)])
        return S.seq(S.IfThenElse(E.EQ(cnt, _c(0)), first),
                     S.BufferStore(r, _add(cnt, _c(1)), (_c(0),)))

    def _check_read(self, buf, idx):
        index, shadow, cross = self.checked[id(buf)]
        base = _mul(idx, _c(_SHADOW, idx.dtype))
        r1_live = self._concurrent(shadow, base, _R1, cross)
        r1_self = E.And(E.EQ(self._sh(shadow, base, _R1), E.BufferLoad(self.epoch, (_c(0),))),
                        E.And(E.EQ(self._sh(shadow, base, _R1 + 1), self.b),
                              E.EQ(self._sh(shadow, base, _R1 + 2), self.tid)))
        return S.seq(
            S.IfThenElse(self._concurrent(shadow, base, _W, cross),
                         self._report(index, idx, _WRITE, shadow, base, _W, _READ)),
            S.IfThenElse(E.And(r1_live, E.Not(r1_self)), self._set(shadow, base, _R2),
                         self._set(shadow, base, _R1)))

    def _check_write(self, buf, idx, value):
        index, shadow, cross = self.checked[id(buf)]
        base = _mul(idx, _c(_SHADOW, idx.dtype))
        differs = E.NE(E.BufferLoad(buf, (idx,)), value)
        return S.seq(
            S.IfThenElse(E.And(self._concurrent(shadow, base, _W, cross), differs),
                         self._report(index, idx, _WRITE, shadow, base, _W, _WRITE)),
            S.IfThenElse(self._concurrent(shadow, base, _R1, cross),
                         self._report(index, idx, _READ, shadow, base, _R1, _WRITE),
                         S.IfThenElse(self._concurrent(shadow, base, _R2, cross),
                                      self._report(index, idx, _READ, shadow, base, _R2,
                                                   _WRITE))),
            self._set(shadow, base, _W))

    def _reads(self, exprs) -> list:
        out = []
        for e in exprs:
            for buf, idx, guard in self.loads(e):
                chk = self._check_read(buf, idx)
                out.append(chk if guard is None else S.IfThenElse(guard, chk))
        return out

    def stmt(self, s):
        if s is None:
            return None
        if isinstance(s, S.SeqStmt):
            return S.seq(*[self.stmt(x) for x in s.seq])
        if isinstance(s, S.BufferStore):
            checks = self._reads(list(s.indices) + [s.value])
            if id(s.buffer) not in self.checked:
                return S.seq(*checks, s)
            self.n += 1
            v = E.Var(f"stored{self.n}", s.value.dtype)
            (idx,) = s.indices
            return S.LetStmt(v, s.value, S.seq(*checks, self._check_write(s.buffer, idx, v),
                                               S.BufferStore(s.buffer, v, s.indices)))
        if isinstance(s, S.IfThenElse):
            return S.seq(*self._reads([s.condition]),
                         S.IfThenElse(s.condition, self.stmt(s.then_case),
                                      self.stmt(s.else_case)))
        if isinstance(s, S.LetStmt):
            return S.seq(*self._reads([s.value]), S.LetStmt(s.var, s.value, self.stmt(s.body)))
        if isinstance(s, S.For):
            return S.seq(*self._reads([s.min, s.extent]),
                         S.For(s.loop_var, s.min, s.extent, s.kind, self.stmt(s.body),
                               s.annotations, s.thread_tag))
        if isinstance(s, S.Allocate):
            return S.Allocate(s.buffer, self.stmt(s.body))
        if isinstance(s, S.Evaluate):
            if is_barrier(s):
                return s
            return S.seq(*self._reads([s.value]), s)
        return s


# ---------------------------------------------------------------------------------------
# one kernel -> one CPU PrimFunc
# ---------------------------------------------------------------------------------------
@dataclass
class _KernelPlan:
    kernel: Kernel
    name: str                 # the CPU function's name
    params: tuple             # the kernel's parameters (the CPU function takes these first)
    checked: list             # (buffer name, scope) by report index, race mode
    func: PrimFunc


def _written(body) -> set:
    return {id(s.buffer) for s in collect_stmts(body, S.BufferStore)}


def kernel_to_cpu(kernel: Kernel, name: str | None = None, *, check_races: bool = False,
                  parallel: bool = True) -> _KernelPlan:
    """The CPU PrimFunc (lowered, flat buffers) that runs every block and thread of
    ``kernel``; see the module docstring. Its parameters are the kernel's, then, with
    ``check_races``, an int32 report buffer of :data:`REPORT_SIZE` elements."""
    name = name or kernel.name
    for axis in kernel.thread_vars:
        if axis not in GRID_AXES + BLOCK_AXES:
            raise EmulatorError(f"kernel {kernel.name!r}: unknown thread axis {axis!r}")
    block_var = E.Var("block_linear", I32)
    th = _Threads(kernel, block_var)
    body = kernel.body
    epoch = report = None
    checked_meta: list = []
    allocs: list = []
    if check_races:
        epoch = Buffer("race_epoch", (1,), I32, "local")
        report = Buffer("race_report", (REPORT_SIZE,), I32, "global")
        body = _Scalarize().stmt(body)
        written = _written(body)
        checked: dict = {}
        for b in kernel.shared:
            checked[id(b)] = (_c(len(checked_meta)), None, False)
            checked_meta.append((b.name, "shared"))
        for b in kernel.buffer_params:
            if id(b) in written:
                checked[id(b)] = (_c(len(checked_meta)), None, True)
                checked_meta.append((b.name, base_scope(b.scope) or "global"))
        for b in list(kernel.shared) + [p for p in kernel.buffer_params if id(p) in checked]:
            index, _, cross = checked[id(b)]
            (size,) = b.shape
            shadow = Buffer(f"{b.name}_shadow", (_mul(_as(size, size.dtype),
                                                     _c(_SHADOW, size.dtype)),), I32, "global")
            checked[id(b)] = (index, shadow, cross)
            allocs.append(shadow)
        body = _Instrument(th, checked, epoch, report).stmt(body)
    bump = None
    if check_races:
        bump = S.BufferStore(epoch, _add(E.BufferLoad(epoch, (_c(0),)), _c(1)), (_c(0),))
    block_body = _Mcuda(th, bump).run(body)
    if bump is not None:
        block_body = S.seq(bump, block_body)
    for b in reversed(kernel.shared):
        if check_races:
            allocs.append(b)      # serial grid: one copy, allocated once
        else:
            block_body = S.Allocate(b, block_body)
    block_body = th.block_lets(block_body)
    kind = S.ForKind.PARALLEL if parallel and not check_races and th.nblocks > 1 \
        else S.ForKind.SERIAL
    out = S.For(block_var, _c(0), _c(th.nblocks), kind, block_body)
    if check_races:
        for b in allocs:
            out = S.Allocate(b, out)
        out = S.Allocate(epoch, out)
    params = tuple(kernel.params) + ((report,) if check_races else ())
    func = PrimFunc(name, params, out, (("lowered", True),))
    from engine.lower.lower import symbolic_sizes
    try:
        sizes = symbolic_sizes(func, out)
    except Exception as exc:   # noqa: BLE001 - a BuildError naming the variable
        raise EmulatorError(f"kernel {kernel.name!r}: {exc}") from exc
    if sizes:
        func = PrimFunc(name, params + sizes, out, (("lowered", True), ("size_vars", sizes)))
    return _KernelPlan(kernel, name, tuple(kernel.params), checked_meta, func)


# ---------------------------------------------------------------------------------------
# the compiled emulator
# ---------------------------------------------------------------------------------------
def _sanitize(s: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in s)


class Emulator:
    """A GPU function compiled for the CPU once, callable many times.

    ``Emulator(gpu_function, check_races=False, parallel=True, opt_level=3)``; ``emu(*arrays)`` runs
    the function's kernels in order on numpy arrays given as the function's parameters
    (arrays modified in place; any shape whose size matches the flat buffer, C-contiguous).
    ``kernel_seconds`` holds each kernel's seconds of the last call, ``compile_seconds``
    the build's; ``functions`` the CPU PrimFuncs; ``module`` the engine.build module.
    ``opt_level`` is LLVM's (0-3): a small program's check is quicker at 0 — a race-checked
    kernel compiled 3-9 times faster (GEMM n=128: 75 instead of 700 ms) and ran 2-4 times
    slower (28 instead of 8.5 ms).
    """

    def __init__(self, gpu_function: Any, *, check_races: bool = False, parallel: bool = True,
                 opt_level: int = 3):
        fn = _function_of(gpu_function)
        self.gpu_function = fn
        self.check_races = check_races
        self.opt_level = opt_level
        t0 = time.perf_counter()
        self.plans = []
        for i, k in enumerate(fn.kernels):
            cname = _sanitize(f"{fn.name}_emu{i}_{k.name}")
            self.plans.append(kernel_to_cpu(k, cname, check_races=check_races,
                                            parallel=parallel))
        self.functions = [p.func for p in self.plans]
        from engine.runtime.build import build
        self.module = build(IRModule(tuple((p.name, p.func) for p in self.plans)),
                            lowered=True, opt_level=opt_level) if self.plans else None
        self._calls = [self.module[p.name] for p in self.plans] if self.plans else []
        self.compile_seconds = time.perf_counter() - t0
        self.kernel_seconds: list = []

    def _arrays(self, arrays: tuple) -> dict:
        from engine.runtime.module import NUMPY_DTYPES
        fn = self.gpu_function
        if len(arrays) != len(fn.params):
            raise EmulatorError(f"{fn.name} takes {len(fn.params)} arguments "
                                f"({', '.join(_pname(p) for p in fn.params)}), got {len(arrays)}")
        env: dict = {}
        for p, a in zip(fn.params, arrays):
            if isinstance(p, Buffer):
                if not isinstance(a, np.ndarray):
                    raise EmulatorError(f"argument {p.name}: expected a numpy array, got "
                                        f"{type(a).__name__}")
                if not a.flags.c_contiguous:
                    raise EmulatorError(f"argument {p.name}: the array must be C-contiguous "
                                        "(the emulator writes into it in place)")
                flat = a.reshape(-1)
                try:
                    want = p.const_shape()
                except ValueError:
                    want = None
                if want is not None and flat.shape != tuple(want):
                    raise EmulatorError(f"argument {p.name}: {a.size} elements, the buffer "
                                        f"has {want[0]}")
                env[id(p)] = flat
            else:
                env[id(p)] = a
            env.setdefault(("name", p.name), env[id(p)])
        for t in fn.temporaries:
            try:
                shape = t.const_shape()
            except ValueError:
                raise EmulatorError(f"temporary {t.name} has a symbolic size; not "
                                    "supported") from None
            arr = np.zeros(shape, NUMPY_DTYPES[t.dtype])
            env[id(t)] = arr
            env.setdefault(("name", t.name), arr)
        return env

    def __call__(self, *arrays: Any) -> None:
        env = self._arrays(arrays)
        self.kernel_seconds = []
        for plan, call in zip(self.plans, self._calls):
            args = []
            for p in plan.params:
                if id(p) in env:
                    args.append(env[id(p)])
                elif ("name", _pname(p)) in env:
                    args.append(env[("name", _pname(p))])
                else:
                    raise EmulatorError(f"kernel {plan.kernel.name!r} takes {_pname(p)}, which "
                                        "is neither a parameter nor a temporary of "
                                        f"{self.gpu_function.name}")
            report = None
            if self.check_races:
                report = np.zeros(REPORT_SIZE, np.int32)
                args.append(report)
            t0 = time.perf_counter()
            call(*args)
            self.kernel_seconds.append(time.perf_counter() - t0)
            if report is not None and report[0] > 0:
                raise self._race(plan, report)

    def _race(self, plan: _KernelPlan, r: np.ndarray) -> RaceError:
        k = plan.kernel
        name, scope = plan.checked[int(r[1])]
        kinds = {_READ: "read", _WRITE: "write"}

        def thread(t):
            bx, by, _ = k.block
            return (int(t) % bx, int(t) // bx % by, int(t) // (bx * by))

        def block(b):
            gx, gy, _ = k.grid
            return (int(b) % gx, int(b) // gx % gy, int(b) // (gx * gy))

        return RaceError(k.name, name, scope, int(r[2]), (thread(r[5]), thread(r[8])),
                         (block(r[4]), block(r[7])), (kinds[int(r[3])], kinds[int(r[6])]),
                         int(r[0]))


def _pname(p: Any) -> str:
    return p.name


def _function_of(f: Any) -> GpuFunction:
    if isinstance(f, GpuFunction):
        return f
    if isinstance(f, GpuModule):
        if len(f.functions) != 1:
            raise EmulatorError("the GPU module has several functions; pass one "
                                "(module['name'])")
        return f.functions[0]
    if isinstance(f, Kernel):
        return GpuFunction(f.name, tuple(f.params), (f,))
    raise EmulatorError(f"emulate expects a GpuFunction (or a Kernel), got {type(f).__name__}")


def emulate(gpu_function: Any, *arrays: Any, check_races: bool = False) -> None:
    """Run ``gpu_function`` (a :class:`GpuFunction`, a one-function :class:`GpuModule` or a
    single :class:`Kernel`) on numpy arrays given as its parameters, modified in place, with
    the GPU's semantics. With ``check_races`` a data race raises :class:`RaceError`.
    Compiles each time it is called (the compile cache makes a repeat cheap); keep an
    :class:`Emulator` to call many times."""
    Emulator(gpu_function, check_races=check_races)(*arrays)

"""A tiny reference executor of lowered GPU kernels, for tests (not the emulator).

``run_function(gpu_function, *arrays, order="forward")`` runs every kernel of a
:class:`engine.gpu.kernel.GpuFunction` on numpy arrays, block after block; inside a block,
every thread is a Python generator that runs until its next barrier, the threads one after
the other (``order``: "forward", "reverse" or a seed for a random order), so a missing
barrier shows up as a read of shared memory nobody wrote yet (shared and local buffers are
filled with NaN for floats, a large sentinel for integers) or as a wrong result. A barrier
reached by some threads of a block and not others is an error.
"""
from __future__ import annotations

import math
import random

import numpy as np

from engine.gpu.kernel import BARRIER
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import element_of, lanes_of


class BarrierDivergence(AssertionError):
    pass


def _np_dtype(dtype: str):
    el = element_of(dtype)
    return np.bool_ if el == "bool" else np.dtype(el)


def _fill(dtype: str):
    el = element_of(dtype)
    if el.startswith("float"):
        return np.nan
    if el == "bool":
        return False
    return np.iinfo(np.dtype(el)).max // 3


def _cast(v, dtype):
    t = _np_dtype(dtype)
    a = np.asarray(v)
    if a.dtype.kind == "f" and np.dtype(t).kind in "iu":
        a = np.trunc(a)
    out = a.astype(t)
    return out[()] if out.ndim == 0 else out


_UNARY = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
          "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh, "fabs": np.abs, "abs": np.abs,
          "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
          "sin": np.sin, "cos": np.cos, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
          "likely": lambda x: x, "erf": np.vectorize(math.erf)}


class _Compiler:
    def expr(self, e):
        t = type(e)
        if t is E.Var:
            k = id(e)
            return lambda env: env[k]
        if t is E.IntImm:
            v = bool(e.value) if e.dtype == "bool" else e.value
            return lambda env: v
        if t is E.FloatImm:
            v = _np_dtype(e.dtype).type(e.value)
            return lambda env: v
        if t is E.Cast:
            a, dt = self.expr(e.value), e.dtype
            return lambda env: _cast(a(env), dt)
        if t in (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Div, E.Mod, E.Min, E.Max,
                 E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.And, E.Or):
            a, b = self.expr(e.a), self.expr(e.b)
            isint = element_of(e.a.dtype).startswith(("int", "uint"))
            op = {E.Add: lambda x, y: x + y, E.Sub: lambda x, y: x - y,
                  E.Mul: lambda x, y: x * y, E.FloorDiv: lambda x, y: x // y,
                  E.FloorMod: lambda x, y: x % y, E.Min: np.minimum, E.Max: np.maximum,
                  E.EQ: lambda x, y: x == y, E.NE: lambda x, y: x != y,
                  E.LT: lambda x, y: x < y, E.LE: lambda x, y: x <= y,
                  E.GT: lambda x, y: x > y, E.GE: lambda x, y: x >= y,
                  E.And: np.logical_and, E.Or: np.logical_or}.get(t)
            if t is E.Div:
                op = (lambda x, y: np.trunc(np.asarray(x) / y).astype(np.int64)[()]) if isint \
                    else (lambda x, y: x / y)
            if t is E.Mod:
                op = (lambda x, y: np.fmod(x, y)) if isint else (lambda x, y: np.fmod(x, y))
            if t in (E.Add, E.Sub, E.Mul) and not isint:
                dt = e.dtype
                return lambda env: _cast(op(a(env), b(env)), dt)
            return lambda env: op(a(env), b(env))
        if t is E.Not:
            a = self.expr(e.a)
            return lambda env: np.logical_not(a(env))
        if t is E.Select:
            c, a, b = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
            return lambda env: np.where(c(env), a(env), b(env))[()]
        if t is E.Ramp:
            base, stride, n = self.expr(e.base), self.expr(e.stride), e.lanes
            ar = np.arange(n)
            return lambda env: base(env) + ar * stride(env)
        if t is E.Broadcast:
            v, n = self.expr(e.value), e.lanes
            return lambda env: np.full(n, v(env))
        if t is E.BufferLoad:
            k = id(e.buffer)
            idx = self.expr(e.indices[0])
            return lambda env: env[k][idx(env)]
        if t is E.Let:
            var, val, body = id(e.var), self.expr(e.value), self.expr(e.body)

            def let(env):
                env[var] = val(env)
                return body(env)
            return let
        if t is E.Call:
            args = [self.expr(a) for a in e.args]
            if e.op == "if_then_else":
                c, a, b = args
                return lambda env: np.where(c(env), a(env), b(env))[()]
            if e.op == "fma":
                a, b, c = args
                return lambda env: a(env) * b(env) + c(env)
            if e.op == "pow":
                a, b = args
                return lambda env: np.power(a(env), b(env))
            if e.op in _UNARY:
                f, a, dt = _UNARY[e.op], args[0], e.dtype
                return lambda env: _cast(f(a(env)), dt)
        raise NotImplementedError(f"reference executor: {t.__name__} {getattr(e, 'op', '')}")

    # statements: (fn, is_generator)
    def stmt(self, s):
        t = type(s)
        if t is S.SeqStmt:
            parts = [self.stmt(x) for x in s.seq]
            if not any(g for _, g in parts):
                fns = [f for f, _ in parts]

                def run(env):
                    for f in fns:
                        f(env)
                return run, False

            def grun(env):
                for f, g in parts:
                    if g:
                        yield from f(env)
                    else:
                        f(env)
            return grun, True
        if t is S.BufferStore:
            k = id(s.buffer)
            idx, val = self.expr(s.indices[0]), self.expr(s.value)

            def store(env):
                env[k][idx(env)] = val(env)
            return store, False
        if t is S.For:
            var, mn, ext = id(s.loop_var), self.expr(s.min), self.expr(s.extent)
            body, g = self.stmt(s.body)
            if not g:
                def loop(env):
                    lo = int(mn(env))
                    for i in range(lo, lo + int(ext(env))):
                        env[var] = i
                        body(env)
                return loop, False

            def gloop(env):
                lo = int(mn(env))
                for i in range(lo, lo + int(ext(env))):
                    env[var] = i
                    yield from body(env)
            return gloop, True
        if t is S.IfThenElse:
            c = self.expr(s.condition)
            a, ga = self.stmt(s.then_case)
            b, gb = self.stmt(s.else_case) if s.else_case is not None else (None, False)
            if not (ga or gb):
                def branch(env):
                    if c(env):
                        a(env)
                    elif b is not None:
                        b(env)
                return branch, False

            def gbranch(env):
                if c(env):
                    r = a(env)
                else:
                    r = b(env) if b is not None else None
                if r is not None:
                    yield from r
            return gbranch, True
        if t is S.LetStmt:
            var, val = id(s.var), self.expr(s.value)
            body, g = self.stmt(s.body)
            if not g:
                def let(env):
                    env[var] = val(env)
                    body(env)
                return let, False

            def glet(env):
                env[var] = val(env)
                yield from body(env)
            return glet, True
        if t is S.Allocate:
            buf = s.buffer
            k, n = id(buf), int(E.as_const_int(buf.shape[0]))
            dt, fill = _np_dtype(buf.dtype), _fill(buf.dtype)
            if element_of(buf.dtype).startswith(("int", "uint")) and lanes_of(buf.dtype) == 1:
                fill = 0   # zero-filled, as the CPU back end does (the bounds proof counts on it)
            body, g = self.stmt(s.body)
            if not g:
                def alloc(env):
                    env[k] = np.full(n, fill, dt)
                    body(env)
                return alloc, False

            def galloc(env):
                env[k] = np.full(n, fill, dt)
                yield from body(env)
            return galloc, True
        if t is S.Evaluate:
            if type(s.value) is E.Call and s.value.op == BARRIER:
                def bar(env):
                    yield "barrier"
                return bar, True
            return (lambda env: None), False
        raise NotImplementedError(f"reference executor: {t.__name__}")


def run_kernel(kernel, buffers: dict, order="forward") -> None:
    """Run ``kernel`` with ``buffers`` ({id(flat Buffer): numpy 1-D array}) in place."""
    fn, is_gen = _Compiler().stmt(kernel.body)
    tv = kernel.thread_vars
    gx, gy, gz = kernel.grid
    bx, by, bz = kernel.block
    threads = [(x, y, z) for z in range(bz) for y in range(by) for x in range(bx)]
    for bidx in [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]:
        base = dict(buffers)
        for b in kernel.shared:
            base[id(b)] = np.full(int(E.as_const_int(b.shape[0])), _fill(b.dtype),
                                  _np_dtype(b.dtype))
        for ax, v in zip(("blockIdx.x", "blockIdx.y", "blockIdx.z"), bidx):
            if ax in tv:
                base[id(tv[ax])] = v
        envs = []
        for t in threads:
            env = dict(base)
            for ax, v in zip(("threadIdx.x", "threadIdx.y", "threadIdx.z"), t):
                if ax in tv:
                    env[id(tv[ax])] = v
            envs.append(env)
        idx = list(range(len(envs)))
        if order == "reverse":
            idx.reverse()
        elif order != "forward":
            random.Random(order).shuffle(idx)
        if not is_gen:
            for i in idx:
                fn(envs[i])
            continue
        gens = {i: fn(envs[i]) for i in idx}
        while gens:
            done, waiting = [], []
            for i in idx:
                if i not in gens:
                    continue
                try:
                    next(gens[i])
                    waiting.append(i)
                except StopIteration:
                    done.append(i)
            if done and waiting:
                raise BarrierDivergence(
                    f"block {bidx}: threads {waiting[:4]} wait at a barrier that threads "
                    f"{done[:4]} never reach")
            for i in done:
                del gens[i]


def run_function(gfunc, *arrays, order="forward") -> None:
    """Run every kernel of ``gfunc`` on ``arrays`` (numpy, the function's buffer
    parameters in order), in place."""
    bufs = [p for p in gfunc.params if isinstance(p, Buffer)]
    assert len(bufs) == len(arrays)
    buffers = {id(b): a.reshape(-1) for b, a in zip(bufs, arrays)}
    for a in arrays:
        assert a.flags.c_contiguous
    for t in gfunc.temporaries:
        buffers[id(t)] = np.full(int(E.as_const_int(t.shape[0])), _fill(t.dtype),
                                 _np_dtype(t.dtype))
    for k in gfunc.kernels:
        run_kernel(k, buffers, order)

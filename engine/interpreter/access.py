"""The closure compiler, buffer access: ``BufferLoad`` and ``BufferStore`` with their
bounds checks (scalar indices take fast paths for 1 and 2 dimensions; lane indices
gather and scatter)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import is_float, lanes_of

from .errors import InterpretError, out_of_bounds
from .exprs import ExprCompiler
from .values import Fn


def vector_index(env: list, fidx: Sequence[Fn], flat, arr: np.ndarray, buf: Buffer, what: str,
                 where: str, lenient: int) -> tuple:
    """The index tuple of an access whose entries may be lane arrays, bounds-checked; an
    error names the first offending lane's index (in iteration order).  ``lenient`` clips
    out-of-range lanes instead (lanes a masked branch does not choose)."""
    idx = tuple(f(env) for f in fidx)
    if flat is not None:
        idx = (flat(idx),)
    if len(idx) != arr.ndim:
        raise InterpretError(f"buffer {buf.name!r} has {arr.ndim} dimension(s) but is "
                             f"accessed with {len(idx)} index(es){where}")
    out = []
    bad_any = None
    for d, v in enumerate(idx):
        n = arr.shape[d]
        if isinstance(v, np.ndarray):
            bad = (v < 0) | (v >= n)
            if bad.any():
                if lenient:
                    v = np.clip(v, 0, n - 1)
                else:
                    bad_any = bad if bad_any is None else (np.broadcast_to(bad_any, np.broadcast(
                        bad_any, bad).shape) | bad)
        elif not 0 <= v < n:
            if lenient:
                v = min(max(int(v), 0), n - 1)
            else:
                out_of_bounds(buf, idx, what, where)
        out.append(v)
    if bad_any is not None:
        k = int(np.argmax(bad_any))
        first = tuple(int(np.broadcast_to(v, bad_any.shape)[k]) if isinstance(v, np.ndarray)
                      else v for v in idx)
        out_of_bounds(buf, first, what, where)
    return tuple(out)


class AccessCompiler(ExprCompiler):
    """Compiles buffer loads (an expression) and stores (a statement)."""

    def _access(self, buf: Buffer, indices: Sequence[Any], what: str) -> int:
        """The slot of ``buf``, checked to be in scope and indexed with one index per
        dimension (flat buffers take any number)."""
        slot = self.buffer_slot(buf, what)
        if len(indices) != len(buf.shape) and not (buf.strides or buf.elem_offset):
            raise InterpretError(f"buffer {buf.name!r} has {len(buf.shape)} dimension(s) but "
                                 f"is {what} with {len(indices)} index(es){self.where()}")
        return slot

    def _flat_index(self, buf: Buffer) -> Callable[[tuple], int] | None:
        """For buffers with explicit strides or an element offset: index tuple -> flat."""
        if not buf.strides and not buf.elem_offset:
            return None
        strides = [E.as_const_int(s) for s in buf.strides] if buf.strides else None
        if strides is not None and any(s is None for s in strides):
            raise InterpretError(f"buffer {buf.name!r} has symbolic strides, which the "
                                 "interpreter does not support")
        if strides is None:
            shape = [E.as_const_int(s) for s in buf.shape]
            strides, acc = [], 1
            for s in reversed(shape):
                strides.insert(0, acc)
                acc *= s
        off = int(buf.elem_offset)

        def flat(idx):
            return off + sum(i * s for i, s in zip(idx, strides))
        return flat

    def e_BufferLoad(self, e: E.BufferLoad):
        buf = e.buffer
        slot = self._access(buf, e.indices, "read")
        where = self.where()
        fidx = [self.expr(i) for i in e.indices]
        vec = self._vec(*e.indices)
        flat = self._flat_index(buf)
        as_py = not is_float(buf.dtype)
        oob = out_of_bounds
        if vec or flat is not None:
            lenient = self.lenient

            def vload(env):
                arr = env[slot]
                v = arr[vector_index(env, fidx, flat, arr, buf, "read", where, lenient[0])]
                if as_py and not isinstance(v, np.ndarray):
                    return v.item()
                return v
            return vload
        vars_ = [self.slots[id(i)] if isinstance(i, E.Var) else None for i in e.indices]
        n = len(fidx)
        if n == 1:
            f0 = fidx[0]
            s0 = vars_[0]
            if s0 is not None:
                def load1v(env):
                    i = env[s0]
                    if i < 0:
                        oob(buf, (i,), "read", where)
                    try:
                        return env[slot].item(i) if as_py else env[slot][i]
                    except IndexError:
                        oob(buf, (i,), "read", where)
                return load1v

            def load1(env):
                i = f0(env)
                if i < 0:
                    oob(buf, (i,), "read", where)
                try:
                    return env[slot].item(i) if as_py else env[slot][i]
                except IndexError:
                    oob(buf, (i,), "read", where)
            return load1
        if n == 2:
            f0, f1 = fidx
            s0, s1 = vars_
            if s0 is not None and s1 is not None and not as_py:
                def load2vv(env):
                    i = env[s0]
                    j = env[s1]
                    if i < 0 or j < 0:
                        oob(buf, (i, j), "read", where)
                    try:
                        return env[slot][i, j]
                    except IndexError:
                        oob(buf, (i, j), "read", where)
                return load2vv

            def load2(env):
                i = f0(env)
                j = f1(env)
                if i < 0 or j < 0:
                    oob(buf, (i, j), "read", where)
                try:
                    return env[slot].item(i, j) if as_py else env[slot][i, j]
                except IndexError:
                    oob(buf, (i, j), "read", where)
            return load2
        if n == 0:
            return lambda env: env[slot][()].item() if as_py else env[slot][()]

        def loadn(env):
            idx = tuple(f(env) for f in fidx)
            for v in idx:
                if v < 0:
                    oob(buf, idx, "read", where)
            try:
                return env[slot].item(*idx) if as_py else env[slot][idx]
            except IndexError:
                oob(buf, idx, "read", where)
        return loadn

    def s_BufferStore(self, s: S.BufferStore) -> Fn:
        buf = s.buffer
        slot = self._access(buf, s.indices, "written")
        self.stored.add(id(buf))
        where = self.where()
        fv = self.expr(s.value)
        fidx = [self.expr(i) for i in s.indices]
        vec = any(lanes_of(i.dtype) > 1 for i in s.indices)
        flat = self._flat_index(buf)
        oob = out_of_bounds
        if vec or flat is not None:
            def vstore(env):
                v = fv(env)
                arr = env[slot]
                arr[vector_index(env, fidx, flat, arr, buf, "write", where, 0)] = v
            return vstore
        n = len(fidx)
        if n == 1:
            f0 = fidx[0]

            def store1(env):
                v = fv(env)
                i = f0(env)
                if i < 0:
                    oob(buf, (i,), "write", where)
                try:
                    env[slot][i] = v
                except IndexError:
                    oob(buf, (i,), "write", where)
            return store1
        if n == 2:
            f0, f1 = fidx

            def store2(env):
                v = fv(env)
                i = f0(env)
                j = f1(env)
                if i < 0 or j < 0:
                    oob(buf, (i, j), "write", where)
                try:
                    env[slot][i, j] = v
                except IndexError:
                    oob(buf, (i, j), "write", where)
            return store2

        def storen(env):
            v = fv(env)
            idx = tuple(f(env) for f in fidx)
            for x in idx:
                if x < 0:
                    oob(buf, idx, "write", where)
            try:
                env[slot][idx] = v
            except IndexError:
                oob(buf, idx, "write", where)
        return storen

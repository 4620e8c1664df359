"""The closure compiler, statements: every Stmt becomes ``f(env)`` that runs it (loops,
blocks with their binding checks and reduction init, ifs, lets, allocations).  A loop
nest the numpy band evaluator can run is compiled twice: as a band, and serially for the
runs where its lanes turn out not to be independent."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import lanes_of, zero_filled

from .band_compile import BandCompiler
from .band_plan import band_plan
from .errors import InterpretError, bad_binding
from .values import NC, Fn, const_value, np_dtype


def _set_then_run(slot: int, value: Fn, body: Fn) -> Fn:
    """A statement that stores ``value(env)`` in ``slot`` and then runs ``body``
    (LetStmt, Allocate)."""
    def run(env):
        env[slot] = value(env)
        body(env)
    return run


class StmtCompiler(BandCompiler):
    """Compiles statements (``s_<Node>`` methods): the whole closure compiler."""

    def stmt(self, s: Any) -> Fn:
        if s is None:
            return lambda env: None
        meth = getattr(self, "s_" + type(s).__name__, None)
        if meth is None:
            raise InterpretError(f"the interpreter does not support the statement "
                                 f"{type(s).__name__}{self.where()}")
        return meth(s)

    def s_SeqStmt(self, s: S.SeqStmt) -> Fn:
        fs = tuple(self.stmt(x) for x in s.seq)
        if len(fs) == 1:
            return fs[0]
        if len(fs) == 2:
            f0, f1 = fs

            def seq2(env):
                f0(env)
                f1(env)
            return seq2

        def seqn(env):
            for f in fs:
                f(env)
        return seqn

    def s_For(self, s: S.For) -> Fn:
        if self.vectorize and not self.varying and not self.in_fallback:
            plan = band_plan(s)
            if plan is not None and plan.loops[0] is s:
                band = self._compile_band(plan)
                if band is not None:
                    self.nbands += 1
                    self.in_fallback += 1  # the fallback runs the nest iteration by iteration
                    try:
                        scalar = self._scalar_for(s)
                    finally:
                        self.in_fallback -= 1

                    def for_band(env):
                        if not band(env):  # lanes not independent at run time: go serial
                            scalar(env)
                    return for_band
        return self._scalar_for(s)

    def _scalar_for(self, s: S.For) -> Fn:
        cmin, cext = const_value(s.min), const_value(s.extent)
        fmin, fext = self.expr(s.min), self.expr(s.extent)
        slot = self.bind(s.loop_var)
        try:
            body = self.stmt(s.body)
        finally:
            self.unbind(s.loop_var)
        if cmin is not NC and cext is not NC:
            rng = range(cmin, cmin + cext)

            def for_const(env):
                for v in rng:
                    env[slot] = v
                    body(env)
            return for_const

        def for_dyn(env):
            lo = fmin(env)
            for v in range(lo, lo + fext(env)):
                env[slot] = v
                body(env)
        return for_dyn

    def _alloc_fn(self, buf: Buffer) -> Callable[[list], np.ndarray]:
        """A fresh buffer, not zeroed: NaN (floats), True, or the integer type's lowest;
        except scalar integer buffers, which are zero-filled (:func:`zero_filled`: the
        generated code fills them too, and the bounds proof relies on it)."""
        dt = np_dtype(buf.dtype)
        shape_fs = [self.expr(x) for x in buf.shape]
        fill: Any
        if zero_filled(buf.dtype):
            fill = 0
        elif dt.kind == "f":
            fill = np.nan
        elif dt.kind == "b":
            fill = True
        else:
            info = np.iinfo(dt)
            fill = info.min if dt.kind == "i" else info.max
        flat = bool(buf.strides) or bool(buf.elem_offset)
        strides = [E.as_const_int(x) for x in buf.strides]
        name = buf.name

        def alloc(env):
            shape = tuple(int(f(env)) for f in shape_fs)
            if any(d < 0 for d in shape):
                raise InterpretError(f"buffer {name!r} would have a negative shape {shape}")
            if flat:
                size = int(buf.elem_offset) + (
                    (1 + sum((d - 1) * st for d, st in zip(shape, strides)))
                    if strides and all(d > 0 for d in shape) else int(np.prod(shape)))
                return np.full(size, fill, dtype=dt)
            return np.full(shape, fill, dtype=dt)
        return alloc

    def s_BlockRealize(self, s: S.BlockRealize) -> Fn:
        blk = s.block
        if lanes_of(s.predicate.dtype) > 1:
            raise InterpretError(f"the predicate of block {blk.name_hint!r} is a vector "
                                 f"({s.predicate.dtype}); it must be a single bool")
        if len(s.iter_values) != len(blk.iter_vars):
            raise InterpretError(f"block {blk.name_hint!r} has {len(blk.iter_vars)} iter vars "
                                 f"but {len(s.iter_values)} bindings")
        fvals = [self.expr(v) for v in s.iter_values]
        doms = []
        for iv in blk.iter_vars:
            doms.append((self.expr(iv.dom.min), self.expr(iv.dom.extent),
                         const_value(iv.dom.min), const_value(iv.dom.extent)))
        slots = [self.bind(iv.var) for iv in blk.iter_vars]
        self.blocks.append(blk.name_hint)
        allocs = []
        try:
            pred_c = const_value(s.predicate)
            pred = None if (pred_c is not NC and pred_c) else self.expr(s.predicate)
            for b in blk.alloc_buffers:
                allocs.append((self.bind_buffer(b), self._alloc_fn(b)))
            init = self.stmt(blk.init) if blk.init is not None else None
            body = self.stmt(blk.body)
        finally:
            for b in blk.alloc_buffers[:len(allocs)]:
                self.unbind_buffer(b)
            self.blocks.pop()
            for iv in blk.iter_vars:
                self.unbind(iv.var)
        name = blk.name_hint
        red = [(slot, d) for slot, d, iv in zip(slots, doms, blk.iter_vars)
               if iv.iter_type is S.IterType.REDUCE]
        all_const = all(d[2] is not NC and d[3] is not NC for d in doms)
        names = [iv.var.name for iv in blk.iter_vars]
        binds = tuple(zip(slots, fvals))
        checks = tuple((slot, d[2], d[2] + d[3], nm) for slot, d, nm in zip(slots, doms, names)
                       ) if all_const else None
        red_c = tuple((slot, d[2]) for slot, d in red) if all_const else None
        allocs_t = tuple(allocs)

        def realize(env):
            for slot, f in binds:
                env[slot] = f(env)
            if pred is not None and not pred(env):
                return
            if checks is not None:
                for slot, lo, hi, nm in checks:
                    v = env[slot]
                    if not lo <= v < hi:
                        bad_binding(name, nm, v, lo, hi)
                do_init = init is not None and all(env[slot] == lo for slot, lo in red_c)
            else:
                do_init = init is not None
                for (slot, (fmn, fex, _, _)), nm in zip(zip(slots, doms), names):
                    lo = fmn(env)
                    hi = lo + fex(env)
                    v = env[slot]
                    if not lo <= v < hi:
                        bad_binding(name, nm, v, lo, hi)
                if init is not None:
                    do_init = all(env[slot] == d[0](env) for slot, d in red)
            for bslot, alloc in allocs_t:
                env[bslot] = alloc(env)
            if do_init:
                init(env)
            body(env)

        if not allocs_t and checks is not None and pred is None and len(binds) <= 4:
            return self._fast_realize(binds, checks, red_c, init, body, name)
        return realize

    @staticmethod
    def _fast_realize(binds, checks, red_c, init, body, name) -> Fn:
        """BlockRealize with constant domains, no predicate and no allocation."""
        spec = tuple((slot, f, lo, hi, nm) for (slot, f), (_, lo, hi, nm) in zip(binds, checks))
        if init is None:
            def realize_plain(env):
                for slot, f, lo, hi, nm in spec:
                    v = f(env)
                    if not lo <= v < hi:
                        bad_binding(name, nm, v, lo, hi)
                    env[slot] = v
                body(env)
            return realize_plain

        def realize_reduce(env):
            for slot, f, lo, hi, nm in spec:
                v = f(env)
                if not lo <= v < hi:
                    bad_binding(name, nm, v, lo, hi)
                env[slot] = v
            for slot, lo in red_c:
                if env[slot] != lo:
                    break
            else:
                init(env)
            body(env)
        return realize_reduce

    def s_Block(self, s: S.Block) -> Fn:
        if s.iter_vars:
            raise InterpretError(f"block {s.name_hint!r} has iter vars but no BlockRealize "
                                 "binding them")
        return self.s_BlockRealize(S.BlockRealize((), E.IntImm("bool", 1), s))

    def s_IfThenElse(self, s: S.IfThenElse) -> Fn:
        if lanes_of(s.condition.dtype) > 1:
            raise InterpretError(
                f"the condition of an if statement{self.where()} is a vector "
                f"({s.condition.dtype}); it must be a single bool — per-lane conditions "
                "belong in T.Select / T.if_then_else or a scalar loop")
        fc = self.expr(s.condition)
        ft = self.stmt(s.then_case)
        if s.else_case is None:
            def if_(env):
                if fc(env):
                    ft(env)
            return if_
        fe = self.stmt(s.else_case)

        def if_else(env):
            if fc(env):
                ft(env)
            else:
                fe(env)
        return if_else

    def s_Evaluate(self, s: S.Evaluate) -> Fn:
        fv = self.expr(s.value)

        def evaluate(env):
            fv(env)
        return evaluate

    def s_LetStmt(self, s: S.LetStmt) -> Fn:
        fv = self.expr(s.value)
        slot = self.bind(s.var)
        try:
            body = self.stmt(s.body)
        finally:
            self.unbind(s.var)
        return _set_then_run(slot, fv, body)

    def s_Allocate(self, s: S.Allocate) -> Fn:
        bslot = self.bind_buffer(s.buffer)
        alloc = self._alloc_fn(s.buffer)
        try:
            body = self.stmt(s.body)
        finally:
            self.unbind_buffer(s.buffer)
        return _set_then_run(bslot, alloc, body)

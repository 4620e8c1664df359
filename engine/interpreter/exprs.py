"""The closure compiler, expressions: every PrimExpr becomes ``f(env) -> value``.

Scalars are Python ints/bools and numpy floats (float32 arithmetic rounds like float32);
integer results wrap like C's fixed-width integers.  Expressions over vector lanes
(``Ramp``/``Broadcast``) or band lanes evaluate to numpy arrays."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.ir import expr as E
from engine.ir.dtype import element_of, is_float, is_int, lanes_of

from .band_run import band_if_then_else
from .errors import InterpretError
from .ops import ARITH, COMPARE, LOGIC, UNARY, safe_unary
from .scope import Scope
from .values import NC, Fn, const_value, int_limits, np_dtype, scalar_caster, vector_cast, wrapper


class ExprCompiler(Scope):
    """Compiles expressions (``e_<Node>`` methods; binary nodes through :attr:`BINARY`)."""

    def expr(self, e: Any) -> Fn:
        if isinstance(e, (bool, int, float, np.generic)):
            e = E.convert(e.item() if isinstance(e, np.generic) else e)
        c = const_value(e)
        if c is not NC:
            return lambda env, c=c: c
        kind = type(e).__name__
        binary = self.BINARY.get(kind)
        if binary is not None:
            method, arg = binary
            return method(self, e, arg)
        meth = getattr(self, "e_" + kind, None)
        if meth is None:
            raise InterpretError(f"the interpreter does not support the expression "
                                 f"{kind}{self.where()}")
        return meth(e)

    def e_BufferField(self, e: E.BufferField) -> Fn:
        raise InterpretError(f"{e.buffer.name}.{e.field} is used{self.where()}: the address "
                             "of a buffer is for opaque code, which the interpreter cannot "
                             "run")

    def e_Var(self, v: E.Var) -> Fn:
        if id(v) not in self.scope:
            raise InterpretError(
                f"variable {v.name!r} is used{self.where()} outside the loop, block or let "
                "that defines it")
        s = self.slots[id(v)]
        return lambda env: env[s]

    # binary operators -------------------------------------------------------
    def _arith(self, e: E.BinaryOp, op: str) -> Fn:
        ca, cb = const_value(e.a), const_value(e.b)
        fa, fb = self.expr(e.a), self.expr(e.b)
        wrap_needed = is_int(e.dtype) and not self._vec(e.a, e.b)
        right_const, left_const, general = ARITH[op]
        if cb is not NC:
            raw = right_const(fa, cb)
        elif ca is not NC:
            raw = left_const(ca, fb)
        else:
            raw = general(fa, fb)
        if not wrap_needed:
            return raw
        lo, hi, _, _ = int_limits(e.dtype)
        wrap = wrapper(e.dtype)

        def wrapped(env):
            r = raw(env)
            if lo <= r <= hi:
                return r
            return wrap(r)
        return wrapped

    def _division(self, e: E.BinaryOp, kind: str) -> Fn:
        fa, fb = self.expr(e.a), self.expr(e.b)
        where = self.where()
        vec = self._vec(e.a, e.b)
        if is_float(e.dtype):
            if kind == "div":
                return lambda env: fa(env) / fb(env)
            if kind == "floordiv":
                return lambda env: np.floor(fa(env) / fb(env))
            if kind == "floormod":
                def fmod(env):
                    a, b = fa(env), fb(env)
                    return a - np.floor(a / b) * b
                return fmod
            return lambda env: np.fmod(fa(env), fb(env))
        if not is_int(e.dtype):
            raise InterpretError(f"division of {e.dtype} values is not supported{where}")
        symbol = {"div": "/", "mod": "%", "floordiv": "//", "floormod": "%"}[kind]

        def zero():
            raise InterpretError(f"integer division by zero ({type(e).__name__}, "
                                 f"'{symbol}'){where}")
        if vec:
            dt = np_dtype(e.dtype)

            def vdiv(env):
                a = np.asarray(fa(env))
                b = np.asarray(fb(env))
                if np.any(b == 0):
                    zero()
                q = np.floor_divide(a, b)
                if kind == "floordiv":
                    return q.astype(dt)
                if kind == "floormod":
                    return (a - q * b).astype(dt)
                q = q + ((q < 0) & (q * b != a))
                if kind == "div":
                    return q.astype(dt)
                return (a - q * b).astype(dt)
            return vdiv
        wrap = wrapper(e.dtype)
        if kind == "floordiv":
            def floordiv(env):
                b = fb(env)
                if b == 0:
                    zero()
                return wrap(fa(env) // b)
            return floordiv
        if kind == "floormod":
            def floormod(env):
                b = fb(env)
                if b == 0:
                    zero()
                return fa(env) % b
            return floormod

        def truncdiv(env):
            a = fa(env)
            b = fb(env)
            if b == 0:
                zero()
            q = a // b
            if q < 0 and q * b != a:
                q += 1
            return wrap(q) if kind == "div" else a - q * b
        return truncdiv

    def _minmax(self, e: E.BinaryOp, is_max: bool) -> Fn:
        fa, fb = self.expr(e.a), self.expr(e.b)
        if self._vec(e.a, e.b):
            ufunc = np.maximum if is_max else np.minimum
            return lambda env: ufunc(fa(env), fb(env))
        if is_float(e.dtype):  # NaN-propagating, like numpy (uninitialised data shows up)
            if is_max:
                def fmax(env):
                    a, b = fa(env), fb(env)
                    return a if (a >= b or a != a) else b
                return fmax

            def fmin(env):
                a, b = fa(env), fb(env)
                return a if (a <= b or a != a) else b
            return fmin
        if is_max:
            def imax(env):
                a, b = fa(env), fb(env)
                return a if a >= b else b
            return imax

        def imin(env):
            a, b = fa(env), fb(env)
            return a if a <= b else b
        return imin

    def _compare(self, e: E.BinaryOp, kind: str) -> Fn:
        fa, fb = self.expr(e.a), self.expr(e.b)
        return COMPARE[kind](fa, fb)

    def _logic(self, e: E.BinaryOp, kind: str) -> Fn:
        fa, fb = self.expr(e.a), self.expr(e.b)
        lanewise, scalar = LOGIC[kind]
        if self._vec(e.a, e.b):
            return lambda env: lanewise(fa(env), fb(env))
        return scalar(fa, fb)

    #: binary node kind -> (the method compiling it, its second argument)
    BINARY = {
        "Add": (_arith, "+"), "Sub": (_arith, "-"), "Mul": (_arith, "*"),
        "Div": (_division, "div"), "Mod": (_division, "mod"),
        "FloorDiv": (_division, "floordiv"), "FloorMod": (_division, "floormod"),
        "Max": (_minmax, True), "Min": (_minmax, False),
        "EQ": (_compare, "EQ"), "NE": (_compare, "NE"), "LT": (_compare, "LT"),
        "LE": (_compare, "LE"), "GT": (_compare, "GT"), "GE": (_compare, "GE"),
        "And": (_logic, "And"), "Or": (_logic, "Or"),
    }

    # other expressions --------------------------------------------------------
    def e_Not(self, e):
        fa = self.expr(e.a)
        if self._vec(e.a):
            return lambda env: np.logical_not(fa(env))
        return lambda env: not fa(env)

    def e_Select(self, e):
        fc, fa, fb = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
        if self._vec(e.condition, e.true_value, e.false_value):
            dt = np_dtype(e.dtype)
            return lambda env: np.where(fc(env), fa(env), fb(env)).astype(dt, copy=False)

        def select(env):
            c = fc(env)
            a = fa(env)
            b = fb(env)
            return a if c else b
        return select

    def e_Cast(self, e):
        fv = self.expr(e.value)
        lanes = lanes_of(e.dtype)
        if lanes > 1 or self._vec(e.value):
            base = element_of(e.dtype)
            return lambda env: vector_cast(fv(env), base, lanes)
        cast = scalar_caster(e.dtype)
        src_float = is_float(e.value.dtype)
        if is_int(e.dtype) and src_float:
            where = self.where()

            def f2i(env):
                v = fv(env)
                if v != v or v in (np.inf, -np.inf):
                    raise InterpretError(f"cannot cast {v} to {e.dtype}{where}")
                return cast(v)
            return f2i
        return lambda env: cast(fv(env))

    def e_Call(self, e: E.Call):
        op = e.op
        if op == "assume":   # a fact the program may rely on: nothing to compute
            return lambda env: True
        if op in E.OPAQUE_CALLS:
            raise InterpretError(f"T.{op}{self.where()} is opaque code (one of TVM's "
                                 "builtins for code outside TensorIR), which the "
                                 "interpreter cannot run")
        if op not in E.INTRINSICS:
            raise InterpretError(f"unknown intrinsic T.{op}{self.where()}; known: "
                                 f"{', '.join(sorted(E.INTRINSICS))}")
        if len(e.args) != E.INTRINSICS[op]:
            raise InterpretError(f"T.{op} takes {E.INTRINSICS[op]} argument(s), got "
                                 f"{len(e.args)}{self.where()}")
        if op == "if_then_else":
            return self._if_then_else(e)
        fs = [self.expr(a) for a in e.args]
        vec = lanes_of(e.dtype) > 1 or self._vec(*e.args)
        if op == "likely":
            return fs[0]
        if op == "abs":
            if is_int(e.dtype) and not vec:
                wrap = wrapper(e.dtype)
                return lambda env: wrap(abs(fs[0](env)))
            return lambda env: np.abs(fs[0](env))
        if op == "pow":
            a, b = fs
            if vec or not is_float(e.dtype):
                return lambda env: np.power(a(env), b(env))
            t = np_dtype(e.dtype).type
            return lambda env: t(np.power(a(env), b(env)))
        if op == "fma":
            a, b, c = fs
            return lambda env: a(env) * b(env) + c(env)
        if op in E.BITWISE:
            return self._bitwise(e, fs)
        if not is_float(e.dtype):
            raise InterpretError(f"T.{op} needs a float argument, got {e.dtype}{self.where()}")
        fn = safe_unary(UNARY[op], e.dtype)
        a = fs[0]
        return lambda env: fn(a(env))

    def _bitwise(self, e: E.Call, fs: list) -> Fn:
        """``T.bitwise_*`` and ``T.shift_*``: the operands as C integers of the call's
        dtype; a shift by a negative amount or by the width or more is refused (C leaves it
        undefined)."""
        if not all(is_int(a.dtype) for a in e.args):
            raise InterpretError(f"T.{e.op} needs integers, got "
                                 f"{', '.join(a.dtype for a in e.args)}{self.where()}")
        dt = np_dtype(e.dtype)
        bits = dt.itemsize * 8
        where = self.where()
        op = e.op

        def cast(v):
            return v.astype(dt, copy=False) if isinstance(v, np.ndarray) else dt.type(v)

        if op == "bitwise_not":
            a = fs[0]
            return lambda env: np.invert(cast(a(env)))
        a, b = fs
        if op in ("shift_left", "shift_right"):
            fn = np.left_shift if op == "shift_left" else np.right_shift

            def shift(env):
                x, n = cast(a(env)), cast(b(env))
                if np.any(n < 0) or np.any(n >= bits):
                    raise InterpretError(f"T.{op} by {n} bits of a {e.dtype}{where}: a "
                                         f"shift by less than 0 or {bits} or more bits is "
                                         "undefined")
                return fn(x, n)
            return shift
        fn = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
              "bitwise_xor": np.bitwise_xor}[op]
        return lambda env: fn(cast(a(env)), cast(b(env)))

    def _if_then_else(self, e: E.Call):
        fc, fa, fb = (self.expr(a) for a in e.args)
        if not self._vec(*e.args) and lanes_of(e.dtype) == 1:
            def ite(env):
                return fa(env) if fc(env) else fb(env)
            return ite
        dt = np_dtype(e.dtype)
        if self.varying and lanes_of(e.dtype) == 1:
            return band_if_then_else(fc, fa, fb, dt, self.vslots)
        lenient = self.lenient

        def vite(env):
            c = np.asarray(fc(env))
            if c.ndim == 0 or c.all():
                if c.ndim == 0 and not c:
                    return fb(env)
                return fa(env) if c.ndim == 0 or c.all() else fb(env)
            if not c.any():
                return fb(env)
            lenient[0] += 1  # lanes not chosen may index outside buffers: clip them
            try:
                a, b = fa(env), fb(env)
            finally:
                lenient[0] -= 1
            return np.where(c, a, b).astype(dt, copy=False)
        return vite

    def e_Ramp(self, e: E.Ramp):
        fb, fs = self.expr(e.base), self.expr(e.stride)
        lanes = int(e.lanes)
        dt = np_dtype(e.base.dtype)
        steps = np.arange(lanes, dtype=np.int64)
        return lambda env: (fb(env) + fs(env) * steps).astype(dt)

    def e_Broadcast(self, e: E.Broadcast):
        fv = self.expr(e.value)
        lanes = int(e.lanes)
        dt = np_dtype(e.value.dtype)
        return lambda env: np.full(lanes, fv(env), dtype=dt)

    def e_Let(self, e: E.Let):
        fv = self.expr(e.value)
        if self._depends(e.value):
            self.varying.add(id(e.var))
            self.vslots.append(self.slot(e.var))
        s = self.bind(e.var)
        try:
            fb = self.expr(e.body)
        finally:
            self.unbind(e.var)

        def let(env):
            env[s] = fv(env)
            return fb(env)
        return let

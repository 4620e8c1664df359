"""Reference interpreter: runs any PrimFunc on numpy arrays (the engine's semantics).

``engine.interpret(mod, "mm_relu", a, b, c)`` fills the output arrays in place, like a
built function.  Everything the LLVM backend and the schedule primitives do is checked
against this interpreter, so it defines what each IR node means:

* ``For`` of every kind runs its body for ``min <= v < min + extent`` in order (parallel,
  vectorized and unrolled loops mean the same as serial ones).
* ``BlockRealize`` evaluates the bindings, skips the block when the predicate is false,
  checks every binding lies in its iter var's domain, allocates the block's
  ``alloc_buffers``, runs ``init`` when every reduce-axis binding equals its domain's min
  (as TVM's lowering does), then the body.
* Fresh buffers (``alloc_buffers``, ``Allocate``) are *not* zeroed — float buffers are
  filled with NaN and integer buffers with the type's lowest value — so a schedule that
  reads uninitialised data shows up in the result.
* Integer ``Div``/``Mod`` truncate toward zero (C); ``FloorDiv``/``FloorMod`` round toward
  minus infinity; integer results wrap around like C's fixed-width integers; ``Cast``
  truncates floats toward zero and wraps integers.  float32 arithmetic rounds like float32.
* ``Ramp``/``Broadcast`` values are numpy arrays of lanes; loads/stores with vector indices
  gather/scatter.  ``if_then_else`` evaluates only the chosen value, ``Select`` both.
* Any access outside a buffer raises :class:`OutOfBoundsError` naming the buffer, the
  index and the block (never a silent wrap-around).

The IR is compiled once into nested Python closures (cached per PrimFunc).  Innermost
perfect loop nests ("bands") whose body is a single store run as numpy operations over all
their iterations at once when that cannot change the result: either every iteration writes
a different element and reads the stored buffer only at that element (checked again at run
time; otherwise the band runs serially), or the band is a +/max/min reduction into one
element, combined in the serial order (``np.add.accumulate``), so float32 rounding is the
same bit for bit.  ``interpret(..., vectorize=False)`` turns this off.  mm_relu at n=128
runs in about half a second, the default conv2d in about one.
"""
from __future__ import annotations

import math
import weakref
from typing import Any, Callable

import numpy as np

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import (element_of, is_bool, is_float, is_int, is_uint, lanes_of,
                             bits_of)
from engine.ir.function import IRModule, PrimFunc
from engine.ir.functor import collect_vars

__all__ = ["interpret", "compile_func", "CompiledFunc", "InterpretError", "ArgumentError",
           "OutOfBoundsError"]


class InterpretError(RuntimeError):
    """The program cannot be run: an undefined variable, a division by zero, a binding
    outside its block's domain, an unknown intrinsic, ..."""


class ArgumentError(InterpretError, ValueError):
    """The arrays passed do not match the function's parameters (count, dtype, shape)."""


class OutOfBoundsError(InterpretError, IndexError):
    """A buffer was read or written outside its shape."""


_NC = object()  # "not a constant"
_Fn = Callable[[list], Any]


def _np_dtype(dtype: str) -> np.dtype:
    base = element_of(dtype)
    if base == "handle":
        raise InterpretError("buffers of dtype 'handle' cannot be interpreted")
    return np.dtype(np.bool_) if base == "bool" else np.dtype(base)


def _int_limits(dtype: str) -> tuple[int, int, int, bool]:
    base = element_of(dtype)
    bits = bits_of(base)
    signed = not is_uint(base)
    lo = -(1 << (bits - 1)) if signed else 0
    hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    return lo, hi, bits, signed


def _wrapper(dtype: str) -> Callable[[int], int]:
    lo, hi, bits, signed = _int_limits(dtype)
    mask = (1 << bits) - 1
    half = 1 << bits

    def wrap(v: int) -> int:
        if lo <= v <= hi:
            return v
        v &= mask
        if signed and v > hi:
            v -= half
        return v
    return wrap


def _scalar_caster(dtype: str) -> Callable[[Any], Any]:
    """Python/numpy value -> the canonical scalar of ``dtype`` (numpy float, Python int/bool)."""
    base = element_of(dtype)
    if is_float(base):
        return np.dtype(base).type
    if is_bool(base):
        return bool
    if is_int(base):
        wrap = _wrapper(base)

        def to_int(v: Any) -> int:
            if isinstance(v, (float, np.floating)):
                if not math.isfinite(v):
                    raise InterpretError(f"cannot convert {v} to {base}")
                return wrap(int(v))  # int() truncates toward zero, as C does
            return wrap(int(v))
        return to_int
    if base == "handle":
        return lambda v: v
    raise InterpretError(f"unsupported dtype {dtype!r}")


def _vector_cast(v: Any, dtype: str, lanes: int) -> np.ndarray:
    target = _np_dtype(dtype)
    arr = np.asarray(v)
    if arr.ndim == 0:
        arr = np.full(lanes, arr)
    if is_bool(dtype):
        return arr != 0
    if is_int(dtype) and arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise InterpretError(f"cannot convert non-finite values to {dtype}")
        arr = np.trunc(arr).astype(np.int64)
    if is_int(dtype) and arr.dtype.kind in "iub":
        arr64 = arr.astype(np.int64) if arr.dtype != np.uint64 else arr
        return arr64.astype(target)  # two's-complement wrap
    return arr.astype(target)


def _fmt_index(idx: tuple) -> str:
    parts = []
    for v in idx:
        if isinstance(v, np.ndarray):
            parts.append("[" + ", ".join(str(int(x)) for x in v) + "]")
        else:
            parts.append(str(v))
    return "[" + ", ".join(parts) + "]"


def _safe_unary(fn: Callable, dtype: str) -> Callable:
    t = _np_dtype(dtype).type if is_float(dtype) else None

    def f(x):
        r = fn(x)
        if t is not None and not isinstance(r, np.ndarray):
            return t(r)
        return r
    return f


def _erf(x):
    if isinstance(x, np.ndarray):
        return np.vectorize(math.erf, otypes=[x.dtype])(x)
    return type(x)(math.erf(float(x))) if isinstance(x, np.floating) else math.erf(x)


def _sigmoid(x):
    one = x.dtype.type(1) if hasattr(x, "dtype") else 1.0
    return one / (one + np.exp(-x))


def _rsqrt(x):
    one = x.dtype.type(1) if hasattr(x, "dtype") else 1.0
    return one / np.sqrt(x)


_UNARY: dict[str, Callable] = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": _rsqrt, "tanh": np.tanh, "sigmoid": _sigmoid, "fabs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc, "sin": np.sin,
    "cos": np.cos, "erf": _erf,
}


class _Compiler:
    """Compiles one PrimFunc into closures ``f(env)`` over a flat list of slots."""

    def __init__(self, func: PrimFunc, vectorize: bool = True):
        self.func = func
        self.vectorize = vectorize
        self.varying: set[int] = set()       # var ids holding one value per lane (bands)
        self.vslots: list[int] = []          # their slots
        self.slots: dict[int, int] = {}
        self.nslots = 0
        self.scope: dict[int, int] = {}      # var id -> nesting count (vars in scope)
        self.buf_scope: dict[int, int] = {}  # buffer id -> nesting count
        self.blocks: list[str] = []          # enclosing block names (for messages)
        self.lenient = [0]                   # >0 while evaluating masked vector branches
        self.stored: set[int] = set()        # buffers written (params must be writable)
        self.nbands = 0                      # loop nests compiled to numpy operations
        self.in_fallback = 0                 # >0 while compiling a band's serial fallback

    # slots ----------------------------------------------------------------
    def slot(self, obj: Any) -> int:
        s = self.slots.get(id(obj))
        if s is None:
            s = self.slots[id(obj)] = self.nslots
            self.nslots += 1
        return s

    def bind(self, v: E.Var) -> int:
        self.scope[id(v)] = self.scope.get(id(v), 0) + 1
        return self.slot(v)

    def unbind(self, v: E.Var) -> None:
        n = self.scope[id(v)] - 1
        if n:
            self.scope[id(v)] = n
        else:
            del self.scope[id(v)]

    def bind_buffer(self, b: Buffer) -> int:
        self.buf_scope[id(b)] = self.buf_scope.get(id(b), 0) + 1
        return self.slot(b)

    def unbind_buffer(self, b: Buffer) -> None:
        n = self.buf_scope[id(b)] - 1
        if n:
            self.buf_scope[id(b)] = n
        else:
            del self.buf_scope[id(b)]

    def where(self) -> str:
        return f" in block {self.blocks[-1]!r}" if self.blocks else ""

    # expressions ----------------------------------------------------------
    def const_value(self, e: Any) -> Any:
        if isinstance(e, E.IntImm):
            if is_bool(e.dtype):
                return bool(e.value)
            return _wrapper(e.dtype)(e.value) if is_int(e.dtype) else e.value
        if isinstance(e, E.FloatImm):
            return _np_dtype(e.dtype).type(e.value)
        if isinstance(e, E.StringImm):
            return e.value
        return _NC

    def expr(self, e: Any) -> _Fn:
        if isinstance(e, (bool, int, float, np.generic)):
            e = E.convert(e.item() if isinstance(e, np.generic) else e)
        c = self.const_value(e)
        if c is not _NC:
            return lambda env, c=c: c
        meth = getattr(self, "e_" + type(e).__name__, None)
        if meth is None:
            raise InterpretError(f"the interpreter does not support the expression "
                                 f"{type(e).__name__}{self.where()}")
        return meth(e)

    def e_Var(self, v: E.Var) -> _Fn:
        if id(v) not in self.scope:
            raise InterpretError(
                f"variable {v.name!r} is used{self.where()} outside the loop, block or let "
                "that defines it")
        s = self.slots[id(v)]
        return lambda env: env[s]

    def _vec(self, *es: E.PrimExpr) -> bool:
        """Does any of ``es`` evaluate to a numpy array (vector lanes or band lanes)?"""
        if any(lanes_of(x.dtype) > 1 for x in es):
            return True
        return bool(self.varying) and any(self._depends(x) for x in es)

    def _depends(self, e: Any) -> bool:
        """Does ``e`` use a variable that holds one value per lane of the current band?"""
        varying = self.varying
        if not varying:
            return False
        return any(id(v) in varying for v in collect_vars(e))

    def _binary(self, e: E.BinaryOp, make: Callable[[_Fn, _Fn, Any, Any], _Fn]) -> _Fn:
        ca, cb = self.const_value(e.a), self.const_value(e.b)
        fa, fb = self.expr(e.a), self.expr(e.b)
        return make(fa, fb, ca, cb)

    def e_Add(self, e):
        return self._arith(e, "+")

    def e_Sub(self, e):
        return self._arith(e, "-")

    def e_Mul(self, e):
        return self._arith(e, "*")

    def _arith(self, e: E.BinaryOp, op: str) -> _Fn:
        ca, cb = self.const_value(e.a), self.const_value(e.b)
        fa, fb = self.expr(e.a), self.expr(e.b)
        wrap_needed = is_int(e.dtype) and not self._vec(e.a, e.b)
        if op == "+":
            if cb is not _NC:
                raw = lambda env: fa(env) + cb  # noqa: E731
            elif ca is not _NC:
                raw = lambda env: ca + fb(env)  # noqa: E731
            else:
                raw = lambda env: fa(env) + fb(env)  # noqa: E731
        elif op == "-":
            if cb is not _NC:
                raw = lambda env: fa(env) - cb  # noqa: E731
            elif ca is not _NC:
                raw = lambda env: ca - fb(env)  # noqa: E731
            else:
                raw = lambda env: fa(env) - fb(env)  # noqa: E731
        else:
            if cb is not _NC:
                raw = lambda env: fa(env) * cb  # noqa: E731
            elif ca is not _NC:
                raw = lambda env: ca * fb(env)  # noqa: E731
            else:
                raw = lambda env: fa(env) * fb(env)  # noqa: E731
        if not wrap_needed:
            return raw
        lo, hi, _, _ = _int_limits(e.dtype)
        wrap = _wrapper(e.dtype)

        def wrapped(env):
            r = raw(env)
            if lo <= r <= hi:
                return r
            return wrap(r)
        return wrapped

    def _div_common(self, e: E.BinaryOp, kind: str) -> _Fn:
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
            dt = _np_dtype(e.dtype)

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
        wrap = _wrapper(e.dtype)
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

    def e_Div(self, e):
        return self._div_common(e, "div")

    def e_Mod(self, e):
        return self._div_common(e, "mod")

    def e_FloorDiv(self, e):
        return self._div_common(e, "floordiv")

    def e_FloorMod(self, e):
        return self._div_common(e, "floormod")

    def _minmax(self, e: E.BinaryOp, is_max: bool) -> _Fn:
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

    def e_Max(self, e):
        return self._minmax(e, True)

    def e_Min(self, e):
        return self._minmax(e, False)

    def _cmp(self, e, fn_scalar):
        fa, fb = self.expr(e.a), self.expr(e.b)
        return fn_scalar(fa, fb)

    def e_EQ(self, e):
        return self._cmp(e, lambda fa, fb: lambda env: fa(env) == fb(env))

    def e_NE(self, e):
        return self._cmp(e, lambda fa, fb: lambda env: fa(env) != fb(env))

    def e_LT(self, e):
        return self._cmp(e, lambda fa, fb: lambda env: fa(env) < fb(env))

    def e_LE(self, e):
        return self._cmp(e, lambda fa, fb: lambda env: fa(env) <= fb(env))

    def e_GT(self, e):
        return self._cmp(e, lambda fa, fb: lambda env: fa(env) > fb(env))

    def e_GE(self, e):
        return self._cmp(e, lambda fa, fb: lambda env: fa(env) >= fb(env))

    def e_And(self, e):
        fa, fb = self.expr(e.a), self.expr(e.b)
        if self._vec(e.a, e.b):
            return lambda env: np.logical_and(fa(env), fb(env))
        return lambda env: bool(fa(env)) and bool(fb(env))

    def e_Or(self, e):
        fa, fb = self.expr(e.a), self.expr(e.b)
        if self._vec(e.a, e.b):
            return lambda env: np.logical_or(fa(env), fb(env))
        return lambda env: bool(fa(env)) or bool(fb(env))

    def e_Not(self, e):
        fa = self.expr(e.a)
        if self._vec(e.a):
            return lambda env: np.logical_not(fa(env))
        return lambda env: not fa(env)

    def e_Select(self, e):
        fc, fa, fb = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
        if self._vec(e.condition, e.true_value, e.false_value):
            dt = _np_dtype(e.dtype)
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
            return lambda env: _vector_cast(fv(env), base, lanes)
        cast = _scalar_caster(e.dtype)
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
                wrap = _wrapper(e.dtype)
                return lambda env: wrap(abs(fs[0](env)))
            return lambda env: np.abs(fs[0](env))
        if op == "pow":
            a, b = fs
            if vec or not is_float(e.dtype):
                return lambda env: np.power(a(env), b(env))
            t = _np_dtype(e.dtype).type
            return lambda env: t(np.power(a(env), b(env)))
        if op == "fma":
            a, b, c = fs
            return lambda env: a(env) * b(env) + c(env)
        if not is_float(e.dtype):
            raise InterpretError(f"T.{op} needs a float argument, got {e.dtype}{self.where()}")
        fn = _safe_unary(_UNARY[op], e.dtype)
        a = fs[0]
        return lambda env: fn(a(env))

    def _if_then_else(self, e: E.Call):
        fc, fa, fb = (self.expr(a) for a in e.args)
        if not self._vec(*e.args) and lanes_of(e.dtype) == 1:
            def ite(env):
                return fa(env) if fc(env) else fb(env)
            return ite
        dt = _np_dtype(e.dtype)
        if self.varying and lanes_of(e.dtype) == 1:
            return self._band_if_then_else(fc, fa, fb, dt)
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
        dt = _np_dtype(e.base.dtype)
        steps = np.arange(lanes, dtype=np.int64)
        return lambda env: (fb(env) + fs(env) * steps).astype(dt)

    def e_Broadcast(self, e: E.Broadcast):
        fv = self.expr(e.value)
        lanes = int(e.lanes)
        dt = _np_dtype(e.value.dtype)
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

    # buffer access --------------------------------------------------------
    def _buffer_slot(self, buf: Buffer, what: str) -> int:
        if id(buf) not in self.buf_scope:
            raise InterpretError(
                f"buffer {buf.name!r} is {what}{self.where()} but is neither a parameter of "
                f"{self.func.name!r} nor allocated around this point (T.alloc_buffer in an "
                "enclosing block, or Allocate)")
        return self.slots[id(buf)]

    def _oob(self, buf: Buffer, idx: tuple, what: str, where: str) -> None:
        shape = tuple(E.as_const_int(s) if E.as_const_int(s) is not None else "?"
                      for s in buf.shape)
        raise OutOfBoundsError(
            f"out-of-bounds {what} of buffer {buf.name!r} at index {_fmt_index(idx)}{where}; "
            f"its shape is {shape}")

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
        slot = self._buffer_slot(buf, "read")
        if len(e.indices) != len(buf.shape) and not (buf.strides or buf.elem_offset):
            raise InterpretError(f"buffer {buf.name!r} has {len(buf.shape)} dimension(s) but "
                                 f"is read with {len(e.indices)} index(es){self.where()}")
        where = self.where()
        fidx = [self.expr(i) for i in e.indices]
        vec = self._vec(*e.indices)
        flat = self._flat_index(buf)
        as_py = not is_float(buf.dtype)
        oob = self._oob
        if vec or flat is not None:
            lenient = self.lenient

            def vload(env):
                idx = tuple(f(env) for f in fidx)
                arr = env[slot]
                if flat is not None:
                    idx = (flat(idx),)
                idx = _check_vector_index(arr, idx, buf, "read", where, lenient[0], oob)
                v = arr[idx]
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

    # statements -------------------------------------------------------------
    def stmt(self, s: Any) -> _Fn:
        if s is None:
            return lambda env: None
        meth = getattr(self, "s_" + type(s).__name__, None)
        if meth is None:
            raise InterpretError(f"the interpreter does not support the statement "
                                 f"{type(s).__name__}{self.where()}")
        return meth(s)

    def s_SeqStmt(self, s: S.SeqStmt) -> _Fn:
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

    def s_For(self, s: S.For) -> _Fn:
        if self.vectorize and not self.varying and not self.in_fallback:
            plan = self._band_plan(s)
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

    def _scalar_for(self, s: S.For) -> _Fn:
        cmin, cext = self.const_value(s.min), self.const_value(s.extent)
        fmin, fext = self.expr(s.min), self.expr(s.extent)
        slot = self.bind(s.loop_var)
        try:
            body = self.stmt(s.body)
        finally:
            self.unbind(s.loop_var)
        if cmin is not _NC and cext is not _NC:
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
        dt = _np_dtype(buf.dtype)
        shape_fs = [self.expr(x) for x in buf.shape]
        fill: Any
        if dt.kind == "f":
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

    def s_BlockRealize(self, s: S.BlockRealize) -> _Fn:
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
                         self.const_value(iv.dom.min), self.const_value(iv.dom.extent)))
        slots = [self.bind(iv.var) for iv in blk.iter_vars]
        self.blocks.append(blk.name_hint)
        allocs = []
        try:
            pred_c = self.const_value(s.predicate)
            pred = None if (pred_c is not _NC and pred_c) else self.expr(s.predicate)
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
        all_const = all(d[2] is not _NC and d[3] is not _NC for d in doms)
        names = [iv.var.name for iv in blk.iter_vars]
        binds = tuple(zip(slots, fvals))
        checks = tuple((slot, d[2], d[2] + d[3], nm) for slot, d, nm in zip(slots, doms, names)
                       ) if all_const else None
        red_c = tuple((slot, d[2]) for slot, d in red) if all_const else None
        allocs_t = tuple(allocs)

        def bad_binding(nm, v, lo, hi):
            raise InterpretError(
                f"block {name!r}: iter var {nm} is bound to {v}, outside its domain "
                f"[{lo}, {hi}) — the loops around the block run past the block's iteration "
                "space (a split or tile without a T.where predicate?)")

        def realize(env):
            for slot, f in binds:
                env[slot] = f(env)
            if pred is not None and not pred(env):
                return
            if checks is not None:
                for slot, lo, hi, nm in checks:
                    v = env[slot]
                    if not lo <= v < hi:
                        bad_binding(nm, v, lo, hi)
                do_init = init is not None and all(env[slot] == lo for slot, lo in red_c)
            else:
                do_init = init is not None
                for (slot, (fmn, fex, _, _)), nm in zip(zip(slots, doms), names):
                    lo = fmn(env)
                    hi = lo + fex(env)
                    v = env[slot]
                    if not lo <= v < hi:
                        bad_binding(nm, v, lo, hi)
                if init is not None:
                    do_init = all(env[slot] == d[0](env) for slot, d in red)
            for bslot, alloc in allocs_t:
                env[bslot] = alloc(env)
            if do_init:
                init(env)
            body(env)

        if not allocs_t and checks is not None and pred is None and len(binds) <= 4:
            return self._fast_realize(binds, checks, red_c, init, body, bad_binding)
        return realize

    @staticmethod
    def _fast_realize(binds, checks, red_c, init, body, bad_binding) -> _Fn:
        """BlockRealize with constant domains, no predicate and no allocation."""
        spec = tuple((slot, f, lo, hi, nm) for (slot, f), (_, lo, hi, nm) in zip(binds, checks))
        if init is None:
            def realize_plain(env):
                for slot, f, lo, hi, nm in spec:
                    v = f(env)
                    if not lo <= v < hi:
                        bad_binding(nm, v, lo, hi)
                    env[slot] = v
                body(env)
            return realize_plain

        def realize_reduce(env):
            for slot, f, lo, hi, nm in spec:
                v = f(env)
                if not lo <= v < hi:
                    bad_binding(nm, v, lo, hi)
                env[slot] = v
            for slot, lo in red_c:
                if env[slot] != lo:
                    break
            else:
                init(env)
            body(env)
        return realize_reduce

    def s_Block(self, s: S.Block) -> _Fn:
        if s.iter_vars:
            raise InterpretError(f"block {s.name_hint!r} has iter vars but no BlockRealize "
                                 "binding them")
        return self.s_BlockRealize(S.BlockRealize((), E.IntImm("bool", 1), s))

    def s_BufferStore(self, s: S.BufferStore) -> _Fn:
        buf = s.buffer
        slot = self._buffer_slot(buf, "written")
        self.stored.add(id(buf))
        if len(s.indices) != len(buf.shape) and not (buf.strides or buf.elem_offset):
            raise InterpretError(f"buffer {buf.name!r} has {len(buf.shape)} dimension(s) but "
                                 f"is written with {len(s.indices)} index(es){self.where()}")
        where = self.where()
        fv = self.expr(s.value)
        fidx = [self.expr(i) for i in s.indices]
        vec = any(lanes_of(i.dtype) > 1 for i in s.indices)
        flat = self._flat_index(buf)
        oob = self._oob
        if vec or flat is not None:
            def vstore(env):
                v = fv(env)
                idx = tuple(f(env) for f in fidx)
                arr = env[slot]
                if flat is not None:
                    idx = (flat(idx),)
                idx = _check_vector_index(arr, idx, buf, "write", where, 0, oob)
                arr[idx] = v
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

    def s_IfThenElse(self, s: S.IfThenElse) -> _Fn:
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

    def s_Evaluate(self, s: S.Evaluate) -> _Fn:
        fv = self.expr(s.value)

        def evaluate(env):
            fv(env)
        return evaluate

    def s_LetStmt(self, s: S.LetStmt) -> _Fn:
        fv = self.expr(s.value)
        slot = self.bind(s.var)
        try:
            body = self.stmt(s.body)
        finally:
            self.unbind(s.var)
        return _set_then_run(slot, fv, body)

    def s_Allocate(self, s: S.Allocate) -> _Fn:
        bslot = self.bind_buffer(s.buffer)
        alloc = self._alloc_fn(s.buffer)
        try:
            body = self.stmt(s.body)
        finally:
            self.unbind_buffer(s.buffer)
        return _set_then_run(bslot, alloc, body)


    # bands: innermost loop nests run as numpy operations ---------------------
    def _band_if_then_else(self, fc: _Fn, fa: _Fn, fb: _Fn, dt: np.dtype) -> _Fn:
        """``if_then_else`` over band lanes: each branch is evaluated only on its lanes."""
        vslots = self.vslots

        def ite(env):
            c = fc(env)
            if not isinstance(c, np.ndarray):
                return fa(env) if c else fb(env)
            if c.all():
                return fa(env)
            if not c.any():
                return fb(env)
            n = c.shape[0]
            on, off = np.flatnonzero(c), np.flatnonzero(~c)
            a = _eval_on_lanes(env, vslots, n, on, fa)
            b = _eval_on_lanes(env, vslots, n, off, fb)
            out = np.empty(n, dtype=dt)
            out[on] = a
            out[off] = b
            return out
        return ite

    def _band_plan(self, s: S.For) -> "_BandPlan | None":
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
            if c != cls or lanes * ext > _BAND_MAX_LANES:
                break
            band.insert(0, lp)
            lanes *= ext
        if not band or lanes < _BAND_MIN_LANES:
            return None
        return _BandPlan(band, cls, realize, store, reduction, lanes)

    def _compile_band(self, plan: "_BandPlan") -> Callable[[list], bool] | None:
        saved_varying, saved_vslots = self.varying, self.vslots
        self.varying, self.vslots = set(), []
        bound: list[E.Var] = []
        try:
            grids = []
            lanes = plan.lanes
            stride = lanes
            for lp in plan.loops:
                lo, ext = E.as_const_int(lp.min), E.as_const_int(lp.extent)
                stride //= ext
                dt = _np_dtype(lp.loop_var.dtype)
                grid = (lo + (np.arange(lanes, dtype=np.int64) // stride) % ext).astype(dt)
                grid.flags.writeable = False
                slot = self.bind(lp.loop_var)
                bound.append(lp.loop_var)
                self.varying.add(id(lp.loop_var))
                self.vslots.append(slot)
                grids.append((slot, grid))
            return self._band_body_fn(plan, grids, bound)
        finally:
            for v in reversed(bound):
                self.unbind(v)
            self.varying, self.vslots = saved_varying, saved_vslots

    def _band_body_fn(self, plan: "_BandPlan", grids: list, bound: list
                      ) -> Callable[[list], bool] | None:
        realize, store = plan.realize, plan.store
        vslots = self.vslots
        binds: list = []
        checks: list = []
        red_slots: list = []
        pred = init_val = init_mask = None
        name = realize.block.name_hint if realize is not None else None
        if realize is not None:
            blk = realize.block
            for iv, val in zip(blk.iter_vars, realize.iter_values):
                f = self.expr(val)
                varying = self._depends(val)
                slot = self.bind(iv.var)
                bound.append(iv.var)
                if varying:
                    self.varying.add(id(iv.var))
                    self.vslots.append(slot)
                lo, ext = E.as_const_int(iv.dom.min), E.as_const_int(iv.dom.extent)
                if lo is None or ext is None:
                    return None
                binds.append((slot, f))
                checks.append((slot, lo, lo + ext, iv.var.name))
                if iv.iter_type is S.IterType.REDUCE:
                    red_slots.append((slot, lo))
            pc = self.const_value(realize.predicate)
            if not (pc is not _NC and pc):
                pred = self.expr(realize.predicate)
            self.blocks.append(name)
        try:
            buf = store.buffer
            sslot = self._buffer_slot(buf, "written")
            self.stored.add(id(buf))
            where = self.where()
            fidx = [self.expr(i) for i in store.indices]
            if realize is not None and realize.block.init is not None:
                init_val = self.expr(realize.block.init.value)
                init_mask = tuple(red_slots)
            if plan.cls == "R":
                term = self.expr(plan.reduction[1])
            else:
                fval = self.expr(store.value)
        finally:
            if realize is not None:
                self.blocks.pop()
        shape = tuple(E.as_const_int(x) for x in buf.shape)
        if any(x is None for x in shape):
            return None
        dt = _np_dtype(buf.dtype)
        oob = self._oob
        op = plan.reduction[0] if plan.cls == "R" else None

        def bad_binding(nm, v, lo, hi):
            raise InterpretError(
                f"block {name!r}: iter var {nm} is bound to {v}, outside its domain "
                f"[{lo}, {hi}) — the loops around the block run past the block's iteration "
                "space (a split or tile without a T.where predicate?)")

        def run(env) -> bool:
            for slot, grid in grids:
                env[slot] = grid
            n = plan.lanes
            for slot, f in binds:
                env[slot] = f(env)
            if pred is not None:
                m = pred(env)
                if isinstance(m, np.ndarray):
                    if not m.all():
                        keep = np.flatnonzero(m)
                        if keep.size == 0:
                            return True
                        _take_lanes(env, [(sl, env[sl]) for sl in vslots], n, keep)
                        n = keep.size
                elif not m:
                    return True
            for slot, lo, hi, nm in checks:
                v = env[slot]
                if isinstance(v, np.ndarray):
                    bad = (v < lo) | (v >= hi)
                    if bad.any():
                        bad_binding(nm, int(v[np.argmax(bad)]), lo, hi)
                elif not lo <= v < hi:
                    bad_binding(nm, v, lo, hi)
            arr = env[sslot]
            idx = tuple(f(env) for f in fidx)
            mask = None
            if init_mask is not None:
                mask = True
                for slot, lo in init_mask:
                    mask = mask & (env[slot] == lo)
            if op is None:
                return _band_elementwise(env, arr, idx, n, shape, buf, where, oob, mask,
                                         init_val, fval, vslots)
            return _band_reduce(env, arr, idx, n, buf, where, oob, mask, init_val, term, op,
                                dt, vslots)
        return run

def _check_vector_index(arr: np.ndarray, idx: tuple, buf: Buffer, what: str, where: str,
                        lenient: int, oob) -> tuple:
    """Bounds-check an index tuple whose entries may be lane arrays; an error names the
    first offending lane's index (in iteration order)."""
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
                oob(buf, idx, what, where)
        out.append(v)
    if bad_any is not None:
        k = int(np.argmax(bad_any))
        first = tuple(int(np.broadcast_to(v, bad_any.shape)[k]) if isinstance(v, np.ndarray)
                      else v for v in idx)
        oob(buf, first, what, where)
    return tuple(out)

_BAND_MIN_LANES = 16          # below this, numpy's per-call overhead outweighs the gain
_BAND_MAX_LANES = 1 << 17    # bounds the temporary arrays of one band


class _BandPlan:
    __slots__ = ("loops", "cls", "realize", "store", "reduction", "lanes")

    def __init__(self, loops, cls, realize, store, reduction, lanes):
        self.loops = loops
        self.cls = cls
        self.realize = realize
        self.store = store
        self.reduction = reduction
        self.lanes = lanes


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
    from engine.ir.functor import post_order_visit
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
    from engine.ir.functor import post_order_visit

    def fn(x):
        if isinstance(x, E.BufferLoad) and x.buffer is buf:
            out.append(x)
    post_order_visit(e, fn)
    return out


def _same(a, b) -> bool:
    from engine.te.regions import same_expr
    return same_expr(a, b)


def _init_ok(store, realize) -> bool:
    if realize is None or realize.block.init is None:
        return True
    init = realize.block.init
    return (len(init.indices) == len(store.indices)
            and all(_same(a, b) for a, b in zip(init.indices, store.indices))
            and not _loads_of(init.value, store.buffer))


def _elementwise_ok(store, realize) -> bool:
    """Every read of the stored buffer is at the element this lane writes."""
    if not _init_ok(store, realize):
        return False
    for ld in _loads_of(store.value, store.buffer) + [
            ld for i in store.indices for ld in _loads_of(i, store.buffer)]:
        if len(ld.indices) != len(store.indices) or not all(
                _same(a, b) for a, b in zip(ld.indices, store.indices)):
            return False
    return True


def _reduction_parts(store, realize):
    """``(op, f)`` when the store is ``S[idx] = S[idx] op f`` (or ``f op S[idx]``)."""
    v = store.value
    if not isinstance(v, (E.Add, E.Max, E.Min)) or not _init_ok(store, realize):
        return None
    for old, f in ((v.a, v.b), (v.b, v.a)):
        if (isinstance(old, E.BufferLoad) and old.buffer is store.buffer
                and len(old.indices) == len(store.indices)
                and all(_same(a, b) for a, b in zip(old.indices, store.indices))
                and not _loads_of(f, store.buffer)
                and not any(_loads_of(i, store.buffer) for i in store.indices)):
            return type(v).__name__, f
    return None


def _take_lanes(env: list, saved: list, n: int, sel: np.ndarray) -> None:
    """Restrict every per-lane slot (arrays of length ``n``) to the lanes ``sel``."""
    for sl, v in saved:
        if isinstance(v, np.ndarray) and v.ndim == 1 and v.shape[0] == n:
            env[sl] = v[sel]


def _eval_on_lanes(env: list, vslots: list, n: int, sel: np.ndarray, fn: _Fn) -> Any:
    """``fn(env)`` evaluated with every per-lane slot restricted to the lanes ``sel``;
    the slots get their full values back afterwards."""
    saved = [(sl, env[sl]) for sl in vslots]
    try:
        _take_lanes(env, saved, n, sel)
        return fn(env)
    finally:
        for sl, v in saved:
            env[sl] = v


def _set_then_run(slot: int, value: _Fn, body: _Fn) -> _Fn:
    """A statement that stores ``value(env)`` in ``slot`` and then runs ``body``
    (LetStmt, Allocate)."""
    def run(env):
        env[slot] = value(env)
        body(env)
    return run


def _lane_index(idx: tuple, n: int, shape: tuple, buf: Buffer, what: str, where: str, oob
                ) -> tuple:
    out = []
    for d, v in enumerate(idx):
        if isinstance(v, np.ndarray):
            if v.size and (v.min() < 0 or v.max() >= shape[d]):
                bad = (v < 0) | (v >= shape[d])
                k = int(np.argmax(bad))
                oob(buf, tuple(int(x[k]) if isinstance(x, np.ndarray) else x for x in idx),
                    what, where)
        elif not 0 <= v < shape[d]:
            oob(buf, idx, what, where)
        out.append(v)
    return tuple(np.broadcast_to(v, (n,)) for v in out)


def _band_elementwise(env, arr, idx, n, shape, buf, where, oob, mask, init_val, fval,
                      vslots) -> bool:
    idx = _lane_index(idx, n, shape, buf, "write", where, oob)
    flat = np.ravel_multi_index(idx, shape) if shape else np.zeros(n, dtype=np.int64)
    if np.unique(flat).size != n:
        return False  # two lanes write the same element: keep the serial order
    if mask is not None:
        if isinstance(mask, np.ndarray):
            on = np.flatnonzero(mask)
            if on.size:
                iv = _eval_on_lanes(env, vslots, n, on, init_val)
                arr[tuple(x[on] for x in idx)] = iv
        elif mask:
            arr[idx] = init_val(env)
    arr[idx] = fval(env)
    return True


def _band_reduce(env, arr, idx, n, buf, where, oob, mask, init_val, term, op, dt,
                 vslots) -> bool:
    shape = arr.shape
    if any(isinstance(v, np.ndarray) for v in idx):
        return False  # pragma: no cover - the plan guarantees a lane-invariant index
    for d, v in enumerate(idx):
        if not 0 <= v < shape[d]:
            oob(buf, idx, "write", where)
    terms = term(env)
    terms = np.broadcast_to(np.asarray(terms, dtype=dt), (n,))
    start = None
    last = None  # the last lane that initialises the accumulator, if any
    if isinstance(mask, np.ndarray):
        on = np.flatnonzero(mask)
        if on.size:
            last = on[-1:]
    elif mask is not None and mask:
        last = np.array([n - 1])
    if last is not None:
        start = _eval_on_lanes(env, vslots, n, last, init_val)
        if isinstance(start, np.ndarray):
            start = start[0]
        terms = terms[int(last[0]):]
    if start is None:
        start = arr[idx]
    seq_ = np.concatenate((np.asarray([start], dtype=dt), terms))
    if op == "Add":
        if dt.kind == "f":
            acc = np.add.accumulate(seq_)[-1]  # serial order: rounds like the loop
        else:
            acc = seq_.astype(np.int64).sum(dtype=np.int64) if dt.kind != "b" else seq_.any()
            acc = np.asarray(acc).astype(dt)[()]
    elif op == "Max":
        acc = np.maximum.reduce(seq_)
    else:
        acc = np.minimum.reduce(seq_)
    arr[idx] = acc
    return True


class CompiledFunc:
    """A PrimFunc compiled for the interpreter: call it with numpy arrays."""

    def __init__(self, func: PrimFunc, vectorize: bool = True):
        comp = _Compiler(func, vectorize)
        self.vectorize = vectorize
        self.name = func.name
        self.params = func.params
        self._param_slots = [comp.bind_buffer(buf) for buf in func.params]
        # shape variables of the parameters are bound from the arrays' shapes (first use);
        # every other dimension is an expression checked against the array
        self._shape_binds: list[tuple[int, int, int]] = []  # (param, dim, slot)
        for p_i, buf in enumerate(func.params):
            for d, s in enumerate(buf.shape):
                if isinstance(s, E.Var) and id(s) not in comp.scope:
                    self._shape_binds.append((p_i, d, comp.bind(s)))
        self._shape_fns = [[comp.expr(s) for s in buf.shape] for buf in func.params]
        self._body = comp.stmt(func.body)
        self.bands = comp.nbands  # how many loop nests run as numpy operations
        self._nslots = comp.nslots
        self._stored = [id(b) in comp.stored for b in func.params]
        self._dtypes = [_np_dtype(b.dtype) for b in func.params]
        self._flat = [bool(b.strides) or bool(b.elem_offset) for b in func.params]

    def __repr__(self) -> str:
        return f"<interpreted {self.name}({', '.join(b.name for b in self.params)})>"

    def _prepare(self, arrays: tuple, env: list) -> None:
        params = self.params
        sig = ", ".join(b.name for b in params)
        if len(arrays) != len(params):
            raise ArgumentError(f"{self.name} expects {len(params)} array(s) ({sig}), "
                                f"got {len(arrays)}")
        for p_i, (buf, arr) in enumerate(zip(params, arrays)):
            if not isinstance(arr, np.ndarray):
                raise ArgumentError(f"argument {p_i} ({buf.name}) of {self.name} must be a "
                                    f"numpy array, got {type(arr).__name__}")
            if arr.dtype != self._dtypes[p_i]:
                raise ArgumentError(f"argument {p_i} ({buf.name}) of {self.name} must have "
                                    f"dtype {buf.dtype}, got {arr.dtype}")
            if self._stored[p_i] and not arr.flags.writeable:
                raise ArgumentError(f"argument {p_i} ({buf.name}) of {self.name} is written "
                                    "by the function but the array is read-only")
        for p_i, d, slot in self._shape_binds:
            arr = arrays[p_i]
            if d < arr.ndim and env[slot] is None:
                env[slot] = int(arr.shape[d])
        for p_i, (buf, arr) in enumerate(zip(params, arrays)):
            try:
                expected = tuple(int(f(env)) for f in self._shape_fns[p_i])
            except TypeError:
                raise ArgumentError(f"argument {p_i} ({buf.name}) of {self.name} must have "
                                    f"{len(buf.shape)} dimension(s), got shape "
                                    f"{arr.shape}") from None
            if self._flat[p_i]:
                if not arr.flags.c_contiguous:
                    raise ArgumentError(f"argument {p_i} ({buf.name}) of {self.name} must be "
                                        "C-contiguous (its buffer has explicit strides)")
                env[self._param_slots[p_i]] = arr.reshape(-1)
                continue
            if arr.shape != expected:
                if len(expected) == 1 and arr.size == expected[0] and arr.flags.c_contiguous:
                    env[self._param_slots[p_i]] = arr.reshape(-1)  # a flattened buffer
                    continue
                raise ArgumentError(f"argument {p_i} ({buf.name}) of {self.name} must have "
                                    f"shape {expected}, got {arr.shape}")
            env[self._param_slots[p_i]] = arr

    def __call__(self, *arrays: np.ndarray) -> None:
        env: list = [None] * self._nslots
        self._prepare(arrays, env)
        with np.errstate(all="ignore"):
            try:
                self._body(env)
            except InterpretError:
                raise
            except RecursionError:
                raise InterpretError(f"{self.name}: the program is nested too deeply for "
                                     "the interpreter") from None
            except Exception as exc:  # noqa: BLE001 - reported as an interpreter error
                raise InterpretError(f"{self.name}: execution failed: "
                                     f"{type(exc).__name__}: {exc}") from exc


_CACHE: "weakref.WeakKeyDictionary[PrimFunc, dict]" = weakref.WeakKeyDictionary()


def compile_func(func: PrimFunc, vectorize: bool = True) -> CompiledFunc:
    """Compile ``func`` for the interpreter (cached per PrimFunc object).

    With ``vectorize`` (the default) innermost loop nests whose iterations are independent
    (or form a +/max/min reduction) run as numpy operations; the result is the same as
    running them one iteration at a time (``vectorize=False``), only faster.
    """
    if not isinstance(func, PrimFunc):
        raise ArgumentError(f"expected a PrimFunc, got {type(func).__name__}")
    per_func = _CACHE.get(func)
    if per_func is None:
        per_func = _CACHE[func] = {}
    cf = per_func.get(bool(vectorize))
    if cf is None:
        cf = per_func[bool(vectorize)] = CompiledFunc(func, bool(vectorize))
    return cf


def interpret(mod_or_func: IRModule | PrimFunc, func_name: Any = None,
              *arrays: np.ndarray, vectorize: bool = True) -> None:
    """Run ``mod_or_func[func_name]`` on numpy ``arrays`` (outputs are filled in place).

    ``mod_or_func`` may be an :class:`IRModule` (``func_name`` names the function; it may be
    omitted when the module has one function) or a :class:`PrimFunc` (``func_name`` is then
    optional).  Arrays must match the parameters' count, dtype and shape
    (:class:`ArgumentError` otherwise).  ``vectorize=False`` runs every loop iteration by
    iteration (slower; the results are the same).
    """
    if isinstance(func_name, np.ndarray):
        arrays = (func_name,) + arrays
        func_name = None
    if isinstance(mod_or_func, PrimFunc):
        func = mod_or_func
        if func_name is not None and func_name != func.name:
            raise ArgumentError(f"the PrimFunc is named {func.name!r}, not {func_name!r}")
    elif isinstance(mod_or_func, IRModule):
        if func_name is None:
            names = mod_or_func.names()
            if len(names) != 1:
                raise ArgumentError(f"the module has {len(names)} functions "
                                    f"({', '.join(names)}); say which one to run")
            func_name = names[0]
        if func_name not in mod_or_func:
            raise ArgumentError(f"no function named {func_name!r} in the module (it has: "
                                f"{', '.join(mod_or_func.names())})")
        func = mod_or_func[func_name]
    else:
        raise ArgumentError(f"interpret() needs an IRModule or a PrimFunc, got "
                            f"{type(mod_or_func).__name__}")
    compile_func(func, vectorize)(*arrays)

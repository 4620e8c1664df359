"""Calling a kernel with symbolic sizes or scalar parameters.

A PrimFunc may have scalar parameters (``def f(a: T.handle, n: T.int32)``) and buffers
shaped by symbolic sizes (``A: T.Buffer((n,), "float32")`` with ``n = T.int32()``, or
``T.match_buffer(a, ((n + 31) // 32 * 32, 4))``). Its kernel
(:mod:`engine.codegen.functions`) takes a pointer per buffer, each scalar parameter by
value in its place, then the symbolic sizes. :class:`Binding` turns a call's arguments —
numpy arrays for the buffers, Python numbers for the scalars, in the parameters' order::

    rt["f"](a, b, 5)

— into those values, as TVM's argument binding does for ``T.match_buffer``:

* every array is checked as for any kernel (an ``ndarray`` of the buffer's dtype, its
  number of dimensions, C-contiguous, aligned, writeable where the kernel writes, no written
  array overlapping another);
* a symbolic size that is one whole dimension of a buffer (``n`` in ``(n, 4)``) is read from
  the first array with it, and every other array with that size must agree: two buffers of
  shape ``(n,)`` given arrays of lengths 5 and 7 is an :class:`ArgumentError` naming both;
* a dimension that is an expression (``(n + 31) // 32 * 32``) or a scalar parameter is
  computed from the values known and the array must have exactly that size;
* a scalar parameter must be a Python (or numpy) number that its dtype holds: an
  ``int32`` parameter an integer in ``[-2**31, 2**31 - 1]``, a ``float32`` one any real
  number, a ``bool`` one ``True``/``False``;
* an array a kernel indexes with int32 arithmetic (every size of its shape is int32) may
  hold at most ``2**31 - 1`` elements.

The checks run in Python on every call (about as long as the detailed checks of a kernel
with constant shapes; the compiled quick check of :mod:`engine.runtime.fastcall` covers
constant signatures only).
"""
from __future__ import annotations

import ctypes
import operator
from typing import Any, Callable

import numpy as np

from engine.ir import expr as E
from engine.ir.buffer import Buffer
from engine.lower.errors import BuildError

from .module import _ALIGNED, _C_CONTIGUOUS, _WRITEABLE, ArgumentError, data_pointer

#: ctypes argument types of scalar parameters (a float16 passes its bits, a bool a byte)
CTYPES = {
    "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
    "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16,
    "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64, "float32": ctypes.c_float,
    "float64": ctypes.c_double, "float16": ctypes.c_uint16, "bool": ctypes.c_uint8,
}

_INT32_MAX = 2**31 - 1


def _int_range(dtype: str) -> tuple[int, int]:
    info = np.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


def _floordiv(a: int, b: int) -> int:
    return a // b


def _floormod(a: int, b: int) -> int:
    return a % b


def _truncdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _truncmod(a: int, b: int) -> int:
    return a - b * _truncdiv(a, b)


_BINARY = {E.Add: operator.add, E.Sub: operator.sub, E.Mul: operator.mul,
           E.FloorDiv: _floordiv, E.FloorMod: _floormod, E.Div: _truncdiv, E.Mod: _truncmod,
           E.Min: min, E.Max: max}


def shape_evaluator(e: E.PrimExpr, where: str) -> Callable[[dict], int]:
    """``env -> int``: the value of the integer shape expression ``e`` (``env`` maps a
    variable's id to its value). Raises :class:`BuildError` for what the runtime cannot
    compute (a load, a call)."""
    if isinstance(e, E.IntImm):
        v = int(e.value)
        return lambda env: v
    if isinstance(e, E.Var):
        key = id(e)
        return lambda env: env[key]
    if isinstance(e, E.Cast) and e.dtype.startswith(("int", "uint")):
        return shape_evaluator(e.value, where)
    op = _BINARY.get(type(e))
    if op is not None:
        fa, fb = shape_evaluator(e.a, where), shape_evaluator(e.b, where)
        div = type(e) in (E.FloorDiv, E.FloorMod, E.Div, E.Mod)

        def binary(env):
            a, b = fa(env), fb(env)
            if div and b == 0:
                raise ZeroDivisionError
            return op(a, b)
        return binary
    raise BuildError(f"{where} is {type(e).__name__} {e!r}, which cannot be computed from "
                     "the arguments; a symbolic size is an integer expression of sizes and "
                     "scalar parameters (+, -, *, //, %, min, max)")


class _ArrayParam:
    __slots__ = ("index", "buffer", "name", "dtype", "dims", "written", "int32_indexed",
                 "itemsize", "need")

    def __init__(self, index: int, buffer: Buffer, written: bool):
        self.index = index
        self.buffer = buffer
        self.name = buffer.name
        self.dtype = None
        self.dims: list = []
        self.written = written
        self.int32_indexed = False
        self.itemsize = 0
        #: numpy's flag bits a good array has (C-contiguous, aligned, writeable if written)
        self.need = _C_CONTIGUOUS | _ALIGNED | (_WRITEABLE if written else 0)


class _ScalarParam:
    __slots__ = ("index", "var", "name", "dtype", "ctype", "range")

    def __init__(self, index: int, var: E.Var):
        self.index = index
        self.var = var
        self.name = var.name
        self.dtype = var.dtype
        if var.dtype not in CTYPES:
            raise BuildError(f"scalar parameter {var.name!r} has dtype {var.dtype}, which "
                             "cannot be passed from Python")
        self.ctype = CTYPES[var.dtype]
        self.range = _int_range(var.dtype) if var.dtype.startswith(("int", "uint")) else None


class Binding:
    """The argument plan of one kernel with symbolic sizes or scalar parameters (see the
    module docstring): :meth:`arguments` checks a call's arguments and gives the kernel's
    argument values; :attr:`argtypes` are their ctypes types."""

    def __init__(self, func_name: str, orig_params: tuple, size_vars: tuple, written: set,
                 numpy_dtypes: dict):
        self.func_name = func_name
        self.size_vars = tuple(size_vars)
        self.params: list = []
        for i, p in enumerate(orig_params):
            if isinstance(p, Buffer):
                ap = _ArrayParam(i, p, id(p) in written)
                if p.dtype not in numpy_dtypes:
                    raise BuildError(f"buffer {p.name!r} has dtype {p.dtype}, which cannot be "
                                     "passed as a numpy array")
                ap.dtype = np.dtype(numpy_dtypes[p.dtype])
                ap.itemsize = ap.dtype.itemsize
                if p.strides or p.elem_offset:
                    if any(E.as_const_int(d) is None for d in p.shape):
                        raise BuildError(f"buffer {p.name!r} has a symbolic shape and explicit "
                                         "strides or an element offset; give it one or the "
                                         "other")
                ap.int32_indexed = all(d.dtype != "int64" for d in p.shape) and \
                    any(E.as_const_int(d) is None for d in p.shape)
                self.params.append(ap)
            else:
                self.params.append(_ScalarParam(i, p))
        sizes = {id(v) for v in self.size_vars}
        scalars = {id(p.var): p for p in self.params if isinstance(p, _ScalarParam)}
        # each dimension: ("const", n) | ("bind", var id, var) | ("expr", evaluator, text)
        bound: set[int] = set()
        for ap in self.params:
            if not isinstance(ap, _ArrayParam):
                continue
            for d, dim in enumerate(ap.buffer.shape):
                c = E.as_const_int(dim)
                if c is not None:
                    ap.dims.append(("const", c))
                elif type(dim) is E.Var and id(dim) in sizes and id(dim) not in bound:
                    bound.add(id(dim))
                    ap.dims.append(("bind", id(dim), dim))
                else:
                    for v in _vars_of(dim):
                        if id(v) not in sizes and id(v) not in scalars:
                            raise BuildError(f"the shape of buffer {ap.name!r} uses {v.name!r}, "
                                             "which no argument gives")
                    where = f"dimension {d} of buffer {ap.name!r}"
                    ap.dims.append(("expr", shape_evaluator(dim, where), _text(dim), dim))
        missing = [v.name for v in self.size_vars if id(v) not in bound]
        if missing:
            raise BuildError(f"symbolic size(s) {', '.join(missing)} of function "
                             f"{func_name!r} are not a whole dimension of any buffer "
                             "parameter, so no array gives them")
        self.argtypes = [ctypes.c_void_p if isinstance(p, _ArrayParam) else p.ctype
                         for p in self.params] + \
            [ctypes.c_int64 if v.dtype == "int64" else ctypes.c_int32 for v in self.size_vars]
        self.signature = ", ".join(
            f"{p.name}: {p.dtype.name}[{', '.join(_dim_text(d) for d in p.dims)}]"
            if isinstance(p, _ArrayParam) else f"{p.name}: {p.dtype}" for p in self.params)
        self._overlap_pairs = [(a, b) for i, a in enumerate(self.params)
                               for b in self.params[i + 1:]
                               if isinstance(a, _ArrayParam) and isinstance(b, _ArrayParam)
                               and (a.written or b.written)]

    def quick_plan(self):
        """The plan of the quick check (``Function.pointers``' quick pass, compiled by
        :mod:`engine.runtime.fastcall`) — ``("sym", per_arg, pairs, size_dtypes)``: per
        array (numpy dtype, dims, flag bits required, most elements or 0), a dimension
        being a constant (>= 0) or the size slot ``-(k + 1)`` (bound by its first
        occurrence, compared at the others); the pairs of arrays that must not overlap; the
        dtype of each size — or None when a call needs the Python checks every time (a
        scalar parameter, a dimension that is an expression)."""
        if any(isinstance(p, _ScalarParam) for p in self.params):
            return None
        slot = {id(v): k for k, v in enumerate(self.size_vars)}
        per_arg = []
        for p in self.params:
            dims = []
            for dim in p.dims:
                if dim[0] == "const":
                    dims.append(dim[1])
                elif dim[0] == "bind":
                    dims.append(-(slot[dim[1]] + 1))
                elif type(dim[3]) is E.Var and id(dim[3]) in slot:
                    dims.append(-(slot[id(dim[3])] + 1))
                else:
                    return None
            per_arg.append((p.dtype, tuple(dims), p.need, _INT32_MAX if p.int32_indexed else 0))
        pairs = tuple((a.index, b.index) for a, b in self._overlap_pairs)
        return ("sym", tuple(per_arg), pairs, tuple(v.dtype for v in self.size_vars))

    # ------------------------------------------------------------------ checks
    def where(self, p) -> str:
        kind = "buffer" if isinstance(p, _ArrayParam) else "scalar"
        return f"argument {p.index} ({kind} {p.name!r}) of {self.func_name}"

    def arguments(self, args: tuple) -> list:
        """The kernel's argument values for a call's ``args`` (an :class:`ArgumentError`
        naming what is wrong otherwise)."""
        Error = ArgumentError
        params = self.params
        if len(args) != len(params):
            names = ", ".join(p.name for p in params)
            raise Error(f"{self.func_name} takes {len(params)} arguments ({names}), "
                        f"got {len(args)}")
        env: dict[int, int] = {}
        source: dict[int, str] = {}
        values: list = [None] * len(params)
        for p, a in zip(params, args):
            if isinstance(p, _ScalarParam):
                values[p.index] = self._scalar(p, a, env, source, Error)
        for p, a in zip(params, args):
            if isinstance(p, _ArrayParam):
                values[p.index] = self._array(p, a, Error)
        # sizes: bound from the first array with them, then every dimension checked
        for p, a in zip(params, args):
            if not isinstance(p, _ArrayParam):
                continue
            for d, dim in enumerate(p.dims):
                if dim[0] == "bind":
                    n = int(a.shape[d])
                    var = dim[2]
                    hi = _INT32_MAX if var.dtype == "int32" else 2**63 - 1
                    if n > hi:
                        raise Error(f"{self.where(p)} has {_elements(n)} along axis {d}, "
                                    f"more than its {var.dtype} size {var.name!r} holds")
                    env[dim[1]] = n
                    source[dim[1]] = (p, d)
        for p, a in zip(params, args):
            if isinstance(p, _ArrayParam):
                self._check_dims(p, a, env, source, Error)
        for pa, pb in self._overlap_pairs:   # C-contiguous: the byte ranges tell
            a, b = args[pa.index], args[pb.index]
            ia, ib = values[pa.index], values[pb.index]
            if a.size and b.size and ia < ib + b.nbytes and ib < ia + a.nbytes:
                raise Error(f"arguments {pa.index} ({pa.name!r}) and {pb.index} ({pb.name!r}) "
                            f"of {self.func_name} overlap in memory; the kernel assumes "
                            "distinct buffers (pass a copy)")
        return values + [env[id(v)] for v in self.size_vars]

    def _scalar(self, p: _ScalarParam, a: Any, env: dict, source: dict, Error) -> Any:
        dt = p.dtype
        if type(a) is int and p.range is not None and p.range[0] <= a <= p.range[1]:
            env[id(p.var)] = a     # the common case, at once
            source[id(p.var)] = (p, None)
            return a
        if type(a) is float and p.range is None and dt != "bool" and dt != "float16":
            return a
        where = self.where(p)
        if isinstance(a, np.ndarray) and a.ndim == 0:
            a = a[()]
        if dt == "bool":
            if not isinstance(a, (bool, np.bool_)):
                raise Error(f"{where} must be a bool (True or False), got {type(a).__name__}")
            return int(bool(a))
        if dt.startswith(("int", "uint")):
            if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
                raise Error(f"{where} must be an integer ({dt}), got {type(a).__name__} "
                            f"{a!r}")
            v = int(a)
            lo, hi = p.range
            if not lo <= v <= hi:
                raise Error(f"{where} must be an integer that {dt} holds ({lo} to {hi}), "
                            f"got {v}")
            env[id(p.var)] = v
            source[id(p.var)] = (p, None)
            return v
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, float, np.integer,
                                                                 np.floating)):
            raise Error(f"{where} must be a number ({dt}), got {type(a).__name__} {a!r}")
        if dt == "float16":
            return int(np.array(a, np.float16).view(np.uint16))
        return float(a)

    def _array(self, p: _ArrayParam, a: Any, Error) -> int:
        if type(a) is np.ndarray and a.dtype == p.dtype and a.ndim == len(p.dims) and \
                a.flags.num & p.need == p.need and \
                not (p.int32_indexed and a.size > _INT32_MAX):
            return data_pointer(a) if a.size > 0 else 0     # the common case, at once
        where = self.where(p)
        if not isinstance(a, np.ndarray):
            raise Error(f"{where} must be a numpy.ndarray, got {type(a).__name__}")
        if a.dtype != p.dtype:
            raise Error(f"{where} must have dtype {p.dtype.name}, got {a.dtype.name} "
                        "(convert with .astype)")
        if a.ndim != len(p.dims):
            raise Error(f"{where} must have {len(p.dims)} dimension(s) (shape "
                        f"({', '.join(_dim_text(d) for d in p.dims)})), got shape {a.shape}")
        if not a.flags.c_contiguous:
            raise Error(f"{where} must be C-contiguous (pass numpy.ascontiguousarray(x))")
        if not a.flags.aligned:
            raise Error(f"{where} is not aligned to its element size")
        if p.written and not a.flags.writeable:
            raise Error(f"{where} is written by the kernel but the array is read-only (pass "
                        "a writeable copy)")
        if p.int32_indexed and a.size > _INT32_MAX:
            raise Error(f"{where} has {a.size} elements; a buffer whose sizes are int32 "
                        f"holds at most {_INT32_MAX} (declare its sizes T.int64())")
        return a.ctypes.data if a.size > 0 else 0

    def _check_dims(self, p: _ArrayParam, a: np.ndarray, env: dict, source: dict,
                    Error) -> None:
        """Every dimension of ``a`` against the buffer's: a constant, or the value of its
        expression (a size another array gave, a scalar parameter, ``(n + 31) // 32 * 32``)."""
        for d, dim in enumerate(p.dims):
            got = int(a.shape[d])
            kind = dim[0]
            if kind == "const":
                if got != dim[1]:
                    raise Error(f"{self.where(p)} must have shape {self._expected(p, env)}, "
                                f"got {a.shape}")
            elif kind == "bind":
                continue
            else:
                try:
                    want = dim[1](env)
                except ZeroDivisionError:
                    raise Error(f"{self.where(p)}: its size {dim[2]} along axis {d} divides "
                                "by zero with the sizes given") from None
                if got != want:
                    raise Error(self._mismatch(p, d, dim[2], want, a.shape, env, source))

    def _expected(self, p: _ArrayParam, env: dict) -> tuple:
        out = []
        for dim in p.dims:
            if dim[0] == "const":
                out.append(dim[1])
            elif dim[0] == "bind":
                out.append(env.get(dim[1], dim[2].name))
            else:
                try:
                    out.append(dim[1](env))
                except Exception:  # noqa: BLE001 - a message only
                    out.append(dim[2])
        return tuple(out)

    def _source(self, source: dict, v: E.Var) -> str:
        """Where the value of size or scalar ``v`` came from, as words."""
        return _source_text(self, source.get(id(v)))

    def _mismatch(self, p: _ArrayParam, d: int, text: str, want: int, shape: tuple,
                  env: dict, source: dict) -> str:
        """The sentence for an array whose size along axis ``d`` is not ``want``."""
        known = [v for v in list(self.size_vars) + [q.var for q in self.params
                                                    if isinstance(q, _ScalarParam)]
                 if id(v) in env and _mentions_name(text, v.name)]
        if len(known) == 1 and text == known[0].name:  # a size another argument gave
            v = known[0]
            return (f"{self.where(p)} has {_elements(shape[d])} along axis {d}, but its size "
                    f"{v.name} is {want} (from {self._source(source, v)}); got shape {shape}")
        values = "; ".join(f"{v.name} = {env[id(v)]} from {self._source(source, v)}"
                           for v in known)
        return (f"{self.where(p)} must have {_elements(want)} along axis {d} ({text}"
                f"{' with ' + values if values else ''}), got shape {shape}")


def _source_text(binding: "Binding", where: tuple | None) -> str:
    if where is None:
        return "?"
    p, d = where
    return binding.where(p) if d is None else f"{binding.where(p)}, axis {d}"


def _elements(n: int) -> str:
    return f"{n} element" if n == 1 else f"{n} elements"


def _mentions_name(text: str, name: str) -> bool:
    import re
    return re.search(rf"\b{re.escape(name)}\b", text) is not None


def _vars_of(e: E.PrimExpr) -> list:
    from engine.ir.functor import collect_vars
    return list(collect_vars(e))


def _text(e: E.PrimExpr) -> str:
    from engine.script.printer.module import repr_node
    return repr_node(e)


def _dim_text(dim: tuple) -> str:
    if dim[0] == "const":
        return str(dim[1])
    if dim[0] == "bind":
        return dim[2].name
    return dim[2]


__all__ = ["Binding", "CTYPES", "shape_evaluator"]

"""Lowered GPU kernels printed as CUDA C, as TVM's CUDA back end prints them for learners.

* :func:`kernel_to_cuda` — one :class:`~engine.gpu.kernel.Kernel` as a ``__global__``
  function (with ``header=True``: a whole translation unit NVRTC compiles);
* :func:`kernels_to_cuda` — several kernels in one translation unit;
* :func:`module_to_cuda` — every kernel of a :class:`~engine.gpu.kernel.GpuModule`.

What the text looks like::

    extern "C" __global__ void __launch_bounds__(128) main_kernel0(float* __restrict__ A,
        float* __restrict__ B) {
      __shared__ float A_shared[130];
      for (int ax0_0 = 0; ax0_0 < 2; ++ax0_0) {
        if (((ax0_0 * 128) + ((int)threadIdx.x)) < 130) {
          A_shared[...] = A[...];
        }
      }
      __syncthreads();
      B[...] = ...;
    }

* parameters: a buffer is ``float* __restrict__ A`` (the runtime passes distinct arrays), a
  scalar ``int n``; thread indices ``((int)threadIdx.x)``, ``((int)blockIdx.x)``;
* ``__shared__`` arrays at the top of the kernel, local ``Allocate``\\ s as arrays where
  they are (a zero-filled integer one ``= {0}``); an array read or written as ``float4``
  is declared ``__align__(16)``;
* barriers ``__syncthreads();``, loops ``for (int i = 0; i < n; ++i)``, ``#pragma unroll``
  before an unrolled one;
* vectors: a stride-1 ``Ramp`` access whose base index is a multiple of the lanes (proven
  by ``modular_set``; every buffer is assumed 16-byte aligned) of a type CUDA has
  (``float2``/``float4``, ``int2``/``int4``, ``double2``) is ``*(float4*)(A + base)``;
  arithmetic on vectors is lane by lane (``make_float4(...)`` of the lanes; CUDA has no
  operators on ``float4``); any other vector access is element by element;
* floor division and modulo: ``/`` and ``%`` where the dividend is provably
  non-negative and the divisor a positive constant, a shift or mask by a power of two, else
  helper functions (``floordiv_i32``...) defined in the header;
* math: ``expf``, ``sqrtf``, ``fmaf``, ``tanhf``... (float32), ``exp``... (float64), from
  NVRTC's built-in device library; integer arguments of a float function are computed in
  double, as the CPU back end does; ``min``/``max`` are CUDA's.

The header is TVM's (``TVM_ENABLE_L2_PREFETCH``, ``uint``/``int64_t``... as macros), with
no ``#include`` of system headers NVRTC does not have. float16 is refused (it needs
``cuda_fp16.h``), as are ``call_extern``/``address_of`` (host-side hooks).
"""
from __future__ import annotations

import math
import struct

from engine.arith.vector_index import modular_set
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer, base_scope
from engine.ir.dtype import (bits_of, element_of, is_bool, is_float, is_int, is_uint,
                             lanes_of, zero_filled)
from engine.ir.functor import pre_order_visit
from engine.lower.errors import BuildError

from .kernel import BARRIER, BLOCK_AXES, GRID_AXES, Kernel

HEADER = """\
#if (((__CUDACC_VER_MAJOR__ == 11) && (__CUDACC_VER_MINOR__ >= 4)) || \\
     (__CUDACC_VER_MAJOR__ > 11))
#define TVM_ENABLE_L2_PREFETCH 1
#else
#define TVM_ENABLE_L2_PREFETCH 0
#endif

#ifdef _WIN32
  using uint = unsigned int;
  using uchar = unsigned char;
  using ushort = unsigned short;
  using int64_t = long long;
  using uint64_t = unsigned long long;
#else
  #define uint unsigned int
  #define uchar unsigned char
  #define ushort unsigned short
  #define int64_t long long
  #define uint64_t unsigned long long
#endif
"""

#: floor division helpers, by C type, emitted in the header when used
_FLOOR_HELPERS = {
    "int": "i32", "int64_t": "i64",
}


def _floor_helper(ctype: str, suffix: str) -> str:
    return (f"__device__ __forceinline__ {ctype} floordiv_{suffix}({ctype} a, {ctype} b) {{\n"
            f"  {ctype} q = a / b;\n"
            f"  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;\n"
            f"}}\n"
            f"__device__ __forceinline__ {ctype} floormod_{suffix}({ctype} a, {ctype} b) {{\n"
            f"  {ctype} r = a % b;\n"
            f"  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"
            f"}}\n")


_CTYPES = {"float32": "float", "float64": "double", "int8": "signed char",
           "uint8": "uchar", "int16": "short", "uint16": "ushort", "int32": "int",
           "uint32": "uint", "int64": "int64_t", "uint64": "uint64_t", "bool": "bool"}

#: CUDA's built-in vector types: (element dtype, lanes) -> type name
_VECTOR_TYPES = {("float32", 2): "float2", ("float32", 4): "float4",
                 ("int32", 2): "int2", ("int32", 4): "int4", ("float64", 2): "double2"}
_LANE_FIELDS = "xyzw"

#: C/C++/CUDA names a variable or buffer must not take
_RESERVED = frozenset("""auto bool break case char const continue default do double else enum
extern float for goto if inline int long register return short signed sizeof static struct
switch typedef union unsigned void volatile while class new delete this template true false
threadIdx blockIdx blockDim gridDim warpSize min max uint uchar ushort int64_t uint64_t
half float2 float4 int2 int4 double2 main""".split())

_MATH = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt",
         "tanh": "tanh", "fabs": "fabs", "abs": "fabs", "floor": "floor", "ceil": "ceil",
         "round": "rint", "trunc": "trunc", "sin": "sin", "cos": "cos", "erf": "erf",
         "pow": "pow", "fma": "fma"}


def ctype(dtype: str) -> str:
    """The C type of a scalar dtype."""
    base = element_of(dtype)
    if base == "float16":
        raise BuildError("float16 needs cuda_fp16.h, which the CUDA C printer does not "
                         "emit yet")
    t = _CTYPES.get(base)
    if t is None:
        raise BuildError(f"no CUDA C type for dtype {dtype!r}")
    return t


def _float_literal(v: float, dtype: str) -> str:
    if element_of(dtype) == "float32":
        if math.isnan(v) or math.isinf(v):
            bits = struct.unpack("<I", struct.pack("<f", v))[0]
            return f"__int_as_float(0x{bits:08x})"
        s = f"{v:.9g}"
        return (s if any(c in s for c in ".e") else s + ".0") + "f"
    if math.isnan(v) or math.isinf(v):
        bits = struct.unpack("<Q", struct.pack("<d", v))[0]
        return f"__longlong_as_double(0x{bits:016x}LL)"
    s = repr(float(v))
    return s if any(c in s for c in ".e") else s + ".0"


def _bare(text: str) -> str:
    """``text`` without the parentheses around all of it (``(a < b)`` -> ``a < b``)."""
    if not (text.startswith("(") and text.endswith(")")):
        return text
    depth = 0
    for i, c in enumerate(text):
        depth += c == "("
        depth -= c == ")"
        if depth == 0 and i < len(text) - 1:
            return text
    return text[1:-1]


class _Names:
    """Unique C names, taken from the IR's names."""

    def __init__(self):
        self.taken: set[str] = set()

    def fresh(self, name: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "v"
        if base[0].isdigit():
            base = "v_" + base
        if base in _RESERVED:
            base += "_"
        cand, i = base, 1
        while cand in self.taken:
            cand = f"{base}_{i}"
            i += 1
        self.taken.add(cand)
        return cand


class KernelPrinter:
    """One kernel's ``__global__`` function; ``helpers`` collects the helper functions its
    text uses (the header defines them)."""

    def __init__(self, kernel: Kernel, helpers: set | None = None):
        self.kernel = kernel
        self.names = _Names()
        self.var_names: dict[int, str] = {}
        self.buf_names: dict[int, str] = {}
        self.nonneg: set[int] = set()
        self.lines: list[str] = []
        self.indent = 1
        self.helpers = helpers if helpers is not None else set()
        self.temps: dict[int, str] = {}   # vector loads read into temporaries, per statement
        #: inside a branch of if_then_else or under a lane's guard: no temporaries, and a
        #: lane of a vector load reads its own element only
        self.lazy = 0
        self.vector_bufs = self._vector_accessed()

    def err(self, msg: str) -> BuildError:
        return BuildError(f"{msg} (in GPU kernel {self.kernel.name!r})")

    # ------------------------------------------------------------------ the function
    def function(self) -> str:
        k = self.kernel
        if not k.name.isidentifier() or k.name in _RESERVED:
            raise self.err("a kernel's name must be a C identifier")
        self.names.taken.add(k.name)
        params = []
        for p in k.params:
            if isinstance(p, Buffer):
                name = self.buf_names[id(p)] = self.names.fresh(p.name)
                params.append(f"{ctype(p.dtype)}* __restrict__ {name}")
            else:
                name = self.var_names[id(p)] = self.names.fresh(p.name)
                params.append(f"{ctype(p.dtype)} {name}")
        for axis, var in k.thread_vars.items():
            if axis not in GRID_AXES + BLOCK_AXES:
                raise self.err(f"unknown thread axis {axis!r}")
            text = f"(({ctype(var.dtype)}){axis})"
            self.var_names[id(var)] = text
            self.nonneg.add(id(var))
        for buf in k.shared:
            if base_scope(buf.scope) != "shared":
                raise self.err(f"buffer {buf.name!r} of kernel.shared has scope {buf.scope!r}")
            name = self.buf_names[id(buf)] = self.names.fresh(buf.name)
            self.line(f"__shared__ {self._align(buf)}{ctype(buf.dtype)} "
                      f"{name}[{self._const_size(buf)}];")
        self.stmt(k.body)
        head = (f'extern "C" __global__ void __launch_bounds__({k.threads_per_block}) '
                f'{k.name}({", ".join(params)}) {{')
        return "\n".join([head] + self.lines + ["}"]) + "\n"

    def line(self, text: str) -> None:
        self.lines.append("  " * self.indent + text)

    def _const_size(self, buf: Buffer) -> int:
        n = 1
        for d in buf.shape:
            c = E.as_const_int(d)
            if c is None:
                raise self.err(f"buffer {buf.name!r} has a symbolic size; a shared or local "
                               "array needs a constant one")
            n *= int(c)
        return max(n, 1)

    def _align(self, buf: Buffer) -> str:
        return "__align__(16) " if id(buf) in self.vector_bufs else ""

    def _vector_accessed(self) -> set:
        """The buffers some access of the body reads or writes as a CUDA vector type."""
        found: set[int] = set()

        def look(n):
            if isinstance(n, (E.BufferLoad, S.BufferStore)) and len(n.indices) == 1 and \
                    self._vector_type(n.buffer, n.indices[0]) is not None:
                found.add(id(n.buffer))
        pre_order_visit(self.kernel.body, look)
        return found

    # ------------------------------------------------------------------ statements
    def stmt(self, s) -> None:
        if s is None:
            return
        meth = getattr(self, "s_" + type(s).__name__, None)
        if meth is None:
            raise self.err(f"cannot print statement {type(s).__name__} as CUDA C")
        self.temps = {}
        meth(s)

    def block(self, s) -> None:
        self.indent += 1
        self.stmt(s)
        self.indent -= 1

    def s_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def s_Evaluate(self, s: S.Evaluate) -> None:
        v = s.value
        if isinstance(v, (E.IntImm, E.FloatImm)):
            return
        if isinstance(v, E.Call) and v.op == BARRIER:
            self.line("__syncthreads();")
            return
        self.line(self.ex(v) + ";")

    def s_LetStmt(self, s: S.LetStmt) -> None:
        if lanes_of(s.var.dtype) > 1:
            raise self.err(f"a vector variable {s.var.name!r} has no CUDA C form here")
        value = self.ex(s.value)
        name = self.names.fresh(s.var.name)
        self.line(f"{ctype(s.var.dtype)} {name} = {value};")
        old = self.var_names.get(id(s.var))
        self.var_names[id(s.var)] = name
        if self._nonneg(s.value):
            self.nonneg.add(id(s.var))
        self.stmt(s.body)
        self._restore(self.var_names, id(s.var), old)

    @staticmethod
    def _restore(table, key, old):
        if old is None:
            table.pop(key, None)
        else:
            table[key] = old

    def s_For(self, s: S.For) -> None:
        v = s.loop_var
        name = self.names.fresh(v.name)
        lo = self.ex(s.min)
        ext = s.extent
        if E.as_const_int(s.min) == 0:
            hi = self.ex(ext)
        else:
            hi = f"{lo} + {self.ex(ext)}"
        old = self.var_names.get(id(v))
        self.var_names[id(v)] = name
        was_nonneg = id(v) in self.nonneg
        if self._nonneg(s.min):
            self.nonneg.add(id(v))
        if s.kind is S.ForKind.UNROLLED:
            self.line("#pragma unroll")
        self.line(f"for ({ctype(v.dtype)} {name} = {lo}; {name} < {hi}; ++{name}) {{")
        self.block(s.body)
        self.line("}")
        # the loop variable's scope ends with the loop: a later loop may take its name
        self.names.taken.discard(name)
        if not was_nonneg:
            self.nonneg.discard(id(v))
        self._restore(self.var_names, id(v), old)

    def s_IfThenElse(self, s: S.IfThenElse) -> None:
        lanes = lanes_of(s.condition.dtype)
        if lanes > 1:
            # lane by lane: each lane's statements under that lane's condition
            self.lazy += 1
            try:
                for k in range(lanes):
                    self._lane_stmt(s, k)
            finally:
                self.lazy -= 1
            return
        self.line(f"if ({_bare(self.ex(s.condition))}) {{")
        self.block(s.then_case)
        if s.else_case is not None:
            self.line("} else {")
            self.block(s.else_case)
        self.line("}")

    def _lane_stmt(self, s, k: int) -> None:
        """Lane ``k`` of a vector statement (under a vector condition: ``self.lazy``, so
        that each lane touches its own elements only)."""
        self.temps = {}
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                self._lane_stmt(x, k)
        elif isinstance(s, S.BufferStore):
            idx = s.indices[0]
            self.line(f"{self.buf_names[id(s.buffer)]}[{self.ex(idx, k)}] = "
                      f"{self.ex(s.value, k)};")
        elif isinstance(s, S.IfThenElse):
            self.line(f"if ({_bare(self.ex(s.condition, k))}) {{")
            self.indent += 1
            self._lane_stmt(s.then_case, k)
            self.indent -= 1
            if s.else_case is not None:
                self.line("} else {")
                self.indent += 1
                self._lane_stmt(s.else_case, k)
                self.indent -= 1
            self.line("}")
        elif isinstance(s, S.Evaluate):
            self.s_Evaluate(s)
        else:
            raise self.err(f"a {type(s).__name__} under a vector condition has no CUDA C "
                           "form here")

    def s_Allocate(self, s: S.Allocate) -> None:
        buf = s.buffer
        if base_scope(buf.scope) == "shared":
            raise self.err(f"shared buffer {buf.name!r} is allocated in the kernel body; a "
                           "kernel declares its shared buffers in Kernel.shared")
        name = self.names.fresh(buf.name)
        init = " = {0}" if zero_filled(buf.dtype) else ""
        self.line(f"{self._align(buf)}{ctype(buf.dtype)} {name}[{self._const_size(buf)}]"
                  f"{init};")
        old = self.buf_names.get(id(buf))
        self.buf_names[id(buf)] = name
        self.stmt(s.body)
        self._restore(self.buf_names, id(buf), old)

    def s_BufferStore(self, s: S.BufferStore) -> None:
        buf = s.buffer
        if len(s.indices) != 1:
            raise self.err(f"store to buffer {buf.name!r} is not flattened")
        idx = s.indices[0]
        name = self._buf(buf)
        lanes = lanes_of(idx.dtype)
        if lanes == 1:
            if lanes_of(s.value.dtype) > 1:
                raise self.err(f"vector value stored at a scalar index of {buf.name!r}")
            self.line(f"{name}[{self.ex(idx)}] = {self.ex(s.value)};")
            return
        vt = self._vector_type(buf, idx)
        if vt is not None:
            value = self._vector_value(s.value, vt, lanes)
            self.line(f"*({vt}*)({name} + {self.ex(idx.base)}) = {value};")
            return
        # element by element: every lane's value first, then the stores
        self.line("{")
        self.indent += 1
        t = ctype(buf.dtype)
        vals = []
        for k in range(lanes):
            tmp = self.names.fresh(f"{buf.name}_v{k}")
            self.line(f"{t} {tmp} = {self.ex(s.value, k)};")
            vals.append(tmp)
        for k in range(lanes):
            self.line(f"{name}[{self.ex(idx, k)}] = {vals[k]};")
        self.indent -= 1
        self.line("}")

    def _buf(self, buf: Buffer) -> str:
        name = self.buf_names.get(id(buf))
        if name is None:
            raise self.err(f"buffer {buf.name!r} is used outside of its allocation (not a "
                           "parameter, not shared, not allocated by an enclosing statement)")
        return name

    def _vector_type(self, buf: Buffer, idx) -> str | None:
        """The CUDA vector type of a stride-1 Ramp access whose base is a multiple of its
        lanes, else None."""
        if not isinstance(idx, E.Ramp) or E.as_const_int(idx.stride) != 1:
            return None
        vt = _VECTOR_TYPES.get((element_of(buf.dtype), idx.lanes))
        if vt is None:
            return None
        m, r = modular_set(idx.base)
        if (m % idx.lanes if m else 0) != 0 or r % idx.lanes != 0:
            return None
        return vt

    def _vector_value(self, e, vt: str, lanes: int) -> str:
        """A vector value as an expression of CUDA vector type ``vt``."""
        if isinstance(e, E.BufferLoad) and self._vector_type(e.buffer, e.indices[0]) == vt:
            return f"*({vt}*)({self._buf(e.buffer)} + {self.ex(e.indices[0].base)})"
        return f"make_{vt}({', '.join(self.ex(e, k) for k in range(lanes))})"

    # ------------------------------------------------------------------ expressions
    def ex(self, e, k: int | None = None) -> str:
        """``e`` as a C expression; lane ``k`` of a vector ``e`` (a scalar ``e`` is the
        same in every lane)."""
        if k is not None and lanes_of(e.dtype) == 1:
            k = None
        if k is None and lanes_of(e.dtype) > 1:
            raise self.err(f"a vector expression ({e.dtype}) where a scalar is expected")
        meth = getattr(self, "e_" + type(e).__name__, None)
        if meth is None:
            raise self.err(f"cannot print expression {type(e).__name__} as CUDA C")
        return meth(e, k)

    def e_Var(self, e: E.Var, k):
        name = self.var_names.get(id(e))
        if name is None:
            raise self.err(f"variable {e.name!r} is used but never defined")
        return name

    def e_IntImm(self, e: E.IntImm, k):
        v = int(e.value)
        if is_bool(e.dtype):
            return "true" if v else "false"
        if is_uint(e.dtype):
            v &= (1 << bits_of(e.dtype)) - 1
            return f"{v}U" if bits_of(e.dtype) <= 32 else f"(uint64_t){v}ULL"
        if bits_of(e.dtype) == 64:
            return f"(int64_t){v}LL"
        if bits_of(e.dtype) < 32:
            return f"({ctype(e.dtype)}){v}"
        return str(v)

    def e_FloatImm(self, e: E.FloatImm, k):
        ctype(e.dtype)
        return _float_literal(e.value, e.dtype)

    def e_StringImm(self, e, k):
        raise self.err(f"a string constant {e.value!r} has no CUDA C form")

    def e_Cast(self, e: E.Cast, k):
        return f"(({ctype(e.dtype)}){self.ex(e.value, k)})"

    def e_Let(self, e: E.Let, k):
        value = self.ex(e.value, k)
        old = self.var_names.get(id(e.var))
        if self.lazy:
            self.var_names[id(e.var)] = f"({value})"
        else:
            name = self.names.fresh(e.var.name)
            self.line(f"{ctype(e.var.dtype)} {name} = {value};")
            self.var_names[id(e.var)] = name
        out = self.ex(e.body, k)
        self._restore(self.var_names, id(e.var), old)
        return out

    def e_Ramp(self, e: E.Ramp, k):
        base = self.ex(e.base)
        if k == 0:
            return base
        stride = E.as_const_int(e.stride)
        step = str(k * stride) if stride is not None else f"({self.ex(e.stride)} * {k})"
        return f"({base} + {step})"

    def e_Broadcast(self, e: E.Broadcast, k):
        return self.ex(e.value)

    def e_BufferLoad(self, e: E.BufferLoad, k):
        buf = e.buffer
        if len(e.indices) != 1:
            raise self.err(f"load from buffer {buf.name!r} is not flattened")
        idx = e.indices[0]
        name = self._buf(buf)
        if k is None:
            return f"{name}[{self.ex(idx)}]"
        vt = self._vector_type(buf, idx)
        if vt is None:
            return f"{name}[{self.ex(idx, k)}]"
        if self.lazy:
            # under a condition (a branch of if_then_else, a lane's guard): the lane's own
            # element only, never the whole vector
            return f"{name}[{self.ex(idx, k)}]"
        vec = f"*({vt}*)({name} + {self.ex(idx.base)})"
        tmp = self.temps.get(id(e))
        if tmp is None:
            tmp = self.names.fresh(f"{buf.name}_vec")
            self.line(f"{vt} {tmp} = {vec};")
            self.temps[id(e)] = tmp
        return f"{tmp}.{_LANE_FIELDS[k]}"

    def e_BufferField(self, e, k):
        raise self.err("an opaque use of a buffer (B.data, B.elem_offset) has no CUDA C "
                       "form here")

    def _bin(self, e, op: str, k):
        return f"({self.ex(e.a, k)} {op} {self.ex(e.b, k)})"

    def e_Add(self, e, k): return self._bin(e, "+", k)
    def e_Sub(self, e, k): return self._bin(e, "-", k)
    def e_Mul(self, e, k): return self._bin(e, "*", k)
    def e_Div(self, e, k): return self._bin(e, "/", k)
    def e_EQ(self, e, k): return self._bin(e, "==", k)
    def e_NE(self, e, k): return self._bin(e, "!=", k)
    def e_LT(self, e, k): return self._bin(e, "<", k)
    def e_LE(self, e, k): return self._bin(e, "<=", k)
    def e_GT(self, e, k): return self._bin(e, ">", k)
    def e_GE(self, e, k): return self._bin(e, ">=", k)
    def e_And(self, e, k): return self._bin(e, "&&", k)
    def e_Or(self, e, k): return self._bin(e, "||", k)

    def e_Not(self, e, k):
        return f"(!{self.ex(e.a, k)})"

    def e_Mod(self, e, k):
        if is_float(e.dtype):
            return self._call("fmod", e.dtype, [self.ex(e.a, k), self.ex(e.b, k)])
        return self._bin(e, "%", k)

    def e_Min(self, e, k):
        return f"min({self.ex(e.a, k)}, {self.ex(e.b, k)})"

    def e_Max(self, e, k):
        return f"max({self.ex(e.a, k)}, {self.ex(e.b, k)})"

    def e_Select(self, e: E.Select, k):
        return (f"({self.ex(e.condition, k)} ? {self.ex(e.true_value, k)} : "
                f"{self.ex(e.false_value, k)})")

    def _floor(self, e, k, div: bool):
        a, b = self.ex(e.a, k), self.ex(e.b, k)
        if is_float(e.dtype):
            q = self._call("floor", e.dtype, [f"({a} / {b})"])
            return q if div else f"({a} - ({q} * {b}))"
        if is_uint(e.dtype) or is_bool(e.dtype):
            return f"({a} {'/' if div else '%'} {b})"
        c = E.as_const_int(e.b) if not isinstance(e.b, E.Broadcast) else \
            E.as_const_int(e.b.value)
        if c is not None and c > 0 and self._nonneg(e.a):
            return f"({a} {'/' if div else '%'} {b})"
        if c is not None and c > 0 and c & (c - 1) == 0:
            shift = c.bit_length() - 1
            return f"({a} >> {shift})" if div else f"({a} & {c - 1})"
        t = ctype(e.dtype)
        suffix = _FLOOR_HELPERS.get(t)
        if suffix is None:
            raise self.err(f"floor division of {e.dtype} has no CUDA C helper")
        self.helpers.add(t)
        return f"{'floordiv' if div else 'floormod'}_{suffix}({a}, {b})"

    def e_FloorDiv(self, e, k): return self._floor(e, k, True)
    def e_FloorMod(self, e, k): return self._floor(e, k, False)

    def _nonneg(self, e) -> bool:
        """Conservatively: is ``e`` at least 0 for every value of the variables?"""
        if isinstance(e, E.IntImm):
            return e.value >= 0
        if isinstance(e, E.Var):
            return id(e) in self.nonneg
        if isinstance(e, (E.Add, E.Mul, E.FloorDiv, E.Div, E.Min)):
            return self._nonneg(e.a) and self._nonneg(e.b)
        if isinstance(e, E.FloorMod):
            return self._nonneg(e.b)
        if isinstance(e, E.Mod):
            return self._nonneg(e.a) and self._nonneg(e.b)
        if isinstance(e, E.Max):
            return self._nonneg(e.a) or self._nonneg(e.b)
        if isinstance(e, E.Cast) and is_int(e.dtype) and is_int(e.value.dtype):
            return bits_of(e.dtype) >= bits_of(e.value.dtype) and self._nonneg(e.value)
        if isinstance(e, E.Ramp):
            return self._nonneg(e.base) and self._nonneg(e.stride)
        if isinstance(e, E.Broadcast):
            return self._nonneg(e.value)
        return False

    def _call(self, fn: str, dtype: str, args: list) -> str:
        """A math function of float ``dtype``: ``expf`` for float32, ``exp`` for float64."""
        base = element_of(dtype)
        name = fn + "f" if base == "float32" else fn
        return f"{name}({', '.join(args)})"

    def e_Call(self, e: E.Call, k):
        op = e.op
        if op == BARRIER:
            raise self.err("a barrier inside an expression")
        if op in ("address_of", "call_extern"):
            raise self.err(f"{op} is a host-side hook; a GPU kernel cannot call it")
        if op not in E.INTRINSICS:
            raise self.err(f"unsupported intrinsic {op!r}")
        if len(e.args) != E.INTRINSICS[op]:
            raise self.err(f"intrinsic {op!r} takes {E.INTRINSICS[op]} arguments, "
                           f"got {len(e.args)}")
        if op == "likely":
            return self.ex(e.args[0], k)
        if op == "if_then_else":
            c, t, f = e.args
            cond = self.ex(c, k)
            self.lazy += 1
            try:
                return f"({cond} ? {self.ex(t, k)} : {self.ex(f, k)})"
            finally:
                self.lazy -= 1
        args = [self.ex(a, k) for a in e.args]
        dt = e.args[0].dtype
        if op in E.BITWISE:
            sym = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^",
                   "shift_left": "<<", "shift_right": ">>"}
            if op == "bitwise_not":
                return f"(~{args[0]})"
            return f"({args[0]} {sym[op]} {args[1]})"
        if op in ("abs", "fabs") and not is_float(dt):
            if is_uint(dt) or is_bool(dt):
                return args[0]
            return f"({args[0]} < 0 ? -{args[0]} : {args[0]})"
        if not is_float(dt):
            # an integer argument: computed in double, as the CPU back end does
            wide = [f"((double){a})" for a in args]
            return f"(({ctype(e.dtype)}){self._float_fn(op, wide, 'float64')})"
        out = self._float_fn(op, args, dt)
        if element_of(e.dtype) != element_of(dt):
            out = f"(({ctype(e.dtype)}){out})"
        return out

    def _float_fn(self, op: str, args: list, dtype: str) -> str:
        ctype(dtype)
        one = _float_literal(1.0, dtype)
        if op == "rsqrt":
            return f"({one} / {self._call('sqrt', dtype, args)})"
        if op == "sigmoid":
            return f"({one} / ({one} + {self._call('exp', dtype, [f'(-{args[0]})'])}))"
        fn = _MATH.get(op)
        if fn is None:
            raise self.err(f"unsupported intrinsic {op!r}")
        return self._call(fn, dtype, args)


def _header(helpers: set) -> str:
    parts = [HEADER]
    for t in sorted(helpers):
        parts.append(_floor_helper(t, _FLOOR_HELPERS[t]))
    return "\n".join(parts)


def kernel_to_cuda(kernel: Kernel, header: bool = False) -> str:
    """One kernel as CUDA C: its ``__global__`` function; with ``header``, a translation unit
    NVRTC compiles (TVM's header and the helpers the kernel uses)."""
    if not header:
        return KernelPrinter(kernel).function()
    return kernels_to_cuda([kernel])


def kernels_to_cuda(kernels) -> str:
    """Several kernels in one translation unit: the header, then each kernel."""
    helpers: set = set()
    names: set = set()
    bodies = []
    for k in kernels:
        if k.name in names:
            raise BuildError(f"two GPU kernels named {k.name!r}")
        names.add(k.name)
        bodies.append(KernelPrinter(k, helpers).function())
    return _header(helpers) + "\n" + "\n".join(bodies)


def module_to_cuda(gpu_module) -> str:
    """Every kernel of a :class:`~engine.gpu.kernel.GpuModule` (its functions' kernels in
    order) as one CUDA C translation unit, as TVM's ``mod.imported_modules[0].get_source()``."""
    return kernels_to_cuda([k for f in gpu_module.functions for k in f.kernels])

"""Compiled modules: calling kernels on numpy arrays, timing them, showing their code.

A :class:`Module` is what :func:`engine.build` returns. ``mod["mm_relu"](a, b, c)`` runs
the kernel in place on numpy arrays without copying them. Before every call the arguments
are checked — count, type (numpy.ndarray), dtype, shape, memory layout (C-contiguous, or
exactly the buffer's declared strides), element alignment, writeability of the buffers the
kernel writes, and that no two arrays overlap (the kernel is compiled with ``noalias``
parameters) — and a wrong one raises :class:`ArgumentError` naming the buffer. A kernel is
therefore never given memory it could run past. Once a kernel has been called a few times
(or another kernel with the same parameters has), those checks run in compiled code
(:mod:`engine.runtime.fastcall`, like TVM's packed-function argument checks): a call costs
about 1.3 us instead of 7.5. Anything the compiled check does not accept goes through the
Python checks, which say what is wrong. ``ENGINE_COMPILED_CHECKS=0`` turns the compiled
checks off.

Arrays are not copied, so they need not be 64-byte aligned: kernels declare only the
element size as the alignment of their parameters (see :mod:`engine.codegen.llvm`).
:func:`aligned_empty` / :func:`as_aligned` give 64-byte aligned arrays, on which vector
loads never straddle cache lines (somewhat faster for L1-bound kernels).

The GIL is released while a kernel runs (ctypes), so kernels can be called from several
Python threads at once.
"""
from __future__ import annotations

import ctypes
import math
import os
import re
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.functor import collect_stmts

from .fastcall import NEEDS_FULL_CHECK

NUMPY_DTYPES = {
    "float32": np.float32, "float64": np.float64, "float16": np.float16,
    "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "bool": np.bool_,
}


class ArgumentError(TypeError):
    """An array passed to a compiled kernel does not match the buffer it is bound to."""


@dataclass(frozen=True)
class TimingResult:
    """Seconds per call, like TVM's ``BenchmarkResult``: ``results`` holds one mean per repeat."""

    mean: float
    median: float
    min: float
    max: float
    std: float
    results: tuple

    def __str__(self) -> str:
        return (f"mean {self.mean * 1e3:.4f} ms, median {self.median * 1e3:.4f} ms, "
                f"min {self.min * 1e3:.4f} ms, max {self.max * 1e3:.4f} ms, "
                f"std {self.std * 1e3:.4f} ms ({len(self.results)} repeats)")


@dataclass
class ParamSpec:
    name: str
    dtype: Any
    shape: tuple
    strides: tuple | None      # byte strides required (None: C-contiguous)
    written: bool


def _struct_data_pointer():
    """A fast reader of an ndarray's data pointer, or None when it cannot be trusted.

    ``a.ctypes.data`` costs about 0.85 us (it builds a ctypes helper object) and runs for
    every argument of every call. numpy's ``PyArrayObject`` starts with ``PyObject_HEAD``
    followed by ``char *data`` (its public C layout), so in CPython the pointer sits right
    after the object header. This is checked here against ``a.ctypes.data`` on a few
    arrays (owned, an offset view, a transposed one); on any mismatch the slow, always
    right reader is used instead.
    """
    offset = object.__basicsize__  # the PyObject header: 16 bytes on 64-bit CPython
    read = ctypes.c_void_p.from_address

    def fast(a: np.ndarray) -> int:
        return read(id(a) + offset).value or 0
    try:
        base = np.arange(64, dtype=np.float32).reshape(8, 8)
        for a in (base, base[3:, 1:], base.T, np.empty(0, np.int8), np.zeros(5, np.float64)):
            if fast(a) != a.ctypes.data:
                return None
    except Exception:  # noqa: BLE001 - any surprise: use the slow reader
        return None
    return fast


_fast_data_pointer = _struct_data_pointer()


def data_pointer(a: np.ndarray) -> int:
    """The address of ``a``'s first element (``a.ctypes.data``, faster when possible)."""
    return _fast_data_pointer(a) if _fast_data_pointer is not None else a.ctypes.data


#: numpy's flag bits (its public C API: NPY_ARRAY_C_CONTIGUOUS, _ALIGNED, _WRITEABLE), read
#: at once from ``a.flags.num`` instead of three attribute lookups
_C_CONTIGUOUS, _ALIGNED, _WRITEABLE = 0x1, 0x100, 0x400


def _flag_bits_agree() -> bool:
    """True when ``a.flags.num`` carries those bits as the named flags say (checked on a few
    arrays, like the data pointer reader; on any surprise the named flags are used)."""
    try:
        base = np.arange(64, dtype=np.float32).reshape(8, 8)
        ro = base.copy()
        ro.flags.writeable = False
        odd = np.frombuffer(bytearray(17), np.uint8)[1:].view(np.int32)
        for a in (base, base[:, 1:], base.T, ro, odd):
            num, fl = a.flags.num, a.flags
            if bool(num & _C_CONTIGUOUS) != fl.c_contiguous or \
                    bool(num & _ALIGNED) != fl.aligned or bool(num & _WRITEABLE) != fl.writeable:
                return False
    except Exception:  # noqa: BLE001 - any surprise: use the named flags
        return False
    return True


_FLAG_BITS = _flag_bits_agree()

#: a Function's compiled check before its first call
_NOT_YET = object()


def _compiled_checks_enabled() -> bool:
    """False when ``ENGINE_COMPILED_CHECKS=0`` (every call then takes the Python checks)."""
    return os.environ.get("ENGINE_COMPILED_CHECKS", "1") != "0"


class Function:
    """A callable compiled kernel: ``f(*arrays)``; see the module docstring for checks."""

    def __init__(self, module: "Module", name: str, address: int, specs: list[ParamSpec],
                 binding: Any = None):
        self.module = module
        self.name = name
        self.address = address
        self.specs = specs
        #: a function with symbolic sizes or scalar parameters: its argument plan
        #: (:class:`engine.runtime.binding.Binding`), which every call goes through
        self.binding = binding
        if binding is not None:
            self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, *binding.argtypes)(address)
            self._quick = binding.quick_plan() \
                if _fast_data_pointer is not None and _FLAG_BITS else None
            self._checked = _NOT_YET if self._quick is not None and _compiled_checks_enabled() \
                else None
            self._calls = 0
            return
        self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.c_void_p] * len(specs))(address)
        self._quick = self._quick_plan(specs)
        # the argument checks compiled for this signature (engine.runtime.fastcall), found
        # or made on a call (see _compiled_check); None: every call takes the Python checks
        self._checked = _NOT_YET if self._quick is not None and _compiled_checks_enabled() \
            else None
        self._calls = 0

    @staticmethod
    def _quick_plan(specs: list[ParamSpec]):
        """What :meth:`pointers` checks per argument in its quick pass — (dtype, shape,
        flag bits required) — and the pairs of arguments that must not overlap (one of them
        written) with their sizes in bytes; None when the quick pass does not apply (a
        declared stride, an empty buffer, or a numpy whose internals were not confirmed)."""
        if _fast_data_pointer is None or not _FLAG_BITS:
            return None
        per_arg, sizes = [], []
        for s in specs:
            size = math.prod(s.shape)
            if s.strides is not None or size == 0:
                return None
            need = _C_CONTIGUOUS | _ALIGNED | (_WRITEABLE if s.written else 0)
            per_arg.append((np.dtype(s.dtype), tuple(s.shape), need))
            sizes.append(size * np.dtype(s.dtype).itemsize)
        pairs = tuple((i, j, sizes[i], sizes[j]) for i in range(len(specs))
                      for j in range(i + 1, len(specs)) if specs[i].written or specs[j].written)
        return tuple(per_arg), pairs

    def __repr__(self) -> str:
        if self.binding is not None:
            return f"<compiled function {self.name}({self.binding.signature})>"
        sig = ", ".join(f"{s.name}: {np.dtype(s.dtype).name}{list(s.shape)}" for s in self.specs)
        return f"<compiled function {self.name}({sig})>"

    def pointers(self, arrays: tuple) -> list[int]:
        """Check ``arrays`` against the parameters; return their data pointers.

        The common case (every array right: ndarray, dtype, shape, C-contiguous, aligned,
        writeable where written, no written buffer overlapping another) is checked in one
        quick pass against the plan made when the kernel was loaded (:meth:`_quick_plan`;
        about 5 us for three arrays on a 2 GHz EPYC) — it runs on every call, so it counts in
        every measured time. Anything else (and a kernel with declared strides or an empty
        buffer) goes through :meth:`_check`, which says exactly what is wrong.

        A function with symbolic sizes or scalar parameters checks its arguments with its
        :attr:`binding` and returns every value the kernel takes (pointers, scalars, sizes).
        """
        quick = self._quick
        if self.binding is not None:
            if quick is not None:
                got = self._quick_symbolic(arrays, quick)
                if got is not None:
                    return got
            return self.binding.arguments(arrays)
        if quick is not None and len(arrays) == len(quick[0]):
            ptrs = []
            for a, (dtype, shape, need) in zip(arrays, quick[0]):
                if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape \
                        or a.flags.num & need != need:
                    return self._check(arrays)
                ptrs.append(_fast_data_pointer(a))
            for i, j, size_i, size_j in quick[1]:
                if ptrs[i] < ptrs[j] + size_j and ptrs[j] < ptrs[i] + size_i:
                    return self._check(arrays)
            return ptrs
        return self._check(arrays)

    @staticmethod
    def _quick_symbolic(arrays: tuple, plan) -> list | None:
        """The quick pass of a kernel with symbolic sizes (plan:
        :meth:`engine.runtime.binding.Binding.quick_plan`): every array right and the sizes
        agreeing gives the kernel's values (pointers, then sizes); anything else None (the
        Python checks then say what is wrong)."""
        _, per_arg, pairs, size_dtypes = plan
        if len(arrays) != len(per_arg):
            return None
        sizes: list = [None] * len(size_dtypes)
        ptrs = []
        for a, (dtype, dims, need, cap) in zip(arrays, per_arg):
            if type(a) is not np.ndarray or a.dtype != dtype or a.ndim != len(dims) \
                    or a.flags.num & need != need:
                return None
            for n, c in zip(a.shape, dims):
                if c >= 0:
                    if n != c:
                        return None
                    continue
                k = -c - 1
                have = sizes[k]
                if have is None:
                    if n > 2**31 - 1 and size_dtypes[k] == "int32":
                        return None
                    sizes[k] = n
                elif have != n:
                    return None
            if cap and a.size > cap:
                return None
            ptrs.append(_fast_data_pointer(a))
        for i, j in pairs:
            pi, pj = ptrs[i], ptrs[j]
            if pi < pj + arrays[j].nbytes and pj < pi + arrays[i].nbytes and \
                    arrays[i].size and arrays[j].size:
                return None
        return ptrs + sizes

    def _check(self, arrays: tuple) -> list[int]:
        """The detailed check behind :meth:`pointers`: raises ArgumentError with the reason."""
        specs = self.specs
        if len(arrays) != len(specs):
            names = ", ".join(s.name for s in specs)
            raise ArgumentError(f"{self.name} takes {len(specs)} arrays ({names}), "
                                f"got {len(arrays)}")
        ptrs = []
        for i, (a, s) in enumerate(zip(arrays, specs)):
            where = f"argument {i} (buffer {s.name!r}) of {self.name}"
            if not isinstance(a, np.ndarray):
                raise ArgumentError(f"{where} must be a numpy.ndarray, got {type(a).__name__}")
            if a.dtype != s.dtype:
                raise ArgumentError(f"{where} must have dtype {np.dtype(s.dtype).name}, "
                                    f"got {a.dtype.name} (convert with .astype)")
            if a.shape != s.shape:
                raise ArgumentError(f"{where} must have shape {s.shape}, got {a.shape}")
            if s.strides is None:
                if not a.flags.c_contiguous:
                    raise ArgumentError(f"{where} must be C-contiguous "
                                        "(pass numpy.ascontiguousarray(x))")
            elif a.size > 0 and tuple(st for st, n in zip(a.strides, a.shape) if n > 1) != \
                    tuple(st for st, n in zip(s.strides, s.shape) if n > 1):
                raise ArgumentError(f"{where} must have byte strides {s.strides}, got {a.strides}")
            if not a.flags.aligned:
                raise ArgumentError(f"{where} is not aligned to its element size")
            if s.written and not a.flags.writeable:
                raise ArgumentError(f"{where} is written by the kernel but the array is "
                                    "read-only (pass a writeable copy)")
            ptrs.append(a.ctypes.data if a.size > 0 else 0)
        for i in range(len(arrays)):
            for j in range(i + 1, len(arrays)):
                if (specs[i].written or specs[j].written) and arrays[i].size and arrays[j].size \
                        and np.may_share_memory(arrays[i], arrays[j]):
                    raise ArgumentError(
                        f"arguments {i} ({specs[i].name!r}) and {j} ({specs[j].name!r}) of "
                        f"{self.name} overlap in memory; the kernel assumes distinct buffers "
                        "(pass a copy)")
        return ptrs

    def _compiled_check(self):
        """This signature's compiled check: an existing one at once, a new one compiled on
        the :data:`~engine.runtime.fastcall.COMPILE_AT_CALL`-th call (``_NOT_YET`` before)."""
        from .fastcall import COMPILE_AT_CALL, NOT_COMPILED, checked_caller
        self._calls += 1
        checked = checked_caller(self._quick, compile=self._calls >= COMPILE_AT_CALL)
        if checked is NOT_COMPILED:
            return _NOT_YET
        self._checked = checked
        return checked

    def call_pointers(self, ptrs: list[int]) -> None:
        rc = self._cfunc(*ptrs)
        if rc != 0:
            self._failed(rc)

    def _failed(self, rc: int) -> None:
        if rc == -1:
            raise MemoryError(f"{self.name}: the kernel could not allocate an "
                              "intermediate buffer")
        raise RuntimeError(f"{self.name}: the kernel failed with code {rc}")

    def __call__(self, *arrays: np.ndarray) -> None:
        checked = self._checked
        if checked is not None:
            if checked is _NOT_YET:
                checked = self._compiled_check()
            if checked is not None and checked is not _NOT_YET:
                rc = checked(self.address, id(arrays))   # arrays: a tuple, alive
                if rc == 0:
                    return
                if rc != NEEDS_FULL_CHECK:
                    self._failed(rc)
        self.call_pointers(self.pointers(arrays))


#: the line between the assembly of two modules of one build (labels such as ``.LBB0_3``
#: are local to each module, so the same label can appear in two of them)
ASM_UNIT_SEPARATOR = "# ---- parallel loop body: a module of its own ----"


_TASK_DEFINE = re.compile(r'define [^@\n]*@"?([\w.]+)_task"?\(')


def join_units(texts: list[str]) -> str:
    """The LLVM IR of a build: its main module, then each parallel loop body's module."""
    if len(texts) == 1:
        return texts[0]
    parts = [texts[0]]
    for t in texts[1:]:
        m = _TASK_DEFINE.search(t)
        name = m.group(1) if m else "?"
        parts.append(f"; ---- parallel loop body {name}: a module of its own, compiled "
                     "side by side with the others and linked in the same JIT ----\n" + t)
    return "\n".join(parts)


def join_assembly(texts: list[str]) -> str:
    """The assembly of a build: each module's, separated by :data:`ASM_UNIT_SEPARATOR`."""
    return texts[0] + "".join(f"\n{ASM_UNIT_SEPARATOR}\n{a}" for a in texts[1:])


class FunctionTable:
    """What a build's result answers about its kernels, whatever machine they are for.

    A subclass fills ``self._functions`` (name -> its function, the entry first) and gives
    its code as text through :meth:`_optimised_ir` and :meth:`_assembly`.
    """

    _functions: dict
    _ll_text: str

    def __getitem__(self, name: str) -> Any:
        f = self._functions.get(name)
        if f is None:
            raise KeyError(f"no compiled function named {name!r} "
                           f"(this module has: {', '.join(self._functions)})")
        return f

    def get_function(self, name: str) -> Any:
        return self[name]

    def __contains__(self, name: str) -> bool:
        return name in self._functions

    def names(self) -> list[str]:
        return list(self._functions)

    def entry_name(self) -> str:
        return next(iter(self._functions))

    def get_source(self, fmt: str = "ll") -> str:
        """"ll" (LLVM IR as generated), "ll-opt" (after O3), "asm" (the machine's assembly)."""
        if fmt in ("ll", "llvm"):
            return self._ll_text
        if fmt in ("ll-opt", "llvm-opt", "opt"):
            return self._optimised_ir()
        if fmt in ("asm", "s"):
            return self._assembly()
        raise ValueError(f"unknown source format {fmt!r}; use 'll', 'll-opt' or 'asm'")

    def _optimised_ir(self) -> str:
        raise NotImplementedError

    def _assembly(self) -> str:
        raise NotImplementedError


class Module(FunctionTable):
    """The result of :func:`engine.build`: compiled kernels plus their code and stats.

    * ``mod[name]`` / ``mod.get_function(name)`` — a callable :class:`Function`;
    * ``mod.time_evaluator(name, number=10, repeat=3, min_repeat_ms=0)(*arrays)`` —
      a :class:`TimingResult` in seconds (like TVM);
    * ``mod.get_source(fmt)`` — ``"ll"`` (LLVM IR as generated), ``"ll-opt"`` (after the
      O3 pipeline), ``"asm"`` (x86 assembly of the optimised module);
    * ``mod.compile_stats`` — seconds spent in ``lower``, ``codegen`` (ours) and
      ``llvm_opt`` (LLVM's optimisation and machine code, all modules side by side),
      ``llvm_jit`` (loading and linking the object code), plus ``total``; ``llvm_cpu`` is
      the LLVM time one module after the other, ``llvm_modules`` / ``llvm_threads`` how
      many modules and threads;
    * ``mod.lowered`` — the lowered PrimFuncs by name (what codegen compiled).
    """

    def __init__(self, engine: Any, llvm_module: Any, ll_text: str, functions: dict,
                 compile_stats: dict, lowered: dict, options: dict, keepalive: tuple = ()):
        self._engine = engine
        # one optimised llvmlite module, or a list of optimised modules as LLVM IR text:
        # the main module and each parallel loop body's (engine.build compiles them side
        # by side)
        self._llvm_modules = list(llvm_module) if isinstance(llvm_module, (list, tuple)) \
            else [llvm_module]
        self._ll_text = ll_text
        self._ll_opt: str | None = None
        self._asm: str | None = None
        self._functions = functions
        self.compile_stats = compile_stats
        self.lowered = lowered
        self.options = options
        self._keepalive = keepalive
        self._lock = threading.Lock()

    def _optimised_ir(self) -> str:
        with self._lock:
            if self._ll_opt is None:
                self._ll_opt = join_units([str(m) for m in self._llvm_modules])
        return self._ll_opt

    def _assembly(self) -> str:
        with self._lock:
            if self._asm is None:
                from engine.codegen.target import emit_assembly
                level = self.options.get("opt_level", 3)
                self._asm = join_assembly([emit_assembly(str(m), level)
                                           for m in self._llvm_modules])
        return self._asm

    def time_evaluator(self, func_name: str, number: int = 10, repeat: int = 3,
                       min_repeat_ms: float = 0) -> Callable[..., TimingResult]:
        """A timer for ``func_name``, like TVM's ``Module.time_evaluator``.

        The returned callable checks its arrays once, runs the kernel once to warm up, then
        ``repeat`` times runs it ``number`` times back to back (``number`` grows until one
        repeat lasts at least ``min_repeat_ms``) and returns a :class:`TimingResult`
        whose ``results`` are the mean seconds per call of each repeat.
        """
        f = self[func_name]
        if not isinstance(number, int) or number < 1:
            raise ValueError(f"number must be a positive integer, got {number!r}")
        if not isinstance(repeat, int) or repeat < 1:
            raise ValueError(f"repeat must be a positive integer, got {repeat!r}")

        def evaluator(*arrays: np.ndarray) -> TimingResult:
            ptrs = f.pointers(arrays)
            call = f.call_pointers
            call(ptrs)  # warm-up
            n = number
            results = []
            perf = time.perf_counter
            for _ in range(repeat):
                while True:
                    t0 = perf()
                    for _ in range(n):
                        call(ptrs)
                    elapsed = perf() - t0
                    if min_repeat_ms <= 0 or elapsed * 1e3 >= min_repeat_ms:
                        break
                    grow = (min_repeat_ms / 1e3) / max(elapsed, 1e-9)
                    n = max(n + 1, int(math.ceil(n * min(grow * 1.1, 100.0))))
                results.append(elapsed / n)
            mean = statistics.fmean(results)
            return TimingResult(mean=mean, median=statistics.median(results),
                                min=min(results), max=max(results),
                                std=statistics.pstdev(results) if len(results) > 1 else 0.0,
                                results=tuple(results))
        return evaluator

    def export_library(self, path: Any, **options: Any) -> Any:
        """Write the kernels as a standalone shared library ``path`` and its C header
        ``<stem>.h`` (TVM's ``export_library``; :func:`engine.deploy.export_library`:
        ``prefix=``, ``target=``); returns the record of what was written."""
        from engine.ir import deployment
        return deployment.call("export", self, path, **options)

    def __repr__(self) -> str:
        return f"<engine.runtime.Module {', '.join(self._functions)}>"


def written_buffers(body: Any) -> set:
    """The ids of the buffers a lowered body stores into."""
    return {id(s.buffer) for s in collect_stmts(body, S.BufferStore)}


def make_specs(flat_params: tuple, orig_params: tuple, body: Any) -> list[ParamSpec]:
    """Parameter specs of a lowered function (shapes from the original buffers; a symbolic
    dimension is its text, ``"n"``; scalar parameters have none)."""
    written = written_buffers(body)
    specs = []
    for fp, op in zip(flat_params, orig_params):
        if isinstance(op, E.Var):
            continue
        if any(E.as_const_int(d) is None for d in op.shape):
            dt = np.dtype(NUMPY_DTYPES.get(op.dtype, "float32"))
            from engine.script.printer.module import repr_node
            shape = tuple(E.as_const_int(d) if E.as_const_int(d) is not None else repr_node(d)
                          for d in op.shape)
            specs.append(ParamSpec(op.name, dt, shape, None, id(fp) in written))
            continue
        if op.dtype not in NUMPY_DTYPES:
            from engine.lower.errors import BuildError
            raise BuildError(f"buffer {op.name!r} has dtype {op.dtype}, which cannot be passed "
                             "as a numpy array")
        dt = np.dtype(NUMPY_DTYPES[op.dtype])
        strides = None
        if op.strides:
            strides = tuple(E.as_const_int(s) * dt.itemsize for s in op.strides)
        try:
            shape = op.const_shape()
        except ValueError:
            shape = fp.const_shape()
        specs.append(ParamSpec(op.name, dt, tuple(shape), strides, id(fp) in written))
    return specs


def aligned_empty(shape, dtype="float32", align: int = 64) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an ``align``-byte boundary.

    numpy's own arrays start 16 bytes past a 64-byte boundary on x86-64 Linux, so a 512-bit
    vector load of one of their rows straddles two cache lines; kernels run somewhat faster
    on arrays from this function (the kernels accept both).
    """
    dt = np.dtype(dtype)
    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    n = 1
    for s in shape:
        n *= s
    raw = np.empty(n * dt.itemsize + align, np.uint8)
    off = (-data_pointer(raw)) % align
    return raw[off:off + n * dt.itemsize].view(dt).reshape(shape)


def as_aligned(a: np.ndarray, align: int = 64) -> np.ndarray:
    """``a`` itself if its data is ``align``-byte aligned and C-contiguous, else an aligned copy."""
    if a.flags.c_contiguous and a.ctypes.data % align == 0:
        return a
    out = aligned_empty(a.shape, a.dtype, align)
    out[...] = a
    return out


def random_arrays(specs: list[ParamSpec], seed: int = 0) -> list[np.ndarray]:
    """Random arrays matching the parameters (floats in [-1, 1), small ints, random bools)."""
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        symbolic = [d for d in s.shape if not isinstance(d, (int, np.integer))]
        if symbolic:
            text = ", ".join(str(d) for d in s.shape) + ("," if len(s.shape) == 1 else "")
            raise ArgumentError(f"buffer {s.name!r} has the symbolic shape ({text}): there "
                                "are no random arrays of it; make arrays of the sizes you want")
        if s.dtype.kind == "f":
            a = rng.uniform(-1, 1, size=s.shape).astype(s.dtype)
        elif s.dtype.kind == "b":
            a = rng.integers(0, 2, size=s.shape).astype(bool)
        elif s.dtype.kind == "u":
            a = rng.integers(0, 8, size=s.shape).astype(s.dtype)
        else:
            a = rng.integers(-8, 8, size=s.shape).astype(s.dtype)
        if s.strides is not None:  # lay the values out with the declared strides
            span = sum((n - 1) * st for n, st in zip(s.shape, s.strides)) if a.size else 0
            backing = np.zeros(span // s.dtype.itemsize + 1, s.dtype)
            view = np.lib.stride_tricks.as_strided(backing, shape=s.shape, strides=s.strides)
            view[...] = a
            a = view
        out.append(a)
    return out


def random_args(func: Any, seed: int = 0) -> list[np.ndarray]:
    """:func:`random_arrays` for a PrimFunc's parameters (C-contiguous, constant shapes)."""
    scalars = [p.name for p in func.params if isinstance(p, E.Var)]
    if scalars:
        raise ArgumentError(f"function {func.name!r} has scalar parameter(s) "
                            f"{', '.join(scalars)}: give their values with the arrays")
    specs = []
    for p in func.params:
        try:
            shape = p.const_shape()
        except ValueError:
            raise ArgumentError(f"buffer {p.name!r} of {func.name!r} has a symbolic shape: "
                                "there are no random arrays of it; make arrays of the sizes "
                                "you want") from None
        specs.append(ParamSpec(p.name, np.dtype(NUMPY_DTYPES.get(p.dtype, p.dtype)), shape,
                               None, False))
    return random_arrays(specs, seed)


__all__ = ["aligned_empty", "as_aligned", "ArgumentError", "Function", "Module", "TimingResult", "ParamSpec", "make_specs",
           "random_arrays", "random_args", "NUMPY_DTYPES"]

"""The native parallel runtime (engine/runtime/parallel.c): build once, load, expose.

On first use the C source is compiled with the system C compiler
(``cc -O2 -shared -fPIC -pthread``) into the cache directory
(``$ENGINE_CACHE_DIR`` or ``~/.cache/schedule-explorer``; the file name carries a hash of
the source, so edits rebuild it) and loaded into the process with
``llvmlite.binding.load_library_permanently``; its symbols (``engine_parallel_launch``,
``engine_runtime_thread_index``, ...) are then visible to every JIT-compiled kernel.

The pool size is ``$ENGINE_NUM_THREADS`` if set, else ``os.cpu_count()``.
:func:`set_num_threads` changes how many threads the next launches use (1..pool size).

If no C compiler is available, a serial fallback (ctypes callbacks) defines the same
symbols: parallel loops then run correctly on one thread (and
:func:`runtime_info` says so).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import threading
import warnings
from pathlib import Path

import llvmlite.binding as llvm

from .native_files import build_once, cache_dir, find_c_compiler

_SRC = Path(__file__).with_name("parallel.c")
_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_fallback_reason: str | None = None


def default_num_threads() -> int:
    env = os.environ.get("ENGINE_NUM_THREADS")
    if env:
        try:
            n = int(env)
            if n >= 1:
                return n
        except ValueError:
            pass
        warnings.warn(f"ENGINE_NUM_THREADS={env!r} is not a positive integer; "
                      "using os.cpu_count()")
    return os.cpu_count() or 1


def _compile() -> Path:
    digest = hashlib.sha256(_SRC.read_bytes()).hexdigest()[:16]

    def build(tmp: str) -> None:
        cc = find_c_compiler()
        if cc is None:
            raise RuntimeError("no C compiler (cc/gcc/clang) found")
        proc = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-pthread", str(_SRC), "-o", tmp],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"compiling the parallel runtime failed:\n{proc.stderr}")

    return build_once(cache_dir() / f"libengine_parallel_{digest}.so", build, suffix=".so")


_TASK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
_INDEX = ctypes.CFUNCTYPE(ctypes.c_int)


def _serial_launch(fn: int, env: int, _hint: int) -> int:
    return _TASK(fn)(0, 1, env)


_fallback_callbacks = (_LAUNCH(_serial_launch), _INDEX(lambda: 0))

#: the runtime's functions that JIT-compiled kernels call
SYMBOLS = ("engine_parallel_launch", "engine_runtime_thread_index")


def _publish(functions) -> None:
    """Make :data:`SYMBOLS` (in order) resolve to ``functions`` (ctypes function pointers)
    for JIT-compiled kernels."""
    for name, fn in zip(SYMBOLS, functions):
        llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)


def _serial_fallback() -> None:
    """Define the runtime's symbols as serial ctypes callbacks when cc is unavailable."""
    _publish(_fallback_callbacks)


def load() -> ctypes.CDLL | None:
    """Build (once) and load the native runtime; returns the ctypes handle (None if serial)."""
    global _lib, _fallback_reason
    if _lib is not None or _fallback_reason is not None:
        return _lib
    with _lock:
        if _lib is not None or _fallback_reason is not None:
            return _lib
        from engine.codegen.target import init_llvm
        init_llvm()
        try:
            path = _compile()
            llvm.load_library_permanently(str(path))
            lib = ctypes.CDLL(str(path))
            lib.engine_parallel_init.argtypes = [ctypes.c_int]
            lib.engine_parallel_set_num_threads.argtypes = [ctypes.c_int]
            lib.engine_parallel_stats.argtypes = [ctypes.POINTER(ctypes.c_long), ctypes.c_int]
            lib.engine_parallel_bench_empty.argtypes = [ctypes.c_int]
            lib.engine_parallel_init(default_num_threads())
            _publish([getattr(lib, name) for name in SYMBOLS])
            _lib = lib
        except Exception as exc:  # noqa: BLE001 - degrade to a correct serial runtime
            _fallback_reason = str(exc)
            warnings.warn(f"parallel runtime unavailable ({exc}); parallel loops run serially")
            _serial_fallback()
    return _lib


def set_num_threads(n: int) -> int:
    """Use ``n`` threads for the next parallel launches (clamped to the pool); returns it."""
    lib = load()
    if lib is None:
        return 1
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"number of threads must be a positive integer, got {n!r}")
    return lib.engine_parallel_set_num_threads(n)


def num_threads() -> int:
    lib = load()
    return 1 if lib is None else lib.engine_parallel_num_threads()


def runtime_info() -> dict:
    """Pool size, threads in use, launch counters, and tasks run per thread."""
    lib = load()
    if lib is None:
        return {"native": False, "reason": _fallback_reason, "pool_size": 1, "threads": 1}
    n = 2 + 256
    buf = (ctypes.c_long * n)()
    pool = lib.engine_parallel_stats(buf, n)
    return {"native": True, "pool_size": pool, "threads": lib.engine_parallel_num_threads(),
            "launches": buf[0], "serial_launches": buf[1],
            "tasks_per_thread": [buf[2 + t] for t in range(pool)]}


def bench_empty_launches(count: int) -> None:
    """Run ``count`` empty parallel launches back to back (for launch-overhead figures)."""
    lib = load()
    if lib is None:
        return
    lib.engine_parallel_bench_empty(count)

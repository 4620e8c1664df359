"""engine.runtime — JIT modules callable on numpy arrays, parallel runtime, timing, checks.

Public API::

    rt = engine.build(mod, target="llvm", fast_math=False, opt_level=3)   # -> Module
    rt["mm_relu"](a, b, c)                              # numpy arrays, checked, zero-copy
    rt.time_evaluator("mm_relu", number=10, repeat=3, min_repeat_ms=0)(a, b, c)
    rt.get_source("ll" | "ll-opt" | "asm"); rt.compile_stats
    engine.runtime.check_correctness(mod, "mm_relu", reference_fn=None, args=None)

Hooks for instrumentation passes (the cache simulator): ``engine.lower.lower(func)`` gives
the lowered PrimFunc; rewrite it (e.g. insert ``Call("int32", "call_extern",
(StringImm("record"), Call("int64", "address_of", (load,))))``) and compile it with
``engine.build(func, lowered=True, extra_modules=[llvmlite_ir_module])``; see
:mod:`engine.codegen.llvm` for the exact semantics of ``address_of`` and ``call_extern``.

Parallel loops run on the native thread pool of :mod:`.native` (``ENGINE_NUM_THREADS``
threads, default ``os.cpu_count()``; :func:`set_num_threads` to change at run time).
Compiled modules are cached (:func:`cache_info`, :func:`clear_cache`).
Functions registered by name (``register_func``, :mod:`.packed`) are what Relax's
``R.call_tir("env.linear", ...)`` calls.
"""
from engine.lower.errors import BuildError

from .build import build, cache_info, clear_cache
from .correctness import CorrectnessReport, check_correctness
from .module import (ArgumentError, Function, Module, TimingResult, aligned_empty, as_aligned,
                     random_arrays, random_args)
from .native import num_threads, runtime_info, set_num_threads
from .packed import (UnregisteredFunctionError, get_global_func, list_global_func_names,
                     register_func, remove_global_func)

__all__ = ["build", "Module", "Function", "ArgumentError", "BuildError", "TimingResult",
           "check_correctness", "CorrectnessReport", "cache_info", "clear_cache",
           "set_num_threads", "num_threads", "runtime_info", "random_arrays", "random_args", "aligned_empty",
           "as_aligned", "register_func", "get_global_func", "list_global_func_names",
           "remove_global_func", "UnregisteredFunctionError"]


def load_module(path):
    """Load a library written by ``export_library`` back into the engine (TVM's
    ``tvm.runtime.load_module``): ``mod["main"](...)`` as the build it came from. The work
    is :func:`engine.deploy.load_module`'s, registered from above
    (:mod:`engine.ir.deployment`)."""
    from engine.ir import deployment
    return deployment.call("load", path)


__all__.append("load_module")

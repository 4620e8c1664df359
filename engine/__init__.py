"""Schedule Explorer's engine: a small TensorIR with an llvmlite backend.

Public API (mirrors TVM's names)::

    import engine
    mod = engine.workloads.get("mm_relu", n=128)
    print(mod.script())
    sch = engine.Schedule(mod)
    rt = engine.build(sch.mod, target="llvm")

Sub-packages are imported lazily so that ``import engine`` stays cheap.
"""
from __future__ import annotations

import importlib
from typing import Any

from . import nd as _nd
from .ir import IRModule, PrimFunc, display, parsers, structural_equal, structural_hash

__all__ = [
    "IRModule", "PrimFunc", "structural_equal", "structural_hash", "parse", "interpret",
    "build", "Schedule", "TensorIntrin", "ScheduleError", "Trace", "TraceError", "BuildError", "ArgumentError", "ScriptError", "workloads", "te", "script",
    "cache", "presets", "arith", "lower", "codegen", "runtime", "schedule", "ir",
    "relax", "nd", "register_func", "get_global_func", "cpu", "cuda", "tune",
]

_SUBMODULES = {"relax", "nd", "workloads", "te", "script", "cache", "presets", "arith", "lower", "codegen",
               "runtime", "schedule", "ir", "interpreter", "lessons", "challenges",
               "notebook", "roofline", "topi", "models", "tune"}

_LAZY = {
    "parse": ("engine.relax", "parse"),
    "register_func": ("engine.runtime", "register_func"),
    "get_global_func": ("engine.runtime", "get_global_func"),
    "cpu": ("engine.nd", "cpu"),
    "cuda": ("engine.nd", "cuda"),
    "ScriptError": ("engine.script", "ScriptError"),
    "interpret": ("engine.interpreter", "interpret"),
    "Schedule": ("engine.schedule", "Schedule"),
    "TensorIntrin": ("engine.schedule.tensor_intrin", "TensorIntrin"),
    "ScheduleError": ("engine.schedule", "ScheduleError"),
    "Trace": ("engine.schedule", "Trace"),
    "TraceError": ("engine.schedule", "TraceError"),
    "BuildError": ("engine.runtime", "BuildError"),
    "ArgumentError": ("engine.runtime", "ArgumentError"),
}


def build(mod: Any, target: Any = "llvm", **options: Any) -> Any:
    """Compile ``mod`` (IRModule or PrimFunc): for the host CPU (``target="llvm"``, the
    default; :func:`engine.runtime.build` and its options), or for a CUDA GPU
    (``target="cuda"``, ``"cuda -arch=sm_80"``, ``"nvidia/nvidia-a100"``, an
    ``engine.gpu.Target``: :func:`engine.gpu.build.build_gpu` — run on the GPU when there is
    one, else in the emulator). Called from Python, this is the user's own code: the CPU
    build links extern functions (``link_extern``: the program's ``pragma_import_llvm``
    LLVM IR), which the explorer's workers never do."""
    from .gpu.build import build_gpu, is_gpu_target
    if is_gpu_target(target):
        if options:
            from .lower.errors import BuildError
            raise BuildError(f"the GPU build takes no options (got {sorted(options)})")
        return build_gpu(mod, target)
    from .runtime import build as build_cpu
    if not isinstance(target, str) and getattr(getattr(target, "kind", None), "name",
                                                None) == "llvm":
        target = str(target)
    options.setdefault("link_extern", True)   # the user's own Python: extern code links
    return build_cpu(mod, target=target, **options)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"engine.{name}")
    if name in _LAZY:
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")


# How IR objects and schedules show themselves (``mod.script()``, ``repr(node)``, Jupyter's
# ``_repr_html_``): the IR sits below the printer and the notebook views, so they are
# registered here, from the top, and imported on first use (``import engine`` stays cheap).
def _script(obj: Any, dialect: str = "course-2022") -> str:
    from .ir.function import PrimFunc
    if not isinstance(obj, (IRModule, PrimFunc)) or (isinstance(obj, IRModule) and any(
            not isinstance(f, PrimFunc) for _, f in obj.functions)):
        from .relax.printer import script as relax_script
        return relax_script(obj)
    from .script.printer import script
    return script(obj, dialect=dialect)


def _repr(node: Any) -> str:
    if type(node).__module__.startswith("engine.relax") or (isinstance(node, IRModule) and any(
            not isinstance(f, PrimFunc) for _, f in node.functions)):
        from .relax.printer import repr_relax
        return repr_relax(node)
    from .script.printer import repr_node
    return repr_node(node)


def _html(obj: Any) -> str:
    from .notebook import repr_html
    return repr_html(obj)


display.register("script", _script)
display.register("repr", _repr)
display.register("html", _html)


# ``engine.cuda(0)`` and ``engine.nd.array(x, engine.cuda(0))``: ``engine.nd`` is at the
# bottom of the engine, so the GPU side (engine.gpu.device, over the CUDA driver) is
# registered here, from the top, and imported on first use.
def _cuda_backend() -> Any:
    from .gpu import device
    return device


_nd.register_cuda_backend(_cuda_backend)


# ``@I.ir_module`` classes with ``@R.function`` methods (Python code, not a text): the
# script layer reads the class, the Relax parser (``engine.relax``, above it) reads the
# Relax functions; registered here, from the top, and imported on first use.
def _relax_parser(ctx: Any, relax_fns: list, prims: dict, class_name: Any) -> dict:
    from .relax.parser import RelaxParser
    return RelaxParser(ctx, relax_fns, prims, class_name, None).run()


parsers.register("relax", _relax_parser)


# ``rt.export_library(path)``, ``ex.export_library(path)`` and ``engine.runtime.load_module``
# belong to packages below ``engine.deploy``, which does the work: registered here, from the
# top, and imported on first use.
def _export_library(built: Any, path: Any, **options: Any) -> Any:
    from .deploy import export_library
    return export_library(built, path, **options)


def _load_module(path: Any) -> Any:
    from .deploy import load_module
    return load_module(path)


from .ir import deployment as _deployment  # noqa: E402

_deployment.register("export", _export_library)
_deployment.register("load", _load_module)

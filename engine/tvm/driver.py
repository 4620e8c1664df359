"""``tvm.compile`` (TVM 0.27) and the course's ``tvm.build``: :func:`engine.build` — for
the host CPU, its module wrapped with TVM's call shapes (:class:`.runtime.Executable`); for
a CUDA target, the GPU build itself (``rt["main"](...)``, ``imported_modules[0]
.get_source()``, ``time_evaluator("main", dev)``); for a module with Relax functions, the
virtual machine's executable (``relax.build``: ``relax.VirtualMachine(ex, tvm.cpu())``)."""
from __future__ import annotations

from typing import Any

from engine.runtime import build as _build

from .runtime import Executable

__all__ = ["compile", "build"]


def compile_module(mod: Any, target: Any = "llvm", **options: Any) -> Executable:
    """``tvm.compile(mod, target="llvm")``: ``exe(*arrays)`` or ``exe["name"](*arrays)``.
    ``options`` are :func:`engine.build`'s (``fast_math``, ``opt_level``, ...)."""
    if target is None:   # TVM: the default host target
        target = "llvm"
    from engine.gpu.build import build_gpu, is_gpu_target
    if is_gpu_target(target):
        return build_gpu(mod, target)
    if _has_relax(mod):   # a model: the Relax virtual machine's executable
        from engine.relax.vm import build as relax_build
        return relax_build(mod, target=target if isinstance(target, str) else str(target),
                           **options)
    options.setdefault("link_extern", True)   # Python of the user's own: extern code links
    return Executable(_build(mod, target=target if isinstance(target, str) else str(target),
                             **options))


def _has_relax(mod: Any) -> bool:
    from engine.relax.expr import Function
    if isinstance(mod, Function):
        return True
    return any(isinstance(f, Function) for _, f in getattr(mod, "functions", ()))


def build(mod: Any, target: Any = "llvm", **options: Any) -> Executable:
    """The course's ``tvm.build(mod, target="llvm")``: ``rt["mm_relu"](a, b, c)``."""
    return compile_module(mod, target, **options)


compile = compile_module  # noqa: A001 - TVM's name (a call named compile() reads as Python's)

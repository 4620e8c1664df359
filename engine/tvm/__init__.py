"""``engine.tvm`` — Apache TVM 0.27's module layout over the engine's own objects.

Code written for TVM (or for the 2022 course's ``tvm``) runs on the engine with::

    from engine import tvm          # or: import engine.tvm as tvm
    from engine.tvm.script import tirx as T, ir as I

    sch = tvm.s_tir.Schedule(mod)               # the course's tvm.tir.Schedule works too
    rt = tvm.compile(sch.mod, target="llvm")    # or tvm.build(...)["mm_relu"](...)
    rt(tvm.runtime.tensor(a_np), tvm.nd.array(b_np), c)

This package only re-exports the engine's names under TVM's module names, with thin
adapters where TVM's call shape differs (``Schedule(func, debug_mask="all")``, a PrimFunc
given alone becomes the module's ``main``; ``tvm.compile``'s result callable). Nothing is
re-implemented: where the engine has no counterpart of a TVM name the name is absent, so
using it is an AttributeError (or ImportError) naming it. It is the top layer: it may import
any engine package, and nothing in the engine imports it.

Modules: :mod:`.ir` (``tvm.ir``), :mod:`.script` (``tvm.script``), :mod:`.tirx` (node
classes, ``stmt_functor``, ``TensorIntrin``), :mod:`.tir` (the course's ``tvm.tir``),
:mod:`.s_tir` (``Schedule``, ``ScheduleError``, ``schedule.testing``), :mod:`.runtime`
(``tensor``, ``Executable``), :mod:`.driver` (``compile``, ``build``), :mod:`.target`
(``Target``: ``Target("cuda -arch=sm_80")``, ``Target("llvm")``), :mod:`.meta_schedule`
(``tune_tir`` and ``tir_integration.compile_tir`` over the engine's tuner), :mod:`.testing`
(imported on first use: it needs pytest), :mod:`.contrib` (``utils.tempdir``,
``clang.create_llvm``: C compiled to LLVM IR for ``pragma_import_llvm``; on first use); ``te``, ``topi``, ``nd`` and ``relax`` (``relax.build``,
``relax.VirtualMachine``) are the engine's own, as ``register_func`` (also under TVM's
current name ``register_global_func``)/``get_global_func``.
"""
from __future__ import annotations

import importlib
from typing import Any

from engine import nd, relax, te, topi
from engine.nd import cpu, cuda, device
from engine.runtime import get_global_func, register_func

#: TVM's current name of ``register_func`` (``@tvm.register_global_func("env.linear",
#: override=True)``): the same registry, the same signature
register_global_func = register_func

from . import ir, runtime, s_tir, script, target, tir, tirx, transform
from .driver import build, compile  # noqa: A004 - TVM's name
from .ir import IRModule

__all__ = ["ir", "IRModule", "script", "tirx", "tir", "s_tir", "te", "topi", "nd", "runtime",
           "target", "testing", "meta_schedule", "compile", "build", "cpu", "cuda", "device",
           "relax", "register_func", "register_global_func", "get_global_func", "transform"]


def __getattr__(name: str) -> Any:
    if name == "testing":  # imports pytest: only when asked for (TVM's tvm.testing too)
        return importlib.import_module("engine.tvm.testing")
    if name == "meta_schedule":  # the tuner: imported when asked for
        return importlib.import_module("engine.tvm.meta_schedule")
    if name == "contrib":  # utils.tempdir, clang.create_llvm (runs clang): when asked for
        return importlib.import_module("engine.tvm.contrib")
    raise AttributeError(f"module 'tvm' (engine.tvm) has no attribute {name!r}: the engine "
                         "has no counterpart of it")

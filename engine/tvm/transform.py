"""``tvm.transform`` and ``tvm.ir.transform``: passes over modules — ``module_pass`` (over a
class with ``transform_module(self, mod, ctx)``, or a function ``f(mod, ctx)``),
``Sequential``, ``PassContext`` (``with PassContext(opt_level=3):``), ``Pass``,
``ModulePass``, ``PassInfo``: the engine's (:mod:`engine.relax.transform.base`)."""
from __future__ import annotations

from engine.relax.transform.base import (ModulePass, Pass, PassContext, PassInfo, Sequential,
                                         module_pass)

__all__ = ["module_pass", "Sequential", "PassContext", "Pass", "ModulePass", "PassInfo"]

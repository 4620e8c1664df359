"""Relax passes with TVM's names; each is used as ``Pass()(mod)``:

* :class:`BindParams` — weights -> constants;
* :class:`LegalizeOps` — high-level operators to ``R.call_tir`` of TensorIR functions made
  with :mod:`engine.te` / :mod:`engine.topi`;
* :class:`FuseOps` — element-wise consumers grouped with their producer (op patterns:
  :mod:`.op_pattern`);
* :class:`FuseTIR` — each group one TensorIR function;
* :class:`DeadCodeElimination` — unused bindings and unreachable functions removed;
* :class:`AnnotateTIROpPattern` — each TensorIR function's op pattern as its attribute
  ``op_pattern`` (FuseOps reads it);

:class:`Pass`, :class:`Sequential`, :class:`PassContext` and the decorators
:func:`module_pass` / :func:`function_pass` for writing and chaining passes (:mod:`.base`).
"""
from .base import (ModulePass, Pass, PassContext, PassInfo, Sequential, TransformError,
                   function_pass, module_pass)
from .bind_params import BindParams
from .dead_code import DeadCodeElimination
from .fuse_ops import FuseOps
from .fuse_tir import FuseTIR
from .legalize_ops import LegalizeOps
from .op_pattern import AnnotateTIROpPattern

__all__ = ["Pass", "ModulePass", "Sequential", "PassContext", "PassInfo", "TransformError",
           "module_pass", "function_pass", "BindParams", "LegalizeOps", "FuseOps", "FuseTIR",
           "DeadCodeElimination", "AnnotateTIROpPattern"]

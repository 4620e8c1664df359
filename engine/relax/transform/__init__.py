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
* the course's graph-optimisation chapter's rewrites, written with ``PyExprMutator`` as the
  chapter writes them: :class:`FuseDenseAddPass` (``R.matmul`` then ``R.add`` -> a
  ``Primitive`` function ``fused_matmul_add0``), :class:`EwiseFMA` (``add(multiply(a, b),
  c)`` -> ``R.ewise_fma``), :class:`LowerToTensorIRPass` (operators -> ``call_te`` of topi);

:class:`Pass`, :class:`Sequential`, :class:`PassContext` and the decorators
:func:`module_pass` / :func:`function_pass` for writing and chaining passes (:mod:`.base`).
"""
from .base import (ModulePass, Pass, PassContext, PassInfo, Sequential, TransformError,
                   function_pass, module_pass)
from .bind_params import BindParams
from .dead_code import DeadCodeElimination
from .ewise_fma import EwiseFMA, EwiseFMARewriter
from .fuse_dense_add import FuseDenseAddPass, MatmulAddFusor
from .fuse_ops import FuseOps
from .fuse_tir import FuseTIR
from .legalize_ops import LegalizeOps
from .lower_to_tensor_ir import LowerToTensorIR, LowerToTensorIRPass
from .op_pattern import AnnotateTIROpPattern

__all__ = ["Pass", "ModulePass", "Sequential", "PassContext", "PassInfo", "TransformError",
           "module_pass", "function_pass", "BindParams", "LegalizeOps", "FuseOps", "FuseTIR",
           "DeadCodeElimination", "AnnotateTIROpPattern", "FuseDenseAddPass", "MatmulAddFusor",
           "EwiseFMA", "EwiseFMARewriter", "LowerToTensorIR", "LowerToTensorIRPass"]

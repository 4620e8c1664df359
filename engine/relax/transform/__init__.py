"""Relax passes with TVM's names; each is used as ``Pass()(mod)``:

* :class:`BindParams` — weights -> constants;
* :class:`LegalizeOps` — high-level operators to ``R.call_tir`` of TensorIR functions made
  with :mod:`engine.te` / :mod:`engine.topi`;
* :class:`FuseOps` — element-wise consumers grouped with their producer (op patterns:
  :mod:`.op_pattern`);
* :class:`FuseTIR` — each group one TensorIR function;
* :class:`DeadCodeElimination` — unused bindings and unreachable functions removed;

:class:`Pass` and :class:`Sequential` for writing and chaining passes.
"""
from .base import Pass, Sequential, TransformError
from .bind_params import BindParams
from .dead_code import DeadCodeElimination
from .fuse_ops import FuseOps
from .fuse_tir import FuseTIR
from .legalize_ops import LegalizeOps

__all__ = ["Pass", "Sequential", "TransformError", "BindParams", "LegalizeOps", "FuseOps",
           "FuseTIR", "DeadCodeElimination"]

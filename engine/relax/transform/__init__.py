"""Passes over a Relax IRModule, with TVM's names; each is used as ``Pass()(mod)``.

* :class:`LegalizeOps` — high-level operators to ``R.call_tir`` of TensorIR functions made
  with :mod:`engine.te` / :mod:`engine.topi`;
* :class:`FuseOps` — element-wise consumers grouped with their producer (op patterns:
  :mod:`.op_pattern`);
* :class:`FuseTIR` — each group one TensorIR function;
* :class:`DeadCodeElimination` — unused bindings and unreachable functions removed.
"""
from __future__ import annotations

from .dead_code import DeadCodeElimination
from .fuse_ops import FuseOps
from .fuse_tir import FuseTIR
from .legalize_ops import LegalizeOps
from .rewrite import ModulePass

__all__ = ["LegalizeOps", "FuseOps", "FuseTIR", "DeadCodeElimination", "ModulePass"]

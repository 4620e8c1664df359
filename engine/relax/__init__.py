"""engine.relax — the graph level of the course's third chapter: Relax functions that call
TensorIR functions (``R.call_tir``) and registered library functions, built for a virtual
machine.

::

    mod = engine.parse(text)                        # @T.prim_func + @R.function
    print(mod.script())
    ex = engine.relax.build(mod, target="llvm")     # also engine.relax.vm.build
    vm = engine.relax.VirtualMachine(ex, engine.cpu())
    out = vm["main"](x, w0, b0, w1, b1)             # numpy arrays in, an array out
    mod2 = engine.relax.transform.BindParams("main", {"w0": w0, ...})(mod)

Parts: :mod:`.struct_info` and :mod:`.expr` (the IR), :mod:`.op` (the operators, and
``relax.op.add(a, b)``, ``relax.op.nn.relu(x)``, ... building calls of them),
:mod:`.block_builder` (``relax.BlockBuilder``: a module built from Python),
:mod:`.parser` and :mod:`.printer` (TVMScript), :mod:`.vm` (build, memory planning, the
virtual machine), :mod:`.transform` (passes), :mod:`.expr_functor` (``PyExprVisitor``,
``PyExprMutator``: rewriting in Python), :mod:`.analysis` (``remove_all_unused``).
"""
from __future__ import annotations

import importlib
from typing import Any

from .block_builder import BlockBuilder
from .expr import (BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, ExternFunc,
                   Function, GlobalVar, Op, SeqExpr, ShapeExpr, Tuple, TupleGetItem, Var,
                   VarBinding, call_dps_packed, call_tir, const)
from .parser import parse
from .printer import constants_of, script
from .struct_info import (ObjectStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
                          TupleStructInfo)

__all__ = ["BlockBuilder", "parse", "script", "constants_of", "build", "VirtualMachine", "Executable", "vm",
           "from_onnx", "frontend",
           "transform", "Function", "Var", "DataflowVar", "GlobalVar", "ExternFunc", "Op",
           "Call", "Constant", "Tuple", "TupleGetItem", "ShapeExpr", "SeqExpr", "VarBinding",
           "BindingBlock", "DataflowBlock", "Expr", "call_tir", "call_dps_packed", "const",
           "StructInfo", "TensorStructInfo", "TupleStructInfo", "ShapeStructInfo",
           "ObjectStructInfo", "PyExprVisitor", "PyExprMutator", "expr_functor", "analysis"]

_LAZY = {"build": ("engine.relax.vm", "build"),
         "PyExprVisitor": ("engine.relax.expr_functor", "PyExprVisitor"),
         "PyExprMutator": ("engine.relax.expr_functor", "PyExprMutator"),
         "from_onnx": ("engine.relax.frontend", "from_onnx"),
         "VirtualMachine": ("engine.relax.vm", "VirtualMachine"),
         "Executable": ("engine.relax.vm", "Executable")}
_SUBMODULES = {"vm", "transform", "op", "frontend", "expr_functor", "analysis"}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"engine.relax.{name}")
    if name in _LAZY:
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'engine.relax' has no attribute {name!r}")

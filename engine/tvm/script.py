"""``tvm.script``: the ``T``, ``I`` and ``R`` namespaces (the engine's own modules, so
``@T.prim_func`` works on the decorated function's source exactly as ``engine.script.tir``),
under TVM 0.27's name ``tirx`` and the older ``tir``; ``relax`` (``@R.function`` methods of an
``@ir_module`` class, read from the class's source); ``ir_module``; ``from_source`` (text ->
the one PrimFunc of a text defining a function, else the IRModule, as TVM)."""
from __future__ import annotations

import ast
from typing import Any

from engine.script import ScriptError, ir, ir_module, parse, relax, tir
from engine.script.pyast import parse_python

tirx = tir

__all__ = ["tir", "tirx", "ir", "relax", "ir_module", "from_source", "parse", "ScriptError"]


def from_source(input_func: Any, extra_vars: Any = None) -> Any:
    """TVMScript text -> PrimFunc (a text of one top-level function) or IRModule.
    ``extra_vars`` is accepted and ignored: the engine's parser knows ``T`` and ``I``."""
    del extra_vars
    if not isinstance(input_func, str):
        raise TypeError("from_source: this engine parses TVMScript text only, got "
                        f"{type(input_func).__name__} (decorate functions with T.prim_func)")
    mod = parse(input_func)
    try:
        top = [type(s) for s in parse_python(input_func).body
               if not isinstance(s, (ast.Import, ast.ImportFrom))]
    except SyntaxError:  # parse() read it, so this does not happen
        return mod
    if top == [ast.FunctionDef] and len(mod) == 1:
        return mod[mod.names()[0]]
    return mod

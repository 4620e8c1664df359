"""engine.script — TVMScript printer and parser, and the ``T`` / ``I`` decorator namespaces.

* :func:`script` / :func:`script_with_spans` — IR -> course-2022-style TVMScript text
  (with the line span of every loop, block and statement).
* :func:`parse` — TVMScript text -> IRModule, via Python's ``ast`` (never eval/exec);
  bad text raises :class:`ScriptError` with line and column.
* ``from engine.script import tir as T`` / ``from engine.script import ir as I`` /
  ``from engine.script import relax as R`` — ``@T.prim_func``, ``@I.ir_module`` and
  ``@R.function`` decorators for Python code written like the course.
"""
from .errors import ScriptError
from .printer import Span, repr_node, script, script_with_spans
from .parser import parse
from . import ir, relax, tir
from .ir import ir_module

__all__ = ["ScriptError", "Span", "parse", "script", "script_with_spans", "repr_node",
           "tir", "ir", "relax", "ir_module"]

"""TVMScript parser: text -> IRModule, with Python's ``ast`` only (user text is never
compiled to code objects, evaluated or executed).

Accepted input (what the course notebooks, TVM's printers and our printer produce):

* a class decorated ``@tvm.script.ir_module`` / ``@I.ir_module`` / ``@ir_module`` holding
  ``@T.prim_func`` functions, or one or more bare ``@T.prim_func`` functions;
* leading ``import``/``from ... import`` lines (ignored; ``from tvm.script import tir as X``
  makes ``X`` a name of the tir namespace, besides the default ``T`` and ``tir``);
* parameters ``A: T.Buffer((128, 128), "float32")``, ``T.Buffer[(128, 128), "float32"]``,
  ``T.Buffer([128, 128], dtype="float32")``, or ``a: T.handle`` with
  ``A = T.match_buffer(a, (128, 128), "float32")``;
* ``T.block``/``T.sblock``, ``T.alloc_buffer``/``T.sblock_alloc_buffer``, ``T.axis.*``,
  ``T.init``, ``T.reads``/``T.writes`` (inferred when missing), ``T.where``, ``T.block_attr``,
  ``T.func_attr``, loops over ``T.grid``/``range``/``T.serial``/``T.parallel``/
  ``T.vectorized``/``T.unroll``, ``if``/``else``, ``T.evaluate``, let bindings
  (``x: T.int32 = v``, ``with T.LetStmt(v) as x:``), ``with T.allocate(...) as X:``.

Every problem raises :class:`ScriptError` with the line and column.

The parser is one class, :class:`.module.Parser`, assembled from one part per concern:
:mod:`.context` (source, errors, scopes, names, arguments), :mod:`.exprs` and
:mod:`.intrinsics` (expressions), :mod:`.buffers` (buffers and regions), :mod:`.stmts` and
:mod:`.blocks` (statements, loops, blocks) and :mod:`.module` (decorators, functions, the
entry points); :mod:`.dialect` holds the tables of the ``T.*`` names it knows.
"""
from ..errors import ScriptError
from .module import parse, parse_class_source, parse_function_source

__all__ = ["parse", "parse_class_source", "parse_function_source", "ScriptError"]

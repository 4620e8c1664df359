"""TVMScript printer: IR -> course-2022-style TVMScript text (plus a span map).

``script(mod_or_func)`` returns the text; ``script_with_spans`` also returns, for every
loop, block and statement, the 1-based inclusive line range it occupies (the web app makes
loops/blocks clickable with it).  The printed text parses back with
:func:`engine.script.parse` to a structurally equal program, and printing that again gives
the same text.

``dialect="tvm-0.27"`` prints Apache TVM 0.27's spellings instead (``T.sblock``,
``T.sblock_alloc_buffer``, ``@I.ir_module``, ... : :data:`.module.DIALECTS`).

Printing rules (as TVM's printer, with the course's 2022 spellings):

* A module prints as ``@tvm.script.ir_module`` ``class Module:`` with one ``@T.prim_func``
  per function; a PrimFunc alone prints from ``@T.prim_func`` at column 0.
* A trivial ``root`` block is elided: ``# with T.block("root"):`` is printed as a comment and
  its ``alloc_buffers`` appear at function level.
* Perfectly nested serial loops starting at 0 without annotations print as one
  ``for i, j in T.grid(m, n):`` line; a lone one as ``T.serial(n)``; other kinds as
  ``T.parallel/T.vectorized/T.unroll``; a non-zero start as ``T.serial(start, stop)``;
  annotations as ``T.serial(n, annotations={...})``.
* Block axes print as one ``T.axis.remap("SSR", [i, j, k])`` line when every axis is bound
  to a distinct enclosing loop variable with the same extent, else one
  ``vj = T.axis.spatial(128, j_0 * 4 + j_1)`` line per axis.
* Expressions use the fewest parentheses Python's precedence allows; int32 constants print
  as plain ints, other constants with their dtype (``T.float32(0)``, ``T.int64(5)``).
* Variables or buffers sharing a name print distinctly (``i``, ``i_1``, ...); names are
  scoped, so sibling loops may both be called ``i``.

The printer is one class, :class:`.module.Printer`, assembled from one part per concern:
:mod:`.names` (identifiers and the scoped name table), :mod:`.exprs` (expressions, literals,
buffers, regions), :mod:`.stmts` (statements, loops, blocks, line spans) and :mod:`.module`
(modules, function headers and the entry points).
"""
from .exprs import call_result_dtype
from .module import (DIALECTS, ScriptTooLarge, Span, dialect_spelling, prim_func_lines,
                     repr_node, script, script_with_spans)

__all__ = ["Span", "script", "script_with_spans", "repr_node", "call_result_dtype",
           "prim_func_lines", "DIALECTS", "dialect_spelling", "ScriptTooLarge"]

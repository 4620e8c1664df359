"""Python's own parser (``ast.parse``), safe to call from several threads of one process.

Some CPython releases (3.11 here; CPython issue gh-106905) keep the depth counter of the
syntax-tree conversion in state shared by the whole interpreter: two threads converting at
once — a thread switch inside the conversion, e.g. a finalizer run by the garbage collector —
make a correct program fail with ``SystemError: AST constructor recursion depth mismatch``.
The web server parses pasted programs, traces and index maps on several threads, so every
parse the engine makes goes through :func:`parse_python`: one lock for the engine's parses,
and a conversion upset by a parse elsewhere in the process at the same moment retried.
"""
from __future__ import annotations

import ast
import threading

__all__ = ["parse_python"]

_LOCK = threading.RLock()  # (a finalizer run inside a conversion may parse too)
_RETRIES = 5
_parse = ast.parse          # (the tests put a slow or upset parse in its place)


def parse_python(text: str, mode: str = "exec", filename: str = "<unknown>") -> ast.AST:
    """``ast.parse(text, filename, mode)`` under the engine's parse lock (see the module
    docstring); a ``SyntaxError``, ``RecursionError`` or ``MemoryError`` is the text's own and
    goes to the caller unchanged."""
    for attempt in range(_RETRIES):
        with _LOCK:
            try:
                return _parse(text, filename=filename, mode=mode)
            except SystemError as e:
                if "recursion depth mismatch" not in str(e) or attempt == _RETRIES - 1:
                    raise
    raise AssertionError("unreachable")  # pragma: no cover

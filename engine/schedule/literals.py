"""The one writer of values into exported Python.

Every value an export writes (a handle name, a number, a string, a list of them) goes
through these functions, which write it only from a value of the expected Python type and
refuse anything else with a :class:`TraceError`: a trace read from a link is hostile input,
and the exported script must hold nothing but the schedule calls it describes.

* :func:`py_literal` — ``None``, ``True``/``False``, an ``int``, a finite ``float``, a
  ``str`` (quoted, escaped) or a list/tuple/dict of them;
* :func:`py_name` — a handle name: an ASCII identifier that is no keyword and none of the
  names the exported script itself uses (``sch``, ``engine``, ...);
* :func:`fmt` — a trace *input*: a handle name, a number, ``None`` or a string literal
  written in the trace with its quotes (TVM's convention), re-quoted from its value;
* :func:`py_int`, :func:`py_bool`, :func:`py_str` — an attribute of a known type, named in
  the refusal.
"""
from __future__ import annotations

import json
import keyword
import math
import re
from typing import Any

from .error import TraceError

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Names the exported scripts define or call themselves: a handle may not shadow them.
SCRIPT_NAMES = frozenset({"sch", "engine", "mod", "print", "tvm", "tir", "s_tir",
                          "apply_trace"})


def short(v: Any, limit: int = 40) -> str:
    """``repr(v)`` cut to ``limit`` characters (refusals quote the link's value, briefly)."""
    text = repr(v)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def is_handle_name(name: Any) -> bool:
    """Whether ``name`` can name a handle in exported Python (see :func:`py_name`)."""
    return isinstance(name, str) and _IDENT.fullmatch(name) is not None and \
        not keyword.iskeyword(name) and name not in SCRIPT_NAMES and \
        not name.startswith("__")


def is_param_name(name: Any) -> bool:
    """Whether ``name`` can be a keyword argument in exported Python (a workload parameter)."""
    return isinstance(name, str) and _IDENT.fullmatch(name) is not None and \
        not keyword.iskeyword(name) and not name.startswith("__")


def py_name(name: Any) -> str:
    """A handle name, written bare."""
    if not is_handle_name(name):
        raise TraceError(f"{short(name)} cannot name a handle: handle names are identifiers "
                         "(letters, digits, '_'), not Python keywords nor "
                         f"{', '.join(sorted(SCRIPT_NAMES))}")
    return name


def py_str(s: Any, what: str = "a string", quote: str = '"') -> str:
    """A string literal of ``s``. With ``quote='"'`` the text is ASCII and escaped as JSON
    does (``\\"`` ``\\\\`` ``\\n`` ``\\uXXXX``: the same meaning in Python), characters
    beyond U+FFFF as ``\\UXXXXXXXX``; with ``quote="'"`` it is Python's ``repr``."""
    if not isinstance(s, str):
        raise TraceError(f"{what} must be a string, got {short(s)}")
    if quote == "'":
        return str.__repr__(s)
    return '"' + "".join(json.dumps(c)[1:-1] if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"
                         for c in s) + '"'


def py_int(v: Any, what: str = "a value") -> str:
    """An integer (not a bool)."""
    if not isinstance(v, int) or isinstance(v, bool):
        raise TraceError(f"{what} must be an integer, got {short(v)}")
    try:
        return int.__repr__(v)
    except ValueError:  # more digits than Python writes
        raise TraceError(f"{what} is too large an integer") from None


def py_bool(v: Any, what: str = "a flag") -> str:
    """``True`` or ``False`` (TVM writes flags as 1 and 0, accepted too)."""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int) and v in (0, 1):
        return "True" if v else "False"
    raise TraceError(f"{what} must be True or False, got {short(v)}")


def py_literal(v: Any, what: str = "a value", quote: str = '"') -> str:
    """A plain value: None, bool, int, finite float, str, or a list/tuple/dict of them."""
    if v is None:
        return "None"
    if isinstance(v, bool):
        return py_bool(v, what)
    if isinstance(v, int):
        return py_int(v, what)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise TraceError(f"{what} must be a finite number, got {short(v)}")
        return float.__repr__(v)
    if isinstance(v, str):
        return py_str(v, what, quote)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(py_literal(x, what, quote) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{py_literal(k, what, quote)}: {py_literal(x, what, quote)}"
                               for k, x in v.items()) + "}"
    raise TraceError(f"{what} cannot be written as Python: {short(v)}")


def py_number_or_none(v: Any, what: str) -> str:
    """``None``, an integer or a finite float."""
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
        raise TraceError(f"{what} must be a number or None, got {short(v)}")
    return py_literal(v, what)


def py_int_list(v: Any, what: str) -> str:
    """A list of integers (``[1, 2, 4]``)."""
    if not isinstance(v, (list, tuple)):
        raise TraceError(f"{what} must be a list of integers, got {short(v)}")
    return "[" + ", ".join(py_int(x, what) for x in v) + "]"


def py_number_list(v: Any, what: str) -> str:
    """A list of finite numbers (``[0.5, 0.25, 0.25]``)."""
    if not isinstance(v, (list, tuple)):
        raise TraceError(f"{what} must be a list of numbers, got {short(v)}")
    out = []
    for x in v:
        if x is None:
            raise TraceError(f"{what} must be a list of numbers, got {short(v)}")
        out.append(py_number_or_none(x, what))
    return "[" + ", ".join(out) + "]"


def fmt_literal(v: Any, what: str = "an annotation value") -> str:
    """Python source for a trace input that holds a plain value (an annotation's value): a
    string literal written with its quotes, a number, a bool, None, a list of those, or a
    dict (string keys) whose values are plain, written as they are (TVM keeps a dict input
    as it is: its strings have no quotes) — or a handle's name (a sampled value)."""
    if isinstance(v, str):
        return fmt(v)    # a string literal, or a handle (a sampled value)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(fmt_literal(x, what) for x in v) + "]"
    if hasattr(v, "items") and not isinstance(v, (str, bytes)):
        return _plain_dict(v, what)
    return py_literal(v, what)


def _plain_dict(v: Any, what: str) -> str:
    parts = []
    for k, x in v.items():
        if not isinstance(k, str):
            raise TraceError(f"{what}: dict keys must be strings, got {short(k)}")
        if hasattr(x, "items") and not isinstance(x, (str, bytes)):
            text = _plain_dict(x, what)
        elif isinstance(x, (list, tuple)):
            text = "[" + ", ".join(_plain_dict(y, what) if hasattr(y, "items")
                                   else py_literal(_listed(y), what) for y in x) + "]"
        else:
            text = py_literal(x, what)
        parts.append(f"{py_str(k)}: {text}")
    return "{" + ", ".join(parts) + "}"


def _listed(v: Any) -> Any:
    return [_listed(x) for x in v] if isinstance(v, (list, tuple)) else v


def fmt(v: Any) -> str:
    """Python source for a trace input value: handle names bare, string literals (written
    in the trace with their quotes) re-quoted from their value, numbers, None, lists."""
    if isinstance(v, str):
        if not v.startswith('"'):
            return py_name(v)
        try:
            text = json.loads(v)
        except ValueError:
            text = None
        if not isinstance(text, str):
            raise TraceError(f"bad string literal {short(v)}")
        return py_str(text)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    if isinstance(v, dict):
        raise TraceError(f"an input cannot be a mapping: {short(v)}")
    return py_literal(v, "an input")

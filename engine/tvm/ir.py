"""``tvm.ir``: ``IRModule``, ``Op`` (``Op.get("relax.add")``, a Relax operator, equal to
every operator of its name), ``transform`` (``module_pass``, ``Sequential``, ``PassContext``),
``module`` (``from tvm.ir.module import IRModule``), structural equality and hashing (the engine's), and
``assert_structural_equal``, which raises ``ValueError`` with the first differing lines of
the two programs as the engine prints them (TVM's raises ValueError too)."""
from __future__ import annotations

import difflib
import re
import sys
from typing import Any

from engine.ir import IRModule, PrimExpr, PrimFunc, Range, structural_equal, structural_hash
from engine.ir.function import GlobalVar
from engine.relax.expr import Op

from . import ir_module as module
from . import transform

# ``from tvm.ir.module import IRModule``: tvm.ir is a module here, so its "submodule" is
# registered by name (the import system finds it in sys.modules)
sys.modules.setdefault(__name__ + ".module", module)
sys.modules.setdefault(__name__ + ".transform", transform)

__all__ = ["IRModule", "GlobalVar", "Op", "module", "transform", "PrimExpr", "Range", "structural_equal", "structural_hash",
           "assert_structural_equal"]

#: lines of unified diff shown at most in the error message
DIFF_LINES = 60


def _text(obj: Any) -> str:
    if isinstance(obj, (IRModule, PrimFunc)):
        return obj.script(dialect="tvm-0.27")
    return repr(obj)


def _plain_symbol(obj: Any) -> Any:
    """``obj`` without ``global_symbol`` attributes that only repeat their function's name.

    The engine's PrimFunc *name* is TVM's ``global_symbol``: TVM gives every ``@T.prim_func``
    the attribute, the engine's parser none, and ``with_attr("global_symbol", n)`` renames
    the function and records the attribute as well; so an attribute equal to the name says
    nothing the name does not. A function whose attribute differs from its def's name (a
    parsed ``def before`` with ``T.func_attr({"global_symbol": "main"})``) is TVM's
    function ``main``: compared under that name."""
    if isinstance(obj, PrimFunc):
        # TVM's function is named by its global_symbol, whatever its def's name: the
        # attribute is the engine's name (the def's name only when there is none)
        symbol = dict(obj.attrs).get("global_symbol")
        if isinstance(symbol, str) and symbol != obj.name:
            obj = obj.replace(name=symbol)
        attrs = tuple((k, v) for k, v in obj.attrs if not (k == "global_symbol"
                                                            and v == obj.name))
        return obj if attrs == obj.attrs else obj.replace(attrs=attrs)
    if isinstance(obj, IRModule):
        funcs = tuple((n, _plain_symbol(f)) for n, f in obj.functions)
        if all(a is b for (_, a), (_, b) in zip(funcs, obj.functions)):
            return obj
        return IRModule(funcs)
    return obj


def assert_structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> None:
    """Raise ``ValueError`` unless ``lhs`` and ``rhs`` are structurally equal
    (:func:`engine.ir.structural_equal`, after :func:`_plain_symbol`); the message says what
    kind of line differs first, then shows the unified diff of their TVM 0.27 texts."""
    kwargs = {"map_free_vars": True} if map_free_vars else {}
    lhs, rhs = _plain_symbol(lhs), _plain_symbol(rhs)
    if structural_equal(lhs, rhs, **kwargs):
        return
    a, b = _text(lhs), _text(rhs)
    if a == b:
        detail = ("the printed texts are the same: the difference is in how variables or "
                  "buffers are bound (one object used where the other uses two, or a free "
                  "variable), or in something the printer does not show")
        raise ValueError(f"StructuralEqual check failed: {detail}\n{a}")
    diff = list(difflib.unified_diff(a.splitlines(), b.splitlines(), "lhs", "rhs",
                                     lineterm="", n=2))
    first = next((line[1:] for line in diff[2:] if line[:1] in "-+"), "")
    if len(diff) > DIFF_LINES:
        diff = diff[:DIFF_LINES] + [f"... ({len(diff) - DIFF_LINES} more diff lines)"]
    raise ValueError(f"StructuralEqual check failed: they first differ in {_kind(first)}\n"
                     + "\n".join(diff))


def _kind(line: str) -> str:
    """What a line of printed TVMScript is, in a few words (``a T.reads line``)."""
    text = line.strip()
    m = re.match(r"(?:[\w, ]+=\s*)?(T\.[\w.]+)", text)
    if m:
        name = m.group(1)
        if name.startswith("T.axis"):
            name = "T.axis"
        return f"a {name} line"
    m = re.match(r"(for|with|if|else|def|return|@[\w.]+)\b", text)
    if m:
        return f"a '{m.group(1)}' line"
    if re.match(r"[\w.]+\[.*\]\s*=", text):
        return "a buffer store"
    if text.startswith("#"):
        return "a comment line (what the printer shows of the root block)"
    return "a line" if text else "an empty line"

"""Replaying a trace written as Python — the engine's export or TVM's ``trace.as_python()``
— without running it: the text is read with :mod:`ast` and each ``sch.<primitive>(...)``
call is applied to the schedule, its results bound to the names on the left::

    b0 = sch.get_sblock(name="Y", func_name="main")
    l1, l2, l3 = sch.get_loops(b0)
    v4, v5 = sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=16, decision=[2, 8])
    sch.transform_layout(block=b0, buffer=("write", 0), index_map=lambda i, j: (j, i))

Only that shape is read: assignments of a call's results to names (or a tuple of names),
calls on ``sch`` of the schedule's primitives (TVM 0.27's names too: ``get_sblock``), and
arguments that are constants, names bound earlier, lists and tuples of those, dicts with
string keys (an annotation's value), a negative
number, ``T.<dtype>(constant)``, and a ``lambda`` for an index map (handed over as its text,
which the primitive parses itself). Anything else is a :class:`TraceError` naming the line:
the text is data, never executed.
"""
from __future__ import annotations

import ast
from typing import Any

from engine.script.pyast import parse_python

from .error import TraceError
from .registry import BY_METHOD

__all__ = ["apply_python_trace"]

_DTYPE_CALLS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float16", "float32", "float64", "bool"}


def _method_names() -> dict[str, str]:
    """Every name a primitive is called by (its own, and each dialect's) -> the engine's."""
    names = {}
    for method, prim in BY_METHOD.items():
        names[method] = method
        for other in prim.dialect_method.values():
            names.setdefault(other, method)
    return names


def _body(tree: ast.Module) -> list[ast.stmt]:
    """The statements of ``def apply_trace(sch)`` when there is one, else the module's."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            return node.body
    return [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))]


class _Reader:
    def __init__(self, sch: Any):
        self.sch = sch
        self.env: dict[str, Any] = {}
        self.methods = _method_names()

    def fail(self, node: ast.AST, what: str) -> TraceError:
        return TraceError(f"line {getattr(node, 'lineno', '?')}: {what}")

    def value(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and (node.value is None or isinstance(
                node.value, (bool, int, float, str))):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in self.env:
                raise self.fail(node, f"{node.id!r} is not defined by an earlier line")
            return self.env[node.id]
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.value(x) for x in node.elts]
            return items if isinstance(node, ast.List) else tuple(items)
        if isinstance(node, ast.Dict):   # an annotation's value: string keys, plain values
            out = {}
            for k, v in zip(node.keys, node.values):
                if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                    raise self.fail(node, "a dict of a trace has string keys")
                out[k.value] = self.value(v)
            return out
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
                isinstance(node.operand, ast.Constant) and \
                isinstance(node.operand.value, (int, float)) and \
                not isinstance(node.operand.value, bool):
            return -node.operand.value
        if isinstance(node, ast.Lambda):
            return ast.unparse(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _DTYPE_CALLS and len(node.args) == 1 and not node.keywords:
            return self.value(node.args[0])
        raise self.fail(node, f"{ast.unparse(node)[:60]!r} is not a value a trace holds")

    def call(self, node: ast.AST) -> Any:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and
                isinstance(node.func.value, ast.Name) and node.func.value.id == "sch"):
            raise self.fail(node, "only calls sch.<primitive>(...) are read")
        method = self.methods.get(node.func.attr)
        if method is None:
            raise self.fail(node, f"sch.{node.func.attr} is not a schedule primitive")
        args = [self.value(a) for a in node.args]
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.fail(node, "**arguments are not read")
            kwargs[kw.arg] = self.value(kw.value)
        return getattr(self.sch, method)(*args, **kwargs)

    def bind(self, target: ast.AST, result: Any) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = result
            return
        if isinstance(target, (ast.Tuple, ast.List)) and \
                all(isinstance(t, ast.Name) for t in target.elts):
            results = list(result) if isinstance(result, (list, tuple)) else [result]
            if len(results) != len(target.elts):
                raise self.fail(target, f"{len(target.elts)} names for {len(results)} results")
            for t, r in zip(target.elts, results):
                self.env[t.id] = r
            return
        raise self.fail(target, "results are bound to names only")

    def run(self, statements: list[ast.stmt]) -> None:
        for st in statements:
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
                continue                                   # a docstring
            if isinstance(st, ast.Pass):
                continue
            if isinstance(st, ast.Expr):
                self.call(st.value)
            elif isinstance(st, ast.Assign) and len(st.targets) == 1:
                self.bind(st.targets[0], self.call(st.value))
            else:
                raise self.fail(st, f"a {type(st).__name__} is not a line of a trace")


def apply_python_trace(text: str, sch: Any) -> None:
    """Apply the trace written as Python in ``text`` to ``sch`` (see the module)."""
    try:
        tree = parse_python(text)
    except SyntaxError as e:
        raise TraceError(f"the trace is not Python: {e.msg} (line {e.lineno})") from None
    _Reader(sch).run(_body(tree))

"""Walking and rewriting Relax: :class:`ExprMutator` (rebuilds only what changed),
:func:`substitute` (variables -> expressions) and :func:`post_order_visit`."""
from __future__ import annotations

from typing import Any, Callable

from . import expr as X


class ExprMutator:
    """Rebuilds an expression bottom-up; override ``visit_<kind>`` (``visit_call``,
    ``visit_var``, ...) or :meth:`visit_binding`. Unchanged subtrees are returned as is."""

    def visit(self, e: Any) -> Any:
        method = getattr(self, "visit_" + _KIND.get(type(e), "leaf"))
        return method(e)

    def visit_leaf(self, e: Any) -> Any:
        return e

    visit_var = visit_leaf
    visit_constant = visit_leaf

    def visit_tuple(self, e: X.Tuple) -> Any:
        fields = tuple(self.visit(f) for f in e.fields)
        if all(a is b for a, b in zip(fields, e.fields)):
            return e
        return X.Tuple(fields)

    def visit_get(self, e: X.TupleGetItem) -> Any:
        t = self.visit(e.tuple_value)
        return e if t is e.tuple_value else X.TupleGetItem(t, e.index)

    def visit_call(self, e: X.Call) -> Any:
        args = tuple(self.visit(a) for a in e.args)
        if all(a is b for a, b in zip(args, e.args)):
            return e
        return e.replace(args=args)

    def visit_binding(self, b: X.VarBinding) -> X.VarBinding:
        v = self.visit(b.value)
        return b if v is b.value else X.VarBinding(b.var, v)

    def visit_block(self, block: X.BindingBlock) -> X.BindingBlock:
        bindings = tuple(self.visit_binding(b) for b in block.bindings)
        if all(a is b for a, b in zip(bindings, block.bindings)):
            return block
        return type(block)(bindings)

    def visit_seq(self, e: X.SeqExpr) -> Any:
        blocks = tuple(self.visit_block(b) for b in e.blocks)
        body = self.visit(e.body)
        if body is e.body and all(a is b for a, b in zip(blocks, e.blocks)):
            return e
        return X.SeqExpr(blocks, body)

    def visit_function(self, f: X.Function) -> X.Function:
        body = self.visit_seq(f.body)
        return f if body is f.body else f.replace(body=body)


_KIND = {X.Var: "var", X.DataflowVar: "var", X.Constant: "constant", X.Tuple: "tuple",
         X.TupleGetItem: "get", X.Call: "call", X.SeqExpr: "seq", X.Function: "function"}


class _Substitute(ExprMutator):
    def __init__(self, mapping: dict):
        self.mapping = mapping

    def visit_var(self, e: X.Var) -> Any:
        return self.mapping.get(id(e), e)


def substitute(e: Any, mapping: dict) -> Any:
    """``e`` with each variable ``v`` in ``mapping`` ({Var: Expr}) replaced."""
    return _Substitute({id(k): v for k, v in mapping.items()}).visit(e)


def post_order_visit(e: Any, fn: Callable[[Any], None]) -> None:
    """Call ``fn`` on every expression, binding and block under ``e``, children first."""
    t = type(e)
    if t is X.Function:
        for p in e.params:
            fn(p)
        post_order_visit(e.body, fn)
    elif t is X.SeqExpr:
        for block in e.blocks:
            for b in block.bindings:
                post_order_visit(b.value, fn)
                fn(b.var)
                fn(b)
            fn(block)
        post_order_visit(e.body, fn)
    elif t is X.Tuple:
        for f in e.fields:
            post_order_visit(f, fn)
    elif t is X.TupleGetItem:
        post_order_visit(e.tuple_value, fn)
    elif t is X.Call:
        post_order_visit(e.op, fn)
        for a in e.args:
            post_order_visit(a, fn)
    fn(e)

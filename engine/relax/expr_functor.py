"""Visitors and mutators of Relax written in Python, as TVM's ``relax.PyExprVisitor`` and
``relax.PyExprMutator`` (the course's graph-optimisation chapter)::

    @relax.expr_functor.mutator
    class EwiseFMARewriter(relax.PyExprMutator):
        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)        # the operands rewritten first
            if call.op != tvm.ir.Op.get("relax.add"):
                return call
            value = self.lookup_binding(call.args[0])      # what lv0 was bound to
            if not isinstance(value, relax.Call) or value.op != Op.get("relax.multiply"):
                return call
            return relax.Call(Op.get("relax.ewise_fma"),
                              [value.args[0], value.args[1], call.args[1]], None, None)

    updated = EwiseFMARewriter().visit_expr(mod["main"])

**Dispatch.** :meth:`PyExprVisitor.visit_expr` calls the hook of the expression's kind:
``visit_call_``, ``visit_var_``, ``visit_dataflow_var_``, ``visit_constant_``,
``visit_tuple_``, ``visit_tuple_getitem_``, ``visit_function_``, ``visit_seq_expr_``,
``visit_global_var_``, ``visit_op_``, ``visit_extern_func_``, ``visit_shape_expr_``;
bindings go through ``visit_binding`` → ``visit_var_binding_``, blocks through
``visit_binding_block`` → ``visit_binding_block_`` / ``visit_dataflow_block_``, the
variables a binding or a function defines through ``visit_var_def`` → ``visit_var_def_`` /
``visit_dataflow_var_def_``. Override the hooks; the defaults walk every child.

**The mutator** follows TVM's C++ ``ExprMutator``: every rewritten expression is normalized
by ``self.builder_`` (a :class:`~engine.relax.block_builder.BlockBuilder`, whose ``normalize``
gives a new call its struct info and names nested calls), bindings are re-emitted into the
builder's current block, so :meth:`PyExprMutator.lookup_binding` finds the value a variable
was bound to *after* rewriting; a variable whose value changed struct info is replaced by a
new one (its later uses remapped: :meth:`PyExprMutator.get_var_remap`). Functions and
blocks are rebuilt only when something in them changed (else the same object comes back).
``visit_expr_post_order(e)`` is the default rewrite of ``e``'s kind (its children visited,
the node rebuilt), without calling the overridden hook on ``e`` itself.

The decorators :func:`visitor` and :func:`mutator` are TVM's spelling; here they check the
class and mark it (TVM's wrap it in a C++ object; the engine's functors are Python already).
"""
from __future__ import annotations

from typing import Any

from engine.ir.structural import structural_equal

from . import expr as X
from .block_builder import BlockBuilder
from .struct_info import ObjectStructInfo

__all__ = ["PyExprVisitor", "PyExprMutator", "visitor", "mutator", "ExprFunctorError"]


class ExprFunctorError(TypeError):
    """A functor asked to walk something that is not Relax (the message says what)."""


#: expression class -> the name of its hook (subclasses before their bases)
_HOOKS = (
    (X.DataflowVar, "visit_dataflow_var_"),
    (X.Var, "visit_var_"),
    (X.Constant, "visit_constant_"),
    (X.Tuple, "visit_tuple_"),
    (X.TupleGetItem, "visit_tuple_getitem_"),
    (X.Call, "visit_call_"),
    (X.SeqExpr, "visit_seq_expr_"),
    (X.Function, "visit_function_"),
    (X.GlobalVar, "visit_global_var_"),
    (X.Op, "visit_op_"),
    (X.ExternFunc, "visit_extern_func_"),
    (X.ShapeExpr, "visit_shape_expr_"),
)
_HOOK_OF: dict = {}


def _hook(e: Any) -> str:
    t = type(e)
    name = _HOOK_OF.get(t)
    if name is None:
        for cls, hook in _HOOKS:
            if isinstance(e, cls):
                name = _HOOK_OF[t] = hook
                break
        else:
            what = type(e).__name__
            raise ExprFunctorError(f"visit_expr takes a Relax expression (a Function, a Call, "
                                   f"a Var, ...), got {what}"
                                   + (": visit the module's functions one by one "
                                      "(mod['main'])" if what == "IRModule" else ""))
    return name


# ---------------------------------------------------------------------------- visitor
class PyExprVisitor:
    """Walk a Relax expression; override the ``visit_*_`` hooks (module docstring)."""

    _functor_kind = "visitor"

    def visit_expr(self, expr: X.Expr) -> None:
        getattr(self, _hook(expr))(expr)

    # ------------------------------------------------------------ bindings and blocks
    def visit_binding(self, binding: X.VarBinding) -> None:
        self.visit_var_binding_(binding)

    def visit_var_binding_(self, binding: X.VarBinding) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)

    def visit_binding_block(self, block: X.BindingBlock) -> None:
        if isinstance(block, X.DataflowBlock):
            self.visit_dataflow_block_(block)
        else:
            self.visit_binding_block_(block)

    def visit_binding_block_(self, block: X.BindingBlock) -> None:
        for b in block.bindings:
            self.visit_binding(b)

    def visit_dataflow_block_(self, block: X.DataflowBlock) -> None:
        for b in block.bindings:
            self.visit_binding(b)

    def visit_var_def(self, var: X.Var) -> None:
        if isinstance(var, X.DataflowVar):
            self.visit_dataflow_var_def_(var)
        else:
            self.visit_var_def_(var)

    def visit_var_def_(self, var: X.Var) -> None:
        pass

    def visit_dataflow_var_def_(self, var: X.DataflowVar) -> None:
        pass

    def visit_span(self, span: Any) -> None:
        pass

    # ------------------------------------------------------------ expressions
    def visit_function_(self, func: X.Function) -> None:
        for p in func.params:
            self.visit_var_def(p)
        self.visit_expr(func.body)

    def visit_seq_expr_(self, seq: X.SeqExpr) -> None:
        for block in seq.blocks:
            self.visit_binding_block(block)
        self.visit_expr(seq.body)

    def visit_call_(self, call: X.Call) -> None:
        self.visit_expr(call.op)
        for a in call.args:
            self.visit_expr(a)

    def visit_tuple_(self, tup: X.Tuple) -> None:
        for f in tup.fields:
            self.visit_expr(f)

    def visit_tuple_getitem_(self, item: X.TupleGetItem) -> None:
        self.visit_expr(item.tuple_value)

    def _leaf(self, e: Any) -> None:
        pass

    visit_var_ = visit_dataflow_var_ = visit_constant_ = visit_global_var_ = _leaf
    visit_op_ = visit_extern_func_ = visit_shape_expr_ = _leaf


# ---------------------------------------------------------------------------- mutator
class PyExprMutator:
    """Rewrite a Relax expression through a block builder (module docstring).

    ``mod``, when given, is the builder's module: functions added with
    ``self.builder_.add_func`` join it and ``self.builder_.get()`` returns it.
    """

    _functor_kind = "mutator"

    def __init__(self, mod: Any = None) -> None:
        self.builder_ = BlockBuilder(mod)
        self.var_remap_: dict = {}

    # ------------------------------------------------------------ entry points
    def visit_expr(self, expr: X.Expr) -> X.Expr:
        """``expr`` rewritten by its kind's hook, then normalized by the builder."""
        return self.builder_.normalize(getattr(self, _hook(expr))(expr))

    def visit_expr_post_order(self, expr: X.Expr) -> X.Expr:
        """The default rewrite of ``expr``'s kind (children first, the node rebuilt when
        one changed), whatever this class overrides for that kind; normalized."""
        return self.builder_.normalize(getattr(PyExprMutator, _hook(expr))(self, expr))

    def visit_with_new_scope(self, expr: X.Expr, params: Any = None) -> X.Expr:
        """``expr`` visited in a new scope of the builder (a function body)."""
        begin = getattr(self.builder_, "begin_scope", None)
        if begin is not None:
            begin(list(params) if params is not None else None)
        try:
            return self.visit_expr(expr)
        finally:
            end = getattr(self.builder_, "end_scope", None)
            if end is not None:
                end()

    def lookup_binding(self, var: X.Var) -> X.Expr | None:
        """The value ``var`` is bound to among the bindings emitted so far (after
        rewriting), or None (a parameter, or not bound yet)."""
        return self.builder_.lookup_binding(var)

    def set_var_remap(self, vid: Any, var: X.Var) -> None:
        """Later uses of ``vid`` (a variable, or its id) read ``var``."""
        self.var_remap_[vid if isinstance(vid, int) else id(vid)] = var

    def get_var_remap(self, vid: Any) -> X.Var:
        return self.var_remap_[vid if isinstance(vid, int) else id(vid)]

    def with_struct_info(self, var: X.Var, sinfo: Any) -> X.Var:
        """``var``, or a new variable of the same name and kind with struct info ``sinfo``
        when ``var``'s differs."""
        if sinfo is None or structural_equal(var.struct_info, sinfo):
            return var
        return type(var)(var.name_hint, sinfo)

    # ------------------------------------------------------------ bindings and blocks
    def visit_binding(self, binding: X.VarBinding) -> None:
        """Rewrite ``binding`` and emit the result into the builder's current block."""
        self.visit_var_binding_(binding)

    def visit_var_binding_(self, binding: X.VarBinding) -> None:
        self.re_emit_binding(binding, self.visit_expr(binding.value))

    def re_emit_binding(self, binding: X.VarBinding, new_value: X.Expr) -> None:
        """Emit ``binding`` with the value ``new_value`` (a new variable when the struct
        info changed, later uses remapped to it)."""
        new_var = self.visit_var_def(binding.var)
        if new_var is binding.var and new_value is binding.value:
            self.builder_.emit_normalized(binding)
            return
        temp = self.with_struct_info(new_var, new_value.struct_info)
        if temp is not binding.var:
            self.var_remap_[id(binding.var)] = temp
        self.builder_.emit_normalized(X.VarBinding(temp, new_value))

    def visit_binding_block(self, block: X.BindingBlock) -> X.BindingBlock:
        if isinstance(block, X.DataflowBlock):
            return self.visit_dataflow_block_(block)
        return self.visit_binding_block_(block)

    def visit_binding_block_(self, block: X.BindingBlock) -> X.BindingBlock:
        self.builder_.begin_binding_block()
        for b in block.bindings:
            self.visit_binding(b)
        return self._end_block(block)

    def visit_dataflow_block_(self, block: X.DataflowBlock) -> X.DataflowBlock:
        self.builder_.begin_dataflow_block()
        for b in block.bindings:
            self.visit_binding(b)
        return self._end_block(block)

    def _end_block(self, block: X.BindingBlock) -> X.BindingBlock:
        new = self.builder_.end_block()
        if len(new.bindings) == len(block.bindings) and all(
                a is b for a, b in zip(new.bindings, block.bindings)):
            return block
        return new

    def visit_var_def(self, var: X.Var) -> X.Var:
        if isinstance(var, X.DataflowVar):
            return self.visit_dataflow_var_def_(var)
        return self.visit_var_def_(var)

    def visit_var_def_(self, var: X.Var) -> X.Var:
        return var

    def visit_dataflow_var_def_(self, var: X.DataflowVar) -> X.DataflowVar:
        return var

    def visit_span(self, span: Any) -> Any:
        return span

    # ------------------------------------------------------------ expressions
    def visit_function_(self, func: X.Function) -> X.Function:
        params = [self.visit_var_def(p) for p in func.params]
        body = self.visit_with_new_scope(func.body, params)
        if body is func.body and all(a is b for a, b in zip(params, func.params)):
            return func
        if not isinstance(body, X.SeqExpr):
            body = X.SeqExpr((), body)
        return X.Function(func.name, tuple(params), body, func.ret_struct_info, func.attrs)

    def visit_seq_expr_(self, seq: X.SeqExpr) -> X.Expr:
        blocks, unchanged = [], True
        for block in seq.blocks:
            new = self.visit_binding_block(block)
            unchanged &= new is block
            if new.bindings:
                blocks.append(new)
        self.builder_.begin_binding_block()
        body = self.visit_expr(seq.body)
        prologue = self.builder_.end_block()
        if prologue.bindings:
            blocks.append(prologue)
            unchanged = False
        if unchanged and body is seq.body:
            return seq
        return X.SeqExpr(tuple(blocks), body)

    def visit_call_(self, call: X.Call) -> X.Expr:
        op = self.visit_expr(call.op)
        args = [self.visit_expr(a) for a in call.args]
        if op is call.op and all(a is b for a, b in zip(args, call.args)):
            return call
        # rebuilt without struct info, so the builder infers it from the new operands; kept
        # from the old call where it cannot (a call of a function the builder lacks)
        new = self.builder_.normalize(X.Call(op, tuple(args), call.attrs, call.sinfo_args))
        if type(new.struct_info) is ObjectStructInfo:
            new = new.replace(struct_info=call.struct_info)
        return new

    def visit_tuple_(self, tup: X.Tuple) -> X.Expr:
        fields = [self.visit_expr(f) for f in tup.fields]
        if all(a is b for a, b in zip(fields, tup.fields)):
            return tup
        return X.Tuple(tuple(fields))

    def visit_tuple_getitem_(self, item: X.TupleGetItem) -> X.Expr:
        t = self.visit_expr(item.tuple_value)
        return item if t is item.tuple_value else X.TupleGetItem(t, item.index)

    def visit_var_(self, var: X.Var) -> X.Expr:
        return self.var_remap_.get(id(var), var)

    visit_dataflow_var_ = visit_var_

    def _leaf(self, e: Any) -> Any:
        return e

    visit_constant_ = visit_global_var_ = visit_op_ = visit_extern_func_ = _leaf
    visit_shape_expr_ = _leaf


# ---------------------------------------------------------------------------- decorators
def _decorate(cls: type, base: type, name: str) -> type:
    if not isinstance(cls, type) or not issubclass(cls, base):
        raise ExprFunctorError(f"@relax.expr_functor.{name} decorates a subclass of "
                               f"relax.{base.__name__}, got {cls!r}")
    return cls


def visitor(cls: type) -> type:
    """``@relax.expr_functor.visitor``: the class, checked to be a :class:`PyExprVisitor`."""
    return _decorate(cls, PyExprVisitor, "visitor")


def mutator(cls: type) -> type:
    """``@relax.expr_functor.mutator``: the class, checked to be a :class:`PyExprMutator`."""
    return _decorate(cls, PyExprMutator, "mutator")



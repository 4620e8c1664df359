"""Relax functions in TVMScript: signatures, ``with R.dataflow():`` blocks with
``R.output``, bindings and ``return``; and :func:`parse`, the entry point for text holding
``@T.prim_func`` and ``@R.function`` functions (the TensorIR ones are read by
:mod:`engine.script`'s parser, which calls back here for the Relax ones)."""
from __future__ import annotations

import ast
from typing import Any

from engine.ir.function import IRModule
from engine.script.errors import ScriptError
from engine.script.parser import module as script_module

from .. import expr as X
from ..struct_info import StructInfo, fits
from .exprs import PRIM, RELAX, RelaxExprParser


class RelaxParser(RelaxExprParser):
    """The Relax functions of one text (``ctx`` is the script parser of that text: its
    errors carry line and column)."""

    def __init__(self, ctx: Any, relax_fns: list, prims: dict, class_name: str | None,
                 constants: list | None):
        self.ctx = ctx
        self.asts = {fn.name: fn for fn in relax_fns}
        self.functions = {n: PRIM for n in prims}
        self.functions.update({n: RELAX for n in self.asts})
        self.class_names = {class_name} if class_name else set()
        self.in_class = class_name is not None
        self.globals: dict[str, X.GlobalVar] = {}
        self.constants = constants
        self.parsed: dict[str, X.Function] = {}
        self.in_progress: list[str] = []
        self.scopes: list[dict] = [{}]
        self.block_locals: dict[str, Any] = {}
        self.in_dataflow = False
        self.attrs: list = []
        self.shape_vars: dict = {}  # the function's symbolic sizes by name

    # ------------------------------------------------------------------ names
    def lookup(self, name: str) -> Any:
        for scope in reversed(self.scopes):
            v = scope.get(name)
            if v is not None:
                return v
        return None

    def visible_names(self) -> set:
        out = set(self.functions)
        for scope in self.scopes:
            out.update(scope)
        return out

    def global_var(self, name: str) -> X.GlobalVar:
        gv = self.globals.get(name)
        if gv is None:
            gv = self.globals[name] = X.GlobalVar(name)
        return gv

    # ------------------------------------------------------------------ functions
    def run(self) -> dict:
        for name in self.asts:
            self.relax_function(name, None)
        return dict(self.parsed)

    def relax_function(self, name: str, at: Any) -> X.Function:
        done = self.parsed.get(name)
        if done is not None:
            return done
        if name in self.in_progress:
            raise self.err(at, f"{name} calls itself (through "
                               f"{' -> '.join(self.in_progress + [name])}); recursive Relax "
                               "functions are not supported")
        saved = (self.scopes, self.block_locals, self.in_dataflow, self.ctx.current,
                 self.attrs, self.shape_vars)
        self.in_progress.append(name)
        try:
            f = self.function(self.asts[name])
        finally:
            self.in_progress.pop()
            self.scopes, self.block_locals, self.in_dataflow, self.ctx.current, \
                self.attrs, self.shape_vars = saved
        self.parsed[name] = f
        return f

    def function(self, fn: ast.FunctionDef) -> X.Function:
        self.ctx.current = fn
        self.scopes = [{}]
        self.block_locals = {}
        self.in_dataflow = False
        self.shape_vars = {}
        a = fn.args
        if a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg or a.defaults:
            raise self.err(fn, f"function {fn.name!r}: parameters must be plain "
                               "`name: Tensor((1, 784), \"float32\")` parameters")
        params = []
        for arg in a.args:
            if arg.annotation is None:
                raise self.err(arg, f"parameter {arg.arg!r} needs a type: "
                                    f"{arg.arg}: Tensor((1, 784), \"float32\")")
            if arg.arg in self.scopes[0]:
                raise self.err(arg, f"duplicate parameter name {arg.arg!r}")
            v = X.Var(arg.arg, self.struct_info(arg.annotation))
            self.scopes[0][arg.arg] = v
            params.append(v)
        declared = self.struct_info(fn.returns) if fn.returns is not None else None
        self.attrs: list = []
        blocks, ret = self.body(fn)
        if declared is not None and not fits(ret.struct_info, declared):
            raise self.err(fn.returns, f"{fn.name} is declared to return a "
                                       f"{declared.describe()} but returns a "
                                       f"{ret.struct_info.describe()}")
        ret_si = declared if declared is not None else ret.struct_info
        return X.Function(fn.name, tuple(params), X.SeqExpr(tuple(blocks), ret), ret_si,
                          tuple(self.attrs))

    def class_alias(self, st: Any) -> bool:
        """``cls = Module`` (TVM 0.27): ``cls.linear0`` names the module's function."""
        if type(st) is ast.Assign and len(st.targets) == 1 and \
                type(st.targets[0]) is ast.Name and type(st.value) is ast.Name and \
                st.value.id in self.class_names:
            self.class_names.add(st.targets[0].id)
            return True
        return False

    def size_declaration(self, st: Any) -> bool:
        """``n = T.int64()`` / ``m, n = T.int64(), T.int64()``: names for the function's
        symbolic sizes (the same variables as ``"n"`` in its annotations)."""
        if type(st) is not ast.Assign or len(st.targets) != 1:
            return False
        target, value = st.targets[0], st.value
        if type(target) is ast.Name:
            pairs = [(target, value)]
        elif type(target) is ast.Tuple and type(value) is ast.Tuple and \
                len(target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts))
        else:
            return False
        for t, v in pairs:
            f = v.func if type(v) is ast.Call else None
            if not (type(t) is ast.Name and type(f) is ast.Attribute and
                    type(f.value) is ast.Name and f.value.id in self.ctx.ns and
                    f.attr in ("int64", "int32") and not v.args and not v.keywords):
                return False
        for t, v in pairs:
            if v.func.attr != "int64":
                raise self.err(v, "a Relax function's symbolic sizes are int64: "
                                  f"{t.id} = T.int64()")
            self.shape_var(t.id, t)
        return True

    def func_attr(self, call: ast.Call) -> None:
        """``R.func_attr({"Primitive": 1})``: the function's attributes."""
        if len(call.args) != 1 or call.keywords or type(call.args[0]) is not ast.Dict:
            raise self.err(call, "write the attributes as R.func_attr({\"key\": value})")
        d = call.args[0]
        for k, v in zip(d.keys, d.values):
            if type(k) is not ast.Constant or not isinstance(k.value, str):
                raise self.err(k or d, "an attribute's name is a string")
            if any(a == k.value for a, _ in self.attrs):
                raise self.err(k, f"attribute {k.value!r} is given twice")
            self.attrs.append((k.value, self.literal(v, f"attribute {k.value!r}")))

    def body(self, fn: ast.FunctionDef) -> tuple[list, X.Expr]:
        blocks: list = []
        loose: list = []  # bindings outside dataflow blocks, not yet in a block
        ret = None
        stmts = fn.body
        for i, st in enumerate(stmts):
            self.ctx.current = st
            t = type(st)
            if ret is not None:
                raise self.err(st, "nothing may follow the function's return")
            if t is ast.Pass or (t is ast.Expr and type(st.value) is ast.Constant and
                                 isinstance(st.value.value, str)):
                continue
            if self.class_alias(st) or self.size_declaration(st):
                continue
            if t is ast.With:
                if loose:
                    blocks.append(X.BindingBlock(tuple(loose)))
                    loose = []
                blocks.append(self.dataflow(st))
                continue
            if t in (ast.Assign, ast.AnnAssign):
                loose.append(self.binding(st, dataflow_outputs=None))
                continue
            if t is ast.Return:
                if st.value is None:
                    raise self.err(st, "a Relax function returns a value: return out")
                ret = self.expr(st.value)
                if isinstance(ret, X.DataflowVar):
                    raise self.err(st.value, "a value local to a dataflow block cannot be "
                                             "returned; list it in R.output(...)")
                continue
            if t is ast.Expr and type(st.value) is ast.Call and \
                    self.rname(st.value.func) == "R.func_attr":
                if blocks or loose:
                    raise self.err(st, "R.func_attr(...) comes first in the function")
                self.func_attr(st.value)
                continue
            if t is ast.Expr and type(st.value) is ast.Call and \
                    self.rname(st.value.func) == "R.output":
                raise self.err(st, "R.output(...) belongs at the end of a "
                                   "`with R.dataflow():` block")
            raise self.err(st, "a Relax function holds bindings (lv = ...), "
                               "`with R.dataflow():` blocks and a return")
        if loose:
            blocks.append(X.BindingBlock(tuple(loose)))
        if ret is None:
            raise self.err(fn, f"function {fn.name!r} must end with `return <value>`")
        return blocks, ret

    # ------------------------------------------------------------------ blocks
    def dataflow(self, st: ast.With) -> X.DataflowBlock:
        if len(st.items) != 1 or st.items[0].optional_vars is not None or \
                type(st.items[0].context_expr) is not ast.Call or \
                self.rname(st.items[0].context_expr.func) != "R.dataflow" or \
                st.items[0].context_expr.args or st.items[0].context_expr.keywords:
            raise self.err(st, "the only `with` of a Relax function is `with R.dataflow():`")
        if self.in_dataflow:
            raise self.err(st, "dataflow blocks cannot be nested")
        body = [s for s in st.body if not (type(s) is ast.Pass or (
            type(s) is ast.Expr and type(s.value) is ast.Constant))]
        last = body[-1] if body else None
        if last is None or not (type(last) is ast.Expr and type(last.value) is ast.Call and
                                self.rname(last.value.func) == "R.output"):
            raise self.err(last or st, "a dataflow block ends with R.output(...) naming the "
                                       "values used after it (R.output() if none)")
        out_call = last.value
        if out_call.keywords:
            raise self.err(out_call, "R.output takes the names of the block's outputs")
        outputs: dict[str, ast.AST] = {}
        for a in out_call.args:
            if type(a) is not ast.Name:
                raise self.err(a, "R.output takes names bound in the block: R.output(out)")
            if a.id in outputs:
                raise self.err(a, f"{a.id!r} is listed twice in R.output")
            outputs[a.id] = a
        self.scopes.append({})
        self.in_dataflow = True
        bindings = []
        try:
            for s in body[:-1]:
                self.ctx.current = s
                if self.class_alias(s):
                    continue
                if type(s) not in (ast.Assign, ast.AnnAssign):
                    raise self.err(s, "a dataflow block holds bindings (lv0 = ...) and ends "
                                      "with R.output(...)")
                bindings.append(self.binding(s, dataflow_outputs=outputs))
        finally:
            self.in_dataflow = False
            scope = self.scopes.pop()
        for name, node in outputs.items():
            if name not in scope:
                raise self.err(node, f"R.output names {name!r}, which this block does not "
                                     "bind")
            self.scopes[-1][name] = scope[name]
        for name, v in scope.items():
            if name not in outputs:
                self.block_locals[name] = v
        return X.DataflowBlock(tuple(bindings))

    def binding(self, st: Any, dataflow_outputs: dict | None) -> X.VarBinding:
        target = st.targets[0] if type(st) is ast.Assign else st.target
        if type(st) is ast.Assign and len(st.targets) != 1:
            raise self.err(st, "bind one name at a time: lv0 = ...")
        if type(target) is not ast.Name:
            raise self.err(target, "bind a plain name: lv0 = ... (unpack tuples with lv[0])")
        if st.value is None:
            raise self.err(st, f"{target.id!r} is declared without a value")
        name = target.id
        if name in self.ctx.relax_ns or name in self.ctx.ns:
            raise self.err(target, f"{name!r} is a TVMScript namespace; use another name")
        if dataflow_outputs is not None and name in self.scopes[-1]:
            raise self.err(target, f"{name!r} is bound twice in this dataflow block")
        value = self.expr(st.value)
        si: StructInfo = value.struct_info
        if type(st) is ast.AnnAssign:
            declared = self.struct_info(st.annotation)
            if not fits(si, declared):
                raise self.err(st.annotation, f"{name} is annotated as a "
                                              f"{declared.describe()} but its value is a "
                                              f"{si.describe()}")
        local = dataflow_outputs is not None and name not in dataflow_outputs
        var = (X.DataflowVar if local else X.Var)(name, si)
        self.scopes[-1][name] = var
        self.block_locals.pop(name, None)
        return X.VarBinding(var, value)


def _constants(constants: Any) -> list | None:
    if constants is None:
        return None
    if isinstance(constants, dict):
        raise ScriptError("constants must be a list in the order of meta[relay.Constant][i] "
                          "(engine.relax.constants_of(mod) gives a module's)")
    out = []
    for c in constants:
        out.append(c if isinstance(c, X.Constant) else X.const(_as_array(c)))
    return out


def _as_array(c: Any) -> Any:
    import numpy as np
    numpy = getattr(c, "numpy", None)
    return np.asarray(numpy() if callable(numpy) else c)


def parse(text: str, constants: Any = None) -> IRModule:
    """TVMScript text -> IRModule, with ``@T.prim_func`` and ``@R.function`` functions
    (Python's ``ast`` only: never eval/exec). Bad text raises :class:`ScriptError` with the
    line and column.

    ``constants``: the arrays that ``meta[relay.Constant][i]`` in the text stand for
    (a printed module after ``BindParams``); :func:`engine.relax.constants_of` gives them.
    """
    consts = _constants(constants)

    def hook(ctx: Any, relax_fns: list, prims: dict, class_name: str | None) -> dict:
        return RelaxParser(ctx, relax_fns, prims, class_name, consts).run()

    return script_module.parse(text, relax_hook=hook)

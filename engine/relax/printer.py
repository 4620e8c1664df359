"""Relax IR -> TVMScript text in the course's style (``@R.function``, ``Tensor((1, 784),
"float32")``, ``R.call_tir(linear0, (x, w0, b0), (1, 128), dtype="float32")``, bound weights
as ``meta[relay.Constant][i]``); the text parses back (:func:`engine.parse`, given the
constants for ``meta[...]``) to a structurally equal module, and printing that again gives
the same text.

* :func:`script` — an IRModule (its ``@T.prim_func`` functions printed by
  :mod:`engine.script`), a Relax :class:`~engine.relax.expr.Function`, or any Relax node;
* :func:`constants_of` — the arrays the printed ``meta[relay.Constant][i]`` stand for, in
  order (what ``engine.parse(text, constants=...)`` needs).
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from engine.ir import expr as E
from engine.ir.function import IRModule, PrimFunc
from engine.script.printer import prim_func_lines

from . import expr as X
from .op import OPS
from .struct_info import (ObjectStructInfo, ShapeStructInfo, TensorStructInfo,
                          TupleStructInfo)

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED = {"R", "T", "I", "meta", "metadata", "cls", "tvm", "relax", "tir", "Tensor",
             "Tuple", "Object", "Shape", "None", "True", "False", "return", "with", "def",
             "class", "for", "in", "if", "else", "lambda", "pass", "and", "or", "not", "is"}


def struct_info_text(si: Any) -> str:
    """``Tensor((1, 784), "float32")``, ``Tensor(None, "float32", ndim=2)``,
    ``Tuple(...)``, ``Shape([2, 3])``, ``Object``."""
    if isinstance(si, TensorStructInfo):
        if si.shape is not None:
            return f"Tensor({_tuple(si.shape)}, \"{si.dtype}\")"
        nd = f", ndim={si.ndim}" if si.ndim >= 0 else ""
        return f"Tensor(None, \"{si.dtype}\"{nd})"
    if isinstance(si, TupleStructInfo):
        return "Tuple(" + ", ".join(struct_info_text(f) for f in si.fields) + ")"
    if isinstance(si, ShapeStructInfo):
        return f"Shape({list(si.values)})"
    if isinstance(si, ObjectStructInfo):
        return "Object"
    raise TypeError(f"not a struct info: {type(si).__name__}")


def _tuple(values: tuple) -> str:
    """``(1, 784)``; a symbolic size by its name as a string: ``("n", 784)``."""
    items = [f'"{v.name}"' if isinstance(v, E.Var) else str(v) for v in values]
    if len(items) == 1:
        return f"({items[0]},)"
    return "(" + ", ".join(items) + ")"


def _literal(v: Any) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, tuple):
        return _tuple(tuple(_literal(x) for x in v))
    if isinstance(v, float):
        return repr(v)
    return str(v)


class RelaxPrinter:
    """One printing job: the module's constant table and each function's names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.constants: list[X.Constant] = []
        self.const_index: dict[int, int] = {}
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.global_names: set[str] = set()  # a variable never takes a function's name

    # ------------------------------------------------------------------ names
    def define(self, var: X.Var) -> str:
        base = var.name_hint if _IDENT.match(var.name_hint or "") and \
            var.name_hint not in _RESERVED else "v"
        name, k = base, 0
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        self.names[id(var)] = name
        return name

    # ------------------------------------------------------------------ expressions
    def ex(self, e: Any) -> str:
        t = type(e)
        if t is X.Var or t is X.DataflowVar:
            name = self.names.get(id(e))
            if name is None:  # a free variable (not bound in the function): print its hint
                return e.name_hint
            return name
        if t is X.Constant:
            a = e.data.array
            if a.ndim == 0:
                return f"R.const({_scalar(a)}, \"{a.dtype}\")"
            idx = self.const_index.get(id(e))
            if idx is None:
                idx = self.const_index[id(e)] = len(self.constants)
                self.constants.append(e)
            return f"meta[relay.Constant][{idx}]"
        if t is X.Tuple:
            return _tuple(tuple(self.ex(f) for f in e.fields)) if e.fields else "R.tuple()"
        if t is X.TupleGetItem:
            return f"{self.ex(e.tuple_value)}[{e.index}]"
        if t is X.ShapeExpr:
            return f"R.shape({list(e.values)})"
        if t is X.GlobalVar:
            return e.name_hint
        if t is X.ExternFunc:
            return _literal(e.global_symbol)
        if t is X.Call:
            return self.call(e)
        raise TypeError(f"cannot print a {t.__name__} as a Relax expression")

    def call(self, c: X.Call) -> str:
        op = c.op
        if isinstance(op, X.GlobalVar):
            return f"{op.name_hint}(" + ", ".join(self.ex(a) for a in c.args) + ")"
        name = op.name if isinstance(op, X.Op) else None
        if name == "relax.call_tir":
            callee, args = c.args
            out = c.sinfo_args[0]
            head = f"R.call_tir({self.ex(callee)}, {self.ex(args)}, "
            plain = _plain_output(out)
            if plain is not None:
                return head + plain + ")"
            return head + f"out_sinfo={self.sinfo_arg(out)})"
        if name == "relax.call_dps_packed":
            callee, args = c.args
            return (f"R.call_dps_packed({self.ex(callee)}, {self.ex(args)}, "
                    f"out_sinfo={self.sinfo_arg(c.sinfo_args[0])})")
        if name == "relax.builtin.alloc_tensor":
            return (f"R.alloc_tensor({_tuple(c.args[0].values)}, "
                    f"dtype=\"{c.attr('dtype')}\")")
        opdef = OPS.get(name or "")
        if opdef is None:
            raise TypeError(f"cannot print a call of {op!r}")
        parts = []
        for i, a in enumerate(c.args):
            parts.append(_tuple(a.values) if i in opdef.shape_inputs and
                         isinstance(a, X.ShapeExpr) else self.ex(a))
        defaults = dict(opdef.attrs)
        for k, v in c.attrs:
            if v != defaults.get(k, object()):
                parts.append(f"{k}={_literal(v)}")
        return f"{opdef.script}(" + ", ".join(parts) + ")"

    def sinfo_arg(self, si: Any) -> str:
        if isinstance(si, TupleStructInfo):
            return "[" + ", ".join(_r(struct_info_text(f)) for f in si.fields) + "]"
        return _r(struct_info_text(si))

    # ------------------------------------------------------------------ functions
    def emit(self, ind: int, text: str) -> None:
        self.lines.append("    " * ind + text)

    def function(self, f: X.Function, name: str, ind: int) -> None:
        self.names = {}
        self.used = set(self.global_names)
        self.emit(ind, "@R.function")
        params = ", ".join(f"{self.define(p)}: {struct_info_text(p.struct_info)}"
                           for p in f.params)
        self.emit(ind, f"def {name}({params}) -> {struct_info_text(f.ret_struct_info)}:")
        body = ind + 1
        if f.attrs:
            items = ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in f.attrs)
            self.emit(body, f"R.func_attr({{{items}}})")
        for block in f.body.blocks:
            if isinstance(block, X.DataflowBlock):
                self.emit(body, "with R.dataflow():")
                outs = []
                for b in block.bindings:
                    self.binding(b, body + 1)
                    if not isinstance(b.var, X.DataflowVar):
                        outs.append(self.names[id(b.var)])
                self.emit(body + 1, f"R.output({', '.join(outs)})")
            else:
                for b in block.bindings:
                    self.binding(b, body)
        self.emit(body, f"return {self.ex(f.body.body)}")

    def binding(self, b: X.VarBinding, ind: int) -> None:
        value = self.ex(b.value)  # before the name: the value may use an older `lv`
        self.emit(ind, f"{self.define(b.var)} = {value}")

    def module(self, mod: IRModule) -> None:
        self.lines.append("# from tvm.script import tir as T")
        self.lines.append("# from tvm.script import relax as R")
        self.lines.append("@tvm.script.ir_module")
        self.lines.append("class Module:")
        if not mod.functions:
            self.lines.append("    pass")
        self.global_names = set(mod.names())
        for k, (name, f) in enumerate(mod.functions):
            if k:
                self.lines.append("")
            if isinstance(f, PrimFunc):
                self.lines.extend(prim_func_lines(f, name, 1))
            elif isinstance(f, X.Function):
                self.function(f, name, 1)
            else:
                raise TypeError(f"cannot print a {type(f).__name__} in a module")


def _r(text: str) -> str:
    """``Tensor(...)`` -> ``R.Tensor(...)`` (the spelling inside ``out_sinfo=``)."""
    return re.sub(r"\b(Tensor|Tuple|Shape|Object)\b", r"R.\1", text)


def _plain_output(si: Any) -> str | None:
    """The course's ``(1, 128), dtype="float32"`` for a known shape (or several), else
    None (then ``out_sinfo=`` is printed)."""
    if isinstance(si, TensorStructInfo) and si.shape is not None:
        return f"{_tuple(si.shape)}, dtype=\"{si.dtype}\""
    if isinstance(si, TupleStructInfo) and si.fields and all(
            isinstance(f, TensorStructInfo) and f.shape is not None for f in si.fields):
        shapes = "(" + ", ".join(_tuple(f.shape) for f in si.fields) + ")"
        dtypes = _tuple(tuple(f"\"{f.dtype}\"" for f in si.fields))
        return f"{shapes}, dtype={dtypes}"
    return None


def _scalar(a: np.ndarray) -> str:
    v = a.item()
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, bool):
        return str(int(v))
    return str(v)


def script(obj: Any) -> str:
    """TVMScript text of an IRModule (TensorIR and Relax functions), a Relax Function or
    a Relax expression."""
    p = RelaxPrinter()
    if isinstance(obj, IRModule):
        p.module(obj)
    elif isinstance(obj, X.Function):
        p.function(obj, obj.name, 0)
    elif isinstance(obj, X.Expr):
        return p.ex(obj)
    else:
        raise TypeError(f"cannot print a {type(obj).__name__} as Relax")
    return "\n".join(p.lines) + "\n"


def constants_of(obj: Any) -> list[np.ndarray]:
    """The arrays of ``meta[relay.Constant][0]``, ``[1]``, ... in :func:`script`'s text of
    ``obj`` (pass them to ``engine.parse(text, constants=...)``)."""
    p = RelaxPrinter()
    if isinstance(obj, IRModule):
        p.module(obj)
    else:
        p.function(obj, obj.name, 0)
    return [c.data.array for c in p.constants]


def has_relax(obj: Any) -> bool:
    """True when ``obj`` is Relax or a module holding a Relax function."""
    if isinstance(obj, IRModule):
        return any(not isinstance(f, PrimFunc) for _, f in obj.functions)
    return isinstance(obj, (X.Expr, X.VarBinding, X.BindingBlock))


def repr_relax(node: Any) -> str:
    """Short text for a Relax node (never raises)."""
    try:
        if isinstance(node, (IRModule, X.Function)):
            return script(node).rstrip("\n")
        if isinstance(node, X.Expr):
            return script(node)
        if isinstance(node, X.VarBinding):
            return f"{node.var.name_hint} = {script(node.value)}"
        if hasattr(node, "describe"):
            return struct_info_text(node)
        return f"<{type(node).__name__}>"
    except Exception:  # noqa: BLE001 - repr must never fail
        return f"<{type(node).__name__} at {id(node):#x}>"

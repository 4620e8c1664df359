"""Relax expressions in TVMScript: literals, struct-info annotations, variables, tuples,
constants and calls (``R.call_tir``, ``R.call_dps_packed``, ``R.alloc_tensor``, the
operators of :mod:`engine.relax.op`, calls of the module's Relax functions)."""
from __future__ import annotations

import ast
import difflib
from typing import Any

from engine.ir import expr as E
from engine.script.errors import ScriptError

from .. import expr as X
from ..op import BY_SCRIPT, OpError, normalize_attrs
from ..struct_info import (ObjectStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
                           TupleStructInfo, fits, is_symbolic)

#: how a function of the module is reached in ``R.call_tir``: a TensorIR or a Relax one
PRIM, RELAX = "prim_func", "relax"
_DTYPES = ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8",
           "uint16", "uint32", "uint64", "bool")


class RelaxExprParser:
    """Expression parsing; mixed into :class:`.function.RelaxParser`, which provides
    ``ctx`` (the script parser: errors), ``scopes``, ``globals`` and the module's tables."""

    ctx: Any

    def err(self, node: Any, msg: str) -> ScriptError:
        return self.ctx.err(node, msg)

    # ------------------------------------------------------------------ names
    def rname(self, node: Any) -> str | None:
        """``R.nn.relu`` -> "R.nn.relu" when the first part names Relax's namespace
        (``relax.op.nn.relu``, the Python operator, -> "R.nn.relu" too); a bare
        ``Tensor``/``Tuple``/``Object``/``Shape`` (the course's annotations) -> "R.<name>"."""
        parts = []
        while type(node) is ast.Attribute:
            parts.append(node.attr)
            node = node.value
        if type(node) is not ast.Name:
            return None
        if node.id in self.ctx.relax_ns and parts:
            parts.reverse()
            if parts[0] == "op" and len(parts) > 1:   # relax.op.multiply: the operator R.multiply
                parts = parts[1:]
            return "R." + ".".join(parts)
        if not parts and node.id in ("Tensor", "Tuple", "Object", "Shape") and \
                self.lookup(node.id) is None:
            return "R." + node.id
        return None

    # ------------------------------------------------------------------ literals
    def literal(self, node: Any, what: str) -> Any:
        """An attribute value: int, float, str, bool, None, or a tuple/list of them."""
        t = type(node)
        if t is ast.Constant and (node.value is None or isinstance(node.value,
                                                                  (int, float, str, bool))):
            return node.value
        if t is ast.UnaryOp and type(node.op) is ast.USub and type(node.operand) is \
                ast.Constant and isinstance(node.operand.value, (int, float)) and \
                not isinstance(node.operand.value, bool):
            return -node.operand.value
        if t in (ast.Tuple, ast.List):
            return tuple(self.literal(e, what) for e in node.elts)
        if t is ast.Call and self.rname(node.func) == "R.shape" and len(node.args) == 1:
            return self.literal(node.args[0], what)
        raise self.err(node, f"{what} must be a number, a string or a tuple of them")

    def int_tuple(self, node: Any, what: str, allow_minus_one: bool = False) -> tuple:
        if type(node) is ast.Call and self.rname(node.func) == "R.shape" and \
                len(node.args) == 1 and not node.keywords:
            node = node.args[0]
        items = node.elts if type(node) in (ast.Tuple, ast.List) else [node]
        out = []
        for e in items:
            v = self.literal(e, what) if type(e) is not ast.Name else None
            if type(v) is not int:
                raise self.err(e, f"{what}: the sizes must be numbers such as (1, 784), or "
                                  "in a tensor's type symbolic sizes by name: (\"n\", 784)")
            if v < 0 and not (allow_minus_one and v == -1):
                raise self.err(e, f"{what}: a size may not be negative, got {v}")
            out.append(v)
        return tuple(out)

    def shape_tuple(self, node: Any, what: str) -> tuple:
        """A tensor's shape: numbers and symbolic sizes, named by a string (``("n", 784)``)
        or by a name declared at the top of the function (``n = T.int64()``); one variable
        per name in the function."""
        if type(node) is ast.Call and self.rname(node.func) == "R.shape" and \
                len(node.args) == 1 and not node.keywords:
            node = node.args[0]
        items = node.elts if type(node) in (ast.Tuple, ast.List) else [node]
        out: list = []
        for e in items:
            if type(e) is ast.Constant and isinstance(e.value, str):
                out.append(self.shape_var(e.value, e))
            elif type(e) is ast.Name and e.id in self.shape_vars:
                out.append(self.shape_vars[e.id])
            elif type(e) is ast.Name:
                raise self.err(e, f"{what}: {e.id!r} is not a symbolic size of this function; "
                                  f"write it as a string ((\"{e.id}\", 784)) or declare "
                                  f"{e.id} = T.int64() at the top of the function")
            else:
                out.extend(self.int_tuple(e, what))
        return tuple(out)

    def shape_var(self, name: str, node: Any) -> E.Var:
        """The function's symbolic size ``name`` (made on first use, int64 as TVM's)."""
        if not name.isidentifier():
            raise self.err(node, f"a symbolic size is named by an identifier such as \"n\", "
                                 f"got {name!r}")
        v = self.shape_vars.get(name)
        if v is None:
            v = self.shape_vars[name] = E.Var(name, "int64")
        return v

    def dtype_value(self, node: Any, what: str = "dtype") -> str:
        if type(node) is ast.Call and self.rname(node.func) == "R.dtype" and len(node.args) == 1:
            node = node.args[0]
        v = node.value if type(node) is ast.Constant else None
        if not isinstance(v, str) or v not in _DTYPES:
            close = difflib.get_close_matches(str(v), _DTYPES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise self.err(node, f"{what} must be a dtype string such as \"float32\", "
                                 f"got {ast.unparse(node)}{hint}")
        return v

    # ------------------------------------------------------------------ struct info
    def struct_info(self, node: Any) -> StructInfo:
        """``Tensor((1, 784), "float32")``, ``R.Tensor((1, 784), dtype="float32")``,
        ``Tensor(None, "float32", ndim=2)``, ``R.Tuple(...)``, ``R.Shape([..])``,
        ``R.Object``."""
        base = node.func if type(node) is ast.Call else (
            node.value if type(node) is ast.Subscript else node)
        name = self.rname(base)
        if name == "R.Object" and type(node) is not ast.Call:
            return ObjectStructInfo()
        if name == "R.Tensor":
            if type(node) is ast.Subscript:  # Tensor[(1, 784), "float32"]
                sl = node.slice
                args = list(sl.elts) if type(sl) is ast.Tuple else [sl]
                kws = {}
            elif type(node) is ast.Call:
                args = list(node.args)
                kws = {k.arg: k.value for k in node.keywords}
            else:
                raise self.err(node, "write a tensor type as Tensor((1, 784), \"float32\")")
            for k in kws:
                if k not in ("shape", "dtype", "ndim"):
                    raise self.err(node, f"Tensor(...) has no argument {k!r} (it has shape, "
                                         "dtype, ndim)")
            if len(args) > 3:
                raise self.err(node, "Tensor(...) takes shape, dtype and ndim")
            names = ("shape", "dtype", "ndim")
            got = dict(zip(names, args))
            for k, v in kws.items():
                if k in got:
                    raise self.err(v, f"Tensor(...) got {k} twice")
                got[k] = v
            shape_node = got.get("shape")
            shape = None
            if shape_node is not None and not (type(shape_node) is ast.Constant
                                               and shape_node.value is None):
                shape = self.shape_tuple(shape_node, "a tensor's shape")
            if "dtype" not in got:
                raise self.err(node, "a tensor type needs its dtype: Tensor((1, 784), "
                                     "\"float32\")")
            dtype = self.dtype_value(got["dtype"])
            ndim = -1
            if "ndim" in got:
                ndim = self.literal(got["ndim"], "ndim")
                if type(ndim) is not int or ndim < -1:
                    raise self.err(got["ndim"], "ndim must be a number of dimensions")
                if shape is not None and ndim not in (-1, len(shape)):
                    raise self.err(got["ndim"], f"ndim={ndim} but the shape {shape} has "
                                                f"{len(shape)} dimensions")
            return TensorStructInfo(shape, dtype, ndim)
        if name == "R.Tuple" and type(node) in (ast.Call, ast.Subscript):
            if type(node) is ast.Call:
                items = node.args[0].elts if len(node.args) == 1 and type(node.args[0]) in \
                    (ast.List, ast.Tuple) else node.args
            else:
                items = node.slice.elts if type(node.slice) is ast.Tuple else [node.slice]
            return TupleStructInfo(tuple(self.struct_info(e) for e in items))
        if name == "R.Shape" and type(node) is ast.Call and len(node.args) == 1:
            return ShapeStructInfo(self.int_tuple(node.args[0], "R.Shape"))
        raise self.err(node, "expected a Relax type such as Tensor((1, 784), \"float32\") "
                             "or R.Tensor((1, 784), dtype=\"float32\")")

    def out_sinfo(self, node: Any) -> StructInfo:
        """``out_sinfo=R.Tensor(...)`` or a list of them (several outputs)."""
        if type(node) is ast.List:
            return TupleStructInfo(tuple(self.struct_info(e) for e in node.elts))
        return self.struct_info(node)

    # ------------------------------------------------------------------ expressions
    def expr(self, node: Any) -> X.Expr:
        self.ctx.current = node
        t = type(node)
        if t is ast.Name:
            return self.var(node)
        if t is ast.Tuple:
            return X.Tuple(tuple(self.expr(e) for e in node.elts))
        if t is ast.Subscript:
            return self.subscript(node)
        if t is ast.Call:
            return self.call(node)
        if t is ast.Attribute and self.global_ref(node) is not None:
            raise self.err(node, f"{ast.unparse(node)} is a function; call it, or pass it to "
                                 "R.call_tir")
        if t is ast.Constant and isinstance(node.value, (int, float)) and \
                not isinstance(node.value, bool):
            raise self.err(node, f"a bare number is not a Relax value; write "
                                 f"R.const({node.value}, \"float32\")")
        raise self.err(node, f"not a Relax expression: {ast.unparse(node)[:60]}")

    def var(self, node: ast.Name) -> X.Expr:
        v = self.lookup(node.id)
        if v is not None:
            return v
        local = self.block_locals.get(node.id)
        if local is not None:
            raise self.err(node, f"{node.id!r} is local to its dataflow block; list it in that "
                                 f"block's R.output(...) to use it after the block")
        if node.id in self.functions:
            raise self.err(node, f"{node.id!r} is a function; call it, or pass it to "
                                 "R.call_tir")
        known = sorted(self.visible_names())
        close = difflib.get_close_matches(node.id, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise self.err(node, f"unknown name {node.id!r}{hint}")

    def global_ref(self, node: Any) -> str | None:
        """The function of the module that ``node`` names (``linear0``, ``cls.linear0``,
        ``Module.linear0``), or None."""
        if type(node) is ast.Name and self.lookup(node.id) is None:
            return node.id if node.id in self.functions else None
        if type(node) is ast.Attribute and type(node.value) is ast.Name and \
                node.value.id in self.class_names and self.lookup(node.value.id) is None:
            if node.attr not in self.functions:
                raise self.err(node, f"the module has no function {node.attr!r} "
                                     f"(it has: {', '.join(self.functions)})")
            return node.attr
        return None

    def subscript(self, node: ast.Subscript) -> X.Expr:
        inner = node.value
        # meta[relay.Constant][i] (the course) / metadata["relax.expr.Constant"][i] (TVM 0.27)
        if type(inner) is ast.Subscript and type(inner.value) is ast.Name and \
                inner.value.id in ("meta", "metadata") and self.lookup(inner.value.id) is None:
            kind = ast.unparse(inner.slice).strip("'\"")
            if kind not in ("relay.Constant", "relax.expr.Constant", "relax.Constant"):
                raise self.err(inner, f"unknown metadata kind {kind!r} (this subset has "
                                      "meta[relay.Constant][i])")
            idx = self.literal(node.slice, "a constant's index")
            return self.constant(node, idx)
        base = self.expr(inner)
        idx = self.literal(node.slice, "a tuple index")
        si = base.struct_info
        if type(idx) is not int or not isinstance(si, TupleStructInfo):
            raise self.err(node, f"only tuples can be indexed, with a number "
                                 f"({ast.unparse(inner)} is a {si.describe()})")
        if not -len(si.fields) <= idx < len(si.fields):
            raise self.err(node, f"index {idx} is out of range for a tuple of "
                                 f"{len(si.fields)} fields")
        return X.TupleGetItem(base, idx % len(si.fields))

    def constant(self, node: Any, idx: Any) -> X.Constant:
        if type(idx) is not int:
            raise self.err(node, "a constant's index must be a number")
        if self.constants is None:
            raise self.err(node, f"this text uses the bound constant meta[relay.Constant]"
                                 f"[{idx}]; pass the constants to the parser: "
                                 "engine.parse(text, constants=[array0, array1, ...])")
        if not 0 <= idx < len(self.constants):
            raise self.err(node, f"meta[relay.Constant][{idx}] does not exist: "
                                 f"{len(self.constants)} constants were given")
        return self.constants[idx]

    # ------------------------------------------------------------------ calls
    def call(self, node: ast.Call) -> X.Expr:
        for a in node.args:
            if type(a) is ast.Starred:
                raise self.err(a, "*arguments are not supported")
        for k in node.keywords:
            if k.arg is None:
                raise self.err(k, "**arguments are not supported")
        name = self.rname(node.func)
        if name in ("R.call_tir", "R.call_dps_packed"):
            return self.call_tir(node, name)
        if name in ("R.alloc_tensor", "R.builtin.alloc_tensor"):
            return self.alloc_tensor(node)
        if name == "R.const":
            return self.const(node)
        if name == "R.shape":
            return X.ShapeExpr(self.int_tuple(node, "R.shape"))
        if name == "R.tuple":
            return X.Tuple(tuple(self.expr(a) for a in node.args))
        if name == "R.output":
            raise self.err(node, "R.output(...) must be the last statement of a "
                                 "`with R.dataflow():` block")
        if name is not None and name in BY_SCRIPT:
            return self.op_call(node, name)
        target = self.global_ref(node.func)
        if target is not None:
            return self.call_function(node, target)
        if name is not None:
            close = difflib.get_close_matches(name, sorted(BY_SCRIPT) + [
                "R.call_tir", "R.call_dps_packed", "R.alloc_tensor", "R.const"], n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise self.err(node.func, f"unknown Relax function {name}{hint}")
        if type(node.func) is ast.Name and node.func.id not in self.functions:
            raise self.err(node.func, f"unknown function {node.func.id!r}")
        raise self.err(node, f"cannot call {ast.unparse(node.func)[:60]}")

    def call_args_tuple(self, node: Any) -> X.Tuple:
        if type(node) in (ast.Tuple, ast.List):
            return X.Tuple(tuple(self.expr(e) for e in node.elts))
        value = self.expr(node)
        if isinstance(value.struct_info, TupleStructInfo) and isinstance(value, X.Tuple):
            return value
        return X.Tuple((value,))

    def call_tir(self, node: ast.Call, name: str) -> X.Call:
        kws = {k.arg: k.value for k in node.keywords}
        allowed = {"dtype", "out_sinfo", "tir_vars"}
        for k in kws:
            if k not in allowed:
                raise self.err(node, f"{name} has no argument {k!r} (it has: the function, "
                                     "the arguments, the output shape, dtype= / out_sinfo=)")
        if "tir_vars" in kws:
            raise self.err(kws["tir_vars"], "tir_vars (symbolic shapes) are not supported")
        if not 2 <= len(node.args) <= 3:
            raise self.err(node, f"{name} takes the function, the arguments and the output: "
                                 f"{name}(linear0, (x, w0, b0), (1, 128), dtype=\"float32\")")
        callee_node = node.args[0]
        if type(callee_node) is ast.Constant and isinstance(callee_node.value, str):
            if not callee_node.value:
                raise self.err(callee_node, "the name of an external function is empty")
            callee: X.Expr = X.ExternFunc(callee_node.value)
        else:
            if name == "R.call_dps_packed":
                raise self.err(callee_node, "R.call_dps_packed calls a registered function "
                                            "by name: R.call_dps_packed(\"env.linear\", ...)")
            target = self.callee_name(callee_node)
            callee = self.global_var(target)
        args = self.call_args_tuple(node.args[1])
        out = self.call_output(node, kws, name)
        op = "relax.call_tir" if name == "R.call_tir" else "relax.call_dps_packed"
        return X.Call(X.Op(op), (callee, args), (), (out,), out)

    def callee_name(self, node: Any) -> str:
        ref = self.global_ref(node)
        if ref is not None:
            if self.functions[ref] != PRIM:
                raise self.err(node, f"R.call_tir calls a TensorIR function, and {ref!r} is a "
                                     "Relax function (call it directly: "
                                     f"{ref}(...))")
            return ref
        if type(node) is ast.Name and self.lookup(node.id) is None:
            if self.in_class:
                close = difflib.get_close_matches(node.id, list(self.functions), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise self.err(node, f"R.call_tir calls {node.id!r}, which this module does "
                                     f"not define{hint}")
            return node.id  # a lone function: the module it will join defines it
        raise self.err(node, "R.call_tir's first argument must be a TensorIR function of "
                             "the module (linear0 or cls.linear0) or the name of a "
                             "registered function (\"env.linear\")")

    def call_output(self, node: ast.Call, kws: dict, name: str) -> StructInfo:
        if "out_sinfo" in kws:
            if len(node.args) == 3 or "dtype" in kws:
                raise self.err(node, f"{name}: give the output either as shape + dtype= or as "
                                     "out_sinfo=, not both")
            return self.out_sinfo(kws["out_sinfo"])
        if len(node.args) < 3:
            raise self.err(node, f"{name} needs the output's shape and dtype: "
                                 "(1, 128), dtype=\"float32\" (or out_sinfo=R.Tensor(...))")
        third = node.args[2]
        base = third.func if type(third) is ast.Call else third
        if type(third) is ast.List or self.rname(base) in ("R.Tensor", "R.Tuple"):
            if "dtype" in kws:
                raise self.err(node, f"{name}: the output type already has its dtype")
            return self.out_sinfo(third)
        if "dtype" not in kws:
            raise self.err(node, f"{name} needs dtype=\"float32\" (the output's dtype)")
        items = third.elts if type(third) in (ast.Tuple, ast.List) else [third]
        if items and all(type(e) in (ast.Tuple, ast.List) for e in items):
            shapes = [self.shape_tuple(e, f"{name}'s output shape") for e in items]
            d = kws["dtype"]
            dtypes = [self.dtype_value(e) for e in d.elts] if type(d) in (ast.Tuple, ast.List) \
                else [self.dtype_value(d)] * len(shapes)
            if len(dtypes) != len(shapes):
                raise self.err(d, f"{len(shapes)} output shapes but {len(dtypes)} dtypes")
            return TupleStructInfo(tuple(TensorStructInfo(s, dt)
                                         for s, dt in zip(shapes, dtypes)))
        shape = self.shape_tuple(third, f"{name}'s output shape")
        return TensorStructInfo(shape, self.dtype_value(kws["dtype"]))

    def alloc_tensor(self, node: ast.Call) -> X.Call:
        kws = {k.arg: k.value for k in node.keywords}
        for k in kws:
            if k not in ("dtype", "runtime_device_index"):
                raise self.err(node, f"R.alloc_tensor has no argument {k!r}")
        args = list(node.args)
        if not args:
            raise self.err(node, "R.alloc_tensor needs a shape: R.alloc_tensor((1, 128), "
                                 "dtype=\"float32\")")
        shape = self.shape_tuple(args[0], "R.alloc_tensor's shape")
        dnode = kws.get("dtype", args[1] if len(args) > 1 else None)
        if dnode is None:
            raise self.err(node, "R.alloc_tensor needs dtype=\"float32\"")
        dtype = self.dtype_value(dnode)
        if self.in_dataflow:
            raise self.err(node, "R.alloc_tensor has a side effect (fresh memory); it may not "
                                 "be inside `with R.dataflow():` (move it out of the block)")
        si = TensorStructInfo(shape, dtype)
        return X.Call(X.Op("relax.builtin.alloc_tensor"), (X.ShapeExpr(shape),),
                      (("dtype", dtype),), (), si)

    def const(self, node: ast.Call) -> X.Constant:
        if not 1 <= len(node.args) <= 2 or len(node.keywords) > 1 or \
                any(k.arg != "dtype" for k in node.keywords):
            raise self.err(node, "write a constant as R.const(1.5, \"float32\")")
        value = self.literal(node.args[0], "R.const's value")
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise self.err(node.args[0], "R.const takes a number (bind arrays with "
                                         "relax.transform.BindParams)")
        dnode = node.args[1] if len(node.args) == 2 else (
            node.keywords[0].value if node.keywords else None)
        dtype = self.dtype_value(dnode) if dnode is not None else (
            "int32" if isinstance(value, int) else "float32")
        return X.const(value, dtype)

    def op_call(self, node: ast.Call, name: str) -> X.Call:
        op = BY_SCRIPT[name]
        if len(node.args) != len(op.inputs):
            raise self.err(node, f"{name} takes {len(op.inputs)} operand(s) "
                                 f"({', '.join(op.inputs)}), got {len(node.args)}")
        args = []
        for i, a in enumerate(node.args):
            if i in op.shape_inputs:
                args.append(X.ShapeExpr(self.int_tuple(a, f"{name}'s shape",
                                                       allow_minus_one=True)))
            else:
                args.append(self.expr(a))
        for a, e in zip(node.args, args):
            if is_symbolic(e.struct_info):
                raise self.err(a, f"{name} on a {e.struct_info.describe()}: high-level "
                                  "operators take tensors of known shape here; call a "
                                  "TensorIR function of symbolic shape with R.call_tir")
        given = {}
        for k in node.keywords:
            v = self.literal(k.value, f"{name}'s {k.arg}")
            if k.arg in ("out_dtype",) and v in ("void", ""):
                v = None
            given[k.arg] = v
        try:
            attrs = normalize_attrs(op, given)
            si = op.infer([a.struct_info for a in args], dict(attrs))
        except OpError as e:
            raise self.err(node, str(e)) from None
        return X.Call(X.Op(op.name), tuple(args), attrs, (), si)

    def call_function(self, node: ast.Call, target: str) -> X.Call:
        if self.functions[target] == PRIM:
            raise self.err(node, f"{target!r} is a TensorIR function: call it through "
                                 f"R.call_tir({target}, (args...), shape, dtype=...)")
        if node.keywords:
            raise self.err(node, "a Relax function takes positional arguments only")
        callee = self.relax_function(target, node)
        args = tuple(self.expr(a) for a in node.args)
        if len(args) != len(callee.params):
            raise self.err(node, f"{target} takes {len(callee.params)} argument(s), got "
                                 f"{len(args)}")
        for i, (a, p) in enumerate(zip(args, callee.params)):
            if not fits(a.struct_info, p.struct_info):
                raise self.err(node.args[i], f"argument {i} of {target} must be a "
                                             f"{p.struct_info.describe()}, got a "
                                             f"{a.struct_info.describe()}")
        return X.Call(self.global_var(target), args, (), (), callee.ret_struct_info)

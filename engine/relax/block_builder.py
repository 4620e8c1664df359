"""``relax.BlockBuilder``: a Relax module built from Python, one binding at a time (TVM's
``BlockBuilder``, what the course's integration chapter builds its models with)::

    x = relax.Var("x", relax.TensorStructInfo((1, 784), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit_te(topi.nn.dense, x, w0)        # a PrimFunc "dense", R.call_tir
            lv1 = bb.emit(relax.op.nn.relu(lv0))           # a high-level operator call
            gv = bb.emit_output(lv1)
        bb.emit_func_output(gv)
    mod = bb.get()                                         # the IRModule

prints (``mod.show()``)::

    @R.function
    def main(x: Tensor((1, 784), "float32")) -> Tensor((1, 128), "float32"):
        with R.dataflow():
            lv = R.call_tir(dense, (x, meta[relay.Constant][0]), (1, 128), dtype="float32")
            lv1 = R.nn.relu(lv)
            gv = lv1
            R.output(gv)
        return gv

What it does, as TVM's does:

* :meth:`BlockBuilder.emit` binds a value to a fresh variable: ``lv``, ``lv1``, ... (a
  :class:`~engine.relax.expr.DataflowVar`) inside ``bb.dataflow()``, ``gv``, ``gv1``, ...
  (a :class:`~engine.relax.expr.Var`) outside; :meth:`~BlockBuilder.emit_output` binds a
  dataflow block's output (a ``gv``).
* :meth:`BlockBuilder.normalize` gives every call its struct info (an operator call built
  with ``relax.Call(Op.get("relax.add"), [a, b])`` has none yet: it is inferred, and the
  operator's default attributes filled in) and, inside a block, binds the nested calls of
  an expression first (``relax.op.linear(x, w, b)`` is ``add(matmul(x, permute_dims(w)),
  b)``: three bindings).
* :meth:`BlockBuilder.emit_te` calls a tensor-expression function (a ``topi`` operator or
  one written with ``te.compute``) on placeholders standing for its Relax operands, makes the
  PrimFunc with ``te.create_prim_func`` (named ``primfunc_name_hint`` or after the Python
  function), adds it to the module (a structurally equal one already there is reused) and
  emits ``R.call_tir`` of it; :meth:`~BlockBuilder.call_te` gives the call without binding
  it.
* :meth:`BlockBuilder.emit_func_output` ends the function; :meth:`~BlockBuilder.get` is
  the module, its functions in the order they were added (the PrimFuncs a function's
  ``emit_te`` made come before it).

For passes that rebuild functions (an expression mutator's ``builder_``):
:meth:`~BlockBuilder.begin_dataflow_block`, :meth:`~BlockBuilder.begin_binding_block`,
:meth:`~BlockBuilder.end_block`, :meth:`~BlockBuilder.emit`,
:meth:`~BlockBuilder.emit_normalized`, :meth:`~BlockBuilder.normalize`,
:meth:`~BlockBuilder.lookup_binding`, :meth:`~BlockBuilder.add_func`,
:meth:`~BlockBuilder.update_func`, :meth:`~BlockBuilder.get`.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

from engine import te
from engine.ir.function import IRModule, PrimFunc
from engine.ir.structural import structural_equal

from . import expr as X
from .op import OPS, OpError, normalize_attrs
from .struct_info import (ObjectStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
                          TupleStructInfo)

__all__ = ["BlockBuilder", "BlockBuilderError"]


class BlockBuilderError(ValueError):
    """A BlockBuilder used out of order (the message says what was expected)."""


class _Block:
    """A block being built: its bindings and whether it is a dataflow block."""

    def __init__(self, dataflow: bool):
        self.dataflow = dataflow
        self.bindings: list[X.VarBinding] = []

    def close(self) -> X.BindingBlock:
        cls = X.DataflowBlock if self.dataflow else X.BindingBlock
        return cls(tuple(self.bindings))


class _Function:
    """A function being built by ``with bb.function(...)``."""

    def __init__(self, name: str, params: Any, attrs: Any):
        self.name = name
        self.params = None if params is None else _as_params(params, name)
        self.attrs = tuple(dict(attrs or {}).items())
        self.blocks: list[X.BindingBlock] = []
        self.outputs: dict[X.Var, X.Var] = {}  # a dataflow var -> the output var bound to it
        self.gvar: X.GlobalVar | None = None


def _as_params(params: Any, fname: str) -> tuple:
    if isinstance(params, X.Var):
        params = [params]
    out = tuple(params)
    for p in out:
        if not isinstance(p, X.Var) or isinstance(p, X.DataflowVar):
            raise BlockBuilderError(f"the parameters of {fname} must be relax.Var s, got "
                                    f"{type(p).__name__}")
    return out


def _name_of(gvar: Any) -> str:
    name = getattr(gvar, "name_hint", gvar)
    if not isinstance(name, str):
        raise BlockBuilderError(f"a function is named by a GlobalVar or a string, got "
                                f"{type(gvar).__name__}")
    return name


def _is_leaf(e: Any) -> bool:
    """A value an operator takes as it is (TVM's leaf or tuple of leaves)."""
    if isinstance(e, (X.Var, X.Constant, X.ShapeExpr, X.GlobalVar, X.ExternFunc, X.Op)):
        return True
    if isinstance(e, X.Tuple):
        return all(_is_leaf(f) for f in e.fields)
    return False


class _FunctionScope:
    def __init__(self, bb: "BlockBuilder", frame: _Function):
        self.bb, self.frame = bb, frame

    def __enter__(self) -> "_FunctionScope":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        bb = self.bb
        if bb._func is self.frame:
            bb._func = None
            bb._blocks = []
        if bb in BlockBuilder._current:
            BlockBuilder._current.remove(bb)
        if exc_type is None and self.frame.gvar is None:
            raise BlockBuilderError(f"the function {self.frame.name!r} ended without "
                                    "bb.emit_func_output(...): call it once, last in the "
                                    "`with bb.function(...)` scope")


class _DataflowScope:
    def __init__(self, bb: "BlockBuilder"):
        self.bb = bb

    def __enter__(self) -> "_DataflowScope":
        self.bb._flush()
        self.bb.begin_dataflow_block()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        bb = self.bb
        if exc_type is not None:
            if bb._blocks and bb._blocks[-1].dataflow:
                bb._blocks.pop()
            return
        block = bb.end_block()
        if bb._func is not None and block.bindings:
            bb._func.blocks.append(block)


class BlockBuilder:
    """Builds Relax functions binding by binding into a module (see the module docstring).

    ``BlockBuilder(mod)`` starts from the functions of ``mod``."""

    _current: list = []

    def __init__(self, mod: IRModule | None = None):
        self._funcs: dict[str, Any] = dict(mod.items()) if mod is not None else {}
        self._func: _Function | None = None
        self._blocks: list[_Block] = []          # the open blocks, innermost last
        self._bound: dict[X.Var, X.Expr] = {}    # every binding made: lookup_binding
        self._counts: dict[str, int] = {}        # lv, lv1, ...: the next number per hint

    # ------------------------------------------------------------------ scopes
    @staticmethod
    def current() -> "BlockBuilder | None":
        """The builder whose ``with bb.function(...)`` scope is open (innermost)."""
        return BlockBuilder._current[-1] if BlockBuilder._current else None

    def function(self, name: str, params: Any = None, attrs: Any = None,
                 pure: bool = True, private: bool = False) -> _FunctionScope:
        """``with bb.function("main", [x, w]):`` — the scope of one Relax function; its
        parameters here or in :meth:`emit_func_output` (``pure`` and ``private`` are
        accepted for TVM's signature; the engine's functions have no such flags)."""
        if self._func is not None:
            raise BlockBuilderError(f"bb.function({name!r}) inside the function "
                                    f"{self._func.name!r}: end that one first "
                                    "(bb.emit_func_output)")
        if not isinstance(name, str) or not name.isidentifier():
            raise BlockBuilderError(f"a function name must be an identifier, got {name!r}")
        self._func = _Function(name, params, attrs)
        self._blocks = [_Block(dataflow=False)]
        self._counts = {}
        BlockBuilder._current.append(self)
        return _FunctionScope(self, self._func)

    def dataflow(self) -> _DataflowScope:
        """``with bb.dataflow():`` — a dataflow block of the current function: its emitted
        variables are DataflowVars, and only those given to :meth:`emit_output` are seen
        after it."""
        if self._func is None:
            raise BlockBuilderError("bb.dataflow() is used inside `with bb.function(...)`")
        if self._in_dataflow():
            raise BlockBuilderError("bb.dataflow() inside a dataflow block: dataflow "
                                    "blocks do not nest")
        return _DataflowScope(self)

    def begin_dataflow_block(self) -> None:
        """Open a dataflow block (end it with :meth:`end_block`)."""
        self._blocks.append(_Block(dataflow=True))

    def begin_binding_block(self) -> None:
        """Open a block of ordinary bindings (end it with :meth:`end_block`)."""
        self._blocks.append(_Block(dataflow=False))

    def end_block(self) -> X.BindingBlock:
        """Close the innermost open block and give it (a DataflowBlock or BindingBlock)."""
        if not self._blocks:
            raise BlockBuilderError("end_block() with no block open")
        return self._blocks.pop().close()

    def _in_dataflow(self) -> bool:
        return bool(self._blocks) and self._blocks[-1].dataflow

    def _flush(self) -> None:
        """In a function: the ordinary bindings so far become a block of their own."""
        if self._func is None or not self._blocks or self._blocks[-1].dataflow:
            return
        block = self._blocks[-1]
        if block.bindings:
            self._func.blocks.append(block.close())
            block.bindings = []

    # ------------------------------------------------------------------ names
    def _fresh(self, hint: str) -> str:
        k = self._counts.get(hint, 0)
        self._counts[hint] = k + 1
        return hint if k == 0 else f"{hint}{k}"

    def get_unique_name(self, name_hint: str) -> str:
        """``name_hint``, else ``name_hint1``, ... among the module's function names."""
        return _fresh_function_name(name_hint, self._funcs)

    # ------------------------------------------------------------------ bindings
    def emit(self, expr: Any, name_hint: str = "") -> X.Var:
        """Bind ``expr`` (normalized first) to a new variable and give the variable."""
        if isinstance(expr, (list, tuple)):
            expr = X.Tuple(tuple(expr))
        if not self._blocks:
            self.begin_binding_block()
        value = self.normalize(expr)
        dataflow = self._blocks[-1].dataflow
        cls = X.DataflowVar if dataflow else X.Var
        var = cls(name_hint or self._fresh("lv" if dataflow else "gv"), value.struct_info)
        self._bind(X.VarBinding(var, value))
        return var

    def emit_normalized(self, binding: X.VarBinding) -> None:
        """Add a binding as it is (its value already normalized): what a mutator uses to
        keep a binding."""
        if not self._blocks:
            self.begin_binding_block()
        self._bind(binding)

    def _bind(self, binding: X.VarBinding) -> None:
        block = self._blocks[-1]
        if isinstance(binding.var, X.DataflowVar) and not block.dataflow:
            raise BlockBuilderError(f"the DataflowVar {binding.var.name_hint} is bound "
                                    "outside a dataflow block")
        block.bindings.append(binding)
        self._bound[binding.var] = binding.value

    def emit_output(self, output: Any, name_hint: str = "") -> X.Var:
        """In a dataflow block: bind ``output`` to a variable seen after the block
        (``gv = lv1``; a list or tuple becomes a Relax tuple)."""
        if not self._in_dataflow():
            raise BlockBuilderError("bb.emit_output(...) is for the outputs of a dataflow "
                                    "block: call it inside `with bb.dataflow():`")
        if isinstance(output, (list, tuple)):
            output = X.Tuple(tuple(output))
        value = self.normalize(output)
        var = X.Var(name_hint or self._fresh("gv"), value.struct_info)
        self._bind(X.VarBinding(var, value))
        if self._func is not None and isinstance(output, X.DataflowVar):
            self._func.outputs.setdefault(output, var)
        return var

    def emit_func_output(self, output: Any, params: Any = None) -> X.GlobalVar:
        """End the current function returning ``output`` (a list or tuple becomes a Relax
        tuple); ``params`` its parameters when ``bb.function`` was not given them. Gives
        the function's GlobalVar."""
        f = self._func
        if f is None:
            raise BlockBuilderError("bb.emit_func_output(...) is called inside "
                                    "`with bb.function(...)`")
        if f.gvar is not None:
            raise BlockBuilderError(f"bb.emit_func_output was already called for "
                                    f"{f.name!r}: a function has one output")
        if self._in_dataflow():
            raise BlockBuilderError("bb.emit_func_output(...) is called after the dataflow "
                                    "block ends (outside `with bb.dataflow():`); give the "
                                    "block's result to bb.emit_output first")
        if params is not None:
            if f.params is not None:
                raise BlockBuilderError(f"the parameters of {f.name!r} were given to "
                                        "bb.function already: give them once")
            f.params = _as_params(params, f.name)
        if isinstance(output, (list, tuple)):
            output = X.Tuple(tuple(output))
        output = self._seen_after_blocks(output)
        value = self.normalize(output)
        if not _is_leaf(value):
            value = self.emit(value)
        self._flush()
        self._blocks = []
        func = X.Function(f.name, f.params or (), X.SeqExpr(tuple(f.blocks), value),
                          value.struct_info, f.attrs)
        name = _fresh_function_name(f.name, self._funcs)
        self._funcs[name] = func if name == f.name else func.replace(name=name)
        f.gvar = X.GlobalVar(name)
        return f.gvar

    def _seen_after_blocks(self, e: Any) -> Any:
        """A dataflow variable returned after its block is the output variable bound to it
        by emit_output (the course's ``from_fx`` returns the dataflow variable it gave to
        ``bb.emit_output``)."""
        outputs = self._func.outputs if self._func else {}
        if isinstance(e, X.DataflowVar):
            if e in outputs:
                return outputs[e]
            raise BlockBuilderError(f"the function returns {e.name_hint}, a variable of a "
                                    "dataflow block that is not seen after it: give it to "
                                    "bb.emit_output(...) and return what that gives")
        if isinstance(e, X.Tuple):
            fields = tuple(self._seen_after_blocks(x) for x in e.fields)
            return e if all(a is b for a, b in zip(fields, e.fields)) else X.Tuple(fields)
        return e

    def lookup_binding(self, var: X.Var) -> X.Expr | None:
        """The value bound to ``var`` by this builder (None for a parameter or a variable
        it did not bind)."""
        return self._bound.get(var)

    # ------------------------------------------------------------------ normalize
    def normalize(self, expr: Any) -> X.Expr:
        """``expr`` with its struct info inferred (an operator call made without it gets
        it, its default attributes filled in); inside a block, the nested calls of its
        operands are bound first."""
        if isinstance(expr, (list, tuple)):
            expr = X.Tuple(tuple(expr))
        if not isinstance(expr, X.Expr):
            raise BlockBuilderError(f"not a Relax expression: {type(expr).__name__} "
                                    f"({expr!r}); make constants with relax.const(...)")
        if isinstance(expr, X.Call):
            return self._normalize_call(expr)
        if isinstance(expr, X.Tuple):
            fields = tuple(self._argument(f) for f in expr.fields)
            if all(a is b for a, b in zip(fields, expr.fields)):
                return expr
            return X.Tuple(fields)
        if isinstance(expr, X.TupleGetItem):
            tv = self._argument(expr.tuple_value)
            return expr if tv is expr.tuple_value else X.TupleGetItem(tv, expr.index)
        return expr

    def _argument(self, e: Any) -> X.Expr:
        e = self.normalize(e)
        if self._blocks and not _is_leaf(e) and not isinstance(e, X.Function):
            return self.emit(e)
        return e

    def _normalize_call(self, call: X.Call) -> X.Call:
        args = tuple(self._argument(a) for a in call.args)
        changed = any(a is not b for a, b in zip(args, call.args))
        op = call.op
        attrs, si = call.attrs, call.struct_info
        if type(si) is ObjectStructInfo:
            if isinstance(op, X.Op) and op.name in OPS:
                opdef = OPS[op.name]
                try:
                    attrs = normalize_attrs(opdef, dict(call.attrs))
                    si = opdef.infer([a.struct_info for a in args], dict(attrs))
                except OpError as exc:
                    raise BlockBuilderError(str(exc)) from None
                changed = True
            elif isinstance(op, X.Op) and op.name in ("relax.call_tir",
                                                       "relax.call_dps_packed") \
                    and call.sinfo_args:
                si, changed = call.sinfo_args[0], True
            elif isinstance(op, X.GlobalVar) and op.name_hint in self._funcs:
                callee = self._funcs[op.name_hint]
                if isinstance(callee, X.Function):
                    si, changed = callee.ret_struct_info, True
        if not changed:
            return call
        return X.Call(op, args, attrs, call.sinfo_args, si)

    # ------------------------------------------------------------------ te
    def call_te(self, func: Callable, *args: Any, **kwargs: Any) -> X.Call:
        """``R.call_tir`` of the PrimFunc ``func`` computes on the operands (added to the
        module), not yet bound: ``primfunc_name_hint=`` names it (else the Python function's
        name); the other keyword arguments go to ``func``."""
        name_hint = kwargs.pop("primfunc_name_hint", None)
        attrs = kwargs.pop("primfunc_attrs", None)
        operands: list[X.Expr] = []
        placeholders: list[te.Tensor] = []

        def convert(a: Any) -> Any:
            if isinstance(a, X.Expr):
                a = self.normalize(a) if not isinstance(a, X.Var) else a
                si = a.struct_info
                if isinstance(si, TensorStructInfo):
                    if si.shape is None:
                        raise BlockBuilderError("emit_te needs tensors of known shape, got "
                                                f"{si.describe()}")
                    n = len(placeholders)
                    name = a.name_hint if isinstance(a, X.Var) else (
                        chr(ord("A") + n) if n < 26 else f"tensor_input_{n}")
                    ph = te.placeholder(si.shape, si.dtype, name=name)
                    operands.append(a)
                    placeholders.append(ph)
                    return ph
                if isinstance(si, ShapeStructInfo) and isinstance(a, X.ShapeExpr):
                    return list(a.values)
                raise BlockBuilderError(f"emit_te takes tensors, shapes and Python values, "
                                        f"got a Relax value of {si.describe()}")
            if isinstance(a, list):
                return [convert(x) for x in a]
            if isinstance(a, tuple):
                return tuple(convert(x) for x in a)
            if isinstance(a, dict):
                return {k: convert(v) for k, v in a.items()}
            return a

        te_args = [convert(a) for a in args]
        te_kwargs = {k: convert(v) for k, v in kwargs.items()}
        out = func(*te_args, **te_kwargs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        if not outs or not all(isinstance(o, te.Tensor) for o in outs):
            raise BlockBuilderError(f"emit_te: {_func_name(func)} must give a te tensor (or "
                                    f"a list of them), got {type(out).__name__}")
        name = name_hint or _func_name(func)
        prim = te.create_prim_func(placeholders + outs, name=name)
        if attrs:
            prim = prim.replace(attrs=tuple(prim.attrs) + tuple(dict(attrs).items()))
        gvar = self.add_func(prim, name)
        sinfos = [TensorStructInfo(tuple(int(s) for s in o.shape), o.dtype) for o in outs]
        out_si: StructInfo = sinfos[0] if not isinstance(out, (list, tuple)) else \
            TupleStructInfo(tuple(sinfos))
        return X.call_tir(gvar, X.Tuple(tuple(operands)), out_si)

    def emit_te(self, func: Callable, *args: Any, **kwargs: Any) -> X.Var:
        """Bind :meth:`call_te`'s call (see the module docstring)."""
        name_hint = kwargs.pop("name_hint", "")
        return self.emit(self.call_te(func, *args, **kwargs), name_hint)

    # ------------------------------------------------------------------ module
    def add_func(self, func: Any, func_name: str) -> X.GlobalVar:
        """Add ``func`` (a PrimFunc or a Relax Function) under ``func_name`` (made unique:
        ``add``, ``add1``, ...) and give its GlobalVar; a structurally equal function
        already in the module is not added again: its GlobalVar is given."""
        if not isinstance(func, (PrimFunc, X.Function)):
            raise BlockBuilderError(f"add_func takes a PrimFunc or a relax.Function, got "
                                    f"{type(func).__name__}")
        for name, f in self._funcs.items():
            if type(f) is type(func) and _same_function(f, func, name):
                return X.GlobalVar(name)
        name = _fresh_function_name(func_name, self._funcs)
        self._funcs[name] = _renamed(func, name)
        return X.GlobalVar(name)

    def update_func(self, gv: Any, func: Any) -> None:
        """Replace the function ``gv`` names (a GlobalVar or its name) by ``func``; a name
        the module lacks is added (TVM's ``IRModule::Update``: the course's
        ``MatmulAddFusor`` updates ``main`` into an empty builder)."""
        self._funcs[_name_of(gv)] = _renamed(func, _name_of(gv))

    def get(self) -> IRModule:
        """The module built so far."""
        return IRModule(tuple(self._funcs.items()))

    finalize = get

    def functions(self) -> Iterator[tuple[str, Any]]:
        return iter(list(self._funcs.items()))


def _func_name(func: Callable) -> str:
    name = getattr(func, "__name__", None)
    if not isinstance(name, str) or not name.isidentifier():
        return "te_func"
    return name


def _fresh_function_name(base: str, taken: Any) -> str:
    if base not in taken:
        return base
    k = 1
    while f"{base}{k}" in taken:
        k += 1
    return f"{base}{k}"


def _renamed(func: Any, name: str) -> Any:
    if getattr(func, "name", name) == name:
        return func
    func = func.replace(name=name)
    if isinstance(func, PrimFunc) and dict(func.attrs).get("global_symbol") not in (None, name):
        func = func.replace(attrs=tuple((k, name if k == "global_symbol" else v)
                                        for k, v in func.attrs))
    return func


def _same_function(a: Any, b: Any, name: str) -> bool:
    try:
        return structural_equal(a, _renamed(b, name))
    except Exception:  # noqa: BLE001 - a function the comparison cannot read is not the same
        return False

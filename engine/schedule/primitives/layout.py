"""transform_layout: give a buffer a new shape through an index map.

The index map is TVM's: a function from the old indices to the new ones, written as a
lambda string (``"lambda i, j: (i // 16, j, i % 16)"``, parsed with Python's ``ast`` only —
never evaluated) or as a Python callable that is called with index variables. The buffer
gets the shape the map's image needs, and every access to it in the function (loads,
stores, block read/write regions) is rewritten through the map.

A parameter can be transformed too, as in TVM: the function's signature changes, and its
caller passes arrays of the new layout (to keep the caller's arrays, ``cache_read`` the
input and transform the cache: the usual packing of ``B`` in a fast matmul). Where the new
shape has room no old element fills (*padding*), a ``pad_value`` is required; the padding
is filled where the buffer is written when a writer traverses the whole buffer row-major
(the writer then traverses the new shape, storing ``T.if_then_else(<padding>, pad, value)``),
else by a block after the buffer's last write (TVM's rules, see :meth:`TransformLayout.call`).
"""
from __future__ import annotations

import ast
import inspect
import json
import math
import types
from typing import Any

from engine.arith import bound_of, relax, simplify
from engine.ir import expr as E
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.functor import Mutator, collect, substitute
from engine.script.pyast import parse_python
from engine.ir.stmt import (Block, BlockRealize, BufferStore, Evaluate, For, ForKind, IterType,
                            IterVar, seq)

from ..error import ScheduleError, TraceError
from ..literals import py_literal, py_str
from ..registry import Ctx, Primitive, Result, fmt, register
from ..tree import FuncIndex, flatten_seq, iter_stmts, replace_stmts
from ._common import expect_block, fresh_name, is_int
from .buffers import alloc_site, nth_buffer
from .index_map_check import (MAX_CHECK, CheckBudget, CheckBudgetError,  # noqa: F401
                              IndexMapError, _injective, _injective_enum, _np_eval,
                              check_budget, expr_text, injective)
from .index_map_inverse import invert, invert_padded_with_offsets

READ, WRITE = 0, 1
_TYPES = {"read": READ, "write": WRITE}
_NAMES = {READ: "read", WRITE: "write"}
class IndexMapBudgetError(ScheduleError):
    """transform_layout refused because its one-to-one check is over the budget."""


# ---------------------------------------------------------------------------
# parsing and printing index maps
# ---------------------------------------------------------------------------
_BINOPS = {ast.Add: E.Add, ast.Sub: E.Sub, ast.Mult: E.Mul, ast.FloorDiv: E.FloorDiv,
           ast.Mod: E.FloorMod}
_EXAMPLE = 'e.g. "lambda i, j: (i // 16, j, i % 16)"'


def parse_index_map(text: str, free: Any = None, dtype: str = "int32"
                    ) -> tuple[list[E.Var], list[E.PrimExpr]]:
    """``"lambda i, j: (j, i)"`` -> ([Var i, Var j], [j, i]). Only integer constants, the
    lambda's parameters, ``+ - * // %``, unary minus and parentheses are allowed — and,
    with ``free`` (name -> variable: the function's sizes, as TVM's ``lambda i: (i // n,
    i % n)``), those names; ``free="any"`` accepts any other name as a size to be found
    later (a map checked before its function is known). Parameters and constants take
    ``dtype`` (the index dtype of what the map applies to)."""
    if not isinstance(text, str):
        raise IndexMapError(f"an index map must be a lambda string, got {type(text).__name__}")
    try:
        tree = parse_python(text.strip(), mode="eval")
    except SyntaxError as e:
        raise IndexMapError(f"the index map is not valid Python ({e.msg}); {_EXAMPLE}") from None
    lam = tree.body
    if not isinstance(lam, ast.Lambda):
        raise IndexMapError(f"the index map must be a lambda; {_EXAMPLE}")
    a = lam.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.kw_defaults or \
            getattr(a, "posonlyargs", []):
        raise IndexMapError("the index map's lambda takes plain parameters only (one per "
                            f"buffer dimension); {_EXAMPLE}")
    names = [x.arg for x in a.args]
    if not names:
        raise IndexMapError(f"the index map's lambda needs one parameter per dimension; "
                            f"{_EXAMPLE}")
    if len(set(names)) != len(names):
        raise IndexMapError("the index map's parameters must have different names")
    params = [E.Var(n, dtype) for n in names]
    env = dict(zip(names, params))
    body = lam.body
    items = body.elts if isinstance(body, (ast.Tuple, ast.List)) else [body]
    if not items:
        raise IndexMapError("the index map must produce at least one index")
    look = _FreeNames(env, free, dtype)
    return params, [_to_expr(x, look, dtype) for x in items]


class _FreeNames:
    """Names an index map may use: its parameters, then the sizes ``free`` offers."""

    def __init__(self, env: dict, free: Any, dtype: str):
        self.env, self.free, self.dtype = env, free, dtype
        self.placeholders: dict = {}

    def __contains__(self, name: str) -> bool:
        return name in self.env

    def get(self, name: str) -> E.PrimExpr:
        if name in self.env:
            return self.env[name]
        if isinstance(self.free, dict) and name in self.free:
            return self.free[name]
        if self.free == "any":
            return self.placeholders.setdefault(name, E.Var(name, self.dtype))
        sizes = f" and the function's sizes {', '.join(self.free)}" \
            if isinstance(self.free, dict) and self.free else ""
        raise IndexMapError(f"unknown name {name!r} in the index map (only the lambda's "
                            f"parameters {', '.join(self.env)}{sizes} may be used)")


def _to_expr(n: ast.AST, env: Any, dtype: str = "int32") -> E.PrimExpr:
    if isinstance(n, ast.Name):
        if isinstance(env, _FreeNames):
            return env.get(n.id)
        if n.id not in env:
            raise IndexMapError(f"unknown name {n.id!r} in the index map (only the lambda's "
                                f"parameters {', '.join(env)} may be used)")
        return env[n.id]
    if isinstance(n, ast.Constant) and isinstance(n.value, int) and \
            not isinstance(n.value, bool):
        return E.const(n.value, dtype)
    if isinstance(n, ast.BinOp) and type(n.op) in _BINOPS:
        a, b = _to_expr(n.left, env, dtype), _to_expr(n.right, env, dtype)
        if isinstance(n.op, (ast.FloorDiv, ast.Mod)) and E.is_const_int(b, 0):
            raise IndexMapError("the index map divides by zero")
        if a.dtype != b.dtype:
            raise IndexMapError(f"the index map mixes {a.dtype} and {b.dtype} indices")
        return _BINOPS[type(n.op)](a, b)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
        v = _to_expr(n.operand, env, dtype)
        if isinstance(v, E.IntImm):
            return E.const(-v.value, v.dtype)
        return E.Sub(E.const(0, v.dtype), v)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.UAdd):
        return _to_expr(n.operand, env, dtype)
    what = type(n).__name__
    if isinstance(n, ast.BinOp):
        what = f"the operator {type(n.op).__name__}"
    raise IndexMapError(f"{what} is not allowed in an index map (use integers, the "
                        "parameters and + - * // %)")


def map_text(params: list, exprs: list) -> str:
    names = ", ".join(p.name for p in params)
    outs = ", ".join(expr_text(x) for x in exprs)
    if len(exprs) == 1:
        outs += ","
    return f"lambda {names}: ({outs})"


def normalize_index_map(index_map: Any, ndim: int | None = None, dtype: str = "int32") -> str:
    """The canonical lambda string of an index map given as a string or a callable.

    A callable may take ``*args`` as TVM's ``IndexMap.from_func`` allows (``lambda *rest,
    k: (*rest, k // 4, k % 4)``): given the buffer's ``ndim``, the variadic part takes the
    dimensions the other parameters leave (named ``rest_0, rest_1, ...``), keyword-only
    parameters the last ones; it is called with index variables of ``dtype``. Names other
    than the parameters (the function's sizes) are kept: they are looked up when the map
    is applied."""
    if isinstance(index_map, str):
        if index_map.lstrip().startswith("{"):
            return map_text(*tvm_index_map_from_json(index_map))
        return map_text(*parse_index_map(index_map, free="any"))
    if callable(index_map):
        params, exprs = _call_index_map(index_map, ndim, "index map", dtype)
        for o in exprs:
            if not isinstance(o, E.PrimExpr):
                raise IndexMapError(f"the index map returned {o!r}, not an index expression")
        text = map_text(params, exprs)
        parse_index_map(text, free="any", dtype=dtype)  # only the allowed operators
        return text
    raise IndexMapError(f"index_map must be a lambda or a lambda string, got "
                        f"{type(index_map).__name__}; {_EXAMPLE}")


def call_index_map(fn: Any, ndim: int | None = None, dtype: str = "int32"
                   ) -> tuple[list, list]:
    """A Python index map called on fresh index variables of ``dtype``, as TVM's
    ``IndexMap.from_func``: (its variables, the expressions it returned); an
    :class:`IndexMapError` saying why when it cannot be read."""
    return _call_index_map(fn, ndim, "index map", dtype)


def _call_index_map(fn: Any, ndim: int | None, what: str, dtype: str = "int32"
                    ) -> tuple[list, list]:
    """Call a Python index map (or pad value) on fresh index variables, as TVM's
    ``IndexMap.from_func``: (its variables, what it returned as a list, ints made
    constants)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        raise IndexMapError(f"cannot read the parameters of this {what}; pass a lambda or a "
                            f"lambda string, {_EXAMPLE}") from None
    plain, var_arg, kw_only = [], None, []
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            plain.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            var_arg = p.name
        elif p.kind is p.KEYWORD_ONLY and p.default is p.empty:
            kw_only.append(p.name)
        else:
            raise IndexMapError(f"the {what} must take one plain parameter per dimension "
                                "(or *args for the dimensions the others leave)")
    n_var = 0
    if var_arg is not None:
        if ndim is None:
            raise IndexMapError(f"the {what} takes *{var_arg}: it needs the number of "
                                "dimensions, unknown here")
        n_var = ndim - len(plain) - len(kw_only)
        if n_var < 0:
            raise IndexMapError(f"the {what} takes {len(plain) + len(kw_only)} parameters "
                                f"but there are {ndim} dimensions")
    names = plain + [f"{var_arg}_{k}" for k in range(n_var)] + kw_only
    if not names:
        raise IndexMapError(f"the {what} must take one plain parameter per dimension")
    if len(set(names)) != len(names):
        raise IndexMapError(f"the {what}'s parameters must have different names")
    env = {n: E.Var(n, dtype) for n in names}
    args = [env[n] for n in plain] + [env[f"{var_arg}_{k}"] for k in range(n_var)]
    try:
        out = fn(*args, **{n: env[n] for n in kw_only})
    except TypeError as e:
        raise IndexMapError(f"calling the {what} failed: {e}") from None
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    exprs = [E.const(o, dtype) if is_int(o) else o for o in outs]
    return [env[n] for n in names], exprs


def function_sizes(func: Any) -> dict:
    """Name -> variable of the sizes an index map over ``func`` may use: the variables of
    its buffers' shapes and its scalar parameters (TVM's ``lambda i: (i // n, i % n)``)."""
    from .buffers import all_buffers
    out: dict = {}
    for p in func.params:
        if isinstance(p, E.Var):
            out.setdefault(p.name, p)
    for b in all_buffers(func):
        if not isinstance(b, Buffer):
            continue
        for d in b.shape:
            for v in collect(d, E.Var) if isinstance(d, E.PrimExpr) else ():
                out.setdefault(v.name, v)
    return out


# TVM's trace.as_json() stores the IndexMap attribute as a serialized object graph.
_TVM_BIN = {"tir.Add": E.Add, "tir.Sub": E.Sub, "tir.Mul": E.Mul, "tir.FloorDiv": E.FloorDiv,
            "tir.FloorMod": E.FloorMod}


def tvm_index_map_from_json(text: str) -> tuple[list, list]:
    """Read the IndexMap of a TVM trace (``tvm.ir.save_json`` of ``tir.IndexMap``).

    Two layouts of that object graph are understood: the classic one (``{"root": i,
    "nodes": [{"type_key": ..., "attrs": {field: "index or value"}}]}``) and tvm-ffi's
    (``{"root_index": i, "nodes": [{"type": ..., "data": {field: index}}]}``, where plain
    values such as ints and strings are nodes of their own)."""
    try:
        doc = json.loads(text)
        nodes = doc["nodes"]
        ffi = "root_index" in doc
        root = int(doc["root_index"] if ffi else doc.get("root", 1))
    except (ValueError, KeyError, TypeError):
        raise IndexMapError("the index map is neither a lambda string nor a TVM IndexMap "
                            "JSON object") from None
    memo: dict = {}

    def kind(node):
        return node.get("type_key") or node.get("type")

    def fields(node):
        a = node.get("attrs") if "attrs" in node else node.get("data")
        return a if isinstance(a, dict) else {}

    def plain(v):
        """A plain field value (an int or a string)."""
        if ffi:
            node = nodes[int(v)]
            return node.get("data")
        return v

    def get(i):
        i = int(i)
        if i in memo:
            return memo[i]
        node = nodes[i]
        key = kind(node)
        a = fields(node)
        if key == "tir.Var":
            out = E.Var(str(plain(a.get("name", a.get("name_hint"))) or f"i{i}"), "int32")
        elif key in ("IntImm", "ir.IntImm"):
            out = E.const(int(plain(a["value"])), "int32")
        elif key in ("FloatImm", "ir.FloatImm"):   # a pad value's constant
            out = E.FloatImm(str(plain(a.get("dtype")) or "float32"), float(plain(a["value"])))
        elif key in _TVM_BIN:
            out = _TVM_BIN[key](get(a["a"]), get(a["b"]))
        elif key in ("Array", "ffi.Array", "array"):
            data = node.get("data")
            if not isinstance(data, list):
                data = a.get("data", [])
            out = [get(x) for x in data]
        else:
            raise IndexMapError(f"unsupported node {key!r} in the TVM index map")
        memo[i] = out
        return out

    try:
        top = nodes[root]
        if kind(top) != "tir.IndexMap":
            raise IndexMapError("the JSON object is not a TVM IndexMap")
        a = fields(top)
        params = get(a["initial_indices"])
        exprs = get(a["final_indices"])
    except (KeyError, IndexError, TypeError, ValueError) as e:
        if isinstance(e, IndexMapError):
            raise
        raise IndexMapError(f"cannot read the TVM IndexMap JSON ({e})") from None
    if not all(isinstance(p, E.Var) for p in params):
        raise IndexMapError("the TVM IndexMap's initial indices are not variables")
    return params, exprs


# ---------------------------------------------------------------------------
# the rewrite
# ---------------------------------------------------------------------------
class _Remap(Mutator):
    """Rewrite every access to ``old`` through the index map, onto ``new``; the new
    indices are simplified under the ranges of the loops and block axes around them
    (``(vo * 16 + vi) // 16`` is ``vo`` where ``vi < 16``)."""

    def __init__(self, old: Buffer, new: Buffer, params: list, exprs: list):
        self.old, self.new, self.params, self.exprs = old, new, params, exprs
        self.ranges: dict = {}

    def map_point(self, indices) -> tuple:
        vmap = dict(zip(self.params, indices))
        # inside a sum, an axis or loop of extent 1 is its value (TVM's iterator
        # simplification: x * 32 * n + y * n + w is y * n + w for x of extent 1); an
        # index that is the axis itself stays
        unit = {v: E.const(lo, v.dtype) for v, (lo, hi) in self.ranges.items() if lo == hi}
        out = []
        for x in self.exprs:
            x = substitute(x, vmap)
            out.append(simplify(x if isinstance(x, E.Var) else substitute(x, unit),
                                self.ranges))
        return tuple(out)

    def _within(self, pairs, visit):
        saved = dict(self.ranges)
        for v, lo, ext in pairs:
            lo, ext = E.as_const_int(lo), E.as_const_int(ext)
            if lo is not None and ext is not None and ext > 0:
                self.ranges[v] = (lo, lo + ext - 1)
        try:
            return visit()
        finally:
            self.ranges = saved

    def visit_For(self, s):
        return self._within([(s.loop_var, s.min, s.extent)], lambda: self.generic_visit(s))

    def visit_Block(self, b):
        return self._within([(iv.var, iv.dom.min, iv.dom.extent) for iv in b.iter_vars],
                            lambda: self.generic_visit(b))

    def visit_buffer(self, buf):
        return self.new if buf is self.old else buf

    def visit_BufferLoad(self, e):
        idx = tuple(self.visit(i) for i in e.indices)
        if e.buffer is self.old:
            return E.BufferLoad(self.new, self.map_point(idx))
        return e if all(a is b for a, b in zip(idx, e.indices)) else E.BufferLoad(e.buffer, idx)

    def visit_BufferStore(self, s):
        if s.buffer is not self.old:
            return self.generic_visit(s)
        idx = tuple(self.visit(i) for i in s.indices)
        return BufferStore(self.new, self.visit(s.value), self.map_point(idx))

    def visit_BufferRegion(self, r):
        if r.buffer is not self.old:
            return r
        if all(E.is_const_int(rg.extent, 1) for rg in r.region):
            return BufferRegion(self.new, tuple(Range(x, E.const(1, x.dtype))
                                                for x in self.map_point([rg.min for rg in
                                                                         r.region])))
        # a box: relax the mapped indices over it (whole dimension when not bounded)
        tvars = [E.Var(f"t{d}", rg.min.dtype) for d, rg in enumerate(r.region)]
        rr, pts = {}, []
        for tv, rg in zip(tvars, r.region):
            ext = E.as_const_int(rg.extent)
            if ext is None:
                return BufferRegion.full(self.new)
            rr[tv] = (0, ext - 1)
            pts.append(rg.min + tv)
        out = []
        for d, x in enumerate(self.map_point(pts)):
            b = relax(x, rr)
            if b is None:
                out.append(Range(E.const(0, self.new.shape[d].dtype), self.new.shape[d]))
            else:
                out.append(Range(b[0], simplify(b[1] - b[0] + 1)))
        return BufferRegion(self.new, tuple(out))


def retype_map(params: list, exprs: list, dtype: str) -> tuple[list, list]:
    """The map with its variables and constants in the index dtype of the buffer or block
    it applies to (TVM's ``LegalizeIndexMapDType``: an int64 buffer gets int64 indices)."""
    if all(p.dtype == dtype for p in params):
        return params, exprs
    new = {p: E.Var(p.name, dtype) for p in params}

    def conv(e):
        if isinstance(e, E.Var):
            return new.get(e, e)
        if isinstance(e, E.IntImm):
            return E.const(e.value, dtype)
        if isinstance(e, E.BinaryOp):
            return type(e)(conv(e.a), conv(e.b))
        return e
    return [new[p] for p in params], [conv(x) for x in exprs]


def _dtype_name(v: Any) -> str:
    if isinstance(v, E.PrimExpr):
        return v.dtype
    return "float" if isinstance(v, float) else "int"


def _pad_number(ctx: Ctx, subj: str, buf: Buffer, value: Any, hl: list) -> E.PrimExpr:
    """The pad value's constant in ``buf``'s dtype; refused, as TVM, when its type is
    another (a Python int fills integer buffers, a float floating-point ones)."""
    kind = "float" if buf.dtype.startswith(("float", "bfloat")) else \
        "int" if buf.dtype.startswith(("int", "uint")) else None
    ok = (kind == "int" and isinstance(value, int) and not isinstance(value, bool)) or \
        (kind == "float" and isinstance(value, float))
    if not ok:
        want = "an integer such as 0" if kind == "int" else \
            "a float such as 0.0" if kind == "float" else f"an IR constant of type {buf.dtype}"
        raise ctx.error(subj, f"{buf.name} holds {buf.dtype} but pad_value {value!r} is "
                        f"{'a Python ' + _dtype_name(value)}: the padding must have the "
                        f"buffer's type", f"write {want}", highlight=hl)
    try:
        return E.const(value, buf.dtype)
    except (TypeError, ValueError, OverflowError):
        raise ctx.error(subj, f"pad_value {value!r} does not fit {buf.dtype}", "",
                        highlight=hl) from None


def _pad_function(ctx: Ctx, subj: str, buf: Buffer, raw: Any, ndim: int, dtype: str,
                  hl: list):
    """``build(indices) -> value`` of the pad value (a number or a lambda over the new
    indices, as TVM's ``pad_value`` IndexMap), or None when there is none."""
    try:
        raw = _pad_canonical(raw)
    except (IndexMapError, TraceError) as e:
        raise ctx.error(subj, f"pad_value: {e}", "", highlight=hl) from None
    if raw is None:
        return None
    if not isinstance(raw, str):
        c = _pad_number(ctx, subj, buf, raw, hl)
        return lambda _indices: c
    pparams, pexprs = parse_index_map(raw)
    if len(pexprs) != 1:
        raise ctx.error(subj, f"the pad_value lambda gives {len(pexprs)} values; it must give "
                        "one (the value of the padding at the new indices)", "",
                        highlight=hl)
    if len(pparams) != ndim:
        raise ctx.error(subj, f"the pad_value lambda takes {len(pparams)} index(es) but the "
                        f"new layout of {buf.name} has {ndim} dimension(s)", "",
                        highlight=hl)
    pparams, pexprs = retype_map(pparams, pexprs, dtype)
    if buf.dtype != dtype:
        raise ctx.error(subj, f"{buf.name} holds {buf.dtype} but the pad_value lambda gives "
                        f"{dtype} (index arithmetic): the padding must have the buffer's type",
                        "give a number of the buffer's type instead", highlight=hl)
    return lambda indices: simplify(substitute(pexprs[0], dict(zip(pparams, indices))))


def _past(old: E.PrimExpr, n: int, ranges: dict) -> E.PrimExpr:
    """``n <= old`` (the old index rebuilt from new ones lies in the padding), in TVM's
    simplified form when ``old`` is ``a * s + b`` with ``b`` over ``0 .. s - 1``:
    ``a == q and r <= b`` for the last row ``q`` of a partial split."""
    if isinstance(old, E.Add) and isinstance(old.a, E.Mul) and isinstance(old.b, E.Var) and \
            isinstance(old.a.a, E.Var) and isinstance(old.a.b, E.IntImm):
        a, s, b = old.a.a, old.a.b.value, old.b
        q, r = divmod(n, s)
        if s > 0 and ranges.get(b) == (0, s - 1) and ranges.get(a) == (0, q):
            if r == 0:
                return E.LE(E.const(q, a.dtype), a)
            return E.And(E.EQ(a, E.const(q, a.dtype)), E.LE(E.const(r, b.dtype), b))
    return E.LE(E.const(n, old.dtype), old)


def _relax_callers(mod: Any, name: str) -> list[str]:
    """Functions of the module that are not TensorIR (Relax ones, which call the TensorIR
    functions with arrays of their parameters' shapes)."""
    prim = set(mod.prim_func_names()) if hasattr(mod, "prim_func_names") else set()
    return [n for n in mod.names() if n not in prim and n != name]


@register
class TransformLayout(Primitive):
    kind = "TransformLayout"
    attr_kinds = (("buffer_index", "int"), ("buffer_index_type", "int"),
                  ("index_map", "str"), ("pad_value", "literal"),
                  ("assume_injective_transform", "bool"))
    required_attrs = 3
    method = "transform_layout"

    def call(self, sch, block, buffer, index_map, pad_value=None, *,
             assume_injective_transform=False):
        """Change the layout of a buffer: element ``X[i, j]`` moves to
        ``X[index_map(i, j)]``, the buffer takes the shape of the map's image, and every
        access to it in the function is rewritten — a parameter's too: the function then
        takes (and its caller passes) arrays of the new layout.

        ``buffer`` is ``("read", n)`` / ``("write", n)`` (the n-th buffer of the block's
        ``T.reads`` / ``T.writes``) or a buffer name; ``index_map`` is a lambda string such
        as ``"lambda i, j: (i // 16, j, i % 16)"`` (parsed, never evaluated) or a Python
        callable (``*args`` stands for the dimensions the other parameters leave).

        A map whose new shape has room the old elements do not fill — *padding*, as
        ``i -> (i // 4, i % 4)`` over 14 elements onto (4, 4) — needs ``pad_value``: a
        number of the buffer's type (``0`` for integers, ``0.0`` for floats) or a lambda
        over the new indices (``lambda i, j: i + j``, index arithmetic only, no buffer
        reads). Where a loop nest writes the whole buffer row-major (``for i: B[i] =
        ...``, a reduction's init and update too) and its iterations are independent, it
        is rewritten to traverse the new shape and store
        ``T.if_then_else(<padding>, pad_value, <value>)`` (TVM's replacement); otherwise
        a block after the buffer's last write fills the padding (TVM's ``T.where`` form,
        shown below). An input, which no block writes, gets TVM's first block
        ``buffer_<name>_assumption``: ``T.evaluate(T.assume(not <padding> or A[...] ==
        pad_value))`` over the new shape (its caller's promise; no code).
        ``assume_injective_transform=True`` is TVM's flag: no padding is filled, no
        pad_value needed, and the one-to-one check is skipped when it is over its budget
        (a map it finds not one-to-one is still refused).

        It requires: 1) the buffer is one the block reads or writes; 2) the map takes one
        parameter per dimension and uses only integers, its parameters, the function's
        sizes (``n`` of a symbolic shape, a scalar parameter) and ``+ - * // %``; 3) every
        new index is non-negative and the map is one-to-one (no two elements land on the
        same place) — for a buffer of symbolic shape, a split/fuse/permutation that tiles
        its axes exactly (``lambda i, j: (i * n + j,)``), so without padding; 4) padding
        has a pad_value (see above); 5) a parameter's
        function is not called by a Relax function of the module (it passes arrays of the
        old shape).

        Before::

            B_global = T.alloc_buffer((128, 128))
            ...
                    with T.block("B_global"):
                        ...
                        B_global[v0, v1] = B[v0, v1]
            ...
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B_global[vk, vj]

        Call::

            B_global = sch.cache_read(block_C, 1, "global")
            sch.transform_layout(B_global, ("write", 0), "lambda k, j: (j // 16, k, j % 16)")

        After::

            B_global = T.alloc_buffer((8, 128, 16))
            ...
                        B_global[v1 // 16, v0, v1 % 16] = B[v0, v1]
            ...
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B_global[vj // 16, vk, vj % 16]

        With padding, on an output parameter ``A`` of 14 elements (``A[vi] = ...``)
        by a block that also writes ``D`` (so its loop cannot run over the padding); a
        writer of ``A`` alone, ``for i in range(14): A[i] = f(i)``, instead becomes ``for
        i_0, i_1 in T.grid(4, 4): A[vi_0, vi_1] = T.if_then_else(vi_0 == 3 and 2 <= vi_1,
        0, f(vi_0 * 4 + vi_1))``::

            sch.transform_layout("block", "A", lambda i: (i // 4, i % 4), pad_value=0)

            def main(A: T.Buffer((4, 4), "int32")):
                for i in T.serial(14):
                    with T.block("block"):
                        vi = T.axis.remap("S", [i])
                        A[vi // 4, vi % 4] = ...
                        D[vi] = ...
                for ax0, ax1 in T.grid(4, 4):
                    with T.block("buffer_A_padding"):
                        v0, v1 = T.axis.remap("SS", [ax0, ax1])
                        T.where(ax0 == 3 and 2 <= ax1)
                        A[v0, v1] = 0
        """
        method = "transform_layout"
        btype, bindex = _buffer_arg(sch, block, buffer, method)
        buf = _buffer_of(sch, block, btype, bindex)
        ndim = buf.ndim if buf is not None else None
        dtype = buf.shape[0].dtype if buf is not None and buf.shape else "int32"
        try:
            text = normalize_index_map(_bind_sampled(index_map, sch), ndim, dtype)
        except IndexMapError as e:
            raise ScheduleError(method, "index_map", str(e), "") from None
        new_ndim = len(parse_index_map(text, free="any")[1])
        pad = _pad_arg(method, _bind_sampled(pad_value, sch), new_ndim, buf)
        if not isinstance(assume_injective_transform, bool):
            raise ScheduleError(method, "assume_injective_transform", "it must be True or "
                                "False", "")
        attrs = [bindex, btype, text, pad]
        if assume_injective_transform:
            attrs.append(True)
        sch._run(self, [block], attrs)

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0])
        bname = blk.name_hint
        subj, hl = f"block {bname}", [bname]
        if len(attrs) < 3:
            raise ctx.error(subj, "transform_layout needs the buffer index, its kind and the "
                            "index map", "")
        bindex, btype, text = attrs[0], attrs[1], attrs[2]
        raw_pad = attrs[3] if len(attrs) > 3 else None
        assume = bool(attrs[4]) if len(attrs) > 4 else False
        if btype not in (READ, WRITE) or isinstance(btype, bool):
            raise ctx.error(subj, f"the buffer kind must be 0 (read) or 1 (write), "
                            f"got {btype!r}", "")
        func = ctx.func
        buf = nth_buffer(ctx, blk, bindex, _NAMES[btype], "buffer")
        site = alloc_site(func, ctx.index, buf)
        is_param = site is None and any(p is buf for p in func.params)
        if site is None and not is_param:
            raise ctx.error(subj, f"{buf.name} is neither a parameter nor allocated by a "
                            "block of the function", "", highlight=hl)
        if is_param:
            callers = _relax_callers(ctx.mod, ctx.func_name)
            if callers:
                raise ctx.error(subj, f"{buf.name} is a parameter of {ctx.func_name}, which "
                                f"the module's Relax function {callers[0]} calls with "
                                "arrays of its present shape", "transform the layout of a "
                                f"cache_read copy of {buf.name} instead", highlight=hl)
        idx_dtype = buf.shape[0].dtype if buf.shape else "int32"
        try:
            if isinstance(text, str) and text.lstrip().startswith("{"):
                params, exprs = tvm_index_map_from_json(text)
            else:
                params, exprs = parse_index_map(text, free=function_sizes(func),
                                                dtype=idx_dtype)
        except IndexMapError as e:
            raise ctx.error(subj, str(e), "") from None
        if len(params) != buf.ndim:
            raise ctx.error(subj, f"the index map takes {len(params)} index(es) "
                            f"but {buf.name} has {buf.ndim} dimension(s)",
                            "give the lambda one parameter per dimension", highlight=hl)
        try:
            shape = buf.const_shape()
        except ValueError:
            return Result(_symbolic_transform(ctx, subj, hl, func, buf, params, exprs,
                                              idx_dtype), [])
        if 0 in shape:
            raise ctx.error(subj, f"{buf.name} is empty", "")
        params, exprs = retype_map(params, exprs, idx_dtype)
        pad_fn = _pad_function(ctx, subj, buf, raw_pad, len(exprs), idx_dtype, hl)
        ranges = {p: (0, s - 1) for p, s in zip(params, shape)}
        new_shape = []
        for d, x in enumerate(exprs):
            lo, hi = bound_of(x, ranges)
            if lo is None or hi is None:
                sizes = sorted({v.name for v in collect(x, E.Var)} - {p.name for p in params})
                why = (f": it depends on the size {', '.join(sizes)}, so the new shape and "
                       "its padding would too, which the engine does not describe" if sizes
                       else "")
                raise ctx.error(subj, f"cannot bound new index {d} "
                                f"({expr_text(x)}) of {buf.name}{why}",
                                "use constant factors" if sizes else "", highlight=hl)
            if lo < 0:
                raise ctx.error(subj, f"new index {d} ({expr_text(x)}) can be "
                                f"negative ({lo}) for {buf.name} of shape {shape}",
                                "the new indices must start at 0", highlight=hl)
            new_shape.append(hi + 1)
        try:
            ok = injective(params, exprs, shape, tuple(new_shape))
        except CheckBudgetError as e:
            if not assume:
                raise IndexMapBudgetError(self.method, subj, str(e), "",
                                          highlight=hl) from None
            ok = True       # TVM's flag: the caller vouches for the map
        except IndexMapError as e:
            raise ctx.error(subj, str(e), "") from None
        if not ok:
            raise ctx.error(subj, f"the index map sends two elements of "
                            f"{buf.name} to the same place", "use a one-to-one map, e.g. "
                            "split a dimension with // and % by the same factor"
                            + (" (assume_injective_transform does not make a map one-to-"
                               "one)" if assume else ""), highlight=hl)
        padded = math.prod(new_shape) > math.prod(shape) and not assume
        if padded and pad_fn is None:
            raise ctx.error(subj, f"the map {map_text(params, exprs)} gives {buf.name} of "
                            f"shape {shape} the shape {tuple(new_shape)}, with "
                            f"{math.prod(new_shape) - math.prod(shape)} element(s) of "
                            "padding no element fills: a transformation may introduce "
                            "padding only with a pad_value", "pass pad_value (a number of "
                            f"{buf.name}'s type), or a map whose factors divide the shape",
                            highlight=hl)
        new = Buffer(buf.name, tuple(E.const(n, idx_dtype) for n in new_shape), buf.dtype,
                     buf.scope, (), 0, buf.align)
        source, replaced = func, False
        if padded:
            source, replaced = _replace_writers(func, buf, new, params, exprs, shape,
                                                new_shape, pad_fn)
        body = _Remap(buf, new, params, exprs).visit(source.body)
        new_params = tuple(new if p is buf else p for p in func.params)
        out = func.replace(params=new_params, body=body)
        if padded and not replaced:
            out = _fill_padding(ctx, subj, hl, out, buf, new, params, exprs, shape,
                                new_shape, pad_fn)
        return Result(out, [])

    def check_attrs(self, attrs) -> None:
        """The declared kinds, an index map that parses (it is written again from the
        parsed map when the trace is exported) and a pad value that is a number, None or a
        lambda that parses."""
        super().check_attrs(attrs)
        _index_map_text(attrs[2])
        if len(attrs) > 3:
            _pad_text(attrs[3])

    def python_args(self, inputs, attrs, dialect):
        btype = self.attr(attrs, 1)
        if btype not in ("0", "1"):
            raise TraceError(f"TransformLayout's buffer_index_type must be 0 (read) or 1 "
                             f"(write), got {btype}")
        buf = f'("{_NAMES[int(btype)]}", {self.attr(attrs, 0)})'
        self.attr(attrs, 2)  # a string
        text = _index_map_text(attrs[2])
        raw_pad = _pad_canonical(attrs[3] if len(attrs) > 3 else None)
        pad = _pad_text(raw_pad)
        assume = len(attrs) > 4 and self.attr(attrs, 4) == "True"
        if dialect == "engine":
            args = [fmt(inputs[0]), buf, py_str(text)]
            if raw_pad is not None:
                args.append(f"pad_value={py_str(pad) if isinstance(raw_pad, str) else pad}")
        else:
            args = [f"block={fmt(inputs[0])}", f"buffer={buf}", f"index_map={text}"]
            if dialect == "tvm" or raw_pad is not None:
                args.append(f"pad_value={pad}")  # the 2022 API had no pad_value yet
        if assume:
            args.append("assume_injective_transform=True")
        return args


def _pad_canonical(raw: Any) -> Any:
    """A trace's pad value as None, a finite number or the canonical lambda string
    (``lambda i, j: i + j``, printed from the parsed lambda, never the trace's text); a TVM
    IndexMap JSON (TVM's trace form) becomes its constant or its lambda. TraceError for
    anything else."""
    what = "TransformLayout's pad_value"
    if raw is None or (isinstance(raw, (int, float)) and not isinstance(raw, bool)):
        py_literal(raw, what)          # finite
        return raw
    if not isinstance(raw, str):
        raise TraceError(f"{what} must be a number, None or a lambda")
    try:
        if raw.lstrip().startswith("{"):
            pparams, pexprs = tvm_index_map_from_json(raw)
            if len(pexprs) == 1 and isinstance(pexprs[0], (E.IntImm, E.FloatImm)):
                return pexprs[0].value
        else:
            pparams, pexprs = parse_index_map(raw)
        if len(pexprs) != 1:
            raise IndexMapError(f"the pad_value lambda gives {len(pexprs)} values; it must "
                                "give one")
        return f"lambda {', '.join(p.name for p in pparams)}: {expr_text(pexprs[0])}"
    except IndexMapError as e:
        raise TraceError(f"{what}: {e}") from None
    except RecursionError:
        raise TraceError(f"{what} is nested too deeply") from None


def _pad_text(raw: Any) -> str:
    """A trace's pad value written as Python (see :func:`_pad_canonical`)."""
    value = _pad_canonical(raw)
    return value if isinstance(value, str) else py_literal(value, "pad_value")


def _is_sampled(v: Any) -> bool:
    """A sampled value of a schedule (an ExprRV, told by its kind: the state module imports
    the primitives, not the reverse)."""
    return type(v).__name__ == "ExprRV" and getattr(v, "kind", None) == "expr"


def _bind_sampled(fn: Any, sch: Any) -> Any:
    """``fn`` (a Python index map) with every sampled value it reads — from its closure or
    its module's globals, as TVM's ``lambda i, j: (i, j // (j1 * j2), j % (j1 * j2))`` —
    replaced by the value the schedule sampled, in a copy of the function (``fn`` itself
    is left alone). The map recorded in the trace holds those numbers: a replay with other
    decisions keeps them (TVM records the sampled variables themselves)."""
    if not isinstance(fn, types.FunctionType):
        return fn
    cells, changed = [], False
    for c in fn.__closure__ or ():
        try:
            v = c.cell_contents
        except ValueError:       # a cell not filled yet
            cells.append(c)
            continue
        if _is_sampled(v):
            cells.append(types.CellType(sch.get(v)))
            changed = True
        else:
            cells.append(c)
    names = {n: fn.__globals__[n] for n in fn.__code__.co_names
             if _is_sampled(fn.__globals__.get(n))}
    glob = fn.__globals__
    if names:
        glob = {**glob, **{n: sch.get(v) for n, v in names.items()}}
        changed = True
    if not changed:
        return fn
    out = types.FunctionType(fn.__code__, glob, fn.__name__, fn.__defaults__, tuple(cells))
    out.__kwdefaults__ = fn.__kwdefaults__
    return out


def _buffer_of(sch, block, btype: int, bindex: int) -> Buffer | None:
    """The buffer ``(btype, bindex)`` of ``block`` (None when it cannot be found here: the
    primitive's own checks say why)."""
    try:
        blk = sch._lookup(block, "transform_layout")[1]
    except ScheduleError:
        return None
    regions = getattr(blk, "writes" if btype == WRITE else "reads", ())
    return regions[bindex].buffer if 0 <= bindex < len(regions) else None


def _pad_arg(method: str, pad_value: Any, ndim: int, buf: Buffer | None) -> Any:
    """A pad value in its trace form: None, a finite number, or a lambda string over the
    new indices. Constants of IR type must have the buffer's dtype (TVM's check); a
    callable is called on the new indices; a value reading a buffer is refused (TVM: the
    pad value may not read another buffer)."""
    def refuse(rule: str, hint: str = "e.g. pad_value=0.0 or lambda i, j: i + j"):
        return ScheduleError(method, "pad_value", rule, hint)
    value = pad_value
    params: list = []
    if callable(value) and not isinstance(value, E.PrimExpr):
        try:
            params, outs = _call_index_map(value, ndim, "pad_value lambda")
        except IndexMapError as e:
            raise refuse(str(e)) from None
        if len(outs) != 1:
            raise refuse(f"the pad_value lambda gives {len(outs)} values; it must give one")
        value = outs[0]
    if isinstance(value, E.PrimExpr):
        loads = collect(value, E.BufferLoad)
        if loads:
            other = loads[0].buffer.name
            which = "the buffer it pads" if buf is not None and loads[0].buffer is buf \
                else f"another buffer, {other}"
            raise refuse(f"the pad value reads {which} ({other}[...]); a pad value may "
                         "use only the new indices and constants", "")
        if isinstance(value, (E.IntImm, E.FloatImm)):
            if buf is not None and value.dtype != buf.dtype:
                raise refuse(f"pad_value {value.value!r} is {value.dtype} but "
                             f"{buf.name} holds {buf.dtype}: the padding must have the "
                             "buffer's type", f"write a {buf.dtype} value")
            value = float(value.value) if isinstance(value, E.FloatImm) else int(value.value)
        elif params:
            try:
                text = f"lambda {', '.join(p.name for p in params)}: {expr_text(value)}"
                return _pad_canonical(text)
            except (IndexMapError, TraceError) as e:
                raise refuse(str(e).replace("TransformLayout's pad_value: ", "")) from None
        else:
            raise refuse("pad_value must be a number, None or a lambda over the new indices")
    if isinstance(value, str):
        if not value.lstrip().startswith("lambda"):
            raise refuse(f"pad_value must be a number, None or a lambda over the new indices, "
                         f"got the string {value[:40]!r}")
        try:
            return _pad_canonical(value)
        except TraceError as e:
            raise refuse(str(e).replace("TransformLayout's pad_value: ", "")) from None
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise refuse("pad_value must be a number, None or a lambda over the new indices")
    if isinstance(value, float) and not math.isfinite(value):
        raise refuse(f"pad_value must be finite, got {value!r}")
    return value


def _symbolic_transform(ctx: Ctx, subj: str, hl: list, func: Any, buf: Buffer, params: list,
                        exprs: list, dtype: str) -> Any:
    """transform_layout of a buffer of a symbolic shape (``(1, 32, 1, n)``): the map must be
    a bijection onto a box — splits, fuses and permutations whose digits tile each axis
    exactly (``x * 32 * n + y * n + z * n + w``) — which proves it one-to-one and without
    padding; the new shape is that box (``(n * 32,)``)."""
    params, exprs = retype_map(params, exprs, dtype)
    extents = [E.as_const_int(d) if E.as_const_int(d) is not None else d for d in buf.shape]
    try:
        new_shape, _build = invert(params, exprs, extents)
    except IndexMapError as e:
        raise ctx.error(subj, f"{buf.name} has a symbolic shape {tuple(buf.shape)}: the map "
                        f"must be a split, fuse or permutation of its axes that covers the "
                        f"new shape exactly (so it is one-to-one and pads nothing for every "
                        f"size), and {e}", "use a map such as lambda i, j: (i * n + j,)",
                        highlight=hl) from None
    new = Buffer(buf.name, tuple(E.const(n, dtype) if isinstance(n, int) else n
                                 for n in new_shape), buf.dtype, buf.scope, (), 0, buf.align)
    body = _Remap(buf, new, params, exprs).visit(func.body)
    new_params = tuple(new if p is buf else p for p in func.params)
    return func.replace(params=new_params, body=body)


def _padding_condition(params: list, exprs: list, shape: tuple, new_shape: list,
                       new_vars: list) -> tuple[E.PrimExpr, list]:
    """(the condition that the new index ``new_vars`` is padding, the old indices rebuilt
    from it); IndexMapError when the map's padding cannot be described."""
    build, below, past = invert_padded_with_offsets(params, exprs, list(shape),
                                                    list(new_shape))
    ranges = {v: (0, n - 1) for v, n in zip(new_vars, new_shape)}
    olds = build(new_vars)
    conds = []
    for o, n, lo, hi in zip(olds, shape, below, past):
        if lo:
            conds.append(E.LT(o, E.const(0, o.dtype)))
        if hi:
            conds.append(_past(o, n, ranges))
    pred = conds[0]
    for c in conds[1:]:
        pred = E.Or(pred, c)
    return pred, olds


def _replace_writers(func: Any, old: Buffer, new: Buffer, params: list, exprs: list,
                     shape: tuple, new_shape: list, pad_fn: Any) -> tuple[Any, bool]:
    """TVM's ReplacementPlan: each loop nest that writes ``old`` in a row-major traversal
    of its whole shape — loops ``i0 .. i(n-1)`` (from 0 over each dimension, serial, each
    the only child of the one above) and a store ``old[i0, .., i(n-1)]`` (directly, or
    through the spatial axes of the block holding the store, bound to the loops in order)
    — is rewritten to traverse the new shape, its stores becoming
    ``new[...] = T.if_then_else(<padding>, <pad value>, <value>)``: the padding is filled
    where the buffer is written, and no block is added.

    A nest qualifies only when its iterations are independent and the padding iterations
    do nothing but store the pad value: every store in it is that store (same indices),
    every load of ``old`` in it reads that element, no other load lies outside the stored
    values (the padding iterations' out-of-range indices are read only in the branch
    ``T.if_then_else`` does not take), no block in it has a ``T.where`` and no block but
    the store's binds the loops. Returns (the function, whether a nest was rewritten)."""
    index = FuncIndex(func)
    ndim = len(shape)
    dtype = new.shape[0].dtype
    stores = [s for s in iter_stmts(func.body) if isinstance(s, BufferStore) and s.buffer is old]
    replacements: dict = {}
    for st in stores:
        plan = _row_major_nest(index, st, old, shape)
        if plan is None:
            continue
        nest, blk_realize, positions = plan
        if any(index.contains(r, nest[0]) or index.contains(nest[0], r)
               for r in replacements):
            continue
        body = nest[-1].body
        if not _replaceable_body(body, st, old, blk_realize, nest):
            continue
        base = nest[0].loop_var.name if ndim == 1 else "ax"
        loops = [E.Var(f"{base}_{k}" if ndim == 1 else f"ax{k}", dtype)
                 for k in range(len(new_shape))]
        try:
            pred_l, olds_l = _padding_condition(params, exprs, shape, new_shape, loops)
        except IndexMapError:
            return func, False
        if blk_realize is not None:
            blk = blk_realize.block
            ivs = [E.Var(f"v{lv.name}" if ndim == 1 else f"v{k}", dtype)
                   for k, lv in enumerate(loops)]
            pred_v, olds_v = _padding_condition(params, exprs, shape, new_shape, ivs)
            first = positions[0]
            new_ivs = (blk.iter_vars[:first] + tuple(
                IterVar(v, Range(E.const(0, dtype), E.const(n, dtype)), IterType.SPATIAL)
                for v, n in zip(ivs, new_shape)) + blk.iter_vars[first + ndim:])
            values = (blk_realize.iter_values[:first] + tuple(loops) +
                      blk_realize.iter_values[first + ndim:])
            vmap = {blk.iter_vars[p].var: o for p, o in zip(positions, olds_v)}
            put = _PadStores(old, new, tuple(ivs), pred_v, pad_fn)
            new_blk = blk.replace(
                iter_vars=new_ivs, body=put.visit(substitute(blk.body, vmap)),
                init=None if blk.init is None else put.visit(substitute(blk.init, vmap)),
                reads=substitute(blk.reads, vmap),
                writes=tuple(BufferRegion(new, tuple(Range(v, E.const(1, dtype)) for v in ivs))
                             if r.buffer is old else substitute(r, vmap) for r in blk.writes))
            body = _swap(body, blk_realize, BlockRealize(values, blk_realize.predicate,
                                                         new_blk))
        else:
            body = _PadStores(old, new, tuple(loops), pred_l, pad_fn).visit(body)
        body = substitute(body, {lp.loop_var: o for lp, o in zip(nest, olds_l)})
        for lv, n in reversed(list(zip(loops, new_shape))):
            body = For(lv, E.const(0, dtype), E.const(n, dtype), ForKind.SERIAL, body)
        replacements[nest[0]] = body
    if not replacements:
        return func, False
    return replace_stmts(func, replacements), True


def _row_major_nest(index: FuncIndex, st: BufferStore, old: Buffer, shape: tuple):
    """(the loops ``i0 .. i(n-1)`` the store's indices are, the realize of the block whose
    axes the indices are — None when they are the loops themselves —, those axes'
    positions), or None when the store is no row-major traversal of the whole buffer."""
    anc = index.ancestors(st)[::-1]          # outermost first
    loops = [a for a in anc if isinstance(a, For)]
    realizes = [a for a in anc if isinstance(a, BlockRealize)]
    inner = realizes[-1] if realizes else None
    positions: list = []
    loop_of = []
    for i in st.indices:
        if not isinstance(i, E.Var):
            return None
        lp = index.loops.get(i)
        if lp is not None and any(x is lp for x in loops):
            loop_of.append(lp)
            continue
        if inner is None:
            return None
        pos = next((k for k, iv in enumerate(inner.block.iter_vars) if iv.var is i), None)
        if pos is None:
            return None
        iv, val = inner.block.iter_vars[pos], inner.iter_values[pos]
        lp = index.loops.get(val) if isinstance(val, E.Var) else None
        if iv.iter_type is not IterType.SPATIAL or lp is None or \
                not any(x is lp for x in loops):
            return None
        positions.append(pos)
        loop_of.append(lp)
    if positions and (len(positions) != len(st.indices) or
                      positions != list(range(positions[0], positions[0] + len(positions)))):
        return None
    if not loop_of or len(loop_of) != len(shape):
        return None
    start = next(k for k, lp in enumerate(loops) if lp is loop_of[0])
    if [id(lp) for lp in loops[start:start + len(shape)]] != [id(lp) for lp in loop_of]:
        return None
    for k, (lp, n) in enumerate(zip(loop_of, shape)):
        if not (E.is_const_int(lp.min, 0) and E.as_const_int(lp.extent) == n and
                lp.kind is ForKind.SERIAL and not lp.annotations):
            return None
        if k + 1 < len(loop_of) and lp.body is not loop_of[k + 1]:
            return None
        if positions:
            iv = inner.block.iter_vars[positions[k]]
            if not (E.is_const_int(iv.dom.min, 0) and E.as_const_int(iv.dom.extent) == n):
                return None
    return loop_of, (inner if positions else None), positions


def _replaceable_body(body: Any, st: BufferStore, old: Buffer, blk_realize: Any,
                      nest: list) -> bool:
    """Is the body of a row-major writer nest one whose iterations are independent and
    do nothing at the padding but store there (see :func:`_replace_writers`)?"""
    nest_vars = {lp.loop_var for lp in nest}
    same = lambda idx: len(idx) == len(st.indices) and all(  # noqa: E731
        a is b for a, b in zip(idx, st.indices))
    values: list = []
    for s in iter_stmts(body):
        if isinstance(s, BufferStore):
            if s.buffer is not old or not same(s.indices):
                return False
            values.append(s.value)
        elif isinstance(s, BlockRealize):
            if not (isinstance(s.predicate, E.IntImm) and s.predicate.value == 1):
                return False
            bound = s.iter_values
            if s is blk_realize:     # its axes of the store's indices are replaced
                bound = tuple(v for v, iv in zip(bound, s.block.iter_vars)
                              if not any(iv.var is i for i in st.indices))
            if any(x in nest_vars for v in bound for x in collect(v, E.Var)):
                return False
    if blk_realize is not None and not any(s is blk_realize for s in iter_stmts(body)):
        return False
    inside = [ld for v in values for ld in collect(v, E.BufferLoad)]
    if any(ld.buffer is old and not same(ld.indices) for ld in inside):
        return False
    everywhere = _loads_outside_blocks_regions(body)
    return len(everywhere) == len(inside)


def _loads_outside_blocks_regions(body: Any) -> list:
    """Every load in ``body`` (block read/write regions, which are no accesses, left out)."""
    out: list = []

    class _Walk(Mutator):
        def visit_BufferLoad(self, e):
            out.append(e)
            for i in e.indices:
                self.visit(i)
            return e

        def visit_BufferRegion(self, r):
            return r
    _Walk().visit(body)
    return out


class _PadStores(Mutator):
    """Stores to ``old`` become ``new[idx] = T.if_then_else(pred, pad, value)``."""

    def __init__(self, old: Buffer, new: Buffer, idx: tuple, pred: E.PrimExpr, pad_fn: Any):
        self.old, self.new, self.idx, self.pred = old, new, idx, pred
        self.pad = pad_fn(list(idx))

    def visit_BufferStore(self, s):
        if s.buffer is not self.old:
            return self.generic_visit(s)
        value = self.visit(s.value)
        return BufferStore(self.new, E.Call(value.dtype, "if_then_else",
                                            (self.pred, self.pad, value)), self.idx)


def _swap(body: Any, old: Any, new: Any) -> Any:
    """``body`` with the statement ``old`` (by identity) replaced by ``new``."""
    from ..tree import map_children
    if body is old:
        return new
    return map_children(body, lambda c: _swap(c, old, new))


def _assume_padding(ctx: Ctx, subj: str, hl: list, func: Any, new: Buffer, params: list,
                    exprs: list, shape: tuple, new_shape: list, pad_fn: Any) -> Any:
    """An input padded: nothing of the function writes it, so its caller promises what
    the padding holds — TVM's first block ``buffer_<name>_assumption`` stating
    ``T.assume(not <padding> or A[...] == pad_value)`` over the new shape. A fact, no code:
    the function reads only the elements the old layout had."""
    dtype = new.shape[0].dtype
    loops = [E.Var(f"ax{d}", dtype) for d in range(len(new_shape))]
    axes = [E.Var(f"v{d}", dtype) for d in range(len(new_shape))]
    try:
        pred, _olds = _padding_condition(params, exprs, shape, new_shape, axes)
    except IndexMapError as e:
        raise ctx.error(subj, f"the padding of {new.name} cannot be described by a split, "
                        f"fuse or permutation of its axes ({e})", "use a map such as "
                        "lambda i: (i // 4, i % 4)", highlight=hl) from None
    point = tuple(axes)
    holds = E.binary(E.EQ, E.BufferLoad(new, point), pad_fn(list(axes)))
    fact = E.Call("bool", "assume", (E.binary(E.Or, E.Not(pred), holds),))
    ivs = tuple(IterVar(v, Range(E.const(0, dtype), E.const(n, dtype)), IterType.SPATIAL)
                for v, n in zip(axes, new_shape))
    index = FuncIndex(func)
    name = fresh_name(f"buffer_{new.name}_assumption", set(index.blocks))
    block = Block(ivs, (BufferRegion(new, tuple(Range(a, E.const(1, dtype)) for a in axes)),),
                  (), name, Evaluate(fact))
    nest: Any = BlockRealize(tuple(loops), E.const(True, "bool"), block)
    for lv, n in reversed(list(zip(loops, new_shape))):
        nest = For(lv, E.const(0, dtype), E.const(n, dtype), ForKind.SERIAL, nest)
    root = index.root_block
    return replace_stmts(func, {root: root.replace(body=seq(nest, root.body))})


def _fill_padding(ctx: Ctx, subj: str, hl: list, func: Any, old: Buffer, new: Buffer,
                  params: list, exprs: list, shape: tuple, new_shape: list,
                  pad_fn: Any) -> Any:
    """``func`` with a block after the last write of ``new`` that stores the pad value in
    its padding (TVM's epilogue: a loop nest over the new shape, ``T.where`` on the
    padding). Refused for a buffer nothing writes (an input: TVM's ``T.assume``) and for a
    map whose padding cannot be described."""
    stores = [s for s in iter_stmts(func.body) if isinstance(s, BufferStore) and
              s.buffer is new]
    if not stores and any(p is new for p in func.params):
        return _assume_padding(ctx, subj, hl, func, new, params, exprs, shape, new_shape,
                               pad_fn)
    if not stores:
        raise ctx.error(subj, f"no block writes {new.name}, so nothing would fill its "
                        "padding", "transform a buffer after the block that writes it",
                        highlight=hl)
    dtype = new.shape[0].dtype
    loops = [E.Var(f"ax{d}", dtype) for d in range(len(new_shape))]
    try:
        pred, _olds = _padding_condition(params, exprs, shape, new_shape, loops)
    except IndexMapError as e:
        raise ctx.error(subj, f"the padding of {new.name} cannot be described by a split, "
                        f"fuse or permutation of its axes ({e})", "use a map such as "
                        "lambda i: (i // 4, i % 4)", highlight=hl) from None
    index = FuncIndex(func)
    last = max(stores, key=lambda s: index.order[id(s)])
    scope = index.root_block
    for b in index.ancestors(last):
        if isinstance(b, Block) and any(a is new for a in b.alloc_buffers):
            scope = b
            break
    children = flatten_seq(scope.body)
    at = next(k for k, c in enumerate(children) if index.contains(c, last))
    axes = [E.Var(f"v{d}", dtype) for d in range(len(new_shape))]
    used = set(ctx.index.blocks)
    name = fresh_name(f"buffer_{new.name}_padding", used)
    ivs = tuple(IterVar(v, Range(E.const(0, dtype), E.const(n, dtype)), IterType.SPATIAL)
                for v, n in zip(axes, new_shape))
    point = tuple(axes)
    store = BufferStore(new, pad_fn(list(axes)), point)
    block = Block(ivs, (), (BufferRegion(new, tuple(Range(a, E.const(1, dtype))
                                                    for a in axes)),), name, store)
    nest: Any = BlockRealize(tuple(loops), pred, block)
    for lv, n in reversed(list(zip(loops, new_shape))):
        nest = For(lv, E.const(0, dtype), E.const(n, dtype), ForKind.SERIAL, nest)
    new_body = seq(*children[:at + 1], nest, *children[at + 1:])
    return replace_stmts(func, {scope: scope.replace(body=new_body)})


def _index_map_text(text: str) -> str:
    """The canonical lambda of a trace's index map (a lambda string or TVM's IndexMap JSON),
    printed from the map parsed back from that lambda (never the trace's own text: a TVM
    variable's name must be an identifier to parse); TraceError when it does not parse."""
    try:
        return map_text(*parse_index_map(normalize_index_map(text), free="any"))
    except IndexMapError as e:
        raise TraceError(f"TransformLayout's index_map: {e}") from None
    except RecursionError:
        raise TraceError("TransformLayout's index_map is nested too deeply") from None


def _buffer_arg(sch, block, buffer, method: str) -> tuple[int, int]:
    """(buffer_index_type, buffer_index) from ``("read"|"write", n)``, a name or a Buffer."""
    if isinstance(buffer, (tuple, list)):
        if len(buffer) != 2 or buffer[0] not in _TYPES or not is_int(buffer[1]):
            raise ScheduleError(method, repr(buffer), "buffer must be (\"read\", n), "
                                "(\"write\", n) or a buffer name", "e.g. (\"write\", 0)")
        return _TYPES[buffer[0]], buffer[1]
    if not isinstance(buffer, (str, Buffer)):
        raise ScheduleError(method, repr(buffer), "buffer must be (\"read\", n), (\"write\", n) "
                            "or a buffer name", "e.g. (\"write\", 0)")
    blk = sch._lookup(block, method)[1]
    for btype, regions in ((WRITE, getattr(blk, "writes", ())), (READ, getattr(blk, "reads", ()))):
        for i, r in enumerate(regions):
            if r.buffer is buffer or (isinstance(buffer, str) and r.buffer.name == buffer):
                return btype, i
    name = buffer if isinstance(buffer, str) else buffer.name
    have = ", ".join(dict.fromkeys(r.buffer.name for r in (*getattr(blk, "reads", ()),
                                                           *getattr(blk, "writes", ()))))
    raise ScheduleError(method, f"block {getattr(blk, 'name_hint', '?')}", f"the block does "
                        f"not access a buffer named {name!r} (it accesses: {have or 'none'})",
                        "", highlight=[getattr(blk, "name_hint", "")])

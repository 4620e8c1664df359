"""transform_layout: give an intermediate buffer a new shape through an index map.

The index map is TVM's: a function from the old indices to the new ones, written as a
lambda string (``"lambda i, j: (i // 16, j, i % 16)"``, parsed with Python's ``ast`` only —
never evaluated) or as a Python callable that is called with index variables. The buffer
gets the shape the map's image needs, and every access to it in the function (loads,
stores, block read/write regions) is rewritten through the map.

Only buffers the function allocates can be transformed: a parameter's layout is fixed by
the numpy array the caller passes. To change the layout of an input, ``cache_read`` it and
transform the cache (the usual packing of ``B`` in a fast matmul).
"""
from __future__ import annotations

import ast
import inspect
import json
from typing import Any

from engine.arith import bound_of, relax, simplify
from engine.ir import expr as E
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.functor import Mutator, substitute
from engine.ir.stmt import BufferStore

from ..error import ScheduleError, TraceError
from ..literals import py_str
from ..registry import Ctx, Primitive, Result, fmt, register
from ._common import expect_block, is_int
from .buffers import alloc_site, nth_buffer
from .index_map_check import (MAX_CHECK, CheckBudget, CheckBudgetError,  # noqa: F401
                              IndexMapError, _injective, _injective_enum, _np_eval,
                              check_budget, injective)

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


def parse_index_map(text: str) -> tuple[list[E.Var], list[E.PrimExpr]]:
    """``"lambda i, j: (j, i)"`` -> ([Var i, Var j], [j, i]). Only integer constants, the
    lambda's parameters, ``+ - * // %``, unary minus and parentheses are allowed."""
    if not isinstance(text, str):
        raise IndexMapError(f"an index map must be a lambda string, got {type(text).__name__}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
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
    params = [E.Var(n, "int32") for n in names]
    env = dict(zip(names, params))
    body = lam.body
    items = body.elts if isinstance(body, (ast.Tuple, ast.List)) else [body]
    if not items:
        raise IndexMapError("the index map must produce at least one index")
    return params, [_to_expr(x, env) for x in items]


def _to_expr(n: ast.AST, env: dict) -> E.PrimExpr:
    if isinstance(n, ast.Name):
        if n.id not in env:
            raise IndexMapError(f"unknown name {n.id!r} in the index map (only the lambda's "
                                f"parameters {', '.join(env)} may be used)")
        return env[n.id]
    if isinstance(n, ast.Constant) and isinstance(n.value, int) and \
            not isinstance(n.value, bool):
        return E.const(n.value, "int32")
    if isinstance(n, ast.BinOp) and type(n.op) in _BINOPS:
        a, b = _to_expr(n.left, env), _to_expr(n.right, env)
        if isinstance(n.op, (ast.FloorDiv, ast.Mod)) and E.is_const_int(b, 0):
            raise IndexMapError("the index map divides by zero")
        return _BINOPS[type(n.op)](a, b)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
        v = _to_expr(n.operand, env)
        if isinstance(v, E.IntImm):
            return E.const(-v.value, "int32")
        return E.Sub(E.const(0, "int32"), v)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.UAdd):
        return _to_expr(n.operand, env)
    what = type(n).__name__
    if isinstance(n, ast.BinOp):
        what = f"the operator {type(n.op).__name__}"
    raise IndexMapError(f"{what} is not allowed in an index map (use integers, the "
                        "parameters and + - * // %)")


_PREC = {E.Add: 1, E.Sub: 1, E.Mul: 2, E.FloorDiv: 2, E.FloorMod: 2}
_SYM = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%"}


def expr_text(e: E.PrimExpr) -> str:
    """Python text of an index expression (the inverse of :func:`parse_index_map`)."""
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.IntImm):
        return str(e.value)
    t = type(e)
    if t in _PREC:
        p = _PREC[t]
        left = expr_text(e.a)
        if type(e.a) in _PREC and _PREC[type(e.a)] < p:
            left = f"({left})"
        right = expr_text(e.b)
        if type(e.b) in _PREC and _PREC[type(e.b)] <= p or \
                (isinstance(e.b, E.IntImm) and e.b.value < 0):
            right = f"({right})"
        return f"{left} {_SYM[t]} {right}"
    raise IndexMapError(f"{type(e).__name__} is not allowed in an index map (use integers, "
                        "the parameters and + - * // %)")


def map_text(params: list, exprs: list) -> str:
    names = ", ".join(p.name for p in params)
    outs = ", ".join(expr_text(x) for x in exprs)
    if len(exprs) == 1:
        outs += ","
    return f"lambda {names}: ({outs})"


def normalize_index_map(index_map: Any) -> str:
    """The canonical lambda string of an index map given as a string or a callable."""
    if isinstance(index_map, str):
        if index_map.lstrip().startswith("{"):
            return map_text(*tvm_index_map_from_json(index_map))
        return map_text(*parse_index_map(index_map))
    if callable(index_map):
        try:
            sig = inspect.signature(index_map)
        except (TypeError, ValueError):
            raise IndexMapError("cannot read the parameters of this index map; pass a "
                                f"lambda or a lambda string, {_EXAMPLE}") from None
        names = [p.name for p in sig.parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(names) != len(sig.parameters) or not names:
            raise IndexMapError("the index map must take one plain parameter per dimension")
        params = [E.Var(n, "int32") for n in names]
        try:
            out = index_map(*params)
        except TypeError as e:
            raise IndexMapError(f"calling the index map failed: {e}") from None
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        exprs = []
        for o in outs:
            if is_int(o):
                o = E.const(o, "int32")
            if not isinstance(o, E.PrimExpr):
                raise IndexMapError(f"the index map returned {o!r}, not an index expression")
            exprs.append(o)
        text = map_text(params, exprs)
        parse_index_map(text)  # only the allowed operators
        return text
    raise IndexMapError(f"index_map must be a lambda or a lambda string, got "
                        f"{type(index_map).__name__}; {_EXAMPLE}")


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
    """Rewrite every access to ``old`` through the index map, onto ``new``."""

    def __init__(self, old: Buffer, new: Buffer, params: list, exprs: list):
        self.old, self.new, self.params, self.exprs = old, new, params, exprs

    def map_point(self, indices) -> tuple:
        vmap = dict(zip(self.params, indices))
        return tuple(simplify(substitute(x, vmap)) for x in self.exprs)

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
            return BufferRegion(self.new, tuple(Range(x, 1)
                                                for x in self.map_point([rg.min for rg in
                                                                         r.region])))
        # a box: relax the mapped indices over it (whole dimension when not bounded)
        tvars = [E.Var(f"t{d}", "int32") for d in range(len(r.region))]
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
                out.append(Range(0, self.new.shape[d]))
            else:
                out.append(Range(b[0], simplify(b[1] - b[0] + 1)))
        return BufferRegion(self.new, tuple(out))


@register
class TransformLayout(Primitive):
    kind = "TransformLayout"
    attr_kinds = (("buffer_index", "int"), ("buffer_index_type", "int"),
                  ("index_map", "str"), ("pad_value", "number?"),
                  ("assume_injective_transform", "bool"))
    required_attrs = 3
    method = "transform_layout"

    def call(self, sch, block, buffer, index_map, pad_value=None):
        """Change the layout of a buffer: element ``X[i, j]`` moves to
        ``X[index_map(i, j)]``, the buffer takes the shape of the map's image, and every
        access to it in the function is rewritten.

        ``buffer`` is ``("read", n)`` / ``("write", n)`` (the n-th buffer of the block's
        ``T.reads`` / ``T.writes``) or a buffer name; ``index_map`` is a lambda string such
        as ``"lambda i, j: (i // 16, j, i % 16)"`` (parsed, never evaluated) or a Python
        callable. ``pad_value`` (a number) is recorded for TVM; padding elements are never
        read here, so no block writes them.

        It requires: 1) the buffer is one the block reads or writes; 2) it is allocated by
        the function, not a parameter (cache_read an input first, then transform the
        cache); 3) the map takes one parameter per dimension and uses only integers,
        its parameters and ``+ - * // %``; 4) every new index is non-negative and the map is
        one-to-one (no two elements land on the same place).

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
        """
        method = "transform_layout"
        btype, bindex = _buffer_arg(sch, block, buffer, method)
        try:
            text = normalize_index_map(index_map)
        except IndexMapError as e:
            raise ScheduleError(method, "index_map", str(e), "") from None
        if pad_value is not None and (isinstance(pad_value, bool) or
                                      not isinstance(pad_value, (int, float))):
            raise ScheduleError(method, "pad_value", "pad_value must be a number or None",
                                "e.g. pad_value=0.0")
        sch._run(self, [block], [bindex, btype, text, pad_value])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        blk = expect_block(ctx, inputs[0])
        bname = blk.name_hint
        if len(attrs) < 3:
            raise ctx.error(f"block {bname}", "transform_layout needs the buffer index, its "
                            "kind and the index map", "")
        bindex, btype, text = attrs[0], attrs[1], attrs[2]
        if btype not in (READ, WRITE) or isinstance(btype, bool):
            raise ctx.error(f"block {bname}", f"the buffer kind must be 0 (read) or 1 (write), "
                            f"got {btype!r}", "")
        buf = nth_buffer(ctx, blk, bindex, _NAMES[btype], "buffer")
        if alloc_site(ctx.func, ctx.index, buf) is None:
            raise ctx.error(f"block {bname}", f"{buf.name} is a parameter of the function, and "
                            "its layout is fixed by the array the caller passes",
                            f"first cache_read {buf.name}, then transform the cache's layout",
                            highlight=[bname])
        try:
            if isinstance(text, str) and text.lstrip().startswith("{"):
                params, exprs = tvm_index_map_from_json(text)
            else:
                params, exprs = parse_index_map(text)
        except IndexMapError as e:
            raise ctx.error(f"block {bname}", str(e), "") from None
        if len(params) != buf.ndim:
            raise ctx.error(f"block {bname}", f"the index map takes {len(params)} index(es) "
                            f"but {buf.name} has {buf.ndim} dimension(s)",
                            "give the lambda one parameter per dimension", highlight=[bname])
        try:
            shape = buf.const_shape()
        except ValueError:
            raise ctx.error(f"block {bname}", f"{buf.name} has a symbolic shape", "") from None
        ranges = {p: (0, s - 1) for p, s in zip(params, shape)}
        new_shape = []
        for d, x in enumerate(exprs):
            lo, hi = bound_of(x, ranges)
            if lo is None or hi is None:
                raise ctx.error(f"block {bname}", f"cannot bound new index {d} "
                                f"({expr_text(x)}) of {buf.name}", "", highlight=[bname])
            if lo < 0:
                raise ctx.error(f"block {bname}", f"new index {d} ({expr_text(x)}) can be "
                                f"negative ({lo}) for {buf.name} of shape {shape}",
                                "the new indices must start at 0", highlight=[bname])
            new_shape.append(hi + 1)
        if 0 in shape:
            raise ctx.error(f"block {bname}", f"{buf.name} is empty", "")
        try:
            ok = injective(params, exprs, shape, tuple(new_shape))
        except CheckBudgetError as e:
            raise IndexMapBudgetError(self.method, f"block {bname}", str(e), "",
                                      highlight=[bname]) from None
        except IndexMapError as e:
            raise ctx.error(f"block {bname}", str(e), "") from None
        if not ok:
            raise ctx.error(f"block {bname}", f"the index map sends two elements of "
                            f"{buf.name} to the same place", "use a one-to-one map, e.g. "
                            "split a dimension with // and % by the same factor",
                            highlight=[bname])
        new = Buffer(buf.name, tuple(new_shape), buf.dtype, buf.scope, (), 0, buf.align)
        body = _Remap(buf, new, params, exprs).visit(ctx.func.body)
        return Result(ctx.func.replace(body=body), [])

    def check_attrs(self, attrs) -> None:
        """The declared kinds, and an index map that parses (it is written again from the
        parsed map when the trace is exported)."""
        super().check_attrs(attrs)
        _index_map_text(attrs[2])

    def python_args(self, inputs, attrs, dialect):
        btype = self.attr(attrs, 1)
        if btype not in ("0", "1"):
            raise TraceError(f"TransformLayout's buffer_index_type must be 0 (read) or 1 "
                             f"(write), got {btype}")
        buf = f'("{_NAMES[int(btype)]}", {self.attr(attrs, 0)})'
        self.attr(attrs, 2)  # a string
        text = _index_map_text(attrs[2])
        pad = self.attr(attrs, 3)
        if dialect == "engine":
            args = [fmt(inputs[0]), buf, py_str(text)]
            if pad != "None":
                args.append(f"pad_value={pad}")
            return args
        args = [f"block={fmt(inputs[0])}", f"buffer={buf}", f"index_map={text}"]
        if dialect == "tvm" or pad != "None":
            args.append(f"pad_value={pad}")  # the 2022 API had no pad_value yet
        return args


def _index_map_text(text: str) -> str:
    """The canonical lambda of a trace's index map (a lambda string or TVM's IndexMap JSON),
    printed from the map parsed back from that lambda (never the trace's own text: a TVM
    variable's name must be an identifier to parse); TraceError when it does not parse."""
    try:
        return map_text(*parse_index_map(normalize_index_map(text)))
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

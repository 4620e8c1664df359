"""Extern calls made compilable: what ``lower(func, extern=True)`` does first, for a build
that links outside code (``engine.build`` / ``tvm.compile`` called from Python, with the
function's LLVM IR given by a loop's ``pragma_import_llvm`` annotation or the build's
``extra_modules``). Without ``extern=True`` an extern call stays opaque code, refused by the
lowering with a sentence: a program pasted into or measured by the explorer never links it.

Three rewrites, before the views are made plain (:func:`engine.ir.views.inline_views`):

1. **Strides of a view**: a tensor intrinsic's ``T.match_buffer(.., strides=[sa, 1])`` view
   binds ``sa`` to the stride of the buffer it views (TVM's ``MatchBuffer`` binding):
   ``sa`` becomes that stride (a buffer's own ``strides``, else row-major from its shape)
   everywhere in the function; a stride written 1 must be 1.
2. **Pointers**: an argument ``T.tvm_access_ptr(T.type_annotation(t), V.data, off, n, mask)``
   (``V.access_ptr("w")``) of an extern call becomes the address of the element it points
   at, ``address_of(B[i, j + k])`` of dtype ``handle`` (an LLVM pointer), ``B`` the buffer
   under the view ``V`` and ``(i, j)`` the view's start, ``k`` the offset past the view's
   own ``V.elem_offset``. A bare ``B.data`` argument is ``address_of(B[0, .., 0])``.
3. **Calls**: ``Call(dtype, "tmm16", args)`` (``T.call_extern("int32", "tmm16", ..)``)
   becomes the engine's ``call_extern`` of the symbol (see :mod:`engine.codegen.llvm`).

A buffer whose address is taken so keeps the layout it is declared with (the compaction
leaves it alone, :func:`opaque_buffers`): the strides given to the extern function are
those of that layout. The extern function must stay inside the views it is given: the
engine checks each view's region (where it was matched), not the code behind the call.
"""
from __future__ import annotations

from typing import Any

from engine.arith import simplify
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.function import PrimFunc
from engine.ir.functor import Mutator, collect, collect_stmts, substitute

from .errors import BuildError

__all__ = ["link_extern_calls", "extern_symbols", "opaque_buffers", "is_extern_call"]

_ENGINE_CALLS = frozenset({"address_of", "call_extern"})


def is_extern_call(c: Any) -> bool:
    """A call of a function by its name (``T.call_extern``): not an intrinsic, not one of
    TVM's builtins, not the engine's own operations."""
    return type(c) is E.Call and c.op not in E.INTRINSICS and c.op not in E.OPAQUE_CALLS \
        and c.op not in _ENGINE_CALLS


def extern_symbols(func: PrimFunc) -> list[str]:
    """The names of the extern functions ``func`` calls, in order of first use."""
    out: list[str] = []
    for c in collect(func.body, E.Call):
        if is_extern_call(c) and c.op not in out:
            out.append(c.op)
    return out


def opaque_buffers(body: Any) -> set:
    """The ids of the buffers whose address an ``address_of`` takes."""
    return {id(c.args[0].buffer) for c in collect(body, E.Call)
            if c.op == "address_of" and c.args and type(c.args[0]) is E.BufferLoad}


def _row_major(buf: Buffer) -> list:
    if buf.strides:
        return list(buf.strides)
    out, acc = [], E.IntImm("int32", 1)
    for n in reversed(buf.shape):
        out.append(acc)
        acc = E.IntImm("int32", acc.value * n.value) if type(acc) is E.IntImm and \
            type(n) is E.IntImm else E.binary(E.Mul, acc, n)
    return out[::-1]


class _Views:
    """Each view's root buffer (a view of a view is one of its source's) and its start
    there (the region's minimum, its dimensions aligned on the root's last ones)."""

    def __init__(self, body: Any):
        self.of: dict[int, tuple[Buffer, tuple]] = {}
        for blk in collect_stmts(body, S.Block):
            for m in blk.match_buffers:
                src = m.source.buffer
                starts = tuple(rg.min for rg in m.source.region)
                if id(src) in self.of:
                    root, rstarts = self.of[id(src)]
                    off = len(rstarts) - len(starts)
                    starts = tuple(rstarts[:off]) + tuple(
                        simplify(E.binary(E.Add, a, b)) for a, b in zip(rstarts[off:], starts))
                    src = root
                self.of[id(m.buffer)] = (src, starts)
        self.buffers = {id(m.buffer): m.buffer for blk in collect_stmts(body, S.Block)
                        for m in blk.match_buffers}


def _bind_strides(func: PrimFunc, views: _Views) -> PrimFunc:
    bound: dict = {}
    for vid, view in views.buffers.items():
        if not view.strides:
            continue
        root, _ = views.of[vid]
        rs = _row_major(root)
        off = len(rs) - len(view.strides)
        for d, st in enumerate(view.strides):
            want = rs[off + d]
            if type(st) is E.Var:
                if st not in bound:
                    bound[st] = want
                elif not E.is_const_int(simplify(E.binary(E.Sub, bound[st], want)), 0):
                    raise BuildError(f"the stride variable {st.name} of view {view.name} "
                                     "stands for two different strides in function "
                                     f"{func.name!r}")
            elif not E.is_const_int(simplify(E.binary(E.Sub, st, want)), 0):
                raise BuildError(f"view {view.name} of {root.name} in function {func.name!r} "
                                 f"says its stride {d} is {st}, but {root.name}'s is {want}")
    if not bound:
        return func
    vmap = {v: (x if x.dtype == v.dtype else E.Cast(v.dtype, x)) for v, x in bound.items()}
    return func.replace(body=substitute(func.body, vmap))


class _NoField(Mutator):
    def __init__(self, view: Buffer):
        self.view = view
        self.found = False

    def visit_BufferField(self, e: E.BufferField):
        if e.buffer is self.view and e.field == "elem_offset":
            self.found = True
            return E.IntImm(e.dtype, 0)
        return e


def _unflatten(buf: Buffer, flat: E.PrimExpr) -> tuple:
    """Indices of ``buf`` whose row-major offset is ``flat`` (the last one carries it all
    for a one-dimensional buffer or an offset inside the last dimension's first row)."""
    if buf.ndim <= 1 or E.is_const_int(flat, 0):
        return tuple(E.IntImm(flat.dtype, 0) for _ in buf.shape[:-1]) + (flat,)
    strides = _row_major(buf)
    out = []
    for d, st in enumerate(strides):
        q = flat if d == 0 else E.binary(E.FloorMod, flat, strides[d - 1])
        out.append(simplify(q if E.is_const_int(st, 1) else E.binary(E.FloorDiv, q, st)))
    return tuple(out)


class _Externs(Mutator):
    def __init__(self, func: PrimFunc, views: _Views):
        self.func, self.views = func, views

    def where(self, name: str) -> str:
        return f"the call of {name!r} in function {self.func.name!r}"

    def pointer(self, a: Any, name: str) -> Any:
        if type(a) is E.BufferField and a.field == "data":
            buf, starts = self.views.of.get(id(a.buffer), (a.buffer, None))
            idx = starts if starts is not None else tuple(
                E.IntImm("int32", 0) for _ in buf.shape)
            return E.Call("handle", "address_of", (E.BufferLoad(buf, idx),))
        if type(a) is not E.Call or a.op != "tvm_access_ptr":
            return a
        data, off = a.args[1], a.args[2]
        if type(data) is not E.BufferField or data.field != "data":
            raise BuildError(f"{self.where(name)} passes T.tvm_access_ptr of something that "
                             "is not a buffer's data")
        view = data.buffer
        if id(view) in self.views.of:
            root, starts = self.views.of[id(view)]
            m = _NoField(view)
            k = simplify(m.visit(off))
            if m.found:   # past the view's start: the view's last dimension carries it
                last = starts[-1]
                if k.dtype != last.dtype:
                    k = E.Cast(last.dtype, k)
                idx = tuple(starts[:-1]) + (simplify(E.binary(E.Add, last, k)),)
                return E.Call("handle", "address_of", (E.BufferLoad(root, idx),))
            return E.Call("handle", "address_of", (E.BufferLoad(root, _unflatten(root, k)),))
        if collect(off, E.BufferField):
            off = simplify(_NoField(view).visit(off))   # a buffer's own offset: 0 here
        return E.Call("handle", "address_of", (E.BufferLoad(view, _unflatten(view, off)),))

    def visit_Call(self, c: E.Call):
        if not is_extern_call(c):
            return self.generic_visit(c)
        args = tuple(self.visit(self.pointer(a, c.op)) for a in c.args)
        return E.Call(c.dtype, "call_extern", (E.StringImm(c.op),) + args)


def link_extern_calls(func: PrimFunc) -> PrimFunc:
    """``func`` with its extern calls made compilable (see the module docstring); the same
    object when it calls none."""
    if not any(is_extern_call(c) for c in collect(func.body, E.Call)):
        return func
    views = _Views(func.body)
    func = _bind_strides(func, views)
    views = _Views(func.body)
    body = _Externs(func, views).visit(func.body)
    return func if body is func.body else func.replace(body=body)

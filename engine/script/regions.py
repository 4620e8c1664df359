"""Read/write region inference for a block whose script omits ``T.reads``/``T.writes``.

TVM completes such blocks from their bodies; this module does the same, simply:

* every ``BufferLoad`` is a read and every ``BufferStore`` a write (nested blocks contribute
  their own declared regions, with their axes replaced by their bindings);
* regions stay in terms of the block's own axes (``A[vi, vk]``); variables of loops *inside*
  the block are relaxed over their ranges: per dimension, an affine index
  ``c0 + sum(c * v)`` gets ``[min, max]`` from the signs of its coefficients;
* several accesses to one buffer are merged per dimension when they differ only by
  constants (``vi`` and ``vi + 1`` give ``vi:vi + 2``); otherwise, or for a non-affine
  index that involves a relaxed loop variable, the whole dimension is used;
* buffers appear in order of first access, and (as TVM does) when the block has an
  ``init`` statement, the written buffers are not listed as reads;
* opaque accesses, as TVM's detector reads them: ``T.tvm_access_ptr(..., B.data, ..., mask)``
  (``B.access_ptr("r")``) reads (mask 1) or writes (mask 2) the whole of ``B``; any other
  use of ``B.data`` (mask 3, an extern call's argument) may do both: ``B`` is then left out
  of the element-wise regions and its whole region is both read and written;
* an access through a view the block declares (``Bb = T.match_buffer(B[vi, 0:4], (4,))``)
  is an access of its source: ``Bb[k]`` reads ``B[vi, k]`` (TVM's ConvertMatchedRegion).
"""
from __future__ import annotations

from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer, BufferRegion, Range
from engine.ir.dtype import is_int, lanes_of
from engine.ir.functor import pre_order_visit, substitute
from engine.ir.structural import structural_equal
from engine.ir.views import offset_index

__all__ = ["infer_block_regions", "linear_form"]


def linear_form(e: Any) -> tuple[dict, int] | None:
    """``e`` as ``({id(var): [var, coeff]}, const)`` when it is affine in its variables."""
    t = type(e)
    if t is E.IntImm:
        return {}, e.value
    if t is E.Var:
        return {id(e): [e, 1]}, 0
    if t is E.Add or t is E.Sub:
        la, lb = linear_form(e.a), linear_form(e.b)
        if la is None or lb is None:
            return None
        sign = 1 if t is E.Add else -1
        terms = {k: [v, c] for k, (v, c) in la[0].items()}
        for k, (v, c) in lb[0].items():
            if k in terms:
                terms[k][1] += sign * c
            else:
                terms[k] = [v, sign * c]
        return {k: vc for k, vc in terms.items() if vc[1] != 0}, la[1] + sign * lb[1]
    if t is E.Mul:
        la, lb = linear_form(e.a), linear_form(e.b)
        if la is None or lb is None:
            return None
        if not la[0]:
            la, lb = lb, la
        if lb[0]:
            return None  # product of two variables
        k = lb[1]
        return {key: [v, c * k] for key, (v, c) in la[0].items() if c * k != 0}, la[1] * k
    return None


def _index_access(i: Any) -> tuple:
    """One dimension of an access as ``(start, extent)``; a vector index ``T.Ramp(b, s, n)``
    with a constant stride covers ``s * (n - 1) + 1`` elements from ``b``."""
    if type(i) is E.Ramp:
        if type(i.stride) is E.IntImm and i.stride.value >= 0 and lanes_of(i.base.dtype) == 1:
            return i.base, i.stride.value * (i.lanes - 1) + 1
        return None, None
    if type(i) is E.Broadcast and lanes_of(i.value.dtype) == 1:
        return i.value, 1
    if lanes_of(i.dtype) != 1:
        return None, None
    return i, 1


class _Access:
    __slots__ = ("buffer", "dims")

    def __init__(self, buffer: Buffer):
        self.buffer = buffer
        self.dims: list[list] = [[] for _ in buffer.shape]  # per dim: [(expr, extent), ...]


class _Collector:
    def __init__(self, views: tuple = ()):
        self.reads: dict[int, _Access] = {}
        self.writes: dict[int, _Access] = {}
        self.opaque: dict[int, Buffer] = {}   # buffers whose data opaque code may touch
        self.views = {id(m.buffer): m for m in views}   # the block's T.match_buffer views
        self.relax: dict[int, tuple[int, int] | None] = {}  # loop var id -> (lo, hi) or None

    def source_of(self, buffer: Buffer, per_dim: list) -> tuple[Buffer, list]:
        """An access of a view (``per_dim`` in its coordinates) as one of its source."""
        while id(buffer) in self.views:
            m = self.views[id(buffer)]
            region = m.source.region
            if len(per_dim) != len(m.buffer.shape):
                per_dim = [(None, None)] * len(m.buffer.shape)
            off = len(region) - len(per_dim)
            out = [(rg.min, 1) for rg in region[:off]]
            for rg, (x, ext) in zip(region[off:], per_dim):
                if x is None or ext is None:
                    full = rg.extent.value if type(rg.extent) is E.IntImm else None
                    out.append((rg.min, full) if full is not None else (None, None))
                else:
                    out.append((offset_index(rg.min, x), ext))
            buffer, per_dim = m.source.buffer, out
        return buffer, per_dim

    def add(self, table: dict, buffer: Buffer, per_dim: list) -> None:
        if self.views:
            buffer, per_dim = self.source_of(buffer, per_dim)
        acc = table.get(id(buffer))
        if acc is None:
            acc = table[id(buffer)] = _Access(buffer)
        if len(per_dim) != len(acc.dims):  # malformed access: treat as whole buffer
            acc.dims = [[(None, None)] for _ in acc.dims]
            return
        for slot, item in zip(acc.dims, per_dim):
            slot.append(item)

    def expr(self, e: Any) -> None:
        if e is None or not isinstance(e, E.PrimExpr):
            return

        def fn(x: Any) -> Any:
            t = type(x)
            if t is E.BufferLoad:
                self.add(self.reads, x.buffer, [_index_access(i) for i in x.indices])
            elif t is E.Call and x.op == "tvm_access_ptr" and len(x.args) == 5 and \
                    type(x.args[1]) is E.BufferField and type(x.args[4]) is E.IntImm:
                buf, mask = x.args[1].buffer, x.args[4].value
                whole = [(None, None)] * len(buf.shape)
                for a in x.args[2:4]:
                    pre_order_visit(a, fn)
                if mask & 1 and mask & 2:
                    while id(buf) in self.views:
                        buf = self.views[id(buf)].source.buffer
                    self.opaque.setdefault(id(buf), buf)
                elif mask & 1:
                    self.add(self.reads, buf, whole)
                elif mask & 2:
                    self.add(self.writes, buf, whole)
                return False
            elif t is E.BufferField and x.field == "data":
                buf = x.buffer
                while id(buf) in self.views:
                    buf = self.views[id(buf)].source.buffer
                self.opaque.setdefault(id(buf), buf)
            return None

        pre_order_visit(e, fn)

    def stmt(self, s: Any) -> None:
        t = type(s)
        if s is None:
            return
        if t is S.SeqStmt:
            for x in s.seq:
                self.stmt(x)
        elif t is S.BufferStore:
            self.add(self.writes, s.buffer, [_index_access(i) for i in s.indices])
            for i in s.indices:
                self.expr(i)
            self.expr(s.value)
        elif t is S.For:
            self.expr(s.min)
            self.expr(s.extent)
            if type(s.min) is E.IntImm and type(s.extent) is E.IntImm and s.extent.value > 0:
                self.relax[id(s.loop_var)] = (s.min.value, s.min.value + s.extent.value - 1)
            else:
                self.relax[id(s.loop_var)] = None
            self.stmt(s.body)
        elif t is S.IfThenElse:
            self.expr(s.condition)
            self.stmt(s.then_case)
            self.stmt(s.else_case)
        elif t is S.Evaluate:
            self.expr(s.value)
        elif t is S.LetStmt:
            self.expr(s.value)
            self.stmt(s.body)
        elif t is S.Allocate:
            self.stmt(s.body)
        elif t is S.BlockRealize:
            blk = s.block
            for v in s.iter_values:
                self.expr(v)
            self.expr(s.predicate)
            vmap = {iv.var: val for iv, val in zip(blk.iter_vars, s.iter_values)}
            local = {id(b) for b in blk.alloc_buffers}
            for table, regions in ((self.reads, blk.reads), (self.writes, blk.writes)):
                for r in regions:
                    if id(r.buffer) in local:
                        continue
                    per_dim = []
                    for rg in r.region:
                        mn = substitute(rg.min, vmap) if vmap else rg.min
                        ext = rg.extent.value if type(rg.extent) is E.IntImm else None
                        per_dim.append((mn, ext))
                    self.add(table, r.buffer, per_dim)

    # ------------------------------------------------------------------
    def _dim_region(self, buffer: Buffer, d: int, items: list) -> Range:
        full = Range(E.IntImm(buffer.shape[d].dtype, 0), buffer.shape[d])
        first_expr, first_ext = items[0]
        if first_expr is None or first_ext is None:
            return full
        if all(x is first_expr or (ext == first_ext and x is not None
                                   and structural_equal(x, first_expr))
               for x, ext in items[1:]) and not self._mentions_relaxed(first_expr):
            return Range(first_expr, E.IntImm(first_expr.dtype, first_ext))
        base_terms = None
        lo = hi = None
        for x, ext in items:
            if x is None or ext is None or not is_int(x.dtype):
                return full
            lin = linear_form(x)
            if lin is None:
                return full
            terms, const = lin
            kept = {}
            mn = mx = const
            for key, (v, c) in terms.items():
                if key in self.relax:
                    dom = self.relax[key]
                    if dom is None:
                        return full
                    a, b = c * dom[0], c * dom[1]
                    mn += min(a, b)
                    mx += max(a, b)
                else:
                    kept[key] = (v, c)
            mx += ext - 1
            if base_terms is None:
                base_terms = kept
            elif base_terms != kept:
                return full
            lo = mn if lo is None else min(lo, mn)
            hi = mx if hi is None else max(hi, mx)
        dtype = first_expr.dtype
        out: Any = None
        for v, c in base_terms.values():
            term = v if c == 1 else E.Mul(v, E.IntImm(v.dtype, c))
            out = term if out is None else E.Add(out, term)
        if out is None:
            out = E.IntImm(dtype, lo)
        elif lo > 0:
            out = E.Add(out, E.IntImm(dtype, lo))
        elif lo < 0:
            out = E.Sub(out, E.IntImm(dtype, -lo))
        return Range(out, E.IntImm(dtype, hi - lo + 1))

    def _mentions_relaxed(self, e: Any) -> bool:
        if not self.relax:
            return False
        found = False

        def fn(x: Any):
            nonlocal found
            if found:
                return False
            if type(x) is E.Var and id(x) in self.relax:
                found = True
                return False
            return None

        pre_order_visit(e, fn)
        return found

    def regions(self, table: dict) -> tuple:
        out = []
        for acc in table.values():
            out.append(BufferRegion(acc.buffer, tuple(
                self._dim_region(acc.buffer, d, items) for d, items in enumerate(acc.dims))))
        return tuple(out)


def infer_block_regions(body: Any, init: Any = None, alloc_buffers: tuple = (),
                        match_buffers: tuple = ()) -> tuple[tuple, tuple]:
    """``(reads, writes)`` BufferRegion tuples for a block with this body/init (and these
    T.match_buffer views, whose accesses are accesses of their sources)."""
    c = _Collector(match_buffers)
    c.stmt(body)
    c.stmt(init)
    local = {id(b) for b in alloc_buffers}
    for table in (c.reads, c.writes, c.opaque):
        for key in list(table):
            if key in local or (table is not c.opaque and key in c.opaque):
                del table[key]
    if init is not None:
        for key in c.writes:
            c.reads.pop(key, None)
    whole = tuple(BufferRegion.full(b) for b in c.opaque.values())
    return c.regions(c.reads) + whole, c.regions(c.writes) + whole

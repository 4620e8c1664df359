"""Loop legalisation: unrolled and vectorized loops (runs on flattened IR).

* ``unroll`` loops with a constant extent are expanded in place (:func:`expand_unrolled`:
  one copy of the body per iteration, the loop variable a constant in each, every copy
  re-simplified) when the expansion stays below :data:`UNROLL_LIMIT` IR nodes. Bigger
  loops, or loops whose extent is not a constant, become serial loops annotated
  ``("unroll_skipped", reason)`` (LLVM's O3 may still unroll them).

  Leaving the loops to LLVM instead (``llvm.loop.unroll.full`` metadata, which the code
  generator still emits for an ``unroll`` loop that reaches it) compiled the best matmul
  schedule 15-20 ms faster, but LLVM unrolls after its LICM, so a serial register-blocked
  kernel kept its accumulators in memory (100 instead of 240 GFLOP/s) without an extra O1
  run, and conv2d-best lost 7% (its per-copy index folds, e.g. of padded windows, happen
  here and not in LLVM). The expansion here gives the best code.
* ``vectorized`` loops with a constant extent are turned into vector code: the loop variable
  becomes ``Ramp(min, 1, lanes)``, affine indices with stride 1 stay ``Ramp`` (contiguous
  vector loads/stores), loop-invariant values become ``Broadcast``. An extent that is not
  a power of two becomes one vector statement per power-of-two piece (56 lanes: 32, 16
  and 8; :func:`piece_widths`), which LLVM keeps in whole registers. Extents above
  :data:`MAX_LANES` are processed in chunks of :data:`CHUNK_LANES` lanes, then the
  remaining lanes in such pieces.
  A condition on the loop variable (the ``T.where`` of a split that does not divide, an
  ``if_then_else`` such as padding) becomes a per-lane mask: the code generator emits
  masked vector loads/stores, so inactive lanes never touch memory.
  When the body is not vectorizable — a store to a loop-invariant location (a reduction
  over the vectorized loop), a loop or allocation under a per-lane condition, an allocation
  or a side-effecting call inside, loop bounds depending on the variable, or a read of a
  buffer that is written at a different index in the same body — the loop stays a serial
  loop annotated ``("vectorize_fallback", reason)`` and the code generator leaves a comment
  in the LLVM IR. The result is always correct.
"""
from __future__ import annotations

from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.dtype import lanes_of, with_lanes
from engine.ir.functor import Mutator, collect, collect_stmts, pre_order_visit, substitute, uses_var
from engine.arith.lower_simplify import lower_simplify
from engine.arith.substitute_const import substitute_const

UNROLL_LIMIT = 20000
MAX_LANES = 64
CHUNK_LANES = 16
#: a vectorized extent that is not a power of two becomes power-of-two pieces
#: (:func:`_vector_pieces`); False: one vector of that many lanes (for comparisons)
SPLIT_ODD_WIDTHS = True


class _NotVectorizable(Exception):
    pass


def _size(n: Any, cap: int | None = None) -> int:
    """The number of IR nodes under ``n`` (a shared subtree counted at each use); the
    count stops a little past ``cap`` when one is given."""
    count = 0

    def fn(_):
        nonlocal count
        count += 1
        if cap is not None and count > cap:
            return False
        return None
    pre_order_visit(n, fn)
    return count


def _bcast(e: E.PrimExpr, lanes: int) -> E.PrimExpr:
    return e if lanes_of(e.dtype) == lanes else E.Broadcast(e, lanes)


class _Vectorizer:
    """Rewrites a loop body for ``var = Ramp(min, 1, lanes)``."""

    def __init__(self, var: E.Var, base: E.PrimExpr, lanes: int):
        self.var, self.base, self.lanes = var, base, lanes
        self.vmap: dict[int, E.PrimExpr] = {}
        self.masked = False

    # expressions -----------------------------------------------------------
    def expr(self, e: E.PrimExpr) -> E.PrimExpr:
        meth = getattr(self, "e_" + type(e).__name__, None)
        if meth is not None:
            return meth(e)
        if isinstance(e, E.BinaryOp):
            return self.binop(e)
        raise _NotVectorizable(f"expression {type(e).__name__} cannot be vectorized")

    def e_Var(self, e):
        if e is self.var:
            return E.Ramp(self.base, E.IntImm(e.dtype, 1), self.lanes)
        return self.vmap.get(id(e), e)

    def e_IntImm(self, e):
        return e

    e_FloatImm = e_StringImm = e_IntImm

    def binop(self, e):
        a, b = self.expr(e.a), self.expr(e.b)
        la, lb = lanes_of(a.dtype), lanes_of(b.dtype)
        if la == 1 and lb == 1:
            return e if (a is e.a and b is e.b) else type(e)(a, b)
        t = type(e)
        if t in (E.Add, E.Sub):
            if isinstance(a, E.Ramp) and lb == 1:
                return E.Ramp(t(a.base, b), a.stride, self.lanes)
            if isinstance(b, E.Ramp) and la == 1 and t is E.Add:
                return E.Ramp(E.Add(a, b.base), b.stride, self.lanes)
            if isinstance(a, E.Ramp) and isinstance(b, E.Ramp):
                return E.Ramp(t(a.base, b.base), t(a.stride, b.stride), self.lanes)
        if t is E.Mul:
            if isinstance(a, E.Ramp) and lb == 1:
                return E.Ramp(E.Mul(a.base, b), E.Mul(a.stride, b), self.lanes)
            if isinstance(b, E.Ramp) and la == 1:
                return E.Ramp(E.Mul(b.base, a), E.Mul(b.stride, a), self.lanes)
        return t(_bcast(a, self.lanes), _bcast(b, self.lanes))

    def e_Not(self, e):
        return E.Not(self.expr(e.a))

    def e_Select(self, e):
        c, a, b = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
        if all(lanes_of(x.dtype) == 1 for x in (c, a, b)):
            return E.Select(c, a, b)
        return E.Select(_bcast(c, self.lanes), _bcast(a, self.lanes), _bcast(b, self.lanes))

    def e_Cast(self, e):
        v = self.expr(e.value)
        return E.Cast(with_lanes(e.dtype, lanes_of(v.dtype)), v)

    def e_Call(self, e):
        if e.op in ("address_of", "call_extern"):
            if any(uses_var(a, self.var) for a in e.args):
                raise _NotVectorizable(f"call to {e.op} depends on the vectorized loop variable")
            raise _NotVectorizable(f"call to {e.op} inside a vectorized loop")
        args = [self.expr(a) for a in e.args]
        if all(lanes_of(a.dtype) == 1 for a in args):
            return E.Call(e.dtype, e.op, tuple(args))
        return E.Call(with_lanes(e.dtype, self.lanes), e.op,
                      tuple(_bcast(a, self.lanes) for a in args))

    def e_BufferLoad(self, e):
        idx = tuple(self.expr(i) for i in e.indices)
        return E.BufferLoad(e.buffer, idx)

    def e_Let(self, e):
        v = self.expr(e.value)
        if lanes_of(v.dtype) == 1:
            return E.Let(e.var, v, self.expr(e.body))
        nv = E.Var(e.var.name, v.dtype)
        self.vmap[id(e.var)] = nv
        return E.Let(nv, v, self.expr(e.body))

    def e_Ramp(self, e):
        raise _NotVectorizable("the body already contains vector expressions")

    e_Broadcast = e_Ramp

    # statements -------------------------------------------------------------
    def stmt(self, s: S.Stmt) -> S.Stmt:
        meth = getattr(self, "s_" + type(s).__name__, None)
        if meth is None:
            raise _NotVectorizable(f"statement {type(s).__name__} cannot be vectorized")
        return meth(s)

    def s_SeqStmt(self, s):
        return S.SeqStmt(tuple(self.stmt(x) for x in s.seq))

    def s_BufferStore(self, s):
        idx = tuple(self.expr(i) for i in s.indices)
        val = self.expr(s.value)
        if all(lanes_of(i.dtype) == 1 for i in idx):
            raise _NotVectorizable(
                f"store to {s.buffer.name} at an index that does not depend on the loop "
                "variable (a reduction over the vectorized loop)")
        return S.BufferStore(s.buffer, _bcast(val, self.lanes), idx)

    def s_IfThenElse(self, s):
        c = self.expr(s.condition)
        if lanes_of(c.dtype) != 1:
            # a per-lane condition (a T.where predicate): the code generator emits masked
            # loads/stores; only plain stores may sit under it
            for n in collect_stmts(s, (S.For, S.Allocate, S.Evaluate)):
                raise _NotVectorizable(f"a {type(n).__name__} under a condition that depends "
                                       "on the vectorized loop variable")
            self.masked = True
        return S.IfThenElse(c, self.stmt(s.then_case),
                            self.stmt(s.else_case) if s.else_case is not None else None)

    def s_LetStmt(self, s):
        v = self.expr(s.value)
        if lanes_of(v.dtype) == 1:
            return S.LetStmt(s.var, v, self.stmt(s.body))
        nv = E.Var(s.var.name, v.dtype)
        self.vmap[id(s.var)] = nv
        return S.LetStmt(nv, v, self.stmt(s.body))

    def s_For(self, s):
        if uses_var(s.min, self.var) or uses_var(s.extent, self.var):
            raise _NotVectorizable("an inner loop's bounds depend on the vectorized variable")
        if s.kind is S.ForKind.PARALLEL:
            raise _NotVectorizable("a parallel loop inside a vectorized loop")
        kind = S.ForKind.UNROLLED if s.kind is S.ForKind.UNROLLED else S.ForKind.SERIAL
        return S.For(s.loop_var, s.min, s.extent, kind, self.stmt(s.body), s.annotations)

    def s_Evaluate(self, s):
        if isinstance(s.value, E.IntImm):
            return s
        raise _NotVectorizable("an Evaluate statement (side effect) inside a vectorized loop")

    def s_Allocate(self, s):
        raise _NotVectorizable(f"buffer {s.buffer.name} is allocated inside the vectorized loop")


def _check_dependences(body: S.Stmt) -> None:
    """Reads of a buffer written in the body must use exactly the written index."""
    from engine.ir.structural import structural_equal
    writes: dict[int, list] = {}
    for st in collect_stmts(body, S.BufferStore):
        writes.setdefault(id(st.buffer), []).append(st.indices)
    for ld in collect(body, E.BufferLoad):
        ws = writes.get(id(ld.buffer))
        if ws is None:
            continue
        for w in ws:
            if not structural_equal(w, ld.indices):
                raise _NotVectorizable(
                    f"buffer {ld.buffer.name} is read at a different index than it is written "
                    "(possible dependence between iterations)")


def vectorize_loop(loop: S.For, var_ranges: dict | None = None) -> S.Stmt:
    """Vector code for ``loop`` (see the module docstring) or an annotated serial loop.

    ``var_ranges`` maps enclosing loop variables to inclusive ``(lo, hi)`` bounds, so index
    folds such as ``Ramp(x * 16 + y, 1, 4) // 64`` can use them.
    """
    ext = E.as_const_int(loop.extent)
    if ext is None:
        return _fallback(loop, "the extent is not a constant")
    if ext <= 0:
        return S.Evaluate(E.IntImm("int32", 0))
    if ext == 1:  # a single iteration: no vector needed
        return lower_simplify(substitute(loop.body, {loop.loop_var: loop.min}))
    try:
        if ext <= MAX_LANES:   # one vector, or one per power-of-two piece
            widths = piece_widths(ext) if SPLIT_ODD_WIDTHS else [ext]
            return S.seq(*_vector_pieces(loop, widths, var_ranges))
        lanes = CHUNK_LANES
        n_chunks, tail = divmod(ext, lanes)
        vo = E.Var(loop.loop_var.name + "_vo", loop.loop_var.dtype)
        base = lower_simplify(loop.min + vo * lanes)
        vec = _Vectorizer(loop.loop_var, base, lanes).stmt(loop.body)
        _check_dependences(vec)
        parts = [S.For(vo, E.IntImm(vo.dtype, 0), E.IntImm(vo.dtype, n_chunks),
                       S.ForKind.SERIAL,
                       lower_simplify(vec, {**(var_ranges or {}), vo: (0, n_chunks - 1)}))]
        if tail:   # the last elements: power-of-two pieces too (a scalar loop before)
            rest = S.For(loop.loop_var, lower_simplify(loop.min + n_chunks * lanes),
                         E.IntImm(loop.extent.dtype, tail), S.ForKind.VECTORIZED, loop.body)
            parts.extend(_vector_pieces(rest, piece_widths(tail), var_ranges))
        return S.seq(*parts)
    except _NotVectorizable as exc:
        return _fallback(loop, str(exc))


def piece_widths(ext: int) -> list[int]:
    """The power-of-two widths a vectorized extent is cut into: its binary digits, largest
    first (56 -> [32, 16, 8]; 7 -> [4, 2, 1])."""
    return [1 << b for b in range(ext.bit_length() - 1, -1, -1) if ext >> b & 1]


def _vector_pieces(loop: S.For, widths: list[int], var_ranges: dict | None) -> list[S.Stmt]:
    """A vectorized loop as one vector statement per piece of ``widths`` lanes, in order
    (a piece of one lane is scalar code). A power-of-two extent is one piece; any other is
    cut into its :func:`piece_widths`.

    Before::

        for ow in T.vectorized(56):
            conv[ow] = conv[ow] + pad[ow + kw] * w

    after::

        conv[0:32] = conv[0:32] + pad[kw:kw + 32] * Broadcast(w, 32)
        conv[32:48] = conv[32:48] + pad[kw + 32:kw + 48] * Broadcast(w, 16)
        conv[48:56] = conv[48:56] + pad[kw + 48:kw + 56] * Broadcast(w, 8)

    LLVM's x86 back end splits a vector whose lane count is a power of two into whole
    registers, but it takes one of 56 (or 12, 20, 60 ...) apart lane by lane wherever the
    value crosses a loop iteration: conv2d-tiled's 56-wide output row, kept in registers
    across its reduction, was shuffled element by element on every step (150 extra
    instructions per 63 FMAs; TVM 0.27's code for the same schedule has the same), and a
    matmul row of 56 ran 8x slower than in power-of-two pieces. The pieces run the same
    operations on the same elements, lane for lane (conv2d-tiled's output is bit-identical;
    elsewhere LLVM may fuse a multiply and an add in a lane of one form and not the other).
    The vectorizer's dependence check (a buffer read at another index than it is written is
    refused) is what makes the order across lanes free, as it is for the whole vector.
    """
    pieces, start = [], 0
    for width in widths:
        base = lower_simplify(loop.min + start)
        if width == 1:
            pieces.append(lower_simplify(substitute(loop.body, {loop.loop_var: base}),
                                         var_ranges))
        else:
            vec = _Vectorizer(loop.loop_var, base, width).stmt(loop.body)
            _check_dependences(vec)
            pieces.append(lower_simplify(vec, var_ranges))
        start += width
    return pieces


def _fallback(loop: S.For, reason: str) -> S.For:
    return S.For(loop.loop_var, loop.min, loop.extent, S.ForKind.SERIAL, loop.body,
                 loop.annotations + (("vectorize_fallback", reason),))


def unroll_loop(loop: S.For, simplified: bool = False) -> S.Stmt:
    """Expand an ``unroll`` loop (:func:`expand_unrolled`) or make it a serial loop.

    Before (``T.unroll``, constant extent, small body)::

        for i1 in T.unroll(2):
            C_local[i1 * 64 + j] = C_local[i1 * 64 + j] + A[...] * B[...]

    after::

        C_local[j] = C_local[j] + A[...] * B[...]
        C_local[64 + j] = C_local[64 + j] + A[...] * B[...]

    A loop whose extent is not a constant, or whose unrolled body would exceed
    :data:`UNROLL_LIMIT` IR nodes, becomes ``T.serial`` with ``("unroll_skipped", reason)``.
    """
    ext = E.as_const_int(loop.extent)
    if ext is None:
        return S.For(loop.loop_var, loop.min, loop.extent, S.ForKind.SERIAL, loop.body,
                     loop.annotations + (("unroll_skipped", "the extent is not a constant"),))
    if ext * _size(loop.body, cap=UNROLL_LIMIT // max(ext, 1) + 1) > UNROLL_LIMIT:
        return S.For(loop.loop_var, loop.min, loop.extent, S.ForKind.SERIAL, loop.body,
                     loop.annotations + (("unroll_skipped", "the unrolled body would be too big"),))
    return expand_unrolled(loop, simplified)


def expand_unrolled(loop: S.For, simplified: bool = False) -> S.Stmt:
    """One copy of the body per iteration, the loop variable a constant in each.

    Before::

        for i1 in T.unroll(2):
            Y[i1] = X[i1] * 2

    after::

        Y[0] = X[0] * 2
        Y[1] = X[1] * 2
    """
    ext = E.as_const_int(loop.extent)
    if ext is None:
        raise ValueError(f"loop {loop.loop_var.name} has no constant extent to unroll")
    # the body is simplified once (``simplified``: it already is — the legalizer's input
    # is simplified, and so is everything it builds: the copies of an inner unrolled loop,
    # a vectorized loop; simplifying it again changed nothing in any test, and was 40% of
    # conv2d-best's legalization); each copy then only folds the loop variable's constant
    # into the linear index arithmetic it appears in (substitute_const), which gives what
    # simplifying each copy again gives. Where the variable appears elsewhere (a division,
    # a condition, ...), that copy is substituted and simplified in full.
    body = loop.body if simplified else lower_simplify(loop.body)
    copies = []
    uses: dict = {}   # which nodes of body use the loop variable (the same for all copies)
    lo = E.as_const_int(loop.min)
    for i in range(ext):
        # a constant start (the usual 0) needs no simplification per copy
        value = E.const(lo + i, loop.min.dtype) if lo is not None else \
            lower_simplify(loop.min + i)
        c = E.as_const_int(value)
        copy = substitute_const(body, loop.loop_var, c, uses) if c is not None else None
        if copy is None:
            copy = lower_simplify(substitute(body, {loop.loop_var: value}))
        copies.append(copy)
    return S.seq(*copies) if copies else S.Evaluate(E.IntImm("int32", 0))


class _Legalizer(Mutator):
    def __init__(self):
        super().__init__()
        self.ranges: dict = {}  # enclosing loops with constant bounds: var -> (lo, hi)

    def visit_For(self, s: S.For):
        lo, ext = E.as_const_int(s.min), E.as_const_int(s.extent)
        known = lo is not None and ext is not None and ext > 0
        if known:
            self.ranges[s.loop_var] = (lo, lo + ext - 1)
        try:
            s = self.generic_visit(s)  # inner loops first
        finally:
            if known:
                self.ranges.pop(s.loop_var, None)
        if s.kind is S.ForKind.UNROLLED:
            return unroll_loop(s, simplified=True)
        if s.kind is S.ForKind.VECTORIZED:
            outer = {v: r for v, r in self.ranges.items() if v is not s.loop_var}
            return vectorize_loop(s, outer)
        return s


def legalize_loops(body: S.Stmt, func_name: str = "") -> S.Stmt:
    """Expand unrolled loops and vectorize vectorized loops (see the module docstring)."""
    return _Legalizer().visit(body)

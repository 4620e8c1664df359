"""Bounds proof: every buffer access of a program provably stays inside its buffer.

Runs on the loop form (after blocks -> loops, before flattening), where every access still
has its buffer's shape. For every ``BufferLoad`` and ``BufferStore``, the interval of each
index (:class:`engine.arith.guarded.GuardedBounds`: the loop ranges, ``let`` values, and the
conditions that guard the access — ``if`` statements, ``T.where`` predicates, the chosen
branch of ``T.if_then_else``) must lie in ``[0, extent - 1]`` of its dimension; a vector
index ``Ramp(base, stride, lanes)`` covers ``base .. base + (lanes - 1) * stride``.

An access that cannot be proven in bounds is refused with an :class:`AccessBoundsError`
naming it::

    B[i] may write past the end of B (i reaches 71, B has 8 elements)

``Select`` evaluates both of its values (as the generated code does), so its condition
guards nothing; neither do the operands of ``and``/``or``. An index read from a buffer is
bounded by its dtype, a clamp (``T.min``/``T.max``) or a guard; otherwise it is refused too
(the generated code checks no index at run time).

One more thing bounds an index read from a buffer the function **allocates** itself (an
``Allocate``, never a parameter: a parameter's contents are the caller's) when its dtype
is a scalar integer: such buffers are zero-filled where they are allocated (the generated
code and the interpreter both do it, :func:`engine.ir.dtype.zero_filled`), so each of their
elements is 0 or a value stored into the buffer somewhere in the function. A pre-pass
(:func:`allocated_index_bounds`) bounds every value stored into each such buffer, at its
store, under its loops and guards, and a load from the buffer lies in the hull of 0 and
those bounds. That is how the index buffers of ``cache_index`` are proven::

    index_var_0[v0, v1] = v0 * 4 + v1       # v0 < 32, v1 < 4: the values are 0..127
    B[vi, vj] = A[index_var_0[vi, vj]]      # A has 128 elements: proven

A buffer used outside its ``Allocate`` (a parameter's buffer, say), stored to with a value
that cannot be bounded or that may not fit its dtype is left to its dtype's range. Values
stored from loads of such buffers use what the previous round of the pre-pass proved (a
few rounds, each sound on its own).
"""
from __future__ import annotations

from typing import Any

from engine.arith.guarded import GuardedBounds, dtype_range
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.dtype import bits_of, lanes_of, zero_filled
from engine.ir.functor import collect, collect_vars, pre_order_visit, substitute
from engine.script.printer.module import repr_node

from .errors import BuildError


class AccessBoundsError(BuildError):
    """An access that may fall outside its buffer; ``buffer`` and ``access`` name it (the
    access as text, e.g. ``"B[i]"``) so a page can point at it."""

    def __init__(self, message: str, buffer: str, access: str):
        super().__init__(message)
        self.buffer = buffer
        self.access = access
        self.hint = ("bound the loop by the buffer's size, or guard the access with an "
                     "if (or T.where) that keeps the index inside the buffer")


#: rounds of the pre-pass (a value stored from a load of another index buffer uses the
#: previous round's bound of that buffer)
_ROUNDS = 3


def check_bounds(body: S.Stmt, func_name: str, size_vars: tuple = (),
                 params: tuple = ()) -> None:
    """Raise :class:`AccessBoundsError` for the first access not provably in bounds.

    ``size_vars`` are the function's symbolic sizes (bound from the arrays' shapes: at
    least 0) and ``params`` its parameters (a scalar integer parameter lies in its dtype's
    range)."""
    checker = _Checker(func_name, allocated_index_bounds(body, func_name))
    _bind_symbols(checker.an, size_vars, params)
    checker.stmt(body)


def _bind_symbols(an: GuardedBounds, size_vars: tuple, params: tuple) -> None:
    for v in size_vars:
        hi = dtype_range(v.dtype)
        an.ranges[v] = (0, None if hi is None else hi[1])
    for p in params:
        if isinstance(p, E.Var):
            r = dtype_range(p.dtype)
            if r is not None:
                an.ranges[p] = r


def allocated_index_bounds(body: S.Stmt, func_name: str = "") -> dict:
    """``{id(buffer): (lo, hi)}``: every element of a zero-filled buffer ``body`` allocates
    lies in ``[lo, hi]`` (the hull of 0 and every value stored into it; see the module
    docstring). Buffers whose stores cannot all be bounded are absent."""
    candidates = _zero_filled_allocations(body)
    known: dict = {}
    for _ in range(_ROUNDS if candidates else 0):
        collector = _StoreBounds(func_name, known, candidates)
        collector.stmt(body)
        found = {k: v for k, v in collector.hull.items() if v is not None}
        if found == known:
            break
        known = found
    return known


def _zero_filled_allocations(body: S.Stmt) -> dict:
    """``{id(buffer): buffer}`` of the zero-filled buffers ``body`` allocates and accesses
    only inside their ``Allocate`` (so the memory accessed is always the zero-filled one)."""
    allocated: dict = {}
    outside: set = set()

    def walk(node, live: frozenset) -> None:
        def visit(n) -> bool | None:
            if isinstance(n, S.Allocate):
                if zero_filled(n.buffer.dtype):
                    allocated[id(n.buffer)] = n.buffer
                walk(n.body, live | {id(n.buffer)})
                return False
            if isinstance(n, (E.BufferLoad, S.BufferStore)) and id(n.buffer) not in live:
                outside.add(id(n.buffer))
            return None
        pre_order_visit(node, visit)

    walk(body, frozenset())
    return {k: b for k, b in allocated.items() if k not in outside}


def _shape_of(buf: Any) -> tuple | None:
    try:
        return buf.const_shape()
    except ValueError:
        return None  # a symbolic shape (see _Checker.access)


class _Checker:
    def __init__(self, func_name: str, index_bounds: dict | None = None):
        self.func_name = func_name
        self.index_bounds = index_bounds or {}
        self.an = GuardedBounds(load_bound=self._load_bound)

    def _load_bound(self, load: E.BufferLoad) -> tuple | None:
        return self.index_bounds.get(id(load.buffer))

    # statements --------------------------------------------------------------
    def stmt(self, s: Any) -> None:
        if s is None:
            return
        meth = getattr(self, "s_" + type(s).__name__, None)
        if meth is not None:
            meth(s)

    def s_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def s_For(self, s: S.For) -> None:
        self.expr(s.min)
        self.expr(s.extent)
        lo = self.an.bound(s.min) if _is_scalar_int(s.min) else None
        last = E.binary(E.Sub, E.binary(E.Add, s.min, s.extent), E.const(1, s.extent.dtype))
        hi = self.an.bound(last) if _is_scalar_int(last) else None
        ext = self.an.bound(s.extent) if _is_scalar_int(s.extent) else None
        if ext is not None and ext[1] is not None and ext[1] <= 0:
            return  # the body never runs
        with self.an.scope():
            self.an.ranges[s.loop_var] = (None if lo is None else lo[0],
                                          None if hi is None else hi[1])
            if E.as_const_int(s.extent) is None and _is_scalar_int(s.extent):
                # a symbolic extent: what the loop guarantees is a fact on the loop
                # variable (i < n, i < (n + 3) // 4), which proves i < n for a buffer of n
                self.an.assume(E.binary(E.GE, s.loop_var, s.min))
                self.an.assume(E.binary(E.LT, s.loop_var, E.binary(E.Add, s.min, s.extent)))
                # and inside the body the extent is at least 1: so is each size of a
                # product of sizes (a fused loop of extent n * m: n >= 1 and m >= 1)
                for v in _product_vars(s.extent):
                    lo, hi = self.an.ranges.get(v) or (None, None)
                    if lo is not None and lo >= 0:
                        self.an.ranges[v] = (max(lo, 1), hi)
            self.stmt(s.body)

    def s_IfThenElse(self, s: S.IfThenElse) -> None:
        self.expr(s.condition)
        with self.an.scope():
            self.an.assume(s.condition)
            self.stmt(s.then_case)
        with self.an.scope():
            self.an.assume(s.condition, negate=True)
            self.stmt(s.else_case)

    def s_LetStmt(self, s: S.LetStmt) -> None:
        self.expr(s.value)
        with self.an.scope():
            self._bind_let(s.var, s.value)
            self.stmt(s.body)

    def s_Allocate(self, s: S.Allocate) -> None:
        self.stmt(s.body)

    def s_Evaluate(self, s: S.Evaluate) -> None:
        self.expr(s.value)

    def s_BufferStore(self, s: S.BufferStore) -> None:
        self.expr(s.value)
        for i in s.indices:
            self.expr(i)
        self.access(s.buffer, s.indices, "write")

    # expressions -------------------------------------------------------------
    def expr(self, e: Any) -> None:
        """Check every load inside ``e`` (under the guards that protect it)."""
        if not isinstance(e, E.PrimExpr) or not collect(e, E.BufferLoad):
            return
        if isinstance(e, E.BufferLoad):
            for i in e.indices:
                self.expr(i)
            self.access(e.buffer, e.indices, "read")
            return
        if isinstance(e, E.Call) and e.op == "if_then_else":
            cond, then, other = e.args
            self.expr(cond)
            for value, negate in ((then, False), (other, True)):
                with self.an.scope():
                    self.an.assume(cond, negate=negate)
                    self.expr(value)
            return
        if isinstance(e, E.Let):
            self.expr(e.value)
            with self.an.scope():
                self._bind_let(e.var, e.value)
                self.expr(e.body)
            return
        for _, v in e.fields():
            if isinstance(v, E.PrimExpr):
                self.expr(v)
            elif isinstance(v, tuple):
                for x in v:
                    self.expr(x)

    def _bind_let(self, var: E.Var, value: E.PrimExpr) -> None:
        if _is_scalar_int(value):
            self.an.ranges[var] = self.an.bound(value)
        else:
            self.an.ranges.pop(var, None)

    # the proof ---------------------------------------------------------------
    def access(self, buf: Any, indices: tuple, kind: str) -> None:
        shape = _shape_of(buf)
        if shape is None:
            self.symbolic_access(buf, indices, kind)
            return
        if len(shape) != len(indices):
            return  # flattening refuses these with its own message
        for dim, (idx, n) in enumerate(zip(indices, shape)):
            lo, hi = self.index_bound(idx)
            if lo is not None and hi is not None and 0 <= lo and hi <= n - 1:
                continue
            raise self.refusal(buf, indices, kind, dim, idx, n, lo, hi)

    def symbolic_access(self, buf: Any, indices: tuple, kind: str) -> None:
        """An access of a buffer with a symbolic shape: along a constant dimension as
        usual; along a symbolic one of size ``n``, every lane of the index must be at least
        0 and ``index - n`` at most -1 (the loops' facts ``i < n`` prove it)."""
        if len(buf.shape) != len(indices):
            return  # flattening refuses these with its own message
        for dim, (idx, n) in enumerate(zip(indices, buf.shape)):
            idx = self.without_unit_loops(idx)
            lo, hi = self.index_bound(idx)
            nc = E.as_const_int(n)
            if nc is not None:
                if lo is not None and hi is not None and 0 <= lo and hi <= nc - 1:
                    continue
                # f // n over a fused loop f < n * 3, along an axis of 3
                if _is_scalar_int(idx) and ((lo is not None and lo >= 0) or self.nonneg(idx)) \
                        and (hi is None or hi > nc - 1) and \
                        self.below(idx, E.const(nc, idx.dtype)):
                    continue
                raise self.refusal(buf, indices, kind, dim, idx, nc, lo, hi)
            if (lo is not None and lo >= 0) or self.nonneg(idx):
                if self.below(idx, n):
                    continue
                lo = 0
            raise self.symbolic_refusal(buf, indices, kind, dim, idx, n, lo)

    def without_unit_loops(self, idx: E.PrimExpr) -> E.PrimExpr:
        """``idx`` with the variables of one value (a loop of extent 1) replaced by it, so
        ``f // n + ax1`` under ``for ax1 in range(1)`` is proven as ``f // n``."""
        if not _is_scalar_int(idx):
            return idx
        fixed = {v: E.const(r[0], v.dtype) for v in collect_vars(idx)
                 for r in (self.an.ranges.get(v),) if r is not None and r[0] is not None
                 and r[0] == r[1]}
        return self.an.simplify(substitute(idx, fixed)) if fixed else idx

    def positive(self, d: E.PrimExpr) -> bool:
        """Is ``d`` provably at least 1?"""
        if not _is_scalar_int(d):
            return False
        lo = self.an.bound_tree(d)[0]
        return lo is not None and lo >= 1

    def nonneg(self, idx: E.PrimExpr) -> bool:
        """Is the scalar ``idx`` provably at least 0, also through a division or modulo by
        a positive symbolic size (``f // n``, ``f % n`` under a loop of extent ``n * m``)?"""
        if not _is_scalar_int(idx):
            return False
        lo = self.an.bound_tree(idx)[0]
        if lo is not None and lo >= 0:
            return True
        if isinstance(idx, E.FloorMod):
            return self.positive(idx.b)
        if isinstance(idx, E.FloorDiv):
            return self.positive(idx.b) and self.nonneg(idx.a)
        if isinstance(idx, E.Cast) and idx.dtype.startswith("int") and \
                bits_of(idx.dtype) >= bits_of(idx.value.dtype):
            return self.nonneg(idx.value)
        if isinstance(idx, (E.Add, E.Mul)):
            return self.nonneg(idx.a) and self.nonneg(idx.b)
        return False

    def below(self, idx: E.PrimExpr, n: E.PrimExpr) -> bool:
        """Is every lane of ``idx`` provably below the size ``n``? By the bounds and facts
        (``i < n`` from the loop), or, for ``x % d`` and ``x // d`` with ``d`` a positive
        size (a fused loop's ``f % n``, ``f // n``): ``d <= n``, and ``x < d * n``."""
        over = self.excess(idx, n)
        if over is not None and over <= -1:
            return True
        if not _is_scalar_int(idx):
            return False
        if isinstance(idx, E.Cast) and idx.dtype.startswith("int") and \
                bits_of(idx.dtype) >= bits_of(idx.value.dtype):
            return self.below(idx.value, n)
        if isinstance(idx, E.FloorMod) and self.positive(idx.b) and self.nonneg(idx.a):
            over = self.excess(idx.b, n)      # x % d <= d - 1 <= n - 1
            return over is not None and over <= 0
        if isinstance(idx, E.FloorDiv) and self.positive(idx.b) and self.nonneg(idx.a):
            d = idx.b
            if d.dtype != n.dtype:
                d, n = _widen(d), _widen(n)
            for prod in (E.Mul(d, n), E.Mul(n, d)):  # x // d <= n - 1 when x < d * n
                over = self.excess(idx.a, prod)
                if over is not None and over <= -1:
                    return True
        return False

    def excess(self, idx: E.PrimExpr, n: E.PrimExpr) -> int | None:
        """An upper bound of ``index - n`` over every lane of ``idx`` (None: unknown)."""
        if lanes_of(idx.dtype) != 1:
            if isinstance(idx, E.Broadcast):
                return self.excess(idx.value, n)
            if isinstance(idx, E.Ramp):
                last = E.binary(E.Add, idx.base, E.binary(
                    E.Mul, idx.stride, E.const(idx.lanes - 1, idx.stride.dtype)))
                a, b = self.excess(idx.base, n), self.excess(last, n)
                return None if a is None or b is None else max(a, b)
            return None
        if not _is_scalar_int(idx):
            return None
        if idx.dtype != n.dtype:
            wide = "int64"
            idx = idx if idx.dtype == wide else E.Cast(wide, idx)
            n = n if n.dtype == wide else E.Cast(wide, n)
        hi = self.an.bound_tree(E.Sub(idx, n))[1]
        if hi is not None and hi <= -1:
            return hi
        # a size rounded up, (n + 31) // 32 * 32: written as (n + 31) - (n + 31) % 32 it is
        # at least n, so i < n proves i below it
        idx2, n2 = _expand_rounding(idx), _expand_rounding(n)
        if idx2 is not idx or n2 is not n:
            hi2 = self.an.bound_tree(E.Sub(idx2, n2))[1]
            hi = hi2 if hi is None or (hi2 is not None and hi2 < hi) else hi
        if hi is not None and hi <= -1:
            return hi
        # a loop variable times a size, i * n + j below n * 3: i * n is at most 2 * n for
        # i in 0 .. 2 (n >= 0), which leaves j - n, below 0 by the loop's fact j < n
        lin = self.an.linear(E.Sub(idx2, n2))
        relaxed = self._products_at_their_ends(lin, idx.dtype)
        if relaxed is None:
            return hi
        hi3 = self.an.bound_tree(relaxed)[1]
        return hi3 if hi is None or (hi3 is not None and hi3 < hi) else hi

    def _products_at_their_ends(self, lin: tuple, dtype: str) -> E.PrimExpr | None:
        """The linear form ``lin`` with each term ``c * (v * s)`` — ``v`` a variable of a
        constant range, ``s`` a size provably at least 0 without ``v`` — written at its
        largest, ``c * (v_max * s)`` (``v_min`` for ``c < 0``): an upper bound of ``lin``
        that is linear in the sizes. None when there is no such term."""
        terms, const = lin
        out: E.PrimExpr = E.const(const, dtype)
        changed = False
        for atom, coef in terms.values():
            term = atom
            if isinstance(atom, E.Mul):
                for v, size in ((atom.a, atom.b), (atom.b, atom.a)):
                    r = self.an.ranges.get(v) if isinstance(v, E.Var) else None
                    if r is None or r[0] is None or r[1] is None or \
                            any(x is v for x in collect(size, E.Var)) or \
                            not self.nonneg(size):
                        continue
                    end = r[1] if coef > 0 else r[0]
                    term = E.binary(E.Mul, size, E.const(end, size.dtype))
                    changed = True
                    break
            out = E.binary(E.Add, out, E.binary(E.Mul, term, E.const(coef, term.dtype)))
        return out if changed else None

    def symbolic_refusal(self, buf, indices, kind, dim, idx, n, lo) -> AccessBoundsError:
        access = f"{buf.name}[{', '.join(repr_node(i) for i in indices)}]"
        idx_text, n_text = repr_node(idx), repr_node(n)
        axis = "" if len(indices) == 1 else f" along axis {dim}"
        shape = ", ".join(repr_node(d) for d in buf.shape) + ("," if len(buf.shape) == 1 else "")
        if lo is None or lo < 0:
            msg = (f"{access} may {kind} before the start of {buf.name} ({idx_text} cannot "
                   f"be proven at least 0{axis}; {buf.name} has the symbolic shape ({shape}))")
        else:
            msg = (f"{access} may {kind} past the end of {buf.name} ({idx_text} cannot be "
                   f"proven below {n_text}{axis}: {buf.name} has the symbolic shape "
                   f"({shape}); bound the loop by {n_text}, or guard the access with an if "
                   f"(or T.where) {idx_text} < {n_text})")
        return AccessBoundsError(msg, buf.name, access)

    def index_bound(self, idx: E.PrimExpr) -> tuple:
        """Inclusive (lo, hi) of every lane of an index (None ends when unknown)."""
        if lanes_of(idx.dtype) == 1:
            return self.an.bound_tree(idx) if _is_scalar_int(idx) else (None, None)
        if isinstance(idx, E.Broadcast):
            return self.index_bound(idx.value)
        if isinstance(idx, E.Ramp):
            last = E.binary(E.Add, idx.base, E.binary(E.Mul, idx.stride,
                                                      E.const(idx.lanes - 1, idx.stride.dtype)))
            first, end = self.index_bound(idx.base), self.index_bound(last)
            lo = None if first[0] is None or end[0] is None else min(first[0], end[0])
            hi = None if first[1] is None or end[1] is None else max(first[1], end[1])
            return lo, hi
        return None, None

    def refusal(self, buf, indices, kind, dim, idx, n, lo, hi) -> AccessBoundsError:
        access = f"{buf.name}[{', '.join(repr_node(i) for i in indices)}]"
        idx_text = repr_node(idx)
        shape = _shape_of(buf)
        shape_text = str(tuple(shape)) if shape is not None else \
            "(" + ", ".join(repr_node(d) for d in buf.shape) + ")"
        size = (f"{buf.name} has {n} elements" if len(indices) == 1 else
                f"{buf.name} has {n} elements along axis {dim} of its shape {shape_text}")
        past = hi is None or hi > n - 1
        where = "past the end of" if past else "before the start of"
        reach = hi if past else lo
        read = collect(idx, E.BufferLoad)
        loads = sorted({ld.buffer.name for ld in read})
        if loads and reach is not None and all(id(ld.buffer) in self.index_bounds
                                               for ld in read):
            why = (f"{idx_text} reaches {reach} (it is read from {', '.join(loads)}, whose "
                   f"elements are 0 or the values stored into them), {size}")
        elif loads:
            why = (f"{idx_text} is read from {', '.join(loads)} and nothing bounds it; "
                   f"{size}: clamp the index with T.min/T.max or guard the access with an if")
        elif reach is not None:
            why = f"{idx_text} reaches {reach}, {size}"
        else:
            why = (f"{idx_text} has no bound that can be proven; {size}: bound the loops "
                   "or guard the access with an if")
        msg = f"{access} may {kind} {where} {buf.name} ({why})"
        return AccessBoundsError(msg, buf.name, access)


def _expand_rounding(e: E.PrimExpr) -> E.PrimExpr:
    """``e`` with every ``x // c * (k * c)`` written ``(x - x % c) * k`` (floor division's
    identity), so that the bounds see ``x`` itself; ``e`` itself when there is none."""
    if isinstance(e, E.Mul):
        for fd, other in ((e.a, e.b), (e.b, e.a)):
            c2 = E.as_const_int(other)
            if isinstance(fd, E.FloorDiv) and c2 is not None:
                c1 = E.as_const_int(fd.b)
                if c1 is not None and c1 > 0 and c2 % c1 == 0:
                    x = _expand_rounding(fd.a)
                    rest = E.Sub(x, E.FloorMod(x, fd.b))
                    k = c2 // c1
                    return rest if k == 1 else E.Mul(rest, E.const(k, e.dtype))
    if isinstance(e, (E.Add, E.Sub, E.Mul)):
        a, b = _expand_rounding(e.a), _expand_rounding(e.b)
        if a is not e.a or b is not e.b:
            return type(e)(a, b)
    if isinstance(e, E.Cast):
        v = _expand_rounding(e.value)
        if v is not e.value:
            return E.Cast(e.dtype, v)
    return e


def _widen(e: E.PrimExpr) -> E.PrimExpr:
    return e if e.dtype == "int64" else E.Cast("int64", e)


def _product_vars(e: Any) -> list:
    """The variables of ``e`` when it is a product of variables and positive constants
    (``n``, ``n * m``, ``T.Cast("int64", n) * 4``), else none."""
    if isinstance(e, E.Var):
        return [e]
    if isinstance(e, E.Cast) and _is_scalar_int(e.value):
        return _product_vars(e.value)
    if isinstance(e, E.Mul):
        a, b = e.a, e.b
        ca, cb = E.as_const_int(a), E.as_const_int(b)
        if ca is not None:
            return _product_vars(b) if ca > 0 else []
        if cb is not None:
            return _product_vars(a) if cb > 0 else []
        va, vb = _product_vars(a), _product_vars(b)
        return va + vb if va and vb else []
    return []


def _is_scalar_int(e: Any) -> bool:
    dt = getattr(e, "dtype", "")
    return isinstance(e, E.PrimExpr) and lanes_of(dt) == 1 and \
        (dt.startswith("int") or dt.startswith("uint"))


class _StoreBounds(_Checker):
    """The pre-pass: the hull of 0 and the values stored into each candidate buffer (None
    once a store cannot be bounded within the buffer's dtype). Refuses nothing."""

    def __init__(self, func_name: str, known: dict, candidates: dict):
        super().__init__(func_name, known)
        self.hull: dict = {k: (0, 0) for k in candidates}

    def access(self, buf: Any, indices: tuple, kind: str) -> None:
        pass

    def s_BufferStore(self, s: S.BufferStore) -> None:
        key = id(s.buffer)
        if key not in self.hull or self.hull[key] is None:
            return
        lo, hi = self.index_bound(s.value) if _is_int_value(s.value) else (None, None)
        fits = dtype_range(s.buffer.dtype)
        if lo is None or hi is None or fits is None or lo < fits[0] or hi > fits[1]:
            self.hull[key] = None
            return
        old = self.hull[key]
        self.hull[key] = (min(old[0], lo), max(old[1], hi))


def _is_int_value(e: Any) -> bool:
    """A scalar or vector integer value."""
    dt = getattr(e, "dtype", "")
    return isinstance(e, E.PrimExpr) and (dt.startswith("int") or dt.startswith("uint"))

"""Peel the partial vector of a split that does not divide its loop.

A loop split by a factor that does not divide its extent and then vectorized keeps the
split's predicate (``T.where``) per lane: after vectorize the body holds
``if Ramp(a * v + b, 1, L) < Broadcast(N, L):`` around masked loads and stores, for every
iteration of the loop ``v`` outside it. Only the last iterations have lanes outside; so the
loop over ``v`` is cut in two (TVM's partition of a ``likely`` condition, here on the vector
predicate): the iterations where every lane is inside run the body without the condition —
plain vector loads and stores, which LLVM keeps in registers across an inner loop (a masked
store followed by a masked load of the same address cannot be forwarded and stalls) — and
the rest keep it (masked lanes).

Before (after vectorize)::

    for j_0 in range(7):                       # 100 columns in vectors of 16
        for k in range(128):
            if T.Ramp(j_0 * 16, 1, 16) < T.Broadcast(100, 16):
                C[T.Ramp(i * 100 + j_0 * 16, 1, 16)] = ...

After::

    for j_0 in range(6):                       # lanes 0..95: all inside
        for k in range(128):
            C[T.Ramp(i * 100 + j_0 * 16, 1, 16)] = ...
    for j_0_tail in range(6, 7):               # lanes 96..111: 4 inside
        for k in range(128):
            if T.Ramp(j_0_tail * 16, 1, 16) < T.Broadcast(100, 16):
                C[T.Ramp(i * 100 + j_0_tail * 16, 1, 16)] = ...

Only serial loops with constant bounds are cut, and only when every per-lane condition
under them that mentions their variable has that form (a positive multiple of the loop
variable plus a constant, stride 1, a constant bound); anything else is left as it was.
The accesses of the first part are those the bounds proof already covered under the
predicate (every lane true), so the proof stands.
"""
from __future__ import annotations

from engine.arith.affine import affine_terms
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.dtype import lanes_of
from engine.ir.functor import Mutator, collect_stmts, substitute, uses_var


def _lane_conditions(body: S.Stmt, var: E.Var) -> list[S.IfThenElse] | None:
    """The per-lane conditions under ``body`` that mention ``var`` (None: there are none)."""
    found = [s for s in collect_stmts(body, S.IfThenElse)
             if lanes_of(s.condition.dtype) != 1 and uses_var(s.condition, var)]
    return found or None


def _all_lanes_below(cond: E.PrimExpr, var: E.Var) -> int | None:
    """For ``Ramp(a * var + b, 1, L) < Broadcast(N, L)`` (a > 0): the smallest value of
    ``var`` from which some lane is outside (every lane is inside for ``var`` below it);
    None for any other condition."""
    if not (isinstance(cond, E.LT) and isinstance(cond.a, E.Ramp)
            and isinstance(cond.b, E.Broadcast)):
        return None
    ramp, bound = cond.a, cond.b
    n = E.as_const_int(bound.value)
    if n is None or E.as_const_int(ramp.stride) != 1:
        return None
    affine = affine_terms(ramp.base)
    if affine is None:
        return None
    coefs, const = affine
    if set(coefs) != {var} or coefs[var] <= 0:
        return None
    a = coefs[var]
    # every lane inside: a * var + const + (L - 1) < n  <=>  var < ceil((n - const - L + 1) / a)
    return -((const + ramp.lanes - 1 - n) // a)


class _DropConditions(Mutator):
    """The body with the given per-lane conditions replaced by their then-branch."""

    def __init__(self, conds: list[S.IfThenElse]):
        self.ids = {id(c) for c in conds}

    def visit_IfThenElse(self, s: S.IfThenElse):
        if id(s) in self.ids:
            return self.visit(s.then_case)
        return self.generic_visit(s)


def _peel(loop: S.For) -> S.Stmt:
    lo, ext = E.as_const_int(loop.min), E.as_const_int(loop.extent)
    if loop.kind is not S.ForKind.SERIAL or lo is None or ext is None or ext < 2:
        return loop
    conds = _lane_conditions(loop.body, loop.loop_var)
    if conds is None or any(c.else_case is not None for c in conds):
        return loop
    cuts = [_all_lanes_below(c.condition, loop.loop_var) for c in conds]
    if any(c is None for c in cuts):
        return loop
    full = min(cuts)
    if not lo < full < lo + ext:
        return loop
    dt = loop.loop_var.dtype
    head = S.For(loop.loop_var, E.IntImm(dt, lo), E.IntImm(dt, full - lo), loop.kind,
                 _DropConditions(conds).visit(loop.body), loop.annotations, loop.thread_tag)
    tail_var = E.Var(f"{loop.loop_var.name}_tail", dt)
    tail = S.For(tail_var, E.IntImm(dt, full), E.IntImm(dt, lo + ext - full), loop.kind,
                 substitute(loop.body, {loop.loop_var: tail_var}), loop.annotations,
                 loop.thread_tag)
    return S.SeqStmt((head, tail))


class _Peeler(Mutator):
    def visit_For(self, s: S.For):
        if not any(uses_var(c, s.loop_var) for c in self.conditions):
            return self.generic_visit(s)
        return _peel(self.generic_visit(s))   # inner loops first


def peel_vector_tails(body: S.Stmt) -> S.Stmt:
    """Cut every serial loop whose per-lane conditions are all of the split form into the
    iterations with every lane inside (no condition) and the rest (see the module
    docstring)."""
    conditions = [s.condition for s in collect_stmts(body, S.IfThenElse)
                  if lanes_of(s.condition.dtype) != 1]
    if not conditions:             # most programs: nothing to look at
        return body
    peeler = _Peeler()
    peeler.conditions = conditions
    return peeler.visit(body)

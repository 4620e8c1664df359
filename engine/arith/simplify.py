"""Expression simplifier (baseline: constant folding and algebraic identities)."""
from __future__ import annotations

from typing import Any

from engine.ir import expr as E
from engine.ir.functor import Mutator


def _ival(e: Any) -> int | None:
    return e.value if isinstance(e, E.IntImm) else None


class _Simplifier(Mutator):
    def _fold(self, n: E.BinaryOp) -> E.PrimExpr:
        n = self.generic_visit(n)
        a, b = n.a, n.b
        ia, ib = _ival(a), _ival(b)
        t = type(n)
        if ia is not None and ib is not None and E.is_const_int(a) and a.dtype == b.dtype:
            dt = a.dtype
            if t is E.Add:
                return E.IntImm(dt, ia + ib)
            if t is E.Sub:
                return E.IntImm(dt, ia - ib)
            if t is E.Mul:
                return E.IntImm(dt, ia * ib)
            if t is E.FloorDiv and ib != 0:
                return E.IntImm(dt, ia // ib)
            if t is E.FloorMod and ib != 0:
                return E.IntImm(dt, ia % ib)
            if t is E.Min:
                return E.IntImm(dt, min(ia, ib))
            if t is E.Max:
                return E.IntImm(dt, max(ia, ib))
        if t is E.Add:
            if ib == 0:
                return a
            if ia == 0:
                return b
        if t is E.Sub and ib == 0:
            return a
        if t is E.Mul:
            if ib == 1:
                return a
            if ia == 1:
                return b
            if ia == 0 or ib == 0:
                return E.IntImm(a.dtype, 0) if E.is_int(a.dtype) else n
        if t is E.FloorDiv and ib == 1:
            return a
        if t is E.FloorMod and ib == 1:
            return E.IntImm(a.dtype, 0)
        return n

    visit_Add = visit_Sub = visit_Mul = visit_FloorDiv = visit_FloorMod = _fold
    visit_Min = visit_Max = _fold


def simplify(e: Any) -> Any:
    """Simplify an expression (or every expression inside a statement)."""
    return _Simplifier().visit(e)

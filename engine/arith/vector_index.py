"""Vector index rules: ``Ramp // c`` and ``Ramp % c`` without per-lane division.

The vectorizer (:mod:`engine.lower.legalize`) turns the loop variable of a vectorized loop
into ``Ramp(base, 1, L)``; an index that divides it by a constant (a layout such as
``transform_layout(lambda k, j: (j // 64, k, j % 64))``) then becomes vector division::

    B_global[T.Ramp(x * 16, 1, 16) // T.Broadcast(64, 16) * T.Broadcast(16384, 16)
             + T.Broadcast(k * 64, 16) + T.Ramp(x * 16, 1, 16) % T.Broadcast(64, 16)] = ...

which the code generator can only scatter lane by lane. When the ``L`` lanes provably stay
inside one block ``[q*c, q*c + c)`` (here: ``x * 16`` is a multiple of 16, 16 divides 64,
and 16 lanes starting at a multiple of 16 never cross a multiple of 64) every lane has
the same quotient, so (TVM's ``RewriteSimplifier`` rules for ``floordiv``/``floormod`` of
a ramp)::

    Ramp(b, s, L) // c  ->  Broadcast(b // c, L)
    Ramp(b, s, L) %  c  ->  Ramp(b % c, s, L)

and the usual vector folds (:func:`fold_vector_arith`: ``Broadcast(x) * Broadcast(y)``,
``Broadcast(x) + Ramp(b, s, L)``, ``Ramp * Broadcast``, ...) make the whole index one ramp::

    B_global[T.Ramp(x // 4 * 16384 + k * 64 + x % 4 * 16, 1, 16)] = ...

a single contiguous vector store. A stride that is a multiple of ``c`` needs no proof:
``Ramp(b, k*c, L) // c -> Ramp(b // c, k, L)`` and ``Ramp(b, k*c, L) % c ->
Broadcast(b % c, L)``.

**Proof** (:func:`lanes_in_one_block`). Write ``b = M + B + K``: ``M`` collects the terms
``coef * atom`` whose *modular set* (:func:`modular_set`: ``atom = m*k + r`` for all
values) makes ``coef * m`` a multiple of a divisor ``g`` of ``c`` (their residues
``coef * r`` go into the constant ``K``); ``B`` collects the other terms, each of which
must have a known interval (loop ranges). If ``[min(B) + K + lo, max(B) + K + hi]``
(``lo``/``hi`` the smallest/largest lane offset ``i*s``) lies inside one block
``[q*g, q*g + g)``, then ``b + i*s = g*N + r_i`` with ``0 <= r_i < g`` for every lane,
and since ``g | c`` the value ``g*N mod c`` is at most ``c - g``: no lane crosses a
multiple of ``c``. This holds for negative values too (floor semantics). Every divisor
``g`` of ``c`` large enough to hold the lanes is tried, largest first: ``g = c`` is the
pure range proof, ``B`` empty the pure divisibility proof. When nothing proves it, the
expression is left as it is (codegen then computes it lane by lane, always correct).
"""
from __future__ import annotations

import math
from typing import Callable, Optional

from engine.ir import expr as E
from engine.ir.dtype import bits_of, is_int, is_uint, lanes_of

from .factor import MAX_FACTORED, divisors

Bound = Callable[[E.PrimExpr], Optional[tuple]]

__all__ = ["modular_set", "lanes_in_one_block", "ramp_divmod", "fold_vector_arith",
           "divmod_common_factor"]


def _ci(e) -> int | None:
    if isinstance(e, E.IntImm) and lanes_of(e.dtype) == 1 and not is_uint(e.dtype):
        return e.value
    return None


def _norm(coeff: int, base: int) -> tuple[int, int]:
    coeff = abs(coeff)
    return (coeff, base % coeff) if coeff else (0, base)


def modular_set(e: E.PrimExpr) -> tuple[int, int]:
    """``(m, r)`` such that ``e == m*k + r`` for some integer ``k``, for every value of the
    variables (``m == 0``: ``e`` is exactly ``r``; ``(1, 0)``: nothing known).

    ``x * 16 + 4 -> (16, 4)``; ``(x * 8) % 64 -> (8, 0)``; ``(x * 32) // 4 -> (8, 0)``.
    Only integer scalar expressions with floor semantics are analysed; anything else
    (truncating division, loads, calls, narrowing casts) is ``(1, 0)``.
    """
    if not is_int(e.dtype) or lanes_of(e.dtype) != 1:
        return 1, 0
    if isinstance(e, E.IntImm):
        return 0, e.value
    if isinstance(e, (E.Add, E.Sub)):
        ca, ba = modular_set(e.a)
        cb, bb = modular_set(e.b)
        return _norm(math.gcd(ca, cb), ba + bb if isinstance(e, E.Add) else ba - bb)
    if isinstance(e, E.Mul):
        ca, ba = modular_set(e.a)
        cb, bb = modular_set(e.b)
        # (ca*k1 + ba)(cb*k2 + bb) = ca*cb*k1*k2 + ca*bb*k1 + cb*ba*k2 + ba*bb
        return _norm(math.gcd(ca * cb, ca * bb, cb * ba), ba * bb)
    if isinstance(e, (E.FloorDiv, E.FloorMod)):
        c = _ci(e.b)
        if c is None or c <= 0:
            return 1, 0
        ca, ba = modular_set(e.a)
        if isinstance(e, E.FloorDiv):
            if ca == 0:
                return 0, ba // c
            if ca % c == 0:  # (c*m'*k + ba) // c = m'*k + ba // c
                return _norm(ca // c, ba // c)
            return 1, 0
        if ca == 0:
            return 0, ba % c
        return _norm(math.gcd(ca, c), ba)  # a - c*q keeps a's residue modulo gcd(ca, c)
    if isinstance(e, (E.Min, E.Max)) or isinstance(e, E.Select):
        ta, tb = (e.a, e.b) if not isinstance(e, E.Select) else (e.true_value, e.false_value)
        ca, ba = modular_set(ta)
        cb, bb = modular_set(tb)
        return _norm(math.gcd(ca, cb, ba - bb), ba)
    if isinstance(e, E.Cast) and is_int(e.value.dtype) and not is_uint(e.value.dtype) \
            and lanes_of(e.value.dtype) == 1 and bits_of(e.dtype) >= bits_of(e.value.dtype):
        return modular_set(e.value)  # a widening cast keeps the value
    return 1, 0


def _divisors_desc(c: int) -> list[int]:
    """The divisors of ``c`` largest first (only ``c`` itself when it is too large to
    factor: the proofs that need the others then do not apply)."""
    if c >= MAX_FACTORED:
        return [c]
    return divisors(c)[::-1]


def _linear(b: E.PrimExpr) -> tuple[list, int]:
    """``[(atom, coef)], const`` with ``b == sum(coef * atom) + const`` (no ranges used)."""
    from .simplify import Analyzer
    terms, const = Analyzer().linear(b)
    return list(terms.values()), const


def lanes_in_one_block(base: E.PrimExpr, span: int, c: int, bound: Bound) -> bool:
    """True when ``(base + t) // c`` is the same for every ``t`` between 0 and ``span``.

    ``bound(atom)`` gives an inclusive integer interval ``(lo, hi)`` of a scalar expression
    from the known loop ranges, or None. See the module docstring for the proof.
    """
    if c <= 0:
        return False
    lo_off, hi_off = min(0, span), max(0, span)
    width = hi_off - lo_off + 1
    if width > c:
        return False
    terms, const = _linear(base)
    mods = [(atom, coef, modular_set(atom)) for atom, coef in terms]
    bounds: dict[int, tuple | None] = {}
    for g in _divisors_desc(c):
        if g < width:
            break
        k, blo, bhi, ok = const, 0, 0, True
        for i, (atom, coef, (m, r)) in enumerate(mods):
            if (coef * m) % g == 0:  # coef*atom = (multiple of g) + coef*r
                k += coef * r
                continue
            if i not in bounds:
                bounds[i] = bound(atom)
            bd = bounds[i]
            if bd is None or bd[0] is None or bd[1] is None:
                ok = False
                break
            lo, hi = bd[0] * coef, bd[1] * coef
            blo, bhi = blo + min(lo, hi), bhi + max(lo, hi)
        if ok and (blo + k + lo_off) // g == (bhi + k + hi_off) // g:
            return True
    return False


def divmod_common_factor(op: type, a: E.PrimExpr, c: int) -> E.PrimExpr:
    """``a // c`` or ``a % c`` with a common factor cancelled: ``(x * 16) // 64 -> x // 4``,
    ``(x * 16) % 64 -> x % 4 * 16`` (exact for all integers: ``(g*t) // (g*c') = t // c'``
    and ``(g*t) % (g*c') = g * (t % c')``)."""
    dt = a.dtype
    terms, const = _linear(a)
    g = math.gcd(c, const, *(coef for _atom, coef in terms))
    if g <= 1 or not terms:
        return op(a, E.IntImm(dt, c))
    from .simplify import Analyzer
    an = Analyzer()
    reduced = an.rebuild(({i: (atom, coef // g) for i, (atom, coef) in enumerate(terms)},
                          const // g), dt)
    if c // g == 1:
        return reduced if op is E.FloorDiv else E.IntImm(dt, 0)
    out = op(reduced, E.IntImm(dt, c // g))
    return out if op is E.FloorDiv else E.Mul(out, E.IntImm(dt, g))


def ramp_divmod(op: type, ramp: E.Ramp, c: int, bound: Bound) -> E.PrimExpr | None:
    """The rewrite of ``ramp // c`` (``op`` FloorDiv) or ``ramp % c`` (FloorMod), or None.

    The scalar parts of the result are left unsimplified (the caller simplifies them).
    """
    s = _ci(ramp.stride)
    dt = ramp.base.dtype
    if s is None or c <= 0 or not is_int(dt) or is_uint(dt) or lanes_of(dt) != 1:
        return None
    L, b = ramp.lanes, ramp.base
    if s % c == 0:  # every lane moves by a whole number of blocks
        if op is E.FloorDiv:
            q = divmod_common_factor(E.FloorDiv, b, c)
            return E.Ramp(q, E.IntImm(dt, s // c), L) if s else E.Broadcast(q, L)
        return E.Broadcast(divmod_common_factor(E.FloorMod, b, c), L)
    if not lanes_in_one_block(b, s * (L - 1), c, bound):
        return None
    if op is E.FloorDiv:
        return E.Broadcast(divmod_common_factor(E.FloorDiv, b, c), L)
    return E.Ramp(divmod_common_factor(E.FloorMod, b, c), ramp.stride, L)


def _vec_parts(e: E.PrimExpr):
    """``("b", value)`` for a Broadcast, ``("r", base, stride)`` for a Ramp, else None."""
    if isinstance(e, E.Broadcast):
        return ("b", e.value)
    if isinstance(e, E.Ramp):
        return ("r", e.base, e.stride)
    return None


def fold_vector_arith(e: E.PrimExpr) -> E.PrimExpr | None:
    """One step of integer vector folding, or None when no rule applies::

        Broadcast(x) op Broadcast(y)   -> Broadcast(x op y)        (op: + - * // %)
        Ramp(b, s) + Broadcast(x)      -> Ramp(b + x, s)           (and x + ramp, ramp - x)
        Broadcast(x) - Ramp(b, s)      -> Ramp(x - b, 0 - s)
        Ramp(b1, s1) +/- Ramp(b2, s2)  -> Ramp(b1 +/- b2, s1 +/- s2)
        Ramp(b, s) * Broadcast(x)      -> Ramp(b * x, s * x)       (and x * ramp)

    All exact lane by lane (integer arithmetic). The scalar parts are not simplified.
    """
    if not isinstance(e, (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod)):
        return None
    if not is_int(e.dtype) or lanes_of(e.dtype) == 1:
        return None
    pa, pb = _vec_parts(e.a), _vec_parts(e.b)
    if pa is None or pb is None:
        return None
    t = type(e)
    lanes = lanes_of(e.dtype)
    if lanes_of(e.a.dtype) != lanes or lanes_of(e.b.dtype) != lanes \
            or pa[1].dtype != pb[1].dtype:
        return None
    if pa[0] == "b" and pb[0] == "b":
        if t in (E.FloorDiv, E.FloorMod):
            c = _ci(pb[1])
            if c is None or c <= 0:
                return None
            return E.Broadcast(divmod_common_factor(t, pa[1], c), lanes)
        return E.Broadcast(t(pa[1], pb[1]), lanes)
    if t in (E.Add, E.Sub):
        if pa[0] == "r" and pb[0] == "b":
            return E.Ramp(t(pa[1], pb[1]), pa[2], lanes)
        if pa[0] == "b" and pb[0] == "r":
            stride = pb[2] if t is E.Add else E.Sub(E.IntImm(pb[2].dtype, 0), pb[2])
            return E.Ramp(t(pa[1], pb[1]), stride, lanes)
        return E.Ramp(t(pa[1], pb[1]), t(pa[2], pb[2]), lanes)
    if t is E.Mul:
        if pa[0] == "r" and pb[0] == "b":
            return E.Ramp(E.Mul(pa[1], pb[1]), E.Mul(pa[2], pb[1]), lanes)
        if pa[0] == "b" and pb[0] == "r":
            return E.Ramp(E.Mul(pb[1], pa[1]), E.Mul(pb[2], pa[1]), lanes)
    return None

"""Digits of an index: an atom ``X // d % m`` read as the digit of ``X`` in base ``d``.

``split`` makes such atoms (``i // 4``, ``i % 4``, ``i // 4 % 8``); the lowering's
trivial-init test and the parallel-race proof both need to read them back.
"""
from __future__ import annotations

from engine.ir import expr as E


def digit_of(atom: E.PrimExpr):
    """``(X, d, m)`` when ``atom`` is ``X // d % m`` with positive constants (``d`` 1: no
    division; ``m`` None: no modulo); ``X`` itself reads as ``(X, 1, None)``.

    Before: ``i // 4 % 8``  ->  ``(i, 4, 8)``;  ``i % 32 // 4``  ->  ``(i, 4, 8)`` too
    (``X % m // d == X // d % (m / d)`` when ``d`` divides ``m``).  None when a divisor or
    modulus is not a positive constant, or ``m`` is not a multiple of ``d``."""
    if isinstance(atom, E.FloorDiv) and isinstance(atom.a, E.FloorMod):
        d, m = E.as_const_int(atom.b), E.as_const_int(atom.a.b)
        if d and m and d > 0 and m > 0 and m % d == 0:
            return atom.a.a, d, m // d
        return None
    m = None
    if isinstance(atom, E.FloorMod):
        m = E.as_const_int(atom.b)
        if m is None or m <= 0:
            return None
        atom = atom.a
    d = 1
    if isinstance(atom, E.FloorDiv):
        d = E.as_const_int(atom.b)
        if d is None or d <= 0:
            return None
        atom = atom.a
    return atom, d, m

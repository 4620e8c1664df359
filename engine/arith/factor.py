"""Factoring integers at a cost bounded in advance, whatever the integer.

Loop extents, split factors and index constants come from programs and links written by
anyone, so a factorisation must never cost what trial division costs on a large prime
(``2**61 - 1`` needs a billion divisions). Here an integer below :data:`MAX_FACTORED`
(``2**64``) is factored by trial division up to :data:`_SMALL`, then Miller-Rabin (exact
below ``3.3 * 10**24`` with the first twelve primes as bases) and Pollard-Brent's rho on
what is left: at most about ``2**16`` steps of the rho loop for the hardest 64-bit
number, milliseconds. Larger integers are refused (:class:`FactorLimitError`), never
attempted.

    >>> prime_factors(360)
    [(2, 3), (3, 2), (5, 1)]
    >>> divisors(12)
    [1, 2, 3, 4, 6, 12]
    >>> prime_factors(2**61 - 1)
    [(2305843009213693951, 1)]
"""
from __future__ import annotations

import functools
import math

__all__ = ["MAX_FACTORED", "FactorLimitError", "prime_factors", "prime_divisors",
           "divisors", "is_prime"]

#: integers at or above this are not factored (every loop extent of int64 is below it)
MAX_FACTORED = 1 << 64
_SMALL = 1 << 10
_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
#: the most divisors any integer below 2**64 has is 103,680; lists of them stay small
MAX_DIVISORS = 1 << 17


class FactorLimitError(ValueError):
    """An integer too large to be factored within the bound (the message says so)."""


def _check(n: int) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"only positive integers are factored, got {n!r}")
    if n >= MAX_FACTORED:
        raise FactorLimitError(f"{n} is too large to factor (the limit is 2**64 - 1)")
    return n


def is_prime(n: int) -> bool:
    """Whether ``1 <= n < 2**64`` is prime (deterministic Miller-Rabin)."""
    _check(n)
    if n < 2:
        return False
    for p in _BASES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _rho(n: int) -> int:
    """A non-trivial factor of the odd composite ``n`` (Pollard-Brent, gcds in batches)."""
    for c in range(1, n):
        y, m, g, r, q = 2, 128, 1, 1, 1
        x = ys = y
        while g == 1:
            x = y
            for _ in range(r):
                y = (y * y + c) % n
            k = 0
            while k < r and g == 1:
                ys = y
                for _ in range(min(m, r - k)):
                    y = (y * y + c) % n
                    q = q * abs(x - y) % n
                g = math.gcd(q, n)
                k += m
            r *= 2
        if g == n:
            g = 1
            while g == 1:
                ys = (ys * ys + c) % n
                g = math.gcd(abs(x - ys), n)
        if g != n:
            return g
    raise AssertionError(f"no factor of {n} found")  # pragma: no cover - n is composite


def _split(n: int, out: dict[int, int]) -> None:
    if n == 1:
        return
    if is_prime(n):
        out[n] = out.get(n, 0) + 1
        return
    d = _rho(n)
    _split(d, out)
    _split(n // d, out)


@functools.lru_cache(maxsize=1024)
def _factor(n: int) -> tuple[tuple[int, int], ...]:
    out: dict[int, int] = {}
    p = 2
    while p < _SMALL and p * p <= n:
        while n % p == 0:
            n //= p
            out[p] = out.get(p, 0) + 1
        p += 1 if p == 2 else 2
    if n > 1:
        if n < p * p:
            out[n] = out.get(n, 0) + 1
        else:
            _split(n, out)
    return tuple(sorted(out.items()))


def prime_factors(n: int) -> list[tuple[int, int]]:
    """``n`` as ``[(prime, exponent), ...]``, smallest prime first (``1 <= n < 2**64``;
    :class:`FactorLimitError` above)."""
    return list(_factor(_check(n)))


def prime_divisors(n: int) -> list[int]:
    """The distinct primes dividing ``n``, ascending."""
    return [p for p, _ in prime_factors(n)]


def divisors(n: int, at_most: int | None = None) -> list[int]:
    """The divisors of ``n`` ascending (only those ``<= at_most`` when given)."""
    out = [1]
    for p, e in prime_factors(n):
        out = [d * p ** k for d in out for k in range(e + 1)
               if at_most is None or d * p ** k <= at_most]
    return sorted(out)

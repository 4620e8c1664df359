"""Adaptive timing: repeat a call until its best times agree, the one loop every measurement
uses (the explorer's measured steps, the tuner's candidates, numpy's reference).

::

    best, calls = repeat_until_stable(call, one_s)      # one_s: a first estimate of a call

One *repeat* runs ``call`` back to back ``number`` times, enough to last ``batch_seconds``
(small kernels are batched, so the clock's resolution and the call's overhead vanish; a
slower kernel runs once per repeat, so a hiccup spoils one repeat, not all). The best repeat
is the figure: on a shared machine noise only ever adds time. Repeats stop, after
``min_repeats``, once the ``agree`` best repeats are within ``fraction`` of the best (a
tight interval around the figure reported), or once ``budget`` seconds are spent, or after
``max_repeats``. A quiet machine stops after three or four short repeats; a noisy one gets
more, up to the budget.
"""
from __future__ import annotations

import time
from typing import Any, Callable

__all__ = ["repeat_until_stable"]


def repeat_until_stable(call: Callable[[], Any], one_s: float, *,
                        batch_seconds: float = 0.002, agree: int = 3,
                        fraction: float = 0.02, min_repeats: int = 3,
                        max_repeats: int | None = None, budget: float = 0.08,
                        max_number: int = 100_000,
                        clock: Callable[[], float] = time.perf_counter) -> tuple[float, int]:
    """``(best seconds per call, calls made)``; see the module docstring. ``clock``:
    seconds now (tests pass a fake one)."""
    if agree < 1 or min_repeats < agree:
        raise ValueError(f"need 1 <= agree <= min_repeats, got agree={agree}, "
                         f"min_repeats={min_repeats}")
    number = max(1, min(max_number, int(batch_seconds / max(one_s, 1e-7))))
    samples: list[float] = []
    start = clock()
    while max_repeats is None or len(samples) < max_repeats:
        t0 = clock()
        for _ in range(number):
            call()
        samples.append((clock() - t0) / number)
        if len(samples) >= min_repeats:
            best = sorted(samples)[:agree]
            if best[-1] <= best[0] * (1.0 + fraction) or clock() - start >= budget:
                break
    return min(samples), number * len(samples)

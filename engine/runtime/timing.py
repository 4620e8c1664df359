"""Adaptive timing: the one function every measurement uses — the explorer's measured
steps and numpy's reference beside them (``app/service/timing.py``), the tuner's
candidates and its numpy reference (:mod:`engine.tune.measure`), the benchmarks.

::

    seconds = time_until_stable(call)                     # best seconds per call
    seconds = time_until_stable(call, best_so_far=0.002)  # a tuner's candidate
    seconds = time_until_stable(call, first_s=checked_run_s, budget=0.012)   # the explorer

A first call (or ``first_s``, the time of a run just made) says how long a call takes. A
call slower than :data:`SLOW_CALL_S`, or than :data:`SLOW_FACTOR` x ``best_so_far`` (a
tuner's candidate that will not be the best), is run once more and the faster of the two
is its figure: its rank is clear. Otherwise one *repeat* runs ``call`` back to back enough
times to last :data:`BATCH_SECONDS` (small kernels are batched, so the clock's resolution
and the call's overhead vanish; a slower kernel runs once per repeat, so a hiccup spoils one
repeat, not all). The best repeat is the figure: on a shared machine noise only ever adds
time.

**The stopping rule**: after ``min_repeats``, the repeats stop once the best :data:`AGREE`
agree within :data:`FRACTION` of the best (a tight interval around the figure reported),
or once ``budget`` seconds are spent, or after ``max_repeats``. A quiet machine stops
after three or four short repeats; a noisy one gets more, up to the budget. Callers choose
only how much they may spend (``budget``, ``min_repeats``, ``max_repeats``): the explorer
answers a click within ~12 ms of timing, the tuner spends up to 0.4 s on a candidate, a
reference timed once gets more repeats.

Measured on mm_relu's course steps (n=128, kernels of 0.3 and 2.7 ms, 30 timings of each,
with and without a load on the same core): the figure varies from one timing to the next
as much with a budget of 80 ms as with 20 ms (p90/p10 of 1.04-1.14 when quiet); the spread
comes from run-to-run variation, not from too few repeats.
"""
from __future__ import annotations

import time
from typing import Any, Callable

__all__ = ["time_until_stable", "BATCH_SECONDS", "AGREE", "FRACTION", "MIN_REPEATS",
           "SLOW_CALL_S", "SLOW_FACTOR", "DEFAULT_BUDGET"]

#: one repeat runs the call back to back for at least this long
BATCH_SECONDS = 0.002
#: the stopping rule: the best AGREE repeats within FRACTION of the best
AGREE = 3
FRACTION = 0.02
#: repeats run before the rule is looked at
MIN_REPEATS = 3
#: a call slower than this is timed by two runs (the faster counts)
SLOW_CALL_S = 0.5
#: ... and so is one slower than SLOW_FACTOR x the best so far (a tuner's candidate)
SLOW_FACTOR = 3.0
#: seconds of repeats at most, unless the caller says otherwise
DEFAULT_BUDGET = 0.4
#: calls per repeat at most
MAX_NUMBER = 100_000


def time_until_stable(call: Callable[[], Any], best_so_far: float | None = None, *,
                      first_s: float | None = None, warmups: int = 0,
                      budget: float = DEFAULT_BUDGET, min_repeats: int = MIN_REPEATS,
                      max_repeats: int | None = None,
                      clock: Callable[[], float] = time.perf_counter) -> float:
    """Best seconds per call of ``call()``; see the module docstring.

    ``best_so_far``: the best time of the call's competitors (a call much slower runs just
    twice); ``first_s``: the time of a call just made (else one call is made and timed
    first, the warm-up); ``warmups``: untimed calls before anything (numpy's first calls
    allocate and start its threads); ``clock``: seconds now (tests pass a fake one)."""
    if min_repeats < AGREE:
        raise ValueError(f"min_repeats must be at least {AGREE} (the repeats that must "
                         f"agree), got {min_repeats}")
    for _ in range(warmups):
        call()
    if first_s is None:
        t0 = clock()
        call()
        first_s = clock() - t0
    one = max(first_s, 1e-7)
    if one > SLOW_CALL_S or (best_so_far and one > SLOW_FACTOR * best_so_far):
        t0 = clock()
        call()
        return min(one, clock() - t0)
    number = max(1, min(MAX_NUMBER, int(BATCH_SECONDS / one)))
    samples: list[float] = []
    start = clock()
    while max_repeats is None or len(samples) < max_repeats:
        t0 = clock()
        for _ in range(number):
            call()
        samples.append((clock() - t0) / number)
        if len(samples) >= min_repeats:
            best = sorted(samples)[:AGREE]
            if best[-1] <= best[0] * (1.0 + FRACTION) or clock() - start >= budget:
                break
    return min(samples)

"""engine.runtime.timing.repeat_until_stable: the adaptive repeats of every measurement."""
from __future__ import annotations

import pytest

from engine.runtime.timing import repeat_until_stable


class _Clock:
    """A clock that only moves when the timed call runs (each call lasts the next value)."""

    def __init__(self, durations):
        self.now, self.calls, self.durations = 0.0, 0, list(durations)

    def __call__(self):
        return self.now

    def call(self):
        self.now += self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1


def test_stops_once_the_best_three_agree_and_reports_the_best():
    clock = _Clock([0.010, 0.013, 0.0101, 0.0102])
    best, calls = repeat_until_stable(clock.call, 0.01, clock=clock)
    assert best == pytest.approx(0.010) and calls == 4


def test_small_kernels_are_batched_per_repeat():
    clock = _Clock([1e-5])
    best, calls = repeat_until_stable(clock.call, 1e-5, batch_seconds=0.002, clock=clock)
    assert best == pytest.approx(1e-5)
    assert calls == 3 * 200  # three repeats of 200 calls


def test_a_noisy_machine_stops_at_the_budget_or_the_repeat_cap():
    noisy = [0.01, 0.02] * 50
    clock = _Clock(noisy)
    _, calls = repeat_until_stable(clock.call, 0.01, budget=0.1, clock=clock)
    assert 3 <= calls <= 12
    clock = _Clock(noisy)
    _, calls = repeat_until_stable(clock.call, 0.01, budget=100.0, max_repeats=5, clock=clock)
    assert calls == 5


def test_two_agreeing_repeats_suffice_when_asked():
    clock = _Clock([0.02, 0.01, 0.0101, 0.05])
    best, calls = repeat_until_stable(clock.call, 0.01, agree=2, fraction=0.03, clock=clock)
    assert best == pytest.approx(0.01) and calls == 3


def test_a_stop_rule_that_cannot_hold_is_refused():
    with pytest.raises(ValueError, match="agree"):
        repeat_until_stable(lambda: None, 0.01, agree=4, min_repeats=3)

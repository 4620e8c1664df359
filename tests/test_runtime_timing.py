"""engine.runtime.timing.time_until_stable: the one adaptive timing function of every
measurement (the explorer's steps, the tuner's candidates, numpy's references, the
benchmarks), with its one stopping rule."""
from __future__ import annotations

import pytest

from engine.runtime import timing
from engine.runtime.timing import time_until_stable


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
    clock = _Clock([0.02, 0.010, 0.013, 0.0101, 0.01015])      # a warm-up, then repeats
    assert time_until_stable(clock.call, clock=clock) == pytest.approx(0.010)
    assert clock.calls == 5


def test_a_given_first_time_replaces_the_warm_up():
    clock = _Clock([0.010, 0.0101, 0.01015])
    assert time_until_stable(clock.call, first_s=0.01, clock=clock) == pytest.approx(0.010)
    assert clock.calls == 3


def test_small_kernels_are_batched_per_repeat():
    clock = _Clock([1e-5])
    assert time_until_stable(clock.call, clock=clock) == pytest.approx(1e-5)
    per_repeat = int(timing.BATCH_SECONDS / 1e-5)
    assert clock.calls == 1 + timing.MIN_REPEATS * per_repeat


def test_a_noisy_machine_stops_at_the_budget_or_the_repeat_cap():
    noisy = [0.01, 0.02] * 50
    clock = _Clock(noisy)
    time_until_stable(clock.call, budget=0.1, clock=clock)
    assert 4 <= clock.calls <= 13
    clock = _Clock(noisy)
    time_until_stable(clock.call, budget=100.0, max_repeats=5, clock=clock)
    assert clock.calls == 1 + 5


def test_a_call_far_slower_than_the_best_so_far_or_than_half_a_second_runs_twice():
    clock = _Clock([0.05, 0.04])
    assert time_until_stable(clock.call, best_so_far=0.002, clock=clock) == pytest.approx(0.04)
    assert clock.calls == 2
    clock = _Clock([0.9, 0.8, 0.1])
    assert time_until_stable(clock.call, clock=clock) == pytest.approx(0.8)
    assert clock.calls == 2


def test_warm_ups_are_not_timed():
    clock = _Clock([5.0, 5.0, 0.01])
    assert time_until_stable(clock.call, warmups=2, clock=clock) == pytest.approx(0.01)


def test_fewer_repeats_than_must_agree_are_refused():
    with pytest.raises(ValueError, match="min_repeats must be at least 3"):
        time_until_stable(lambda: None, min_repeats=2)

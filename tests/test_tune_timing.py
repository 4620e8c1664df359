"""Adaptive timing of candidates, and mutations of the course-style mm_relu space."""
from __future__ import annotations

import numpy as np
import pytest

from engine import workloads
from engine.runtime import build
from engine.tune import measure
from engine.tune.examples import stochastic_mm_relu
from engine.tune import InlineRunner, LocalRunner, Runner, tune
from engine.tune.database import trace_digest
from engine.tune.search import EvolutionConfig, Mutation, Sampler, replay_here
from engine.tune.space import space_of
from engine.tune.task import task_of


class _FakeClock:
    """perf_counter replaced by a clock that only moves when the timed call runs."""

    def __init__(self, durations):
        self.now = 0.0
        self.calls = 0
        self.durations = list(durations)

    def perf_counter(self):
        return self.now

    def call(self):
        d = self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1
        self.now += d


def test_repeats_stop_once_the_best_three_agree():
    clock = _FakeClock([0.01])  # a steady 10 ms kernel
    assert measure.adaptive_time(clock.call, clock=clock.perf_counter) == pytest.approx(0.01)
    # warm-up, then MIN_REPEATS repeats of one run each (10 ms > the timing's batch)
    assert clock.calls == 1 + measure.MIN_REPEATS


def test_the_tuner_and_the_explorer_time_with_one_function():
    from engine.runtime.timing import time_until_stable  # noqa: PLC0415
    assert measure.adaptive_time is time_until_stable


def test_a_noisy_kernel_gets_more_repeats_and_its_best_counts():
    noisy = [0.02, 0.05, 0.03, 0.01, 0.06, 0.0101, 0.04, 0.01015, 0.07]
    clock = _FakeClock(noisy)
    assert measure.adaptive_time(clock.call, clock=clock.perf_counter) == pytest.approx(0.01)
    assert clock.calls == len(noisy) - 1  # stopped once 0.01, 0.0101 and 0.01015 agreed


def test_a_much_slower_candidate_than_the_best_runs_twice():
    clock = _FakeClock([0.05, 0.04])
    assert measure.adaptive_time(clock.call, best_so_far=0.002,
                                 clock=clock.perf_counter) == pytest.approx(0.04)
    assert clock.calls == 2


def test_mutated_course_style_candidates_replay_and_compute_mm_relu():
    sp = space_of(stochastic_mm_relu)
    task = task_of(("mm_relu", {"n": 32}), None, sp.id)
    sampler = Sampler(task, sp, seed=3)
    parent = next(c for c in iter(sampler.random, 0) if c is not None)
    children = [sampler.mutate(parent.doc, EvolutionConfig()) for _ in range(12)]
    children = [c for c in children if c is not None]
    assert children, sampler.last_error
    args = [np.asarray(a) for a in workloads.random_args("mm_relu", 0, n=32)]
    want = workloads.reference("mm_relu", n=32)(*args[:2])
    for child in children[:3]:
        sch = task.replay(child.doc)
        out = [a.copy() for a in args]
        build(sch.mod, target="llvm")["mm_relu"](*out)
        np.testing.assert_allclose(out[2], want, rtol=1e-4, atol=1e-4)


def _mutation_jobs(sampler, parent, count=16):
    """Planned mutations of ``parent`` that need a replay (plus one that cannot replay)."""
    jobs = []
    for _ in range(count * 4):
        plan = sampler.plan_mutation(parent.doc, EvolutionConfig(tile_move_probability=0.0))
        if isinstance(plan, Mutation):
            jobs.append(plan.job)
        if len(jobs) == count:
            break
    bad = dict(jobs[0][0])
    bad["decisions"] = [[n, [7, 7, 7]] for n, _ in bad["decisions"]]  # products are wrong
    return jobs + [(bad, 0)]


def test_replays_spread_over_the_workers_match_replays_here():
    """The search's replays sent to a runner's workers give exactly the traces and
    features the search would get replaying them itself; a refused one says why."""
    sp = space_of(stochastic_mm_relu)
    task = task_of(("mm_relu", {"n": 32}), None, sp.id)
    sampler = Sampler(task, sp, seed=5)
    parent = next(c for c in iter(sampler.random, 0) if c is not None)
    jobs = _mutation_jobs(sampler, parent)
    here = replay_here(task, sampler.mod, jobs)
    with LocalRunner(workers=2) as runner:
        spread = runner.replay(task, jobs)
    assert spread == here
    assert here[-1][0] is None and "multiplies to" in here[-1][2]
    assert all(doc is not None and feats for doc, feats, _ in here[:-1])


def test_a_mutation_already_known_is_not_replayed_again():
    """A fully decided child that is known is dropped before any replay, and one that was
    replayed before comes from the sampler's memory (same features), not a new replay."""
    sp = space_of(stochastic_mm_relu)
    task = task_of(("mm_relu", {"n": 32}), None, sp.id)
    sampler = Sampler(task, sp, seed=2)
    parent = next(c for c in iter(sampler.random, 0) if c is not None)
    cfg = EvolutionConfig(tile_move_probability=1.0)  # tile moves: decisions stay known
    children = [c for c in (sampler.mutate(parent.doc, cfg) for _ in range(30)) if c]
    assert children
    by_digest = {c.digest: c for c in children}
    kinds = {"known": 0, "memo": 0, "replay": 0}
    for _ in range(60):
        plan = sampler.plan_mutation(parent.doc, cfg, known=set(by_digest) - {children[0].digest})
        if plan is None:
            kinds["known"] += 1
        elif isinstance(plan, Mutation):
            kinds["replay"] += 1
            assert trace_digest(plan.job[0]) not in by_digest
        else:
            kinds["memo"] += 1
            assert plan.features == by_digest[plan.digest].features
    assert kinds["known"] and kinds["memo"], kinds


def test_fresh_samples_spread_over_the_workers_match_samples_here():
    """Fresh samples drawn by the workers are the programs the search would draw itself
    (the seeds come from the search); a space another process cannot import (a lambda,
    a function of ``__main__``) is sampled by the search itself."""
    sp = space_of(stochastic_mm_relu)
    task = task_of(("mm_relu", {"n": 32}), None, sp.id)
    sampler = Sampler(task, sp, seed=9)
    jobs = [sampler.fresh_job() for _ in range(8)]
    here = replay_here(task, sampler.mod, jobs, sp)
    local_only = space_of(lambda sch: stochastic_mm_relu(sch))
    assert not local_only.portable()
    with LocalRunner(workers=2) as runner:
        assert runner.replay(task, jobs, sp) == here
        assert runner.replay(task, jobs, local_only) is None
    assert any(doc is not None for doc, _, _ in here)
    assert all((doc is not None and feats) or reason for doc, feats, reason in here)


def test_a_candidate_whose_checked_run_was_far_slower_than_the_best_is_not_run_again():
    ctx = measure.TaskContext(task_of(("mm_relu", {"n": 16}), None, "t"))
    built = measure.Built(measure.MeasureResult(correct=True), rt=object(),  # not callable
                          checked_seconds=2.0)
    res = ctx.time(built, best_so_far=0.001)
    assert res.seconds == 2.0 and res.ok
    assert res.gflops == pytest.approx(ctx.flops / 2.0 / 1e9)


def test_auto_does_not_inline_softmax_exp_but_samples_where_it_goes():
    """softmax's exp feeds the sum and the normalisation: inlined by the rule, it would be
    computed twice per element in every candidate; its location is sampled instead (the
    root, under a consumer's loop, or inlined), so the space has programs that keep it."""
    from engine.tune.auto import _leaf_blocks  # noqa: PLC0415
    sp = space_of("auto")
    task = task_of(("softmax", {"m": 16, "n": 32}), None, sp.id)
    sampler = Sampler(task, sp, seed=0)
    cands = [c for c in (sampler.random() for _ in range(12)) if c is not None]
    assert cands, sampler.last_error
    kept = 0
    for c in cands:
        located = [inst for inst in c.doc["insts"] if inst[0] == "SampleComputeLocation"]
        assert len(located) >= 3  # max, exp and sum
        kept += "T_softmax_exp" in _leaf_blocks(task.replay(c.doc))
    assert 0 < kept


def test_a_clicked_split_names_the_block_when_two_loops_share_a_name():
    """mm_relu has an i above Y and another above C: {"loop": "i", "block": "C"} splits
    C's, and a bad block or loop is refused with the reason."""
    from engine.tune.space import DirectiveSpace  # noqa: PLC0415
    from engine.tune.task import TuneError  # noqa: PLC0415
    sp = DirectiveSpace([{"kind": "sample_split", "loop": "i", "block": "C", "n": 2}])
    task = task_of(("mm_relu", {"n": 32}), None, sp.id)
    sch = task.new_schedule(0)
    sp.apply(sch)
    loops_of = {b: [sch.get(lp).loop_var.name for lp in sch.get_loops(sch.get_block(b))]
                for b in ("Y", "C")}
    assert loops_of["Y"][0] == "i" and loops_of["C"][:2] == ["i_0", "i_1"]
    assert "above C" in sp.description
    for bad, why in (({"block": "Z"}, "no block called 'Z'"),
                     ({"loop": "k", "block": "C"}, "no loop called 'k'")):
        d = {"kind": "sample_split", "loop": "i", "block": "C", "n": 2, **bad}
        with pytest.raises(TuneError, match=why):
            DirectiveSpace([d]).apply(task.new_schedule(0))


# ------------------------------------------------------------------ settling the best
class _NoisyRunner(Runner):
    """A runner whose first measurement of a candidate is what ``first`` says (a lucky or
    unlucky spell of the machine) and whose confirmations give its true time."""

    def __init__(self, first: dict, true: dict):
        self.first, self.true, self.confirmed = first, true, []

    def _key(self, doc):
        return doc["decisions"][0][1][1]   # the inner tile of the sampled split

    def measure(self, task, traces, on_result=None):
        out = []
        for i, doc in enumerate(traces):
            res = measure.MeasureResult(self.first[self._key(doc)], 1.0 / self.first[self._key(doc)], True)
            out.append(res)
            if on_result is not None:
                on_result(i, res)
        return out

    def confirm(self, task, traces, rounds=2):
        self.confirmed.append([self._key(d) for d in traces])
        return [self.true[self._key(d)] for d in traces]

    def numpy_seconds(self, task):
        return None


def _split_space(sch):
    b = sch.get_block("Y", "mm_relu")
    i, j, k = sch.get_loops(b)
    sch.split(j, factors=sch.sample_perfect_tile(j, n=2))


def test_a_lucky_measurement_does_not_become_the_best():
    """A candidate measured fast once (a quiet spell of a shared machine) is timed again
    beside the runner-up; the faster of the two in that confirmation is the best, and
    both keep their confirmed times."""
    inner = [1, 2, 4, 8, 16, 32]
    first = {f: 1.0 for f in inner}
    first[8] = 0.5                      # measured twice as fast as it is...
    true = {f: 1.0 for f in inner}
    true[8] = 0.9
    true[4] = 0.8                       # ...and 4 is in truth the fastest
    first[4] = 0.95
    runner = _NoisyRunner(first, true)
    res = tune(("mm_relu", {"n": 32}), space=_split_space, trials=6, strategy="random",
               runner=runner, batch_size=6)
    assert runner.confirmed == [[4, 8]], "the best and the runner-up, side by side"
    best = res.best
    assert best.trace["decisions"][0][1][1] == 4
    assert best.seconds == pytest.approx(0.8)
    lucky = next(r for r in res.records if r.trace["decisions"][0][1][1] == 8)
    assert lucky.seconds == pytest.approx(0.9)
    assert lucky.gflops == pytest.approx(1 / 0.9)   # GFLOP/s scaled with the time


@pytest.mark.parametrize("kind", ["local", "inline"])
def test_a_confirmation_times_kept_candidates_without_compiling_them_again(kind, monkeypatch):
    sp = space_of(stochastic_mm_relu)
    task = task_of(("mm_relu", {"n": 32}), None, sp.id)
    sampler = Sampler(task, sp, seed=3)
    docs = []
    while len(docs) < 2:
        c = sampler.random()
        if c is not None and c.digest not in {trace_digest(d) for d in docs}:
            docs.append(c.doc)
    runner = LocalRunner(workers=2) if kind == "local" else InlineRunner()
    with runner:
        first = runner.measure(task, docs)
        assert all(r.ok for r in first)

        def rebuilt(*a, **k):
            raise AssertionError("compiled again")
        monkeypatch.setattr(runner, "measure", rebuilt)   # measuring anew compiles
        times = runner.confirm(task, docs)
        assert all(t is not None and t > 0 for t in times)
        # a candidate it does not keep is measured anew
        other = next(c for c in iter(sampler.random, 0)
                     if c is not None and c.digest not in {trace_digest(d) for d in docs})
        with pytest.raises(AssertionError, match="compiled again"):
            runner.confirm(task, [docs[0], other.doc])
        monkeypatch.undo()
        again = runner.confirm(task, [docs[0], other.doc])
        assert all(t is not None and t > 0 for t in again)

"""Challenges: 'reach this loop nest' and 'beat this time', checked on learners' traces.

Timing logic is tested with an injected deterministic timer; the one real measurement
only checks that figures were produced (no wall-clock thresholds).
"""
import pytest

import engine
from engine import challenges
from engine.challenges import BeatTime, ChallengeError, ReachNest

N = 32


def _sch(n=N):
    return engine.Schedule(engine.workloads.get("mm_relu", n=n),
                           workload=("mm_relu", {"n": n}))


def _course(n=N):
    """mm_relu at size ``n`` after the course's four steps (the ``mm_relu-course`` preset)."""
    return engine.presets.get("mm_relu-course", n=n)


def test_catalogue():
    ids = challenges.names()
    assert "mm_relu_course_nest" in ids and "mm_relu_beat_naive" in ids
    kinds = {challenges.get(i).kind for i in ids}
    assert kinds == {"reach_nest", "beat_time", "beat_model"}
    for i in ids:
        d = challenges.get(i).to_dict()
        assert d["id"] == i and d["title"] and d["description"]
    with pytest.raises(ChallengeError, match="available"):
        challenges.get("nope")


def test_reach_nest_course_target_pass_and_fail():
    ch = challenges.get("mm_relu_course_nest")
    good = ch.check(_course(), params={"n": N})
    assert good.ok, good.message
    assert good.link and good.link.startswith("/explore/mm_relu?n=32&t=")
    # the same program reached through a trace document and a link token
    trace = _course().trace
    assert ch.check(trace.as_json(), params={"n": N}).ok
    assert ch.check(trace.encode(), params={"n": N}).ok
    # a different split factor: not the target, and the message says where it differs
    sch = _sch()
    b = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(b)
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(j0, k, j1)
    bad = ch.check(sch, params={"n": N})
    assert not bad.ok and "Not yet" in bad.message and "loop nest differs" in bad.message
    assert bad.details["target_nest"] != bad.details["nest"]
    # untouched program
    assert not ch.check(_sch(), params={"n": N}).ok


def test_reach_nest_pattern():
    ch = challenges.get("mm_relu_vectorized_inner")
    sch = _course()
    assert not ch.check(sch, params={"n": N}).ok
    j1 = sch.get_loops(sch.get_block("Y_update", func_name="mm_relu"))[-1]
    sch.vectorize(j1)
    res = ch.check(sch, params={"n": N})
    assert res.ok, res.message
    par = challenges.get("mm_relu_parallel_outer")
    assert not par.check(sch, params={"n": N}).ok
    sch.parallel(sch.get_loops(sch.get_block("Y_update", func_name="mm_relu"))[0])
    assert par.check(sch, params={"n": N}).ok


def test_learner_inputs_that_do_not_replay():
    ch = challenges.get("mm_relu_course_nest")
    doc = _course().trace.as_json()
    doc["insts"][2][0] = "Twist"
    res = ch.check(doc, params={"n": N})
    assert not res.ok and "does not replay" in res.message and "Twist" in res.message
    other = engine.Schedule(engine.workloads.get("softmax"),
                            workload=("softmax", {})) if "softmax" in \
        engine.workloads.names() else None
    if other is not None:
        res = ch.check(other.trace.as_json())
        assert not res.ok and "softmax" in res.message
    assert not ch.check("%%%not-a-token%%%").ok


class _FakeTimer:
    """Deterministic 'timings': the reference takes 1.0 s, the learner ``t`` s."""

    def __init__(self, t):
        self.t = t
        self.calls = []

    def __call__(self, mod, label):
        self.calls.append(label)
        return 1.0 if label == "reference" else self.t


def test_beat_time_logic_with_injected_timer():
    ch = BeatTime(id="t", title="t", description="d", workload="mm_relu", params={"n": N},
                  speedup=2.0)
    win = ch.check(_course(), timer=_FakeTimer(0.25))
    assert win.ok and win.details["speedup"] == pytest.approx(4.0)
    assert "gflops" in win.details and win.details["gflops"] > 0
    lose = ch.check(_course(), timer=_FakeTimer(0.8))
    assert not lose.ok and "goal is 2x" in lose.message
    ch2 = BeatTime(id="t2", title="t", description="d", workload="mm_relu", params={"n": N},
                   speedup=1.0, gflops=1e9)
    res = ch2.check(_course(), timer=_FakeTimer(0.5))
    assert not res.ok and "GFLOP/s" in res.message


def test_beat_time_refuses_wrong_programs_before_timing(monkeypatch):
    from engine.lessons import runner
    ch = BeatTime(id="t", title="t", description="d", workload="mm_relu", params={"n": N})
    monkeypatch.setattr(runner, "check_module",
                        lambda *a, **k: runner.Check(False, "3 of 1024 output elements differ"))
    timer = _FakeTimer(0.1)
    res = ch.check(_course(), timer=timer)
    assert not res.ok and "not correct" in res.message and timer.calls == []


def test_beat_time_real_measurement_produces_figures():
    ch = challenges.get("mm_relu_beat_naive")
    res = ch.check(_course(), params={"n": N})
    d = res.details
    assert d["correct"] and d["seconds"] > 0 and d["reference_seconds"] > 0
    assert d["speedup"] == pytest.approx(d["reference_seconds"] / d["seconds"])
    assert ("Solved" in res.message) == res.ok


def test_bad_challenge_definitions():
    with pytest.raises(ChallengeError, match="target"):
        ReachNest(id="x", title="x", description="x", workload="mm_relu")
    with pytest.raises(ChallengeError, match="speedup"):
        BeatTime(id="x", title="x", description="x", workload="mm_relu", speedup=0)
    with pytest.raises(ChallengeError, match="unknown primitive"):
        ReachNest(id="x", title="x", description="x", workload="mm_relu",
                  target=[{"primitive": "twist"}])


def test_softmax_fusion_challenge():
    ch = challenges.get("softmax_one_row_at_a_time")
    p = {"m": 8, "n": 16}
    sch = engine.Schedule(engine.workloads.get("softmax", **p), workload=("softmax", p))
    assert not ch.check(sch).ok
    norm = sch.get_block("T_softmax_norm", func_name="softmax")
    for name in ("T_softmax_expsum", "T_softmax_exp"):
        sch.compute_at(sch.get_block(name, func_name="softmax"), sch.get_loops(norm)[0])
    half = ch.check(sch)
    assert not half.ok and "required shape" in half.message
    sch.compute_at(sch.get_block("T_softmax_maxelem", func_name="softmax"),
                   sch.get_loops(norm)[0])
    res = ch.check(sch)
    assert res.ok, res.message
    assert res.link.startswith("/explore/softmax?m=128&n=128&t=")  # the challenge's size
    assert ch.check(sch, params=p).link.startswith("/explore/softmax?m=8&n=16&t=")
    # a trace recorded on this workload but checked at its own (small) params
    assert ch.check(sch.trace.as_json()).ok


def test_solutions_are_judged_at_the_challenge_size():
    ch = challenges.get("mm_relu_course_nest")     # n = 128
    small = _course(16)                      # the learner explored at n = 16
    res = ch.check(small)
    assert res.ok, res.message
    assert res.link.startswith("/explore/mm_relu?n=128&t=")
    assert "serial(32)" in "\n".join(res.details["nest"])   # j_0 runs 128 / 4 times


def test_rfactor_challenge_solved_by_lesson7():
    from engine import lessons
    les = lessons.get("07_rfactor")
    ch = challenges.get("sum_vectorized_reduction")
    assert not ch.check(les.trace_at(3)).ok          # rfactor + decompose, not vectorized yet
    res = ch.check(les.trace_at(len(les.steps)))
    assert res.ok, res.message

"""engine.tune: the search finds correct candidates (every one checked against numpy),
survives candidates that crash or hang, reuses its database, and has a command line."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

import engine
from engine import workloads
from engine.tune import (Database, InlineRunner, LocalRunner, MeasureResult, TuneError,
                         TuneTask, tune)
from engine.tune.cost_model import CostModel
from engine.tune.database import trace_digest
from engine.tune.examples import stochastic_mm_relu, stochastic_schedule_mm
from engine.tune.features import FEATURE_NAMES, program_features
from engine.tune.space import DirectiveSpace

sys.path.insert(0, os.path.dirname(__file__))
import tune_faults  # noqa: E402


def _matches_numpy(sch, name: str, params: dict) -> bool:
    args = workloads.random_args(name, 1, **params)
    n_in = workloads.info(name).num_inputs
    expected = workloads.reference(name, **params)(*args[:n_in])
    engine.build(sch.mod)[sch.func_name](*args)
    return np.allclose(args[-1], expected, rtol=1e-4, atol=1e-4)


def test_random_search_measures_distinct_correct_candidates():
    res = tune(("mm_relu", {"n": 32}), space=stochastic_schedule_mm, trials=8,
               strategy="random", runner=InlineRunner())
    # the course's space at n=32: six tilings of j with an innermost factor <= 16
    assert 1 <= len(res.records) <= 6
    assert len({trace_digest(r.trace) for r in res.records}) == len(res.records)
    assert all(r.ok and r.correct and r.gflops > 0 for r in res.records)
    best = res.best_schedule
    assert _matches_numpy(best, "mm_relu", {"n": 32})
    assert res.best_trace.decisions  # the sampled factors are in the trace
    assert res.best_gflops == max(r.gflops for r in res.records)


def test_evolutionary_search_uses_the_model_and_every_candidate_is_checked():
    res = tune(("mm_relu", {"n": 64}), space=stochastic_mm_relu, trials=16,
               strategy="evolutionary", batch_size=8, runner=InlineRunner(), seed=3)
    assert len(res.records) == 16
    assert {r.source for r in res.records[8:]} & {"evolved"}
    assert all(r.correct for r in res.records if r.seconds is not None)
    for rec in res.top(3):  # replayed on their own, they compute what numpy computes
        sch = res.task.replay(rec.trace)
        assert _matches_numpy(sch, "mm_relu", {"n": 64})
    curve = res.best_so_far()
    assert curve[-1] == res.best_gflops
    assert all(a is None or b >= a for a, b in zip(curve, curve[1:]))


def test_a_wrong_candidate_never_counts(monkeypatch):
    from engine.tune import measure
    real = measure.TaskContext.expected

    def skewed(self):  # a reference that disagrees with every candidate
        out = [a.copy() for a in real(self)]
        out[-1] = out[-1] + 1.0
        return out
    monkeypatch.setattr(measure.TaskContext, "expected", skewed)
    res = tune(("mm_relu", {"n": 16}), space=stochastic_schedule_mm, trials=3,
               strategy="random", runner=InlineRunner())
    assert res.records and all(not r.correct and r.seconds is None for r in res.records)
    assert all("wrong result" in r.error for r in res.records)
    assert res.best is None and res.best_gflops is None


def test_the_local_runner_survives_crashing_and_hanging_candidates():
    runner = LocalRunner(workers=2, run_timeout=3, before_run=tune_faults.crash_or_hang)
    with runner:
        res = tune(("mm_relu", {"n": 16}), space=stochastic_schedule_mm, trials=5,
                   strategy="random", runner=runner)
    by_inner = {r.trace["decisions"][0][1][-1]: r for r in res.records}
    assert set(by_inner) == {1, 2, 4, 8, 16}
    assert "crashed its worker" in by_inner[2].error and not by_inner[2].ok
    assert "longer than 3 s" in by_inner[4].error and not by_inner[4].ok
    for inner in (1, 8, 16):
        assert by_inner[inner].ok, by_inner[inner].error
    assert res.best is not None and res.best.trace["decisions"][0][1][-1] in (1, 8, 16)


def test_the_database_is_reused_across_runs(tmp_path):
    path = str(tmp_path / "tuning.sqlite3")
    first = tune(("mm_relu", {"n": 32}), space=stochastic_schedule_mm, trials=3,
                 strategy="random", runner=InlineRunner(), database=path)
    second = tune(("mm_relu", {"n": 32}), space=stochastic_schedule_mm, trials=3,
                  strategy="random", runner=InlineRunner(), database=path, seed=5)
    seen = {trace_digest(r.trace) for r in first.records}
    assert {trace_digest(r.trace) for r in second.prior} == seen
    assert not seen & {trace_digest(r.trace) for r in second.records}  # never measured twice
    with Database(path) as db:
        assert db.count(first.task) == len(first.records) + len(second.records)
        assert db.best(first.task)[0].seconds == second.best.seconds
    other = tune(("mm_relu", {"n": 16}), space=stochastic_schedule_mm, trials=1,
                 strategy="random", runner=InlineRunner(), database=path)
    assert other.prior == []  # another size is another task


def test_a_confirmed_time_replaces_the_stored_one(tmp_path):
    """A candidate measured again keeps its best time, except a confirmation's (the time
    of a side-by-side re-timing, which may be slower than a lucky first measurement)."""
    from engine.tune.task import task_of
    from engine.tune.space import space_of
    task = task_of(("mm_relu", {"n": 32}), None, space_of(stochastic_schedule_mm).id)
    doc = {"format": "schedule-explorer/trace", "version": 1, "insts": []}
    with Database(str(tmp_path / "t.sqlite3")) as db:
        db.add(task, doc, MeasureResult(1.0, 2.0, True))
        db.add(task, doc, MeasureResult(1.5, 1.0, True))
        assert db.best(task)[0].seconds == 1.0
        db.add(task, doc, MeasureResult(1.5, 1.0, True), confirmed=True)
        assert db.best(task)[0].seconds == 1.5 and db.count(task) == 1


def test_a_damaged_database_is_set_aside(tmp_path):
    path = tmp_path / "tuning.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.warns(RuntimeWarning, match="damaged"):
        db = Database(str(path))
    assert db.count() == 0
    db.close()
    assert any(p.name.startswith("tuning.sqlite3.damaged-") for p in tmp_path.iterdir())


def test_search_from_a_step_keeps_the_prefix_and_clicked_spaces():
    sch = engine.Schedule(workloads.get("mm_relu", n=32), workload=("mm_relu", {"n": 32}))
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.reorder(i, k, j)
    prefix = sch.trace.as_json()["insts"]
    space = DirectiveSpace([{"kind": "sample_split", "loop": "j", "n": 2},
                            {"kind": "sample_compute_location", "block": "C"}])
    res = tune(sch, space=space, trials=6, strategy="random", runner=InlineRunner())
    assert res.records
    for rec in res.records:
        assert rec.trace["insts"][:len(prefix)] == prefix
        assert rec.ok, rec.error
    assert _matches_numpy(res.best_schedule, "mm_relu", {"n": 32})


def test_bad_arguments_are_explained():
    with pytest.raises(TuneError, match="strategy"):
        tune("mm_relu", space=stochastic_schedule_mm, strategy="greedy")
    with pytest.raises(TuneError, match="trials"):
        tune("mm_relu", space=stochastic_schedule_mm, trials=0)
    with pytest.raises(TuneError, match="no parameter"):
        tune(("mm_relu", {"size": 3}), space=stochastic_schedule_mm)
    with pytest.raises(TuneError, match="search space"):
        tune("mm_relu", space="best")
    with pytest.raises(TuneError, match="no candidate"):
        def broken(sch):
            sch.get_block("nope")
        tune(("mm_relu", {"n": 16}), space=broken, trials=2, runner=InlineRunner())
    with pytest.raises(TuneError, match="n="):
        DirectiveSpace([{"kind": "sample_split", "loop": "j", "n": 9}])


def test_features_and_cost_model_rank_what_they_were_shown():
    f = program_features(workloads.get("mm_relu", n=64))
    assert len(f) == len(FEATURE_NAMES) and all(np.isfinite(f))
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 4, size=(40, 5))
    y = x[:, 0] * 3 + x[:, 1]
    model = CostModel(seed=0)
    model.update(x[:30].tolist(), y[:30].tolist())
    assert model.trained
    pred = model.predict(x[30:].tolist())
    assert np.corrcoef(pred, y[30:])[0, 1] > 0.8


def test_measure_results_round_trip():
    r = MeasureResult(0.5, 2.0, True, 10.0, None)
    assert MeasureResult.from_dict(json.loads(json.dumps(r.as_dict()))) == r
    t = TuneTask(func_name="mm_relu", workload="mm_relu", params={"n": 8})
    assert TuneTask.from_dict(t.as_dict()).key() == t.key()


def test_command_line_tunes_and_exports(tmp_path, capsys):
    from engine.cli import main
    space_file = tmp_path / "space.py"
    space_file.write_text(
        "def stochastic(sch):\n"
        "    b = sch.get_block('Y', 'mm_relu')\n"
        "    i, j, k = sch.get_loops(b)\n"
        "    j0, j1 = sch.split(j, factors=sch.sample_perfect_tile(j, n=2))\n"
        "    sch.reorder(i, j0, k, j1)\n")
    out_file = tmp_path / "best.json"
    code = main(["tune", "mm_relu", "--param", "n=16", "--space", str(space_file),
                 "--trials", "3", "--workers", "1", "--export", str(out_file)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "GFLOP/s" in captured.out and "numpy (float32)" in captured.out
    assert "3/3 trials" in captured.err or "trials" in captured.err
    trace = engine.Trace.from_json(out_file.read_text())
    sch = engine.schedule.replay("mm_relu", {"n": 16}, trace)
    assert _matches_numpy(sch, "mm_relu", {"n": 16})
    assert main(["tune", "nosuch", "--trials", "1"]) == 2
    assert "unknown workload" in capsys.readouterr().err
    assert main(["tune", "mm_relu", "--space", str(tmp_path / "missing.py")]) == 2
    assert "no such space file" in capsys.readouterr().err


GALLERY = [("mm_relu", {"n": 32}), ("matmul", {"n": 32}), ("batch_matmul", {"n": 8}),
           ("conv2d", dict(in_channels=4, out_channels=4, size=6)), ("softmax", {"n": 32}),
           ("layernorm", {"n": 32}), ("mlp", dict(in_features=32, hidden=16, out_features=8)),
           ("depthwise_conv2d", {}), ("window_sum", {"n": 64}), ("add", {"n": 32}),
           ("relu", {"n": 32}), ("transpose", {"n": 32}), ("sum", {"n": 32}),
           ("conv2d_relu", dict(in_channels=4, out_channels=4, size=6))]


@pytest.mark.parametrize("name,params", GALLERY, ids=[g[0] for g in GALLERY])
def test_auto_space_gives_correct_schedules_for_every_workload(name, params):
    from engine.tune.measure import TaskContext, measure_inline
    from engine.tune.search import Sampler
    from engine.tune.space import space_of
    from engine.tune.task import task_of
    space = space_of("auto")
    task = task_of((name, params), None, space.id)
    cand = Sampler(task, space, seed=1).random()
    assert cand is not None
    if name != "sum":  # a row sum has one schedule in this space: its rows in parallel
        assert cand.doc.get("decisions"), "the auto space samples"
    res = measure_inline(TaskContext(task), cand.doc)
    assert res.ok, res.error
    kinds = {inst[0] for inst in cand.doc["insts"]}
    assert "Parallel" in kinds or "Vectorize" in kinds
    if name in ("matmul", "mm_relu", "conv2d", "batch_matmul"):
        assert {"SamplePerfectTile", "Reorder", "DecomposeReduction"} <= kinds


def test_a_database_that_cannot_be_written_does_not_stop_the_search(tmp_path):
    db = Database(str(tmp_path / "t.sqlite3"))
    db._conn.execute("PRAGMA query_only = ON")
    with pytest.warns(RuntimeWarning, match="cannot be written"):
        res = tune(("mm_relu", {"n": 16}), space=stochastic_schedule_mm, trials=2,
                   strategy="random", runner=InlineRunner(), database=db)
    assert len(res.records) == 2 and db.failed
    db.close()


def test_a_space_function_that_raises_is_reported_not_crashed():
    def buggy(sch):
        raise NameError("name 'j_factor' is not defined")
    with pytest.raises(TuneError, match="NameError: name 'j_factor'"):
        tune(("mm_relu", {"n": 16}), space=buggy, trials=2, runner=InlineRunner())

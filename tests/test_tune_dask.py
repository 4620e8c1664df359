"""engine.tune.DaskRunner on a real Dask cluster: a LocalCluster on 127.0.0.1 with two
worker processes measures the candidates (compiled, checked against numpy, timed there)."""
from __future__ import annotations

import pytest

from engine.tune import DaskRunner, TuneError, tune
from engine.tune.examples import stochastic_schedule_mm

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as c:
        yield c


def test_dask_runner_measures_on_the_cluster(cluster):
    with DaskRunner(cluster.scheduler_address) as runner:
        assert runner.workers() == 2
        res = tune(("mm_relu", {"n": 16}), space=stochastic_schedule_mm, trials=4,
                   strategy="random", runner=runner)
    assert len(res.records) == 4
    assert all(r.ok and r.correct and r.gflops > 0 for r in res.records), \
        [r.error for r in res.records]
    assert res.numpy_seconds and res.numpy_seconds > 0
    assert res.best_schedule is not None


def test_dask_runner_says_when_the_scheduler_is_unreachable():
    with pytest.raises(TuneError, match="cannot reach the Dask scheduler"):
        DaskRunner("tcp://127.0.0.1:9", connect_timeout=2)

"""``DaskRunner``: measure candidates on the workers of a Dask (``distributed``) cluster.

::

    from engine.tune import tune, DaskRunner
    with DaskRunner("tcp://scheduler:8786") as runner:
        result = tune(("matmul", {"n": 1024}), space="auto", trials=256, runner=runner)

Each candidate is one Dask task: the worker that runs it rebuilds the program from the task
(plain data: a workload and its parameters, or the program's text — never the search space
or any of your code), replays the candidate's trace, compiles it, checks it against numpy
and times it. Inside a worker the candidate runs in a child process
(:class:`~engine.tune.runner.LocalRunner` with one process), so a candidate that crashes or
hangs costs that child, not the Dask worker, and its time limit is enforced. On each
machine, compiles may run side by side but a timing waits until it has the machine alone
(a machine-wide lock file: shared while compiling, exclusive while timing), so several
worker processes on one machine do not disturb each other's timings.

Every worker needs this project installed (the same version as the tuning client), since
it compiles with the engine. How to start a cluster is in the README ("Tuning on a
cluster").
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
from typing import Any

from .measure import MeasureResult, TaskContext
from .runner import LocalRunner, Runner
from .task import TuneError, TuneTask

__all__ = ["DaskRunner"]

LOCK_PATH = os.path.join(tempfile.gettempdir(), "engine-tune-timing.lock")

_local: dict[str, Any] = {}
_local_lock = threading.Lock()


@contextlib.contextmanager
def _machine_lock(exclusive: bool):
    """A lock shared by every process of this machine (released if the process dies)."""
    fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _worker_runner(build_timeout: float, run_timeout: float) -> LocalRunner:
    """This Dask worker process's own one-process local runner (started once)."""
    with _local_lock:
        key = f"{build_timeout}:{run_timeout}"
        runner = _local.get(key)
        if runner is None:
            runner = LocalRunner(workers=1, build_timeout=build_timeout,
                                 run_timeout=run_timeout,
                                 build_guard=lambda: _machine_lock(False),
                                 timing_guard=lambda: _machine_lock(True))
            _local[key] = runner
        return runner


def measure_on_worker(task_d: dict, trace_doc: dict, build_timeout: float,
                      run_timeout: float) -> dict:
    """(runs on a Dask worker) Measure one candidate; the result as a plain dict."""
    runner = _worker_runner(build_timeout, run_timeout)
    with _local_lock:  # one candidate at a time through this worker's child process
        return runner.measure(TuneTask.from_dict(task_d), [trace_doc])[0].as_dict()


def numpy_on_worker(task_d: dict) -> float | None:
    """(runs on a Dask worker) numpy's float32 time for the task, timed alone."""
    with _machine_lock(True):
        return TaskContext(TuneTask.from_dict(task_d)).numpy_seconds()


class DaskRunner(Runner):
    """Candidates measured by the workers of the Dask scheduler at ``address``
    (``"tcp://host:8786"``), or through an existing ``distributed.Client``."""

    def __init__(self, address: Any, build_timeout: float = 120.0, run_timeout: float = 60.0,
                 connect_timeout: float = 20.0):
        try:
            from distributed import Client  # noqa: PLC0415 - only this runner needs dask
        except ImportError:  # pragma: no cover - a dependency of the project
            raise TuneError("the Dask runner needs the 'distributed' package") from None
        self.build_timeout = float(build_timeout)
        self.run_timeout = float(run_timeout)
        if isinstance(address, Client):
            self.client, self._own = address, False
        else:
            if not isinstance(address, str) or not address:
                raise TuneError(f"DaskRunner needs a scheduler address such as "
                                f"'tcp://scheduler:8786', got {address!r}")
            try:
                self.client = Client(address, timeout=connect_timeout)
            except (OSError, TimeoutError) as e:
                raise TuneError(f"cannot reach the Dask scheduler at {address}: {e}; start "
                                "one with 'dask scheduler' and workers with 'dask worker "
                                f"{address}'") from None
            self._own = True

    def close(self) -> None:
        if self._own:
            self.client.close()

    def measure(self, task: TuneTask, traces: list[dict], on_result=None):
        from distributed import as_completed  # noqa: PLC0415
        task_d = task.as_dict()
        futures = {self.client.submit(measure_on_worker, task_d, doc, self.build_timeout,
                                      self.run_timeout, pure=False): i
                   for i, doc in enumerate(traces)}
        results: list[MeasureResult | None] = [None] * len(traces)
        for fut in as_completed(list(futures)):
            i = futures[fut]
            try:
                res = MeasureResult.from_dict(fut.result())
            except Exception as e:  # noqa: BLE001 - a lost worker, a cancelled task
                res = MeasureResult(error=f"the cluster could not measure it: "
                                          f"{type(e).__name__}: {e}")
            results[i] = res
            if on_result is not None:
                on_result(i, res)
        return [r if r is not None else MeasureResult(error="not measured") for r in results]

    def numpy_seconds(self, task: TuneTask) -> float | None:
        try:
            return self.client.submit(numpy_on_worker, task.as_dict(), pure=False).result()
        except Exception:  # noqa: BLE001 - no reference line rather than no search
            return None

    def workers(self) -> int:
        """How many workers the cluster has now."""
        return len(self.client.scheduler_info().get("workers", {}))

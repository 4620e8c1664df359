"""The measurement service without processes, for tests that do not test the pool itself.

:class:`InlinePool` is a drop-in for :class:`app.service.pool.MeasurePool` behind the app's
one measurement interface (:class:`app.service.measurer.StepMeasurer`): jobs wait in a FIFO
queue and run one after another in a thread of this process, through the very code a worker
process runs (:func:`app.service.worker.run_job`); core slots are granted at once. So the
web layer, the measurer, the job protocol and the worker's actions are all exercised — only
the process boundary (time limits, crashes, memory) is not, which the pool's own tests cover.

    app = create_app({"TESTING": True, "MEASURE_POOL": InlinePool})
    ...
    drain(app)        # wait for the jobs queued so far (e.g. the prefetch after a click)

With it, what the web tests say to the app the same way: :data:`HX` (an htmx request's
header), :func:`text` (a response's body), :func:`state_of` (the explorer's state in a link).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

from app.service.pool import PoolConfig
from app.service.protocol import Job, JobResult
from app.service.queue import JobQueue
from app.service.tickets import Ticket
from app.service.worker import run_job


class InlineChannel:
    """The worker's end of its pipe, inside this process: a slot asked for is granted at
    once (cores 0..n-1); every message the job sends is kept in ``sent``."""

    def __init__(self):
        self.sent: list[tuple] = []

    def send(self, msg: tuple) -> None:
        self.sent.append(msg)

    def recv(self) -> tuple:
        ncores = next(m[1] for m in reversed(self.sent) if m[0] == "need_timing")
        return ("go", list(range(ncores)))


def run_in_this_process(job: Job, config: PoolConfig | None = None) -> JobResult:
    """What a worker process does with ``job``, here: the job's result."""
    config = config or PoolConfig()
    wire = job.to_wire()
    wire["source_max_chars"] = config.source_max_chars
    conn = InlineChannel()
    t0 = time.monotonic()
    run_job(conn, wire, {"memory_bytes": None})
    data: dict = {}
    for m in conn.sent:
        if m[0] == "data":
            data.update(m[1])
    res = next(m[1] for m in conn.sent if m[0] == "result")
    return JobResult(res["status"], res.get("message"), data, time.monotonic() - t0,
                     worker_pid=os.getpid(), failed_action=res.get("failed_action"),
                     detail=res.get("detail"))


class InlinePool:
    """The pool's queue (:class:`app.service.queue.JobQueue`) served by one thread of this
    process (see the module docstring)."""

    def __init__(self, config: PoolConfig | None = None, **overrides: Any):
        self.config = dataclasses.replace(config or PoolConfig(), **overrides)
        self.queue = JobQueue(self.config.queue_length)
        self.jobs: list[Job] = []               # every job submitted, in order
        self._open = threading.Event()          # cleared: jobs wait (see held())
        self._open.set()
        self._thread = threading.Thread(target=self._serve, name="inline-measure", daemon=True)
        self._thread.start()

    def submit(self, job: Job, on_done: Callable[[JobResult], None] | None = None, *,
               urgent: bool = False) -> Ticket:
        job.check_actions()
        ticket = Ticket(self.queue, job)
        if on_done is not None:
            ticket.add_done_callback(on_done)
        self.queue.put(ticket, urgent)
        self.jobs.append(job)
        return ticket

    def run(self, job: Job, timeout: float | None = None) -> JobResult:
        return self.submit(job).result(timeout)

    def drain(self, timeout: float = 300.0) -> None:
        """Wait until every job submitted so far has finished."""
        if not self.queue.wait_idle(timeout):
            raise TimeoutError("the inline measurement jobs did not finish")

    @contextlib.contextmanager
    def held(self):
        """Jobs submitted meanwhile wait until the block ends (a test that must see a pane
        answer before any job of its request could finish)."""
        self._open.clear()
        try:
            yield self
        finally:
            self._open.set()

    def worker_pids(self) -> list[int]:
        return [os.getpid()]

    def close(self, timeout: float = 10.0) -> None:
        self.queue.close()
        self._thread.join(timeout)

    def _serve(self) -> None:
        while (ticket := self.queue.take()) is not None:
            self._open.wait()
            try:
                result = run_in_this_process(ticket.job, self.config)
            except Exception as e:  # noqa: BLE001 - a test must see it, not hang
                result = JobResult("error", f"the inline worker failed ({e})")
            result.queued_s = ticket.started - ticket.submitted
            self.queue.done(ticket, result)


def drain(app) -> None:
    """Wait for the measurement jobs an app (with an :class:`InlinePool`) has queued."""
    measurer = app.extensions["measurer"]
    if measurer.started:
        measurer.pool.drain()


#: the header htmx sends with its requests (the app then answers with fragments)
HX = {"HX-Request": "true"}


def text(resp) -> str:
    """A test client's response body as text."""
    return resp.get_data(as_text=True)


def state_of(url: str) -> dict:
    """The query of ``url`` (an explorer link, ``HX-Push-Url``) as a dict of single values."""
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def make_test_app(config: dict | None = None):
    """``create_app`` for tests: a fresh store, jobs run in this process."""
    from app import create_app
    return create_app({"TESTING": True, "MEASURE_POOL": InlinePool, **(config or {})})


def settled(client, url: str, pending: str = 'id="measure-pending"', polls: int = 20):
    """The response for a pane ``url`` once nothing is pending: asked again, as the page's
    htmx poll does, after each round of queued jobs (``pending`` marks an unfinished pane:
    ``id="measure-pending"``, ``id="cache-pending"``)."""
    for _ in range(polls):
        r = client.get(url)
        if pending not in r.get_data(as_text=True):
            return r
        drain(client.application)
    raise AssertionError(f"{url} still has pending measurements after {polls} polls")

"""A submitted measurement job as the web app sees it: its place in the queue, its result.

:meth:`MeasurePool.submit <app.service.pool.MeasurePool.submit>` returns a :class:`Ticket`;
``position()`` is what the page shows as "queued (position k)", ``result(timeout)`` waits
for the :class:`~app.service.protocol.JobResult`. The ticket asks its queue
(:class:`app.service.queue.JobQueue`) where it stands.
"""
from __future__ import annotations

import dataclasses
import itertools
import logging
import secrets
import threading
import time
from typing import Any, Callable

from .protocol import Job, JobResult

log = logging.getLogger(__name__)

_ids = itertools.count(1)


class Ticket:
    """A submitted job: ask its queue position, wait for its result, or cancel it."""

    def __init__(self, queue: Any, job: Job):
        self.id = secrets.token_urlsafe(12)
        self.seq = next(_ids)
        self.job = job
        self.client = job.client        # whose job it is: the queue is fair between clients
        self.owner = job.owner          # the learner who may stop it
        self.submitted = time.monotonic()
        self.started: float | None = None
        self._queue = queue
        self._done = threading.Event()
        self._result: JobResult | None = None
        self._callbacks: list[Callable[[JobResult], None]] = []
        self._lock = threading.Lock()
        self._partial: dict[str, Any] = {}
        self.stop_requested = False

    def note(self, values: dict[str, Any]) -> None:
        """Partial results the worker sent while the job runs (a tuning job's trials, a
        step's end of compile)."""
        with self._lock:
            self._partial.update(values)
        if "compiled" in values:
            # background jobs wait for this (app.service.queue)
            progressed = getattr(self._queue, "progressed", None)
            if progressed is not None:
                progressed()

    @property
    def compiling(self) -> bool:
        """A running step job that has not finished compiling its program (the worker
        says ``compiled`` when it has)."""
        if self._done.is_set() or "step" not in self.job.actions:
            return False
        with self._lock:
            return "compiled" not in self._partial

    def partial(self) -> dict[str, Any]:
        """A copy of the partial results so far (the final result's data once done)."""
        with self._lock:
            if self._result is not None:
                return dict(self._result.data or {})
            return dict(self._partial)

    def request_stop(self) -> bool:
        """Ask a running job to stop (its worker is replaced; the partial results stay);
        a queued one is withdrawn. False when it already finished."""
        if self._done.is_set():
            return False
        self.stop_requested = True
        self.cancel()
        return True

    def position(self) -> int | None:
        """1-based place in the queue while waiting, 0 while running, None when finished."""
        if self._done.is_set():
            return None
        return self._queue.position(self)

    @property
    def state(self) -> str:
        """``queued``, ``running`` or ``done``."""
        pos = self.position()
        return "done" if pos is None else ("running" if pos == 0 else "queued")

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: float | None = None) -> JobResult:
        """Wait for the result; raises :class:`TimeoutError` if it is not there in time."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"the step is still {self.state}")
        assert self._result is not None
        return self._result

    def cancel(self) -> bool:
        """Withdraw a queued job (True), or False if it already started or finished."""
        return self._queue.cancel(self)

    def add_done_callback(self, fn: Callable[[JobResult], None]) -> None:
        """Call ``fn(result)`` when the job ends (at once if it already has; in a pool thread)."""
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        fn(self._result)  # type: ignore[arg-type]

    def _finish(self, result: JobResult) -> None:
        with self._lock:
            if self._done.is_set():
                return
            self._result = result
            # The program's bytes are not needed any more (finished tickets are kept a while).
            self.job = dataclasses.replace(self.job, module=None, baseline=None, program=None,
                                           trace=None, token=None)
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            try:
                fn(result)
            except Exception:  # noqa: BLE001
                log.exception("a measurement callback failed")

    def __repr__(self) -> str:
        return f"<Ticket {self.seq} {self.state}>"

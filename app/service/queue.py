"""The queue in front of the measurement workers: bounded, first come first served, urgent
jobs first.

:class:`JobQueue` holds :class:`~app.service.tickets.Ticket` s. ``put`` refuses with
:class:`~app.service.protocol.QueueFull` when the queue is at its bound ("the server is
busy, N steps are waiting") and with :class:`~app.service.protocol.PoolClosed` once closed;
an *urgent* job (short and interactive: the code pane's compile, an access pattern) goes
ahead of the waiting measurements, behind earlier urgent ones. Whoever runs jobs ``take`` s
the next one (it is then *running*) and reports it ``done``. ``position`` is what the page
shows as "queued (position k)".
"""
from __future__ import annotations

import collections
import threading
import time

from .protocol import JobResult, PoolClosed, QueueFull
from .tickets import Ticket

__all__ = ["JobQueue"]


class JobQueue:
    """A bounded FIFO of tickets, urgent ones first (see the module docstring)."""

    def __init__(self, length: int):
        self.length = length
        self._cond = threading.Condition()
        self._pending: collections.deque[Ticket] = collections.deque()
        self._urgent: set[Ticket] = set()
        self._running: set[Ticket] = set()
        self._closed = False

    def put(self, ticket: Ticket, urgent: bool = False) -> None:
        """Queue ``ticket``; raises :class:`QueueFull` or :class:`PoolClosed` instead."""
        with self._cond:
            if self._closed:
                raise PoolClosed()
            if len(self._pending) >= self.length:
                raise QueueFull(len(self._pending))
            if urgent:
                self._urgent.add(ticket)
                at = 0
                while at < len(self._pending) and self._pending[at] in self._urgent:
                    at += 1
                self._pending.insert(at, ticket)
            else:
                self._pending.append(ticket)
            self._cond.notify()

    def take(self) -> Ticket | None:
        """The next job (now running), waiting for one; None once the queue is closed."""
        with self._cond:
            while not self._pending:
                if self._closed:
                    return None
                self._cond.wait(1.0)
            ticket = self._pending.popleft()
            self._urgent.discard(ticket)
            ticket.started = time.monotonic()
            self._running.add(ticket)
            return ticket

    def done(self, ticket: Ticket, result: JobResult) -> None:
        """A running job has ended with ``result``: its ticket finishes (its callbacks, e.g.
        storing the result, have run) before the queue counts it as no longer running, so
        :meth:`wait_idle` never returns ahead of them."""
        ticket._finish(result)
        with self._cond:
            self._running.discard(ticket)
            self._cond.notify_all()

    def position(self, ticket: Ticket) -> int | None:
        """1-based place while waiting, 0 while running, None when finished."""
        with self._cond:
            if ticket in self._running:
                return 0
            for i, t in enumerate(self._pending):
                if t is ticket:
                    return i + 1
        return None if ticket.done() else 0

    def cancel(self, ticket: Ticket) -> bool:
        """Withdraw a waiting job (True), or False if it already started or finished."""
        with self._cond:
            try:
                self._pending.remove(ticket)
            except ValueError:
                return False
            self._urgent.discard(ticket)
        ticket._finish(JobResult("cancelled", "this step was withdrawn before it was measured"))
        return True

    def close(self) -> None:
        """Refuse new jobs and end the waiting ones ("the server is shutting down")."""
        with self._cond:
            self._closed = True
            pending, self._pending = list(self._pending), collections.deque()
            self._urgent.clear()
            self._cond.notify_all()
        for t in pending:
            t._finish(JobResult("shutdown", str(PoolClosed())))

    @property
    def closed(self) -> bool:
        return self._closed

    def waiting(self) -> int:
        with self._cond:
            return len(self._pending)

    def running(self) -> int:
        with self._cond:
            return len(self._running)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no job waits or runs; False if that took longer than ``timeout``."""
        end = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._running:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.5))
            return True

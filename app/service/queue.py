"""The queue in front of the measurement workers: bounded, fair between clients, urgent
jobs first.

:class:`JobQueue` holds :class:`~app.service.tickets.Ticket` s. ``put`` refuses with
:class:`~app.service.protocol.QueueFull` when the queue is at its bound ("the server is
busy, N steps are waiting"), with :class:`~app.service.protocol.ClientQueueFull` when the
ticket's client already has ``per_client`` jobs waiting ("you have N steps waiting; ..."),
and with :class:`~app.service.protocol.PoolClosed` once closed.

Which job runs next:

* **urgent** jobs (short and interactive: the code pane's compile, an access pattern) first,
  in the order they came;
* then the **clients take turns** (``Ticket.client``, e.g. the learner's address): the next
  job is the oldest waiting job of the client served least recently (a client never served
  comes first), so one learner's twelve slow steps make another learner wait for at most
  the jobs already running. Jobs without a client share one turn.

* **background** jobs (``Job.background``: the cache simulation of a step) wait while a
  step job is compiling its program, at most :attr:`JobQueue.BACKGROUND_MAX_HOLD_S`; a
  client's later jobs may go ahead of its held one. A click starts its step's measurement
  and its cache simulation at once; run side by side, the simulation took half the CPU the
  compile needed on a 2-core machine (where the browser drawing the click's panes wants the
  rest), and the runtime point, which waits on that compile, came later (paired browser
  runs, mm_relu n=128: runtime point p50 204 -> 158 ms when the simulation waited for the
  whole step). Once the step's program is compiled, its check and timed runs (bounded by
  wall time, the best of the runs reported) share the machine with the simulation.

Whoever runs jobs ``take`` s the next one (it is then *running*) and reports it ``done``.
``position`` is what the page shows as "queued (position k)": how many jobs will be taken
before this one, plus one, if nothing else arrives.
"""
from __future__ import annotations

import collections
import itertools
import threading
import time
from typing import Any

from .protocol import ClientQueueFull, JobResult, PoolClosed, QueueFull
from .tickets import Ticket

__all__ = ["JobQueue"]


class JobQueue:
    """A bounded queue of tickets, urgent ones first, then round-robin between clients
    (see the module docstring)."""

    #: how many clients' last turns are remembered
    REMEMBERED_CLIENTS = 4096
    #: the longest a background job waits for compiles to end (seconds from its submission)
    BACKGROUND_MAX_HOLD_S = 2.0

    def __init__(self, length: int, per_client: int | None = None):
        self.length = length
        self.per_client = per_client
        self._cond = threading.Condition()
        self._urgent: collections.deque[Ticket] = collections.deque()
        self._by_client: dict[Any, collections.deque[Ticket]] = {}
        self._waiting_of: collections.Counter = collections.Counter()
        self._last_served: dict[Any, int] = {}     # in the order of their last turn
        self._turns = itertools.count(1)
        self._running: set[Ticket] = set()
        self._closed = False

    # ------------------------------------------------------------------ putting and taking
    def put(self, ticket: Ticket, urgent: bool = False) -> None:
        """Queue ``ticket``; raises :class:`QueueFull` (or :class:`ClientQueueFull`) or
        :class:`PoolClosed` instead."""
        client = ticket.client
        with self._cond:
            if self._closed:
                raise PoolClosed()
            waiting = self._count()
            if waiting >= self.length:
                raise QueueFull(waiting)
            if (client is not None and self.per_client is not None
                    and self._waiting_of[client] >= self.per_client):
                raise ClientQueueFull(self._waiting_of[client])
            if urgent:
                self._urgent.append(ticket)
            else:
                self._by_client.setdefault(client, collections.deque()).append(ticket)
            self._waiting_of[client] += 1
            self._cond.notify()

    def take(self) -> Ticket | None:
        """The next job (now running), waiting for one; None once the queue is closed."""
        with self._cond:
            while True:
                if self._urgent:
                    ticket = self._urgent.popleft()
                    break
                picked = self._next_eligible()
                if picked is not None:
                    client, index = picked
                    ticket = self._pop(client, index)
                    self._served(client)
                    break
                if self._closed and not self._count():
                    return None
                self._cond.wait(self._hold_left() if self._count() else 1.0)
            self._uncount(ticket.client)
            ticket.started = time.monotonic()
            self._running.add(ticket)
            return ticket

    def progressed(self) -> None:
        """A running job's state changed (a step finished compiling): held background jobs
        may now be taken."""
        with self._cond:
            self._cond.notify_all()

    def _held(self, ticket: Ticket, now: float) -> bool:
        """A background job waiting for a step's compile (and not waiting too long)."""
        return (ticket.job.background
                and now - ticket.submitted < self.BACKGROUND_MAX_HOLD_S
                and any(t.compiling for t in self._running))

    def _next_eligible(self) -> tuple[Any, int] | None:
        """(client, index) of the job to run next: the first client in turn order with a
        job not held, that client's oldest such job."""
        now = time.monotonic()
        for client in self._turn_order():
            for i, t in enumerate(self._by_client[client]):
                if not self._held(t, now):
                    return client, i
        return None

    def _hold_left(self) -> float:
        """How long until the first held job may run anyway (at most 1 s, at least 1 ms)."""
        now = time.monotonic()
        ends = [t.submitted + self.BACKGROUND_MAX_HOLD_S - now
                for q in self._by_client.values() for t in q if t.job.background]
        return min([1.0] + [max(e, 0.001) for e in ends])

    def done(self, ticket: Ticket, result: JobResult) -> None:
        """A running job has ended with ``result``: its ticket finishes (its callbacks, e.g.
        storing the result, have run) before the queue counts it as no longer running, so
        :meth:`wait_idle` never returns ahead of them."""
        ticket._finish(result)
        with self._cond:
            self._running.discard(ticket)
            self._cond.notify_all()

    # ------------------------------------------------------------------ the order of turns
    def _count(self) -> int:
        return len(self._urgent) + sum(len(q) for q in self._by_client.values())

    def _turn_order(self) -> list:
        """The clients with waiting jobs, in the order of their next turn: least recently
        served first (never served: 0), ties by their oldest waiting job."""
        return sorted(self._by_client, key=lambda c: (self._last_served.get(c, 0),
                                                      self._by_client[c][0].seq))

    def _pop(self, client: Any, index: int) -> Ticket:
        jobs = self._by_client[client]
        ticket = jobs[index]
        del jobs[index]
        if not jobs:
            del self._by_client[client]
        return ticket

    def _uncount(self, client: Any) -> None:
        self._waiting_of[client] -= 1
        if self._waiting_of[client] <= 0:
            del self._waiting_of[client]

    def _served(self, client: Any) -> None:
        """``client`` has had its turn: it goes behind every other client. Only the most
        recent turns are remembered (a client forgotten has waited longest anyway)."""
        self._last_served.pop(client, None)
        self._last_served[client] = next(self._turns)
        while len(self._last_served) > self.REMEMBERED_CLIENTS:
            self._last_served.pop(next(iter(self._last_served)))

    def position(self, ticket: Ticket) -> int | None:
        """1-based place while waiting (the jobs taken before it, plus one), 0 while
        running, None when finished."""
        with self._cond:
            if ticket in self._running:
                return 0
            for i, t in enumerate(self._urgent):
                if t is ticket:
                    return i + 1
            jobs = self._by_client.get(ticket.client, ())
            index = next((i for i, t in enumerate(jobs) if t is ticket), None)
            if index is not None:
                return len(self._urgent) + self._rank(ticket.client, index)
        return None if ticket.done() else 0

    def _rank(self, client: Any, index: int) -> int:
        """The place of ``client``'s ``index``-th waiting job among the others': each
        client's first jobs in turn order, then each one's second, ..."""
        before = 0
        ahead = True                       # clients before ``client`` in the turn order
        for c in self._turn_order():
            n = len(self._by_client[c])
            if c == client:
                ahead = False
            before += min(n, index) + (1 if ahead and n > index else 0)
        return before + 1

    # ------------------------------------------------------------------ withdrawing, closing
    def cancel(self, ticket: Ticket) -> bool:
        """Withdraw a waiting job (True), or False if it already started or finished."""
        with self._cond:
            if not self._withdraw(ticket):
                return False
        ticket._finish(JobResult("cancelled", "this step was withdrawn before it was measured"))
        return True

    def _withdraw(self, ticket: Ticket) -> bool:
        try:
            self._urgent.remove(ticket)
        except ValueError:
            jobs = self._by_client.get(ticket.client, ())
            index = next((i for i, t in enumerate(jobs) if t is ticket), None)
            if index is None:
                return False
            self._pop(ticket.client, index)
        self._uncount(ticket.client)
        return True

    def close(self) -> None:
        """Refuse new jobs and end the waiting ones ("the server is shutting down")."""
        with self._cond:
            self._closed = True
            pending = list(self._urgent) + [t for q in self._by_client.values() for t in q]
            self._urgent.clear()
            self._by_client.clear()
            self._waiting_of.clear()
            self._cond.notify_all()
        for t in pending:
            t._finish(JobResult("shutdown", str(PoolClosed())))

    @property
    def closed(self) -> bool:
        return self._closed

    def waiting(self) -> int:
        with self._cond:
            return self._count()

    def running(self) -> int:
        with self._cond:
            return len(self._running)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no job waits or runs; False if that took longer than ``timeout``."""
        end = time.monotonic() + timeout
        with self._cond:
            while self._count() or self._running:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.5))
            return True

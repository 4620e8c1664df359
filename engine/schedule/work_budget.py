"""A bound on the work schedule primitives may do, for code that replays hostile traces.

A trace from a link is at most a few hundred instructions, but an instruction's cost grows
with the program it works on, and some sequences make the program grow exponentially
(each fuse-then-split round doubled the loop names; inlining a chain of stages that each
read their producer twice doubles the expression tree). Whoever replays traces it did not
write (the web app, for every request) installs a :class:`WorkBudget` around the replay::

    with work_budget(WorkBudget(cpu_seconds=4.0, max_nodes=250_000)):
        trace.apply_to_schedule(sch)

Then every primitive (:meth:`engine.schedule.Schedule._run`) checks, before it starts and
after it has built its program, that

* the thread's CPU time since the budget began is under ``cpu_seconds`` (a deadline that
  does not move with the machine's load: other threads' work does not count), and
* the function it changed has at most ``max_nodes`` IR nodes counted as a tree
  (:func:`engine.ir.size.tree_size`, which stops counting at the limit): the step that
  would pass it is refused, so the next step never starts on a program that large, and
  no step works on more than ``max_nodes`` nodes.

Either refusal is a :class:`WorkBudgetError` (a :class:`ScheduleError`: the schedule is
unchanged, the refusal names the step). Without a budget installed nothing is checked: the
engine's own users (tests, the tuner in its workers) pay nothing.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

from engine.ir.size import tree_size

from .error import ScheduleError

__all__ = ["WorkBudget", "WorkBudgetError", "work_budget", "current_budget"]


class WorkBudgetError(ScheduleError):
    """A primitive refused because the replay is over its :class:`WorkBudget`;
    ``limit`` is ``"cpu_seconds"`` or ``"max_nodes"``."""

    def __init__(self, primitive: str, limit: str, rule: str, hint: str):
        self.limit = limit
        super().__init__(primitive, "this program", rule, hint)


class WorkBudget:
    """The CPU seconds and the program size one replay (or one request) may use."""

    def __init__(self, cpu_seconds: float | None = None, max_nodes: int | None = None):
        self.cpu_seconds = cpu_seconds
        self.max_nodes = max_nodes
        self._start = time.thread_time()

    @property
    def used_seconds(self) -> float:
        return time.thread_time() - self._start

    def check_time(self, primitive: str) -> None:
        """Refuse when the CPU time is spent."""
        if self.cpu_seconds is not None and self.used_seconds > self.cpu_seconds:
            raise WorkBudgetError(
                primitive, "cpu_seconds",
                f"replaying this trace took more than {self.cpu_seconds:g} s of the "
                "server's time", "undo some steps, or share a shorter trace")

    def check_size(self, primitive: str, func: Any) -> None:
        """Refuse when ``func`` is over ``max_nodes`` nodes."""
        if self.max_nodes is None:
            return
        if tree_size(func, self.max_nodes) > self.max_nodes:
            raise WorkBudgetError(
                primitive, "max_nodes",
                f"the program would grow past {self.max_nodes} IR nodes",
                "a schedule that makes the program this large (an expression copied into "
                "itself again and again, say) cannot be shown; undo a step")


_CURRENT: ContextVar[WorkBudget | None] = ContextVar("schedule_work_budget", default=None)


@contextmanager
def work_budget(budget: WorkBudget) -> Iterator[WorkBudget]:
    """Run the enclosed primitives within ``budget`` (per thread/context)."""
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)


def current_budget() -> WorkBudget | None:
    """The budget installed by :func:`work_budget` here, if any."""
    return _CURRENT.get()

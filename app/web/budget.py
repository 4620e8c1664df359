"""One work budget per request: what a link can make the web process do is bounded in
advance, whichever page replays it.

Every request runs inside :func:`request_budget` (installed for all routes by
:func:`install`): the schedule primitives it replays or applies — the explorer's states,
compare's two sides, a lesson's steps, a challenge's solution, the model page's traces —
draw on

* the request's index-map points (``max_index_map_points``: the one-to-one checks of
  ``transform_layout``), and
* the request's :class:`engine.schedule.WorkBudget`: at most ``max_request_cpu_s`` seconds
  of the thread's CPU time, and no program over ``max_program_nodes`` IR nodes (the step
  that would grow one past it is refused, so no step works on a larger one).

A refusal names its limit (:func:`over_budget_text`). Code that replays outside a request
(the CLI, tests) installs its own budget or none.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Any, Iterator

from engine.schedule import WorkBudget, WorkBudgetError, work_budget
from engine.schedule.primitives.layout import CheckBudget, IndexMapBudgetError, check_budget
from engine.schedule.work_budget import current_budget

__all__ = ["request_budget", "install", "over_budget_text", "budget_error_of", "ensure_budget"]

_LIMIT_NAMES = {"cpu_seconds": "max_request_cpu_s", "max_nodes": "max_program_nodes"}


@contextmanager
def request_budget(limits: Any) -> Iterator[WorkBudget]:
    """Install the budgets of one request (see the module docstring)."""
    budget = WorkBudget(cpu_seconds=limits.max_request_cpu_s,
                        max_nodes=limits.max_program_nodes)
    with check_budget(CheckBudget(limits.max_index_map_points)), work_budget(budget):
        yield budget


@contextmanager
def ensure_budget(limits: Any) -> Iterator[None]:
    """The request's budget when one is installed, else a new one for what this encloses."""
    if current_budget() is not None:
        yield
        return
    with request_budget(limits):
        yield


def install(app: Any) -> None:
    """Run every request of ``app`` inside :func:`request_budget`."""
    from flask import g

    from .services import limits

    @app.before_request
    def _open_budget() -> None:
        stack = ExitStack()
        stack.enter_context(request_budget(limits()))
        g._work_budget = stack

    @app.teardown_request
    def _close_budget(_exc: BaseException | None) -> None:
        stack = g.pop("_work_budget", None)
        if stack is not None:
            stack.close()


def budget_error_of(e: BaseException) -> BaseException | None:
    """The budget refusal behind ``e`` (itself, its cause, or the ScheduleError a
    TraceError carries), or None."""
    for cand in (e, getattr(e, "schedule_error", None), e.__cause__):
        if isinstance(cand, (WorkBudgetError, IndexMapBudgetError)):
            return cand
    return None


def over_budget_text(what: str, e: BaseException, limits: Any) -> str:
    """The sentence for a step refused by the request's budget, naming the limit."""
    if isinstance(e, WorkBudgetError):
        name = _LIMIT_NAMES.get(e.limit, e.limit)
        value = getattr(limits, name, None)
        return (f"{what}: {e.rule}. The explorer does at most this much per request "
                f"({name} = {value:g}); {e.hint}.")
    return (f"{what}: {getattr(e, 'primitive', '')} on {getattr(e, 'subject', '')} — "
            f"{getattr(e, 'rule', e)}. The explorer checks at most "
            f"{limits.max_index_map_points} points per request (max_index_map_points).")

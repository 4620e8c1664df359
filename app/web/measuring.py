"""The web side of measuring: which steps a pane asks the service for, within a time budget.

A pane request (runtime, cache) never waits for a long shared link to be measured: it asks
the measurement service (:class:`app.service.measurer.StepMeasurer`) for every step — the
current one first — takes what is stored, queues a few jobs, waits up to a budget, and
answers with the rest marked "queued (position k)"; the page polls for them. After a click,
:func:`prefetch` starts the new step's jobs before the browser even asks.
:func:`measure_plan` says whether a workload's sizes are measured, measured without the
cache simulation, or "simulate only" (``app.limits``). A body whose every step is measured
is rendered once per state (:class:`SettledBodies`): a state seen again shows it as it was.
"""
from __future__ import annotations

import time
from typing import Any

from flask import current_app, has_request_context, request

from ..kept import Kept, MiB
from ..limits import LimitError, MeasurePlan
from ..service.protocol import JobResult, PoolClosed, PoolUnavailable, QueueFull, step_dict
from .services import limits, measurer
from .session import Session


# Each measurement request works at most this long before answering with what it has;
# the pane then asks again (htmx), so a shared link with many steps fills in progressively
# instead of keeping the learner waiting for all of them.
STEP_BUDGET_S = 1.5


def step_order(session: Session) -> list[int]:
    """The current step first (what the learner looks at), then the rest in order."""
    return [session.at] + [k for k in range(session.nsteps + 1) if k != session.at]


# With worker processes: how many steps besides the current one a single pane request may
# queue (a long shared link must not fill the classroom's queue on its own), and how often
# the page asks again while steps are queued.
POOL_AHEAD = 3
POOL_POLL = "1s"


def client_key() -> str | None:
    """Whose measurements these are, for the queue's turns: the request's remote address
    (None outside a request). Every request's jobs carry it (a hook in
    :mod:`app.web.routes`)."""
    return request.remote_addr if has_request_context() else None


def measure_plan(session: Session):
    """``app.limits.Limits.measure_plan`` for this workload and sizes (None for a pasted
    program, whose FLOP count is unknown): ``plan.measure`` False means "simulate only"."""
    if session.workload_arg() is None:
        return None
    flops = float(session.info["flops"](**session.params))
    try:
        return limits().measure_plan(flops)
    except LimitError as e:     # (the session refuses these sizes before we get here)
        return MeasurePlan(False, flops, str(e))


def collect(session: Session, lookup, submit, value_of, budget: float):
    """Collect one value per step from the measurement workers without blocking for long.

    For every step (the current one first): the stored value (``lookup``), or a job —
    shared with every other request for the same program (``submit``). At most
    :data:`POOL_AHEAD` other steps are queued by one request. Waits up to ``budget``
    seconds in all, then reports the rest as queued with their queue position (0: running,
    None: not queued yet). Returns ``(by_step, queued, busy)`` where ``busy`` is the
    "server is busy" sentence when the queue was full.
    """
    t_end = time.monotonic() + budget
    by_step: dict[int, Any] = {}
    tickets: dict[int, Any] = {}
    queued: dict[int, int | None] = {}
    busy = None
    for k in step_order(session):
        mod = session.mod_at(k)
        got = lookup(mod)
        if got is not None:
            by_step[k] = got
            continue
        if busy is not None or (k != session.at and
                                len([j for j in tickets if j != session.at]) >= POOL_AHEAD):
            queued[k] = None
            continue
        try:
            got, ticket = submit(mod)
        except QueueFull as e:
            busy = str(e)
            queued[k] = None
            continue
        except (PoolClosed, PoolUnavailable) as e:
            by_step[k] = e
            continue
        if got is not None:
            by_step[k] = got
        else:
            tickets[k] = ticket
    for k, ticket in tickets.items():          # the current step first
        left = t_end - time.monotonic()
        if not ticket.done() and left > 0:
            try:
                ticket.result(left)
            except TimeoutError:
                pass
        if ticket.done():
            by_step[k] = value_of(ticket)
        else:
            queued[k] = ticket.position()
    return by_step, queued, busy


def stored(session: Session, lookup) -> dict[int, Any] | None:
    """Every step's stored value (``lookup``), or None as soon as one step has none: what
    a page can show at once, without a job or a wait (never submits)."""
    by_step: dict[int, Any] = {}
    for k in step_order(session):
        got = lookup(session.mod_at(k))
        if got is None:
            return None
        by_step[k] = got
    return by_step


def queued_text(position) -> str:
    """What the page says about a job at ``position`` in the queue (None: not queued yet)."""
    if position is None:
        return "waiting for room in the queue"
    if position == 0:
        return "measuring"
    return f"queued (position {position})"


def prefetch(session: Session, mod) -> None:
    """Start measuring (and cache-simulating) the program ``mod`` of ``session``'s current
    step without waiting, unless its sizes are "simulate only" (or the app turned
    prefetching off with ``PREFETCH_MEASUREMENTS``): the pane's own request then finds the
    job running, or its result stored."""
    plan = measure_plan(session)
    if not current_app.config.get("PREFETCH_MEASUREMENTS", True) or (plan and not plan.measure):
        return
    wl = session.workload_arg()
    measurer().prefetch(mod, wl[0] if wl else None, wl[1] if wl else {},
                        func_name=session.func_name, baseline=session.mod0 if wl is None else None,
                        cache=((plan is None or plan.simulate_cache)
                               and session.job_target is None),
                        target=session.job_target)


class SettledBodies:
    """The measurement and cache bodies of the last states whose every step is measured,
    as rendered (per app: :func:`settled_bodies`), by kind (``"measure"``, ``"cache"``) and
    the state's link.

    A settled body only shows stored results — every step measured (or simulated) without
    an error — which never change: the same state renders the same body. A body with
    anything still queued or failed (a remembered failure expires and is tried again) is
    never kept. A click back to a state seen before (an undo, a step link, a lesson's
    Previous) then carries its bodies without looking up and drawing each step again
    (4-5 ms of the answer's 15 ms for the course's fourth step)."""

    KEEP_BYTES = 8 * MiB

    def __init__(self) -> None:
        self._bodies: "Kept[Any]" = Kept(self.KEEP_BYTES)

    def get(self, kind: str, session: Session):
        return self._bodies.get((kind, session.url()))

    def keep(self, kind: str, session: Session, ctx: dict | None, html) -> None:
        """Keep ``html``, the body of ``kind`` rendered from ``ctx``, if it is settled."""
        if is_settled(kind, session, ctx):
            self._bodies.put((kind, session.url()), html)


def settled_bodies() -> SettledBodies:
    """This app's :class:`SettledBodies`."""
    bodies = current_app.extensions.get("settled_bodies")
    if bodies is None:
        bodies = current_app.extensions.setdefault("settled_bodies", SettledBodies())
    return bodies


def is_settled(kind: str, session: Session, ctx: dict | None) -> bool:
    """Does the pane context ``ctx`` (:func:`app.web.panes.measurement.context` for
    ``"measure"``, :func:`app.web.panes.cache.context` for ``"cache"``) show a measured
    (simulated) result for every step of ``session``, with nothing queued and nothing
    failed?"""
    if ctx is None or ctx.get("pending") or ctx.get("queued") or ctx.get("busy") \
            or ctx.get("unavailable") or ctx.get("simulate_only"):
        return False
    rows = ctx.get("rows") or []
    if sorted(r.get("step") for r in rows) != list(range(session.nsteps + 1)):
        return False
    if kind == "measure":
        if ctx.get("roofline_pending") or (session.workload_arg() is not None
                                           and not ctx.get("roofline_fig")
                                           and session.job_target is None):
            return False
        return all(r.get("ok") is True and r.get("stage") == "done" and not r.get("error")
                   for r in rows)
    if kind == "cache":
        return all(r.get("levels") and not r.get("error") for r in rows)
    return False


def may_measure_ahead() -> bool:
    """Whether a guess at the learner's next click (the toolbar form they are filling in,
    see :func:`app.web.routes.intent`) may be measured now: prefetching is on
    (``PREFETCH_MEASUREMENTS``, and ``MEASURE_AHEAD`` for guesses), the worker pool is
    already running (a guess never starts it), nothing waits in its queue and a worker is
    free. So a guess never queues ahead of a step that was asked for; a step asked for while
    a guess runs waits at most for that run (the guess's step and cache jobs)."""
    cfg = current_app.config
    if not cfg.get("PREFETCH_MEASUREMENTS", True) or not cfg.get("MEASURE_AHEAD", True):
        return False
    m = measurer()
    if not m.started:
        return False
    try:
        pool = m.pool
        return pool.queue.waiting() == 0 and pool.queue.running() < len(pool.worker_pids())
    except (PoolClosed, PoolUnavailable, AttributeError):
        return False


def step_results(session: Session, budget: float, stored_only: bool = False):
    """The step jobs the measurement and memory panes share, for every step of the session:
    ``(by_step, unavailable, queued, busy)`` — each step's result dict (with its ``step``),
    the sentence when the workers are unavailable, the steps still queued and the busy
    note. ``stored_only``: stored results alone (nothing submitted), None when a step has
    none yet."""
    m = measurer()
    wl = session.workload_arg()
    name, params = wl if wl else (None, {})
    baseline = session.mod0 if wl is None else None
    fname, gpu = session.func_name, session.job_target

    def lookup(mod):
        return m.cached(mod, name, params, fname, target=gpu)

    if stored_only:
        found = stored(session, lookup)
        if found is None:
            return None
        queued, busy = {}, None
    else:
        found, queued, busy = collect(
            session, lookup,
            lambda mod: m.submit(mod, name, params, func_name=fname, baseline=baseline,
                                 target=gpu),
            m.result_of, budget)
    by_step: dict[int, dict] = {}
    unavailable = None
    for k, res in found.items():
        if isinstance(res, Exception):       # the workers could not be started
            res = step_dict(JobResult("unavailable", str(res)), "")
        if res.get("stage") == "unavailable":
            unavailable = res.get("error")
            continue
        by_step[k] = dict(res, step=k)
    return by_step, unavailable, queued, busy

"""The model page's "tune every function": one search per distinct function shape.

:func:`tune_doc` lists the TensorIR functions of the model's current stage, one entry per
shape (functions that are structurally equal, names aside, share one search and then its
trace), each with the trace the link already has for it, or else the model's default recipe
(:mod:`engine.models.schedules`, its first steps storing the constant weights transposed:
the link then stores them so, :func:`engine.models.layouts.with_schedules`) — the search's
starting point, which a found trace replaces only when faster;
:func:`spec_from_form` checks the trial budget; :func:`progress_context` turns the job's
partial results (``f<i>``: trials done of total, GFLOP/s at the start and best so far, the
best trace's token, or why the function could not be tuned) into the live view; and
:func:`tuned_state` is the model link with every found trace applied. The searches run in a
measurement worker (:func:`app.service.actions.act_tune`), never here.
"""
from __future__ import annotations

from typing import Any

from engine import PrimFunc
from engine.ir.function import IRModule
from engine.models.layouts import constant_params
from engine.models.schedules import default_schedule

from ...errors import AppError
from ...limits import whole_number
from ..model import ModelState, same_shape_functions
from ..services import limits

DEFAULT_TRIALS = 16


def max_trials() -> int:
    return limits().max_model_tune_trials


def spec_from_form(form: Any, state: ModelState) -> dict:
    """The search spec (auto space, evolutionary, the trial budget per function)."""
    raw = str(form.get("trials", DEFAULT_TRIALS)).strip()
    top = max_trials()
    trials = whole_number(raw)
    if trials is None or not 1 <= trials <= top:
        raise AppError(400, "Bad trial budget",
                       f"The number of trials per function must be a whole number from 1 to "
                       f"{top} (max_model_tune_trials), got “{raw[:12]}”.",
                       back=state.url(), back_label="the model")
    return {"space": "auto", "trials": trials, "strategy": "evolutionary", "seed": 0,
            "model": state.name}


def tune_doc(state: ModelState) -> dict:
    """The job's document: one entry per distinct function shape of the current stage
    (``name`` the first function, ``members`` all of that shape, ``func`` the unscheduled
    function, ``start`` the trace the link has for it as JSON, or None)."""
    base = state.base()
    _, traces = state.scheduled()     # a link whose traces do not replay is refused here
    prims = [n for n, f in base.items() if isinstance(f, PrimFunc)]
    if len(prims) > limits().max_model_traces:
        raise AppError(400, "Over a limit", f"This model has {len(prims)} TensorIR functions; "
                       f"a link schedules at most {limits().max_model_traces} "
                       "(max_model_traces), so they cannot all be tuned.",
                       back=state.url(), back_label="the model")
    seen: set[str] = set()
    functions = []
    for name in prims:
        if name in seen:
            continue
        members = same_shape_functions(base, name)
        seen.update(members)
        start = traces.get(name)
        recipe = start is None      # none in the link: the search starts from the recipe
        if recipe:
            weights = frozenset.intersection(*(constant_params(base, m) for m in members))
            start = default_schedule(IRModule(((name, base[name]),)), name,
                                     weights=weights).trace
        functions.append({"name": name, "members": members, "func": base[name],
                          "start": start.as_json(), "recipe": recipe})
    return {"functions": functions}


def _rows(data: dict) -> list[dict]:
    """The job's ``f<i>`` entries in order (copies)."""
    found = sorted((int(k[1:]), v) for k, v in data.items()
                   if k[:1] == "f" and k[1:].isdigit() and isinstance(v, dict))
    return [dict(v) for _, v in found]


def tuned_state(state: ModelState, ticket: Any) -> ModelState:
    """``state`` with the best trace found for each function shape applied to every function
    of that shape (a function whose search failed keeps the trace it had)."""
    tokens = dict(state.tokens)
    for row in _rows(ticket.partial()):
        if row.get("token"):
            for member in row.get("members") or [row.get("name")]:
                tokens[str(member)] = row["token"]
    return ModelState(state.name, state.batch, state.fused, tokens)


def progress_context(ticket: Any, state: ModelState) -> dict:
    """The live view: per function shape its trials and GFLOP/s (start and best), and once
    the job has ended the link with the found traces."""
    data = ticket.partial()
    rows = _rows(data)
    for row in rows:
        s, b = row.get("start_gflops"), row.get("best_gflops")
        row["speedup"] = (b / s) if s and b else None
    done = ticket.done()
    status = None
    if done:
        result = ticket.result(0)
        if not result.ok:
            status = ("stopped: what was found so far is kept" if ticket.stop_requested
                      else f"the search ended early: {result.message or result.status}")
        for row in rows:
            if row.get("state") in ("waiting", "tuning") and not row.get("error"):
                row["error"] = ("not finished" + ("" if ticket.stop_requested else
                                                  ": " + (result.message or result.status))
                                if not result.ok else None)
    tuned = tuned_state(state, ticket) if done else None
    return {"ticket": ticket, "state": ticket.state, "rows": rows, "done": done,
            "status": status, "queue_position": ticket.position(), "model_state": state,
            "tuned_url": tuned.url() if tuned is not None else None,
            "trials_done": sum(int(r.get("done") or 0) for r in rows),
            "trials_total": sum(int(r.get("total") or 0) for r in rows),
            "query": state.url().split("?", 1)[1]}

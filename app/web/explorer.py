"""The explorer page: every pane's context for one state (program, diff, loop diagram, trace,
toolbar). The measurement, cache and code panes load lazily (their own requests, see
:mod:`app.web.panes.measurement`, :mod:`app.web.panes.cache`, :mod:`app.web.panes.code`),
except that measurements already stored for every step come with the page at once
(:func:`stored_measurements`: a state seen before shows everything in one response).

After a click (or an undo, a step link) the measurement pane stays on the page: the answer
carries :func:`step_event`, on which the page asks for the measurement and cache bodies
of the new state at once (in parallel with swapping the other panes) and updates the drawn
plots in place.
"""
from __future__ import annotations

from typing import Any

from flask import render_template
from markupsafe import Markup

from . import measuring, toolbar
from .panes import cache as cache_view
from .panes import diagram, measurement, program, trace
from .selection import module_trees
from .services import store
from .session import Session
from .targets import TARGETS


def context(session: Session, sel: str | None = None) -> dict:
    """Context for the whole explorer page (or for all its panes as out-of-band swaps)."""
    mod = session.mod_at(session.at)
    trees = module_trees(mod)
    ctx: dict[str, Any] = {"s": session, "sel": sel, "mod": mod, "trees": trees}
    ctx.update(program.context(session, mod, trees))
    ctx.update(trace.context(session))
    ctx["svgs"] = diagram.diagrams(mod, trees, text=ctx["program_text"],
                                   gpu=session.target.is_gpu)
    ctx["diagram_gpu"] = diagram.gpu_context(session, mod, trees)
    ctx["toolbar"] = toolbar.context(trees, sel, bind_trial(session))
    ctx["can_save"] = session.workload_arg() is not None and store() is not None
    ctx["targets"] = list(TARGETS.values())
    ctx.update(stored_measurements(session))
    return ctx


def bind_trial(session: Session):
    """The toolbar's bind trials for a GPU session (None for the CPU: no bind offered)."""
    if not session.target.is_gpu:
        return None
    return toolbar.bind_trial_of(lambda: session.schedule_at(session.at), session.bounded)


STEP_EVENT = "explorer:step"


def step_event(session: Session, ctx: dict) -> dict[str, dict]:
    """The ``HX-Trigger`` of an answer that moves the page to ``session``'s state: its
    address (``url``: the tabs loaded when shown follow it), the measurement and cache
    bodies' addresses for this state, and whether the answer carries them already
    (``ctx``'s stored ones). The page asks for the ones it does not carry as
    soon as the answer arrives, and drops any answer for another state."""
    return {STEP_EVENT: {"url": session.url(),
                         "measure": session.url(path="/measure"),
                         "cache": session.url(path="/cache"),
                         "measure_inline": ctx.get("measure_html") is not None,
                         "cache_inline": ctx.get("cache_html") is not None}}


def stored_measurements(session: Session) -> dict[str, Markup | None]:
    """The measurement and cache panes' bodies when every step's results are stored
    (``measure_html``, ``cache_html``; None: that pane loads with its own request, which
    starts the missing jobs and polls). Never submits a job nor waits for one. A settled
    body is rendered once per state (:class:`app.web.measuring.SettledBodies`)."""
    bodies = measuring.settled_bodies()
    out: dict[str, Markup | None] = {"measure_html": bodies.get("measure", session),
                                     "cache_html": bodies.get("cache", session)}
    if out["measure_html"] is None:
        mctx = measurement.context(session, stored_only=True)
        if mctx is not None and not mctx.get("pending") and not mctx.get("roofline_pending"):
            out["measure_html"] = Markup(render_template("panes/measure.html", s=session,
                                                         **mctx))
            bodies.keep("measure", session, mctx, out["measure_html"])
    if out["cache_html"] is None:
        cctx = cache_view.context(session, stored_only=True)
        if cctx is not None and not cctx.get("pending"):
            out["cache_html"] = Markup(render_template("panes/cache.html", s=session, **cctx))
            bodies.keep("cache", session, cctx, out["cache_html"])
    return out


def gpu_strip_update(session: Session, measure_ctx: dict | None) -> str:
    """The loop diagram's GPU line, out-of-band, for the measurement body's own answer once
    the worker's result for the state's step is in (registers per thread, shared memory,
    occupancy: what :func:`app.web.panes.diagram.gpu_context` reads from the stored result
    and the diagram drawn with the click had not yet); empty on the CPU and while the step
    is still measured."""
    if not session.target.is_gpu or not measure_ctx or not measure_ctx.get("current") \
            or measure_ctx.get("withdraw"):
        return ""
    mod = session.mod_at(session.at)
    strip = diagram.gpu_context(session, mod, module_trees(mod), measure_ctx["current"])
    if not strip or not strip["kernels"]:
        return ""
    return render_template("panes/diagram_gpu.html", diagram_gpu=strip, strip_oob=True)

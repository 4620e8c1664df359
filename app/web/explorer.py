"""The explorer page: every pane's context for one state (program, diff, loop diagram, trace,
toolbar). The measurement, cache and code panes load lazily (their own requests, see
:mod:`app.web.panes.measurement`, :mod:`app.web.panes.cache`, :mod:`app.web.panes.code`),
except that measurements already stored for every step come with the page at once
(:func:`stored_measurements`: a state seen before shows everything in one response).
"""
from __future__ import annotations

from typing import Any

from flask import render_template
from markupsafe import Markup

from . import toolbar
from .panes import cache as cache_view
from .panes import diagram, measurement, program, trace
from .selection import module_trees
from .services import store
from .session import Session


def context(session: Session, sel: str | None = None) -> dict:
    """Context for the whole explorer page (or for all its panes as out-of-band swaps)."""
    mod = session.mod_at(session.at)
    trees = module_trees(mod)
    ctx: dict[str, Any] = {"s": session, "sel": sel, "mod": mod, "trees": trees}
    ctx.update(program.context(session, mod, trees))
    ctx.update(trace.context(session))
    ctx["svgs"] = diagram.diagrams(mod, trees)
    ctx["toolbar"] = toolbar.context(trees, sel)
    ctx["can_save"] = session.workload_arg() is not None and store() is not None
    ctx.update(stored_measurements(session))
    return ctx


def stored_measurements(session: Session) -> dict[str, Markup | None]:
    """The measurement and cache panes' bodies when every step's results are stored
    (``measure_html``, ``cache_html``; None: that pane loads with its own request, which
    starts the missing jobs and polls). Never submits a job nor waits for one."""
    out: dict[str, Markup | None] = {"measure_html": None, "cache_html": None}
    mctx = measurement.context(session, stored_only=True)
    if mctx is not None and not mctx.get("pending") and not mctx.get("roofline_pending"):
        out["measure_html"] = Markup(render_template("panes/measure.html", s=session, **mctx))
    cctx = cache_view.context(session, stored_only=True)
    if cctx is not None and not cctx.get("pending"):
        out["cache_html"] = Markup(render_template("panes/cache.html", s=session, **cctx))
    return out

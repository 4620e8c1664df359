"""The explorer page: every pane's context for one state (program, diff, loop diagram, trace,
toolbar). The measurement, cache and code panes load lazily (their own requests, see
:mod:`app.web.panes.measurement`, :mod:`app.web.panes.cache`, :mod:`app.web.panes.code`).
"""
from __future__ import annotations

from typing import Any

from . import toolbar
from .panes import diagram, program, trace
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
    return ctx

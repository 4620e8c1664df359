"""The cache pane: simulated cache misses per level at every step and per buffer at the
current one (``engine.cache.simulate``, run by the measurement service's workers), and the
access-pattern view (which elements one iteration of a loop touches, and in which order).
On a GPU target the pane is the memory pane of :mod:`app.web.panes.gpu_memory` (the
analytic model's accesses and traffic) instead; on an ARM board (run under qemu) it says the
simulation is not available for an emulated target.
"""
from __future__ import annotations

from typing import Any

from ...limits import whole_number
from .. import measuring, plots
from ..selection import module_trees, parse_sel, walk_tree
from ..services import measurer
from ..session import Session
from ..targets import NO_SIMULATION_ON_BOARD
from . import gpu_memory


def context(session: Session, budget_s: float | None = None,
            stored_only: bool = False) -> dict | None:
    """Simulated cache misses per level at every step, and per buffer at the current one.

    ``stored_only``: from stored reports alone, or None when a step has none yet (nothing
    submitted, nothing waited for)."""
    budget = measuring.STEP_BUDGET_S if budget_s is None else budget_s
    plan = measuring.measure_plan(session)
    if session.gpu is not None:
        # a GPU target: the memory pane (the model's accesses and traffic, from the steps'
        # worker results) in the cache pane's place
        if plan is not None and not plan.measure:
            return {"rows": [], "fig": None, "unavailable": None, "current": None,
                    "per_buffer": [], "npoints": 0, "pending": [],
                    "simulate_only": plan.reason}
        return gpu_memory.context(session, budget, stored_only)
    if session.target.is_board:
        return {"rows": [], "fig": None, "unavailable": NO_SIMULATION_ON_BOARD,
                "current": None, "per_buffer": [], "npoints": 0, "pending": []}
    if plan is not None and (not plan.measure or not plan.simulate_cache):
        return {"rows": [], "fig": None, "unavailable": None, "current": None,
                "per_buffer": [], "npoints": 0, "pending": [],
                "simulate_only": plan.reason or plan.cache_reason}
    m = measurer()
    fname = session.func_name
    if stored_only:
        found = measuring.stored(session, lambda mod: m.cached_cache(mod, fname))
        if found is None:
            return None
        queued, busy = {}, None
    else:
        found, queued, busy = measuring.collect(
            session, lambda mod: m.cached_cache(mod, fname),
            lambda mod: m.submit_cache(mod, fname), m.cache_result_of, budget)
    by_step: dict[int, dict] = {}
    unavailable = None
    for k, rep in found.items():
        if isinstance(rep, Exception):       # the workers could not be started
            unavailable = str(rep)
            continue
        by_step[k] = {"step": k, "levels": rep.get("levels"), "error": rep.get("error"),
                      "report": rep}
    ctx = _cache_ctx(session, by_step, list(queued), unavailable)
    ctx.update(queued={k: measuring.queued_text(p) for k, p in queued.items()}, busy=busy,
               poll_delay=measuring.POOL_POLL)
    return ctx


def _cache_ctx(session: Session, by_step: dict[int, dict], pending: list[int],
               unavailable) -> dict:
    rows = [by_step[k] for k in sorted(by_step)]
    cur = by_step[session.at]["report"] if session.at in by_step else None
    good = [r for r in rows if r.get("levels")]
    fig = plots.cache_figure(good, current=session.at) if good else None
    per_buffer = []
    if cur and cur.get("per_buffer"):
        for bname, levels in cur["per_buffer"].items():
            per_buffer.append({"name": bname, "levels": levels})
    return {"rows": rows, "fig": fig, "fig_legend": plots.legend(fig),
            "unavailable": unavailable, "current": cur,
            "per_buffer": per_buffer, "npoints": len(good), "pending": sorted(pending)}


def pattern(session: Session, sel: str | None, iteration_raw: str | None) -> dict:
    """Which elements of each buffer one iteration of a loop touches, and in which order
    (``engine.cache.access_pattern``): the course's "the j1 loop walks B contiguously"."""
    mod = session.mod_at(session.at)
    trees = module_trees(mod)
    parsed = parse_sel(sel) if sel else None
    tree = next((t for t in trees if parsed and t.func_name == parsed["func"]), trees[0])
    node = tree.by_sel.get(sel) if sel else None
    if node is None or not node.is_loop:
        node = next((n for n in walk_tree(tree.roots) if n.is_loop and n.sel), None)
    ctx: dict[str, Any] = {"loop": node, "error": None, "figs": [],
                           "sel": node.sel if node is not None else None}
    if node is None:
        ctx["error"] = "This program has no loop to look at."
        return ctx
    extent = node.extent or 1
    iteration = whole_number(iteration_raw) if iteration_raw not in (None, "") else 0
    if iteration is None:
        iteration = -1
    if not 0 <= iteration < extent:
        ctx["error"] = (f"Iteration must be a whole number from 0 to {extent - 1} "
                        f"(loop {node.name} has {extent} iterations).")
        iteration = 0
    ctx["iteration"] = iteration
    ctx["extent"] = extent
    try:
        # (builds and runs instrumented code: in a worker process)
        d = measurer().pattern(mod, tree.func_name, node.node, iteration)
    except ValueError as e:  # e.g. the loop was unrolled away by lowering
        ctx["error"] = f"No access pattern for loop {node.name}: {e}"
        return ctx
    ctx["events"] = d.get("events", 0)
    ctx["truncated"] = d.get("truncated", False)
    for bname, b in (d.get("buffers") or {}).items():
        if not b.get("touched"):
            continue
        fig, block = plots.pattern_figure(bname, b["first_touch"], max(ctx["events"], 1))
        ctx["figs"].append({"name": bname, "fig": fig, "shape": b.get("shape"),
                            "touched": b.get("touched"), "block": block})
    return ctx

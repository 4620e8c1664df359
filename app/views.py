"""View models: everything a template needs for one pane, computed from a :class:`Session`.

Routes stay thin: they decode the request into a Session, call one of these functions and
render a template. Each pane degrades to "not available yet" when the engine part it needs
has not landed (see :mod:`app.bridge`).
"""
from __future__ import annotations

import functools
import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any


from . import bridge, diagram, diffview, measure, plots
from .nodes import FuncTree, loops_of_block, module_trees, names_to_sels, parse_sel, walk_tree
from .primitives import block_prims, loop_prims
from .session import Session

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------- gallery
def gallery() -> dict:
    from .session import workload_info, workload_names
    try:
        names = workload_names()
    except bridge.NotAvailable as e:
        return {"workloads": [], "unavailable": str(e)}
    cards = []
    for n in names:
        try:
            info = workload_info(n)
        except Exception as e:  # noqa: BLE001 - one broken workload must not hide the rest
            cards.append({"name": n, "title": n, "description": f"(cannot describe: {e})",
                          "params": {}, "limits": {}})
            continue
        cards.append({"name": n, "title": info["title"], "description": info["description"],
                      "params": info["defaults"], "limits": info["limits"]})
    by_workload: dict[str, list[dict]] = {}
    all_presets = presets()
    for p in all_presets:
        by_workload.setdefault(p["workload"], []).append(p)
    for c in cards:
        c["presets"] = by_workload.get(c["name"], [])
    return {"workloads": cards, "unavailable": None, "saved": saved_traces(),
            "presets": all_presets}


def presets(workload: str | None = None, here: dict | None = None) -> list[dict]:
    """The shipped schedule presets (``engine.presets``), optionally of one workload:
    name, title, description, workload, sizes and the explorer link that replays it
    (``url``); with ``here`` (the explorer's current sizes) also ``url_here``, the same
    recipe at those sizes when they differ from the preset's and it applies to them."""
    try:
        mod = bridge.part("presets")
        out = []
        for name in mod.names():
            p = mod.info(name)
            if workload is not None and p.workload != workload:
                continue
            sizes = ", ".join(f"{k}={v}" for k, v in p.params.items())
            mine = {k: here[k] for k in p.params if here and k in here}
            here_url = _preset_url(name, tuple(sorted(mine.items()))) \
                if mine and mine != dict(p.params) else None
            out.append({"name": p.name, "title": p.title, "description": p.description,
                        "workload": p.workload, "sizes": sizes, "tags": list(p.tags),
                        "url": _preset_url(name, ()), "url_here": here_url})
        return out
    except Exception:  # noqa: BLE001 - presets are an extra: never break the page for them
        log.exception("listing the presets failed")
        return []


@functools.lru_cache(maxsize=256)
def _preset_url(name: str, overrides: tuple) -> str | None:
    """``engine.presets.info(name).explore_url(**overrides)``, or None when the recipe does
    not fit those sizes. Cached: it replays the whole schedule (10-100 ms) and the trace
    pane lists the presets on every click."""
    try:
        return bridge.part("presets").info(name).explore_url(**dict(overrides))
    except Exception:  # noqa: BLE001 - this recipe does not fit these sizes
        return None


def saved_traces(limit: int = 20) -> list[dict]:
    """The newest saved traces (name, workload, sizes, steps, link) from the store."""
    from flask import current_app
    store = current_app.extensions.get("store")
    if store is None:
        return []
    out = []
    for t in store.list_traces(limit=limit):
        insts = t.trace.get("insts", []) if isinstance(t.trace, dict) else []
        out.append({"id": t.id, "name": t.name, "workload": t.workload,
                    "params": ", ".join(f"{k}={v}" for k, v in (t.params or {}).items()),
                    "insts": len(insts), "url": f"/saved/{t.id}",
                    "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(t.created))})
    return out


# ---------------------------------------------------------------------------- program pane
@dataclass
class Seg:
    """A piece of a program line; clickable when ``sel`` is set."""

    text: str
    sel: str | None = None
    start: int | None = None
    end: int | None = None
    kind: str = ""


@dataclass
class Line:
    no: int
    text: str
    sel: str | None = None          # selection id of the first loop/block starting here
    end: int | None = None          # last line of that loop/block
    kind: str = ""
    changed: bool = False
    segs: list = field(default_factory=list)   # the line cut into clickable pieces


def _segments(line: Line, entries: list) -> list[Seg]:
    """Cut a line into pieces: one loop/block starting here -> the whole statement is
    clickable; several (``for i, j, k in T.grid(...)``) -> each loop name is."""
    text = line.text
    if not entries:
        return [Seg(text)]
    indent = len(text) - len(text.lstrip(" "))
    if len(entries) == 1:
        sel, end, kind, _name = entries[0]
        return [Seg(text[:indent]), Seg(text[indent:], sel, line.no, end, kind)]
    head, sep, _rest = text.partition(" in ")
    segs: list[Seg] = []
    pos = 0
    for sel, end, kind, name in entries:
        m = re.search(r"\b" + re.escape(name) + r"\b", head[pos:]) if name else None
        if m is None:
            continue
        a, b = pos + m.start(), pos + m.end()
        segs.append(Seg(text[pos:a]))
        segs.append(Seg(text[a:b], sel, line.no, end, kind))
        pos = b
    segs.append(Seg(text[pos:]))
    return [sg for sg in segs if sg.text or sg.sel]


def script_of(mod) -> str:
    try:
        return mod.script()
    except ImportError as e:
        raise bridge.NotAvailable("the program printer (engine.script)", str(e)) from None


def program_lines(mod, trees: list[FuncTree], changed: set[int] | None = None) -> list[Line]:
    changed = changed or set()
    spans = []
    try:
        swp = bridge.attr("script", "script_with_spans")
        text, spans = swp(mod)
    except bridge.NotAvailable:
        text = script_of(mod)
    lines = [Line(i + 1, t, changed=(i + 1) in changed) for i, t in enumerate(text.splitlines())]
    by_node: dict[int, Any] = {}
    for t in trees:
        by_node.update(t.by_node)
    starts: dict[int, list] = {}
    for sp in spans or []:
        node = bridge.field(sp, "node")
        start = bridge.field(sp, "start_line")
        end = bridge.field(sp, "end_line")
        kind = bridge.field(sp, "kind", "")
        if kind not in ("loop", "block"):
            continue
        entry = by_node.get(id(node))
        if entry is None or not entry.sel or start is None or not 1 <= start <= len(lines):
            continue
        lst = starts.setdefault(start, [])
        if all(e[0] != entry.sel for e in lst):
            lst.append((entry.sel, end or start, kind, bridge.field(sp, "name", entry.name)))
    for ln in lines:
        entries = starts.get(ln.no, [])
        if entries:
            ln.sel, ln.end, ln.kind = entries[0][0], entries[0][1], entries[0][2]
        ln.segs = _segments(ln, entries)
    return lines


# ---------------------------------------------------------------------------- steps
def _fmt_value(v) -> str:
    if v is None:
        return "None"
    if isinstance(v, str):
        return v if v.replace("_", "").isalnum() else json.dumps(v)
    return json.dumps(v)


def inst_python(inst) -> str:
    """A readable one-line form of ``[kind, inputs, attrs, outputs]`` (fallback label)."""
    try:
        kind, inputs, attrs, outputs = (list(inst) + [[], [], []])[:4]
    except Exception:  # noqa: BLE001
        return str(inst)
    name = "".join("_" + c.lower() if c.isupper() else c for c in str(kind)).lstrip("_")
    args = ", ".join(_fmt_value(x) for x in (inputs or []))
    if attrs:
        args += (", " if args else "") + ", ".join(_fmt_value(x) for x in attrs)
    lhs = ", ".join(str(o) for o in (outputs or []))
    return (f"{lhs} = " if lhs else "") + f"sch.{name}({args})"


def python_lines(session: Session) -> list[str] | None:
    """The engine's per-instruction Python, when it gives one line per instruction."""
    if session.trace is None:
        return None
    try:
        py = session.trace.steps()
    except Exception:  # noqa: BLE001 - fall back to our own rendering of the instructions
        return None
    if isinstance(py, (list, tuple)) and len(py) == len(session.insts):
        return [str(x) for x in py]
    return None


@dataclass
class Step:
    k: int
    label: str
    lookups: list = field(default_factory=list)
    current: bool = False
    future: bool = False
    raw: str = ""


_HANDLE = re.compile(r"\b([bl]\d+)\b")


def _handle_names(session: Session, k: int, start: int, end: int) -> dict[str, str]:
    """Printed names of the handles a step's look-ups define (``b0`` -> ``Y``,
    ``l2`` -> ``j``), found in the program *before* the step."""
    names: dict[str, str] = {}
    trees = None
    for inst in session.insts[start:end]:
        try:
            kind, inputs, attrs, outputs = inst[:4]
        except (TypeError, ValueError):
            continue
        if kind in ("GetBlock", "GetSBlock") and attrs and outputs:
            names[str(outputs[0])] = str(attrs[0])
        elif kind == "GetLoops" and inputs and str(inputs[0]) in names:
            if trees is None:
                try:
                    trees = module_trees(session.mod_at(k - 1))
                except Exception:  # noqa: BLE001 - labels are a nicety
                    return names
            block = names[str(inputs[0])]
            for t in trees:
                chain = loops_of_block(t, block)
                if chain:
                    for out, loop in zip(outputs, chain):
                        names[str(out)] = loop.name
                    break
    return names


def _friendly(line: str, names: dict[str, str]) -> str:
    """``l4, l5 = sch.split(l2, factors=[None, 4])`` -> ``sch.split(j, factors=[None, 4])``."""
    call = line.split(" = ", 1)[1] if " = sch." in line else line
    return _HANDLE.sub(lambda m: names.get(m.group(1), m.group(1)), call)


def steps(session: Session) -> list[Step]:
    py = python_lines(session)
    out = [Step(0, "initial program", current=session.at == 0)]
    start = 0
    for k, end in enumerate(session.step_ends, start=1):
        lines = [(py[i] if py else inst_python(session.insts[i])) for i in range(start, end)]
        names = _handle_names(session, k, start, end)
        label = _friendly(lines[-1], names) if names else lines[-1]
        out.append(Step(k, label, lookups=lines[:-1], current=session.at == k,
                        future=k > session.at, raw="\n".join(lines)))
        start = end
    return out


# ---------------------------------------------------------------------------- explorer page
def explorer(session: Session, sel: str | None = None) -> dict:
    """Context for the whole explorer (all panes)."""
    ctx: dict[str, Any] = {"s": session, "sel": sel}
    mod = None
    try:
        mod = session.mod_at(session.at)
    except bridge.NotAvailable as e:
        ctx["schedule_unavailable"] = str(e)
        mod = session.mod0
        session.at = 0
    ctx["mod"] = mod
    trees = module_trees(mod)
    ctx["trees"] = trees
    # program + diff
    ctx["program_error"] = None
    changed: set[int] = set()
    ctx["diff_rows"] = None
    try:
        after = script_of(mod)
        if session.at > 0:
            before = script_of(session.mod_at(session.at - 1))
            rows = diffview.diff_rows(before, after)
            ctx["diff_rows"] = rows
            ctx["diff_summary"] = diffview.summary(rows)
            changed = {r.new for r in rows if r.kind == "add"}
        ctx["lines"] = program_lines(mod, trees, changed)
    except bridge.NotAvailable as e:
        ctx["lines"] = None
        ctx["program_error"] = str(e)
    ctx["svgs"] = [diagram.render_svg(t, title=t.func_name, footprints=footprints(mod, t))
                   for t in trees]
    try:
        ctx["steps"] = steps(session)
    except Exception as e:  # noqa: BLE001
        ctx["steps"] = [Step(0, "initial program", current=True)]
        ctx["steps_error"] = str(e)
    ctx["toolbar"] = toolbar(session, trees, sel)
    ctx["presets"] = presets(session.workload, here=dict(session.params)) \
        if session.workload != "custom" else []
    ctx["schedule_available"] = bridge.has("schedule", "Schedule")
    from flask import current_app, has_app_context
    ctx["can_save"] = (has_app_context() and session.workload != "custom"
                       and current_app.extensions.get("store") is not None)
    ctx["runtime_available"] = bridge.has("runtime", "build")
    return ctx


def footprints(mod, tree: FuncTree) -> dict | None:
    """``id(For) -> (bytes, fits_in)`` from ``engine.cache.loop_footprints`` (None when the
    cache part is absent or cannot analyse this program: the diagram then shows none)."""
    try:
        lf = bridge.attr("cache", "loop_footprints")
        geometry = _geometry()
        out = {}
        for fp in lf(mod[tree.func_name], tuple(geometry.levels)):
            out[id(fp.loop)] = (int(fp.line_bytes), fp.fits_in)
        return out
    except Exception:  # noqa: BLE001 - the diagram must render without it
        return None


_GEOMETRY = None


def _geometry():
    global _GEOMETRY
    if _GEOMETRY is None:
        _GEOMETRY = bridge.attr("cache", "host_geometry")()
    return _GEOMETRY


def toolbar(session: Session, trees: list[FuncTree], sel: str | None) -> dict:
    parsed = parse_sel(sel) if sel else None
    tree = next((t for t in trees if parsed and t.func_name == parsed["func"]), None)
    node = tree.by_sel.get(sel) if tree is not None else None
    if node is None:
        return {"sel": None, "node": None, "prims": [], "kind": None,
                "stale": bool(sel)}
    if node.is_loop:
        prims = loop_prims(tree, node)
        desc = f"loop {node.name} (extent {node.extent_text}, {node.kind})"
    else:
        prims = block_prims(tree, node.name)
        desc = f"block {node.name}"
    try:
        sched_cls = bridge.attr("schedule", "Schedule")
    except bridge.NotAvailable:
        sched_cls = None
    for p in prims:
        if sched_cls is None or not callable(getattr(sched_cls, p.name, None)):
            p.disabled = f"{p.name} is not available yet in this engine"
    return {"sel": sel, "node": node, "prims": prims, "kind": "loop" if node.is_loop else "block",
            "desc": desc, "stale": False}


def refusal_highlight(exc, trees: list[FuncTree]) -> list[str]:
    sels: list[str] = []
    for node in getattr(exc, "nodes", None) or []:
        for t in trees:
            e = t.by_node.get(id(node))
            if e is not None and e.sel and e.sel not in sels:
                sels.append(e.sel)
    for s in names_to_sels(trees, getattr(exc, "highlight", None) or []):
        if s not in sels:
            sels.append(s)
    for s in getattr(exc, "sels", None) or []:
        if s not in sels:
            sels.append(s)
    return sels


# ---------------------------------------------------------------------------- measurements
# Each measurement request works at most this long before answering with what it has;
# the pane then asks again (htmx), so a shared link with many steps fills in progressively
# instead of keeping the learner waiting for all of them.
STEP_BUDGET_S = 1.5


def _step_order(session: Session) -> list[int]:
    """The current step first (what the learner looks at), then the rest in order."""
    return [session.at] + [k for k in range(session.nsteps + 1) if k != session.at]


# With worker processes: how many steps besides the current one a single pane request may
# queue (a long shared link must not fill the classroom's queue on its own), and how often
# the page asks again while steps are queued.
POOL_AHEAD = 3
POOL_POLL = "1s"


def measure_plan(session: Session):
    """``app.limits.Limits.measure_plan`` for this workload and sizes (None for a pasted
    program, whose FLOP count is unknown): ``plan.measure`` False means "simulate only"."""
    wl = session.workload_arg()
    if wl is None:
        return None
    from .limits import LimitError, MeasurePlan
    from .session import limits
    lim = limits()
    f = session.info.get("flops")
    try:
        flops = float(f(**session.params) if callable(f) else f)
    except Exception:  # noqa: BLE001 - no FLOP count: nothing to plan with
        return None
    if lim is None:
        return None
    try:
        return lim.measure_plan(flops)
    except LimitError as e:     # (the session refuses these sizes before we get here)
        return MeasurePlan(False, flops, str(e))


def _pooled(session: Session, lookup, submit, value_of, budget: float):
    """Collect one value per step from the measurement workers without blocking for long.

    For every step (the current one first): the stored value (``lookup``), or a job —
    shared with every other request for the same program (``submit``). At most
    :data:`POOL_AHEAD` other steps are queued by one request. Waits up to ``budget``
    seconds in all, then reports the rest as queued with their queue position (0: running,
    None: not queued yet). Returns ``(by_step, queued, busy)`` where ``busy`` is the
    "server is busy" sentence when the queue was full.
    """
    from .workers import PoolClosed, PoolUnavailable, QueueFull
    t_end = time.monotonic() + budget
    by_step: dict[int, Any] = {}
    tickets: dict[int, Any] = {}
    queued: dict[int, int | None] = {}
    busy = None
    for k in _step_order(session):
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


#: How long the code pane waits for its compile before answering "queued" and polling.
CODE_BUDGET_S = 3.0


def _queued_text(position) -> str:
    if position is None:
        return "waiting for room in the queue"
    if position == 0:
        return "measuring"
    return f"queued (position {position})"


def measurements(session: Session, budget_s: float | None = None) -> dict:
    budget = STEP_BUDGET_S if budget_s is None else budget_s
    plan = measure_plan(session)
    if plan is not None and not plan.measure:
        # Simulate only: scheduled, printed and drawn, never compiled or run.
        return {"rows": [], "fig": None, "unavailable": None, "current": None,
                "speedup": None, "pending": [], "simulate_only": plan.reason}
    m = measure.active()
    ctx = _measurements_pooled(session, m, budget) if m is not None else \
        _measurements_local(session, budget)
    ctx["large_note"] = plan.note if plan is not None else None
    return ctx


def _measurements_local(session: Session, budget: float) -> dict:
    """The measurement pane measured in this process (tests, no worker pool)."""
    t0 = time.perf_counter()
    by_step: dict[int, dict] = {}
    pending: list[int] = []
    fresh = 0          # measurements made by this request (always at least one)
    unavailable = None
    baseline = session.mod0 if session.workload_arg() is None else None
    wl = session.workload_arg()
    name, params = (wl[0], wl[1]) if wl else (None, {})
    for k in _step_order(session):
        try:
            mod = session.mod_at(k)
        except bridge.NotAvailable as e:
            unavailable = str(e)
            break
        res = measure.cached(mod, name, params, session.func_name)
        if res is None:
            if fresh and time.perf_counter() - t0 > budget:
                pending.append(k)
                continue
            res = measure.measure_step(mod, name, params, func_name=session.func_name,
                                       baseline=baseline)
            fresh += 1
        if res.get("stage") == "unavailable":
            unavailable = res.get("error")
            break
        r = dict(res)
        r["step"] = k
        by_step[k] = r
    ctx = _measurement_ctx(session, by_step, pending, unavailable)
    ctx.update(roofline(session, ctx["rows"], None))
    return ctx


def _measurement_ctx(session: Session, by_step: dict[int, dict], pending: list[int],
                     unavailable) -> dict:
    rows = [by_step[k] for k in sorted(by_step)]
    fig = plots.runtime_figure(rows, current=session.at) if rows else None
    cur = by_step.get(session.at)
    base = by_step.get(0)
    speedup = None
    if cur is not None and session.at > 0 and base and base.get("time_ms") and cur.get("time_ms"):
        speedup = base["time_ms"] / cur["time_ms"]
    return {"rows": rows, "fig": fig, "unavailable": unavailable, "current": cur,
            "speedup": speedup, "pending": sorted(pending)}


def _measurements_pooled(session: Session, m, budget: float) -> dict:
    """The measurement pane when worker processes measure (the real server)."""
    from .workers import JobResult, step_dict
    wl = session.workload_arg()
    name, params = (wl[0], wl[1]) if wl else (None, {})
    baseline = session.mod0 if wl is None else None
    fname = session.func_name
    try:
        found, queued, busy = _pooled(
            session,
            lambda mod: m.cached(mod, name, params, fname),
            lambda mod: m.submit(mod, name, params, func_name=fname, baseline=baseline),
            m.result_of, budget)
    except bridge.NotAvailable as e:
        return {"rows": [], "fig": None, "unavailable": str(e), "current": None,
                "speedup": None, "pending": []}
    by_step: dict[int, dict] = {}
    unavailable = None
    for k, res in found.items():
        if isinstance(res, Exception):
            res = step_dict(JobResult("unavailable", str(res)), "")
        if res.get("stage") == "unavailable":
            unavailable = res.get("error")
            continue
        r = dict(res)
        r["step"] = k
        by_step[k] = r
    ctx = _measurement_ctx(session, by_step, list(queued), unavailable)
    ctx.update(queued={k: _queued_text(p) for k, p in queued.items()}, busy=busy,
               poll_delay=POOL_POLL)
    if session.at in queued:
        ctx["current_queued"] = ctx["queued"][session.at]
    ctx.update(roofline(session, ctx["rows"], m))
    return ctx


# ---------------------------------------------------------------------------- roofline
NO_ROOFLINE_CUSTOM = ("No roofline point for a pasted program: its place on the roofline "
                      "needs the number of floating-point operations and the bytes it must "
                      "move, which only the preset workloads declare.")


def _machine_peaks(m) -> tuple[dict | None, str | None]:
    """``(peaks, None)`` — the measured roofs or ``{"error"/"unavailable": sentence}`` — or
    ``(None, "queued (position k)")`` while a worker is still measuring them."""
    if m is None:
        return measure.machine_peaks(), None
    from .workers import PoolClosed, PoolUnavailable, QueueFull
    try:
        got, ticket = m.submit_roofline()
    except QueueFull:
        return None, _queued_text(None)
    except (PoolClosed, PoolUnavailable) as e:
        return {"error": str(e)}, None
    if got is not None:
        return got, None
    if ticket.done():
        return m.roofline_result_of(ticket), None
    return None, _queued_text(ticket.position())


def roofline(session: Session, rows: list[dict], m) -> dict:
    """The roofline tab of the measurement pane: this machine's roofs (measured once by
    kernels the engine compiles — in a worker when ``m``, the pool's measurer, is given) and
    one point per measured step: its arithmetic intensity (the workload's flops / compulsory
    bytes, ``engine.workloads.info``) and its achieved GFLOP/s, placed by
    ``engine.roofline.point``; numpy's run of the same computation is a reference point.

    Returns ``roofline_fig`` (plotly JSON) and ``roofline_current`` (the current step's
    point), or ``roofline_pending`` (the peaks are being measured: the pane polls), or
    ``roofline_note`` (the sentence saying why there is no roofline).
    """
    wl = session.workload_arg()
    if wl is None:
        return {"roofline_note": NO_ROOFLINE_CUSTOM}
    name, params = wl
    peaks, pending = _machine_peaks(m)
    if pending is not None:
        return {"roofline_pending": pending}
    assert peaks is not None
    if "error" in peaks or "unavailable" in peaks:
        return {"roofline_note": peaks.get("error") or
                f"The roofline is not available: {peaks['unavailable']}"}
    try:
        point = bridge.attr("roofline", "point")
    except bridge.NotAvailable as e:
        return {"roofline_note": f"The roofline is not available: {e}"}
    points: list[dict] = []
    reference = None
    try:
        for r in rows:
            if r.get("time_ms") and not r.get("error"):
                pt = point(name, params, r["time_ms"] / 1e3, peaks)
                pt.update(step=r["step"], correct=r.get("correct"))
                points.append(pt)
        # numpy on the current step's thread count (its own row), else the first one
        ref_row = next((r for r in rows if r.get("step") == session.at and r.get("numpy_ms")),
                       None) or next((r for r in rows if r.get("numpy_ms")), None)
        if ref_row is not None:
            reference = point(name, params, ref_row["numpy_ms"] / 1e3, peaks)
            if ref_row.get("numpy_note"):
                reference["note"] = ref_row["numpy_note"]
    except Exception as e:  # noqa: BLE001 - e.g. a workload without a byte count
        return {"roofline_note": f"No roofline point for {name}: {e}"}
    current = next((p for p in points if p["step"] == session.at), None)
    return {"roofline_fig": plots.roofline_figure(points, peaks, current=session.at,
                                                  reference=reference),
            "roofline_points": len(points), "roofline_current": current,
            "roofline_peaks": peaks, "roofline_numpy": reference}


def cache(session: Session, budget_s: float | None = None) -> dict:
    """Simulated cache misses per level at every step, and per buffer at the current one."""
    budget = STEP_BUDGET_S if budget_s is None else budget_s
    plan = measure_plan(session)
    if plan is not None and (not plan.measure or not plan.simulate_cache):
        return {"rows": [], "fig": None, "unavailable": None, "current": None,
                "per_buffer": [], "npoints": 0, "pending": [],
                "simulate_only": plan.reason or plan.cache_reason}
    m = measure.active()
    if m is not None:
        return _cache_pooled(session, m, budget)
    t0 = time.perf_counter()
    by_step: dict[int, dict] = {}
    pending: list[int] = []
    fresh = 0
    unavailable = None
    for k in _step_order(session):
        mod = session.mod_at(k)
        rep = measure.cached_cache_step(mod, session.func_name)
        if rep is None:
            if fresh and time.perf_counter() - t0 > budget:
                pending.append(k)
                continue
            rep = measure.cache_step(mod, session.func_name)
            fresh += 1
        if "unavailable" in rep:
            unavailable = rep["unavailable"]
            break
        by_step[k] = {"step": k, "levels": rep.get("levels"), "error": rep.get("error"),
                      "report": rep}
    return _cache_ctx(session, by_step, pending, unavailable)


def _cache_pooled(session: Session, m, budget: float) -> dict:
    """The cache pane when worker processes simulate (the real server)."""
    fname = session.func_name
    found, queued, busy = _pooled(
        session, lambda mod: m.cached_cache(mod, fname),
        lambda mod: m.submit_cache(mod, fname), m.cache_result_of, budget)
    by_step: dict[int, dict] = {}
    unavailable = None
    for k, rep in found.items():
        if isinstance(rep, Exception):
            unavailable = str(rep)
            continue
        if "unavailable" in rep:
            unavailable = rep["unavailable"]
            continue
        by_step[k] = {"step": k, "levels": rep.get("levels"), "error": rep.get("error"),
                      "report": rep}
    ctx = _cache_ctx(session, by_step, list(queued), unavailable)
    ctx.update(queued={k: _queued_text(p) for k, p in queued.items()}, busy=busy,
               poll_delay=POOL_POLL)
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
    return {"rows": rows, "fig": fig, "unavailable": unavailable, "current": cur,
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
    ctx: dict[str, Any] = {"loop": node, "unavailable": None, "error": None, "figs": [],
                           "sel": node.sel if node is not None else None}
    if node is None:
        ctx["error"] = "This program has no loop to look at."
        return ctx
    extent = node.extent or 1
    try:
        iteration = int(iteration_raw) if iteration_raw not in (None, "") else 0
    except ValueError:
        iteration = -1
    if not 0 <= iteration < extent:
        ctx["error"] = (f"Iteration must be a whole number from 0 to {extent - 1} "
                        f"(loop {node.name} has {extent} iterations).")
        iteration = 0
    ctx["iteration"] = iteration
    ctx["extent"] = extent
    try:
        # (builds and runs instrumented code: in a worker process in the real server)
        d = measure.access_pattern(mod, tree.func_name, node.node, iteration)
    except bridge.NotAvailable as e:
        ctx["unavailable"] = str(e)
        return ctx
    except Exception as e:  # noqa: BLE001 - e.g. the loop was unrolled away by lowering
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


def code(session: Session, kind: str) -> dict:
    mod = session.mod_at(session.at)
    m = measure.active()
    try:
        if m is not None:
            # compiled by a worker; answer "queued" (the pane polls) rather than hold a
            # server thread while the queue is long
            from .workers import QueueFull
            try:
                got, ticket = m.submit_source(mod)
            except QueueFull:
                return {"queued": _queued_text(None), "text": None, "kind": kind}
            except Exception as e:  # noqa: BLE001 - PoolClosed / PoolUnavailable: say why
                return {"unavailable": None, "error": str(e), "text": None, "kind": kind}
            if got is None:
                try:
                    got = m.source_result_of(ticket, CODE_BUDGET_S)
                except TimeoutError:
                    return {"queued": _queued_text(ticket.position()), "text": None,
                            "kind": kind}
            text, err = m.source_text(got, kind)
        else:
            text, err = measure.source(mod, kind)
    except bridge.NotAvailable as e:
        return {"unavailable": str(e), "text": None, "kind": kind}
    if text is None:
        return {"unavailable": None, "error": err, "text": None, "kind": kind}
    lines = text.splitlines()
    limit = 3000
    truncated = len(lines) > limit
    return {"unavailable": None, "error": None, "kind": kind,
            "text": "\n".join(lines[:limit]), "truncated": truncated, "nlines": len(lines)}

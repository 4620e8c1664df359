"""Comparing two explorer states side by side.

=========================================  ==================================================
``GET  /compare?a=<link>&b=<link>``        two states side by side (program, diagram, steps)
``GET  /compare/measure?a=…&b=…``          runtime and cache plots of both, overlaid (lazy)
=========================================  ==================================================


A *side* is anything a learner can paste: a full explorer link
(``http://host/explore/mm_relu?n=128&t=...&at=2``), its path, or a bare trace token (the
``t=`` part; the workload is read from the trace itself). :func:`session_of` turns it into
an :class:`app.web.session.Session`, with the same 4xx errors the explorer gives for a bad link.

:func:`runtime_overlay` and :func:`cache_overlay` draw both sides' measurements (the rows
:mod:`app.web.panes.measurement` and :mod:`app.web.panes.cache` return) in one plotly figure.
"""
from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlencode, urlsplit

from flask import Blueprint, render_template, request
from markupsafe import Markup
from werkzeug.datastructures import MultiDict

from engine.schedule import Trace

from ..errors import AppError
from ..web.panes import cache as cache_view
from ..web.panes import diagram, diff, measurement, program, trace
from ..web.plots import jsonable, layout
from ..web.selection import module_trees
from ..web.services import limits
from ..web.session import Session, trace_json
from . import presenter

bp = Blueprint("compare", __name__)

#: longest side text accepted (a link with a long trace token)
MAX_SIDE = 20000
COLORS = {"A": "#1f6feb", "B": "#e16f24"}


def parse_side(text: str, label: str) -> tuple[str, MultiDict]:
    """A pasted link or token -> (workload, query arguments). 400 when it is neither."""
    text = (text or "").strip()
    back = "/compare"
    if not text:
        raise AppError(400, f"Nothing to compare as {label}",
                       f"Give {label} as an explorer link (…/explore/mm_relu?t=…) or a trace token.",
                       back=back, back_label="the compare form")
    if len(text) > MAX_SIDE:
        raise AppError(400, f"{label} is too long",
                       f"The link given as {label} is longer than {MAX_SIDE} characters.",
                       back=back, back_label="the compare form")
    if "/explore/" in text or text.startswith(("http://", "https://", "/")):
        parts = urlsplit(text)
        path = parts.path.rstrip("/")
        segs = path.split("/")
        if "explore" not in segs or segs.index("explore") + 1 >= len(segs):
            raise AppError(400, f"{label} is not an explorer link",
                           f"The link given as {label} does not point to /explore/<workload>.",
                           back=back, back_label="the compare form")
        i = segs.index("explore")
        workload = segs[i + 1]
        if len(segs) > i + 2 and segs[i + 2] not in ("present",):
            raise AppError(400, f"{label} is not an explorer link",
                           f"The link given as {label} points to a part of the explorer page "
                           f"(/{'/'.join(segs[i + 2:])[:40]}), not to a state.",
                           back=back, back_label="the compare form")
        args = MultiDict(parse_qsl(parts.query, keep_blank_values=True))
        args.pop("sel", None)
        return workload, args
    # a bare token: the trace says which workload (and parameters) it was recorded on
    try:
        decoded = Trace.decode(text, limits().max_trace_insts)
    except Exception as e:  # noqa: BLE001 - any decoding failure is the input's fault
        raise AppError(400, f"{label} cannot be read",
                       f"The text given as {label} is neither an explorer link nor a trace "
                       f"token ({e}).", back=back, back_label="the compare form") from None
    wl = trace_json(decoded).get("workload") or {}
    name = wl.get("name") if isinstance(wl, dict) else None
    if not name:
        raise AppError(400, f"{label} names no workload",
                       f"The trace given as {label} does not say which workload it was "
                       "recorded on; paste the whole explorer link instead.",
                       back=back, back_label="the compare form")
    args = MultiDict({k: str(v) for k, v in (wl.get("params") or {}).items()})
    args["t"] = text
    return name, args


def session_of(text: str, label: str) -> Session:
    workload, args = parse_side(text, label)
    try:
        return Session.from_request(workload, args)
    except AppError as e:
        # keep the explorer's sentence, but offer the way back to the compare form
        raise AppError(e.status, f"{label}: {e.title}", e.message, back="/compare",
                       back_label="the compare form") from None


def link_of(s: Session) -> str:
    """The explorer path of a session's current state."""
    return s.url()


def compare_url(a: str, b: str, present: bool = False, **extra) -> str:
    q = {"a": a, "b": b}
    if present:
        q["present"] = "1"
    q.update({k: v for k, v in extra.items() if v is not None})
    return "/compare?" + urlencode(q)


def common_prefix(sa: Session, sb: Session) -> int:
    """How many steps the two traces share (same workload and parameters, same
    instructions): the step where one is a fork of the other."""
    if sa.workload != sb.workload or sa.params != sb.params or sa.src != sb.src:
        return 0
    n = 0
    ia = ib = 0
    for k in range(min(sa.at, sb.at)):
        ea, eb = sa.step_ends[k], sb.step_ends[k]
        if sa.insts_key(ia, ea) != sb.insts_key(ib, eb):
            break
        n, ia, ib = k + 1, ea, eb
    return n


def changed_lines(text_a: str, text_b: str) -> tuple[set[int], set[int], str]:
    """Line numbers that differ in A and in B, and a one-line summary of the difference."""
    rows = diff.diff_rows(text_a, text_b)
    in_a = {r.old for r in rows if r.kind == "del" and r.old}
    in_b = {r.new for r in rows if r.kind == "add" and r.new}
    if not in_a and not in_b:
        return in_a, in_b, "The two programs are identical."
    return in_a, in_b, (f"{len(in_a)} line{'s' if len(in_a) != 1 else ''} only in A, "
                        f"{len(in_b)} line{'s' if len(in_b) != 1 else ''} only in B.")


def runtime_overlay(rows_a: list[dict], rows_b: list[dict]) -> str | None:
    """Runtime (ms) per step of both traces in one figure, numpy's time as a reference."""
    data = []
    all_ms: list[float] = []
    for label, rows in (("A", rows_a), ("B", rows_b)):
        pts = [r for r in rows if r.get("time_ms") is not None]
        if not pts:
            continue
        xs = [r["step"] for r in pts]
        ms = [r["time_ms"] for r in pts]
        all_ms.extend(ms)
        corr = [r.get("correct") for r in pts]
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": f"{label} runtime ms",
            "x": xs, "y": ms, "line": {"color": COLORS[label],
                                        "dash": "solid" if label == "A" else "dash"},
            "marker": {"size": 9, "color": COLORS[label],
                       "symbol": ["circle" if c is True else "x" if c is False
                                  else "circle-open" for c in corr]},
            "text": [("correct" if c is True else "WRONG result" if c is False else "not checked")
                     for c in corr],
            "hovertemplate": f"{label} step %{{x}}: %{{y:.3f}} ms (%{{text}})<extra></extra>",
        })
    if not data:
        return None
    numpy_ms = next((r.get("numpy_ms") for r in rows_a + rows_b if r.get("numpy_ms")), None)
    xs_all = [x for d in data for x in d["x"]]
    if numpy_ms:
        data.append({"type": "scatter", "mode": "lines", "name": f"numpy {numpy_ms:.3f} ms",
                     "x": [min(xs_all) - 0.3, max(xs_all) + 0.3], "y": [numpy_ms, numpy_ms],
                     "line": {"color": "#8250df", "dash": "dot"}, "hoverinfo": "skip"})
    spread = max(all_ms) / max(min(all_ms), 1e-9)
    return _figure(data, yaxis={"title": {"text": "ms"}, "rangemode": "tozero",
                                "type": "log" if spread > 20 else "linear"}, zeroline=False)


LEVEL_DASH = ["solid", "dot", "dashdot", "longdash"]


def cache_overlay(rows_a: list[dict], rows_b: list[dict]) -> str | None:
    """Simulated misses per cache level and step: A solid blue-ish, B dashed orange-ish,
    one line per level (L1, L2, L3)."""
    data = []
    values: list[float] = []
    for label, rows in (("A", rows_a), ("B", rows_b)):
        names: list[str] = []
        for r in rows:
            for lv in r.get("levels") or []:
                if lv["name"] not in names:
                    names.append(lv["name"])
        for i, name in enumerate(names):
            xs, ys = [], []
            for r in rows:
                lv = next((x for x in r.get("levels") or [] if x["name"] == name), None)
                if lv is not None:
                    xs.append(r["step"])
                    ys.append(max(lv["misses"], 0))
            values.extend(y for y in ys if y > 0)
            data.append({"type": "scatter", "mode": "lines+markers",
                         "name": f"{label} {name} misses", "x": xs, "y": ys,
                         "line": {"color": COLORS[label], "dash": LEVEL_DASH[i % 4],
                                  "width": 3 - min(i, 2) * 0.7},
                         "marker": {"size": 7, "color": COLORS[label]},
                         "hovertemplate": f"{label} step %{{x}}: %{{y:,}} {name} misses<extra></extra>"})
    if not data:
        return None
    spread = (max(values) / min(values)) if values else 1
    yaxis = ({"title": {"text": "misses (log)"}, "type": "log"} if spread > 20 else
             {"title": {"text": "misses"}, "rangemode": "tozero"})
    return _figure(data, yaxis=yaxis)


def _figure(data: list, yaxis: dict, **xaxis) -> str:
    """Plotly JSON of an overlay: steps on x, 240 px high."""
    fig_layout = layout("", xaxis={"title": {"text": "step"}, "dtick": 1, **xaxis}, yaxis=yaxis)
    fig_layout["height"] = 240
    return json.dumps({"data": data, "layout": fig_layout}, default=jsonable)


# ---------------------------------------------------------------------------- routes
@bp.get("/compare")
def compare_page():
    a, b = request.args.get("a", ""), request.args.get("b", "")
    on = presenter.is_on()
    if not a and not b:
        return render_template("compare/page.html", sides=None, a=a, b=b, present=on)
    sa = session_of(a, "A")
    sb = session_of(b, "B") if b else None
    if sb is None:
        # only A: offer its forks (B = A's first k steps) to compare against
        return render_template("compare/page.html", sides=None, a=a, b=b, present=on,
                               only_a=sa, forks=_forks(sa, on))
    sides = []
    texts = []
    for label, s in (("A", sa), ("B", sb)):
        texts.append(program.program_text(s.mod_at(s.at)))
    in_a, in_b, summary = changed_lines(texts[0], texts[1])
    for label, s, text, changed in (("A", sa, texts[0], in_a), ("B", sb, texts[1], in_b)):
        mod = s.mod_at(s.at)
        trees = module_trees(mod)
        sides.append({
            "label": label, "s": s, "link": s.url(),
            "lines": [{"no": i + 1, "text": t, "changed": (i + 1) in changed}
                      for i, t in enumerate(text.splitlines())],
            "svgs": [Markup(_plain_svg(svg)) for svg in diagram.diagrams(mod, trees, label)],
            "steps": trace.steps(s)[: s.at + 1],
        })
    shared = common_prefix(sa, sb)
    return render_template("compare/page.html", sides=sides, a=a, b=b, present=on,
                           summary=summary, differs=bool(in_a or in_b), shared=shared,
                           forks=_forks(sa, on),
                           swap_url=compare_url(b, a, on),
                           measure_url="/compare/measure?" + urlencode({"a": a, "b": b}))


def _plain_svg(svg: str) -> str:
    """The loop diagram without its selection hooks (the compare page has no toolbar)."""
    return svg.replace(' data-sel="', ' data-csel="').replace(' tabindex="0"', "")


def _forks(sa: Session, present: bool) -> list[dict]:
    """Links comparing A with a fork of A at each of its steps."""
    out = []
    host = request.host_url.rstrip("/")
    a_link = host + sa.url()
    for k in range(sa.at):
        fork = host + sa.url(token=sa.prefix_token(k), at=None)
        out.append({"k": k, "url": compare_url(a_link, fork, present),
                    "explore": fork})
    return out


@bp.get("/compare/measure")
def compare_measure():
    sa = session_of(request.args.get("a", ""), "A")
    sb = session_of(request.args.get("b", ""), "B")
    ma = measurement.context(sa, budget_s=1.0)
    mb = measurement.context(sb, budget_s=1.0)
    ca = cache_view.context(sa, budget_s=1.0)
    cb = cache_view.context(sb, budget_s=1.0)
    pending = bool(ma["pending"] or mb["pending"] or ca["pending"] or cb["pending"])
    good_a = [r for r in ca["rows"] if r.get("levels")]
    good_b = [r for r in cb["rows"] if r.get("levels")]
    cur = {"A": ma.get("current"), "B": mb.get("current")}
    speed = None
    if cur["A"] and cur["B"] and cur["A"].get("time_ms") and cur["B"].get("time_ms"):
        speed = cur["A"]["time_ms"] / cur["B"]["time_ms"]
    return render_template(
        "compare/measure.html", runtime_fig=runtime_overlay(ma["rows"], mb["rows"]),
        cache_fig=cache_overlay(good_a, good_b), cur=cur, speed=speed,
        cache_cur={"A": ca.get("current"), "B": cb.get("current")},
        unavailable=ma.get("unavailable") or mb.get("unavailable"), pending=pending,
        npoints=len([r for r in ma["rows"] + mb["rows"] if r.get("time_ms") is not None]),
        self_url=request.full_path)

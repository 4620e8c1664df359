"""The graph lessons' player (``/lessons/graph/<id>?step=k``): the step's narrative, the
graph after it (the model page's graph pane) next to the one before, its checks on that
graph, and a link to the model page with the lesson's passes so far, where the workers
measure every step.  The lesson and the step number are the only inputs: ids from the
shipped list, the step a bounded whole number."""
from __future__ import annotations

from urllib.parse import urlencode

from flask import Blueprint, render_template, request
from markupsafe import Markup

from engine.lessons import graph as graph_lessons
from engine.lessons import to_html

from ..errors import AppError
from ..web.panes.model_graph import graph_svg

bp = Blueprint("graph_lessons", __name__)


@bp.app_context_processor
def _graph_lesson_list():
    def listed():
        return [{"id": g.id, "title": g.title, "nsteps": len(g.steps), "graph": g.graph,
                 "summary_html": Markup(to_html(g.summary)) if g.summary else None}
                for g in graph_lessons.all_lessons()]
    return {"graph_lessons": listed}


def _members(mods) -> dict:
    from engine.relax.expr import Function

    from ..web.model import _inner_calls
    out: dict = {}
    for mod in mods:
        for n, f in mod.items():
            if isinstance(f, Function) and f.attr("Primitive"):
                out[n] = _inner_calls(f)
    return out


@bp.get("/lessons/graph/<lesson_id>")
def graph_lesson(lesson_id: str):
    if lesson_id not in graph_lessons.names():
        raise AppError(404, "No such lesson", f"There is no graph lesson named "
                       f"{lesson_id[:40]!r}.", back="/lessons", back_label="the lessons")
    les = graph_lessons.get(lesson_id)
    n = len(les.steps)
    raw = request.args.get("step", "0") or "0"
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 3) or int(raw) > n:
        raise AppError(400, "Bad step", f"step={raw[:20]!r} is not a step of this lesson "
                       f"(0..{n}).", back=f"/lessons/graph/{les.id}", back_label="the lesson")
    k = int(raw)
    mods = les.modules()
    members = _members(mods[:k + 2])
    step = les.steps[k] if k < n else None
    after = mods[k + 1] if step else mods[-1]
    model_url = None
    if les.model:
        q = {"batch": les.batch, "passes": ",".join(les.passes_before(k + 1 if step else n))}
        model_url = f"/model/{les.model}?" + urlencode(q)
    return render_template(
        "lessons/graph_player.html", les=les, k=k, n=n, step=step,
        text_html=Markup(to_html(step.text)) if step else None,
        summary_html=Markup(to_html(les.summary)) if les.summary else None,
        after=graph_svg(after, {}, members, svg_id="lesson-graph-after"),
        before=graph_svg(mods[k], {}, members, svg_id="lesson-graph-before")
        if step and step.pass_key else None,
        checks=[o.to_dict() for o in les.run_checks(k, after)] if step else [],
        model_url=model_url, main_script=after["main"].script())

"""The lesson player: the narrative of a step beside the explorer's own panes.

=========================================  ==================================================
``GET  /lessons``                          the lessons, in teaching order
``GET  /lessons/<id>?step=k``              the player: narrative of step k beside the panes,
                                           showing the program before step k (asked by
                                           htmx, from a link of the lesson pane: its panes
                                           out-of-band, the page stays)
``       …&applied=1``                     "apply for me": the program after step k
``       …&t=<token>``                     the learner's own program (checked against step k)
``POST /lessons/<id>/apply?step=k``        "try it yourself": the explorer toolbar's form,
                                           applied and checked; panes as OOB swaps
``GET  /lessons/<id>/checks?step=k&t=…``   the step's checks on the learner's program (a
                                           fragment the pane polls while a check waits for
                                           the workers' result)
=========================================  ==================================================

A lesson with a ``target`` (a GPU) opens its sessions on that target. A step's ``checks``
(:mod:`engine.lessons.checks`) are evaluated here on the learner's program: the IR ones
directly, the others on the measurement workers' step dicts of the learner's program and of
the lesson's earlier programs they compare with (the web process never builds or runs them).

The toolbar is the explorer's own (``panes/toolbar.html``): on a lesson page
static/lessons.js sends its forms to this blueprint's ``apply`` instead of the explorer's.
"""
from __future__ import annotations

import logging
import threading
from urllib.parse import urlencode

from flask import Blueprint, render_template, request
from htmx_flask import make_response
from markupsafe import Markup
from werkzeug.datastructures import MultiDict

from engine import lessons
from engine.ir import structural_equal

from ..errors import AppError
from ..limits import whole_number
from ..web import explorer, measuring, toolbar
from ..web.routes import apply_form
from ..web.services import measurer
from ..web.session import Session
from ..web.targets import from_document as target_from_document
from . import compare
from . import presenter

bp = Blueprint("lessons", __name__)
log = logging.getLogger("app.lessons")

LOOK_AT_LABELS = {"program": "the program text", "diagram": "the loop diagram",
                  "runtime": "the runtime chart", "cache": "the cache-miss chart",
                  "code": "the generated code (LLVM IR / assembly tabs)",
                  "trace": "the list of steps", "diff": "the diff of the last step",
                  "tune": "the Tune tab (search, live scatter plot, best candidates)"}
#: what a pane is called on a GPU target (its code tabs are CUDA C, PTX and resources)
GPU_LOOK_AT_LABELS = {"code": "the generated code (CUDA C / PTX / Resources tabs)",
                      "runtime": "the runtime chart (times modeled for the GPU)"}
_TOKENS: dict[tuple, str] = {}
_TOKENS_LOCK = threading.Lock()


def get_lesson(lesson_id: str):
    """The shipped lesson, or a 404 page listing the way back."""
    if lesson_id not in lessons.names():
        raise AppError(404, "Unknown lesson",
                       f"There is no lesson called “{lesson_id[:60]}”. Pick one from the list.",
                       back="/lessons", back_label="the lessons")
    return lessons.get(lesson_id)


def parse_step(les, raw: str | None, *, allow_end: bool = True) -> int:
    n = len(les.steps)
    hi = n if allow_end else n - 1
    if raw is None or raw == "":
        return 0
    k = whole_number(raw)
    if k is None or not 0 <= k <= hi:
        raise AppError(400, "Bad step number",
                       f"Lesson “{les.title}” has steps 1 to {n} (step=0 to step={n - 1} in the "
                       f"link); “{str(raw)[:20]}” is not one of them.",
                       back=f"/lessons/{les.id}", back_label="the lesson's first step")
    return k


def lesson_token(les, k: int) -> str:
    """Trace token of the lesson's program after its first ``k`` steps ('' for k = 0)."""
    key = (les.id, k)
    with _TOKENS_LOCK:
        tok = _TOKENS.get(key)
    if tok is None:
        try:
            sch = les.schedule_at(k)
        except Exception as e:  # noqa: BLE001 - a lesson the engine cannot replay
            raise AppError(500, "This lesson cannot be played",
                           f"Step {k} of lesson {les.id} does not apply in this engine: {e}",
                           back="/lessons", back_label="the lessons") from None
        tok = sch.trace.encode() if len(sch.trace.as_json().get("insts", [])) else ""
        with _TOKENS_LOCK:
            _TOKENS[key] = tok
    return tok


def target_key(les) -> str | None:
    """The link's ``target=`` of a lesson's sessions (None: the CPU)."""
    return target_from_document(les.target).key if les.target else None


def lesson_session(les, token: str, at: str | None = None) -> Session:
    args = MultiDict({k: str(v) for k, v in les._params(None).items()})
    if les.target:
        args["target"] = target_key(les)
    if token:
        args["t"] = token
    if at not in (None, ""):
        args["at"] = at
    try:
        return Session.from_request(les.workload, args)
    except AppError as e:
        raise AppError(e.status, e.title, e.message, back=f"/lessons/{les.id}",
                       back_label="the lesson") from None


def lesson_url(les, k: int, *, token: str = "", applied: bool = False, present: bool = False,
               path: str = "") -> str:
    q: dict = {"step": k}
    if applied:
        q["applied"] = 1
    if token:
        q["t"] = token
    if present:
        q["present"] = 1
    return f"/lessons/{les.id}{path}?" + urlencode(q)


def check_learner(les, k: int, s: Session) -> dict | None:
    """Result of the learner's own step ``k``: ``{"state": ok|wrong|waiting, "text"}``."""
    step = les.steps[k]
    if step.action is None:
        return None
    mod = s.mod_at(s.at)
    mods = les.modules(s.params)
    if structural_equal(mod, mods[k]):
        return {"state": "waiting", "text": "Your program is the one before this step: apply "
                                            "the step with the toolbar, then it is checked here."}
    try:
        learner = s.schedule_at(s.at)
        ok, msg = les.check_step(k, learner, s.params)
    except Exception as e:  # noqa: BLE001 - the checker must not take the page down
        log.exception("check_step failed")
        return {"state": "wrong", "text": f"Your step could not be checked: {e}"}
    # the engine counts steps from 0; the page shows them from 1
    msg = msg.replace(f"step {k} (", f"step {k + 1} (")
    out = {"state": "ok" if ok else "wrong", "text": msg}
    if step.checks:
        out["checks"] = step_checks(les, k, s, mod, wait_s=0.0)
        if ok and any(c["state"] == "failed" for c in out["checks"]):
            out.update(state="wrong", text="The program is the lesson's, but a check below "
                                            "fails.")
    return out


#: how long the checks fragment waits for the workers' results before answering "waiting"
CHECK_WAIT_S = 2.0


def _result(s: Session, mod, wait_s: float) -> dict | None:
    """The workers' step dict of ``mod`` on the session's target: stored, or waited for up
    to ``wait_s`` (0: only what is stored; the job is started either way); None while it
    is not there."""
    m = measurer()
    fname = s.func_name
    try:
        got, ticket = m.submit(mod, s.workload, s.params, func_name=fname,
                               target=s.gpu)
    except Exception:  # noqa: BLE001 - a busy queue: the check waits
        return None
    if got is None and ticket is not None and wait_s > 0:
        got = m.result_of(ticket, timeout=wait_s)
    if not got or got.get("status") in ("pending", "busy"):
        return None
    return got


def step_checks(les, k: int, s: Session, mod, wait_s: float = 0.0) -> list[dict]:
    """Step ``k``'s checks on the learner's program ``mod``: ``[{"state", "text"}]``."""
    needs, earlier_steps = les.check_steps_needed(k)
    result = _result(s, mod, wait_s) if needs else None
    earlier = {}
    for t in earlier_steps:
        try:
            theirs = lesson_session(les, lesson_token(les, t + 1))
        except AppError:
            continue
        got = _result(theirs, theirs.mod_at(theirs.at), wait_s)
        if got is not None:
            earlier[t] = got
    try:
        return [o.to_dict() for o in les.run_checks(k, mod, result, earlier)]
    except Exception as e:  # noqa: BLE001 - a checker failure is shown, not a 500
        log.exception("lesson checks failed")
        return [{"state": "failed", "text": f"the checks could not run: {e}"}]


def player_context(les, k: int, *, token: str = "", applied: bool = False,
                   present: bool = False, at: str | None = None) -> dict:
    """Everything lessons/player.html needs (explorer panes + the lesson pane)."""
    n = len(les.steps)
    end = k >= n
    step = None if end else les.steps[k]
    mine = bool(token)
    if mine:
        s = lesson_session(les, token, at)
    elif applied and step is not None and step.action is not None:
        s = lesson_session(les, lesson_token(les, k + 1))
    else:
        s = lesson_session(les, lesson_token(les, k))
    ctx = explorer.context(s, None)
    check = None if (end or not mine) else check_learner(les, k, s)
    done = end or (step is not None and (step.action is None or applied
                                         or (check is not None and check["state"] == "ok")))
    # where "next" goes: the learner keeps their own trace once their step is right
    if end:
        next_url = None
    elif mine and (check is None or check["state"] == "ok"):
        next_url = lesson_url(les, k + 1, token=token, present=present)
    else:
        next_url = lesson_url(les, k + 1, present=present)
    prev_url = lesson_url(les, k - 1, present=present) if k > 0 else None
    final_link = None
    if end:
        final_link = lesson_session(les, lesson_token(les, n)).url()
    checks = None
    if check is not None and "checks" in check:
        checks = check["checks"]
    elif applied and step is not None and step.checks:
        checks = step_checks(les, k, s, s.mod_at(s.at))
    ctx.update(
        checks=checks, checks_url=lesson_url(les, k, token=token, path="/checks"),
        les=les, k=k, n=n, step=step, end=end, applied=applied, mine=mine, check=check,
        done=done, next_url=next_url, prev_url=prev_url, present=present,
        step_html=Markup(step.html()) if step is not None else None,
        note_html=Markup(_md(step.note)) if step is not None and step.note else None,
        summary_html=Markup(_md(les.summary)) if les.summary else None,
        look_label=(GPU_LOOK_AT_LABELS.get(step.look_at) if s.gpu else None)
        or (LOOK_AT_LABELS.get(step.look_at, step.look_at) if step else None)
        if step else None,
        apply_url=lesson_url(les, k, applied=True, present=present),
        before_url=lesson_url(les, k, present=present),
        post_url=lesson_url(les, _apply_step(les, k, step, applied, check), present=present,
                            path="/apply"),
        toggle_present_url=lesson_url(les, k, token=token, applied=applied,
                                      present=not present),
        explorer_link=s.url(),
        final_link=final_link,
        compare_link=(compare.compare_url(final_link, s.url()) if end and mine and final_link
                      else None),
        steps_list=[{"k": i, "title": st.title, "label": st.label,
                     "url": lesson_url(les, i, present=present)} for i, st in enumerate(les.steps)],
    )
    return ctx


def _apply_step(les, k: int, step, applied: bool, check: dict | None) -> int:
    """The step a toolbar click on this page is checked against: this step, or the next
    one once this step is done (applied for the learner, matched, or narrative only)."""
    if step is None:
        return max(k - 1, 0)
    finished = step.action is None or applied or (check is not None and check["state"] == "ok")
    return k + 1 if finished and k + 1 < len(les.steps) else k


def prefetch_next_step(les, k: int, ctx: dict, *, page_prefetched: bool = False) -> None:
    """Start measuring the program the learner's next toolbar click is expected to make.

    A lesson knows its next step: while the learner reads it, the workers compile, check,
    time and cache-simulate the lesson's program after that step, so that the click finds
    its results stored and every pane, the runtime and the cache-miss charts included,
    comes with the click's own answer. Only when the page's program is the one that step
    starts from (a learner elsewhere would make another program). The page's own program
    is asked for first, so the guess never delays what is on screen; nothing is done for
    sizes that are only simulated, or when prefetching is off (``PREFETCH_MEASUREMENTS``).
    ``page_prefetched``: the page's own program was just prefetched (a toolbar step).
    """
    if ctx["end"]:
        return
    t = _apply_step(les, k, ctx["step"], ctx["applied"], ctx["check"])
    if les.steps[t].action is None:
        return
    s = ctx["s"]
    mod = s.mod_at(s.at)
    if not structural_equal(mod, les.modules(s.params)[t]):
        return
    if not page_prefetched:
        measuring.prefetch(s, mod)
    try:
        after = lesson_session(les, lesson_token(les, t + 1))
    except AppError:  # the lesson's step does not replay: its own page says so
        log.exception("lesson %s: the program after step %d could not be built", les.id, t)
        return
    measuring.prefetch(after, after.mod_at(after.at))


def _md(text: str) -> str:
    return lessons.to_html(text)


# ---------------------------------------------------------------------------- lessons
@bp.get("/lessons")
def lesson_list():
    items = []
    for les in lessons.all_lessons():
        items.append({"id": les.id, "title": les.title, "workload": les.workload,
                      "params": les.params, "nsteps": len(les.steps),
                      "summary_html": Markup(_md(les.summary)) if les.summary else None})
    return render_template("lessons/list.html", lessons=items, present=presenter.is_on())


@bp.get("/lessons/<lesson_id>")
def lesson_player(lesson_id: str):
    les = get_lesson(lesson_id)
    k = parse_step(les, request.args.get("step"))
    token = request.args.get("t", "") or ""
    applied = request.args.get("applied", "") in ("1", "true")
    ctx = player_context(les, k, token=token, applied=applied, present=presenter.is_on(),
                         at=request.args.get("at"))
    prefetch_next_step(les, k, ctx)
    if request.htmx and not request.htmx.history_restore_request:
        # a link of the lesson pane followed in the page (data-nav): every pane out-of-band,
        # the measurement bodies by the step event, the plots updated in place
        return make_response(render_template("lessons/panes_oob.html", **ctx, message=None),
                             trigger=explorer.step_event(ctx["s"], ctx))
    return render_template("lessons/player.html", **ctx, message=None)


@bp.post("/lessons/<lesson_id>/apply")
def lesson_apply(lesson_id: str):
    """"Try it yourself": apply the toolbar's primitive to the learner's program, check it
    against the lesson's step, answer with every pane out-of-band and push the lesson URL."""
    les = get_lesson(lesson_id)
    k = parse_step(les, request.args.get("step"), allow_end=False)
    on = presenter.is_on()
    form = request.form
    if les.target:   # the lesson's target, whatever the form says
        form = form.copy()
        form["target"] = target_key(les)
    s = Session.from_request(les.workload, form,
                             toolbar.FORM_FIELDS | {"present", "step"})
    done = apply_form(s, form)
    if not isinstance(done, tuple):
        return done
    sch, summary = done
    token = sch.trace.encode()
    ctx = player_context(les, k, token=token, present=on)
    prefetch_next_step(les, k, ctx, page_prefetched=True)   # apply_form prefetched the step
    chk = ctx["check"]
    if chk is None:   # a narrative-only step: nothing to compare with
        kind, text = "ok", (f"applied: {summary}. This step applies nothing itself; the program "
                            "on screen is now your own.")
    else:
        kind = "ok" if chk["state"] == "ok" else "wrong"
        text = f"applied: {summary}. " + {
            "ok": "✓ This is the lesson's step.",
            "waiting": "The program is the one before this step.",
        }.get(chk["state"], "✗ Not the lesson's step yet: see the lesson pane.")
    html = render_template("lessons/panes_oob.html", **ctx,
                           message={"kind": kind, "text": text, "highlight": []})
    return make_response(html, push_url=lesson_url(les, k, token=token, present=on),
                         trigger=explorer.step_event(ctx["s"], ctx))




@bp.get("/lessons/<lesson_id>/checks")
def lesson_checks(lesson_id: str):
    """The step's checks on the learner's program (the pane polls it while one waits)."""
    les = get_lesson(lesson_id)
    k = parse_step(les, request.args.get("step"), allow_end=False)
    token = request.args.get("t", "") or ""
    s = lesson_session(les, token, request.args.get("at")) if token else \
        lesson_session(les, lesson_token(les, k + 1))
    checks = step_checks(les, k, s, s.mod_at(s.at), wait_s=CHECK_WAIT_S)
    return render_template("lessons/_checks.html", checks=checks,
                           checks_url=lesson_url(les, k, token=token, path="/checks"))

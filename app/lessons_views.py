"""Teaching pages: lessons (a player beside the explorer panes), challenges, trace comparison
and presenter mode.

=========================================  ==================================================
``GET  /lessons``                          the lessons, in teaching order
``GET  /lessons/<id>?step=k``              the player: narrative of step k beside the panes,
                                           showing the program before step k
``       …&applied=1``                     "apply for me": the program after step k
``       …&t=<token>``                     the learner's own program (checked against step k)
``POST /lessons/<id>/apply?step=k``        "try it yourself": the explorer toolbar's form,
                                           applied and checked; panes as OOB swaps
``GET  /challenges``                       the challenges
``GET  /challenges/<id>?solution=<link>``  check a learner's link or token
``GET  /compare?a=<link>&b=<link>``        two states side by side
``GET  /compare/measure?a=…&b=…``          runtime and cache plots of both, overlaid (lazy)
``GET  /explore/<w>/present?<state>``      the explorer in presenter mode
``GET  /explore/<w>?<state>&present=1``    redirects there (``present=0``: back to the explorer)
=========================================  ==================================================

Every page takes ``present=1`` (presenter mode: large fonts, pane selection, arrow keys step
through the lesson or the trace; see static/present.js). The toolbar is the explorer's own
(``panes/toolbar.html``): on a lesson page static/lessons.js sends its forms to this
blueprint's ``apply`` instead of the explorer's.
"""
from __future__ import annotations

import logging
import re
import threading
from urllib.parse import parse_qsl, urlencode, urlsplit

from flask import Blueprint, current_app, redirect, render_template, request
from htmx_flask import make_response
from markupsafe import Markup
from werkzeug.datastructures import MultiDict

from . import bridge, compare, diagram, measure, primitives, views
from .errors import AppError
from .nodes import module_trees, parse_sel
from .session import Session, decode_token

bp = Blueprint("lessons", __name__)
log = logging.getLogger("app.lessons")

LOOK_AT_LABELS = {"program": "the program text", "diagram": "the loop diagram",
                  "runtime": "the runtime chart", "cache": "the cache-miss chart",
                  "code": "the generated code (LLVM IR / assembly tabs)",
                  "trace": "the list of steps", "diff": "the diff of the last step"}
_TOKENS: dict[tuple, str] = {}
_TOKENS_LOCK = threading.Lock()


# ---------------------------------------------------------------------------- helpers
def _lessons():
    return bridge.part("lessons")


def _present() -> bool:
    return request.values.get("present", "") in ("1", "true", "on")


def get_lesson(lesson_id: str):
    """The shipped lesson, or a 404 page listing the way back."""
    mod = _lessons()
    if lesson_id not in mod.names():
        raise AppError(404, "Unknown lesson",
                       f"There is no lesson called “{lesson_id[:60]}”. Pick one from the list.",
                       back="/lessons", back_label="the lessons")
    return mod.get(lesson_id)


def parse_step(les, raw: str | None, *, allow_end: bool = True) -> int:
    n = len(les.steps)
    hi = n if allow_end else n - 1
    if raw is None or raw == "":
        return 0
    try:
        k = int(raw)
    except ValueError:
        k = None
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


def lesson_session(les, token: str, at: str | None = None) -> Session:
    args = MultiDict({k: str(v) for k, v in les._params(None).items()})
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


def _structurally_equal(a, b) -> bool:
    import engine  # noqa: PLC0415
    return bool(engine.structural_equal(a, b))


def check_learner(les, k: int, s: Session) -> dict | None:
    """Result of the learner's own step ``k``: ``{"state": ok|wrong|waiting, "text"}``."""
    step = les.steps[k]
    if step.action is None:
        return None
    mod = s.mod_at(s.at)
    mods = les.modules(s.params)
    if _structurally_equal(mod, mods[k]):
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
    return {"state": "ok" if ok else "wrong", "text": msg}


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
    ctx = views.explorer(s, None)
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
    ctx.update(
        les=les, k=k, n=n, step=step, end=end, applied=applied, mine=mine, check=check,
        done=done, next_url=next_url, prev_url=prev_url, present=present,
        step_html=Markup(step.html()) if step is not None else None,
        note_html=Markup(_md(step.note)) if step is not None and step.note else None,
        summary_html=Markup(_md(les.summary)) if les.summary else None,
        look_label=LOOK_AT_LABELS.get(step.look_at, step.look_at) if step else None,
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


def _md(text: str) -> str:
    return _lessons().to_html(text)


# ---------------------------------------------------------------------------- lessons
@bp.get("/lessons")
def lesson_list():
    items = []
    for les in _lessons().all_lessons():
        items.append({"id": les.id, "title": les.title, "workload": les.workload,
                      "params": les.params, "nsteps": len(les.steps),
                      "summary_html": Markup(_md(les.summary)) if les.summary else None})
    return render_template("lessons/list.html", lessons=items, present=_present())


@bp.get("/lessons/<lesson_id>")
def lesson_player(lesson_id: str):
    les = get_lesson(lesson_id)
    k = parse_step(les, request.args.get("step"))
    token = request.args.get("t", "") or ""
    applied = request.args.get("applied", "") in ("1", "true")
    ctx = player_context(les, k, token=token, applied=applied, present=_present(),
                         at=request.args.get("at"))
    return render_template("lessons/player.html", **ctx, message=None)


@bp.post("/lessons/<lesson_id>/apply")
def lesson_apply(lesson_id: str):
    """"Try it yourself": apply the toolbar's primitive to the learner's program, check it
    against the lesson's step, answer with every pane out-of-band and push the lesson URL."""
    les = get_lesson(lesson_id)
    k = parse_step(les, request.args.get("step"), allow_end=False)
    present = _present()
    s = Session.from_request(les.workload, request.form,
                             primitives.FORM_FIELDS | {"present", "step"})
    sch = s.schedule_at(s.at)
    trees = module_trees(sch.mod)
    tree = trees[0]
    parsed = parse_sel(request.form.get("sel", ""))
    if parsed is not None:
        tree = next((t for t in trees if t.func_name == parsed["func"]), tree)
    try:
        summary = primitives.apply(sch, tree, request.form)
    except primitives.InputError as e:
        return _refusal(str(e), e.highlight, 422)
    except bridge.schedule_error_class() as e:
        return _refusal(str(e), views.refusal_highlight(e, trees), 422)
    except Exception as e:  # noqa: BLE001 - an engine bug: say so, keep the page
        log.exception("primitive failed unexpectedly in a lesson")
        return _refusal(f"The engine failed on this step ({type(e).__name__}: {e}). This is a bug "
                        "in the explorer, not in your schedule.", [], 500)
    token = sch.trace.encode()
    if current_app.config.get("PREFETCH_MEASUREMENTS", True):
        try:
            plan = views.measure_plan(s)
            if plan is None or plan.measure:
                measure.prefetch(sch.mod, les.workload, dict(s.params), func_name=s.func_name,
                                 cache=plan is None or plan.simulate_cache)
        except Exception:  # noqa: BLE001 - measuring is the pane's job; this only starts early
            pass
    ctx = player_context(les, k, token=token, present=present)
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
    return make_response(html, push_url=lesson_url(les, k, token=token, present=present))


def _refusal(text: str, highlight: list[str], status: int):
    msg = {"kind": "refused" if status < 500 else "error", "text": text, "highlight": highlight}
    return make_response(render_template("panes/message.html", message=msg), status)


# ---------------------------------------------------------------------------- challenges
def _challenges():
    return bridge.part("challenges")


def get_challenge(cid: str):
    mod = _challenges()
    if cid not in mod.names():
        raise AppError(404, "Unknown challenge",
                       f"There is no challenge called “{cid[:60]}”. Pick one from the list.",
                       back="/challenges", back_label="the challenges")
    return mod.get(cid)


@bp.get("/challenges")
def challenge_list():
    return render_template("challenges/list.html", challenges=_challenges().all_challenges(),
                           present=_present())


def solution_of(ch, text: str) -> tuple[str, dict]:
    """A pasted explorer link (or bare token) -> (trace token, the link's parameters)."""
    text = text.strip()
    if "/explore/" in text or text.startswith(("http://", "https://", "/")):
        parts = urlsplit(text)
        segs = parts.path.rstrip("/").split("/")
        if "explore" not in segs or segs.index("explore") + 1 >= len(segs):
            raise AppError(400, "Not an explorer link",
                           "Paste the link of your explorer state (…/explore/<workload>?t=…).",
                           back=f"/challenges/{ch.id}", back_label="the challenge")
        workload = segs[segs.index("explore") + 1]
        if workload != ch.workload:
            raise AppError(400, "Link of another workload",
                           f"This challenge is on {ch.workload}; your link is a {workload[:40]} "
                           "program.", back=f"/challenges/{ch.id}", back_label="the challenge")
        args = MultiDict(parse_qsl(parts.query, keep_blank_values=True))
        s = Session.from_request(workload, args, frozenset({"sel"}))
        if not s.token:
            raise AppError(400, "No trace in the link",
                           "This link is the unscheduled program (it has no t= part): apply "
                           "some steps first, then paste the link again.",
                           back=f"/challenges/{ch.id}", back_label="the challenge")
        token = s.prefix_token(s.at) if s.at < s.nsteps else s.token
        given = {k: v for k, v in s.params.items()}
        return token, given
    # a bare token: refuse now (400) if it cannot be read at all
    decode_token(text, back=f"/challenges/{ch.id}", back_label="the challenge")
    return text, {}


@bp.get("/challenges/<cid>")
def challenge_page(cid: str):
    ch = get_challenge(cid)
    solution = (request.args.get("solution") or request.args.get("t") or "").strip()
    result = None
    if solution:
        if len(solution) > compare.MAX_SIDE:
            raise AppError(400, "Solution too long",
                           f"The pasted text is longer than {compare.MAX_SIDE} characters.",
                           back=f"/challenges/{ch.id}", back_label="the challenge")
        token, params = solution_of(ch, solution)
        try:
            if getattr(ch, "kind", "") == "beat_time":
                res = beat_time(ch, token, params or None)
            else:   # structural: replays the schedule, compiles nothing
                res = ch.check(token, params or None)
        except Exception as e:  # noqa: BLE001 - a checker failure is reported, not a 500
            log.exception("challenge check failed")
            raise AppError(400, "Your solution could not be checked", str(e),
                           back=f"/challenges/{ch.id}", back_label="the challenge") from None
        result = res.to_dict()
    info = ch.to_dict()
    return render_template("challenges/page.html", ch=ch, info=info, result=result,
                           solution=solution, present=_present(),
                           start_link=f"/explore/{ch.workload}?" + urlencode(ch.params))


def beat_time(ch, token: str, params: dict | None):
    """Check a "beat this time" challenge with the app's measurements (``measure_step``:
    in the real server a worker process compiles, checks against numpy and times, so the
    server never runs the learner's generated code). The reference schedule is measured by
    the same service, on the same machine; results are cached by program, as in the
    explorer's charts. Mirrors :meth:`engine.challenges.BeatTime.check`'s verdicts."""
    from engine.challenges import ChallengeResult  # noqa: PLC0415
    from engine.lessons import runner  # noqa: PLC0415
    p = ch._params(params)
    try:
        sch = runner.schedule_of(token, ch.workload, p)
    except runner.ReplayError as e:
        return ChallengeResult(ch.id, False, f"Your trace does not replay: {e}")
    link = ch._link(sch)
    ref = ch.target_schedule(ch.reference, params)
    fname = runner.main_func(sch.mod, ch.workload)
    you = measure.measure_step(sch.mod, ch.workload, p, func_name=fname)
    base = measure.measure_step(ref.mod, ch.workload, p, func_name=fname)
    details: dict = {"correct": you.get("correct")}
    if you.get("error") or not you.get("time_ms"):
        return ChallengeResult(ch.id, False, "Your program could not be measured: "
                               f"{you.get('error') or 'no time'}", details, link)
    if you.get("correct") is not True:
        return ChallengeResult(ch.id, False, "Your program is not correct: "
                               f"{you.get('detail') or 'its result differs from numpy'}",
                               details, link)
    if base.get("error") or not base.get("time_ms"):
        return ChallengeResult(ch.id, False, "The reference schedule could not be measured: "
                               f"{base.get('error') or 'no time'}", details, link)
    t_ref, t_you = base["time_ms"] / 1e3, you["time_ms"] / 1e3
    details.update(reference_seconds=t_ref, seconds=t_you, speedup=t_ref / t_you)
    if you.get("gflops"):
        details["gflops"] = you["gflops"]
    if base.get("gflops"):
        details["reference_gflops"] = base["gflops"]
    figures = (f"yours {t_you * 1e3:.3f} ms vs reference {t_ref * 1e3:.3f} ms "
               f"({details['speedup']:.2f}x)")
    if "gflops" in details:
        figures += f", {details['gflops']:.2f} GFLOP/s"
    if details["speedup"] < ch.speedup:
        return ChallengeResult(ch.id, False, f"Not fast enough yet: {figures}; the goal is "
                               f"{ch.speedup:g}x the reference.", details, link)
    if ch.gflops is not None and details.get("gflops", 0.0) < ch.gflops:
        return ChallengeResult(ch.id, False, f"Not fast enough yet: {figures}; the goal is "
                               f"{ch.gflops:g} GFLOP/s.", details, link)
    return ChallengeResult(ch.id, True, f"Solved: {figures}.", details, link)


# ---------------------------------------------------------------------------- compare
@bp.get("/compare")
def compare_page():
    a, b = request.args.get("a", ""), request.args.get("b", "")
    present = _present()
    if not a and not b:
        return render_template("compare/page.html", sides=None, a=a, b=b, present=present)
    sa = compare.session_of(a, "A")
    sb = compare.session_of(b, "B") if b else None
    if sb is None:
        # only A: offer its forks (B = A's first k steps) to compare against
        return render_template("compare/page.html", sides=None, a=a, b=b, present=present,
                               only_a=sa, forks=_forks(sa, present))
    sides = []
    texts = []
    for label, s in (("A", sa), ("B", sb)):
        mod = s.mod_at(s.at)
        texts.append(views.script_of(mod))
    in_a, in_b, summary = compare.changed_lines(texts[0], texts[1])
    for label, s, text, changed in (("A", sa, texts[0], in_a), ("B", sb, texts[1], in_b)):
        mod = s.mod_at(s.at)
        trees = module_trees(mod)
        sides.append({
            "label": label, "s": s, "link": s.url(),
            "lines": [{"no": i + 1, "text": t, "changed": (i + 1) in changed}
                      for i, t in enumerate(text.splitlines())],
            "svgs": [Markup(_plain_svg(diagram.render_svg(
                t, title=f"{label}: {t.func_name}", footprints=views.footprints(mod, t))))
                for t in trees],
            "steps": views.steps(s)[: s.at + 1],
        })
    shared = compare.common_prefix(sa, sb)
    return render_template("compare/page.html", sides=sides, a=a, b=b, present=present,
                           summary=summary, differs=bool(in_a or in_b), shared=shared,
                           forks=_forks(sa, present),
                           swap_url=compare.compare_url(b, a, present),
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
        out.append({"k": k, "url": compare.compare_url(a_link, fork, present),
                    "explore": fork})
    return out


@bp.get("/compare/measure")
def compare_measure():
    sa = compare.session_of(request.args.get("a", ""), "A")
    sb = compare.session_of(request.args.get("b", ""), "B")
    ma = views.measurements(sa, budget_s=1.0)
    mb = views.measurements(sb, budget_s=1.0)
    ca = views.cache(sa, budget_s=1.0)
    cb = views.cache(sb, budget_s=1.0)
    pending = bool(ma["pending"] or mb["pending"] or ca["pending"] or cb["pending"])
    good_a = [r for r in ca["rows"] if r.get("levels")]
    good_b = [r for r in cb["rows"] if r.get("levels")]
    cur = {"A": ma.get("current"), "B": mb.get("current")}
    speed = None
    if cur["A"] and cur["B"] and cur["A"].get("time_ms") and cur["B"].get("time_ms"):
        speed = cur["A"]["time_ms"] / cur["B"]["time_ms"]
    return render_template(
        "compare/measure.html", runtime_fig=compare.runtime_overlay(ma["rows"], mb["rows"]),
        cache_fig=compare.cache_overlay(good_a, good_b), cur=cur, speed=speed,
        cache_cur={"A": ca.get("current"), "B": cb.get("current")},
        unavailable=ma.get("unavailable") or mb.get("unavailable"), pending=pending,
        npoints=len([r for r in ma["rows"] + mb["rows"] if r.get("time_ms") is not None]),
        self_url=request.full_path)


# ---------------------------------------------------------------------------- presenter
_EXPLORE_PATH = re.compile(r"^/explore/([^/]+)$")


@bp.before_app_request
def _present_flag_on_the_explorer():
    """``/explore/<w>?…&present=1`` -> ``/explore/<w>/present?…`` (the explorer's own route
    takes only workload parameters; ``present=0`` leads back to the plain explorer)."""
    if request.method != "GET" or "present" not in request.args:
        return None
    m = _EXPLORE_PATH.match(request.path)
    if m is None:
        return None
    args = [(k, v) for k, v in request.args.items(multi=True) if k != "present"]
    on = request.args.get("present", "") in ("1", "true", "on")
    path = f"/explore/{m.group(1)}" + ("/present" if on else "")
    return redirect(path + ("?" + urlencode(args) if args else ""), code=302)


@bp.get("/explore/<workload>/present")
def present_explore(workload: str):
    """The explorer page in presenter mode (the same panes; static/present.js adds the
    presenter bar, and keeps ``/present`` in the address bar as the state changes)."""
    s = Session.from_request(workload, request.args, frozenset({"present"}))
    ctx = views.explorer(s, request.args.get("sel") or None)
    return render_template("lessons/present_explore.html", **ctx, message=None, present=True)

"""Challenges: a goal (a loop-nest shape, or beating a reference schedule's time) and a
check of the learner's explorer link.

=========================================  ==================================================
``GET  /challenges``                       the challenges
``GET  /challenges/<id>?solution=<link>``  check a learner's link or token
=========================================  ==================================================
"""
from __future__ import annotations

import logging
from urllib.parse import parse_qsl, urlencode, urlsplit

from flask import Blueprint, render_template, request
from werkzeug.datastructures import MultiDict

from engine import challenges
from engine.challenges import ChallengeResult
from engine.lessons import runner

from ..errors import AppError
from ..web.budget import ensure_budget
from ..web.services import limits, measurer
from ..web.session import Session, decode_token
from . import compare
from . import presenter

bp = Blueprint("challenges", __name__)
log = logging.getLogger("app.challenges")


def get_challenge(cid: str):
    if cid not in challenges.names():
        raise AppError(404, "Unknown challenge",
                       f"There is no challenge called “{cid[:60]}”. Pick one from the list.",
                       back="/challenges", back_label="the challenges")
    return challenges.get(cid)


@bp.get("/challenges")
def challenge_list():
    return render_template("challenges/list.html", challenges=challenges.all_challenges(),
                           present=presenter.is_on())


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
        try:   # the replays of this request share its work budget (app.web.budget)
            with ensure_budget(limits()):
                if getattr(ch, "kind", "") == "beat_time":
                    res = beat_time(ch, token, params or None)
                elif getattr(ch, "kind", "") == "beat_model":
                    res = beat_model(ch, token, params or None)
                else:   # structural: replays the schedule, compiles nothing
                    res = ch.check(token, params or None)
        except Exception as e:  # noqa: BLE001 - a checker failure is reported, not a 500
            log.exception("challenge check failed")
            raise AppError(400, "Your solution could not be checked", str(e),
                           back=f"/challenges/{ch.id}", back_label="the challenge") from None
        result = res.to_dict()
    info = ch.to_dict()
    return render_template("challenges/page.html", ch=ch, info=info, result=result,
                           solution=solution, present=presenter.is_on(),
                           start_link=(ch.start_link() if hasattr(ch, "start_link") else
                                       f"/explore/{ch.workload}?" + urlencode(ch.params)))


def beat_time(ch, token: str, params: dict | None):
    """Check a "beat this time" challenge with the app's measurements (a worker process
    compiles, checks against numpy and times, so the server never runs the learner's
    generated code). The reference schedule is measured by
    the same service, on the same machine; results are cached by program, as in the
    explorer's charts. Mirrors :meth:`engine.challenges.BeatTime.check`'s verdicts."""
    p = ch._params(params)
    try:
        sch = runner.schedule_of(token, ch.workload, p)
    except runner.ReplayError as e:
        return ChallengeResult(ch.id, False, f"Your trace does not replay: {e}")
    link = ch._link(sch)
    ref = ch.target_schedule(ch.reference, params)
    fname = runner.main_func(sch.mod, ch.workload)
    you = measurer().measure(sch.mod, ch.workload, p, func_name=fname)
    base = measurer().measure(ref.mod, ch.workload, p, func_name=fname)
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


def beat_model(ch, token: str, params: dict | None):
    """Check a "beat this schedule on a GPU's model" challenge: the learner's program and
    the reference preset are each a GPU step job of the workers (built for the
    challenge's target, emulated and race-checked, compared with numpy, modeled), stored
    per target like the explorer's; :meth:`engine.challenges.BeatModel.check` compares."""
    p = ch._params(params)

    def measure(mod):
        return measurer().measure(mod, ch.workload, p, target=ch.target,
                                  func_name=runner.main_func(mod, ch.workload))
    return ch.check(token, params, measure=measure)

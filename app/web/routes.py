"""HTTP routes (thin): decode the request, call a view, render a template.

=====================================  =====================================================
``GET  /``                             gallery of workloads (+ paste a program, import a trace)
``GET  /explore/<w>?<params>&t=&at=``  the explorer; with ``HX-Request`` only the panes (OOB)
``GET  /explore/<w>/toolbar?sel=``     the primitive toolbar for a selection
``POST /explore/<w>/apply``            apply one primitive; panes as OOB swaps + HX-Push-Url
``POST /explore/<w>/intent``           the form being filled in: measured ahead; always 204
``GET  /explore/<w>/measure``          the measurement pane (loaded lazily by htmx)
``GET  /explore/<w>/diff``             the diff pane's content (loaded when shown)
``GET  /explore/<w>/code?kind=``       LLVM IR (``ll-opt``) or assembly (``asm``)
``GET  /explore/<w>/fork?from=k``      the trace's first k steps, a new branch -> redirect
``GET  /explore/<w>/fork-compare?from=``  the trace vs that branch -> redirect to /compare
``GET  /explore/<w>/export/<fmt>``     download: json | python | tvm | course | program
``POST /import``                       a trace (ours or TVM's as_json) -> redirect to explorer
``POST /explore/custom``               pasted TVMScript -> redirect to ``/explore/custom?src=``
``POST /explore/<w>/save``             save the trace (to the current step) under a name
``GET  /saved/<id>``                   a saved trace -> redirect to the explorer
``GET  /explore/<w>/tune``             the Tune tab (search from this step)
``POST /explore/<w>/tune``             start a search (a job of the measurement workers)
``GET  /tune/<id>``                    its live view (polled); ``POST /tune/<id>/stop``
=====================================  =====================================================
"""
from __future__ import annotations

import json
import logging
import os
import re
from urllib.parse import urlencode

from flask import Blueprint, Flask, Response, current_app, g, redirect, render_template, request
from htmx_flask import make_response
from markupsafe import Markup
from werkzeug.exceptions import HTTPException

from engine.schedule import ScheduleError, Trace, TraceError

from ..errors import AppError
from ..limits import InputError as LimitsInputError
from ..limits import whole_number
from . import explorer, gallery, gpu_refusals, measuring, toolbar
from .learner import learner_key
from .panes import cache as cache_view
from .panes import code as code_view
from .panes import measurement
from .panes import program as program_view
from .panes import tune as tune_view
from .selection import module_trees, parse_sel
from .services import limits, measurer, store
from .session import (CUSTOM, Session, changed_parameter, encode_src, parse_program,
                      trace_json, workload_info)
from .session import load_workload, parse_params, workload_names
from .targets import from_document as target_from_document

bp = Blueprint("explorer", __name__)
log = logging.getLogger("app")

EXPORTS = {
    "json": ("application/json", "json", "trace JSON"),
    "python": ("text/x-python", "py", "engine Python"),
    "tvm": ("text/x-python", "py", "TVM 0.27 Python"),
    "course": ("text/x-python", "py", "course-2022 Python"),
    "program": ("text/x-python", "py", "the program (TVMScript, in the pane's dialect)"),
}



@bp.before_app_request
def _jobs_on_behalf_of_the_client():
    """Every measurement job a request submits (step, cache, code listing, access pattern,
    a challenge's check) is the requesting client's, for the queue's turns and its
    per-client cap (:meth:`app.service.measurer.StepMeasurer.on_behalf_of`)."""
    ctx = measurer().on_behalf_of(measuring.client_key())
    ctx.__enter__()
    g.measure_client = ctx


@bp.teardown_app_request
def _end_jobs_on_behalf_of_the_client(_exc):
    ctx = g.pop("measure_client", None)
    if ctx is not None:
        ctx.__exit__(None, None, None)

@bp.get("/")
def index():
    return render_template("gallery.html", **gallery.context())


@bp.get("/explore/<workload>")
def explore(workload: str):
    s = Session.from_request(workload, request.args)
    sel = request.args.get("sel") or None
    ctx = explorer.context(s, sel)
    if request.htmx and not request.htmx.history_restore_request:
        return make_response(render_template("panes/all_oob.html", **ctx, message=None),
                             trigger=explorer.step_event(s, ctx))
    return render_template("explore.html", **ctx, message=None)


@bp.get("/explore/<workload>/toolbar")
def toolbar_pane(workload: str):
    s = Session.from_request(workload, request.args)
    mod = s.mod_at(s.at)
    tb = toolbar.context(module_trees(mod), request.args.get("sel"), explorer.bind_trial(s))
    return render_template("panes/toolbar.html", s=s, toolbar=tb)


@bp.post("/explore/<workload>/apply")
def apply(workload: str):
    s = Session.from_request(workload, request.form, toolbar.FORM_FIELDS)
    done = apply_form(s, request.form)
    if not isinstance(done, tuple):
        return done
    sch, summary = done
    ctx = explorer.context(s, None)
    html = render_template("panes/all_oob.html", **ctx,
                           message={"kind": "ok", "text": f"applied: {summary}"})
    return make_response(html, push_url=s.url(), trigger=explorer.step_event(s, ctx))


@bp.post("/explore/<workload>/intent")
def intent(workload: str):
    """The toolbar form the learner is filling in, not applied yet: its program is measured
    ahead (compiled, checked, timed, cache-simulated in the workers) while they finish, so
    the click that applies it usually finds its runtime and cache points measured.

    The page sends the form when a choice is made, after a pause in typing, when the pointer
    rests on the form's button or the focus reaches it, and when the pointer is pressed on
    it (``static/explorer.js``). Nothing changes for
    the page: the answer is always an empty 204, whatever the form holds (a refused or
    malformed step is reported by the click itself). Measured only while the workers are
    idle (:func:`app.web.measuring.may_measure_ahead`): a guess never queues ahead of a
    step that was asked for.
    """
    if measuring.may_measure_ahead():
        try:
            s = Session.from_request(workload, request.form, toolbar.FORM_FIELDS)
            apply_form(s, request.form)       # (a refusal's answer is not sent: nothing to show)
        except AppError:
            pass                              # a bad link or form: the click will say what
    return Response(status=204)


def apply_form(s: Session, form):
    """Apply the toolbar form's primitive to the session's current program.

    On success the session holds the new trace (its current step is the new one), the new
    step's measurement is started (:func:`app.web.measuring.prefetch`) and ``(schedule,
    summary)`` is returned; a refusal is returned as the message response (422 with the
    reason and the parts to highlight; 500 for an engine bug), and the trace is unchanged.
    On a GPU target a step that makes a kernel's placed shared tiles exceed the GPU's
    per-block limit is refused too (:func:`app.web.gpu_refusals.shared_memory_refusal`).
    """
    sch = s.schedule_at(s.at)
    trees = module_trees(sch.mod)
    parsed = parse_sel(form.get("sel", ""))
    tree = next((t for t in trees if parsed and t.func_name == parsed["func"]), trees[0])
    before = sch.mod
    try:
        with s.bounded():
            summary = toolbar.apply(sch, tree, form, gpu=s.target.is_gpu)
            over = gpu_refusals.shared_memory_refusal(
                s.target, form.get("primitive", ""), before, sch.mod,
                s.url(token=sch.trace.encode(), at=None) if s.target.is_gpu else None)
            if over is not None:
                raise over
    except toolbar.InputError as e:
        return refusal(str(e), e.highlight, 422)
    except ScheduleError as e:
        return refusal(str(e), toolbar.refusal_highlight(e, trees), 422, rule=e.rule,
                       hint=e.hint, primitive=e.primitive)
    except Exception as e:  # noqa: BLE001 - an engine bug: say so, keep the trace and the page
        log.exception("primitive %s failed unexpectedly", form.get("primitive"))
        return refusal(f"The engine failed on this step ({type(e).__name__}: {e}). This is a "
                       "bug in the explorer, not in your schedule; the trace is unchanged.",
                       [], 500)
    changed = changed_parameter(s.mod0, sch.mod)
    if changed:
        return refusal(changed[0].upper() + changed[1:] + ".", [], 422)
    decisions_before = len(s.decisions)
    s.set_trace(sch.trace, sch.trace.encode())
    s.remember(s.at, sch.mod, sch, sampled=len(s.decisions) > decisions_before)
    measuring.prefetch(s, sch.mod)
    return sch, summary


def refusal(text: str, highlight: list[str], status: int, **extra):
    """A refused step as the message pane (the reason, and the parts to highlight)."""
    msg = {"kind": "refused" if status < 500 else "error", "text": text, "highlight": highlight}
    msg.update({k: v for k, v in extra.items() if v})
    return make_response(render_template("panes/message.html", message=msg), status)


def _fork(workload: str) -> tuple[Session, str]:
    """The session of a fork request and the link of its branch: the trace's first ``from=``
    steps (0..the last step but one: a fork from the last step is the trace itself)."""
    s = Session.from_request(workload, request.args, frozenset({"from"}))
    raw = request.args.get("from", "")
    k = whole_number(raw)
    if k is None or not 0 <= k < s.nsteps:
        raise AppError(400, "No such step to fork from",
                       f"from= must be a step number between 0 and {max(s.nsteps - 1, 0)} "
                       f"(this trace has {s.nsteps} step{'s' if s.nsteps != 1 else ''}), got "
                       f"“{raw[:20]}”. Use the fork and compare buttons next to the steps "
                       "of the trace.",
                       back=s.url())
    return s, s.url(token=s.prefix_token(k), at=None)


@bp.get("/explore/<workload>/fork")
def fork(workload: str):
    """A new branch of the trace: its first ``from`` steps (a 303 to their link).

    The trace pane's fork buttons come here, so the pane carries the trace once instead of
    one truncated copy per step."""
    return redirect(_fork(workload)[1], code=303)


@bp.get("/explore/<workload>/fork-compare")
def fork_compare(workload: str):
    """The compare page of the trace and its fork from step ``from`` (a 303)."""
    s, fork_url = _fork(workload)
    return redirect("/compare?" + urlencode({"a": s.url(), "b": fork_url}), code=303)


@bp.get("/explore/<workload>/measure")
def measure_pane(workload: str):
    s = Session.from_request(workload, request.args)
    ctx = measurement.context(s)
    return _body("measure", s, ctx) + explorer.gpu_strip_update(s, ctx)


@bp.get("/explore/<workload>/diff")
def diff_pane(workload: str):
    """The diff pane's content (asked for when the pane is shown, after a click)."""
    s = Session.from_request(workload, request.args)
    return render_template("panes/diff_body.html", s=s, **program_view.diff_context(s))


@bp.get("/explore/<workload>/cache")
def cache_pane(workload: str):
    s = Session.from_request(workload, request.args)
    return _body("cache", s, cache_view.context(s))


def _body(kind: str, s: Session, ctx: dict) -> str:
    """The measurement (``kind`` "measure") or cache body of ``ctx``, kept when settled
    (:class:`app.web.measuring.SettledBodies`: a click back to this state carries it)."""
    html = render_template(f"panes/{kind}.html", s=s, **ctx)
    measuring.settled_bodies().keep(kind, s, ctx, Markup(html))
    return html


@bp.get("/explore/<workload>/pattern")
def pattern_pane(workload: str):
    s = Session.from_request(workload, request.args, frozenset({"iteration"}))
    ctx = cache_view.pattern(s, request.args.get("sel"), request.args.get("iteration"))
    return render_template("panes/pattern.html", s=s, **ctx)


@bp.get("/explore/<workload>/code")
def code_pane(workload: str):
    s = Session.from_request(workload, request.args, frozenset({"kind"}))
    allowed = code_view.kinds(s)
    kind = request.args.get("kind", allowed[0])
    if kind not in allowed:
        raise AppError(400, "Unknown code view",
                       f"kind= must be one of {', '.join(allowed[:3])} for this target, got "
                       f"“{kind[:20]}”.", back=s.url())
    return render_template("panes/code.html", s=s, **code_view.context(s, kind))


@bp.get("/explore/<workload>/tune")
def tune_pane(workload: str):
    s = Session.from_request(workload, request.args)
    return render_template("panes/tune.html", s=s, **tune_view.form_context(s))


@bp.post("/explore/<workload>/tune")
def tune_start(workload: str):
    s = Session.from_request(workload, request.args)  # the state is in the form's URL
    spec = tune_view.spec_from_form(request.form, s)
    trace = s.prefix_trace(s.at).as_json()
    st = store()
    if st is not None and not st.in_memory:  # the tuning database lives next to the store
        spec["database"] = os.path.join(os.path.dirname(st.path), "tuning.sqlite3")
    try:
        ticket = measurer().submit_tune(s.workload, dict(s.params), trace, spec,
                                        owner=learner_key())
    except Exception as e:  # noqa: BLE001 - a full queue, no workers: say so
        raise AppError(503, "Cannot start the search",
                       f"The measurement workers cannot take it now ({e}). Try again in a "
                       "moment.", back=s.url()) from None
    return render_template("panes/tune_progress.html", **tune_view.progress_context(ticket))


@bp.get("/tune/<tid>")
def tune_progress(tid: str):
    ticket = _tune_ticket(tid)
    return render_template("panes/tune_progress.html", **tune_view.progress_context(ticket))


@bp.post("/tune/<tid>/stop")
def tune_stop(tid: str):
    ticket = _tune_ticket(tid)
    if ticket.owner is not None and ticket.owner != learner_key():
        raise AppError(403, "Not your search", "Only who started a search can stop it (in "
                       "the browser that started it).")
    ticket.request_stop()
    try:
        ticket.result(5)  # the worker is replaced at once; what it found stays
    except TimeoutError:
        pass
    return render_template("panes/tune_progress.html", **tune_view.progress_context(ticket))


def _tune_ticket(tid: str):
    ticket = measurer().tune_ticket(tid)
    if ticket is None:
        raise AppError(404, "No such search",
                       "This search is not known (any more): searches are kept for a while "
                       "after they end. Start a new one from the Tune tab.")
    return ticket


@bp.get("/explore/<workload>/export/<fmt>")
def export(workload: str, fmt: str):
    s = Session.from_request(workload, request.args)
    if fmt not in EXPORTS:
        raise AppError(404, "Unknown export format",
                       f"Exports are: {', '.join(EXPORTS)}; “{fmt[:20]}” is not one of them.",
                       back=s.url())
    trace = _validated_trace(s)
    if fmt == "json":
        body = json.dumps(document_of(trace, s), indent=2)
    elif fmt == "program":  # printed only: the web process never compiles or runs it
        body = program_view.program_text(s.mod_at(s.at), s.dialect)
        if s.gpu:
            body = f"# target: {s.gpu} ({s.target.label} GPU)\n" + body
    else:
        body = _export_text(trace, fmt, s)
        if s.gpu:
            body = _gpu_header(fmt, s) + body
    mime, ext, _ = EXPORTS[fmt]
    name = re.sub(r"[^A-Za-z0-9_-]", "_", s.func_name if workload == CUSTOM else workload)
    suffix = {"json": "trace", "python": "engine", "tvm": "tvm", "course": "course",
              "program": f"program-{s.dialect}"}[fmt]
    resp = Response(body, mimetype=mime)
    resp.headers["Content-Disposition"] = f'attachment; filename="{name}-{suffix}.{ext}"'
    return resp


def _validated_trace(s: Session) -> Trace:
    """The trace to the cursor, replayed as the page replays it (400 with the page's message
    when it does not replay), carrying the session's checked workload and sizes rather than
    whatever the link's document says."""
    s.mod_at(s.at)
    trace = s.prefix_trace(s.at)
    samplers = sum(1 for inst in trace.insts if getattr(inst.primitive, "has_decision", False))
    if len(trace.decisions) < samplers:  # write the decisions the page replayed with
        trace = s.schedule_at(s.at).trace
    return Trace(trace.insts, workload=s.workload_arg(), decisions=trace.decisions)


def document_of(trace, s: Session) -> dict:
    """The trace document of a session: the trace's JSON, with the session's GPU or board
    target (``"target": "cuda -model=h100-sxm"``, ``"llvm -mtriple=aarch64-linux-gnu"``; a
    CPU session's document has no target field, as before other targets existed)."""
    doc = trace_json(trace)
    if s.job_target:
        doc["target"] = s.job_target
    return doc


def _gpu_header(fmt: str, s: Session) -> str:
    """The exported Python of a GPU session starts by naming its target, and how to build
    the scheduled program for it (the exports themselves build nothing)."""
    head = (f"# target: {s.gpu} — the explorer built every step for the {s.target.label} "
            "GPU\n")
    if fmt not in ("tvm", "course"):
        return head + f'# build: rt = engine.build(sch.mod, target="{s.gpu}")\n'
    # TVM's own build for CUDA, as a snippet in comments: the export defines apply_trace
    # only, like the CPU's, and the explorer's named GPU is not one of TVM's targets
    schedule, build = (("tvm.s_tir.Schedule", "tvm.compile") if fmt == "tvm"
                       else ("tvm.tir.Schedule", "tvm.build"))
    return head + (f'# build, with TVM built for CUDA (the explorer\'s target: "{s.gpu}"):\n'
                   f"#     sch = {schedule}(mod)  # mod: the program the explorer opened "
                   f"({s.func_name})\n"
                   "#     apply_trace(sch)\n"
                   f'#     rt = {build}(sch.mod, target="cuda")\n')


def _export_text(trace, fmt: str, s: Session) -> str:
    try:
        text = trace.export(fmt)
    except TraceError as e:  # a value the writer refuses: the link's fault, never a file
        raise AppError(400, "The trace cannot be exported", str(e),
                       back=s.url(token="", at=None), back_label="the initial program") from None
    return text if text.endswith("\n") else text + "\n"


@bp.post("/import")
def import_trace():
    text = _pasted_or_uploaded("text", "Import failed",
                               "Paste a trace or choose a file to import.",
                               max_bytes=limits().max_json_bytes + 1)
    doc = _load_user_json(text)
    try:
        trace = Trace.from_json(doc, limits().max_trace_insts)
    except Exception as e:  # noqa: BLE001 - the document is the user's
        raise AppError(400, "Import failed", f"This JSON is not a schedule trace: {e}",
                       back="/", back_label="the gallery") from None
    wl = trace_json(trace).get("workload") or {}
    name = (wl.get("name") if isinstance(wl, dict) else None) or request.form.get("workload", "")
    if not name:
        raise AppError(400, "Import failed",
                       "This trace does not say which workload it was recorded on; choose one "
                       "in the import form.", back="/", back_label="the gallery")
    if name not in workload_names():
        raise AppError(400, "Import failed",
                       f"This trace is for workload “{name}”, which this explorer does not have.",
                       back="/", back_label="the gallery")
    info = workload_info(name)
    params = dict(wl.get("params") or {}) if isinstance(wl, dict) else {}
    if not params and request.form.get("params"):
        params = _parse_param_text(request.form["params"])
    params = parse_params(info, {k: str(v) for k, v in params.items()})
    target = _document_target(doc, "Import failed")
    s = _replayed(name, params, trace, "Import failed",
                  f"The trace does not replay on {name} {params}")
    s.target = target
    return redirect(s.url(), code=303)


def _document_target(doc, title: str):
    """The target a trace document names (no ``target`` field: the CPU), or a 400."""
    try:
        return target_from_document(doc.get("target") if isinstance(doc, dict) else None)
    except ValueError as e:
        raise AppError(400, title, f"{e}.", back="/", back_label="the gallery") from None


def _replayed(workload: str, params: dict, trace: Trace, title: str, failure: str) -> Session:
    """A session of ``workload`` whose trace is ``trace`` replayed (and re-encoded with the
    workload attached); a trace that does not replay is a 400 ``title``, ``failure: reason``."""
    s = Session(workload, params, workload_info(workload), load_workload(workload, params))
    sch = s.new_schedule()
    s.replay(trace, sch, failure, "/", "the gallery", title)
    s.set_trace(sch.trace, sch.trace.encode())
    return s


# ---------------------------------------------------------------------------- saved traces
_SAVED_ID = re.compile(r"[A-Za-z0-9_-]{1,40}")


@bp.post("/explore/<workload>/save")
def save_trace(workload: str):
    """Save the trace up to the current step under a name (in the store); the gallery lists
    saved traces and ``/saved/<id>`` reopens one, also after a restart."""
    s = Session.from_request(workload, request.form, frozenset({"name"}))
    saved_traces = store()
    if saved_traces is None:
        return refusal("Saving is not available on this server (it runs without a store); "
                        "copy the link instead — it holds the whole session.", [], 422)
    if workload == CUSTOM:
        return refusal("A pasted program is not saved on the server; copy the link instead — "
                        "it holds the program and the whole session.", [], 422)
    try:
        name = limits().check_name(request.form.get("name", ""), "name")
    except LimitsInputError as e:
        return refusal(str(e), [], 422)
    tid = saved_traces.save_trace(name, workload, s.params,
                                  document_of(s.prefix_trace(s.at), s))
    if tid is None:
        return refusal("The trace could not be saved (the server's store failed); copy the "
                        "link instead — it holds the whole session.", [], 500)
    msg = {"kind": "ok", "text": f"saved as “{name}” (step {s.at}); reopen it from the "
                                 f"gallery or at /saved/{tid}"}
    return render_template("panes/message.html", message=msg)


@bp.get("/saved/<tid>")
def open_saved(tid: str):
    saved_traces = store()
    saved = (saved_traces.get_trace(tid) if saved_traces is not None and _SAVED_ID.fullmatch(tid)
             else None)
    if saved is None:
        raise AppError(404, "No such saved trace",
                       "There is no saved trace at this address; pick one from the gallery.",
                       back="/", back_label="the gallery")
    try:
        trace = Trace.from_json(saved.trace, limits().max_trace_insts)
    except Exception as e:  # noqa: BLE001 - stored by an older version?
        raise AppError(400, "The saved trace cannot be read", str(e), back="/",
                       back_label="the gallery") from None
    info = workload_info(saved.workload)
    params = parse_params(info, {k: str(v) for k, v in (saved.params or {}).items()})
    target = _document_target(saved.trace, "The saved trace cannot be read")
    s = _replayed(saved.workload, params, trace, "The saved trace does not replay",
                  f"“{saved.name}” does not replay on {saved.workload} {params}")
    s.target = target
    return redirect(s.url(), code=303)


def _pasted_or_uploaded(field: str, title: str, empty: str, *, empty_title: str | None = None,
                        max_bytes: int = -1) -> str:
    """The text of an uploaded ``file`` if one was chosen, else the form's ``field``; a file
    that is not UTF-8 is a 400 ``title`` and no text at all a 400 saying ``empty``. At most
    ``max_bytes`` of the file are read (-1: all, bounded by ``MAX_CONTENT_LENGTH``)."""
    text = request.form.get(field, "") or ""
    up = request.files.get("file")
    if up is not None and up.filename:
        try:
            text = up.read(max_bytes).decode("utf-8")
        except UnicodeDecodeError:
            raise AppError(400, title, "The uploaded file is not UTF-8 text.",
                           back="/", back_label="the gallery") from None
    if not text.strip():
        raise AppError(400, empty_title or title, empty, back="/", back_label="the gallery")
    return text


def _load_user_json(text: str):
    """Parse an uploaded/pasted JSON document within the server's size and depth limits
    (``app.limits``); every problem is a 400 with a sentence."""
    try:
        return limits().load_json(text)
    except LimitsInputError as e:
        raise AppError(400, "Import failed", str(e), back="/", back_label="the gallery") from None


def _parse_param_text(text: str) -> dict:
    out = {}
    for part in re.split(r"[,\s&]+", text.strip()):
        if not part:
            continue
        if "=" not in part:
            raise AppError(400, "Import failed", f"Write parameters as name=value, got “{part[:30]}”.",
                           back="/", back_label="the gallery")
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


@bp.post("/explore/custom")
def custom():
    text = _pasted_or_uploaded("program", "The program does not parse",
                               "Paste a TVMScript program (a @T.prim_func) first.",
                               empty_title="No program")
    try:
        limits().check_script(text)
    except LimitsInputError as e:
        raise AppError(413, "Program too long", str(e), back="/",
                       back_label="the gallery") from None
    parse_program(text)  # refuse now, with the parser's line/column, rather than on the next page
    return redirect(f"/explore/{CUSTOM}?src={encode_src(text)}", code=303)


# ---------------------------------------------------------------------------- errors
def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(AppError)
    def app_error(e: AppError):
        return _error_response(e.status, e.title, e.message, e.back, e.back_label)

    @app.errorhandler(LimitsInputError)
    def input_error(e: LimitsInputError):
        # an input over a limit or malformed, wherever it was found: the input's fault, said
        title = "Over a limit" if hasattr(e, "limit") else "Bad input"
        return _error_response(400, title, str(e), "/", "the gallery")

    @app.errorhandler(HTTPException)
    def http_error(e: HTTPException):
        titles = {404: "Page not found", 405: "Not allowed here", 413: "Upload too large"}
        limit = current_app.config.get("MAX_CONTENT_LENGTH") or 0
        text = {404: "There is no page at this address.",
                405: "This address does not accept that kind of request.",
                413: f"The upload is larger than the limit of {limit / 1048576:g} MiB "
                     f"(max_upload_bytes); a trace or a program is a few kilobytes."
                }.get(e.code or 0, e.description)
        return _error_response(e.code or 500, titles.get(e.code or 0, e.name), text, "/",
                               "the gallery")

    @app.errorhandler(Exception)
    def unexpected(e: Exception):
        log.exception("unexpected error on %s", request.path)
        return _error_response(500, "Something went wrong",
                               "The explorer hit an internal error while answering. Your work is "
                               "in the link: go back and try again, or start from the gallery. "
                               f"(Details for the maintainers: {type(e).__name__}.)", "/",
                               "the gallery")


def _error_response(status: int, title: str, message: str, back: str | None, back_label):
    if request.headers.get("HX-Request") == "true" and not request.headers.get(
            "HX-History-Restore-Request"):
        msg = {"kind": "error", "text": f"{title}: {message}", "highlight": []}
        return render_template("panes/message.html", message=msg), status
    return render_template("error.html", status=status, title=title, message=message,
                           back=back, back_label=back_label), status

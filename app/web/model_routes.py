"""Routes of the model page (see :mod:`app.web.model`).

=====================================  =====================================================
``GET  /model/<name>?batch=&fused=&t.<f>=``  the model: graph, functions, accuracy, samples
``GET  /model/<name>/measure?...``     the measurement pane (lazy; polls while queued)
``GET  /model/<name>/model.wasm?...``  the page's program as WebAssembly, built by a worker
                                       ("Run in your browser"; 202 while it is built)
``GET  /model/<name>/export?target=``  the page's program as a library for a target
                                       (host, aarch64, wasm32): a .zip built by a worker
``POST /model/onnx``                   an uploaded .onnx file: checked, kept, -> its page
``POST /model/<name>/apply``           a trace (token or explorer link) for one function,
                                       or every function of the same shape -> redirect
``POST /model/<name>/tune?...``        tune every function (one search per shape, a job
                                       of the workers) -> its live view
``GET  /model/<name>/tune/<id>?...``   the live view (polled); when the job has ended and
                                       found traces, HX-Redirect to the tuned link
``POST /model/<name>/tune/<id>/stop``  stop it (what was found is kept)
=====================================  =====================================================
"""
from __future__ import annotations

import dataclasses
import logging
import re
from urllib.parse import parse_qs, urlparse

from flask import Blueprint, redirect, render_template, request

from ..errors import AppError
from ..service.protocol import ClientQueueFull, PoolClosed, PoolUnavailable, QueueFull
from . import model as model_view
from . import model_export, model_wasm
from .learner import learner_key
from .panes import model_tune
from .plots import model_figure
from .services import limits, measurer

bp = Blueprint("model", __name__)
log = logging.getLogger(__name__)

_TOKEN = re.compile(r"[A-Za-z0-9_\-=.]+")


@bp.get("/model/<name>")
def model_page(name: str):
    state = model_view.ModelState.from_request(name, request.args)
    tuned = request.args.get("tuned", "")
    return render_template("model.html", **model_view.context(state),
                           server_stage=model_wasm.server_stage(state),
                           export_targets=model_export.offered_targets(),
                           export_prefix=model_export.library_prefix(name),
                           tuned_id=tuned if _TOKEN.fullmatch(tuned or "-") and
                           len(tuned) <= 64 else None,
                           tune_max_trials=model_tune.max_trials(),
                           tune_default_trials=model_tune.DEFAULT_TRIALS)


@bp.get("/model/<name>/model.wasm")
def model_wasm_file(name: str):
    state = model_view.ModelState.from_request(name, request.args)
    return model_wasm.wasm_response(state, request.headers.get("If-None-Match"))


@bp.get("/model/<name>/export")
def model_export_file(name: str):
    state = model_view.ModelState.from_request(name, request.args)
    return model_export.export_response(state, request.args.get("target", "host"),
                                        model_view.get_model(name).title,
                                        request.headers.get("If-None-Match"))


@bp.post("/model/onnx")
def model_upload():
    up = request.files.get("file")
    data = up.read(limits().max_upload_bytes + 1) if up is not None and up.filename else b""
    if not data:
        raise AppError(400, "No model", "Choose an .onnx file first (torch.onnx.export or "
                       "onnx.save writes one).", back="/", back_label="the gallery")
    if len(data) > limits().max_upload_bytes:
        raise AppError(413, "Model too large", f"The file is over "
                       f"{limits().max_upload_bytes} bytes (max_upload_bytes).", back="/",
                       back_label="the gallery")
    name = model_view.store_onnx(data)
    return redirect(f"/model/{name}?fused=1", code=303)


@bp.get("/model/<name>/measure")
def model_measure(name: str):
    state = model_view.ModelState.from_request(name, request.args)
    current, _ = state.scheduled()
    key, doc = model_view.measure_doc(state, current)
    ctx = {"state": state, "result": None, "pending": None, "error": None, "fig": None}
    try:
        got, ticket = measurer().submit_model(key, doc)
    except (QueueFull, ClientQueueFull, PoolClosed, PoolUnavailable) as e:
        ctx["error"] = str(e)
        return render_template("panes/model_measure.html", **ctx)
    if got is None:
        got = measurer().model_result_of(ticket, timeout=2.0)
        if "pending" in got:
            ctx["pending"] = got["pending"]
            return render_template("panes/model_measure.html", **ctx)
    if "error" in got:
        ctx["error"] = got["error"]
    else:
        try:   # a stored result is data: one the page cannot show is said, never a 500
            ctx["fig"] = model_figure(got)
            ctx["result"] = got
            return render_template("panes/model_measure.html", **ctx)
        except Exception:  # noqa: BLE001
            log.exception("a model measurement could not be shown")
            ctx.update(result=None, fig=None, error="the measurement came back in a form "
                       "this page cannot show; reload to measure again")
    return render_template("panes/model_measure.html", **ctx)


def _token_of(text: str) -> str:
    """A trace token from what was pasted: the token itself or an explorer link's ``t=``."""
    text = (text or "").strip()
    if "t=" in text and ("/" in text or "?" in text):
        q = parse_qs(urlparse(text).query)
        text = (q.get("t") or [""])[0]
    if not text or not _TOKEN.fullmatch(text):
        raise AppError(400, "No trace", "Paste the explorer's link of the function (it holds "
                       "the trace after t=) or the trace token itself.", back=request.referrer
                       or "/", back_label="the model")
    limits().check_token(text)
    return text


def _src_of(text: str) -> str | None:
    """The program of a pasted explorer link (its ``src=``), or None."""
    text = (text or "").strip()
    if "src=" not in text or not ("/" in text or "?" in text):
        return None
    return (parse_qs(urlparse(text).query).get("src") or [None])[0]


@bp.post("/model/<name>/apply")
def model_apply(name: str):
    state = model_view.ModelState.from_request(name, request.form)
    fname = request.form.get("func", "")
    token = _token_of(request.form.get("trace", ""))
    base = state.base()
    if fname not in base or base[fname].__class__.__name__ != "PrimFunc":
        raise AppError(400, "No such function", f"{fname[:60]!r} is not a TensorIR function "
                       "of this model.", back=state.url(), back_label="the model")
    # a link of the function as the model stores its weights: those steps come first
    token = model_view.pasted_token(state, fname, token, _src_of(request.form.get("trace")))
    targets = (model_view.same_shape_functions(base, fname)
               if request.form.get("scope") == "same-shape" else [fname])
    tokens = dict(state.tokens)
    for t in targets:
        tokens[t] = token
    new = dataclasses.replace(state, tokens=tokens, at=None)
    new.scheduled()  # refuse now (400 naming the function) when a trace does not replay
    return redirect(new.url(), code=303)


@bp.post("/model/<name>/tune")
def model_tune_start(name: str):
    state = model_view.ModelState.from_request(name, request.args)
    spec = model_tune.spec_from_form(request.form, state)
    doc = model_tune.tune_doc(state)
    try:
        ticket = measurer().submit_tune_functions(doc, spec, owner=learner_key())
    except Exception as e:  # noqa: BLE001 - a full queue, no workers, a search running: say so
        raise AppError(503, "Cannot start tuning",
                       f"The measurement workers cannot take it now ({e}). Try again in a "
                       "moment.", back=state.url(), back_label="the model") from None
    return render_template("panes/model_tune.html",
                           **model_tune.progress_context(ticket, state))


def _model_ticket(name: str, tid: str):
    ticket = measurer().tune_ticket(tid)
    if ticket is None or (ticket.job.tune or {}).get("model") != name:
        raise AppError(404, "No such tuning job",
                       "This tuning job is not known (any more): jobs are kept for a while "
                       "after they end. Start a new one from the model page.",
                       back=f"/model/{name}", back_label="the model")
    return ticket


@bp.get("/model/<name>/tune/<tid>")
def model_tune_progress(name: str, tid: str):
    state = model_view.ModelState.from_request(name, request.args)
    ticket = _model_ticket(name, tid)
    ctx = model_tune.progress_context(ticket, state)
    html = render_template("panes/model_tune.html", **ctx)
    if ctx["tuned_url"] and ctx["tuned_url"] != state.url():
        # the found traces go into the model's link: the page reloads on it (and measures it)
        return html, 200, {"HX-Redirect": f"{ctx['tuned_url']}&tuned={ticket.id}"}
    return html


@bp.post("/model/<name>/tune/<tid>/stop")
def model_tune_stop(name: str, tid: str):
    state = model_view.ModelState.from_request(name, request.args)
    ticket = _model_ticket(name, tid)
    if ticket.owner is not None and ticket.owner != learner_key():
        raise AppError(403, "Not your tuning job", "Only who started it can stop it (in the "
                       "browser that started it).",
                       back=state.url(), back_label="the model")
    ticket.request_stop()
    try:
        ticket.result(5)  # the worker is replaced at once; what it found stays
    except TimeoutError:
        pass
    return model_tune_progress(name, tid)

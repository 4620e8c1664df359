"""The model page: a model's graph, its TensorIR functions (each a link into the explorer
with its trace), and its end-to-end time per stage measured by the workers.

The URL is the state: ``/model/mlp?batch=1&fused=1&t.<function>=<trace token>...``
(``fused=0`` shows the functions as legalized, one per operator).  With ``passes=`` the page
steps through Relax passes instead (``passes=BindParams,FuseDenseAdd,LowerToTensorIR,FuseTIR``,
``at=<step>`` the step whose graph is shown): the model's graph as written, then one pass
per step, each named from :data:`engine.models.passes.PASS_STEPS` only (an unknown name is
a 400 with a sentence); the passes run here within the request's work budget (pure IR
work), every step's module is measured by the workers.  Traces are replayed
here (pure IR work, within the request's budget), never compiled: the measurement is one
``model`` job of the service (:meth:`app.service.measurer.StepMeasurer.submit_model`).
"""
from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import numpy as np

from engine import IRModule, PrimFunc, structural_equal
from engine.models import zoo
from engine.models import passes as model_passes
from engine.models.layouts import (LayoutError, join_layout_steps, split_layout_steps,
                                   with_schedules)
from engine.models.pipeline import call_sequence, stage_module
from engine.relax.transform.op_pattern import PATTERN_NAMES, op_pattern
from engine.schedule import Schedule, Trace

from ..errors import AppError
from ..kept import MiB, Kept, ir_bytes
from . import model_import
from .budget import budget_error_of, ensure_budget, over_budget_text
from .learner import learner_key
from .measuring import client_key
from .services import instance_folder, limits, measurer
from .session import CUSTOM, decode_src, decode_token, encode_src
from .uploads import NAME, UploadRefused, Uploads

__all__ = ["ModelState", "get_model", "context", "STAGE_LABELS"]

STAGE_LABELS = {"unscheduled": "unscheduled", "scheduled": "scheduled (default recipe)",
                "fused": "fused", "fused+scheduled": "fused + scheduled (default recipe)"}
#: what the default recipe does besides the loops, said under the stages
RECIPE_NOTE = ("The unscheduled and fused stages are the course's program as written "
               "(linear0 reads its weight W as W[j, k]). The default recipe starts by storing "
               "the weights transposed at build time, as TVM's constant folding does, so "
               "x @ W.T is scheduled as x @ W (a transform_layout step of its trace).")


def model_bytes(model: Any) -> int:
    """About how many bytes a model holds: its weights, reference and test data."""
    arrays = list(getattr(model.extra, "constants", {}).values()) \
        if model.extra is not None and not isinstance(model.extra, dict) else \
        [a for a in (model.extra or {}).values() if isinstance(a, np.ndarray)]
    arrays += [a for a in (model.reference, model.test_images) if a is not None]
    return 4096 + sum(int(getattr(a, "nbytes", 0)) for a in arrays)


#: models by name, weighed by their arrays (uploaded models are read by a worker again
#: only when dropped from here and from the store)
_MODELS: "Kept[Any]" = Kept(32 * MiB, model_bytes)
#: one lock per slot of names: a model being read or trained holds only its own slot
_LOCKS = [threading.Lock() for _ in range(16)]


def _lock_of(name: str) -> threading.Lock:
    return _LOCKS[int(hashlib.sha256(name.encode()).hexdigest()[:4], 16) % len(_LOCKS)]


def _uploads() -> Uploads:
    return Uploads(os.path.join(instance_folder(), "models"))


def store_onnx(data: bytes) -> str:
    """Have an uploaded ONNX file read by a worker (bounded, every operator supported: a
    400 naming what is not) and keep it in the instance folder for the learner who sent it
    (their quota: :class:`app.web.uploads.Uploads`); its name (``onnx-<hash>``)."""
    name = "onnx-" + hashlib.sha256(data).hexdigest()[:16]
    model = model_import.imported(data, title="uploaded ONNX model")
    try:
        _uploads().keep(name, data, learner_key(), client_key())
    except UploadRefused as e:
        raise AppError(e.status, "Upload refused", str(e), back="/",
                       back_label="the gallery") from None
    _MODELS.put(name, model)
    return name


def get_model(name: str):
    """The named model (the MLP: trained on first use, numpy, seconds, cached in the
    instance folder) or an uploaded ONNX model (``onnx-<hash>``, kept in the instance
    folder, read by a worker); kept in memory (bounded by bytes) for the process."""
    if name not in zoo.MODELS and not NAME.fullmatch(name):
        raise AppError(404, "No such model", f"There is no model named {name[:40]!r}; the "
                       f"models are: {', '.join(zoo.MODELS)} (or upload an ONNX file).",
                       back="/", back_label="the gallery")
    got = _MODELS.get(name)
    if got is not None:
        return got
    with _lock_of(name):
        got = _MODELS.get(name)
        if got is not None:
            return got
        if name in zoo.MODELS:
            model = zoo.get(name, instance_folder())
        else:
            data = _uploads().read(name, limits().max_upload_bytes)
            if data is None:
                raise AppError(404, "No such model", "This uploaded model is not on this "
                               "server (any more); upload the ONNX file again.", back="/",
                               back_label="the gallery")
            model = model_import.imported(data, title="uploaded ONNX model")
        _MODELS.put(name, model)
        return model


#: the stages of the models' pages, weighed by their IR and the model's arrays they hold
_STAGES: "Kept[IRModule]" = Kept(32 * MiB)


def model_stage(name: str, batch: int, stage: str) -> IRModule:
    """``stage_module`` of the model at ``batch`` (pure IR passes, kept within bytes)."""
    key = (name, batch, stage)
    hit = _STAGES.get(key)
    if hit is not None:
        return hit
    model = get_model(name)
    mod = stage_module(model.build(batch), stage)[0]
    _STAGES.put(key, mod, ir_bytes(mod) + model_bytes(model))
    return mod


def fused_members(name: str, batch: int) -> dict[str, list[str]]:
    """Fused function -> the functions FuseOps grouped into it (in call order)."""
    from engine.relax.expr import Function
    from engine.relax.transform import FuseOps

    grouped = FuseOps()(model_stage(name, batch, "unscheduled"))
    return {n: [c for _, c in call_sequence(IRModule(((n, f),)), n)]
            for n, f in grouped.items() if isinstance(f, Function) and f.attr("Primitive")}


def _int_arg(args, key: str, default: int, lo: int, hi: int, back: str) -> int:
    raw = args.get(key)
    if raw is None or raw == "":
        return default
    if not (isinstance(raw, str) and raw.isascii() and raw.isdigit() and len(raw) <= 6):
        raise AppError(400, "Bad parameter", f"{key}={raw[:20]!r} is not a whole number.",
                       back=back, back_label="the model")
    v = int(raw)
    if not lo <= v <= hi:
        raise AppError(400, "Over a limit", f"{key}={v} is outside {lo}..{hi}"
                       + (" (max_model_batch)" if key == "batch" else "") + ".",
                       back=back, back_label="the model")
    return v


@dataclass
class ModelState:
    """One model page, decoded from its URL."""

    name: str
    batch: int
    fused: bool
    tokens: dict[str, str] = field(default_factory=dict)
    #: the pass sequence (keys of PASS_STEPS), or None: the page shows the stages
    passes: list[str] | None = None
    #: the step whose graph is shown (0: as written); None: the last
    at: int | None = None

    @classmethod
    def from_request(cls, name: str, args) -> "ModelState":
        back = f"/model/{name}"
        batch = _int_arg(args, "batch", 1, 1, limits().max_model_batch, back)
        fixed = get_model(name).batch_fixed
        if fixed is not None:
            batch = fixed                   # an ONNX model keeps its own input shape
        fused = args.get("fused", "1") != "0"
        tokens = {k[2:]: v for k, v in args.items() if k.startswith("t.") and v}
        if len(tokens) > limits().max_model_traces:
            raise AppError(400, "Over a limit", f"This link schedules {len(tokens)} functions; "
                           f"the limit is {limits().max_model_traces} (max_model_traces).",
                           back=back, back_label="the model")
        state = cls(name, batch, fused, tokens)
        if "passes" in args:
            try:
                state.passes = model_passes.parse_passes(args.get("passes"))
            except model_passes.PassStepError as e:
                keys = [k for k in str(args.get("passes") or "").split(",")
                        if k in model_passes.PASS_STEPS][:model_passes.MAX_PASSES]
                raise AppError(400, "No such pass", f"{e}.", back=state.url(passes=keys),
                               back_label="the model with the passes it knows") from None
            state.at = _int_arg(args, "at", len(state.passes), 0, len(state.passes),
                                state.url())
        return state

    def url(self, **changes: Any) -> str:
        s = ModelState(self.name, changes.get("batch", self.batch),
                       changes.get("fused", self.fused), dict(changes.get("tokens",
                                                                          self.tokens)),
                       changes.get("passes", self.passes), changes.get("at", None))
        q: dict[str, Any] = {"batch": s.batch, "fused": int(s.fused)}
        if s.passes is not None:
            q["passes"] = ",".join(s.passes)
            if s.at is not None and s.at != len(s.passes):
                q["at"] = s.at
        q.update({f"t.{k}": v for k, v in sorted(s.tokens.items())})
        return f"/model/{s.name}?" + urlencode(q)

    # passes -----------------------------------------------------------------------------
    def pass_modules(self) -> list[IRModule]:
        """The graph as written and after each pass of the link (see :func:`pass_modules`)."""
        return pass_modules(self.name, self.batch, tuple(self.passes or ()), self.url)

    def shown_step(self) -> int:
        return len(self.passes or ()) if self.at is None else self.at

    # programs ---------------------------------------------------------------------------
    def base(self) -> IRModule:
        if self.passes is not None:
            return self.pass_modules()[-1]
        return model_stage(self.name, self.batch, "fused" if self.fused else "unscheduled")

    def scheduled(self) -> tuple[IRModule, dict[str, Any]]:
        """The current module: the base with each function's trace from the link replayed
        (within the request's work budget, shared by all the link's traces: see
        :mod:`app.web.budget`); and the traces (function -> Trace)."""
        mod = self.base()
        funcs, traces = {}, {}
        back = self.url(tokens={})
        for fname, token in self.tokens.items():
            if fname not in mod or not isinstance(mod[fname], PrimFunc):
                raise AppError(400, "No such function", f"The link schedules {fname[:60]!r}, "
                               "which is not a TensorIR function of this model at this stage.",
                               back=back, back_label="the model without schedules")
            trace = decode_token(token, back, "the model without schedules")
            sch = Schedule(IRModule(((fname, mod[fname]),)))
            _replay(trace, sch, fname, back)
            funcs[fname] = sch.mod[fname]
            traces[fname] = trace
        try:        # weights a schedule stores in another layout: stored so, once
            with ensure_budget(limits()):
                return with_schedules(mod, funcs, traces), traces
        except LayoutError as e:
            raise AppError(400, "The schedule does not fit the model",
                           f"{str(e)[:1].upper()}{str(e)[1:]}.", back=back,
                           back_label="the model without schedules") from None
        except Exception as e:  # noqa: BLE001 - over the request's budget
            over = budget_error_of(e)
            if over is None:
                raise
            raise AppError(400, "Over a limit", over_budget_text(
                "The link's schedules", over, limits()), back=back,
                back_label="the model without schedules") from None


#: the modules of pass sequences, by model, batch and sequence (weighed by their IR)
_PASSES: "Kept[list]" = Kept(32 * MiB, lambda mods: sum(ir_bytes(m) for m in mods))


def model_weights(name: str, batch: int) -> tuple[IRModule, dict]:
    """The model's graph as written and the weights ``BindParams`` binds."""
    return model_passes.start_graph(get_model(name), batch)


def pass_modules(name: str, batch: int, keys: tuple, url: Any) -> list[IRModule]:
    """``[graph as written, after pass 1, ...]``, run within the request's work budget
    (its CPU seconds checked after each pass, its program size on every TensorIR function
    a pass makes); kept per sequence, each prefix too, so a step added to a link runs only
    its own pass.  A pass that cannot apply is a 400 naming it, back to the steps before."""
    from engine.schedule.work_budget import current_budget

    hit = _PASSES.get((name, batch, keys))
    if hit is not None:
        return hit
    start, weights = model_weights(name, batch)
    done = 0
    mods = [start]
    for k in range(len(keys), 0, -1):      # the longest prefix already run
        got = _PASSES.get((name, batch, keys[:k]))
        if got is not None:
            mods, done = list(got), k
            break

    def check(i: int, mod: IRModule) -> None:
        budget = current_budget()
        if budget is None:
            return
        what = model_passes.PASS_STEPS[keys[done + i]].label
        budget.check_time(what)
        for _, f in mod.items():
            if isinstance(f, PrimFunc):
                budget.check_size(what, f)

    try:
        with ensure_budget(limits()):
            more = model_passes.run_passes(mods[-1], list(keys[done:]), weights, check)
    except model_passes.PassStepError as e:
        index = done + (e.index or 0)
        raise AppError(400, "The pass does not apply", f"{e}".replace(
            f"step {(e.index or 0) + 1},", f"step {index + 1},"),
            back=url(passes=list(keys[:index])),
            back_label="the steps before it") from None
    except Exception as e:  # noqa: BLE001 - over the request's budget
        over = budget_error_of(e)
        if over is None:
            raise
        raise AppError(400, "Over a limit", over_budget_text("These passes", over, limits()),
                       back=url(passes=[]), back_label="the graph as written") from None
    mods = mods + more[1:]
    for k in range(done + 1, len(keys) + 1):
        _PASSES.put((name, batch, keys[:k]), mods[:k + 1])
    if not keys:
        _PASSES.put((name, batch, keys), mods)
    return mods


def relax_members(mods: list[IRModule]) -> dict[str, list[str]]:
    """Fused function -> what it groups, read from the Relax ``Primitive`` functions of the
    modules (the last one's name wins: after FuseTIR a function keeps its group's name)."""
    from engine.relax.expr import Function

    out: dict[str, list[str]] = {}
    for mod in mods:
        for n, f in mod.items():
            if isinstance(f, Function) and f.attr("Primitive"):
                out[n] = _inner_calls(f)
    return out


def _inner_calls(f) -> list[str]:
    from engine.relax.expr import Call, GlobalVar, Op
    from engine.relax.transform.fuse_ops import call_tir_callee

    out = []
    for b in f.bindings():
        v = b.value
        c = call_tir_callee(v)
        if c is not None:
            out.append(c)
        elif isinstance(v, Call) and isinstance(v.op, Op):
            out.append("R." + v.op.name.removeprefix("relax."))
        elif isinstance(v, Call) and isinstance(v.op, GlobalVar):
            out.append(v.op.name_hint)
    return out


def _replay(trace, sch, fname: str, back: str) -> None:
    try:
        with ensure_budget(limits()):
            trace.apply_to_schedule(sch)
    except Exception as e:  # noqa: BLE001 - a trace that does not replay is the link's fault
        over = budget_error_of(e)
        if over is not None:
            raise AppError(400, "Over a limit", over_budget_text(
                f"The trace of {fname}", over, limits()), back=back,
                back_label="the model without schedules") from None
        raise AppError(400, "The trace does not replay",
                       f"The trace of {fname} cannot be applied to it: {e}", back=back,
                       back_label="the model without schedules") from None


def same_shape_functions(mod: IRModule, fname: str) -> list[str]:
    """The TensorIR functions of ``mod`` with the same structure as ``fname`` (names
    aside), itself included."""
    ref = mod[fname]
    out = []
    for n, f in mod.items():
        if isinstance(f, PrimFunc) and (n == fname or structural_equal(
                f.with_attr("global_symbol", ref.name), ref)):
            out.append(n)
    return out


def stored_function(fname: str, func: PrimFunc, token: str | None
                    ) -> tuple[PrimFunc, str | None, Any]:
    """The function and trace token the explorer opens: ``func`` and ``token``, or when
    the trace starts by storing parameters in another layout (the recipe's transposed
    weight: the explorer keeps a function's parameters as they are), the function as the
    model stores it and the rest of the trace; also those first steps (None if none)."""
    if not token:
        return func, token, None
    try:
        split = split_layout_steps(func, fname, Trace.decode(token))
    except Exception:  # noqa: BLE001 - a link's trace that does not replay: as it is
        return func, token, None
    if split is None:
        return func, token, None
    stored, steps, rest = split
    return stored, (rest.encode() if len(rest) else None), steps


def pasted_token(state: "ModelState", fname: str, token: str, src: str | None) -> str:
    """The token a pasted explorer link gives ``fname``: its own, or — when the link opened
    the function as the model stores it (:func:`stored_function`: its ``src`` that
    program) — the steps that store it so, then the pasted ones."""
    if not src or fname not in state.tokens:
        return token
    base = state.base()
    if fname not in base or not isinstance(base[fname], PrimFunc):
        return token
    stored, _, steps = stored_function(fname, base[fname], state.tokens[fname])
    if steps is None or decode_src(src) != IRModule(((fname, stored),)).script():
        return token
    pasted = decode_token(token, state.url(), "the model")
    return join_layout_steps(steps, pasted).encode()


def explorer_link(fname: str, func: PrimFunc, token: str | None) -> str:
    """The ordinary explorer on this function (a custom program) with its trace (the
    function as the model stores its weights, when the trace starts by storing them in
    another layout: :func:`stored_function`)."""
    func, token, _ = stored_function(fname, func, token)
    text = IRModule(((fname, func),)).script()
    q = {"src": encode_src(text)}
    if token:
        q["t"] = token
    return f"/explore/{CUSTOM}?" + urlencode(q)


def _functions(state: ModelState, base: IRModule, traces: dict) -> list:
    rows = []
    order = {c: i for i, (_, c) in reversed(list(enumerate(call_sequence(base))))}
    prims = sorted((n for n, f in base.items() if isinstance(f, PrimFunc)),
                   key=lambda n: order.get(n, len(order)))
    for name in prims:
        f = base[name]
        token = state.tokens.get(name)
        rows.append({"name": name, "pattern": PATTERN_NAMES.get(op_pattern(f), "?"),
                     "params": [(p.name, tuple(int(s) for s in p.const_shape()))
                                for p in f.params],
                     "steps": len(traces[name].insts) if name in traces else 0,
                     "link": explorer_link(name, f, token),
                     "same_shape": same_shape_functions(base, name)})
    return rows


#: each model's test input and its reference output, by model and batch
_REFERENCES: "Kept[tuple]" = Kept(8 * MiB, lambda xr: 256 + xr[0].nbytes + xr[1].nbytes)


def _input_and_reference(name: str, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """The model's test input at ``batch`` and its reference output: the one a worker
    computed when it read an uploaded model, or the gallery model's own numpy code (the
    MLP at a batch of at most ``max_model_batch``: milliseconds), kept."""
    got = _REFERENCES.get((name, batch))
    if got is None:
        model = get_model(name)
        x = model.test_inputs(batch)
        ref = model.reference if model.reference is not None else \
            np.asarray(model.numpy_fn(x.astype("float64")))
        got = (x, np.asarray(ref))
        _REFERENCES.put((name, batch), got)
    return got


def measure_doc(state: ModelState, current: IRModule) -> tuple[str, dict]:
    """The key and the document of the model's measurement job: the four reference stages
    and the link's own program."""
    model = get_model(state.name)
    if state.passes is not None:
        _, weights = model_weights(state.name, state.batch)
        mods = state.pass_modules()
        labels = ["0. as written"] + [f"{i + 1}. {model_passes.PASS_STEPS[k].label}"
                                      for i, k in enumerate(state.passes)]
        stages = [(label, model_passes.runnable(m, weights)) for label, m in zip(labels, mods)]
    else:
        stages = [(label, model_stage(state.name, state.batch, stage))
                  for stage, label in STAGE_LABELS.items()]
    if state.tokens:
        stages.append(("this link's schedules", current))
    x, ref = _input_and_reference(state.name, state.batch)
    key = "model:" + ":".join([state.name, str(state.batch)]
                              + [measurer().program_hash(m) for _, m in stages])
    doc = {"stages": stages, "x": x, "reference": ref,
           "mlp_params": model.extra if state.name == "mlp" else None,
           "graph": model.extra if state.name != "mlp" else None,
           "test_images": model.test_images, "test_labels": model.test_labels}
    return key, doc


def context(state: ModelState) -> dict[str, Any]:
    from .panes.model_graph import graph_svg

    model = get_model(state.name)
    base = state.base()
    current, traces = state.scheduled()
    steps = None
    if state.passes is not None:
        mods = state.pass_modules()
        k = state.shown_step()
        members = relax_members(mods[:k + 1])
        shown = current if k == len(state.passes) else mods[k]
        steps = {
            "list": [{"index": 0, "label": "the graph as written", "python": "",
                      "what": "high-level operators; the weights parameters of main",
                      "url": state.url(at=0)}]
                    + [{"index": i + 1, "label": model_passes.PASS_STEPS[key].label,
                        "python": model_passes.PASS_STEPS[key].python,
                        "what": model_passes.PASS_STEPS[key].what,
                        "url": state.url(at=i + 1)} for i, key in enumerate(state.passes)],
            "at": k,
            "offer": [{"key": key, "label": st.label, "what": st.what, "python": st.python,
                       "url": state.url(passes=list(state.passes) + [key])}
                      for key, st in model_passes.PASS_STEPS.items()]
                     if len(state.passes) < model_passes.MAX_PASSES else [],
            "undo": state.url(passes=list(state.passes[:-1])) if state.passes else None,
            "before": graph_svg(mods[k - 1], {}, members, svg_id="model-graph-before")
                      if k > 0 else None,
            "before_label": (["the graph as written"] + [model_passes.PASS_STEPS[x].label
                                                         for x in state.passes])[k - 1]
                            if k > 0 else "",
        }
    n_show = 8
    images = model.test_images[:n_show] if model.test_images is not None else None
    preds = (model.numpy_fn(images.reshape(len(images), -1)).argmax(axis=1).tolist()
             if images is not None else None)
    if steps is not None:
        graph = graph_svg(shown, traces if shown is current else {}, members,
                          svg_id="model-graph-after")
    else:
        graph = graph_svg(current, traces, fused_members(state.name, state.batch)
                          if state.fused else {})
    return {
        "state": state, "model": model, "steps": steps,
        "graph": graph,
        "functions": _functions(state, base, traces),
        "samples": [{"pixels": images[i].tolist(), "label": int(model.test_labels[i]),
                     "numpy": preds[i]} for i in range(len(images))] if images is not None
        else [],
        "main_script": (shown if steps is not None else current)["main"].script()
        if hasattr(current["main"], "script") else "",
        "stage_labels": STAGE_LABELS,
        "recipe_note": RECIPE_NOTE,
    }

"""The model page: a model's graph, its TensorIR functions (each a link into the explorer
with its trace), and its end-to-end time per stage measured by the workers.

The URL is the state: ``/model/mlp?batch=1&fused=1&t.<function>=<trace token>...``
(``fused=0`` shows the functions as legalized, one per operator).  Traces are replayed
here (pure IR work, within the request's budget), never compiled: the measurement is one
``model`` job of the service (:meth:`app.service.measurer.StepMeasurer.submit_model`).
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import numpy as np

from engine import IRModule, PrimFunc, structural_equal, structural_hash
from engine.models import zoo
from engine.models.pipeline import call_sequence, stage_module
from engine.relax.transform.op_pattern import PATTERN_NAMES, op_pattern
from engine.schedule import Schedule

from ..errors import AppError
from .budget import budget_error_of, ensure_budget, over_budget_text
from .services import instance_folder, limits
from .session import CUSTOM, decode_token, encode_src

__all__ = ["ModelState", "get_model", "context", "STAGE_LABELS"]

_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()

STAGE_LABELS = {"unscheduled": "unscheduled", "scheduled": "scheduled (default recipe)",
                "fused": "fused", "fused+scheduled": "fused + scheduled (default recipe)"}


_UPLOADED = re.compile(r"onnx-[0-9a-f]{16}")
#: uploaded models kept in the instance folder (the oldest go first beyond this)
MAX_STORED_MODELS = 100


def onnx_limits():
    from engine.relax.frontend import OnnxLimits

    return OnnxLimits(max_bytes=limits().max_upload_bytes)


def _models_folder() -> str:
    return os.path.join(instance_folder(), "models")


def store_onnx(data: bytes) -> str:
    """Check an uploaded ONNX file (read, bounded, every operator supported: a 400 naming
    what is not) and keep it in the instance folder; its name (``onnx-<hash>``)."""
    from engine.relax.frontend import ImportError_

    try:
        zoo.from_onnx_bytes(data, limits=onnx_limits())
    except (ImportError_, ValueError) as e:
        raise AppError(400, "This model cannot be imported", str(e), back="/",
                       back_label="the gallery") from None
    name = "onnx-" + hashlib.sha256(data).hexdigest()[:16]
    folder = _models_folder()
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name + ".onnx")
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        kept = sorted((os.path.getmtime(os.path.join(folder, n)), n) for n in os.listdir(folder)
                      if n.endswith(".onnx"))
        for _, old in kept[:-MAX_STORED_MODELS]:
            os.unlink(os.path.join(folder, old))
    return name


def get_model(name: str):
    """The named model (the MLP: trained on first use, numpy, seconds, cached in the
    instance folder) or an uploaded ONNX model (``onnx-<hash>``, kept in the instance
    folder); kept in memory for the process."""
    if name not in zoo.MODELS and not _UPLOADED.fullmatch(name):
        raise AppError(404, "No such model", f"There is no model named {name[:40]!r}; the "
                       f"models are: {', '.join(zoo.MODELS)} (or upload an ONNX file).",
                       back="/", back_label="the gallery")
    with _LOCK:
        if name in _MODELS:
            return _MODELS[name]
        if name in zoo.MODELS:
            model = zoo.get(name, instance_folder())
        else:
            path = os.path.join(_models_folder(), name + ".onnx")
            try:
                with open(path, "rb") as f:
                    data = f.read(limits().max_upload_bytes + 1)
            except OSError:
                raise AppError(404, "No such model", "This uploaded model is not on this "
                               "server (any more); upload the ONNX file again.", back="/",
                               back_label="the gallery") from None
            model = zoo.from_onnx_bytes(data, title="uploaded ONNX model",
                                        limits=onnx_limits())
        _MODELS[name] = model
        while len(_MODELS) > 16:
            _MODELS.pop(next(iter(_MODELS)))
        return model


_STAGES: "OrderedDict[tuple, IRModule]" = OrderedDict()


def model_stage(name: str, batch: int, stage: str) -> IRModule:
    """``stage_module`` of the model at ``batch`` (pure IR passes; the last 32 kept)."""
    key = (name, batch, stage)
    with _LOCK:
        hit = _STAGES.get(key)
        if hit is not None:
            _STAGES.move_to_end(key)
            return hit
    mod = stage_module(get_model(name).build(batch), stage)[0]
    with _LOCK:
        _STAGES[key] = mod
        while len(_STAGES) > 32:
            _STAGES.popitem(last=False)
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
        return cls(name, batch, fused, tokens)

    def url(self, **changes: Any) -> str:
        s = ModelState(self.name, changes.get("batch", self.batch),
                       changes.get("fused", self.fused), dict(changes.get("tokens",
                                                                          self.tokens)))
        q = {"batch": s.batch, "fused": int(s.fused)}
        q.update({f"t.{k}": v for k, v in sorted(s.tokens.items())})
        return f"/model/{s.name}?" + urlencode(q)

    # programs ---------------------------------------------------------------------------
    def base(self) -> IRModule:
        return model_stage(self.name, self.batch, "fused" if self.fused else "unscheduled")

    def scheduled(self) -> tuple[IRModule, dict[str, Any]]:
        """The current module: the base with each function's trace from the link replayed
        (within the request's work budget, shared by all the link's traces: see
        :mod:`app.web.budget`); and the traces (function -> Trace)."""
        mod = self.base()
        funcs, traces = dict(mod.items()), {}
        back = self.url(tokens={})
        for fname, token in self.tokens.items():
            if fname not in funcs or not isinstance(funcs[fname], PrimFunc):
                raise AppError(400, "No such function", f"The link schedules {fname[:60]!r}, "
                               "which is not a TensorIR function of this model at this stage.",
                               back=back, back_label="the model without schedules")
            trace = decode_token(token, back, "the model without schedules")
            sch = Schedule(IRModule(((fname, funcs[fname]),)))
            _replay(trace, sch, fname, back)
            funcs[fname] = sch.mod[fname]
            traces[fname] = trace
        return IRModule(tuple(funcs.items())), traces


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


def explorer_link(fname: str, func: PrimFunc, token: str | None) -> str:
    """The ordinary explorer on this function (a custom program) with its trace."""
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


def measure_doc(state: ModelState, current: IRModule) -> tuple[str, dict]:
    """The key and the document of the model's measurement job: the four reference stages
    and the link's own program."""
    model = get_model(state.name)
    stages = [(label, model_stage(state.name, state.batch, stage))
              for stage, label in STAGE_LABELS.items()]
    if state.tokens:
        stages.append(("this link's schedules", current))
    x = model.test_inputs(state.batch)
    ref = np.asarray(model.numpy_fn(x.astype("float64")) if model.numpy_fn else None)
    key = "model:" + ":".join([state.name, str(state.batch)]
                              + [structural_hash(m) for _, m in stages])
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
    n_show = 8
    images = model.test_images[:n_show] if model.test_images is not None else None
    preds = (model.numpy_fn(images.reshape(len(images), -1)).argmax(axis=1).tolist()
             if images is not None else None)
    return {
        "state": state, "model": model,
        "graph": graph_svg(current, traces, fused_members(state.name, state.batch)
                           if state.fused else {}),
        "functions": _functions(state, base, traces),
        "samples": [{"pixels": images[i].tolist(), "label": int(model.test_labels[i]),
                     "numpy": preds[i]} for i in range(len(images))] if images is not None
        else [],
        "main_script": current["main"].script() if hasattr(current["main"], "script") else "",
        "stage_labels": STAGE_LABELS,
    }

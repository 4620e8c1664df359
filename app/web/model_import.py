"""Uploaded ONNX models: read by a worker, checked and kept by the web process.

An ONNX file is hostile input, and what reading it costs depends on what it says (folding
its constant calls, padding, running it once for the reference output): none of that runs
here. :func:`imported` sends the file's bytes to a measurement worker (a ``model_import``
job: read within :func:`onnx_limits`, folded, run once in numpy, under the worker's memory
and time limits) and gets back the graph as plain data and the reference output. That
reply is checked like any outside input (``graph_from_doc``: every field, every count
against the limits; the reference's shape and bytes) and made into a
:class:`engine.models.zoo.Model` whose reference output is already known — the web process
never runs it.

The reply is stored (the results cache, by the file's hash and the limits), so a model is
read once per server and not again after a restart; a model that cannot be read is stored
as its sentence (a 400 each time, never a 500). One learner's address waits for one import
at a time (a request thread waiting for a worker is a thread the class does not have).
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import threading
from typing import Any, Iterator

from engine.models import zoo

from ..errors import AppError
from ..service.protocol import BadReply, ClientQueueFull, PoolClosed, PoolUnavailable, \
    QueueFull, array_of
from .measuring import client_key
from .services import limits, measurer

__all__ = ["onnx_limits", "imported", "import_key", "IMPORT_WAIT_S"]

#: how long a request waits for a worker to read a model before answering "still reading"
IMPORT_WAIT_S = 30.0

_WAITING: dict[str | None, int] = {}
_WAITING_LOCK = threading.Lock()


def onnx_limits():
    """The bounds on an uploaded model (engine.relax.frontend.OnnxLimits), from the app's
    limits: its file at most ``max_upload_bytes``; its forward pass at most
    ``max_flops_measured``; its tensors small enough for a classroom's server."""
    from engine.relax.frontend import OnnxLimits

    lim = limits()
    return OnnxLimits(max_bytes=lim.max_upload_bytes, max_tensor_elements=4 << 20,
                      max_total_elements=4 << 20, max_activation_elements=16 << 20,
                      max_model_flops=lim.max_flops_measured)


def import_key(data: bytes) -> str:
    """The stored import's key: the file's hash and the limits it was read with."""
    lims = json.dumps(dataclasses.asdict(onnx_limits()), sort_keys=True)
    return "onnx-import:" + hashlib.sha256(data + b"\0" + lims.encode()).hexdigest()


@contextlib.contextmanager
def _one_wait_per_address(back: str) -> Iterator[None]:
    who = client_key()
    with _WAITING_LOCK:
        if _WAITING.get(who, 0) >= 1:
            raise AppError(429, "Already reading a model",
                           "A model from your address is being read; wait for it, then try "
                           "again.", back=back, back_label="the gallery")
        _WAITING[who] = _WAITING.get(who, 0) + 1
    try:
        yield
    finally:
        with _WAITING_LOCK:
            _WAITING[who] -= 1
            if not _WAITING[who]:
                del _WAITING[who]


def _import_value(data: bytes, back: str) -> dict[str, Any]:
    """The worker's reading of ``data`` (stored, or read now within IMPORT_WAIT_S)."""
    try:
        got, ticket = measurer().submit_model_import(
            import_key(data), data, dataclasses.asdict(onnx_limits()))
    except (QueueFull, ClientQueueFull, PoolClosed, PoolUnavailable) as e:
        raise AppError(503, "Cannot read the model now", f"The measurement workers cannot "
                       f"take it now ({e}). Try again in a moment.", back=back,
                       back_label="the gallery") from None
    if got is None:
        with _one_wait_per_address(back):
            got = measurer().import_result_of(ticket, timeout=IMPORT_WAIT_S)
    if "pending" in got:
        raise AppError(503, "Still reading the model", f"The model is being read: "
                       f"{got['pending']}", back=back, back_label="the gallery")
    if "error" in got:
        raise AppError(400, "This model cannot be imported", str(got["error"])[:2000],
                       back=back, back_label="the gallery")
    return got


def imported(data: bytes, title: str, back: str = "/"):
    """The :class:`engine.models.zoo.Model` of an uploaded file, read by a worker and
    checked here (a 400 with the worker's sentence when it cannot be read)."""
    from engine.relax.frontend import ImportError_, graph_from_doc

    value = _import_value(data, back)
    lims = onnx_limits()
    try:
        graph = graph_from_doc(value.get("graph"), lims)
        reference = array_of(value.get("reference"), lims.max_tensor_elements)
    except (ImportError_, BadReply) as e:
        raise AppError(400, "This model cannot be imported", f"Its reading does not check "
                       f"out: {e}", back=back, back_label="the gallery") from None
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise AppError(400, "This model cannot be imported", "The model page runs models of "
                       "one input and one output.", back=back, back_label="the gallery")
    out_shape = graph.shapes.get(graph.outputs[0])
    if tuple(reference.shape) != tuple(out_shape or ()):
        raise AppError(400, "This model cannot be imported", f"Its reference output has "
                       f"shape {reference.shape}, its graph says {out_shape}.", back=back,
                       back_label="the gallery")
    return zoo.model_from_graph(graph, title, reference=reference)

"""The model page's "Run in your browser": the model's current program as one ``.wasm``.

The web process never compiles: the module is built by a worker (the ``export`` job of
the service, target ``wasm32``: :func:`engine.deploy.export.export_library` through
:mod:`engine.deploy.wasm`), and the bytes it sent back are checked (a WebAssembly module's
magic and version, a size bound) and kept here by the model's state — the model, its batch
and the structural hash of the program the page shows — so every page of that state gets
the same bytes without another build. ``GET /model/<name>/model.wasm?<state>`` serves them
(:func:`wasm_response`); while the worker builds it answers 202 with the sentence, and a
module that cannot be built is a 422 with the worker's sentence.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from typing import Any

from ..kept import MiB, Kept
from ..service.protocol import ClientQueueFull, PoolClosed, PoolUnavailable, QueueFull
from .services import measurer

__all__ = ["server_stage", "runnable_module", "wasm_key", "wasm_bytes", "wasm_response", "MAX_WASM_BYTES",
           "WASM_PREFIX"]

#: the C prefix of the page's module: ``model_main(x, out)``, ``model_metadata()``
WASM_PREFIX = "model"
#: the largest module the page accepts from a worker (the MLP's is about 0.4 MB)
MAX_WASM_BYTES = 64 * MiB
#: seconds a request waits for a running build before answering 202
WAIT_S = 2.0
#: modules by state key (or a failure: when, sentence), bounded by bytes
_MODULES: "Kept[Any]" = Kept(96 * MiB, lambda v: len(v) if isinstance(v, bytes) else 512)

_MAGIC = b"\0asm\x01\0\0\0"


def server_stage(state: Any) -> str:
    """The label of the measurement pane's row that times the program the page shows (the
    server's time shown beside the browser's)."""
    from engine.models import passes as model_passes

    from .model import STAGE_LABELS

    if state.passes is not None:
        k = len(state.passes)
        return f"{k}. {model_passes.PASS_STEPS[state.passes[-1]].label}" if k \
            else "0. as written"
    if state.tokens:
        return "this link's schedules"
    return STAGE_LABELS["fused" if state.fused else "unscheduled"]


def runnable_module(state: Any) -> Any:
    """The Relax module the page shows, its weights bound (what the browser runs)."""
    from engine.models import passes as model_passes

    from .model import model_weights

    current, _ = state.scheduled()
    if state.passes is not None:
        _, weights = model_weights(state.name, state.batch)
        return model_passes.runnable(current, weights)
    return current


def wasm_key(state: Any, mod: Any) -> str:
    """The state's key: model, batch and the program's structural hash."""
    return ":".join(["wasm32", state.name, str(state.batch), measurer().program_hash(mod)])


def _checked(reply: dict) -> bytes | str:
    """The module's bytes from a worker's reply, or the sentence why it cannot be served."""
    files = reply.get("files") if isinstance(reply, dict) else None
    if not isinstance(files, dict):
        return "the worker's reply holds no files"
    names = [n for n in files if isinstance(n, str) and n.endswith(".wasm")]
    if len(names) != 1:
        return "the worker's reply holds no .wasm file"
    name = names[0]
    text = files[name]
    if not isinstance(text, str) or len(text) > MAX_WASM_BYTES * 4 // 3 + 8:
        return f"the worker's reply has no {name} of at most {MAX_WASM_BYTES} bytes"
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return f"the worker's {name} is not base64"
    if not data.startswith(_MAGIC):
        return f"the worker's {name} is not a WebAssembly module (version 1)"
    return data


#: seconds a build's failure is answered from memory before the module is built again
FAILURE_TTL_S = 60.0


def _outcome(reply: dict) -> bytes | tuple[float, str]:
    """A finished build's reply as what is kept: the checked bytes, or (when, sentence)."""
    if "error" in reply:
        return time.monotonic(), f"the module could not be built: {reply['error']}"
    data = _checked(reply)
    return (time.monotonic(), data) if isinstance(data, str) else data


def _keep_result(key: str, result: Any) -> None:
    """The ticket's callback: keep what the build gave, even when no request waits for it
    any more (the page asks again a second later; the job is not run again)."""
    data = result.data.get("export") if result.ok else None
    reply = data if isinstance(data, dict) else \
        {"error": result.message or f"the module could not be built ({result.status})"}
    if result.status != "pending":
        _MODULES.put(key, _outcome(reply))


def _kept(key: str) -> bytes | tuple[float, str] | None:
    got = _MODULES.get(key)
    if isinstance(got, tuple) and time.monotonic() - got[0] > FAILURE_TTL_S:
        return None
    return got


def wasm_bytes(state: Any) -> tuple[str, bytes | None, str | None, str | None]:
    """``(key, bytes, pending sentence, error sentence)``: one of the last three is set."""
    mod = runnable_module(state)
    key = wasm_key(state, mod)
    got = _kept(key)
    if got is None:
        doc = {"module": mod, "target": "wasm32", "prefix": WASM_PREFIX}
        try:
            ticket = measurer().submit_export(key, doc)
        except (QueueFull, ClientQueueFull, PoolClosed, PoolUnavailable) as e:
            return key, None, None, str(e)
        ticket.add_done_callback(lambda r, key=key: _keep_result(key, r))
        reply = measurer().export_result_of(ticket, timeout=WAIT_S)
        if "pending" in reply:
            return key, None, str(reply["pending"]), None
        got = _outcome(reply)
        _MODULES.put(key, got)
    if isinstance(got, tuple):
        return key, None, None, got[1]
    return key, got, None, None


def wasm_response(state: Any, if_none_match: str | None = None):
    """The Flask response of ``/model/<name>/model.wasm`` (see the module docstring)."""
    key, data, pending, error = wasm_bytes(state)
    if data is None:
        status = 202 if pending is not None else 422
        body = {"pending": pending} if pending is not None else {"error": error}
        headers = {"Content-Type": "application/json", "Cache-Control": "no-store"}
        if pending is not None:
            headers["Retry-After"] = "1"
        return json.dumps(body), status, headers
    etag = '"' + hashlib.sha256(key.encode()).hexdigest()[:32] + '"'
    headers = {"Content-Type": "application/wasm", "ETag": etag,
               "Cache-Control": "private, max-age=3600"}
    if if_none_match == etag:
        return "", 304, headers
    return data, 200, headers

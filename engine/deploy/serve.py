"""``python -m engine serve mlp.so``: an exported library behind an HTTP JSON inference
endpoint, a plain WSGI application (:class:`InferenceApp`) served by waitress.

=================================  ===================================================
``POST /v1/<function>``            ``{"inputs": [...]}`` or ``{"inputs": {"x": ...}}``
                                   (or ``{"batch": [...]}``; see
                                   :mod:`engine.deploy.inference`) ->
                                   ``{"outputs": ..., "ms": ..., "batch": n}``
``GET /`` and ``GET /v1/metadata`` the functions (names, shapes, dtypes: the library's
                                   metadata) and the endpoint's limits
=================================  ===================================================

Every refusal is JSON ``{"error": sentence}`` with its status: 400 (not JSON, a missing
input, a shape, non-numbers, over ``max_batch``), 404 (no such function or path), 405,
413 (a body over ``max_body_bytes``, the limit named).  The library's entry points are not
reentrant (their intermediates are static), so every call holds one lock; a request of
``n`` inputs runs them one after another under it.  Nothing a client sends stops the
server: an unexpected failure is a 500 with a sentence, logged.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from typing import Any, Callable, Iterable

import numpy as np

from .inference import (FunctionSpec, RequestError, finite_ms, function_specs,
                        outputs_doc, read_request)

__all__ = ["InferenceApp", "LibraryError", "open_library", "make_server", "serve",
           "DEFAULT_MAX_BATCH", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_THREADS"]

log = logging.getLogger("engine.serve")

DEFAULT_MAX_BATCH = 64
DEFAULT_MAX_BODY_BYTES = 8 * 2**20
DEFAULT_THREADS = 4

_STATUS = {200: "200 OK", 400: "400 Bad Request", 404: "404 Not Found",
           405: "405 Method Not Allowed", 413: "413 Content Too Large",
           500: "500 Internal Server Error"}


class LibraryError(ValueError):
    """The file cannot be served: not an exported library, or one this endpoint cannot
    describe (one sentence)."""


class InferenceApp:
    """The WSGI application around one loaded library.

    ``functions``: the library's functions (:func:`engine.deploy.inference.function_specs`);
    ``call(name, inputs) -> outputs``: one call of an entry point on arrays of the exact
    shapes and dtypes (serialized here by a lock); ``metadata``: what ``GET /`` shows of
    the library besides its functions (its target, file name)."""

    def __init__(self, functions: dict[str, FunctionSpec],
                 call: Callable[[str, list[np.ndarray]], list[np.ndarray]],
                 metadata: dict[str, Any] | None = None, *,
                 max_batch: int = DEFAULT_MAX_BATCH,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES):
        self.functions = dict(functions)
        self._call = call
        self.metadata = dict(metadata or {})
        self.max_batch = int(max_batch)
        self.max_body_bytes = int(max_body_bytes)
        self._lock = threading.Lock()

    # -------------------------------------------------------------------- WSGI
    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        try:
            status, doc = self.handle(environ.get("REQUEST_METHOD", "GET"),
                                      environ.get("PATH_INFO", "/"), environ)
        except Exception as e:  # noqa: BLE001 - a request never ends the server
            log.exception("an inference request failed")
            status, doc = 500, {"error": f"The endpoint failed on this request "
                                         f"({type(e).__name__}: {e}); it keeps serving."}
        body = json.dumps(doc, separators=(",", ":")).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                   ("Cache-Control", "no-store")]
        if status == 405:
            headers.append(("Allow", "POST" if environ.get("PATH_INFO", "").startswith(
                "/v1/") and environ.get("PATH_INFO") != "/v1/metadata" else "GET"))
        start_response(_STATUS.get(status, f"{status} Error"), headers)
        return [body]

    def handle(self, method: str, path: str, environ: dict) -> tuple[int, dict]:
        """(status, JSON document) of one request."""
        try:
            if path in ("/", "/v1/metadata", "/v1", "/v1/"):
                if method not in ("GET", "HEAD"):
                    raise RequestError(405, f"{path} describes the functions: use GET "
                                            f"(POST /v1/<function> runs one).")
                return 200, self.describe()
            if not path.startswith("/v1/"):
                raise RequestError(404, f"There is nothing at {path[:80]}; POST "
                                        f"/v1/<function> runs a function, GET / lists them.")
            name = path[len("/v1/"):]
            spec = self.functions.get(name)
            if spec is None:
                raise RequestError(404, f"The library has no function {name[:60]!r}; it "
                                        f"has {', '.join(sorted(self.functions))}.")
            if method != "POST":
                raise RequestError(405, f"POST a JSON body to /v1/{name} to run it "
                                        f'({{"inputs": [...]}}); GET / describes it.')
            return 200, self.run(spec, self._body(environ))
        except RequestError as e:
            return e.status, {"error": str(e)}

    # -------------------------------------------------------------------- pieces
    def describe(self) -> dict[str, Any]:
        """What ``GET /`` answers: the library's functions and the endpoint's limits."""
        return {**self.metadata,
                "functions": {n: {**f.doc(), "url": f"/v1/{n}"}
                              for n, f in self.functions.items()},
                "max_batch": self.max_batch, "max_body_bytes": self.max_body_bytes,
                "usage": 'POST /v1/<function> with {"inputs": [x, ...]} or {"inputs": '
                         '{"name": x}}; n inputs at once along a leading batch dimension '
                         f'or as {{"batch": [...]}} (at most {self.max_batch})'}

    def _body(self, environ: dict) -> bytes:
        limit = self.max_body_bytes
        too_large = RequestError(413, f"The request body is over {limit} bytes, this "
                                      f"endpoint's limit (--max-body-bytes); send fewer "
                                      f"inputs per request.")
        raw_length = environ.get("CONTENT_LENGTH") or ""
        if raw_length.strip().isdigit() and int(raw_length) > limit:
            raise too_large
        stream = environ.get("wsgi.input")
        body = stream.read(limit + 1) if stream is not None else b""
        if len(body) > limit:
            raise too_large
        return body

    def run(self, spec: FunctionSpec, body: bytes) -> dict[str, Any]:
        """Run one checked request: its input sets one after another, the library's calls
        under the lock."""
        batch = read_request(body, spec, self.max_batch)
        results, spent = [], 0.0
        for inputs in batch.items:
            with self._lock:
                t0 = time.perf_counter()
                outputs = self._call(spec.name, inputs)
                spent += time.perf_counter() - t0
            results.append(outputs)
        return {"function": spec.name, "outputs": outputs_doc(batch, results, spec),
                "batch": len(batch.items), "ms": finite_ms(spent)}


# ------------------------------------------------------------------------ the library
def open_library(path: str) -> tuple[dict[str, FunctionSpec], Callable, dict[str, Any]]:
    """(functions, call, about) of the exported library at ``path``, loaded with
    :class:`engine.deploy.loader.NativeLibrary` (ctypes); a :class:`LibraryError` sentence
    when the file is missing or is not a library exported by ``export_library``."""
    from .loader import LibraryError as LoaderError
    from .loader import NativeLibrary

    if os.path.isdir(path):
        raise LibraryError(f"{path} is a directory, not a library written by "
                           "export_library (a .so file)")
    try:
        lib = NativeLibrary(path)
    except LoaderError as e:
        raise LibraryError(str(e)) from None
    except (ValueError, KeyError, UnicodeDecodeError) as e:  # metadata that does not read
        raise LibraryError(f"{path} is not a library this engine exported (its metadata "
                           f"cannot be read: {e})") from None
    try:
        functions = function_specs(lib.metadata)
    except ValueError as e:
        raise LibraryError(f"{path} cannot be served: {e}") from None

    def call(name: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
        out = lib[name](*inputs)
        return list(out) if isinstance(out, tuple) else [out]

    about = {"library": os.path.basename(path),
             **{k: lib.metadata[k] for k in ("target", "kind", "prefix", "engine_version")
                if k in lib.metadata}}
    return functions, call, about


def make_server(app: InferenceApp, host: str, port: int, threads: int) -> Any:
    """A waitress server for ``app`` (not yet serving; ``port=0`` picks a free port: the
    server's ``effective_port``).  waitress's own body limit is twice the app's, so the
    app's 413 names its limit and waitress still stops a body far beyond it."""
    from waitress import create_server

    return create_server(app, host=host, port=port, threads=threads,
                         max_request_body_size=2 * app.max_body_bytes + 65536,
                         ident="engine-serve", clear_untrusted_proxy_headers=True)


def serve(path: str, host: str = "127.0.0.1", port: int = 8080, *,
          max_batch: int = DEFAULT_MAX_BATCH, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
          threads: int = DEFAULT_THREADS, out=None) -> None:
    """Serve the library at ``path`` until interrupted (Ctrl-C: prints "stopped" and
    returns); prints where it listens first (one line, flushed)."""
    out = out or sys.stdout
    functions, call, about = open_library(path)
    app = InferenceApp(functions, call, about, max_batch=max_batch,
                       max_body_bytes=max_body_bytes)
    server = make_server(app, host, port, threads)
    names = ", ".join(f"POST /v1/{n}" for n in functions)
    print(f"serving {path} on http://{host}:{server.effective_port}/ ({names}; GET / "
          f"describes them)", file=out, flush=True)
    try:
        server.run()                     # returns on Ctrl-C (waitress ends its loop)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    print("stopped", file=out, flush=True)

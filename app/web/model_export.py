"""The model page's Export: the program the page shows as a standalone library, for this
machine, an ARM board or the browser, downloaded as one ``.zip``.

``GET /model/<name>/export?target=<key>&<state>`` (:func:`export_response`): the page's
state is validated as the page validates it (its traces replayed within the request's
budget); the web process never compiles — the library is built by a worker (the service's
``export`` job: ``relax.build`` + :func:`engine.deploy.export_library` for the target), and
the files it sends back are checked here as outside input (exactly the library and its
header, base64, the library's magic bytes, a size bound).  The zip holds the library
(``<prefix>.so`` or ``<prefix>.wasm``), its C header, its loader (``loader.py``, ctypes
and numpy only, beside a native library; ``engine_wasm.js`` beside a ``.wasm``) and a
README; it is built once per state — model, batch, the program's structural hash, target —
kept in memory (bounded by bytes), written with fixed timestamps (the same state gives the
same bytes) and served with an ETag.

The targets offered are those ``engine.deploy.targets.get_target`` accepts
(:func:`offered_targets`); the target is the route's parameter, an exact key of
:data:`EXPORT_TARGETS` (anything else is a 400 naming the keys).
"""
from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import AppError
from ..kept import MiB, Kept
from ..service.protocol import ClientQueueFull, PoolClosed, PoolUnavailable, QueueFull
from .model_wasm import runnable_module
from .services import measurer

__all__ = ["ExportTarget", "EXPORT_TARGETS", "offered_targets", "library_prefix",
           "export_zip", "export_response", "MAX_LIBRARY_BYTES"]


@dataclass(frozen=True)
class ExportTarget:
    """One target of the Export menu: its key in the URL, its label, the target string
    ``engine.deploy`` reads (None: this machine), and what a download holds."""

    key: str
    label: str
    target: str | None
    suffix: str
    magic: bytes
    what: str


EXPORT_TARGETS = {
    "host": ExportTarget("host", "this machine (.so)", None, ".so", b"\x7fELF",
                         "a Linux shared library for the server's CPU"),
    "aarch64": ExportTarget("aarch64", "an ARM board (aarch64 .so)",
                            "llvm -mtriple=aarch64-linux-gnu", ".so", b"\x7fELF",
                            "a Linux shared library for 64-bit ARM (a Raspberry Pi 5 or "
                            "any aarch64 board)"),
    "wasm32": ExportTarget("wasm32", "the browser (.wasm)", "wasm32", ".wasm",
                           b"\0asm\x01\0\0\0", "a WebAssembly module for a web page"),
}

#: the largest library accepted from a worker
MAX_LIBRARY_BYTES = 48 * MiB
#: seconds a download waits for the worker's build before answering 503 (try again)
WAIT_S = 90.0
#: zips by state key, bounded by bytes
_ZIPS: "Kept[bytes]" = Kept(64 * MiB, len)
#: a fixed timestamp for the zip's entries: one state, one zip
_ZIP_TIME = (2024, 1, 1, 0, 0, 0)
_ROOT = Path(__file__).resolve().parents[2]
#: the loader shipped beside a library of each kind: the ctypes loader (numpy only) for a
#: native library, the page's WebAssembly loader for a .wasm
_LOADERS = {".so": ("loader.py", _ROOT / "engine" / "deploy" / "loader.py"),
            ".wasm": ("engine_wasm.js", _ROOT / "static" / "engine_wasm.js")}


@functools.lru_cache(maxsize=1)
def offered_targets() -> tuple[ExportTarget, ...]:
    """The targets this engine exports for (this machine always; an ARM board and the
    browser when ``engine.deploy`` reads their target strings)."""
    from engine.deploy.targets import DeployError, get_target

    out = []
    for t in EXPORT_TARGETS.values():
        if t.target is None:
            out.append(t)
            continue
        try:
            get_target(t.target)
        except (DeployError, ValueError, StopIteration):
            continue
        out.append(t)
    return tuple(out)


def library_prefix(model_name: str) -> str:
    """The C prefix and file stem of a model's library: its name as a C identifier."""
    out = re.sub(r"\W", "_", model_name)[:40] or "model"
    return "_" + out if out[0].isdigit() else out


def _target_of(key: str, back: str) -> ExportTarget:
    offered = {t.key: t for t in offered_targets()}
    t = offered.get(key)
    if t is None:
        raise AppError(400, "No such target", f"target={key[:30]!r} is not one this server "
                       f"exports for; the targets are {', '.join(offered)}.", back=back,
                       back_label="the model")
    return t


def _checked_files(reply: Any, t: ExportTarget, prefix: str) -> dict[str, bytes] | str:
    """The library and its header from a worker's reply, or the sentence why not."""
    files = reply.get("files") if isinstance(reply, dict) else None
    lib, header = prefix + t.suffix, prefix + ".h"
    if not isinstance(files, dict) or set(files) != {lib, header}:
        return f"the worker's reply does not hold exactly {lib} and {header}"
    out = {}
    for name in (lib, header):
        text = files[name]
        if not isinstance(text, str) or len(text) > MAX_LIBRARY_BYTES * 4 // 3 + 8:
            return f"the worker's {name} is not at most {MAX_LIBRARY_BYTES} bytes of base64"
        try:
            out[name] = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            return f"the worker's {name} is not base64"
    if not out[lib].startswith(t.magic):
        return f"the worker's {lib} is not a {t.suffix} library"
    try:
        out[header].decode("ascii")
    except UnicodeDecodeError:
        return f"the worker's {header} is not a text file"
    return out


def _readme(prefix: str, t: ExportTarget, model_title: str, url: str) -> str:
    lib = prefix + t.suffix
    lines = [f"{lib}: {model_title}, exported by Schedule Explorer for {t.what}.",
             f"The model page's state: {url}", "",
             f"{prefix}.h declares the entry points: int {prefix}_main(const float* x, "
             f"float* out) and const char* {prefix}_metadata(void)",
             "(shapes and dtypes as #defines). Weights are inside the library; calls are",
             "not reentrant (serialize them).", ""]
    if t.suffix == ".so":
        lines += ["From Python with numpy only:", "    from loader import NativeLibrary",
                  f"    out = NativeLibrary('./{lib}')['main'](x)   # x: float32 array", "",
                  "From C:", f"    cc app.c ./{lib} -o app", "",
                  "As an HTTP endpoint (with the engine installed):",
                  f"    python -m engine serve {lib} --port 8080", ""]
    else:
        lines += ["In a web page, with engine_wasm.js (no framework; the math functions it",
                  "imports come from Math):",
                  f"    const m = await EngineWasm.instantiate(await (await fetch('{lib}'))"
                  ".arrayBuffer());",
                  f"    // m.exports.{prefix}_main(x, out) on memory from m.alloc(bytes); "
                  "m.write / m.read", ""]
    return "\n".join(lines)


def _zip(files: dict[str, bytes], readme: str, suffix: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        entries = sorted(files.items()) + [("README.txt", readme.encode())]
        loader_name, loader_path = _LOADERS[suffix]
        if loader_path.is_file():
            entries.append((loader_name, loader_path.read_bytes()))
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            z.writestr(info, data)
    return buf.getvalue()


def export_zip(state: Any, key: str, model_title: str
               ) -> tuple[str, str, bytes | None, str | None, str | None]:
    """``(file name, state key, zip, pending sentence, error sentence)``: the zip, or why
    not yet (the worker is building it) or not at all."""
    t = _target_of(key, state.url())
    mod = runnable_module(state)
    prefix = library_prefix(state.name)
    skey = ":".join(["export", t.key, state.name, str(state.batch),
                     measurer().program_hash(mod)])
    name = f"{prefix}-{t.key}.zip"
    got = _ZIPS.get(skey)
    if got is not None:
        return name, skey, got, None, None
    try:
        ticket = measurer().submit_export(skey, {"module": mod, "target": t.target,
                                                 "prefix": prefix})
    except (QueueFull, ClientQueueFull, PoolClosed, PoolUnavailable) as e:
        return name, skey, None, None, str(e)
    reply = measurer().export_result_of(ticket, timeout=WAIT_S)
    if "pending" in reply:
        return name, skey, None, str(reply["pending"]), None
    if "error" in reply:
        return name, skey, None, None, str(reply["error"])
    files = _checked_files(reply, t, prefix)
    if isinstance(files, str):
        return name, skey, None, None, files
    data = _zip(files, _readme(prefix, t, model_title, state.url()), t.suffix)
    _ZIPS.put(skey, data)
    return name, skey, data, None, None


def export_response(state: Any, key: str, model_title: str,
                    if_none_match: str | None = None):
    """The Flask response of ``/model/<name>/export`` (see the module docstring)."""
    name, skey, data, pending, error = export_zip(state, key, model_title)
    if pending is not None:
        raise AppError(503, "Still building", f"The workers are still building the library "
                       f"({pending}); follow the link again in a moment.", back=state.url(),
                       back_label="the model")
    if data is None:
        raise AppError(422, "Export failed", f"The library could not be built: {error}",
                       back=state.url(), back_label="the model")
    etag = '"' + hashlib.sha256(skey.encode()).hexdigest()[:32] + '"'
    headers = {"ETag": etag, "Cache-Control": "private, max-age=3600"}
    if if_none_match == etag:
        return "", 304, headers
    headers.update({"Content-Type": "application/zip",
                    "Content-Disposition": f'attachment; filename="{name}"'})
    return data, 200, headers

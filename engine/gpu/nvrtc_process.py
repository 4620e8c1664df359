"""NVRTC (CUDA's runtime compiler, ``libnvrtc.so.12``) called through ctypes, in a process
of its own.

:mod:`engine.gpu.toolchain` runs this file as a script (``python -I nvrtc_process.py``,
standard library only: it never imports the engine), writes one JSON request to its stdin
and reads one JSON reply from its stdout, so a compiler that crashes or hangs costs a
subprocess (killed at the caller's timeout), never the caller.

Requests: ``{"library": path, "op": "version"}`` -> ``{"ok": true, "version": [12, 9]}``;
``{"library": path, "op": "compile", "source": text, "name": "kernel.cu", "options": [...]}``
-> ``{"ok": true, "ptx": text, "log": text}`` or ``{"ok": false, "error": "...", "log": text}``.
"""
from __future__ import annotations

import ctypes
import json
import sys


def _load(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    lib.nvrtcGetErrorString.argtypes = [ctypes.c_int]
    return lib


def _error_text(lib: ctypes.CDLL, code: int) -> str:
    return (lib.nvrtcGetErrorString(code) or b"NVRTC error").decode(errors="replace")


def version(lib: ctypes.CDLL) -> list[int]:
    """NVRTC's (major, minor)."""
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return [major.value, minor.value]


def _program_text(lib: ctypes.CDLL, prog: ctypes.c_void_p, size_fn: str, get_fn: str) -> str:
    size = ctypes.c_size_t()
    getattr(lib, size_fn)(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(max(size.value, 1))
    getattr(lib, get_fn)(prog, buf)
    return buf.value.decode(errors="replace")


def compile_source(lib: ctypes.CDLL, source: str, name: str, options: list[str]) -> dict:
    """Compile CUDA C++ ``source`` to PTX; the reply dict of the module docstring."""
    prog = ctypes.c_void_p()
    code = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0,
                                  None, None)
    if code:
        return {"ok": False, "error": _error_text(lib, code), "log": ""}
    try:
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        code = lib.nvrtcCompileProgram(prog, len(options), opts)
        log = _program_text(lib, prog, "nvrtcGetProgramLogSize", "nvrtcGetProgramLog")
        if code:
            return {"ok": False, "error": _error_text(lib, code), "log": log}
        ptx = _program_text(lib, prog, "nvrtcGetPTXSize", "nvrtcGetPTX")
        return {"ok": True, "ptx": ptx, "log": log}
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def handle(request: dict) -> dict:
    lib = _load(request["library"])
    if request["op"] == "version":
        return {"ok": True, "version": version(lib)}
    return compile_source(lib, request["source"], request["name"], request["options"])


def main() -> None:
    try:
        reply = handle(json.loads(sys.stdin.read()))
    except OSError as e:
        reply = {"ok": False, "error": f"cannot load NVRTC: {e}", "log": ""}
    sys.stdout.write(json.dumps(reply))


if __name__ == "__main__":
    main()

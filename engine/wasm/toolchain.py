"""The WebAssembly target machine (llvmlite's backend) and the linker (``wasm-ld``, Debian's lld).

* :func:`wasm_target_machine` — ``wasm32-unknown-unknown`` with SIMD (``v128``: a kernel's
  vectors of 8 or 16 floats become 2 or 4 of them), bulk memory (``memory.fill``/``copy``
  for LLVM's memset/memcpy), non-trapping float-to-int and sign extension: what every
  browser since 2021 runs.
* :func:`link` — object files to one ``.wasm``: no entry point, only the named functions
  exported (and the memory), the math functions of :data:`engine.wasm.runtime.MATH_IMPORTS`
  imported from the page (any other undefined symbol is a link error), a stack of
  :data:`STACK_BYTES` placed first (an overflow traps instead of overwriting data).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from functools import lru_cache

import llvmlite.binding as llvm

from engine.lower.errors import BuildError

from .runtime import MATH_IMPORTS

__all__ = ["TRIPLE", "FEATURES", "STACK_BYTES", "wasm_target_machine", "wasm_ld", "link"]

TRIPLE = "wasm32-unknown-unknown"
FEATURES = "+simd128,+bulk-memory,+nontrapping-fptoint,+sign-ext,+mutable-globals"
#: the stack of the module (the kernels put buffers up to 64 KiB, local ones up to 1 MiB, on
#: the stack): 2 MiB
STACK_BYTES = 2 * 1024 * 1024
#: seconds wasm-ld may take
LINK_TIMEOUT_S = 60

_init_lock = threading.Lock()
_initialised = False


def _init() -> None:
    global _initialised
    with _init_lock:
        if not _initialised:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _initialised = True


@lru_cache(maxsize=4)
def wasm_target_machine(opt_level: int = 3):
    """A TargetMachine for ``wasm32-unknown-unknown`` (:data:`FEATURES`), cached per level."""
    _init()
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(features=FEATURES, opt=min(max(opt_level, 0), 3),
                                        reloc="static")


def wasm_ld() -> str:
    """The path of ``wasm-ld``, or a BuildError saying how to install it."""
    for name in ("wasm-ld", "wasm-ld-14", "wasm-ld-15", "wasm-ld-16", "wasm-ld-17",
                 "wasm-ld-18", "wasm-ld-19"):
        path = shutil.which(name)
        if path:
            return path
    raise BuildError("wasm-ld (the WebAssembly linker) is not installed: install Debian's "
                     "lld package (apt-get install lld), then build for wasm32 again")


def link(objects: list[bytes], exports: list[str]) -> bytes:
    """Link wasm object files into one module exporting ``exports`` (and its memory)."""
    with tempfile.TemporaryDirectory(prefix="engine-wasm-") as tmp:
        paths = []
        for i, data in enumerate(objects):
            p = os.path.join(tmp, f"part{i}.o")
            with open(p, "wb") as f:
                f.write(data)
            paths.append(p)
        allowed = os.path.join(tmp, "imports.txt")
        with open(allowed, "w") as f:
            f.write("\n".join(MATH_IMPORTS) + "\n")
        out = os.path.join(tmp, "module.wasm")
        cmd = [wasm_ld(), "--no-entry", "--stack-first", "-z", f"stack-size={STACK_BYTES}",
               f"--allow-undefined-file={allowed}", "--gc-sections", "-O2",
               *[f"--export={name}" for name in exports], "-o", out, *paths]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=LINK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BuildError(f"wasm-ld did not finish within {LINK_TIMEOUT_S} s") from None
        if proc.returncode != 0:
            lines = [ln.split(": error: ", 1)[-1].split(": ", 1)[-1]
                     if "undefined symbol" in ln else ln
                     for ln in (proc.stderr or proc.stdout).strip().splitlines()]
            msg = list(dict.fromkeys(lines))   # one line per distinct error
            raise BuildError("wasm-ld could not link the module: "
                             + "; ".join(msg[:6])[:800])
        with open(out, "rb") as f:
            return f.read()

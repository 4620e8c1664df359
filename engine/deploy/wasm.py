"""The browser target of an exported library: ``wasm32``, one ``.wasm`` file.

``ex.export_library("mlp.wasm", target="wasm32")`` compiles the kernels and the entry points
(weights as constant data, intermediates as static arrays: the same LLVM IR as for a shared
library) with llvmlite's WebAssembly backend (:mod:`engine.wasm`) and links them with
``wasm-ld`` together with the module's own small runtime (a parallel loop runs as one task,
a stack-like allocator for buffers over the stack limit, memset): a module whose only
imports are the math functions a page gives from ``Math`` (``static/engine_wasm.js``). Its
exports: the entry points (``<prefix>_main(x, out)``: offsets into its memory), the
metadata (``<prefix>_metadata()``, a C string in its memory), ``engine_wasm_alloc(bytes)``
for the page's arrays, and the memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.wasm import FEATURES, TRIPLE, link_wasm, wasm_object, wasm_target_machine

from .targets import DeployTarget, register_target

__all__ = ["WasmTarget", "WASM32", "read_wasm"]

#: the target strings that name wasm32
NAMES = ("wasm32", "wasm", "wasm32-unknown-unknown", "llvm -mtriple=wasm32-unknown-unknown",
         "llvm -mtriple=wasm32")


@dataclass(frozen=True)
class WasmTarget(DeployTarget):
    """WebAssembly in a browser: no threads, no libc; linked by wasm-ld."""

    def target_machine(self, opt_level: int = 3):
        return wasm_target_machine(opt_level)

    def emit_object(self, ll_text: str, opt_level: int = 3, optimise: bool = True) -> bytes:
        """A wasm object of LLVM IR text (the kernels' libc calls renamed to the module's
        runtime, O3: :func:`engine.wasm.wasm_object`)."""
        return wasm_object(ll_text, opt_level if optimise else 0)

    def runtime_objects(self, workdir: Path) -> list[Path]:
        """None apart: :meth:`link` always adds the module's runtime (the allocator and
        memset are needed without a parallel loop too)."""
        return []

    def link(self, objects: list[Path], out: Path, exports: list[str],
             workdir: Path) -> None:
        """One ``.wasm`` exporting ``exports``, the allocator and the memory."""
        out.write_bytes(link_wasm([Path(p).read_bytes() for p in objects], list(exports)))


WASM32 = WasmTarget("wasm32", TRIPLE, "generic", FEATURES, library_suffix=".wasm",
                    threads=False)


def read_wasm(text: str) -> WasmTarget | None:
    """:data:`WASM32` for a string naming wasm32, else None."""
    return WASM32 if " ".join(text.split()) in NAMES else None


read_wasm.target_names = "'wasm32' (a browser)"
register_target(read_wasm)

"""LLVM IR to WebAssembly: kernels (and any LLVM module of the engine's) for ``wasm32``.

::

    data = kernels_wasm(mod)                  # a TensorIR IRModule or PrimFunc -> .wasm bytes
    obj = wasm_object(ll_text)                # one LLVM module -> a wasm object file
    data = link_wasm([obj, ...], exports)     # + the runtime (engine.wasm.runtime), linked

The code generator's modules have no triple (the host's is set when they are compiled);
:func:`wasm_object` gives them wasm32's, renames the libc calls that carry the host's
64-bit ``size_t`` (:data:`engine.wasm.runtime.RENAMED`), verifies, runs the same O3
pipeline as the host build (:func:`engine.codegen.target.optimize`) and emits the object.
A kernel's exported name is its symbol, ``engine_fn_<name>``, with the host's ABI: a
pointer (a 32-bit offset into the module's memory) per buffer, scalars by value, ``i32`` 0
on success.
"""
from __future__ import annotations

from typing import Any

import llvmlite.binding as llvm

from engine.codegen.target import optimize
from engine.ir.function import IRModule, PrimFunc
from engine.lower.errors import BuildError

from .runtime import ALLOC_EXPORT, RENAMED, RUNTIME_LL
from .toolchain import link, wasm_target_machine

__all__ = ["wasm_object", "runtime_object", "link_wasm", "kernels_wasm"]


def _rename_libc(mod: Any) -> None:
    """Point the kernels' libc calls of the host's ABI at the wasm runtime's functions."""
    for f in mod.functions:
        new = RENAMED.get(f.name)
        if new is not None and f.is_declaration:
            f.name = new


def wasm_object(ll_text: str, opt_level: int = 3) -> bytes:
    """One LLVM IR module (text) compiled to a wasm32 object file."""
    tm = wasm_target_machine(opt_level)
    try:
        mod = llvm.parse_assembly(ll_text)
    except RuntimeError as exc:
        raise BuildError(f"internal error: LLVM IR for wasm32 is invalid: {exc}") from exc
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    _rename_libc(mod)
    try:
        mod.verify()
    except RuntimeError as exc:
        raise BuildError(f"internal error: LLVM IR for wasm32 is invalid: {exc}") from exc
    optimize(mod, tm, opt_level)
    return tm.emit_object(mod)


def runtime_object() -> bytes:
    """The wasm runtime (:mod:`engine.wasm.runtime`) as an object file."""
    return wasm_object(RUNTIME_LL, 2)


def link_wasm(objects: list[bytes], exports: list[str]) -> bytes:
    """``objects`` and the runtime linked into one ``.wasm`` exporting ``exports``, the
    allocator the page reserves its arrays with, and the memory."""
    names = list(dict.fromkeys([*exports, ALLOC_EXPORT]))
    return link([*objects, runtime_object()], names)


def _functions(mod: Any) -> list:
    if isinstance(mod, PrimFunc):
        return [(mod.name, mod)]
    if isinstance(mod, IRModule):
        prims = mod.prim_funcs()
        if not prims:
            raise BuildError("the module has no TensorIR functions to compile for wasm32")
        return prims
    raise BuildError(f"expected an IRModule or a PrimFunc, got {type(mod).__name__}")


def kernels_wasm(mod: Any, opt_level: int = 3, fast_math: bool = False) -> tuple[bytes, dict]:
    """A TensorIR module's functions compiled for wasm32 and linked: ``(wasm bytes, {name:
    exported symbol})``. Thread-bound (GPU) programs are refused as by ``engine.build``."""
    from engine.codegen.llvm import codegen
    from engine.ir import stmt as S
    from engine.ir.functor import collect_stmts
    from engine.lower import lower

    funcs = _functions(mod)
    lowered = []
    for name, f in funcs:
        if any(s.kind is S.ForKind.THREAD_BINDING for s in collect_stmts(f.body, S.For)):
            raise BuildError(f"function {name!r} binds loops to GPU threads: a GPU program "
                             "cannot be compiled for wasm32")
        lowered.append((name, f if f.attr("lowered", False) else lower(f)))
    ir_mod, infos = codegen(lowered, module_name="engine_wasm", fast_math=fast_math)
    symbols = {name: info.symbol for name, info in infos.items()}
    data = link_wasm([wasm_object(str(ir_mod), opt_level)], list(symbols.values()))
    return data, symbols

"""engine.wasm — kernels and plans compiled for WebAssembly (``wasm32``), linked with wasm-ld.

Public: :func:`kernels_wasm` (a TensorIR module -> ``.wasm`` bytes and its exported
symbols), :func:`wasm_object` (LLVM IR text -> a wasm32 object), :func:`link_wasm` (objects
+ the runtime -> ``.wasm``), :func:`wasm_target_machine`, :func:`wasm_ld`; the runtime the
module brings (serial parallel launch, a stack-like allocator, memset) in
:mod:`engine.wasm.runtime`, the math it imports from the page in :data:`MATH_IMPORTS`.
"""
from .compile import kernels_wasm, link_wasm, runtime_object, wasm_object
from .runtime import ALLOC_EXPORT, MATH_IMPORTS
from .toolchain import FEATURES, TRIPLE, wasm_ld, wasm_target_machine

__all__ = ["kernels_wasm", "wasm_object", "link_wasm", "runtime_object", "wasm_target_machine",
           "wasm_ld", "MATH_IMPORTS", "ALLOC_EXPORT", "TRIPLE", "FEATURES"]

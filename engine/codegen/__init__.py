"""engine.codegen — LLVM IR generation (llvmlite IRBuilder), host target machine, O3, asm.

Public: :func:`codegen` (lowered PrimFuncs -> ``llvmlite.ir.Module``), :class:`CodeGen`,
:func:`host_target_machine`, :func:`optimize`, :func:`emit_assembly`.
See :mod:`engine.codegen.llvm` for the code-generation choices and the instrumentation
hooks (``address_of``, ``call_extern``).
"""
from .llvm import CodeGen, FuncInfo, codegen, llvm_type
from .isa import VectorISA, isa_of
from .target import emit_assembly, host_cpu, host_target_machine, init_llvm, optimize

__all__ = ["codegen", "CodeGen", "FuncInfo", "llvm_type", "host_target_machine", "optimize",
           "emit_assembly", "host_cpu", "init_llvm", "VectorISA", "isa_of"]

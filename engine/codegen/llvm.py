"""LLVM IR generation with llvmlite's IRBuilder: one method per IR node kind.

Input: lowered PrimFuncs (see :mod:`engine.lower`): loops, flat 1-D buffers, no blocks.
Output: an ``llvmlite.ir.Module`` where each PrimFunc ``f`` becomes::

    i32 @<symbol>(ptr noalias align <elem> %A, ptr noalias align <elem> %B, ...)

returning 0 on success (-1: a heap allocation failed; other values: a task of a parallel
loop failed). Choices worth knowing:

* **Alignment of arguments.** Kernels are called zero-copy on numpy arrays, whose data is
  only guaranteed to be aligned to the element size (numpy/glibc give 16 bytes, not 64).
  Parameters therefore declare the element size as alignment (the runtime checks it and
  refuses unaligned arrays with an ArgumentError). On x86-64 an unaligned vector load of
  aligned data costs the same as an aligned one, so nothing is lost; buffers the kernel
  allocates itself are 64-byte aligned and declared so.
* **noalias.** Every buffer parameter is ``noalias`` (the runtime refuses overlapping
  arrays), so LLVM vectorizes without run-time alias checks.
* **Index arithmetic** is done in the index dtype with ``nsw`` (as TVM does) and sign
  extended to i64 for ``getelementptr``.
* **FloorDiv/FloorMod** use floor semantics for negative operands; by a positive power
  of two they become an arithmetic shift / a mask (exact for every sign); by another
  positive constant with a provably non-negative dividend they become ``sdiv``/``srem``.
* **Vectors.** ``Ramp`` indices with stride 1 become one vector load/store of
  ``lanes`` elements; other vector indices gather/scatter element by element.
* **Allocate.** ``local`` buffers and ``global`` ones up to :data:`STACK_LIMIT` bytes are
  ``alloca``'d (64-byte aligned) in the function's entry block — LLVM's SROA/mem2reg can
  then keep small ones in registers; bigger ones use ``aligned_alloc``/``free``. An
  ``Allocate`` inside a parallel loop's body (engine.lower places compacted buffers there)
  lands in the outlined worker's entry block, so every task has its own copy. A scalar
  integer buffer is zero-filled (``memset``) where its ``Allocate`` runs, every time.
* **Parallel loops** are outlined: the body becomes ``i32 body(i32 task, i32 ntasks, ptr env)``
  (``env`` holds the captured buffers and variables) that computes its chunk of iterations
  and calls an internal ``noalias`` worker function; the loop itself becomes a call of
  ``engine_parallel_launch(body, env, extent)`` from the native runtime
  (engine/runtime/parallel.c), which splits the iterations into chunks that the pool's
  threads claim dynamically.
  Parallel loops nested inside a parallel loop run serially.
* **Unrolled loops** are normally expanded by :mod:`engine.lower.legalize`; a ``T.unroll``
  loop that still reaches the code generator (IR lowered with ``legalize=False``) gets the
  loop metadata ``!llvm.loop !{self, !{"llvm.loop.unroll.full"}}`` on its back edge, so
  LLVM's unroller expands it (see :func:`engine.codegen.target.optimize` for the O1 run
  this needs outside parallel loops); other loops are left to LLVM's own heuristics.
* **Intrinsics** (:data:`engine.ir.expr.INTRINSICS`) map to LLVM intrinsics (``llvm.exp``,
  ``llvm.sqrt``, ``llvm.fma``, ...), to libm (``tanh``, ``erf``) or to an expansion
  (``sigmoid``, ``rsqrt``); ``if_then_else`` evaluates only the chosen branch.
* **Hooks for instrumentation** (used by the cache simulator):
  ``Call("int64", "address_of", (BufferLoad(buf, (index,)),))`` is the element's address as
  i64; ``Call(dtype, "call_extern", (StringImm("symbol"), *args))`` calls
  ``dtype symbol(args...)`` with arguments typed by their dtypes (a "handle" result is a
  pointer; for a C ``void`` function declare "int32" and ignore the value). Symbols resolve
  against the process (libc, libm, the parallel runtime) and the ``extra_modules`` given to
  :func:`engine.build`.
* ``fast_math=True`` puts the ``fast`` flag on floating-point instructions and calls;
  otherwise only ``contract`` is set (a*b+c may become one fused multiply-add, as C
  compilers do by default with -ffp-contract=on).
"""
from __future__ import annotations

from .expressions import ExpressionMixin
from .functions import LAUNCH_SYMBOL, FunctionABIMixin
from .generator import FuncInfo, GeneratorBase
from .intrinsics import IntrinsicMixin
from .llvm_types import I1, I8, I32, I64, PTR, llvm_type, mem_type, sanitize, scalar_type
from .loops import LONG_LOOP_TRIP, LoopMixin, loop_id
from .memory import MemoryMixin
from .statements import LOCAL_STACK_LIMIT, STACK_LIMIT, StatementMixin
from .vectors import VectorMixin

__all__ = ["CodeGen", "FuncInfo", "codegen", "codegen_units", "llvm_type", "scalar_type",
           "mem_type", "sanitize", "STACK_LIMIT", "LOCAL_STACK_LIMIT", "LONG_LOOP_TRIP",
           "LAUNCH_SYMBOL", "I1", "I8", "I32", "I64", "PTR", "loop_id"]


class CodeGen(FunctionABIMixin, LoopMixin, StatementMixin, MemoryMixin, VectorMixin,
              IntrinsicMixin, ExpressionMixin, GeneratorBase):
    """Builds one llvmlite module from lowered PrimFuncs: one method per IR node kind.

    The parts: :mod:`.functions` (kernel ABI, parallel outlining), :mod:`.loops`,
    :mod:`.statements`, :mod:`.memory` (loads, stores, index arithmetic),
    :mod:`.vectors`, :mod:`.intrinsics` (calls), :mod:`.expressions`, on the state and
    helpers of :mod:`.generator`.
    """


def _generate(funcs: list, module_name: str, fast_math: bool,
              split_parallel: bool) -> CodeGen:
    cg = CodeGen(module_name, fast_math=fast_math, split_parallel=split_parallel)
    for name, f in funcs:
        cg.add_function(f, name)
    return cg


def codegen(funcs: list, module_name: str = "engine", fast_math: bool = False):
    """Generate one llvmlite module for lowered PrimFuncs ``[(name, func), ...]``.

    Returns ``(llvmlite.ir.Module, {name: FuncInfo})``.
    """
    cg = _generate(funcs, module_name, fast_math, split_parallel=False)
    return cg.module, cg.infos


def codegen_units(funcs: list, module_name: str = "engine", fast_math: bool = False):
    """Like :func:`codegen`, with each parallel loop body in a module of its own.

    Returns ``([main module, body modules...], {name: FuncInfo})``. The main module
    declares each body's task function (``<symbol>_par<k>_task``), which its body module
    defines; linked together in one JIT they are the program :func:`codegen` gives as
    one module. :func:`engine.build` compiles the modules side by side
    (:func:`engine.codegen.units.compile_units`).
    """
    cg = _generate(funcs, module_name, fast_math, split_parallel=True)
    return [cg.module] + cg.units, cg.infos

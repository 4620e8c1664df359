"""Compile several LLVM modules side by side: one thread per module, on the cores we have.

:func:`engine.build` gives each parallel loop body a module of its own
(:func:`engine.codegen.llvm.codegen_units`). The best matmul at n=1024 is three modules —
the kernel that launches the loops (3 ms of LLVM time), the packing of B (17 ms) and the
micro-kernel (36 ms) — and on two cores they compile in the time of the largest one.

Each module gets its own LLVM context, target machine and pass builder: LLVM supports
compiling in several threads when nothing but its read-only registries is shared (its own
ThinLTO backends do so). llvmlite, however, serialises every call into LLVM behind one
process-wide lock; the two long calls — running the ``default<O3>`` pipeline and emitting
machine code — are therefore made through the ctypes functions under llvmlite's lock
wrappers (``ffi.lib.<name>._cfn``), which release the GIL while LLVM works. Where this
llvmlite has no such internals, or only one core is ours (the explorer's workers pin a
compile to the cores of its slot), the modules compile one after the other through the
public API: the same code, in the sum of the times.

::

    units = compile_units([main_ll, body1_ll, body2_ll], opt_level=3)
    ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), new_target_machine(3))
    for u in units:
        ee.add_object_file(llvm.ObjectFileRef.from_data(u.obj))
"""
from __future__ import annotations

import os
import threading
import time
from ctypes import string_at
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite.binding import ffi

from .machine import set_machine_target, target_machine
from .target import init_llvm, new_target_machine, optimize, set_host_target


@dataclass
class CompiledUnit:
    """One module after optimisation and machine-code generation."""

    opt_text: str          # the optimised module as LLVM IR text
    obj: bytes             # its object code, for ExecutionEngine.add_object_file
    opt_seconds: float     # the O3 pipeline
    codegen_seconds: float  # machine code
    thread: int            # 0 = the calling thread


def _unlocked(name: str):
    """The ctypes function under llvmlite's locked wrapper ``ffi.lib.<name>``, or None."""
    try:
        cfn = getattr(ffi.lib, name)._cfn
    except AttributeError:
        return None
    return cfn if callable(cfn) else None


_RUN_MPM = "LLVMPY_RunNewModulePassManager"
_EMIT = "LLVMPY_TargetMachineEmitToMemory"


def unlocked_available() -> bool:
    """True when this llvmlite lets two modules compile at the same time."""
    return _unlocked(_RUN_MPM) is not None and _unlocked(_EMIT) is not None


def usable_cores() -> int:
    """Cores this thread may run on (its affinity: a worker's compile slot pins it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def _emit_object(tm, mod, unlocked: bool) -> bytes:
    if not unlocked:
        return tm.emit_object(mod)
    with ffi.OutputString() as err:
        buf = _unlocked(_EMIT)(tm, mod, 1, err)
        if not buf:
            raise RuntimeError(f"LLVM could not emit machine code: {err}")
    try:
        return string_at(ffi.lib.LLVMPY_GetBufferStart(buf), ffi.lib.LLVMPY_GetBufferSize(buf))
    finally:
        ffi.lib.LLVMPY_DisposeMemoryBuffer(buf)


def compile_unit(text: str, opt_level: int = 3, auto_vectorize: bool = True,
                 unroll_first: bool = False, unlocked: bool = False,
                 thread: int = 0, machine=None) -> CompiledUnit:
    """Parse, verify, optimise and emit one module (in a new LLVM context).

    ``machine`` (an :class:`engine.codegen.machine.Machine`, None for the host): the CPU
    the pipeline optimises for and the object code is for.

    The module and its context are disposed of before returning (module first): left to
    the garbage collector, a context could be finalised before its module, which then
    freed memory twice (a segmentation fault when a cycle holding both was collected).
    Raises RuntimeError when ``text`` is not valid LLVM IR.
    """
    init_llvm()
    ctx = llvm.create_context()
    try:
        mod = llvm.parse_assembly(text, ctx)
        try:
            mod.verify()
            tm = new_target_machine(opt_level) if machine is None \
                else target_machine(machine, opt_level)
            t0 = time.perf_counter()
            optimize(mod, tm, opt_level, auto_vectorize=auto_vectorize,
                     unroll_first=unroll_first, run=_unlocked(_RUN_MPM) if unlocked else None)
            t1 = time.perf_counter()
            obj = _emit_object(tm, mod, unlocked)
            t2 = time.perf_counter()
            opt_text = str(mod)
        finally:
            mod.close()
    finally:
        ctx.close()
    return CompiledUnit(opt_text, obj, t1 - t0, t2 - t1, thread)


def unit_texts(modules: list, opt_level: int = 3, machine=None) -> list[str]:
    """LLVM IR texts of llvmlite ``ir.Module`` objects for the host target (the triple
    and data layout of :func:`host_target_machine` set on each), or for ``machine``."""
    texts = []
    for m in modules:
        if machine is None:
            set_host_target(m, opt_level)
        else:
            set_machine_target(m, machine, opt_level)
        texts.append(str(m))
    return texts


def compile_units(texts: list[str], opt_level: int = 3, auto_vectorize: bool = True,
                  unroll_first: bool = False, max_threads: int | None = None,
                  machine=None) -> list[CompiledUnit]:
    """Compile modules (LLVM IR texts) side by side; results in the order of ``texts``.

    Up to ``max_threads`` (default: the usable cores) threads, the calling thread
    included, take the largest module not yet taken, one at a time. The first error
    (invalid IR) is raised after all threads have stopped.
    """
    threads = min(len(texts), max_threads or usable_cores())
    unlocked = threads > 1 and unlocked_available()
    if not unlocked:
        return [compile_unit(t, opt_level, auto_vectorize, unroll_first, machine=machine)
                for t in texts]
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    results: list[CompiledUnit | None] = [None] * len(texts)
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(thread: int) -> None:
        while True:
            with lock:
                if not order or errors:
                    return
                i = order.pop(0)
            try:
                results[i] = compile_unit(texts[i], opt_level, auto_vectorize, unroll_first,
                                          unlocked=True, thread=thread, machine=machine)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                with lock:
                    errors.append(exc)
                return

    helpers = [threading.Thread(target=work, args=(k,), name=f"llvm-unit-{k}", daemon=True)
               for k in range(1, threads)]
    for h in helpers:
        h.start()
    work(0)
    for h in helpers:
        h.join()
    if errors:
        raise errors[0]
    return [r for r in results if r is not None]

"""Host target machine, the O3 pipeline of llvmlite's new pass manager, assembly text.

* :func:`host_target_machine` — a TargetMachine for the host CPU (``llvm.get_host_cpu_name()``)
  with all its features (``llvm.get_host_cpu_features()``: AVX2, FMA, AVX-512, ...).
* :func:`optimize` — runs LLVM's ``default<O{n}>`` module pipeline through
  ``PassBuilder`` / ``PipelineTuningOptions`` (SLP vectorizer, unrolling; LLVM's loop
  vectorizer on the loops the code generator asks for, on all with ``auto_vectorize``).
* :func:`emit_assembly` — x86 assembly of a module, for the explorer's code pane.
"""
from __future__ import annotations

import threading
from functools import lru_cache

import llvmlite.binding as llvm

_lock = threading.Lock()
_initialized = False

#: held while LLVM compiles modules and links them into an execution engine
#: (:func:`engine.build`, the cache simulator's instrumented builds, the compiled argument
#: checks of :mod:`engine.runtime.fastcall`)
JIT_LOCK = threading.RLock()


def init_llvm() -> None:
    """Initialise LLVM's native target and assembly printer (once per process)."""
    global _initialized
    with _lock:
        if _initialized:
            return
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()
        _align_innermost_loops()
        _initialized = True


#: log2 of the byte boundary each innermost loop of x86 code starts on (LLVM's default: 4)
INNERMOST_LOOP_ALIGN_LOG2 = 5
#: LLVM versions known to have the option below (an unknown option would end the process:
#: llvmlite parses it with LLVM's command-line parser, which exits on an error)
_INNERMOST_ALIGN_LLVM = range(13, 23)


def _align_innermost_loops() -> None:
    """Start every innermost loop of x86 code on a 32-byte boundary (LLVM's default: 16).

    Where a hot loop starts is otherwise decided by the sizes of the instructions before
    it; a loop that straddles a 32-byte fetch block (or a 64-byte op-cache line) is fed
    more slowly by the front end. The course's mm_relu (n=128, ``j`` split by 4) has an
    inner ``k`` loop of 31 bytes: started at byte 48 of its function it ran 0.884 ms, on a
    32-byte boundary 0.861 ms (AMD EPYC, interleaved in one process); the other schedules of
    ``benchmarks/bench_vs_tvm.py`` were unchanged within noise. A few bytes of padding per
    loop. Only for x86 and LLVM versions that have the option.
    """
    if llvm.llvm_version_info[0] not in _INNERMOST_ALIGN_LLVM:
        return
    if not llvm.get_process_triple().startswith(("x86_64", "i686", "i386")):
        return
    llvm.set_option("", "-x86-experimental-pref-innermost-loop-alignment="
                        f"{INNERMOST_LOOP_ALIGN_LOG2}")


@lru_cache(maxsize=None)
def host_cpu() -> tuple[str, str]:
    """(cpu name, feature string) of the machine we run on."""
    init_llvm()
    name = llvm.get_host_cpu_name()
    try:
        feats = llvm.get_host_cpu_features().flatten()
    except Exception:  # noqa: BLE001 - some hosts cannot report features
        feats = ""
    return name, feats


@lru_cache(maxsize=8)
def host_target_machine(opt_level: int = 3):
    """The TargetMachine for the host CPU (cached per optimisation level).

    Use it for passes and assembly only: an execution engine takes ownership of its
    target machine, so give each engine a fresh one (:func:`new_target_machine`).
    """
    return new_target_machine(opt_level)


def set_host_target(module, opt_level: int = 3) -> None:
    """Give ``module`` (an llvmlite ``ir.Module`` or a parsed module) the triple and data
    layout of :func:`host_target_machine`."""
    tm = host_target_machine(opt_level)
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)


def new_target_machine(opt_level: int = 3):
    """A new TargetMachine for the host CPU (for an execution engine to own)."""
    init_llvm()
    cpu, feats = host_cpu()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=cpu, features=feats, opt=min(max(opt_level, 0), 3),
                                        reloc="default", codemodel="jitdefault")


#: the loop metadata the code generator puts on ``T.unroll`` loops
UNROLL_FULL_MD = "llvm.loop.unroll.full"


def optimize(mod, tm, opt_level: int = 3, auto_vectorize: bool = True,
             unroll_first: bool = False, run=None) -> None:
    """Run the new pass manager's default<O{opt_level}> pipeline on ``mod`` in place.

    With ``unroll_first`` (the caller knows: the module has ``T.unroll`` loops that
    reached the code generator, marked :data:`UNROLL_FULL_MD`), a default<O1> pipeline runs
    first. Its full-unroll pass expands those loops, so that O3's LICM, SROA and SLP
    vectorizer see the unrolled micro-kernel as straight-line code and keep its
    accumulators in registers: in a single O3 run the full unroll comes *after* LICM, and a
    register-blocked matmul without ``parallel`` ran at 100 instead of 240 GFLOP/s on one
    core (O1 costs 6-10 ms). The same holds inside a ``parallel`` loop: its outlined worker
    is always-inlined into its task before any simplification, so :func:`engine.build`
    passes ``unroll_first`` for any ``T.unroll`` loop that reached the code generator
    (normally none: lowering expands them).

    LLVM's *loop* vectorizer runs with ``auto_vectorize`` (the default), as in TVM's LLVM
    pipeline (``PipelineTuningOptions()``: the loop vectorizer on), on every loop the code
    generator does not keep it off (:mod:`engine.codegen.loops`: the loops holding the
    schedule's own vectors and the loops with loops inside). A loop the schedule left
    unvectorized is then vectorized as TVM's build would: conv2d with its 56-wide output
    row innermost under the reduction, unvectorized, 33.4 ms before, 3.7 ms in TVM 0.27.
    It never reassociates floating-point arithmetic (only ``contract`` is set without
    ``fast_math``), so a float reduction stays in order and results stay bit-exact. Its
    compile-time cost on the gallery's programs is measured by
    ``benchmarks/bench_vectorizer_compile.py``. With ``auto_vectorize=False`` it vectorizes
    only the loops whose ID carries ``llvm.loop.vectorize.enable`` (innermost loops that
    read under a condition, :func:`engine.codegen.loops.guarded_element_loop`: a
    convolution's padding). The SLP vectorizer (straight-line code: unrolled loops) runs
    at ``opt_level`` >= 2 either way. A miscompile seen once with the loop vectorizer on
    (mm_relu at n=16, the reduction loop outside the fused ``i*j`` loop) did not reproduce
    with llvmlite 0.50 / LLVM 22.1 on x86; tests/test_codegen.py keeps that program under
    both settings.

    At ``opt_level`` 0, LLVM's default<O0> pipeline: the always-inliner and nothing else
    (as ``clang -O0``), so that a function marked ``alwaysinline`` — the cache simulator's
    fast path in an instrumented kernel — is inlined at every level.

    ``run(mpm, mod, pb)`` (optional) runs a module pass manager instead of ``mpm.run``
    (:mod:`engine.codegen.units` passes one that does not take llvmlite's global lock).
    """
    if opt_level <= 0:
        _run_pipeline(mod, tm, 0, auto_vectorize=False, run=run)
        return
    if unroll_first and opt_level >= 2:
        _run_pipeline(mod, tm, 1, auto_vectorize=False, run=run)
    _run_pipeline(mod, tm, opt_level, auto_vectorize, run=run)


def _run_pipeline(mod, tm, opt_level: int, auto_vectorize: bool, run=None) -> None:
    pto = llvm.PipelineTuningOptions(speed_level=min(opt_level, 3))
    pto.loop_vectorization = auto_vectorize and opt_level >= 2
    pto.slp_vectorization = opt_level >= 2
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    try:
        mpm = pb.getModulePassManager()
        if run is None:
            mpm.run(mod, pb)
        else:
            run(mpm, mod, pb)
    finally:
        pb.close()


def emit_assembly(ll_text: str, opt_level: int = 3) -> str:
    """x86 assembly (AT&T syntax) of an LLVM IR module given as text."""
    tm = host_target_machine(opt_level)
    mod = llvm.parse_assembly(ll_text)
    return tm.emit_assembly(mod)

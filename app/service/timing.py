"""How a worker measures one explorer step: compile, check against numpy, time.

This runs in the measurement worker processes (the ``step`` action of
:mod:`app.service.actions`), never in the web server. :func:`measure_step` compiles the
program with the engine's LLVM backend (``engine.build``: its own cache by structural hash),
runs it once on random inputs and compares with the workload's numpy reference (a pasted
program is compared with its unscheduled self), then times it (``time_evaluator``, the best
repeat) and times numpy's own code for the same computation, on as many BLAS threads as the
kernel uses. A step whose checked run takes over :data:`~app.limits.SLOW_RUN_S` is timed by
that run.

The result is the step dict of :mod:`app.service.protocol`; a failure is reported in it
(``ok`` False, ``stage`` where it failed, ``error`` sentence), never raised.

The CPU-heavy phases hold the worker's core slots (one core, or all of them for a program
with parallel loops, whose LLVM modules compile side by side), so that no other worker runs
anything on the same cores meanwhile: a step holds one ``slot`` from the compile to the
last timed run (the cores are asked for once: each request is a round trip to the server).
Only the checked and timed runs are pinned to the slot's cores (:func:`pinned_to`): the
compile goes wherever the operating system finds a free core (on a 2-core machine the
browser drawing the click's panes is busy on one of them; a pinned compile waited for it).
"""
from __future__ import annotations

import collections
import contextlib
import ctypes
import glob
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from engine import workloads
from engine.ir import structural_hash
from engine.runtime import build, check_correctness, random_args, runtime_info
from engine.runtime.timing import time_until_stable

from ..limits import SLOW_RUN_S
from .protocol import empty_step

__all__ = ["measure_step", "compile_split", "kernel_threads", "blas_threads",
           "numpy_threads_note", "time_kernel", "time_python",
           "workload_inputs",
           "program_inputs", "Inputs"]

#: Timing is the engine's one adaptive timing function
#: (:func:`engine.runtime.timing.time_until_stable`, also the tuner's and the benchmarks'):
#: repeats of ~2 ms stop once the best three agree within 2% of the best, or once this
#: budget is spent (at least :data:`MIN_REPEATS` repeats are run). Measured
#: on mm_relu's course steps (n=128, kernels of 0.3 and 2.7 ms, 30 timings of each, with and
#: without a load on the same core): the figure reported varies from one timing to the next
#: as much with a budget of 80 ms as with 20 ms (p90/p10 of 1.04-1.14 when quiet; under
#: load, 1.5 for the 2.7 ms kernel whatever the budget): the spread comes from run-to-run
#: variation, not from too few repeats, so a longer budget would only delay the step's
#: runtime point. 12 ms against 20 ms (kernels of 3.5 and 0.48 ms, 30 timings each, twice,
#: alone and beside busy processes): p90/p10 1.00-1.16 for both budgets; on a busy machine
#: 12 ms ends the timings that do not settle sooner (median 23 -> 17 ms and 21 -> 13 ms),
#: on a quiet one the repeats agree before either budget ends (6-16 ms).
TARGET_SECONDS = 0.012
MIN_REPEATS = 3
#: the workloads' inputs and numpy's expected outputs, per (workload, sizes, seed): every
#: step of a session runs on the same inputs, so the float64 reference is computed once
_EXPECTED: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
_EXPECTED_SIZE = 4
#: numpy's reference time per (workload, sizes, BLAS threads), measured once per process
_NUMPY: dict[tuple, float] = {}
_LOCK = threading.Lock()


def measure_step(mod, workload: str | None, params: dict, *, func_name: str | None = None,
                 baseline=None, slot: Callable | None = None,
                 on_compiled: Callable[[], None] | None = None,
                 program_hash: str | None = None) -> dict:
    """Compile ``mod``, check its result, time it; the step dict (never raises for a bad
    program: failures are reported in the dict).

    ``workload`` names a preset (its numpy reference and random inputs are used); for a
    custom program pass ``None`` and ``baseline`` (the unscheduled module): its output on the
    same random inputs is the expected result. ``slot``: a context-manager factory holding
    the step's cores from the compile to the last timed run (see the module docstring).
    ``on_compiled()`` is called once the compile has ended (built or failed).
    ``program_hash``: ``mod``'s structural hash when the caller has it (else it is hashed).
    """
    with _held(slot) as cores:
        return _measure_step(mod, workload, params, func_name, baseline, on_compiled, cores,
                             program_hash)


@contextlib.contextmanager
def pinned_to(cores):
    """The calling thread runs only on ``cores`` meanwhile (Linux; nothing elsewhere, or
    when ``cores`` is empty or None)."""
    old = None
    if cores and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            old = os.sched_getaffinity(0)
            os.sched_setaffinity(0, list(cores))
    try:
        yield
    finally:
        if old is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, old)


def _measure_step(mod, workload, params, func_name, baseline, on_compiled=None,
                  cores=None, program_hash: str | None = None) -> dict:
    h = program_hash or structural_hash(mod)
    fname = func_name or mod.names()[0]
    try:
        rt, wall_ms = _timed_build(lambda: build(mod, target="llvm"), on_compiled)
    except Exception as e:  # noqa: BLE001 - a compile failure is shown on the step
        return empty_step(h, stage="compile", error=f"compile failed: {e}")
    split = compile_split(rt)
    # the program's own compile time, also when the build came from the engine's cache
    compile_ms = split["compile_ours_ms"] + split["compile_llvm_ms"] if split else wall_ms
    out = empty_step(h, stage="check", compile_ms=compile_ms, **split)
    # the loops LLVM vectorized on its own ([{"func", "loop", "lanes"}]: the program pane's
    # badges, engine.codegen.loop_lines)
    out["llvm_vectorized"] = list((rt.compile_stats or {}).get("llvm_vectorized") or [])
    inputs = _step_inputs(out, mod, fname, workload, params, baseline)
    if inputs is None:
        return out
    # (the checked run and the timed runs are in the slot too, on its cores: the checked
    # run of a slow step is its time, and a multi-second run on a shared core would halve a
    # parallel kernel's speed)
    with pinned_to(cores):
        done = _check_and_time(rt, fname, out, inputs, workload, params)
    if done:
        out["stage"] = "done"
        out["ok"] = out["correct"] is not False
    return out


def _timed_build(build_it: Callable[[], Any], on_compiled: Callable[[], None] | None
                 ) -> tuple[Any, float]:
    """``build_it()`` and its wall-clock milliseconds; ``on_compiled()`` is called when the
    build has ended, built or failed."""
    t0 = time.perf_counter()
    try:
        rt = build_it()
    finally:
        if on_compiled is not None:
            on_compiled()
    return rt, (time.perf_counter() - t0) * 1e3


def _step_inputs(out: dict, mod, fname: str, workload, params, baseline) -> Inputs | None:
    """A step's inputs — the workload's, else random ones for the program (``baseline``'s
    outputs its reference) — or None with ``out``'s error saying why they could not be made."""
    try:
        return (workload_inputs(workload, params) if workload is not None
                else program_inputs(mod, fname, baseline))
    except Exception as e:  # noqa: BLE001
        out.update(error=f"could not prepare inputs: {e}")
        return None


def _held(slot: Callable | None):
    return slot() if slot is not None else contextlib.nullcontext()


def compile_split(rt) -> dict:
    """Where a build's time went: ours (lowering + LLVM IR generation) vs llvmlite's
    (the O3 pipeline + machine code), in ms, from ``Module.compile_stats``."""
    st = rt.compile_stats or {}
    if "lower" not in st:
        return {}
    return {"compile_ours_ms": (st.get("lower", 0.0) + st.get("codegen", 0.0)) * 1e3,
            "compile_llvm_ms": (st.get("llvm_opt", 0.0) + st.get("llvm_jit", 0.0)) * 1e3}


@dataclass(frozen=True)
class Inputs:
    """What a step runs on: every argument (outputs included), the expected result as a
    ``check_correctness`` reference over all arguments (None: nothing to compare with), and
    numpy's own code for the same computation with its inputs (None: no reference time)."""

    args: list
    expected: Callable | None
    numpy_fn: Callable | None = None
    numpy_args: tuple = ()


def workload_inputs(workload: str, params: dict, seed: int = 0) -> Inputs:
    """A preset workload's random arguments and numpy references.

    The check compares with ``engine.workloads.reference`` (float64 inside, for
    correctness); numpy's *time* is that of the float32 code a numpy user writes
    (``engine.workloads.numpy_style``: the correctness reference is twice as slow for a
    matmul).

    Every step of a session runs on the same inputs (same workload, sizes and seed), so the
    inputs and the reference's outputs are computed once per process and kept (the last
    few); ``expected`` compares with those outputs only when it is given those very inputs
    (anything else is computed afresh)."""
    key = (workload, tuple(sorted(params.items())), seed)
    with _LOCK:
        kept = _EXPECTED.get(key)
        if kept is not None:
            _EXPECTED.move_to_end(key)
    if kept is None:
        args = [np.asarray(a) for a in workloads.random_args(workload, seed, **params)]
        for a in args:
            a.setflags(write=False)       # kept: every use takes a copy
        kept = (args, {})
        with _LOCK:
            _EXPECTED[key] = kept
            while len(_EXPECTED) > _EXPECTED_SIZE:
                _EXPECTED.popitem(last=False)
    args, outputs = kept
    ref = workloads.reference(workload, **params)
    n_in = workloads.info(workload).num_inputs

    def expected(*arrays):
        inputs = arrays[:n_in]
        if all(np.array_equal(a, b) for a, b in zip(inputs, args[:n_in])):
            if "out" not in outputs:
                out = ref(*inputs)
                out = tuple(out) if isinstance(out, (tuple, list)) else out
                outputs["out"] = out
            return outputs["out"]
        return ref(*inputs)
    return Inputs([a.copy() for a in args], expected, workloads.numpy_style(workload, **params),
                  tuple(a.copy() for a in args[:n_in]))


def program_inputs(mod, fname: str, baseline=None) -> Inputs:
    """A pasted program's random arguments; its unscheduled self (``baseline``), compiled,
    is the expected result."""
    args = random_args(mod[fname])
    if baseline is None:
        return Inputs(args, None)
    reference = build(baseline, target="llvm")[fname]

    def run_baseline(*arrays):
        reference(*arrays)
    return Inputs(args, run_baseline)


def _check_and_time(rt, fname, out, inputs: Inputs, workload, params) -> bool:
    """Check ``rt`` against the reference and time it, filling ``out``; False on failure
    (``out["error"]`` says what failed)."""
    run_args = [a.copy() for a in inputs.args]
    first_run_s = None
    if inputs.expected is not None:
        try:
            rep = check_correctness(rt, fname, reference_fn=inputs.expected, args=run_args)
        except Exception as e:  # noqa: BLE001
            out.update(error=f"checking the result failed: {e}")
            return False
        first_run_s = rep.kernel_seconds
        out["correct"] = bool(rep.ok)
        out["max_abs_err"] = float(rep.max_abs_err)
        if not rep.ok:
            out["detail"] = str(rep.message) or "result differs from the reference"
    out["stage"] = "time"
    try:
        if first_run_s is not None and first_run_s > SLOW_RUN_S:
            # a slow step: its checked run is its time (more runs would only risk the
            # step time limit, and a second-long run does not need repeats)
            sec = first_run_s
            out["timed_runs"] = 1
        else:
            sec = time_kernel(rt, fname, run_args, first_run_s)
        out["time_ms"] = sec * 1e3
        if workload is not None:
            out["gflops"] = workloads.info(workload).flops(**params) / sec / 1e9
        if inputs.numpy_fn is not None:
            threads = kernel_threads(rt)
            out["numpy_ms"] = _numpy_seconds(inputs, workload, params, threads) * 1e3
            out["numpy_threads"] = threads
            out["numpy_note"] = numpy_threads_note(threads)
    except Exception as e:  # noqa: BLE001
        out.update(error=f"timing failed: {e}")
        return False
    return True


def _numpy_seconds(inputs: Inputs, workload, params, threads: int) -> float:
    """numpy's time for the same computation on ``threads`` BLAS threads (measured once per
    workload, sizes and thread count in this process)."""
    key = (workload, tuple(sorted(params.items())), threads)
    with _LOCK:
        got = _NUMPY.get(key)
    if got is None:
        with blas_threads(threads):
            got = time_python(lambda: inputs.numpy_fn(*inputs.numpy_args))
        with _LOCK:
            _NUMPY[key] = got
    return got


def time_kernel(rt, fname: str, args, first_run_s: float | None = None) -> float:
    """Best per-call seconds of a compiled function, repeated until stable
    (:func:`engine.runtime.timing.time_until_stable` within :data:`TARGET_SECONDS`).

    The best repeat, like numpy's reference (:func:`time_python`): on a small shared
    machine a repeat that overlaps another worker's compile runs up to 2x slower, and the
    median of a handful of repeats still picks that up, so the two figures would not
    compare like for like. ``first_run_s``: the time of a run just made (the checked run),
    which warmed the code and says how long a call takes; else one run is made first."""
    f = rt[fname]
    ptrs = f.pointers(tuple(args))
    call = f.call_pointers
    return time_until_stable(lambda: call(ptrs), first_s=first_run_s, budget=TARGET_SECONDS,
                             min_repeats=MIN_REPEATS)


def time_python(fn) -> float:
    """Best per-call seconds of a Python callable (numpy's reference), repeated until stable.

    numpy's BLAS runs several threads; on a loaded machine a call waits for its helper
    threads to be scheduled and can take 300x its steady-state time, so the minimum over
    repeats (after a warm-up), not the median, is the stable figure for the reference line.
    """
    # warm-up: first calls allocate, page in, start BLAS threads
    return time_until_stable(fn, warmups=2, budget=TARGET_SECONDS, min_repeats=MIN_REPEATS)


def kernel_threads(rt) -> int:
    """How many threads the compiled program runs on: the engine's pool size when it has
    parallel loops, else 1 — numpy's reference gets as many BLAS threads (like for like)."""
    if not (rt.compile_stats or {}).get("parallel_loops"):
        return 1
    return max(1, int(runtime_info().get("pool_size") or 1))


_BLAS_LOCAL = None


def _blas_local_setter():
    """OpenBLAS's per-thread ``openblas_set_num_threads_local`` from numpy's bundled BLAS
    (None when numpy uses another BLAS or an older OpenBLAS)."""
    global _BLAS_LOCAL
    if _BLAS_LOCAL is None:
        _BLAS_LOCAL = False
        try:
            libdir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
            for path in glob.glob(os.path.join(libdir, "*openblas*")):
                lib = ctypes.CDLL(path)
                fn = getattr(lib, "openblas_set_num_threads_local", None)
                if fn is not None:
                    fn.restype = ctypes.c_int
                    fn.argtypes = [ctypes.c_int]
                    _BLAS_LOCAL = fn
                    break
        except OSError:
            _BLAS_LOCAL = False
    return _BLAS_LOCAL or None


class blas_threads:
    """``with blas_threads(1):`` numpy's BLAS uses one thread in this thread only.

    numpy's reference is timed with as many BLAS threads as the kernel it is compared with
    uses (:func:`kernel_threads`): one for a program without ``parallel`` loops, the
    runtime pool's size otherwise (that timing holds every timing slot, so no other step
    runs meanwhile). With numpy's default threads on a small, shared machine a BLAS call
    can wait for helper threads that are busy elsewhere (a 0.04 ms matmul then took
    20-40 ms), and a serial kernel would be compared with a parallel BLAS.
    """

    def __init__(self, n: int):
        self.n = n
        self.prev = None

    def __enter__(self):
        fn = _blas_local_setter()
        if fn is not None:
            self.prev = fn(self.n)
        return self

    def __exit__(self, *exc):
        fn = _blas_local_setter()
        if fn is not None and self.prev is not None:
            fn(self.prev)
        return False


def numpy_threads_note(threads: int = 1) -> str:
    if _blas_local_setter() is None:
        return "default BLAS threads"
    return f"{threads} BLAS thread{'s' if threads != 1 else ''}"


# ---------------------------------------------------------------------------- GPU steps
#: a GPU step's emulated run is checked for data races (shadow arrays per shared and
#: written global buffer) when the workload has at most this many FLOPs: the check costs
#: 1-25x the run (a 1024 GEMM with shared tiles: 3 s instead of 0.1 s)
RACE_CHECK_MAX_FLOPS = 2 ** 28

NOT_A_GPU_PROGRAM = ("not a GPU program yet: no loop is bound to a thread axis — did you "
                     "forget to bind? Select a loop, split it, and bind its parts to "
                     "blockIdx.x and threadIdx.x")


def _has_bound_loop(mod, fname: str) -> bool:
    from engine.ir import For, ForKind, post_order_visit
    found: list = []
    post_order_visit(mod[fname], lambda n: found.append(n) if isinstance(n, For)
                     and n.kind is ForKind.THREAD_BINDING else None)
    return bool(found)


def measure_gpu_step(mod, workload: str | None, params: dict, target: str, *,
                     func_name: str | None = None, baseline=None,
                     on_compiled: Callable[[], None] | None = None,
                     program_hash: str | None = None) -> dict:
    """One explorer step for a GPU ``target`` (``"cuda -model=h100-sxm"``): build it with
    ``engine.gpu.build_gpu``, run it on the GPU when this machine has one, else in the
    emulator (checked for races when small enough: :data:`RACE_CHECK_MAX_FLOPS`), compare
    with the workload's numpy reference, and time it — measured with events on a GPU,
    the analytic model's time for the target's GPU always (``model``). Never raises for a
    bad program: the step dict says what failed.

    The dict has the CPU step's fields (``time_ms`` is the measured time on a GPU, else the
    modeled one) and ``target``, ``gpu`` (the spec's short name), ``gpu_name``,
    ``time_kind`` ("measured"/"modeled"), ``device`` (the driver's sentence), ``model``
    (time, GFLOP/s, bottleneck, DRAM/L2 bytes, per kernel pipes and occupancy, the
    summary's lines), ``resources`` (per kernel: grid, block, registers, shared bytes,
    spills, occupancy), ``race_checked``; a program with no bound loop, or not made of kernels
    yet (``engine.gpu.lower.NotAKernelYet``: a stage outside the kernels, a loop around the
    bound ones) is ``not_gpu`` (the sentence), settled, with no time; a race found by the
    emulator is ``race`` too (:func:`race_fields`)."""
    from engine.gpu.build import build_gpu
    from engine.gpu.lower import NotAKernelYet
    from engine.gpu.target import Target
    h = program_hash or structural_hash(mod)
    fname = func_name or mod.names()[0]
    try:
        tgt = Target(target)
    except Exception as e:  # noqa: BLE001 - the server sends only its own strings
        if on_compiled is not None:
            on_compiled()
        return empty_step(h, stage="compile", error=f"unknown target: {e}")
    spec = tgt.spec
    gpu_fields = {"target": target, "gpu": spec.name, "gpu_name": spec.display_name}
    if not _has_bound_loop(mod, fname):
        if on_compiled is not None:
            on_compiled()
        return empty_step(h, stage="done", ok=True, not_gpu=NOT_A_GPU_PROGRAM, **gpu_fields)
    try:
        rt, compile_ms = _timed_build(lambda: build_gpu(mod, tgt), on_compiled)
    except NotAKernelYet as e:
        # a state on the way to a GPU program (a stage not computed in a kernel yet, a
        # loop around the bound ones): said as step 0's "not a GPU program yet", not failed
        return empty_step(h, stage="done", ok=True,
                          not_gpu=f"not a GPU program yet: {_without_function(str(e))}",
                          **gpu_fields)
    except Exception as e:  # noqa: BLE001 - a refusal at build is shown on the step
        return empty_step(h, stage="compile", error=f"refused at build: {e}", **gpu_fields)
    out = empty_step(h, stage="check", compile_ms=compile_ms, **gpu_fields)
    try:
        return _check_and_model_gpu(rt, out, mod, fname, workload, params, baseline)
    finally:
        # ptxas's figures (build_gpu ran it in the background, beside the emulator)
        try:
            out["resources"] = _gpu_resources(rt)
            if rt.assembly_error:
                out["assembly_error"] = rt.assembly_error
        except Exception as e:  # noqa: BLE001
            out["assembly_error"] = f"reading ptxas's report failed: {e}"


def is_board_target(target: str | None) -> bool:
    """True for a target string naming another CPU than this one (an ARM board: the
    engine's ``engine.codegen.machine``), False for this machine's CPU and for GPUs."""
    from engine.codegen.machine import NAMED_MACHINES, TargetStringError, parse_machine
    if not isinstance(target, str) or not (target.split()[0:1] == ["llvm"]
                                           or target.strip() in NAMED_MACHINES):
        return False
    try:
        return parse_machine(target) is not None
    except TargetStringError:
        return False


#: the emulated runs of a board's step aim at this many seconds of timed calls (qemu runs
#: AArch64 code at roughly half a GFLOP/s on this kind of machine), between 1 and
#: BOARD_MAX_REPEAT calls
BOARD_TIMED_SECONDS = 0.05
BOARD_ASSUMED_FLOPS = 5e8
BOARD_MAX_REPEAT = 50
#: the wall-clock limit of one emulated run
BOARD_RUN_TIMEOUT_S = 60.0
#: the runtime plot's label of an emulated time (app.web.targets.EMULATION_LABEL's words)
EMULATED_KIND = "emulated"


def measure_board_step(mod, workload: str | None, params: dict, target: str, *,
                       func_name: str | None = None, baseline=None,
                       on_compiled: Callable[[], None] | None = None,
                       program_hash: str | None = None) -> dict:
    """One explorer step for an ARM board (``"llvm -mtriple=aarch64-linux-gnu"``): built
    for the board by ``engine.build`` (LLVM's AArch64 backend), linked with the
    cross-compiled thread pool and called under ``qemu-aarch64`` on the workload's inputs
    (``engine.deploy.board.run_on_board``), compared with numpy, then called again a few
    times under the emulator for its time. Never raises for a bad program.

    The dict has the CPU step's fields — ``time_ms`` is the emulator's time per call — and
    ``target``, ``time_kind`` "emulated", ``emulator`` ("qemu-aarch64"), ``timed_runs``,
    ``link_ms`` and ``run_wall_ms`` (the link and the emulated run, wall clock); no numpy
    time (numpy runs on this machine's CPU, not under the emulator)."""
    h = program_hash or structural_hash(mod)
    fname = func_name or mod.names()[0]
    board = {"target": target, "time_kind": EMULATED_KIND, "emulator": "qemu-aarch64",
             "ran_on": "qemu-aarch64 emulator"}
    try:
        rt, compile_ms = _timed_build(lambda: build(mod, target=target), on_compiled)
    except Exception as e:  # noqa: BLE001 - a compile failure is shown on the step
        return empty_step(h, stage="compile", error=f"compile failed: {e}", **board)
    out = empty_step(h, stage="check", compile_ms=compile_ms, **board)
    inputs = _step_inputs(out, mod, fname, workload, params, baseline)
    if inputs is None:
        return out
    flops = None
    if workload is not None:
        flops = float(workloads.info(workload).flops(**params))
    repeat = BOARD_MAX_REPEAT if not flops else \
        max(1, min(BOARD_MAX_REPEAT, int(BOARD_TIMED_SECONDS * BOARD_ASSUMED_FLOPS / flops)))
    from engine.deploy.board import run_on_board
    run_args = [np.array(a, copy=True) for a in inputs.args]
    try:
        run = run_on_board(rt, fname, run_args, repeat=repeat, timeout=BOARD_RUN_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001 - the emulator's or the linker's sentence
        out.update(error=f"running under qemu-aarch64 failed: {e}")
        return out
    out.update(link_ms=run.link_s * 1e3, run_wall_ms=run.run_s * 1e3, timed_runs=repeat)
    if inputs.expected is not None:
        try:
            ok, max_abs, detail = _compare(run_args, inputs, mod[fname])
        except Exception as e:  # noqa: BLE001
            out.update(error=f"checking the result failed: {e}")
            return out
        out.update(correct=ok, max_abs_err=max_abs)
        if not ok:
            out["detail"] = detail or "result differs from the reference"
    if run.seconds_per_call:
        out["time_ms"] = run.seconds_per_call * 1e3
        if flops:
            out["gflops"] = flops / run.seconds_per_call / 1e9
    out["stage"] = "done"
    out["ok"] = out["correct"] is not False
    return out


def _without_function(text: str) -> str:
    """A lowering sentence without its "function 'main': " prefix (a session has one)."""
    head, sep, rest = text.partition(": ")
    return rest if sep and head.startswith("function '") else text


#: the emulator compiles a race-checked program of at most this many FLOPs at LLVM's -O0
#: (its compile was most of a small step's time: vector add 36 instead of 92 ms, GEMM n=128
#: 75 instead of 700 ms; the run 2-4 times slower, 28 ms for that GEMM), larger ones at -O3
EMULATOR_O0_MAX_FLOPS = 2 ** 25


def _check_and_model_gpu(rt, out: dict, mod, fname: str, workload, params, baseline) -> dict:
    """The GPU step after its build: run (GPU or emulator, race-checked when small),
    compare with numpy, model; fills and returns ``out``."""
    from engine.gpu.emulator import RaceError
    on_gpu, device = rt.device_status()
    out["device"] = device
    inputs = _step_inputs(out, mod, fname, workload, params, baseline)
    if inputs is None:
        return out
    flops = workloads.info(workload).flops(**params) if workload is not None else None
    race_check = not on_gpu and (flops is None or flops <= RACE_CHECK_MAX_FLOPS)
    opt_level = 0 if flops is not None and flops <= EMULATOR_O0_MAX_FLOPS else 3
    run_args = [a.copy() for a in inputs.args]
    if inputs.expected is not None:
        try:
            if race_check:
                rt[fname].check_args(tuple(run_args))
                rt.emulator(fname, check_races=True, opt_level=opt_level)(*run_args)
            else:
                rt[fname](*run_args)
        except RaceError as e:
            out.update(error=f"refused by the emulator's race check: {e}",
                       race=race_fields(e, mod[fname]))
            return out
        except Exception as e:  # noqa: BLE001
            out.update(error=f"running the kernels failed: {type(e).__name__}: {e}")
            return out
        try:
            ok, max_abs, detail = _compare(run_args, inputs, mod[fname])
        except Exception as e:  # noqa: BLE001
            out.update(error=f"checking the result failed: {e}")
            return out
        out["correct"] = ok
        out["max_abs_err"] = max_abs
        if not ok:
            out["detail"] = detail
    out["race_checked"] = race_check
    out["ran_on"] = f"GPU {device}" if on_gpu else "emulator"
    out["stage"] = "time"
    try:
        m = rt.model(fname)
        out["model"] = _gpu_model(m)
        out["modeled_ms"] = m.time_s * 1e3
        if on_gpu:
            res = rt.time_evaluator(fname, number=10, repeat=3)(*run_args)
            out["time_ms"] = res.median * 1e3
            out["time_kind"] = "measured"
        else:
            out["time_ms"] = m.time_s * 1e3
            out["time_kind"] = "modeled"
        if flops is not None:
            out["gflops"] = flops / (out["time_ms"] / 1e3) / 1e9
    except Exception as e:  # noqa: BLE001
        out.update(error=f"timing failed: {e}")
        return out
    out["stage"] = "done"
    out["ok"] = out["correct"] is not False
    return out


def race_fields(e, func) -> dict:
    """A :class:`engine.gpu.emulator.RaceError` as a step's ``race`` field: its sentence,
    buffer, element, the two threads and blocks, and the names of the program's blocks that
    read or write that buffer (what the explorer highlights when it withdraws the step)."""
    from engine.ir import BlockRealize, post_order_visit
    touching: list = []

    def visit(n):
        if isinstance(n, BlockRealize):
            b = n.block
            if any(r.buffer.name == e.buffer for r in (*b.reads, *b.writes)):
                touching.append(b.name_hint)
    post_order_visit(func, visit)
    return {"text": str(e), "kernel": e.kernel, "buffer": e.buffer, "scope": e.scope,
            "element": int(e.element), "threads": [list(t) for t in e.threads],
            "blocks_idx": [list(b) for b in e.blocks],
            "blocks": list(dict.fromkeys(reversed(touching)))}


def _compare(ran: list, inputs: Inputs, func) -> tuple[bool, float, str]:
    """The kernel's arrays ``ran`` against the reference run on fresh copies of the same
    inputs (``check_correctness``'s tolerances): ``(ok, max abs error, what differs)``."""
    from engine.runtime.correctness import DEFAULT_TOLERANCES
    theirs = [np.array(a, copy=True) for a in inputs.args]
    out = inputs.expected(*theirs)
    if out is not None:
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        theirs[len(theirs) - len(outs):] = [np.asarray(o) for o in outs]
    names = [getattr(p, "name", f"arg{i}") for i, p in enumerate(func.params)]
    max_abs, problems = 0.0, []
    for name, a, b in zip(names, ran, theirs):
        a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a64.shape != b64.shape or a64.size == 0:
            continue
        diff = np.abs(a64 - b64)
        r, at = DEFAULT_TOLERANCES.get(np.asarray(a).dtype.name, (0.0, 0.0))
        at = at * max(1.0, float(np.max(np.abs(b64))))
        max_abs = max(max_abs, float(diff.max()))
        bad = int(np.count_nonzero(diff > at + r * np.abs(b64)))
        if bad:
            idx = np.unravel_index(int(np.argmax(diff)), a64.shape)
            problems.append(f"{name}: {bad} of {a64.size} elements differ; worst at "
                            f"{tuple(int(i) for i in idx)}: got {a64[idx]:.6g}, expected "
                            f"{b64[idx]:.6g}")
    return not problems, max_abs, "; ".join(problems)


def _gpu_resources(rt) -> list:
    out = []
    for r in rt.resources():
        out.append({k: (list(v) if isinstance(v, tuple) else v) for k, v in r.items()})
    return out


#: the accesses of one kernel the step's result keeps (the memory pane's table), and the
#: characters of an access's flat index kept with it
MAX_ACCESSES = 64
MAX_INDEX_CHARS = 160


def _gpu_access(a) -> dict:
    """One :class:`engine.gpu.model.AccessModel` as plain data (the memory pane's row)."""
    return {"buffer": str(a.buffer), "kind": str(a.kind), "scope": str(a.scope),
            "sectors_per_request": float(a.sectors_per_request),
            "bytes_per_request": float(a.bytes_per_request),
            "efficiency": float(a.efficiency), "conflict_ways": float(a.conflict_ways),
            "wavefronts_per_request": float(a.wavefronts_per_request),
            "executions": float(a.executions), "vector_lanes": int(a.vector_lanes),
            "guarded": bool(a.guarded), "analysed": bool(a.analysed),
            "index": str(a.index)[:MAX_INDEX_CHARS]}


def _gpu_occupancy(o) -> dict | None:
    if o is None:
        return None
    return {"blocks_per_sm": int(o.active_blocks_per_sm),
            "warps_per_sm": int(o.active_warps_per_sm),
            "max_warps_per_sm": int(o.max_warps_per_sm),
            "warps_per_block": int(o.warps_per_block), "occupancy": float(o.occupancy),
            "limited_by": [str(x) for x in o.limited_by],
            "shared_bytes_per_block": int(o.shared_bytes_per_block)}


def _gpu_model(m) -> dict:
    """The analytic model as plain data (for the page now, and the memory pane later)."""
    kernels = []
    for k in m.kernels:
        kernels.append({
            "name": getattr(k, "name", None) or (k.kernel if isinstance(k.kernel, str) else
                                                 getattr(k.kernel, "name", "")),
            "time_s": k.time_s, "gflops": k.gflops, "bottleneck": str(k.bottleneck),
            "dram_bytes": k.dram_bytes, "l2_bytes": k.l2_bytes,
            "shared_wavefronts": k.shared_wavefronts,
            "time_s_per_pipe": {str(a): b for a, b in dict(k.time_s_per_pipe).items()}
            if isinstance(getattr(k, "time_s_per_pipe", None), dict) else None,
            "threads_per_block": k.threads_per_block, "blocks": k.blocks,
            "waves": k.waves, "registers_per_thread": k.registers_per_thread,
            "notes": [str(n) for n in (k.notes or ())][:8],
            "accesses": [_gpu_access(a) for a in tuple(k.accesses)[:MAX_ACCESSES]],
            "accesses_total": len(k.accesses),
            "occupancy": _gpu_occupancy(getattr(k, "occupancy", None)),
            "registers_from": str(getattr(k, "registers_from", "")),
            "flops": float(k.flops),
            "dram_bytes_per_buffer": {str(b): float(v) for b, v in
                                      dict(k.dram_bytes_per_buffer or {}).items()}})
    lines = m.summary() if callable(m.summary) else m.summary
    return {"time_s": m.time_s, "gflops": m.gflops, "bottleneck": str(m.bottleneck),
            "dram_bytes": m.dram_bytes, "l2_bytes": m.l2_bytes,
            "shared_wavefronts": m.shared_wavefronts, "gpu": str(m.gpu),
            "summary": [str(x) for x in list(lines)[:60]], "kernels": kernels}

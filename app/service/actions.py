"""What a measurement worker can do with a job: the engine actions, in the order a job lists.

* ``compile`` — build the module with the LLVM backend (compile time reported);
* ``check``   — run it on the workload's random inputs and compare with numpy
  (``engine.runtime.check_correctness``);
* ``time``    — its ``time_evaluator`` inside a core slot (the job's ``number``/``repeat``),
  plus numpy's own code for the same computation timed in the same slot;
* ``step``    — one explorer step as the panes show it (:func:`app.service.timing.measure_step`:
  compile, check, time, numpy's time, in the worker's core slots);
* ``run``     — call the compiled function once on random arrays (any program);
* ``source``  — the optimised LLVM IR and the assembly text;
* ``cache``   — the cache simulation (``engine.cache.simulate``), holding one slot;
* ``pattern`` — the access pattern of one loop iteration (``engine.cache.access_pattern``);
* ``roofline`` — the machine's peak GFLOP/s and memory bandwidth
  (``engine.roofline.machine_peaks``), measured while holding every core slot.

Each action takes the job's context (``ctx.job``: the job's fields; ``ctx.state``: what
earlier actions of the same job left, e.g. the module and its build; ``ctx.emit(**values)``:
results, sent at once so a later crash keeps them; ``ctx.timing_slot(n)``: hold n cores).
The heavy imports (numpy, llvmlite, the engine) happen here, when the forkserver preloads
the worker.
"""
from __future__ import annotations

import dataclasses
import os
import pickle
import time
from typing import Any, Callable

import numpy as np

from engine import cache, roofline, workloads
from engine.ir import For, ForKind, post_order_visit
from engine.runtime import build, check_correctness, random_arrays
from engine.schedule import Schedule, Trace
from engine.script import parse

from . import timing
from .protocol import loop_at

__all__ = ["ENGINE", "SOURCE_KINDS"]

SOURCE_KINDS = ("ll-opt", "asm")


def _load(ctx: Any):
    """The job's module and function name (parsed text, replayed trace, or a preset)."""
    if "mod" in ctx.state:
        return ctx.state["mod"], ctx.state["func_name"]
    job = ctx.job
    params = dict(job.get("params") or {})
    workload = job.get("workload")
    if job.get("module") is not None:
        # Pickled by the server itself from its own IRModule (never user bytes).
        mod = pickle.loads(job["module"])
    elif job.get("program"):
        mod = parse(job["program"])
    elif job.get("trace") is not None or job.get("token"):
        trace = (Trace.decode(job["token"]) if job.get("token")
                 else Trace.from_json(job["trace"]))
        if workload is None and trace.workload is not None:
            workload, params = trace.workload[0], dict(trace.workload[1] or params)
        base = workloads.get(workload, **params)
        sch = Schedule(base)
        trace.apply_to_schedule(sch)
        mod = sch.mod
    elif workload:
        mod = workloads.get(workload, **params)
    else:
        raise ValueError("the job names no program, trace or workload")
    func_name = job.get("func_name")
    if func_name is None and workload:
        func_name = workloads.info(workload).func_name
    if func_name is None:
        func_name = mod.names()[0]
    ctx.state.update(mod=mod, func_name=func_name, workload=workload, params=params)
    return mod, func_name


def _built(ctx):
    if "rt" not in ctx.state:
        mod, _ = _load(ctx)
        t0 = time.perf_counter()
        ctx.state["rt"] = build(mod)
        ctx.emit(compile_s=time.perf_counter() - t0)
    return ctx.state["rt"]


def _inputs(ctx) -> timing.Inputs:
    """The workload's random inputs (same seed every time) and numpy references."""
    _load(ctx)
    workload = ctx.state["workload"]
    if not workload:
        raise ValueError("correctness checks and timing need a named workload "
                         "(custom programs are compiled and shown, not run)")
    return timing.workload_inputs(workload, ctx.state["params"], int(ctx.job.get("seed", 0)))


def _cores(mod) -> int:
    """The cores a program's runs need: all of them with parallel loops, else one."""
    found: list = []
    for name in mod.names():
        post_order_visit(mod[name], lambda n: found.append(n) if isinstance(n, For)
                         and n.kind == ForKind.PARALLEL else None)
    return (os.cpu_count() or 1) if found else 1


def _plain(x: Any) -> Any:
    """Convert engine results (dataclasses, numpy scalars, objects) to JSON-able data."""
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return x if x == x and abs(x) != float("inf") else None
    if isinstance(x, np.generic):
        return _plain(x.item())
    if isinstance(x, np.ndarray):
        return _plain(x.tolist()) if x.size <= 64 else f"<array {x.shape} {x.dtype}>"
    if callable(getattr(x, "to_dict", None)) and not isinstance(x, type):
        return _plain(x.to_dict())
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if hasattr(x, "_asdict"):
        return _plain(x._asdict())
    if hasattr(x, "__dict__"):
        return {k: _plain(v) for k, v in vars(x).items() if not k.startswith("_")}
    return str(x)


def act_compile(ctx) -> None:
    _built(ctx)


def act_check(ctx) -> None:
    rt = _built(ctx)
    _, func_name = _load(ctx)
    inputs = _inputs(ctx)
    res = check_correctness(rt, func_name, inputs.expected, inputs.args)
    ctx.emit(correct=bool(res.ok), check=_plain(res))


def act_time(ctx) -> None:
    rt = _built(ctx)
    mod, func_name = _load(ctx)
    inputs = _inputs(ctx)
    job = ctx.job
    number, repeat = int(job.get("number", 3)), int(job.get("repeat", 3))
    flops = float(workloads.info(ctx.state["workload"]).flops(**ctx.state["params"]))
    ncores = _cores(mod)
    with ctx.timing_slot(ncores) as cores:
        timer = rt.time_evaluator(func_name, number=number, repeat=repeat,
                                  min_repeat_ms=float(job.get("min_repeat_ms", 0)))
        res = timer(*[a.copy() for a in inputs.args])
        # numpy's time for the same computation, measured in the same slot
        with timing.blas_threads(timing.kernel_threads(rt)):
            numpy_s = timing.time_python(lambda: inputs.numpy_fn(*inputs.numpy_args))
    ctx.emit(times=_plain(res), cores=cores, parallel=ncores > 1,
             gflops=flops / res.median / 1e9, numpy_s=numpy_s,
             numpy_gflops=flops / numpy_s / 1e9, flops=flops)


def act_step(ctx) -> None:
    """One explorer step exactly as the panes show it (:func:`app.service.timing.measure_step`);
    the compile and the runs hold the cores the program's timing needs (a program with
    parallel loops compiles its LLVM modules side by side on all of them)."""
    mod, func_name = _load(ctx)
    job = ctx.job
    baseline = pickle.loads(job["baseline"]) if job.get("baseline") is not None else None
    ncores = _cores(mod)
    res = timing.measure_step(mod, job.get("workload"), dict(job.get("params") or {}),
                              func_name=func_name, baseline=baseline,
                              timing_slot=lambda: ctx.timing_slot(ncores),
                              compile_slot=lambda: ctx.timing_slot(ncores))
    ctx.emit(step=_plain(res))


def act_run(ctx: Any) -> None:
    """Call the compiled function once on random arrays (any program, named workload or not).

    Used to try a custom program's kernel (and by tests: a kernel that reads far out of
    bounds must crash this worker, not the server)."""
    rt = _built(ctx)
    _, func_name = _load(ctx)
    fn = rt[func_name]
    arrays = random_arrays(fn.specs, int(ctx.job.get("seed", 0)))
    t0 = time.perf_counter()
    fn(*arrays)
    ctx.emit(ran_s=time.perf_counter() - t0)


def act_source(ctx: Any) -> None:
    rt = _built(ctx)
    cap = int(ctx.job.get("source_max_chars", 400_000))
    out = {}
    for kind in SOURCE_KINDS:
        try:
            text = rt.get_source(kind)
        except Exception as e:  # noqa: BLE001
            text = f"; {kind} is not available: {e}"
        if len(text) > cap:
            text = text[:cap] + f"\n; ... cut at {cap} characters ({len(text)} in all)\n"
        out[kind] = text
    ctx.emit(source=out)


def act_cache(ctx: Any) -> None:
    mod, func_name = _load(ctx)
    # one core of its own: the simulation is CPU-bound for seconds and must not share a
    # core with another worker's timing
    with ctx.timing_slot(1):
        res = cache.simulate(mod, func_name)
    ctx.emit(cache=_plain(res))


def act_pattern(ctx: Any) -> None:
    """Which elements one iteration of a loop touches (``engine.cache.access_pattern``);
    the loop is named by its post-order index among the function's ``For`` nodes."""
    mod, func_name = _load(ctx)
    idx = ctx.job.get("loop_index")
    loop = loop_at(mod[func_name], int(idx)) if idx is not None else None
    if loop is None:
        raise ValueError(f"this program has no loop number {idx}")
    res = cache.access_pattern(mod, func_name, loop, int(ctx.job.get("iteration") or 0))
    ctx.emit(pattern=_plain(res))


def act_roofline(ctx: Any) -> None:
    """The machine's roofs for the roofline view: ``engine.roofline.machine_peaks()``.

    Both kernels (an FMA-throughput loop and a streaming copy, written as engine TVMScript
    and compiled by the engine) run on every core, so the whole measurement holds every
    timing slot: no step is timed while the peaks are measured, and the peaks are not
    lowered by another worker's timing run. The engine caches the result for the process,
    so a worker measures the peaks at most once; the web app stores them under a fixed key
    (see :meth:`app.service.measurer.StepMeasurer.submit_roofline`) so they survive
    restarts.
    """
    with ctx.timing_slot(os.cpu_count() or 1):
        try:
            peaks = _plain(roofline.machine_peaks())
        except Exception as e:  # noqa: BLE001 - e.g. a kernel that gave non-finite values
            peaks = {"error": f"the machine's peaks could not be measured: {e}"}
    ctx.emit(roofline=peaks)


def warm_up() -> None:
    """Make the first job of a new worker as fast as the others: initialise LLVM, build the
    host's target machine and run the whole pipeline (lowering, code generation, O3,
    machine code) on a tiny kernel (a worker calls this once, before it says it is ready).

    The kernel is not loaded into a JIT: that would also start the parallel runtime's
    threads, and an idle worker is to stay a single thread (a worker killed while idle must
    be gone, descriptors and all, as soon as it shows as dead). Never raises: a failure here
    shows up, with its message, in the first job that compiles."""
    try:
        from engine.codegen.llvm import codegen_units
        from engine.codegen.target import host_target_machine, init_llvm
        from engine.codegen.units import compile_units, unit_texts
        from engine.lower import lower
        init_llvm()
        host_target_machine(3)
        func = parse(_WARM_UP_PROGRAM)["warm_up"]
        mods, _ = codegen_units([("warm_up", lower(func))])
        compile_units(unit_texts(mods, 3), 3, max_threads=1)
    except Exception:  # noqa: BLE001
        pass


_WARM_UP_PROGRAM = """
@T.prim_func
def warm_up(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in T.vectorized(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + T.float32(1)
"""


ENGINE: dict[str, Callable[[Any], None]] = {
    "step": act_step,
    "compile": act_compile, "run": act_run, "check": act_check, "time": act_time,
    "source": act_source, "cache": act_cache, "pattern": act_pattern,
    "roofline": act_roofline,
}

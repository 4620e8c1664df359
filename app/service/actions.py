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
* ``model``   — a model's stages run in the Relax virtual machine, checked against numpy,
  timed end to end and function by function (``engine.models.measure.measure_stages``),
  and its accuracy on the test images;
* ``model_import`` — an uploaded ONNX file read, bounded and folded
  (``engine.models.zoo.onnx_graph``) and run once in numpy on its test input: the graph as
  plain data (``graph_to_doc``) and the reference output, for the server to check and keep;
* ``roofline`` — the machine's peak GFLOP/s and memory bandwidth
  (``engine.roofline.machine_peaks``), measured while holding every core slot.
* ``export``  — a model's library for a target (``engine.deploy.export_library``): the
  files, base64, for the model page's Export and its "Run in your browser";
* ``tune``    — a search with ``engine.tune`` from a gallery program's step (the Tune tab),
  or, when the job carries a model's functions, one search per function shape in turn
  (the model page's "tune every function"); progress is emitted as it goes.

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
import threading
import time
from typing import Any, Callable

import numpy as np

from engine import cache, roofline, workloads
from engine.codegen.loop_lines import without_marks
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
        sch = Schedule(base, seed=0)  # as the web pages replay: the same decisions
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
        target = ctx.job.get("target")
        if timing.is_board_target(target):   # an ARM board: AArch64 objects, its assembly
            ctx.state["rt"] = build(mod, target=target)
        elif target:                  # a GPU target: engine.gpu's build (PTX, CUDA C, ptxas)
            from engine.gpu.build import build_gpu
            ctx.state["rt"] = build_gpu(mod, target)
        else:
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
    if job.get("target"):
        # an ARM board's step: built for aarch64, checked and timed under qemu-aarch64 (the
        # emulator runs the thread pool's threads on the host's); a GPU step: built for the
        # target's GPU, run in the emulator (or on the GPU), checked, modeled. One core each
        measure = timing.measure_board_step if timing.is_board_target(job["target"]) \
            else timing.measure_gpu_step
        with ctx.timing_slot(1, pin=False):
            res = measure(mod, job.get("workload"), dict(job.get("params") or {}),
                          job["target"], func_name=func_name, baseline=baseline,
                          on_compiled=lambda: ctx.emit(compiled=True),
                          program_hash=job.get("program_hash"))
        ctx.emit(step=_plain(res))
        return
    ncores = _cores(mod)
    # (the end of the compile is said at once: a cache simulation waiting in the queue
    # starts then, see app.service.queue)
    res = timing.measure_step(mod, job.get("workload"), dict(job.get("params") or {}),
                              func_name=func_name, baseline=baseline,
                              slot=lambda: ctx.timing_slot(ncores, pin=False),
                              on_compiled=lambda: ctx.emit(compiled=True),
                              program_hash=job.get("program_hash"))
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


GPU_SOURCE_KINDS = ("cuda", "ptx", "resources")


def _gpu_resources_text(rt) -> str:
    """ptxas's resource line per kernel (registers, shared bytes, spills, occupancy) and
    the host side's launches (grid, block, shared bytes)."""
    lines = [f"// ptxas for {rt.target.arch} ({rt.target.spec.display_name})"]
    if rt.assembly_error:
        lines.append(f"// ptxas did not run: {rt.assembly_error}")
    for r in rt.resources():
        regs = r["registers"]
        spills = (f"{r['spill_stores']} bytes spill stores, {r['spill_loads']} bytes spill "
                  "loads" if r["spill_stores"] is not None else "spills unknown")
        limited = ", ".join(r["occupancy_limited_by"] or ()) or "-"
        lines.append(f"{r['kernel']}: {regs if regs is not None else '?'} registers, "
                     f"{r['shared_bytes']} bytes smem, {spills}; occupancy "
                     f"{r['occupancy']:.0%} (limited by {limited})")
    lines.append("")
    lines.append(rt.get_source().rstrip("\n"))
    return "\n".join(lines) + "\n"


def act_source(ctx: Any) -> None:
    rt = _built(ctx)
    cap = int(ctx.job.get("source_max_chars", 400_000))
    out = {}
    if ctx.job.get("target") and not timing.is_board_target(ctx.job["target"]):
        for kind in GPU_SOURCE_KINDS:
            try:
                text = (_gpu_resources_text(rt) if kind == "resources"
                        else rt.imported_modules[0].get_source(kind))
            except Exception as e:  # noqa: BLE001
                text = f"// {kind} is not available: {e}"
            if len(text) > cap:
                text = text[:cap] + f"\n// ... cut at {cap} characters ({len(text)} in all)\n"
            out[kind] = text
        ctx.emit(source=out)
        return
    for kind in SOURCE_KINDS:
        try:
            text = rt.get_source(kind)
            if kind.startswith("ll"):
                # without the debug locations that name each instruction's loop (the
                # engine's marks, engine.codegen.loop_lines): not the learner's code
                text = without_marks(text)
        except Exception as e:  # noqa: BLE001
            text = f"; {kind} is not available: {e}"
        if len(text) > cap:
            text = text[:cap] + f"\n; ... cut at {cap} characters ({len(text)} in all)\n"
        out[kind] = text
    ctx.emit(source=out)


#: how much lower the CPU priority of a cache simulation is (the nice increment of the
#: thread that runs it): what the learner waits for first — the server's answer, the
#: runtime point — gets the cores before the simulation does when they compete (the
#: server and two workers on a 2-core machine). A browser in another session is another
#: scheduling group (Linux's autogroups): niceness does not rank the simulation below it.
BACKGROUND_NICE = 10


def in_background(fn: Callable[[], Any]) -> Any:
    """``fn()`` in a thread of its own at a lower CPU priority (nice +:data:`BACKGROUND_NICE`;
    on Linux a nice value is per thread, so the worker's own thread keeps its priority:
    lowering it back would need a privilege). The thread inherits the caller's cores (a
    slot's pinning). ``fn``'s exception is raised here."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid,
                           min(19, os.getpriority(os.PRIO_PROCESS, tid) + BACKGROUND_NICE))
        except (AttributeError, OSError):     # not Linux, or refused: normal priority
            pass
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            box["error"] = e

    t = threading.Thread(target=run, name="background", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def act_cache(ctx: Any) -> None:
    mod, func_name = _load(ctx)
    # a core slot of its own (no other worker's timed runs are counted on it), not pinned
    # to it: the simulation goes wherever a core is free (a pinned one waited for the
    # browser), at a lower priority than the page and the timed runs, which keep the core
    # they are pinned to when it lands there (it is the last point a click waits for)
    with ctx.timing_slot(1, pin=False):
        res = in_background(lambda: cache.simulate(mod, func_name))
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


def act_model(ctx: Any) -> None:
    """A model page's measurement: the job's ``module`` is a dict the server pickled
    itself (``stages``: [(label, IRModule)], ``x``, ``reference``, optional ``test_images``
    / ``test_labels``; see :meth:`app.service.measurer.StepMeasurer.submit_model`).  The
    timings hold the cores the modules' parallel loops need; numpy's reference code (the
    model's own forward pass) is recomputed here from ``reference_fn`` inputs."""
    from engine.models.measure import measure_stages
    from engine.models.mlp import forward

    from engine.relax.frontend.graph import evaluate

    doc = pickle.loads(ctx.job["module"])   # pickled by the server itself, never user bytes
    stages = doc["stages"]
    weights, graph = doc.get("mlp_params"), doc.get("graph")
    x = doc["x"]
    numpy_fn = None
    if weights is not None:
        numpy_fn = lambda: forward(weights, x)  # noqa: E731 - the model's numpy code
    elif graph is not None:
        feeds = {next(iter(graph.inputs)): x}
        numpy_fn = lambda: evaluate(graph, feeds)  # noqa: E731
    ncores = max(_cores(mod) for _, mod in stages)
    res = measure_stages(stages, x, doc["reference"], numpy_fn=numpy_fn,
                         number=int(ctx.job.get("number", 3)),
                         repeat=int(ctx.job.get("repeat", 3)),
                         timing_slot=lambda: ctx.timing_slot(ncores),
                         test_images=doc.get("test_images"), test_labels=doc.get("test_labels"))
    ctx.emit(model=_plain(res))


def act_model_import(ctx: Any) -> None:
    """An uploaded model, read here and never in the server: the job's ``module`` is a
    dict the server pickled itself (``onnx``: the file's bytes, ``limits``: the fields of
    :class:`engine.relax.frontend.OnnxLimits`). The file is read within those limits (its
    counts checked before anything is allocated; this worker's memory and time limits
    behind them), its constant calls folded, and its forward pass run once in numpy on
    its test input (:func:`engine.models.zoo.test_input`): emits ``model_import`` with
    the graph as plain data and that reference output."""
    from engine.models.zoo import onnx_graph, test_input
    from engine.relax.frontend import OnnxLimits, graph_to_doc
    from engine.relax.frontend.graph import evaluate

    from .protocol import array_doc

    doc = pickle.loads(ctx.job["module"])   # pickled by the server itself; the bytes are data
    graph = onnx_graph(doc["onnx"], OnnxLimits(**doc["limits"]))
    (name, (shape, _)), = graph.inputs.items()
    reference = np.asarray(evaluate(graph, {name: test_input(shape)})[0], dtype="float32")
    ctx.emit(model_import={"graph": graph_to_doc(graph), "reference": array_doc(reference)})


#: the largest library a worker sends back (its bytes, before base64)
EXPORT_MAX_BYTES = 48 * 2**20


def act_export(ctx: Any) -> None:
    """A model page's deployable library: the job's ``module`` is a dict the server pickled
    itself (``module``: the runnable Relax module of the page's validated state, weights
    bound; ``target``: None for this machine or a target string ``engine.deploy`` knows,
    e.g. ``"llvm -mtriple=aarch64-linux-gnu"`` or ``"wasm32"``; ``prefix``: the C names'
    prefix).  Built with ``relax.build`` and ``engine.deploy.export_library`` in a
    temporary folder of this worker; emits ``export`` with the files written (the library
    and its header, base64) and the target's name."""
    import base64
    import tempfile

    from engine.deploy import export_library, get_target
    from engine.relax.vm import build as relax_build

    doc = pickle.loads(ctx.job["module"])   # pickled by the server itself, never user bytes
    target = get_target(doc.get("target"))
    prefix = str(doc.get("prefix") or "model")
    t0 = time.perf_counter()
    ex = relax_build(doc["module"], target="llvm")
    with tempfile.TemporaryDirectory(prefix="engine-export-") as tmp:
        path = os.path.join(tmp, prefix + target.library_suffix)
        export_library(ex, path, prefix=prefix, target=target)
        files = {}
        for name in sorted(os.listdir(tmp)):
            full = os.path.join(tmp, name)
            if os.path.isfile(full) and name.startswith(prefix + "."):
                if os.path.getsize(full) > EXPORT_MAX_BYTES:
                    raise ValueError(f"the library is over {EXPORT_MAX_BYTES} bytes")
                with open(full, "rb") as f:
                    files[name] = base64.b64encode(f.read()).decode("ascii")
    ctx.emit(export={"files": files, "target": target.name, "triple": target.triple,
                     "build_s": time.perf_counter() - t0})


def _trial_brief(rec: Any, workload: str | None) -> dict[str, Any]:
    """One tuning trial as the explorer's live view needs it (its trace as a URL token)."""
    try:
        token = Trace.from_json(rec.trace).encode()
    except Exception:  # noqa: BLE001 - a trace that cannot be written is shown without link
        token = None
    return {"trial": rec.trial, "source": rec.source, "seconds": rec.seconds,
            "gflops": rec.gflops, "correct": bool(rec.correct),
            "compile_ms": rec.compile_ms, "error": (rec.error or "")[:300] or None,
            "ok": bool(rec.ok), "token": token, "confirmed": bool(rec.confirmed)}


def act_tune(ctx: Any) -> None:
    """Tune the job's program from its trace (a fixed prefix) with ``ctx.job["tune"]``
    (space: "auto" or the clicked choices; trials; strategy; seed; database path): every
    trial is emitted as it ends (``t<k>``), with ``progress``; each timing holds every core's
    timing slot."""
    from engine.tune import Database, InlineRunner, tune  # noqa: PLC0415

    job = ctx.job
    spec = dict(job.get("tune") or {})
    if job.get("module") is not None:
        _tune_functions(ctx, spec)
        return
    workload, params = job.get("workload"), dict(job.get("params") or {})
    sch = Schedule(workloads.get(workload, **params), workload=(workload, params))
    if job.get("trace") is not None:
        Trace.from_json(job["trace"]).apply_to_schedule(sch)
    ncores = max(1, os.cpu_count() or 1)
    runner = InlineRunner(timing_guard=lambda: ctx.timing_slot(ncores))
    db = None
    if spec.get("database"):
        try:
            db = Database(spec["database"])
        except Exception:  # noqa: BLE001 - tune without reusing earlier runs
            db = None
    t0 = time.perf_counter()
    sent: dict[int, float | None] = {}   # trial -> the seconds the page was sent

    def brief(rec: Any) -> dict[str, Any]:
        sent[rec.trial] = rec.seconds
        return {f"t{rec.trial}": _trial_brief(rec, workload)}

    def progress(ev: Any) -> None:
        best = ev.best
        out = brief(ev.record)
        # the best, timed again since it was sent (a confirmation): sent again
        if best is not None and best.trial and sent.get(best.trial, best.seconds) != best.seconds:
            out.update(brief(best))
        ctx.emit(**out, progress={"done": ev.done, "total": ev.total,
                                  "elapsed": time.perf_counter() - t0, "eta": ev.eta,
                                  "numpy_seconds": ev.numpy_seconds,
                                  "best_trial": best.trial if best is not None else None})
    try:
        res = tune(sch, space=spec.get("space", "auto"), trials=int(spec.get("trials", 16)),
                   strategy=spec.get("strategy", "evolutionary"), seed=int(spec.get("seed", 0)),
                   runner=runner, database=db, on_progress=progress,
                   target=spec.get("target"))
    finally:
        if db is not None:
            db.close()
    retimed: dict[str, Any] = {}
    for rec in res.records:   # the candidates confirmed since they were sent
        if rec.trial in sent and sent[rec.trial] != rec.seconds:
            retimed.update(brief(rec))
    best = res.best
    ctx.emit(**retimed, tune_done={"trials": len(res.records), "elapsed": res.elapsed,
                                   "best_trial": best.trial if best is not None else None,
                                   "numpy_seconds": res.numpy_seconds,
                                   "prior": len(res.prior)})


def _tune_functions(ctx: Any, spec: dict) -> None:
    """A model's "tune every function": the job's ``module`` (pickled by the server itself)
    is ``{"functions": [{"name", "func", "members", "start", "recipe"}...]}``, one entry per
    distinct function shape. Each is searched in turn (``spec``'s space, trials, strategy,
    seed), its starting point (``start``: the trace the model link has for it, or the
    default recipe's when ``recipe``, or none) measured first and replaced only by a faster
    trace (the recipe, when nothing is faster, is the function's trace in the tuned link);
    ``f<i>`` is emitted as it goes: trials done of total, GFLOP/s at the start and best so
    far, and when it ends the best trace's token (or the reason it could not be tuned)."""
    from engine.ir import IRModule  # noqa: PLC0415
    from engine.tune import InlineRunner, tune  # noqa: PLC0415
    from engine.tune.measure import TaskContext  # noqa: PLC0415
    from engine.tune.task import task_of  # noqa: PLC0415

    doc = pickle.loads(ctx.job["module"])   # pickled by the server itself, never user bytes
    funcs = list(doc["functions"])
    trials = int(spec.get("trials", 16))
    ncores = max(1, os.cpu_count() or 1)
    runner = InlineRunner(timing_guard=lambda: ctx.timing_slot(ncores))
    t0 = time.perf_counter()
    status = [{"name": f["name"], "members": list(f.get("members") or [f["name"]]),
               "done": 0, "total": trials, "state": "waiting", "start_gflops": None,
               "start_seconds": None, "best_gflops": None, "best_seconds": None,
               "token": None, "error": None} for f in funcs]
    ctx.emit(**{f"f{i}": dict(st) for i, st in enumerate(status)},
             progress={"functions": len(funcs), "current": 0, "elapsed": 0.0})
    for i, entry in enumerate(funcs):
        st = status[i]
        name = entry["name"]
        mod = IRModule(((name, entry["func"]),))
        st["state"] = "tuning"
        ctx.emit(**{f"f{i}": dict(st)}, progress={"functions": len(funcs), "current": i,
                                                 "elapsed": time.perf_counter() - t0})
        try:
            # the link's own trace for it, or the default recipe: replaced only by faster
            own = entry.get("start") is not None
            start = entry.get("start") or Schedule(mod).trace.as_json()   # unscheduled
            task_ctx = TaskContext(task_of(mod, name, "start"))
            with ctx.timing_slot(ncores):
                first = task_ctx.time(task_ctx.build(start))
            if first.ok:
                st["start_seconds"], st["start_gflops"] = first.seconds, first.gflops

            def progress(ev: Any, i: int = i, st: dict = st) -> None:
                st["done"] = ev.done
                best = ev.best
                if best is not None and best.seconds != st["best_seconds"]:
                    st["best_seconds"], st["best_gflops"] = best.seconds, best.gflops
                    # kept at once, so a stop (or a crash) keeps what was found so far
                    st["token"] = (Trace.from_json(best.trace).encode()
                                   if _replaces(best.seconds, st["start_seconds"], own)
                                   else None)
                ctx.emit(**{f"f{i}": dict(st)},
                         progress={"functions": len(funcs), "current": i,
                                   "elapsed": time.perf_counter() - t0})
            res = tune(mod, space=spec.get("space", "auto"), trials=trials,
                       strategy=spec.get("strategy", "evolutionary"),
                       seed=int(spec.get("seed", 0)), func_name=name, runner=runner,
                       on_progress=progress)
            best = res.best
            st["token"] = None
            if best is None:
                errors = [r.error for r in res.records if r.error]
                st["error"] = ("no candidate compiled and matched the function's own result"
                               + (f" (last: {errors[-1][:200]})" if errors else ""))
            else:
                st["best_seconds"], st["best_gflops"] = best.seconds, best.gflops
                if _replaces(best.seconds, st["start_seconds"], own):
                    st["token"] = Trace.from_json(best.trace).encode()
                elif entry.get("recipe"):
                    # the default recipe is at least as fast: the link takes it
                    st["token"] = Trace.from_json(start).encode()
                    st["kept_recipe"] = True
                else:
                    st["kept"] = True   # the link's own trace is at least as fast: it stays
            st["state"] = "done"
        except Exception as e:  # noqa: BLE001 - one function's failure is shown with it
            st["state"] = "failed"
            st["error"] = f"{type(e).__name__}: {e}"[:300]
        ctx.emit(**{f"f{i}": dict(st)}, progress={"functions": len(funcs), "current": i + 1,
                                                 "elapsed": time.perf_counter() - t0})


def _replaces(seconds: float | None, start_seconds: float | None, own: bool) -> bool:
    """Does a found candidate replace the starting point? An unscheduled function always
    takes the search's best; a trace the link already had (the learner's) only gives way
    to a faster one."""
    return seconds is not None and (not own or start_seconds is None
                                    or seconds < start_seconds)


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
    try:   # a GPU step's modules (and the CUDA bindings' import, not the driver itself)
        import engine.gpu.build  # noqa: F401
        import engine.gpu.emulator  # noqa: F401
        import engine.gpu.model  # noqa: F401
        from cuda.bindings import driver  # noqa: F401
    except Exception:  # noqa: BLE001 - no CUDA wheels: the GPU steps say so
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
    "model": act_model, "model_import": act_model_import, "export": act_export,
    "step": act_step,
    "compile": act_compile, "run": act_run, "check": act_check, "time": act_time,
    "source": act_source, "cache": act_cache, "pattern": act_pattern,
    "roofline": act_roofline, "tune": act_tune,
}

"""Measuring one candidate: replay its trace, compile, check against numpy, time.

This is what a measuring process runs (the local runner's worker processes, a Dask worker,
the explorer's measurement workers); the search itself never compiles anything. A candidate
counts only when its result matches the reference on random inputs: the workload's numpy
reference (float64 inside), or for a program outside the gallery its own unscheduled
version, compiled.

Measuring is split in two so a runner can compile several candidates side by side and then
time them one at a time on quiet cores: :meth:`TaskContext.build` (replay, compile, check)
and :meth:`TaskContext.time` (the timed runs). Failures are reported in the
:class:`MeasureResult`, never raised.

Timing is the engine's one adaptive timing function
(:func:`engine.runtime.timing.time_until_stable`, also the explorer's): repeats stop as
soon as the best three agree, and a candidate much slower than the task's best so far is
run just twice. numpy's reference is timed the same way with more repeats, once per task
and process; the inputs and the expected outputs are also made once per task and process.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from engine import workloads
from engine.runtime import build, check_correctness, random_args
from engine.runtime.timing import SLOW_FACTOR, time_until_stable
from engine.schedule.param_layouts import changes_params, param_layouts, relaid

from .task import TuneTask

__all__ = ["MeasureResult", "TaskContext", "measure_inline", "time_callable", "adaptive_time",
           "SLOW_FACTOR"]

#: the earlier name of the one timing function (the tuner's candidates are timed as the
#: explorer's steps are)
adaptive_time = time_until_stable
#: timed repeats per candidate: at least MIN, at most MAX; the best one counts, and the
#: repeats stop by :func:`~engine.runtime.timing.time_until_stable`'s rule
MIN_REPEATS = 3
MAX_REPEATS = 15
#: at most this many seconds of timed runs per candidate (after the minimum repeats)
TIME_BUDGET = 0.4
#: SLOW_FACTOR (the timing function's): a candidate slower than SLOW_FACTOR x the best so
#: far is not timed at length: its rank is clear (its checked run is its time, or it gets
#: two runs)
#: the same for the checked run, a cold one (the first after compiling: it can take a few
#: times a warm run), so only a candidate this much slower keeps it as its time
CHECKED_SLOW_FACTOR = 10.0
#: numpy's reference is timed once per task, so with more repeats (in its favour)
NUMPY_MIN_REPEATS = 10
NUMPY_MAX_REPEATS = 40
#: kept for callers of the earlier name (the minimum number of repeats)
REPEATS = MIN_REPEATS


@dataclass
class MeasureResult:
    """One trial: ``seconds`` (best repeat, None if not timed), ``gflops``, ``correct``
    (matches the reference), ``compile_ms``, ``error`` (a sentence, None when fine)."""

    seconds: float | None = None
    gflops: float | None = None
    correct: bool = False
    compile_ms: float | None = None
    error: str | None = None
    #: how ``seconds`` was obtained when it is not a CPU timing: "measured on <GPU>" or
    #: "modeled for <GPU> (no GPU on this machine)" (GPU targets)
    note: str | None = None

    @property
    def ok(self) -> bool:
        return self.correct and self.seconds is not None and self.error is None

    def as_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "MeasureResult":
        return MeasureResult(seconds=d.get("seconds"), gflops=d.get("gflops"),
                             correct=bool(d.get("correct")), compile_ms=d.get("compile_ms"),
                             error=d.get("error"), note=d.get("note"))


@dataclass
class Built:
    """A compiled, checked candidate waiting to be timed."""

    result: MeasureResult
    rt: Any = None
    #: seconds of the checked run (a cold run: an upper bound of the kernel's time)
    checked_seconds: float | None = None
    #: the inputs in the layouts the candidate gives its parameters (None: the task's)
    args: list | None = None


class TaskContext:
    """Per-process state of one task: the program, the inputs, the expected outputs (made
    once), numpy's time. ``measure_fn`` (tests) replaces the timed run."""

    def __init__(self, task: TuneTask):
        self.task = task
        self.mod = task.module()
        self.flops = task.flops(self.mod)
        self._args: list | None = None
        self._expected: list | None = None
        self._numpy_seconds: float | None = None
        self.best_seconds: float | None = None  # the best timed so far (inline runner)

    # ------------------------------------------------------------------ inputs
    def args(self) -> list:
        if self._args is None:
            t = self.task
            if t.workload is not None:
                self._args = [np.asarray(a) for a in
                              workloads.random_args(t.workload, 0, **t.params)]
            else:
                self._args = random_args(self.mod[t.func_name])
        return self._args

    def expected(self) -> list:
        """The reference's value of every argument after the call (computed once)."""
        if self._expected is None:
            t = self.task
            arrays = [a.copy() for a in self.args()]
            if t.workload is not None:
                n_in = workloads.info(t.workload).num_inputs
                out = workloads.reference(t.workload, **t.params)(*arrays[:n_in])
                outs = list(out) if isinstance(out, (tuple, list)) else [out]
                arrays[len(arrays) - len(outs):] = [np.asarray(o) for o in outs]
            else:
                build(self.mod, target="llvm")[t.func_name](*arrays)
            self._expected = arrays
        return self._expected

    def numpy_seconds(self) -> float | None:
        """numpy's float32 time for the workload (None outside the gallery)."""
        if self.task.workload is None:
            return None
        if self._numpy_seconds is None:
            t = self.task
            fn = workloads.numpy_style(t.workload, **t.params)
            n_in = workloads.info(t.workload).num_inputs
            inputs = self.args()[:n_in]
            self._numpy_seconds = time_callable(lambda: fn(*inputs))
        return self._numpy_seconds

    # ------------------------------------------------------------------ phases
    def build(self, trace_doc: dict) -> Built:
        """Replay, compile and check one candidate (the result says what failed)."""
        if self.task.is_gpu:
            return self._build_gpu(trace_doc)
        res = MeasureResult()
        try:
            sch = self.task.replay(trace_doc, mod=self.mod)
        except Exception as e:  # noqa: BLE001 - reported with the trial
            res.error = f"the trace does not replay: {e}"
            return Built(res)
        try:
            t0 = time.perf_counter()
            rt = build(sch.mod, target="llvm")
            st = rt.compile_stats or {}
            res.compile_ms = float(st.get("total", time.perf_counter() - t0)) * 1e3
        except Exception as e:  # noqa: BLE001
            res.error = f"compile failed: {e}"
            return Built(res)
        try:
            args, expected = self._laid_out(sch)
        except ValueError as e:
            res.error = f"wrong result: {e}"
            return Built(res)
        run_args = [a.copy() for a in args]
        rep = check_correctness(rt, self.task.func_name, reference_fn=_fixed(expected),
                                args=run_args)
        res.correct = bool(rep.ok)
        if not rep.ok:
            res.error = f"wrong result: {rep.message}"
            return Built(res)
        return Built(res, rt, rep.kernel_seconds, None if args is self.args() else args)

    def _laid_out(self, sch: Any) -> tuple[list, list]:
        """The inputs and the expected values, each parameter the candidate re-lays out
        (``transform_layout`` of a parameter: its caller passes arrays of the new layout,
        as a model passes its constant weights) given that layout
        (:mod:`engine.schedule.param_layouts`)."""
        name = self.task.func_name
        before, after = self.mod[name], sch.mod[name]
        if not changes_params(before, after):
            return self.args(), self.expected()
        args, expected = list(self.args()), list(self.expected())
        for layout in param_layouts(before, name, sch.trace):
            buf = before.buffer_params[layout.position]
            i = next(n for n, p in enumerate(before.params) if p is buf)
            args[i], expected[i] = relaid(args[i], layout), relaid(expected[i], layout)
        return args, expected

    def time(self, built: Built, best_so_far: float | None = None) -> MeasureResult:
        """Time a built, correct candidate (:func:`time_until_stable`; ``best_so_far``: the
        task's best seconds yet, so a much slower candidate is not timed at length: one
        whose checked run already took over :data:`CHECKED_SLOW_FACTOR` x the best keeps
        that run's time, it is not run again)."""
        res = built.result
        if built.rt is None or not res.correct:
            return res
        if self.task.is_gpu:
            return self._time_gpu(built)
        checked = built.checked_seconds
        if checked is not None and best_so_far and checked > CHECKED_SLOW_FACTOR * best_so_far:
            # its checked run alone shows it is far from the best: not run again (a
            # candidate that recomputes a reduction per element can take seconds a run)
            return self._timed(res, checked)
        args = [a.copy() for a in (built.args if built.args is not None else self.args())]
        try:
            fn = built.rt[self.task.func_name]
            ptrs = fn.pointers(args)
            secs = time_until_stable(lambda: fn.call_pointers(ptrs), best_so_far,
                                     min_repeats=MIN_REPEATS, max_repeats=MAX_REPEATS,
                                     budget=TIME_BUDGET)
        except Exception as e:  # noqa: BLE001
            res.error = f"timing failed: {e}"
            return res
        return self._timed(res, secs)

    # ------------------------------------------------------------------ GPU targets
    def _build_gpu(self, trace_doc: dict) -> Built:
        """A GPU candidate: replayed, built for the task's CUDA target (lowering, PTX,
        ptxas when installed), run once on the GPU — or, without one, in the emulator, at
        full size — and compared with the reference."""
        from engine.gpu.build import build_gpu  # noqa: PLC0415
        res = MeasureResult()
        try:
            sch = self.task.replay(trace_doc, mod=self.mod)
        except Exception as e:  # noqa: BLE001 - reported with the trial
            res.error = f"the trace does not replay: {e}"
            return Built(res)
        try:
            t0 = time.perf_counter()
            rt = build_gpu(sch.mod, self.task.target)
            res.compile_ms = (time.perf_counter() - t0) * 1e3
        except Exception as e:  # noqa: BLE001 - BuildError: too many threads, shared memory
            res.error = f"compile failed: {e}"
            return Built(res)
        run_args = [a.copy() for a in self.args()]
        try:
            rt[self.task.func_name](*run_args)
        except Exception as e:  # noqa: BLE001
            res.error = f"running failed: {type(e).__name__}: {e}"
            return Built(res)
        problem = compare_outputs(run_args, self.expected())
        if problem:
            res.error = f"wrong result: {problem}"
            return Built(res)
        res.correct = True
        return Built(res, rt)

    def _time_gpu(self, built: Built) -> MeasureResult:
        """Kernel time on the GPU (CUDA events, the best of a few repeats), or without one
        the analytic model's time for the target's GPU (the note says which)."""
        res, rt, name = built.result, built.rt, self.task.func_name
        try:
            ok, why = rt.device_status()
            if ok:
                args = [a.copy() for a in self.args()]
                timing = rt.time_evaluator(name, number=10, repeat=3)(*args)
                seconds, res.note = float(timing.min), f"measured on {why}"
            else:
                seconds = float(rt.model(name).time_s)
                res.note = (f"modeled for {rt.target.spec.display_name} "
                            "(no GPU on this machine)")
        except Exception as e:  # noqa: BLE001
            res.error = f"timing failed: {e}"
            return res
        return self._timed(res, seconds)

    def _timed(self, res: MeasureResult, seconds: float) -> MeasureResult:
        res.seconds = seconds
        if self.flops:
            res.gflops = self.flops / seconds / 1e9
        return res


def compare_outputs(got: list, expected: list) -> str:
    """"" when every array of ``got`` matches ``expected`` within the tolerances of
    :func:`engine.runtime.check_correctness` (float32: rtol 1e-4, atol 1e-4 scaled by the
    largest expected magnitude), else what differs."""
    from engine.runtime.correctness import _tol  # noqa: PLC0415
    problems = []
    for n, (a, b) in enumerate(zip(got, expected)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            problems.append(f"argument {n}: shape {a.shape}, expected {b.shape}")
            continue
        if a.dtype == b.dtype and np.array_equal(a, b):
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if a.dtype.kind in "biu":
            bad = int(np.count_nonzero(a64 != b64))
            if bad:
                problems.append(f"argument {n}: {bad} of {a.size} elements differ")
            continue
        scale = float(np.nanmax(np.abs(b64))) if b64.size and np.any(np.isfinite(b64)) else 1.0
        r, at = _tol(a.dtype, None, None, scale)
        diff = np.abs(a64 - b64)
        bad = int(np.count_nonzero(~(diff <= at + r * np.abs(b64))))
        if bad:
            problems.append(f"argument {n}: {bad} of {a.size} elements outside rtol={r:g}, "
                            f"atol={at:g} (max abs err {float(np.nanmax(diff)):.3g})")
    return "; ".join(problems)


def _fixed(expected: list) -> Callable:
    """A ``check_correctness`` reference returning the precomputed value of every argument
    (returned arrays replace the last arguments, so all of them line up)."""
    return lambda *arrays: tuple(expected)


def time_callable(fn: Callable[[], Any]) -> float:
    """Best per-call seconds of a Python callable (numpy's reference): a few warm-up
    calls, then :func:`time_until_stable` with more repeats than a candidate gets."""
    return time_until_stable(fn, warmups=3, min_repeats=NUMPY_MIN_REPEATS,
                             max_repeats=NUMPY_MAX_REPEATS, budget=4 * TIME_BUDGET)


def measure_inline(ctx: TaskContext, trace_doc: dict,
                   best_so_far: float | None = None) -> MeasureResult:
    """Build, check and time one candidate in this process."""
    return ctx.time(ctx.build(trace_doc), best_so_far)

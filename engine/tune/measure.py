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
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from engine import workloads
from engine.runtime import build, check_correctness

from .task import TuneTask

__all__ = ["MeasureResult", "TaskContext", "measure_inline", "time_callable"]

#: a repeat of the timed runs lasts at least this long (many runs of a fast kernel)
REPEAT_SECONDS = 0.01
#: timed repeats per candidate (the best one counts)
REPEATS = 5


@dataclass
class MeasureResult:
    """One trial: ``seconds`` (best repeat, None if not timed), ``gflops``, ``correct``
    (matches the reference), ``compile_ms``, ``error`` (a sentence, None when fine)."""

    seconds: float | None = None
    gflops: float | None = None
    correct: bool = False
    compile_ms: float | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.correct and self.seconds is not None and self.error is None

    def as_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "MeasureResult":
        return MeasureResult(seconds=d.get("seconds"), gflops=d.get("gflops"),
                             correct=bool(d.get("correct")), compile_ms=d.get("compile_ms"),
                             error=d.get("error"))


@dataclass
class Built:
    """A compiled, checked candidate waiting to be timed."""

    result: MeasureResult
    rt: Any = None


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

    # ------------------------------------------------------------------ inputs
    def args(self) -> list:
        if self._args is None:
            t = self.task
            if t.workload is not None:
                self._args = [np.asarray(a) for a in
                              workloads.random_args(t.workload, 0, **t.params)]
            else:
                self._args = _random_args(self.mod, t.func_name)
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
        expected = self.expected()
        run_args = [a.copy() for a in self.args()]
        rep = check_correctness(rt, self.task.func_name, reference_fn=_fixed(expected),
                                args=run_args)
        res.correct = bool(rep.ok)
        if not rep.ok:
            res.error = f"wrong result: {rep.message}"
            return Built(res)
        return Built(res, rt)

    def time(self, built: Built) -> MeasureResult:
        """Time a built, correct candidate (best of :data:`REPEATS` repeats)."""
        res = built.result
        if built.rt is None or not res.correct:
            return res
        args = [a.copy() for a in self.args()]
        try:
            fn = built.rt[self.task.func_name]
            secs = _time_kernel(built.rt, self.task.func_name, args, fn)
        except Exception as e:  # noqa: BLE001
            res.error = f"timing failed: {e}"
            return res
        res.seconds = secs
        if self.flops:
            res.gflops = self.flops / secs / 1e9
        return res


def _fixed(expected: list) -> Callable:
    """A ``check_correctness`` reference returning the precomputed value of every argument
    (returned arrays replace the last arguments, so all of them line up)."""
    return lambda *arrays: tuple(expected)


def _random_args(mod, fname: str) -> list:
    rng = np.random.default_rng(0)
    out = []
    for p in mod[fname].params:
        shape = p.const_shape()
        if p.dtype.startswith("float"):
            out.append(rng.uniform(-1, 1, size=shape).astype(p.dtype))
        else:
            out.append(rng.integers(-8, 8, size=shape).astype(p.dtype))
    return out


def _time_kernel(rt, fname: str, args: list, fn) -> float:
    t0 = time.perf_counter()
    fn(*args)
    one = max(time.perf_counter() - t0, 1e-7)
    if one > 0.5:  # a slow candidate: one more run is its time
        t0 = time.perf_counter()
        fn(*args)
        return min(one, time.perf_counter() - t0)
    number = max(1, min(10_000, int(REPEAT_SECONDS / one)))
    return float(rt.time_evaluator(fname, number=number, repeat=REPEATS)(*args).min)


def time_callable(fn: Callable[[], Any]) -> float:
    """Best per-call seconds of a Python callable (numpy's reference), after a warm-up."""
    for _ in range(3):
        fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    number = max(1, min(1000, int(REPEAT_SECONDS / one)))
    best = float("inf")
    for _ in range(REPEATS + 2):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def measure_inline(ctx: TaskContext, trace_doc: dict) -> MeasureResult:
    """Build, check and time one candidate in this process."""
    return ctx.time(ctx.build(trace_doc))

"""Runners: where the tuner's candidates are compiled, checked and timed.

Every runner has the same face::

    results = runner.measure(task, trace_docs, on_result=None)   # -> [MeasureResult]
    runner.numpy_seconds(task)                                   # numpy's float32 time
    runner.close()                                               # or use it as a context

``on_result(i, result)`` is called as soon as candidate ``i``'s result is known (progress
bars, the explorer's live view). ``runner.confirm(task, trace_docs)`` times candidates
measured before again, side by side (the tuner settles who is fastest with it: on a shared
machine one measurement can be off by a third); the local and inline runners keep the last
candidates they timed compiled, so a confirmation does not compile them again.

* :class:`LocalRunner` (the default): worker processes on this machine. A batch is compiled
  side by side (one candidate per worker at a time), then the compiled candidates are timed
  one at a time while every other worker waits, so a timing has the cores to itself. A
  candidate that crashes its worker or runs over its time limit is recorded as failed and
  the worker replaced; the tuner carries on.
* :class:`InlineRunner`: everything in the calling process (no time limits); for a process
  that is already a sandbox (the explorer's measurement workers) and for quick tests.
* :class:`~engine.tune.dask_runner.DaskRunner`: the workers of a Dask cluster.
"""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections import OrderedDict
from multiprocessing.connection import Connection, wait
from typing import Callable

from .database import trace_digest
from .measure import Built, MeasureResult, TaskContext
from .search import replay_here
from .task import TuneTask

__all__ = ["Runner", "InlineRunner", "LocalRunner", "OnResult"]

OnResult = Callable[[int, MeasureResult], None]
#: times candidates, by index, in the given order: their results (None: give up)
TimeRound = Callable[[list[int]], "list[MeasureResult] | None"]

#: rounds of a confirmation (:meth:`Runner.confirm`)
CONFIRM_ROUNDS = 2
#: timed candidates a runner keeps compiled for a confirmation (per worker process)
KEEP_TIMED = 6


def _best_of_rounds(n: int, rounds: int, time_round: TimeRound) -> list[float | None] | None:
    """Each candidate's best seconds over ``rounds`` calls of ``time_round``, in
    alternating order; None when ``time_round`` gives up."""
    best: list[float | None] = [None] * n
    for r in range(rounds):
        order = list(range(n)) if r % 2 == 0 else list(range(n - 1, -1, -1))
        results = time_round(order)
        if results is None:
            return None
        for i, res in zip(order, results):
            if res.ok and (best[i] is None or res.seconds < best[i]):
                best[i] = res.seconds
    return best


class Runner:
    """The interface of a runner (see the module docstring)."""

    def measure(self, task: TuneTask, traces: list[dict],
                on_result: OnResult | None = None) -> list[MeasureResult]:
        raise NotImplementedError

    def numpy_seconds(self, task: TuneTask) -> float | None:
        raise NotImplementedError

    def confirm(self, task: TuneTask, traces: list[dict],
                rounds: int = CONFIRM_ROUNDS) -> list[float | None]:
        """Seconds of each candidate (measured before) timed again now: ``rounds`` rounds,
        each timing every candidate once, in alternating order (A B, then B A), so that a
        slow spell of the machine falls on all of them; the best of a candidate's rounds
        counts (None: it failed this time). Candidates the runner keeps compiled
        (:meth:`_kept_rounds`) are only timed; otherwise they are measured anew."""
        kept = self._kept_rounds(task, traces)
        if kept is not None:
            best = _best_of_rounds(len(traces), rounds, kept)
            if best is not None:
                return best
        return _best_of_rounds(len(traces), rounds,
                               lambda order: self.measure(task, [traces[i] for i in order]))

    def _kept_rounds(self, task: TuneTask, traces: list[dict]) -> "TimeRound | None":
        """A function timing the kept, compiled ``traces`` in a given order (its results,
        or None when one is no longer kept), or None when they are not all kept."""
        return None

    def replay(self, task: TuneTask, jobs: list[tuple], space=None) -> list[tuple] | None:
        """Run the search's jobs ``[(trace or None, seed)]`` (fresh samples of ``space``
        and mutated traces; the contract of :func:`engine.tune.search.replay_here`), or
        None: the search runs them itself."""
        return None

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class InlineRunner(Runner):
    """Compile, check and time in this process, one candidate after the other;
    ``timing_guard``: a context-manager factory held around each timing (the explorer's
    workers hold their cores' timing slot with it)."""

    def __init__(self, before_run: Callable[[dict], None] | None = None,
                 timing_guard: Callable | None = None):
        self.before_run = before_run
        self.timing_guard = timing_guard or contextlib.nullcontext
        self._contexts: dict[str, TaskContext] = {}
        self._timed: OrderedDict[str, Built] = OrderedDict()  # digest -> compiled, timed

    def _ctx(self, task: TuneTask) -> TaskContext:
        key = task.key()
        if key not in self._contexts:
            self._contexts = {key: TaskContext(task)}
            self._timed.clear()
        return self._contexts[key]

    def _keep(self, doc: dict, built: Built) -> None:
        digest = trace_digest(doc)
        self._timed[digest] = built
        self._timed.move_to_end(digest)
        while len(self._timed) > KEEP_TIMED:
            self._timed.popitem(last=False)

    def _kept_rounds(self, task, traces):
        ctx = self._ctx(task)
        builts = [self._timed.get(trace_digest(doc)) for doc in traces]
        if any(b is None for b in builts):
            return None

        def time_round(order: list[int]) -> list[MeasureResult]:
            out = []
            for i in order:
                with self.timing_guard():
                    out.append(ctx.time(builts[i]))
            return out
        return time_round

    def measure(self, task, traces, on_result=None):
        ctx = self._ctx(task)
        best = getattr(ctx, "best_seconds", None)
        out = []
        for i, doc in enumerate(traces):
            built = ctx.build(doc)
            if self.before_run is not None and built.rt is not None:
                self.before_run(doc)
            if built.rt is not None:
                with self.timing_guard():
                    res = ctx.time(built, best)
                if res.ok and (best is None or res.seconds < best):
                    best = ctx.best_seconds = res.seconds
                if res.ok:
                    self._keep(doc, built)
            else:
                res = built.result
            out.append(res)
            if on_result is not None:
                on_result(i, res)
        return out

    def numpy_seconds(self, task):
        ctx = self._ctx(task)
        ctx.args()
        with self.timing_guard():
            return ctx.numpy_seconds()


class _Worker:
    """One worker process (``python -m engine.tune.local_worker``) and its socket.

    Started as a fresh interpreter, not with multiprocessing: a script that calls
    ``tune()`` at its top level (no ``if __name__ == "__main__"``) is not run again in
    each worker."""

    def __init__(self, before_run):
        parent, child = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "engine.tune.local_worker", str(child.fileno())],
            pass_fds=(child.fileno(),), env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        child.close()
        self.conn = Connection(parent.detach())
        self.send(("hook", before_run))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, msg) -> bool:
        try:
            self.conn.send(msg)
            return True
        except (BrokenPipeError, OSError):
            return False

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        self.conn.close()

    def exit_note(self) -> str:
        try:
            code = self.proc.wait(2)
        except subprocess.TimeoutExpired:
            return "no reply"
        if code < 0:
            return f"killed by signal {-code}"
        return f"exit status {code}"


class LocalRunner(Runner):
    """Worker processes on this machine (see the module docstring).

    ``workers``: how many compile side by side (default: the number of cores);
    ``build_timeout`` / ``run_timeout``: seconds one candidate may take to compile and
    check / to be timed before its worker is killed; ``before_run``: a picklable function
    called in the worker with the candidate's trace document just before it is timed (tests
    use it to make a candidate crash or hang); ``build_guard`` / ``timing_guard``:
    context-manager factories held around the compile phase / the timing phase (the Dask
    runner's machine-wide locks: compiles share the machine, a timing has it alone).
    """

    def __init__(self, workers: int | None = None, build_timeout: float = 60.0,
                 run_timeout: float = 30.0, before_run: Callable[[dict], None] | None = None,
                 build_guard: Callable | None = None, timing_guard: Callable | None = None):
        self.n_workers = max(1, int(workers or os.cpu_count() or 1))
        self.build_timeout = float(build_timeout)
        self.run_timeout = float(run_timeout)
        self.before_run = before_run
        self.build_guard = build_guard or contextlib.nullcontext
        self.timing_guard = timing_guard or contextlib.nullcontext
        self._workers: list[_Worker | None] = [None] * self.n_workers
        self._next_id = 0
        self._best: tuple[str, float] | None = None  # (task key, best seconds timed)
        # candidates timed lately, still compiled in their worker (see local_worker):
        # digest -> (task key, worker, id), oldest first
        self._timed: OrderedDict[str, tuple[str, _Worker, int]] = OrderedDict()
        self._task_key: str | None = None

    # ------------------------------------------------------------------ workers
    def _worker(self, slot: int) -> _Worker:
        w = self._workers[slot]
        if w is None or not w.alive():
            if w is not None:
                w.kill()
            w = self._workers[slot] = _Worker(self.before_run)
        return w

    def _replace(self, slot: int) -> None:
        w = self._workers[slot]
        if w is not None:
            w.kill()
        self._workers[slot] = None

    def close(self) -> None:
        for slot, w in enumerate(self._workers):
            if w is not None:
                w.send(("stop",))
                try:
                    w.proc.wait(2)
                except subprocess.TimeoutExpired:
                    pass
                w.kill()
                self._workers[slot] = None

    # ------------------------------------------------------------------ replaying
    def replay(self, task, jobs, space=None):
        """The search's replays spread over the workers (idle while the search proposes):
        each worker replays a contiguous share; a share whose worker fails or is not
        answered in time is replayed here instead (the same results, only slower)."""
        if self.n_workers < 2 or len(jobs) < 2 * self.n_workers:
            return None  # not worth a round trip
        fresh = any(doc is None for doc, _ in jobs)
        if fresh and (space is None or not space.portable()):
            return None
        task_d = task.as_dict()
        k = -(-len(jobs) // self.n_workers)
        shares = [jobs[i:i + k] for i in range(0, len(jobs), k)]
        sent: set[int] = set()
        for slot, share in enumerate(shares):
            w = self._worker(slot)
            if w.send(("replay", task_d, share, space if fresh else None)):
                sent.add(slot)
            else:
                self._replace(slot)
        out: list[tuple] = []
        local = None
        for slot, share in enumerate(shares):
            got = None
            if slot in sent:
                w = self._workers[slot]
                try:
                    if w.conn.poll(self.build_timeout):
                        msg = w.conn.recv()
                        if msg[0] == "replayed" and len(msg[1]) == len(share):
                            got = [tuple(r) for r in msg[1]]
                except (EOFError, OSError):
                    pass
                if got is None:
                    self._replace(slot)
            if got is None:  # replayed here instead: same results, just slower
                if local is None:
                    local = task.module()
                got = replay_here(task, local, share, space)
            out.extend(got)
        return out

    # ------------------------------------------------------------------ measuring
    def numpy_seconds(self, task):
        w = self._worker(0)
        if not w.send(("numpy", task.as_dict())):
            self._replace(0)
            return None
        if not w.conn.poll(self.run_timeout * 4):
            self._replace(0)
            return None
        try:
            return w.conn.recv()[1]
        except (EOFError, OSError):
            self._replace(0)
            return None

    def _kept_rounds(self, task, traces):
        """The candidates timed lately are kept compiled in their workers: timed there."""
        key = task.key()
        held = [self._timed.get(trace_digest(doc)) for doc in traces]
        if any(h is None or h[0] != key or not any(x is h[1] for x in self._workers)
               for h in held):
            return None

        def time_round(order: list[int]) -> list[MeasureResult] | None:
            out = []
            with self.timing_guard():
                for i in order:
                    _, w, cid = held[i]
                    res = self._retime(w, cid)
                    if res is None:  # no longer kept, or the worker was lost
                        return None
                    out.append(res)
            return out
        return time_round

    def _retime(self, w: "_Worker", cid: int) -> MeasureResult | None:
        """Time candidate ``cid`` kept in worker ``w`` again (None: it is not kept, or the
        worker is lost, and then replaced)."""
        try:
            if w.alive() and w.send(("retime", cid)) and w.conn.poll(self.run_timeout):
                msg = w.conn.recv()
                return MeasureResult.from_dict(msg[2]) if msg[0] == "timed" else None
        except (EOFError, OSError):
            pass
        slot = next((k for k, x in enumerate(self._workers) if x is w), None)
        if slot is not None:
            self._replace(slot)
        return None

    def measure(self, task, traces, on_result=None):
        results: list[MeasureResult | None] = [None] * len(traces)
        key = task.key()
        if self._best is not None and self._best[0] != key:
            self._best = None

        def done(i: int, res: MeasureResult) -> None:
            results[i] = res
            if res.ok and (self._best is None or res.seconds < self._best[1]):
                self._best = (key, res.seconds)
            if on_result is not None:
                on_result(i, res)

        task_d = task.as_dict()
        self._task_key = key
        todo = list(range(len(traces)))
        retried: set[int] = set()
        while todo:
            with self.build_guard():
                held = self._build_phase(task_d, traces, todo, done)
            todo = []
            with self.timing_guard():
                lost = self._time_phase(traces, held, done)
            for i in lost:  # built in a worker that was lost before their turn: once more
                if i in retried:
                    done(i, MeasureResult(error="its worker process was lost twice (another "
                                                "candidate crashed it); not measured"))
                else:
                    retried.add(i)
                    todo.append(i)
        return [r if r is not None else MeasureResult(error="not measured") for r in results]

    def _build_phase(self, task_d, traces, todo, done) -> dict[int, list[tuple[int, int]]]:
        """Compile and check ``todo`` side by side; returns slot -> [(candidate, id)]."""
        queue = list(todo)
        busy: dict[int, tuple[int, int, float]] = {}   # slot -> (candidate, id, deadline)
        held: dict[int, list[tuple[int, int]]] = {}
        while queue or busy:
            for slot in range(self.n_workers):
                if slot in busy or not queue:
                    continue
                i = queue.pop(0)
                cid = self._next_id
                self._next_id += 1
                w = self._worker(slot)
                if not w.send(("build", task_d, cid, traces[i])):
                    self._replace(slot)
                    queue.insert(0, i)
                    continue
                busy[slot] = (i, cid, time.monotonic() + self.build_timeout)
            if not busy:
                continue
            timeout = max(0.0, min(d for _, _, d in busy.values()) - time.monotonic())
            conns = {self._workers[s].conn: s for s in busy}
            for conn in wait(list(conns), timeout):
                slot = conns[conn]
                i, cid, _ = busy.pop(slot)
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    note = self._workers[slot].exit_note()
                    done(i, MeasureResult(error=f"the candidate crashed its worker process "
                                                f"while compiling ({note})"))
                    for j, _ in held.pop(slot, []):
                        queue.append(j)
                    self._replace(slot)
                    continue
                res = MeasureResult.from_dict(msg[2])
                if res.correct and res.error is None:
                    held.setdefault(slot, []).append((i, cid))
                else:
                    done(i, res)
            now = time.monotonic()
            for slot, (i, cid, deadline) in list(busy.items()):
                if deadline <= now:
                    del busy[slot]
                    done(i, MeasureResult(error=f"compiling and checking took longer than "
                                                f"{self.build_timeout:g} s; stopped"))
                    for j, _ in held.pop(slot, []):
                        queue.append(j)
                    self._replace(slot)
        return held

    def _time_phase(self, traces, held, done) -> list[int]:
        """Time the held candidates one at a time; returns the candidates that were lost."""
        lost: list[int] = []
        for slot, items in held.items():
            for n, (i, cid) in enumerate(items):
                w = self._workers[slot]
                best = self._best[1] if self._best is not None else None
                if w is None or not w.send(("time", cid, best)):
                    lost.extend(j for j, _ in items[n:])
                    self._replace(slot)
                    break
                if not w.conn.poll(self.run_timeout):
                    done(i, MeasureResult(correct=True, error=f"the timed runs took longer "
                                                              f"than {self.run_timeout:g} s; "
                                                              "stopped"))
                    lost.extend(j for j, _ in items[n + 1:])
                    self._replace(slot)
                    break
                try:
                    msg = w.conn.recv()
                except (EOFError, OSError):
                    done(i, MeasureResult(correct=True, error=f"the candidate crashed its "
                                                              f"worker process while running "
                                                              f"({w.exit_note()})"))
                    lost.extend(j for j, _ in items[n + 1:])
                    self._replace(slot)
                    break
                res = MeasureResult.from_dict(msg[2])
                if res.ok:
                    self._note_timed(traces[i], w, cid)
                done(i, res)
        return lost

    def _note_timed(self, doc: dict, w: "_Worker", cid: int) -> None:
        """Remember where a timed candidate is kept compiled (its worker keeps its last
        :data:`KEEP_TIMED`: so does this list, per worker)."""
        digest = trace_digest(doc)
        self._timed[digest] = (self._task_key, w, cid)
        self._timed.move_to_end(digest)
        mine = [d for d, (_, x, _) in self._timed.items() if x is w]
        for d in mine[:-KEEP_TIMED]:
            del self._timed[d]

"""The main loop of a :class:`~engine.tune.runner.LocalRunner` worker process.

Messages (tuples over a pipe from the runner that started this process):

* ``("build", task, id, trace)`` -> ``("built", id, result)``: replay, compile and check
  one candidate; a correct one is kept, compiled, until its turn to be timed;
* ``("time", id[, best])`` -> ``("timed", id, result)``: time a kept candidate (``best``:
  the task's best seconds so far; a much slower candidate is timed briefly); the last
  :data:`~engine.tune.runner.KEEP_TIMED` timed ones stay compiled, for a confirmation:
* ``("retime", id)`` -> ``("timed", id, result)`` (timed at length), or ``("gone", id)``
  when it is no longer kept;
* ``("numpy", task)`` -> ``("numpy", seconds)``: numpy's float32 time for the task;
* ``("replay", task, jobs, space)`` -> ``("replayed", results)``: the search's fresh
  samples of ``space`` and mutated traces (:func:`engine.tune.search.replay_here`: each
  program's trace and features);
* ``("hook", fn)``: call ``fn(trace)`` before each timing (tests: a crash, a hang);
* ``("stop",)``: exit.

Run as ``python -m engine.tune.local_worker FD`` (FD: the socket to the runner).

Results travel as plain dicts (:meth:`MeasureResult.as_dict`).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

from .measure import Built, MeasureResult, TaskContext
from .runner import KEEP_TIMED
from .search import replay_here
from .task import TuneTask

__all__ = ["worker_main"]


def worker_main(conn: Any, before_run: Callable[[dict], None] | None = None) -> None:
    contexts: dict[str, TaskContext] = {}
    kept: dict[int, tuple[TaskContext, Built, dict]] = {}     # built, not timed yet
    timed: OrderedDict[int, tuple[TaskContext, Built, dict]] = OrderedDict()  # the last

    def context(task_d: dict) -> TaskContext:
        task = TuneTask.from_dict(task_d)
        key = task.key()
        if key not in contexts:
            contexts.clear()  # one task at a time: keep the memory of one program's inputs
            timed.clear()
            contexts[key] = TaskContext(task)
        return contexts[key]

    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        except Exception as e:  # noqa: BLE001 - a message that does not unpickle here
            conn.send(("error", f"{type(e).__name__}: {e}"))
            continue
        op = msg[0]
        if op == "stop":
            return
        if op == "hook":
            before_run = msg[1]
            continue
        if op == "build":
            _, task_d, cid, trace = msg
            try:
                ctx = context(task_d)
                built = ctx.build(trace)
            except Exception as e:  # noqa: BLE001 - the program itself cannot be prepared
                conn.send(("built", cid, MeasureResult(error=f"cannot prepare the program: "
                                                             f"{e}").as_dict()))
                continue
            if built.rt is not None:
                kept[cid] = (ctx, built, trace)
            conn.send(("built", cid, built.result.as_dict()))
        elif op == "time":
            ctx, built, trace = kept.pop(msg[1])
            if before_run is not None:
                before_run(trace)
            best = msg[2] if len(msg) > 2 else None
            res = ctx.time(built, best)
            if res.ok:
                timed[msg[1]] = (ctx, built, trace)
                while len(timed) > KEEP_TIMED:
                    timed.popitem(last=False)
            conn.send(("timed", msg[1], res.as_dict()))
        elif op == "retime":
            if msg[1] not in timed:
                conn.send(("gone", msg[1]))
                continue
            ctx, built, trace = timed[msg[1]]
            timed.move_to_end(msg[1])
            if before_run is not None:
                before_run(trace)
            conn.send(("timed", msg[1], ctx.time(built).as_dict()))
        elif op == "replay":
            _, task_d, jobs, space = msg
            try:
                ctx = context(task_d)
                out = replay_here(ctx.task, ctx.mod, jobs, space)
            except Exception as e:  # noqa: BLE001 - the runner replays them itself
                out = [(None, None, f"cannot prepare the program: {e}")] * len(jobs)
            conn.send(("replayed", out))
        elif op == "numpy":
            conn.send(("numpy", context(msg[1]).numpy_seconds()))


if __name__ == "__main__":
    import sys
    from multiprocessing.connection import Connection
    worker_main(Connection(int(sys.argv[1])))

"""Run a piece of work in a forked child and fail the test if it does not end.

For the regression tests of unbounded work (a link that kept the server busy for a
minute): the fixed code answers in milliseconds, the broken one would run for minutes or
exhaust the memory. Running it in a child keeps a regression from hanging the test session
or eating its memory: the child is killed at ``seconds`` (a generous hang guard, hundreds
of times what the fixed code takes — not a performance threshold) or beyond
``memory_bytes`` of address space, and the test fails saying so.
"""
from __future__ import annotations

import multiprocessing
import pickle
import resource
from typing import Any, Callable


def _child(conn, fn, args, memory_bytes):
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    try:
        out = ("ok", fn(*args))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        out = ("raised", f"{type(e).__name__}: {e}")
    try:
        conn.send_bytes(pickle.dumps(out))
    except Exception as e:  # noqa: BLE001 - an unpicklable result
        conn.send_bytes(pickle.dumps(("raised", f"unpicklable result: {e}")))
    conn.close()


def ends_within(seconds: float, fn: Callable[..., Any], *args: Any,
                memory_bytes: int | None = 3 << 30) -> Any:
    """``fn(*args)``'s result, computed in a forked child; an AssertionError when it has
    not ended after ``seconds`` or raised (its exception named)."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fn, args, memory_bytes), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(seconds):
            raise AssertionError(f"{getattr(fn, '__name__', fn)} did not end within "
                                 f"{seconds:g} s: its work is not bounded")
        kind, value = pickle.loads(parent.recv_bytes())
    except EOFError:
        raise AssertionError(f"{getattr(fn, '__name__', fn)} died (over "
                             f"{memory_bytes} bytes of memory?)") from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        parent.close()
    if kind != "ok":
        raise AssertionError(f"{getattr(fn, '__name__', fn)} raised {value}")
    return value

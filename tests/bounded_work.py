"""Run a piece of work and fail the test if it does not end.

For the regression tests of unbounded work (a link that kept the server busy for a
minute): the fixed code answers in milliseconds, the broken one would run for minutes.
The work runs in a daemon thread of the test process, and the test fails at ``seconds`` (a
generous hang guard, hundreds of times what the fixed code takes — not a performance
threshold), saying so; a regression's thread is left to the end of the session.

(A forked child would also bound the memory, but a fork of the test process, which other
tests leave with threads that may hold a lock at that moment, can hang on that lock.)
"""
from __future__ import annotations

import threading
from typing import Any, Callable


def ends_within(seconds: float, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``'s result; an AssertionError when it has not ended after ``seconds``
    or raised (its exception named)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - reported below
            out["error"] = f"{type(e).__name__}: {e}"

    worker = threading.Thread(target=run, name="bounded-work", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise AssertionError(f"{getattr(fn, '__name__', fn)} did not end within "
                             f"{seconds:g} s: its work is not bounded")
    if "error" in out:
        raise AssertionError(f"{getattr(fn, '__name__', fn)} raised {out['error']}")
    return out["value"]

"""Core slots: a timing never shares a core with anything else the pool runs.

One slot per core; a worker asks for one slot (or every slot, for a program with parallel
loops) before each CPU-heavy phase — the compile, the checked and timed runs of a step, a
cache simulation — and is pinned to the granted cores while it holds them. Requests are
served first come, first served.
"""
from __future__ import annotations

import collections
import os
import threading
from typing import Iterable

class TimingSlots:
    """One slot per core; a timing holds one slot (or all, for parallel code), FIFO-fair."""

    def __init__(self, cores: Iterable[int]):
        self.cores = sorted(set(cores)) or [0]
        self._free = list(self.cores)
        self._cond = threading.Condition()
        self._waiting: collections.deque = collections.deque()
        self._closed = False

    def acquire(self, n: int = 1, cancel: threading.Event | None = None) -> list[int] | None:
        """Block until ``n`` slots are free and this request is first in line; None if closed."""
        n = max(1, min(int(n), len(self.cores)))
        me = object()
        with self._cond:
            self._waiting.append(me)
            try:
                while True:
                    if self._closed or (cancel is not None and cancel.is_set()):
                        return None
                    if self._waiting[0] is me and len(self._free) >= n:
                        got, self._free = self._free[:n], self._free[n:]
                        return got
                    self._cond.wait(0.5)
            finally:
                self._waiting.remove(me)
                self._cond.notify_all()

    def try_acquire(self, n: int = 1) -> list[int] | None:
        """``n`` slots at once if they are free and no request is waiting (a request never
        jumps the line); else None, without waiting."""
        n = max(1, min(int(n), len(self.cores)))
        with self._cond:
            if self._closed or self._waiting or len(self._free) < n:
                return None
            got, self._free = self._free[:n], self._free[n:]
            return got

    def release(self, cores: list[int]) -> None:
        with self._cond:
            self._free.extend(c for c in cores if c not in self._free)
            self._free.sort()
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def free(self) -> int:
        with self._cond:
            return len(self._free)


def default_cores() -> list[int]:
    """The cores this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))

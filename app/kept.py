"""Values worked out once per object of the immutable IR, kept by the object's identity.

The IR never changes once built, so whatever is computed from one module object — its
structural hash, its pickled bytes, its printed text, its loop/block trees — holds for as long
as that object lives. A click asks for several of them more than once (its prefetched jobs,
its panes, the next click's diff): :class:`KeptByIdentity` keeps the last few, each with the
object itself, so that the object's ``id`` cannot be reused by another while it is kept.
"""
from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


class KeptByIdentity(Generic[V]):
    """The last ``size`` values of ``make(obj)`` by ``(id(obj), *extra)``; thread-safe (two
    threads asking for the same value at once may both make it: the later one is kept)."""

    def __init__(self, size: int):
        self.size = size
        self._kept: "collections.OrderedDict[tuple, tuple[Any, V]]" = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, obj: Any, make: Callable[[], V], *extra: Hashable) -> V:
        key = (id(obj), *extra)
        with self._lock:
            got = self._kept.get(key)
            if got is not None and got[0] is obj:
                self._kept.move_to_end(key)
                return got[1]
        value = make()
        with self._lock:
            self._kept[key] = (obj, value)
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return value

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)

"""Bounded, thread-safe keeping of values worked out once: :class:`Kept` by key (the last
``size`` used), and :class:`KeptByIdentity` for values computed from an object of the
immutable IR.

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


class Kept(Generic[V]):
    """The last ``size`` values put, by key (a value asked for moves to the back of the line
    of those to drop)."""

    def __init__(self, size: int):
        self.size = size
        self._kept: "collections.OrderedDict[Hashable, V]" = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            got = self._kept.get(key)
            if got is not None:
                self._kept.move_to_end(key)
            return got

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)


class KeptByIdentity(Generic[V]):
    """The last ``size`` values of ``make(obj)`` by ``(id(obj), *extra)``, each kept with
    ``obj``; thread-safe (two threads asking for the same value at once may both make it:
    the later one is kept)."""

    def __init__(self, size: int):
        self._kept: "Kept[tuple[Any, V]]" = Kept(size)

    def get(self, obj: Any, make: Callable[[], V], *extra: Hashable) -> V:
        key = (id(obj), *extra)
        got = self._kept.get(key)
        if got is not None and got[0] is obj:
            return got[1]
        value = make()
        self._kept.put(key, (obj, value))
        return value

    def __len__(self) -> int:
        return len(self._kept)

"""Bounded, thread-safe keeping of values worked out once: :class:`Kept` by key, and
:class:`KeptByIdentity` for values computed from an object of the immutable IR.

Every cache of the web process is bounded by **bytes**, not entries: what a request makes
(a program, its printed text, a drawn diagram) may be small or, from a hostile link, as
large as the limits allow, and a count of entries bounds neither. Each value is weighed
when it is put (``weigh``; :func:`weight` by default: text by its length, IR by its node
count, see :func:`ir_bytes`), at least :data:`MIN_WEIGHT` bytes each; the least recently
used go until the total is within ``max_bytes``; a value heavier than ``max_bytes`` alone
is not kept at all.

The IR never changes once built, so whatever is computed from one module object — its
structural hash, its pickled bytes, its printed text, its loop/block trees — holds for as long
as that object lives. A click asks for several of them more than once (its prefetched jobs,
its panes, the next click's diff): :class:`KeptByIdentity` keeps the last few, each with the
object itself, so that the object's ``id`` cannot be reused by another while it is kept (the
object's own weight counts too: keeping it keeps it alive).
"""
from __future__ import annotations

import collections
import threading
import weakref
from typing import Any, Callable, Generic, Hashable, TypeVar

V = TypeVar("V")

#: the least an entry weighs (its key, the dictionary slot, the bookkeeping)
MIN_WEIGHT = 256
#: bytes an IR node takes in memory, about (measured: 160 for the gallery's programs)
IR_NODE_BYTES = 200
_IR_COUNT_CAP = 1 << 22

KiB = 1024
MiB = 1024 * KiB


#: id(module) -> (a weak reference to it, its ir_bytes): each module is counted once
_SIZES: dict[int, tuple[Any, int]] = {}


def ir_bytes(obj: Any) -> int:
    """About how many bytes an IR object (an IRModule, a PrimFunc, or a Schedule: its
    module) holds: its nodes counted as a tree (an over-estimate where subtrees are
    shared) times :data:`IR_NODE_BYTES`; the count stops at 4 M nodes. Counted once per
    object (remembered while the object lives)."""
    from engine.ir.size import tree_size

    mod = getattr(obj, "mod", obj)
    key = id(mod)
    got = _SIZES.get(key)
    if got is not None and got[0]() is mod:
        return got[1]
    size = tree_size(mod, _IR_COUNT_CAP) * IR_NODE_BYTES
    try:   # the entry goes when the module does (before its id can be another's)
        ref = weakref.ref(mod, lambda _r, k=key: _SIZES.pop(k, None))
    except TypeError:
        return size
    _SIZES[key] = (ref, size)
    return size


def weight(value: Any) -> int:
    """Bytes of a kept value, about: text and bytes by their length, IR by
    :func:`ir_bytes`, lists and tuples by their items, anything else :data:`MIN_WEIGHT`."""
    if isinstance(value, (str, bytes, bytearray)):
        return len(value) + 64
    if isinstance(value, (list, tuple)):
        return 64 + sum(weight(v) for v in value)
    if isinstance(value, dict):
        return 64 + sum(weight(v) for v in value.values())
    kind = type(value).__name__
    if kind in ("IRModule", "PrimFunc", "Schedule"):
        return ir_bytes(value)
    return MIN_WEIGHT


class Kept(Generic[V]):
    """Values by key, the least recently used dropped beyond ``max_bytes`` in all (a value
    asked for moves to the back of the line of those to drop)."""

    def __init__(self, max_bytes: int, weigh: Callable[[Any], int] = weight):
        self.max_bytes = int(max_bytes)
        self._weigh = weigh
        self._kept: "collections.OrderedDict[Hashable, tuple[V, int]]" = \
            collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            got = self._kept.get(key)
            if got is None:
                return None
            self._kept.move_to_end(key)
            return got[0]

    def put(self, key: Hashable, value: V, nbytes: int | None = None) -> None:
        """Keep ``value`` (weighing ``nbytes``, else weighed now), unless it alone is over
        ``max_bytes``; the least recently used go until the rest fit."""
        size = max(MIN_WEIGHT, int(self._weigh(value) if nbytes is None else nbytes))
        with self._lock:
            old = self._kept.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if size > self.max_bytes:
                return
            self._kept[key] = (value, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._kept.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._bytes = 0

    @property
    def nbytes(self) -> int:
        """The weight of what is kept now."""
        with self._lock:
            return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)


class KeptByIdentity(Generic[V]):
    """Values of ``make(obj)`` by ``(id(obj), *extra)``, each kept with ``obj``, within
    ``max_bytes`` (the value's weight plus the object's: ``weigh(obj, value)``, by default
    :func:`weight` of both); thread-safe (two threads asking for the same value at once may
    both make it: the later one is kept)."""

    def __init__(self, max_bytes: int,
                 weigh: Callable[[Any, Any], int] | None = None):
        self._weigh = weigh or (lambda obj, value: weight(obj) + weight(value))
        self._kept: "Kept[tuple[Any, V]]" = Kept(max_bytes)

    def get(self, obj: Any, make: Callable[[], V], *extra: Hashable) -> V:
        key = (id(obj), *extra)
        got = self._kept.get(key)
        if got is not None and got[0] is obj:
            return got[1]
        value = make()
        self._kept.put(key, (obj, value), self._weigh(obj, value))
        return value

    @property
    def nbytes(self) -> int:
        return self._kept.nbytes

    def __len__(self) -> int:
        return len(self._kept)

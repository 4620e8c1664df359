"""A plain-Python reference model of the simulated hierarchy (slow, obviously correct).

It implements exactly the rules of the compiled simulator (:mod:`engine.cache.simcore`),
which are cachegrind's:

* every level is set-associative with true LRU replacement; the set of a line is
  ``line_number % sets`` (``line_number = address // line``);
* an access of ``nbytes`` bytes at ``address`` touches every line from
  ``address // line`` to ``(address + nbytes - 1) // line``; each touched line is one access
  to L1 (so a vector access counts once per cache line it touches);
* a line that misses in level *k* is looked up in level *k+1*; on a miss it is installed
  (as most recently used) in every level it missed in — loads and stores alike
  (write-allocate; stores update LRU like loads). There are no write-backs and no
  back-invalidation (levels are neither inclusive nor exclusive, as in cachegrind).

Used by the tests to check the compiled simulator on random access streams.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from .geometry import CacheLevel, validate_levels


class ReferenceLevel:
    """One LRU level: ``sets`` lists of line numbers, most recently used first."""

    def __init__(self, level: CacheLevel):
        self.level = level
        self.sets = [[] for _ in range(level.sets)]

    def access(self, line_no: int) -> bool:
        """Look ``line_no`` up; return True on a hit. Either way it becomes MRU."""
        s = self.sets[line_no % self.level.sets]
        if line_no in s:
            s.remove(line_no)
            s.insert(0, line_no)
            return True
        s.insert(0, line_no)
        if len(s) > self.level.ways:
            s.pop()
        return False


class ReferenceHierarchy:
    """Levels plus counters: ``accesses[k]``, ``misses[k]`` per level and per key (buffer)."""

    def __init__(self, levels: Sequence):
        self.levels = [ReferenceLevel(lv) for lv in validate_levels(levels)]
        self.line = self.levels[0].level.line
        n = len(self.levels)
        self.accesses = [0] * n
        self.misses = [0] * n
        self.per_key: dict = {}

    def access(self, address: int, nbytes: int = 4, key=None) -> None:
        """Simulate one access of ``nbytes`` at ``address`` (counted under ``key``)."""
        first = address // self.line
        last = (address + max(nbytes, 1) - 1) // self.line
        counts = self.per_key.setdefault(key, [[0, 0] for _ in self.levels])
        for line_no in range(first, last + 1):
            for k, lvl in enumerate(self.levels):
                self.accesses[k] += 1
                counts[k][0] += 1
                if lvl.access(line_no):
                    break
                self.misses[k] += 1
                counts[k][1] += 1

    def run(self, stream: Iterable) -> "ReferenceHierarchy":
        """Feed ``(address, nbytes[, key])`` tuples; returns self."""
        for item in stream:
            self.access(*item)
        return self

"""engine.cache — cache-behaviour measurement of compiled programs.

* :func:`simulate` — run an instrumented build of a program (same lowering and LLVM backend,
  one call of a compiled set-associative LRU simulator per memory access) and return a
  :class:`CacheReport`: accesses/hits/misses per level, per buffer and per block, loop
  footprints against each level's capacity, sampling note, hardware counters when the
  machine has them.
* Geometry: :func:`host_geometry` (from ``/sys``, sanity-checked, with stated fallbacks),
  explicit ``levels=[{"name": "L1", "size": 49152, "ways": 12, "line": 64}, ...]``;
  :class:`CacheConfigError` for geometry that cannot be simulated.
* :class:`StreamSimulator` — the compiled simulator on a recorded access stream;
  :class:`ReferenceHierarchy` — the same rules in plain Python (for tests).
* :func:`access_pattern` — which elements of each buffer one iteration of a loop touches,
  and in which order (first-touch time per element, for heatmaps/animations).
* :mod:`.hwcounters` — ``perf_event_open`` L1D/LLC miss counters.
"""
from .geometry import (DEFAULT_LEVELS, CacheConfigError, CacheLevel, Geometry, host_geometry,
                       resolve, validate_levels)
from .reference import ReferenceHierarchy
from .report import CacheReport, LevelStats
from .simcore import SimState, StreamSimulator
from .simulate import DEFAULT_MAX_ACCESSES, CacheSimError, simulate
from .footprint import LoopFootprint, loop_footprints
from .pattern import AccessPattern, AccessPatternError, BufferPattern, access_pattern
from . import hwcounters

__all__ = ["simulate", "CacheReport", "LevelStats", "CacheConfigError", "CacheSimError",
           "CacheLevel", "Geometry", "host_geometry", "resolve", "validate_levels",
           "DEFAULT_LEVELS", "DEFAULT_MAX_ACCESSES", "ReferenceHierarchy", "StreamSimulator",
           "SimState", "LoopFootprint", "loop_footprints", "hwcounters", "access_pattern",
           "AccessPattern", "AccessPatternError", "BufferPattern"]

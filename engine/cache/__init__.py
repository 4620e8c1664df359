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

For plots, ``simulate(...).to_dict()`` is plain JSON data::

    {"func": "mm_relu", "level_names": ["L1", "L2", "L3"],
     "levels": [{"name": "L1", "accesses": .., "hits": .., "misses": .., "miss_rate": ..}, ..],
     "per_buffer": {"A": [<level dict per level>], ..}, "per_block": {"Y": [..], ..},
     "buffers": {"A": {"bytes": .., "scope": "global", "address": .., "param": true}, ..},
     "loops": [{"index": 0, "loop": "i", "path": "i", "depth": 0, "extent": 128,
                "kind": "serial", "bytes": .., "line_bytes": .., "fits": {"L1": false, ..},
                "fits_in": "L2", "blocks": ["Y"], "buffers": [..]}, ..],
     "exact": true, "sampling": [], "sampling_note": "exact: every access simulated",
     "hardware": {"available": .., "reason": .., "counts": {"L1D read misses": .., ..}},
     "geometry": {"levels": [..], "source": "host", "notes": []},
     "simulated_accesses": .., "sim_seconds": .., "compile_seconds": .., "notes": [..]}

``loops[k]["index"]`` is the loop's pre-order position among the function's ``For`` nodes
(``report.loop_footprint(for_node)`` also finds it by identity). ``access_pattern(...)
.to_dict(max_cells=65536)`` gives ``{"loop", "iteration", "events", "truncated", "buffers":
{name: {"shape", "tile", "first_touch" (nested lists, -1 = untouched), "touches",
"touched"}}}`` (buffers above ``max_cells`` elements come as ``tile``-sized tiles).
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

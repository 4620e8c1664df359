"""engine.presets — named, shipped schedules: a workload, its parameters and a trace.

A preset is what a learner gets from the explorer's "presets" menu: a program (one of
:mod:`engine.workloads`) with a schedule already applied, made only of primitives that the
toolbar offers (split, reorder, fuse, compute_at, reverse_compute_at, decompose_reduction,
parallel, vectorize, unroll, ...). Each preset is written as a small Python function that
calls the primitives on an :class:`engine.Schedule`, so the recorded trace is exactly what a
learner would have clicked, and it can be

* applied: ``engine.presets.get("matmul-best")`` -> a Schedule (``sch.mod``, ``sch.trace``);
* replayed at another size: ``engine.presets.get("matmul-best", n=128)`` (tile sizes are
  clamped to the loop extents, so the same recipe stays legal and correct at small sizes);
* built for another target: ``engine.presets.get("matmul-best", isa="raspberry-pi-5")``
  (vector sizes from that target's ISA: NEON's 4 lanes; the default is this machine);
* shipped as a trace document for the web app: ``engine.presets.trace_json("matmul-best")``
  (``{"format": "schedule-explorer/trace", "version": 1, "workload": {...}, "insts": [...]}``,
  the format :meth:`engine.Trace.from_json` and :func:`engine.schedule.trace.replay` read).

Public API::

    engine.presets.names()                    # ["matmul-best", "matmul-tiled", ...]
    engine.presets.info("matmul-best")        # Preset(name, title, description, workload, params)
    engine.presets.get("matmul-best", n=256)  # Schedule with the trace applied
    engine.presets.trace_json("mm_relu-course")
    engine.presets.info("matmul-best").explore_url()   # "/explore/matmul?n=1024&t=..."
"""
from __future__ import annotations

from .registry import Preset, PresetError, all_presets, get, info, names, trace_json
from . import library  # noqa: F401  (registers the shipped presets)

__all__ = ["Preset", "PresetError", "names", "info", "get", "trace_json", "all_presets"]

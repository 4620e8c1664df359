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

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Preset", "PresetError", "names", "info", "get", "trace_json", "all_presets"]


class PresetError(ValueError):
    """A preset name or parameter that does not exist (message says what to use instead)."""


@dataclass(frozen=True)
class Preset:
    """A named schedule recipe.

    ``apply(sch, params)`` calls schedule primitives on ``sch`` (a fresh Schedule of
    ``workload`` built with ``params``); it reads sizes from ``params`` so that the same
    recipe replays at smaller sizes.
    """

    name: str
    title: str
    description: str
    workload: str
    params: dict
    apply: Callable[[Any, dict], None] = field(repr=False, compare=False)
    tags: tuple = ()

    def resolved_params(self, **overrides) -> dict:
        """The preset's parameters with ``overrides`` applied (unknown names refused)."""
        from engine import workloads
        wl = workloads.info(self.workload)
        known = set(wl.defaults)
        bad = sorted(set(overrides) - known)
        if bad:
            raise PresetError(f"preset {self.name!r} (workload {self.workload!r}) has no "
                              f"parameter {', '.join(map(repr, bad))}; its parameters are "
                              f"{', '.join(sorted(known))}")
        p = dict(self.params)
        p.update(overrides)
        return p

    def schedule(self, **overrides):
        """A Schedule of the workload with this preset's primitives applied."""
        from engine import workloads
        from engine.schedule import Schedule
        p = self.resolved_params(**overrides)
        mod = workloads.get(self.workload, **p)
        sch = Schedule(mod, workload=(self.workload, p))
        self.apply(sch, p)
        return sch

    def trace(self, **overrides):
        """The recorded :class:`engine.Trace` (with its workload and parameters)."""
        return self.schedule(**overrides).trace

    def trace_json(self, **overrides) -> dict:
        """The trace document (JSON-serialisable dict) the web app loads."""
        return self.trace(**overrides).as_json()

    def explore_url(self, **overrides) -> str:
        """The explorer link that opens this preset: ``/explore/<workload>?<params>&t=<trace
        token>`` (DESIGN.md's URL form; the token is :meth:`engine.Trace.encode`)."""
        from urllib.parse import urlencode
        tr = self.trace(**overrides)
        query = dict(tr.workload[1]) if tr.workload else {}
        query["t"] = tr.encode()
        return f"/explore/{self.workload}?{urlencode(query)}"

    def as_dict(self) -> dict:
        """Metadata for a menu: name, title, description, workload and parameters."""
        return {"name": self.name, "title": self.title, "description": self.description,
                "workload": self.workload, "params": dict(self.params), "tags": list(self.tags)}


_REGISTRY: dict[str, Preset] = {}


def _register(preset: Preset) -> Preset:
    _REGISTRY[preset.name] = preset
    return preset


def names() -> list[str]:
    """The preset names, in menu order."""
    return list(_REGISTRY)


def all_presets() -> list[Preset]:
    return list(_REGISTRY.values())


def info(name: str) -> Preset:
    """The :class:`Preset` called ``name``."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise PresetError(f"there is no preset called {name!r}; choose one of "
                          f"{', '.join(names())}") from None


def get(name: str, **params):
    """``engine.presets.get("matmul-best")`` -> a Schedule of the preset's workload with its
    trace applied; keyword arguments override the workload parameters (e.g. ``n=128``)."""
    return info(name).schedule(**params)


def trace_json(name: str, **params) -> dict:
    """The preset's trace document: ``{"format", "version", "workload": {"name",
    "params"}, "insts"}`` — load it with ``engine.Trace.from_json``."""
    return info(name).trace_json(**params)


from . import library  # noqa: E402,F401  (registers the presets)

"""The preset registry: the :class:`Preset` recipe type and the name -> preset table
(``engine.presets.library`` registers the shipped ones)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlencode

from engine import workloads
from engine.schedule import Schedule


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
    #: what the preset is built for: None for this machine's CPU, or a GPU target string
    #: ``"cuda -model=h100-sxm"`` (its explorer link then opens with that GPU target)
    target: str | None = None

    def resolved_params(self, **overrides) -> dict:
        """The preset's parameters with ``overrides`` applied (unknown names refused)."""
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
        tr = self.trace(**overrides)
        query = dict(tr.workload[1]) if tr.workload else {}
        query["t"] = tr.encode()
        if self.target:
            query["target"] = target_key(self.target)
        return f"/explore/{self.workload}?{urlencode(query)}"

    def as_dict(self) -> dict:
        """Metadata for a menu: name, title, description, workload and parameters."""
        return {"name": self.name, "title": self.title, "description": self.description,
                "workload": self.workload, "params": dict(self.params), "tags": list(self.tags),
                "target": self.target}


def target_key(target: str) -> str:
    """The explorer link's spelling of a GPU target string: ``"cuda -model=a100"`` ->
    ``"cuda-a100"``."""
    head, _, model = target.partition(" -model=")
    if head != "cuda" or not model or " " in model:
        raise PresetError(f"a preset's target is 'cuda -model=NAME', got {target!r}")
    return f"cuda-{model}"


_REGISTRY: dict[str, Preset] = {}


def register(preset: Preset) -> Preset:
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


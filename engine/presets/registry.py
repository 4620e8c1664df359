"""The preset registry: the :class:`Preset` recipe type and the name -> preset table
(``engine.presets.library`` registers the shipped ones)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlencode

from engine import workloads
from engine.codegen.isa import isa_of
from engine.schedule import Schedule


class PresetError(ValueError):
    """A preset name or parameter that does not exist (message says what to use instead)."""


@dataclass(frozen=True)
class Preset:
    """A named schedule recipe.

    ``apply(sch, params, isa=None)`` calls schedule primitives on ``sch`` (a fresh Schedule
    of ``workload`` built with ``params``); it reads sizes from ``params`` so that the same
    recipe replays at smaller sizes, and its vector sizes from ``isa`` — a CPU target
    (``"llvm -mtriple=aarch64-linux-gnu"``, ``"raspberry-pi-5"``) or a
    :class:`engine.codegen.isa.VectorISA`; None: this machine (the recipes that do not
    depend on the vector width ignore it). The methods below take the same ``isa=``; a GPU
    preset (``target`` set) ignores it.
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

    def schedule(self, isa=None, **overrides):
        """A Schedule of the workload with this preset's primitives applied, its vector
        sizes for ``isa`` (None: this machine; see the class docstring)."""
        p = self.resolved_params(**overrides)
        mod = workloads.get(self.workload, **p)
        sch = Schedule(mod, workload=(self.workload, p))
        if isa is None or self.target:
            self.apply(sch, p)
        else:
            self.apply(sch, p, isa=isa_of(isa))
        return sch

    def trace(self, isa=None, **overrides):
        """The recorded :class:`engine.Trace` (with its workload and parameters)."""
        return self.schedule(isa, **overrides).trace

    def trace_json(self, isa=None, **overrides) -> dict:
        """The trace document (JSON-serialisable dict) the web app loads; built for an
        aarch64 ``isa`` it names that target (``"target": "llvm -mtriple=aarch64-linux-gnu"``,
        as an explorer session on the ARM board writes it)."""
        doc = self.trace(isa, **overrides).as_json()
        board = None if self.target else board_target(isa)
        if board:
            doc["target"] = board
        return doc

    def explore_url(self, isa=None, **overrides) -> str:
        """The explorer link that opens this preset: ``/explore/<workload>?<params>&t=<trace
        token>`` (DESIGN.md's URL form; the token is :meth:`engine.Trace.encode`); for an
        aarch64 ``isa`` the trace sized for NEON, opened on the ARM board
        (``&target=aarch64``)."""
        tr = self.trace(isa, **overrides)
        query = dict(tr.workload[1]) if tr.workload else {}
        query["t"] = tr.encode()
        if self.target:
            query["target"] = target_key(self.target)
        elif board_target(isa):
            query["target"] = "aarch64"
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


#: the engine's target string of the ARM board (what the explorer's ``target=aarch64`` builds)
AARCH64_TARGET = "llvm -mtriple=aarch64-linux-gnu"


def board_target(isa) -> str | None:
    """:data:`AARCH64_TARGET` when ``isa`` (a target string or VectorISA) is an aarch64 one,
    else None (this machine, an x86 CPU, or no ISA)."""
    if isa is None:
        return None
    return AARCH64_TARGET if isa_of(isa).arch == "aarch64" else None


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


def get(name: str, isa=None, **params):
    """``engine.presets.get("matmul-best")`` -> a Schedule of the preset's workload with its
    trace applied; keyword arguments override the workload parameters (e.g. ``n=128``);
    ``isa="raspberry-pi-5"`` (or ``"llvm -mtriple=aarch64-linux-gnu"``) sizes its vectors
    for that target (NEON) instead of this machine."""
    return info(name).schedule(isa, **params)


def trace_json(name: str, isa=None, **params) -> dict:
    """The preset's trace document: ``{"format", "version", "workload": {"name",
    "params"}, "insts"}`` (and ``"target"`` for an aarch64 ``isa``) — load it with
    ``engine.Trace.from_json``."""
    return info(name).trace_json(isa, **params)


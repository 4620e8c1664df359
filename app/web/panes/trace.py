"""The trace pane: the steps of the session (each a readable schedule call), which one is
current, and the shipped presets of this workload (``engine.presets``).

A *step* is one state-changing or sampling instruction (a sampling step shows its decision:
``v4, v5 = sch.sample_perfect_tile(j, n=2, max_innermost_factor=16, decision=[8, 16])``,
and leaves the program as it was); the look-ups recorded before it (``GetBlock``,
``GetLoops``, ...) belong to it and are shown folded under it. A step's label names loops
and blocks (looked up by it or by an earlier step) as the program printed them before the
step that looked them up (``sch.split(j, factors=[None, 4])``, not ``l2``).
"""
from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, field

from engine import presets as engine_presets
from engine.schedule.registry import lookup_kind

from ..selection import loops_of_block, module_trees
from ..session import Session

log = logging.getLogger(__name__)


@dataclass
class Step:
    k: int
    label: str
    lookups: list = field(default_factory=list)
    current: bool = False
    future: bool = False
    raw: str = ""


_HANDLE = re.compile(r"\b([bl]\d+)\b")


def _handle_names(session: Session, k: int, start: int, end: int) -> dict[str, str]:
    """Printed names of the handles a step's look-ups define (``b0`` -> ``Y``,
    ``l2`` -> ``j``), found in the program *before* the step."""
    names: dict[str, str] = {}
    trees = None
    for inst in session.insts[start:end]:
        try:
            kind, inputs, attrs, outputs = inst[:4]
        except (TypeError, ValueError):
            continue
        if kind in ("GetBlock", "GetSBlock") and attrs and outputs:
            names[str(outputs[0])] = str(attrs[0])
        elif kind == "GetLoops" and inputs and str(inputs[0]) in names:
            if trees is None:
                try:
                    trees = module_trees(session.mod_at(k - 1))
                except Exception:  # noqa: BLE001 - labels are a nicety
                    return names
            block = names[str(inputs[0])]
            for t in trees:
                chain = loops_of_block(t, block)
                if chain:
                    for out, loop in zip(outputs, chain):
                        names[str(out)] = loop.name
                    break
    return names


def _friendly(line: str, names: dict[str, str]) -> str:
    """``l4, l5 = sch.split(l2, factors=[None, 4])`` -> ``sch.split(j, factors=[None, 4])``."""
    call = line.split(" = ", 1)[1] if " = sch." in line else line
    return _HANDLE.sub(lambda m: names.get(m.group(1), m.group(1)), call)


def _samples(inst) -> bool:
    """Whether a trace document's instruction is a sampling one (it has a decision)."""
    kind = inst[0] if isinstance(inst, list) and inst else None
    prim = lookup_kind(kind) if isinstance(kind, str) else None
    return bool(prim is not None and prim.has_decision)


def steps(session: Session) -> list[Step]:
    """The initial program, then one :class:`Step` per state-changing instruction."""
    py = session.trace.steps() if session.trace is not None else []
    out = [Step(0, "initial program", current=session.at == 0)]
    start = 0
    names: dict[str, str] = {}  # handles named by the look-ups of this step and earlier ones
    for k, end in enumerate(session.step_ends, start=1):
        lines = py[start:end]
        names.update(_handle_names(session, k, start, end))
        label = _friendly(lines[-1], names) if names else lines[-1]
        if _samples(session.insts[end - 1]) and " = sch." in lines[-1]:
            # a sampling step keeps its results' names (later steps use them) and shows
            # its decision: ``v4, v5 = sch.sample_perfect_tile(j, n=2, ..., decision=[8, 16])``
            label = lines[-1].split(" = ", 1)[0] + " = " + label
        out.append(Step(k, label, lookups=lines[:-1], current=session.at == k,
                        future=k > session.at, raw="\n".join(lines)))
        start = end
    return out


def presets(workload: str | None = None, here: dict | None = None,
            isa: str | None = None) -> list[dict]:
    """The shipped schedule presets (``engine.presets``), optionally of one workload:
    name, title, description, workload, sizes and the explorer link that replays it
    (``url``); with ``here`` (the explorer's current sizes) also ``url_here``, the same
    recipe at those sizes when they differ from the preset's and it applies to them.
    ``isa``: a board session's engine target (``"llvm -mtriple=aarch64-linux-gnu"``): the
    CPU presets' links are then their traces sized for it (NEON's 4 lanes), opened on the
    board; None (this machine's CPU, a GPU): as built here."""
    try:
        out = []
        for name in engine_presets.names():
            p = engine_presets.info(name)
            if workload is not None and p.workload != workload:
                continue
            sizes = ", ".join(f"{k}={v}" for k, v in p.params.items())
            mine = {k: here[k] for k in p.params if here and k in here}
            mine_isa = None if p.target else isa
            here_url = _preset_url(name, tuple(sorted(mine.items())), mine_isa) \
                if mine and mine != dict(p.params) else None
            out.append({"name": p.name, "title": p.title, "description": p.description,
                        "workload": p.workload, "sizes": sizes, "tags": list(p.tags),
                        "url": _preset_url(name, (), mine_isa), "url_here": here_url})
        return out
    except Exception:  # noqa: BLE001 - presets are an extra: never break the page for them
        log.exception("listing the presets failed")
        return []


@functools.lru_cache(maxsize=256)
def _preset_url(name: str, overrides: tuple, isa: str | None = None) -> str | None:
    """``engine.presets.info(name).explore_url(isa, **overrides)``, or None when the recipe
    does not fit those sizes. Cached: it replays the whole schedule (10-100 ms) and the
    trace pane lists the presets on every click."""
    try:
        return engine_presets.info(name).explore_url(isa, **dict(overrides))
    except Exception:  # noqa: BLE001 - this recipe does not fit these sizes
        return None


def context(session) -> dict:
    """The trace pane: ``steps`` and this workload's ``presets`` (at the explored sizes)."""
    return {"steps": steps(session),
            "presets": presets(session.workload, here=dict(session.params),
                               isa=session.target.engine if session.target.is_board
                               else None)
            if session.workload_arg() is not None else []}

"""Checks a lesson step states about the program after it (``"checks"`` in a step).

A check is a small JSON object with a ``kind``. Some read the program's IR (what the web
process may do); the others read the *result* of building and running the program, which
the caller passes in — in the explorer a measurement worker's step dict
(``app.service.timing.measure_gpu_step``), never something this module computes: nothing
here compiles or runs code.

=================  ==================================================================  ======
kind               meaning                                                             reads
=================  ==================================================================  ======
``bound``          a loop above ``block`` is bound to ``thread`` (``threadIdx.x``, …;  IR
                   optional ``extent``: that loop's extent)
``scope``          the function allocates ``buffer`` in storage scope ``scope``        IR
                   (``shared``, ``local``, …)
``correct``        the program's output matched numpy's                                result
``no_race``        the emulator's race check ran and found no race                     result
``traffic_below``  the model's ``memory`` bytes (``dram``: DRAM, ``l2``: L2 → SM       result
                   traffic) are below those of the lesson's program after step
                   ``than_step`` (an earlier step)
=================  ==================================================================  ======

:func:`validate` checks a step's list when a lesson is loaded; :func:`evaluate` gives one
check's :class:`Outcome` — ``ok``, ``failed`` or ``waiting`` (the result it needs has not
arrived yet).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "RESULT_KINDS", "THREAD_AXES", "MEMORIES", "CheckError", "Outcome",
           "validate", "evaluate", "describe", "needs_result"]

#: kind -> (required keys, optional keys)
KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "bound": (("block", "thread"), ("extent",)),
    "scope": (("buffer", "scope"), ()),
    "correct": ((), ()),
    "no_race": ((), ()),
    "traffic_below": (("memory", "than_step"), ()),
}
#: kinds read from the worker's result of the program (not from its IR)
RESULT_KINDS = frozenset({"correct", "no_race", "traffic_below"})
THREAD_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
               "threadIdx.z", "vthread.x", "vthread.y", "vthread.z")
SCOPES = ("global", "shared", "local")
#: memory -> (the model's field, the words for it)
MEMORIES = {"dram": ("dram_bytes", "DRAM traffic"),
            "l2": ("l2_bytes", "L2 → SM traffic (global loads and stores)")}


class CheckError(ValueError):
    """A malformed check (the message says what is wrong)."""


@dataclass(frozen=True)
class Outcome:
    state: str          # "ok" | "failed" | "waiting"
    text: str

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    def to_dict(self) -> dict:
        return {"state": self.state, "text": self.text}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def validate(raw: Any, where: str, step_index: int) -> tuple[dict, ...]:
    """A step's ``checks`` list, validated (CheckError naming the place otherwise)."""
    if not isinstance(raw, list):
        raise CheckError(f"{where}: \"checks\" must be a list of checks")
    out = []
    for i, c in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(c, dict):
            raise CheckError(f"{at}: a check must be an object such as "
                             '{"kind": "bound", "block": "C", "thread": "threadIdx.x"}')
        kind = c.get("kind")
        if kind not in KINDS:
            raise CheckError(f"{at}: unknown check kind {kind!r} (known: "
                             f"{', '.join(KINDS)})")
        required, optional = KINDS[kind]
        extra = set(c) - {"kind", *required, *optional}
        if extra:
            raise CheckError(f"{at}: {kind} takes no {', '.join(sorted(map(repr, extra)))} "
                             f"(it takes: {', '.join(required + optional) or 'nothing'})")
        for key in required:
            if key not in c:
                raise CheckError(f"{at}: {kind} needs {key!r}")
        if kind == "bound":
            if not isinstance(c["block"], str) or not c["block"]:
                raise CheckError(f"{at}: \"block\" must be a block name")
            if c["thread"] not in THREAD_AXES:
                raise CheckError(f"{at}: \"thread\" must be one of {', '.join(THREAD_AXES)}, "
                                 f"got {c['thread']!r}")
            if "extent" in c and not (_is_int(c["extent"]) and c["extent"] > 0):
                raise CheckError(f"{at}: \"extent\" must be a positive integer")
        elif kind == "scope":
            if not isinstance(c["buffer"], str) or not c["buffer"]:
                raise CheckError(f"{at}: \"buffer\" must be a buffer name")
            if c["scope"] not in SCOPES:
                raise CheckError(f"{at}: \"scope\" must be one of {', '.join(SCOPES)}, "
                                 f"got {c['scope']!r}")
        elif kind == "traffic_below":
            if c["memory"] not in MEMORIES:
                raise CheckError(f"{at}: \"memory\" must be one of {', '.join(MEMORIES)}, "
                                 f"got {c['memory']!r}")
            t = c["than_step"]
            if not (_is_int(t) and 0 <= t < step_index):
                raise CheckError(f"{at}: \"than_step\" must be an earlier step's number "
                                 f"(0 to {step_index - 1}), got {t!r}")
        out.append(dict(c))
    return tuple(out)


def needs_result(check: dict) -> bool:
    return check["kind"] in RESULT_KINDS


def describe(check: dict) -> str:
    """What the check asks, in words (shown before it is evaluated)."""
    k = check["kind"]
    if k == "bound":
        ext = f" (extent {check['extent']})" if "extent" in check else ""
        return f"a loop above block {check['block']} is bound to {check['thread']}{ext}"
    if k == "scope":
        return f"buffer {check['buffer']} is in {check['scope']} memory"
    if k == "correct":
        return "the result matches numpy"
    if k == "no_race":
        return "the emulator's race check finds no race"
    words = MEMORIES[check["memory"]][1]
    return f"the model's {words} is below step {check['than_step'] + 1}'s"


# ---------------------------------------------------------------------------- evaluation
def _func(mod: Any, func_name: str | None):
    from engine.script.nest import resolve_func  # noqa: PLC0415
    return resolve_func(mod, func_name)


def _bound_axes(func: Any, block_name: str) -> list[tuple[str, Any]] | None:
    """(thread tag, extent) of every bound loop above the block (None: no such block)."""
    from engine.ir import Block, BlockRealize, For, ForKind  # noqa: PLC0415

    found: list = []

    def walk(stmt: Any, above: list) -> bool:
        if isinstance(stmt, For):
            here = above + ([(stmt.thread_tag, stmt.extent)]
                            if stmt.kind is ForKind.THREAD_BINDING else [])
            return walk(stmt.body, here)
        if isinstance(stmt, BlockRealize):
            if stmt.block.name_hint == block_name:
                found.append(above)
                return True
            return walk(stmt.block.body, above) or any(
                walk(s, above) for s in ([stmt.block.init] if stmt.block.init else []))
        if isinstance(stmt, Block):
            return walk(stmt.body, above)
        for child in _children(stmt):
            if walk(child, above):
                return True
        return False

    walk(func.body, [])
    return found[0] if found else None


def _children(stmt: Any) -> list:
    from engine.ir import IfThenElse, LetStmt, SeqStmt  # noqa: PLC0415
    if isinstance(stmt, SeqStmt):
        return list(stmt.seq)
    if isinstance(stmt, IfThenElse):
        return [s for s in (stmt.then_case, stmt.else_case) if s is not None]
    body = getattr(stmt, "body", None)
    if isinstance(stmt, LetStmt) or body is not None:
        return [body] if body is not None else []
    return []


def _buffers(func: Any) -> dict:
    from engine.ir import Block, collect  # noqa: PLC0415
    out = {}
    for b in collect(func.body, Block):
        for buf in b.alloc_buffers:
            out.setdefault(buf.name, buf)
    return out


def _mb(x: float) -> str:
    return f"{x / 1e6:.3g} MB" if x >= 1e5 else f"{x / 1e3:.3g} kB"


def evaluate(check: dict, mod: Any, func_name: str | None = None,
             result: dict | None = None, earlier: dict | None = None) -> Outcome:
    """One check on ``mod`` (an IRModule). ``result``: the worker's step dict of ``mod``
    (None: not arrived yet); ``earlier``: step number -> the worker's step dict of the
    lesson's program after that step (for ``traffic_below``)."""
    k = check["kind"]
    what = describe(check)
    if k == "bound":
        try:
            axes = _bound_axes(_func(mod, func_name), check["block"])
        except Exception:  # noqa: BLE001 - a module without the function
            axes = None
        if axes is None:
            return Outcome("failed", f"{what}: there is no block {check['block']}")
        tags = [(t, e) for t, e in axes if t == check["thread"]]
        if not tags:
            have = ", ".join(t for t, _ in axes) or "none"
            return Outcome("failed", f"{what}: no (loops bound above it: {have})")
        if "extent" in check and not any(getattr(e, "value", e) == check["extent"]
                                         for _, e in tags):
            got = ", ".join(str(getattr(e, "value", e)) for _, e in tags)
            return Outcome("failed", f"{what}: the bound loop's extent is {got}")
        return Outcome("ok", what)
    if k == "scope":
        try:
            bufs = _buffers(_func(mod, func_name))
        except Exception:  # noqa: BLE001
            bufs = {}
        buf = bufs.get(check["buffer"])
        if buf is None:
            return Outcome("failed", f"{what}: the program allocates no buffer "
                                     f"{check['buffer']} (it allocates: "
                                     f"{', '.join(bufs) or 'none'})")
        if buf.scope.partition(".")[0] != check["scope"]:
            return Outcome("failed", f"{what}: it is in {buf.scope} memory")
        return Outcome("ok", what)
    # the worker's result
    if result is None:
        return Outcome("waiting", f"{what}: waiting for the workers' result")
    err = result.get("error")
    if k == "correct":
        if err:
            return Outcome("failed", f"{what}: {err}")
        if result.get("correct") is True:
            return Outcome("ok", what)
        if result.get("correct") is False:
            return Outcome("failed", f"{what}: {result.get('detail') or 'it differs'}")
        if result.get("not_gpu"):
            return Outcome("failed", f"{what}: {result['not_gpu']}")
        return Outcome("waiting", f"{what}: not checked yet")
    if k == "no_race":
        if err and "race" in str(err):
            return Outcome("failed", f"{what}: {err}")
        if err:
            return Outcome("failed", f"{what}: the program did not run ({err})")
        if result.get("race_checked") is True and result.get("correct") is not None:
            return Outcome("ok", what)
        if result.get("race_checked") is False:
            return Outcome("failed", f"{what}: not race-checked at this size (too many "
                                     "FLOPs for the instrumented emulator)")
        if result.get("not_gpu"):
            return Outcome("failed", f"{what}: {result['not_gpu']}")
        return Outcome("waiting", f"{what}: not checked yet")
    # traffic_below
    field_name = MEMORIES[check["memory"]][0]
    mine = (result.get("model") or {}).get(field_name)
    before = (earlier or {}).get(check["than_step"])
    if err:
        return Outcome("failed", f"{what}: {err}")
    if before is None:
        return Outcome("waiting", f"{what}: waiting for the workers' result of step "
                                  f"{check['than_step'] + 1}")
    theirs = (before.get("model") or {}).get(field_name)
    if not isinstance(mine, (int, float)) or not isinstance(theirs, (int, float)):
        if result.get("stage") == "done" and not isinstance(mine, (int, float)):
            return Outcome("failed", f"{what}: the program has no model "
                                     f"({result.get('not_gpu') or 'no modeled traffic'})")
        return Outcome("waiting", f"{what}: waiting for the model")
    figures = f"{_mb(mine)} vs {_mb(theirs)}"
    if mine < theirs:
        return Outcome("ok", f"{what}: {figures}")
    return Outcome("failed", f"{what}: {figures}")

"""Structured schedule actions: the primitive a lesson step (or a challenge) applies.

An action is a small JSON object naming a primitive with TVM's name and its arguments,
with loops and blocks referred to by *name* instead of by handle::

    {"primitive": "split", "block": "Y", "loop": "j", "factors": [null, 4],
     "outputs": ["j0", "j1"]}
    {"primitive": "reorder", "loops": ["j0", "k", "j1"]}
    {"primitive": "reverse_compute_at", "block": "C", "loop": "j0"}
    {"primitive": "decompose_reduction", "block": "Y", "loop": "k"}

How names are resolved (in this order):

* a name bound by ``outputs`` of an earlier step (like ``j0, j1 = sch.split(...)`` in the
  course's code), then
* for a block: the block of that name (``sch.get_block(name, func_name)``);
* for a loop: the loop whose variable has that name among the loops above the action's
  ``loop_block`` (or ``block``) — e.g. ``{"block": "Y", "loop": "k"}`` is loop ``k`` of
  block ``Y``; an integer picks ``get_loops(block)[n]``.

:func:`apply_action` calls the method of the same name on an :class:`engine.Schedule`, so
the schedule records the step in its trace exactly as if the learner had clicked it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PRIMITIVES", "ActionError", "validate_action", "apply_action", "action_python",
           "describe_action"]


class ActionError(ValueError):
    """An action names something that does not exist (a loop, block, buffer or primitive)."""


@dataclass(frozen=True)
class Param:
    name: str
    kind: str          # loop | loops | block | int | str | factors | buffer | bool | any
    required: bool = True
    positional: bool = True


# primitive -> parameters, in TVM's order. "block" for split/fuse/... is only a lookup context.
PRIMITIVES: dict[str, tuple[Param, ...]] = {
    "split": (Param("loop", "loop"), Param("factors", "factors")),
    "fuse": (Param("loops", "loops"),),
    "reorder": (Param("loops", "loops"),),
    "parallel": (Param("loop", "loop"),),
    "vectorize": (Param("loop", "loop"),),
    "unroll": (Param("loop", "loop"),),
    "compute_at": (Param("block", "block"), Param("loop", "loop"),
                   Param("preserve_unit_loops", "bool", False, False)),
    "reverse_compute_at": (Param("block", "block"), Param("loop", "loop"),
                           Param("preserve_unit_loops", "bool", False, False)),
    "compute_inline": (Param("block", "block"),),
    "reverse_compute_inline": (Param("block", "block"),),
    "decompose_reduction": (Param("block", "block"), Param("loop", "loop")),
    "rfactor": (Param("loop", "loop"), Param("factor_axis", "int")),
    "cache_read": (Param("block", "block"), Param("read_buffer_index", "buffer_index"),
                   Param("storage_scope", "str")),
    "cache_write": (Param("block", "block"), Param("write_buffer_index", "buffer_index"),
                    Param("storage_scope", "str")),
    "set_scope": (Param("block", "block"), Param("buffer_index", "buffer_index"),
                  Param("storage_scope", "str")),
    "storage_align": (Param("block", "block"), Param("buffer_index", "buffer_index"),
                      Param("axis", "int"), Param("factor", "int"), Param("offset", "int")),
    "transform_layout": (Param("block", "block"), Param("buffer", "buffer"),
                         Param("index_map", "str")),
    "annotate": (Param("loop", "loop"), Param("ann_key", "str"), Param("ann_val", "any")),
    "bind": (Param("loop", "loop"), Param("thread_axis", "str")),
}

# keys an action may carry besides its parameters
_CONTEXT_KEYS = {"primitive", "outputs", "block", "loop_block", "func"}

# primitives whose parameter list has no block, where "block" is a lookup context only
_BLOCK_IS_CONTEXT = {name for name, ps in PRIMITIVES.items()
                     if not any(p.kind == "block" for p in ps)}


def validate_action(action: Any, where: str = "action") -> None:
    """Check an action's shape (not whether its names exist); raise ActionError if wrong."""
    if not isinstance(action, dict):
        raise ActionError(f"{where}: an action must be an object such as "
                          '{"primitive": "split", "block": "Y", "loop": "j", '
                          f'"factors": [null, 4]}}, got {type(action).__name__}')
    prim = action.get("primitive")
    if not isinstance(prim, str):
        raise ActionError(f"{where}: the action has no \"primitive\" name")
    if prim not in PRIMITIVES:
        raise ActionError(f"{where}: unknown primitive {prim!r}; known primitives are "
                          + ", ".join(sorted(PRIMITIVES)))
    params = PRIMITIVES[prim]
    allowed = {p.name for p in params} | _CONTEXT_KEYS
    for key in action:
        if key not in allowed:
            raise ActionError(f"{where}: {prim} takes no argument {key!r} "
                              f"(it takes: {', '.join(p.name for p in params)})")
    for p in params:
        if p.name not in action:
            if p.required:
                raise ActionError(f"{where}: {prim} needs {p.name!r}")
            continue
        _check_value(prim, p, action[p.name], where)
    if prim in _BLOCK_IS_CONTEXT and "loop" in action and isinstance(action["loop"], int) \
            and "block" not in action:
        raise ActionError(f"{where}: a loop given by position needs the \"block\" whose "
                          "loops are counted")
    outs = action.get("outputs")
    if outs is not None:
        if not isinstance(outs, list) or not all(isinstance(o, str) and o for o in outs):
            raise ActionError(f"{where}: \"outputs\" must be a list of names, e.g. "
                              '["j0", "j1"]')
    for key in ("block", "loop_block", "func"):
        if key in action and not isinstance(action[key], str):
            raise ActionError(f"{where}: \"{key}\" must be a name (a string)")


def _check_value(prim: str, p: Param, v: Any, where: str) -> None:
    bad = None
    if p.kind == "loop" and not (isinstance(v, str) or _is_int(v)):
        bad = "a loop name or a position"
    elif p.kind == "loops" and not (isinstance(v, list) and v
                                    and all(isinstance(x, str) or _is_int(x) for x in v)):
        bad = "a non-empty list of loop names"
    elif p.kind == "block" and not isinstance(v, str):
        bad = "a block name"
    elif p.kind == "int" and not _is_int(v):
        bad = "an integer"
    elif p.kind == "str" and not isinstance(v, str):
        bad = "a string"
    elif p.kind == "bool" and not isinstance(v, bool):
        bad = "true or false"
    elif p.kind == "buffer_index" and not (_is_int(v) or isinstance(v, str)):
        bad = "a buffer position or a buffer name"
    elif p.kind == "buffer" and not (isinstance(v, str) or (
            isinstance(v, list) and len(v) == 2 and v[0] in ("read", "write")
            and _is_int(v[1]))):
        bad = 'a buffer name or ["read"|"write", index]'
    elif p.kind == "factors":
        if not (isinstance(v, list) and len(v) >= 2
                and all(x is None or _is_int(x) for x in v)
                and sum(x is None for x in v) <= 1):
            bad = "a list of at least two factors, integers with at most one null"
        elif any(_is_int(x) and x <= 0 for x in v):
            bad = "positive integers (one may be null)"
    if bad:
        raise ActionError(f"{where}: {prim}'s {p.name!r} must be {bad}, got {v!r}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# ---------------------------------------------------------------------------
def _func_name(sch: Any, action: dict) -> str | None:
    if "func" in action:
        return action["func"]
    mod = sch.mod
    names = mod.names() if hasattr(mod, "names") else list(mod)
    return names[0] if len(names) == 1 else None


def _block_names(sch: Any, func_name: str | None) -> list[str]:
    from engine.ir import Block, collect  # noqa: PLC0415
    from engine.script.nest import resolve_func  # noqa: PLC0415
    try:
        func = resolve_func(sch.mod, func_name)
    except Exception:  # noqa: BLE001
        return []
    return [b.name_hint for b in collect(func.body, Block) if b.name_hint != "root"]


def _node_name(sch: Any, rv: Any) -> str | None:
    """The current name of a handle's block/loop, or None if the handle is dead."""
    try:
        if hasattr(sch, "is_alive") and not sch.is_alive(rv):
            return None
        node = sch.get(rv)
    except Exception:  # noqa: BLE001
        return None
    if hasattr(node, "loop_var"):
        return node.loop_var.name
    return getattr(node, "name_hint", None)


def _alias(env: dict, name: Any, kind: str):
    """(node name, owner block) for a name bound by an earlier step in another session."""
    if not isinstance(name, str) or name in env:
        return None
    a = env.get(("aliases",), {}).get(name)
    if a is None or a[0] != kind:
        return None
    return a[1], a[2]


def _get_block(sch: Any, name: str, env: dict, action: dict):
    if name in env:
        return env[name]
    alias = _alias(env, name, "block")
    if alias is not None:
        name = alias[0]
    # handles found earlier are reused while they still name the same block, so a lesson's
    # trace reads like the course's code (one get_block per block, not one per step)
    cache = env.setdefault(("blocks",), {})
    rv = cache.get(name)
    if rv is not None and _node_name(sch, rv) == name:
        return rv
    func_name = _func_name(sch, action)
    try:
        if func_name is None:
            rv = sch.get_block(name)
        else:
            rv = sch.get_block(name, func_name=func_name)
    except Exception as exc:  # noqa: BLE001 - re-raised with what exists
        have = ", ".join(_block_names(sch, func_name)) or "none"
        raise ActionError(f"there is no block named {name!r} at this point "
                          f"(blocks now: {have})") from exc
    cache[name] = rv
    return rv


def _loop_name(sch: Any, loop_rv: Any) -> str | None:
    try:
        node = sch.get(loop_rv)
    except Exception:  # noqa: BLE001
        return None
    var = getattr(node, "loop_var", None)
    return getattr(var, "name", None)


def _get_loop(sch: Any, ref: Any, env: dict, action: dict):
    if isinstance(ref, str) and ref in env:
        return env[ref]
    owner = action.get("loop_block") or action.get("block")
    alias = _alias(env, ref, "loop")
    if alias is not None:
        ref, owner = alias[0], alias[1] or owner
    if owner is None:
        raise ActionError(f"loop {ref!r} is not a name bound by an earlier step; say which "
                          "block it belongs to with \"block\" or \"loop_block\"")
    block = _get_block(sch, owner, env, action)
    cache = env.setdefault(("loops", owner), [])
    if isinstance(ref, str):
        for rv in cache:
            if _node_name(sch, rv) == ref:
                return rv
    loops = list(sch.get_loops(block))
    env[("loops", owner)] = loops
    if _is_int(ref):
        if not -len(loops) <= ref < len(loops):
            raise ActionError(f"block {owner!r} has {len(loops)} loops; position {ref} "
                              "does not exist")
        return loops[ref]
    names = [_loop_name(sch, lp) for lp in loops]
    matches = [lp for lp, n in zip(loops, names) if n == ref]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise ActionError(f"block {owner!r} has several loops named {ref!r}; "
                          "refer to it by position instead")
    raise ActionError(f"block {owner!r} has no loop named {ref!r} "
                      f"(its loops: {', '.join(str(n) for n in names) or 'none'})")


def _buffer_index(sch: Any, block_rv: Any, ref: Any, which: str) -> int:
    if _is_int(ref):
        return ref
    node = sch.get(block_rv)
    regions = node.reads if which == "read" else node.writes
    names = [r.buffer.name for r in regions]
    if ref in names:
        return names.index(ref)
    raise ActionError(f"block {node.name_hint!r} does not {which} a buffer named {ref!r} "
                      f"(it {which}s: {', '.join(names) or 'nothing'})")


def apply_action(sch: Any, action: dict, env: dict | None = None) -> Any:
    """Apply one action to ``sch`` (an engine Schedule) and bind its ``outputs`` in ``env``.

    Returns what the primitive returned. Raises :class:`ActionError` when a name does not
    resolve; the primitive's own ``ScheduleError`` propagates unchanged when it refuses.
    """
    validate_action(action)
    env = {} if env is None else env
    prim = action["primitive"]
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    block_rv = None
    for p in PRIMITIVES[prim]:
        if p.name not in action:
            continue
        v = action[p.name]
        if p.kind == "loop":
            val = _get_loop(sch, v, env, action)
        elif p.kind == "loops":
            val = [_get_loop(sch, x, env, action) for x in v]
        elif p.kind == "block":
            val = block_rv = _get_block(sch, v, env, action)
        elif p.kind == "buffer_index":
            # read_buffer_index counts the block's reads; the others (cache_write,
            # set_scope, storage_align) count its writes, as in TVM
            val = _buffer_index(sch, block_rv, v, "read" if p.name.startswith("read") else
                                "write")
        elif p.kind == "buffer":
            val = tuple(v) if isinstance(v, list) else v
        else:
            val = v
        if p.kind == "loops":
            args.extend(val)
        elif p.positional:
            args.append(val)
        else:
            kwargs[p.name] = val
    method = getattr(sch, prim, None)
    if method is None:
        raise ActionError(f"this engine's Schedule has no primitive {prim!r} yet")
    result = method(*args, **kwargs)
    outs = action.get("outputs") or []
    if outs:
        values = list(result) if isinstance(result, (list, tuple)) else [result]
        if len(values) != len(outs):
            raise ActionError(f"{prim} returned {len(values)} handle(s) but the action names "
                              f"{len(outs)} outputs ({', '.join(outs)})")
        env.update(zip(outs, values))
    return result


def _py(v: Any) -> str:
    if v is None:
        return "None"
    if isinstance(v, list):
        return "[" + ", ".join(_py(x) for x in v) + "]"
    return repr(v)


def action_python(action: dict) -> str:
    """The action as course-style Python (for narrative and "show me the code" buttons)."""
    prim = action["primitive"]
    parts: list[str] = []
    for p in PRIMITIVES[prim]:
        if p.name not in action:
            continue
        v = action[p.name]
        if p.kind == "loops":
            parts.extend(str(x) for x in v)
        elif p.kind in ("loop",):
            parts.append(str(v))
        elif p.kind == "block":
            parts.append(f"block_{v}")
        elif p.name == "factors":
            parts.append(f"factors={_py(v)}")
        elif p.name == "index_map" and isinstance(v, str) and v.lstrip().startswith("lambda"):
            parts.append(v.strip())  # shown as the lambda it is, as in TVM's API
        elif p.positional:
            parts.append(_py(v))
        else:
            parts.append(f"{p.name}={_py(v)}")
    call = f"sch.{prim}({', '.join(parts)})"
    outs = action.get("outputs")
    return f"{', '.join(outs)} = {call}" if outs else call


def describe_action(action: dict) -> str:
    """A short label, e.g. ``split j (Y) by [None, 4]``, for tables and buttons."""
    prim = action["primitive"]
    bits = [prim]
    if "loop" in action:
        bits.append(str(action["loop"]))
    if "loops" in action:
        bits.append(", ".join(str(x) for x in action["loops"]))
    if "block" in action:
        bits.append(f"({action['block']})")
    if "factors" in action:
        bits.append("by " + _py(action["factors"]))
    return " ".join(bits)

"""Parsers of the layers above, registered from above (as :mod:`.display`'s renderers).

``engine.script``'s ``@I.ir_module`` reads a Python class holding ``@R.function``
methods; the Relax parser that reads those (``engine.relax``) sits above ``engine.script``,
so the package ``engine`` registers it here when it is imported::

    register("relax", hook)     # hook(script_parser, relax_fns, prims, class_name) -> {name: fn}
    get("relax")                # -> the hook, or None when none is registered
"""
from __future__ import annotations

from typing import Any, Callable

KINDS = ("relax",)
_PARSERS: dict[str, Callable[..., Any]] = {}


def register(kind: str, fn: Callable[..., Any]) -> None:
    """Make ``fn`` the parser of ``kind`` (one of :data:`KINDS`); the last one wins."""
    if kind not in KINDS:
        raise ValueError(f"unknown parser kind {kind!r}; kinds are {', '.join(KINDS)}")
    _PARSERS[kind] = fn


def get(kind: str) -> Callable[..., Any] | None:
    """The registered parser of ``kind``, or None."""
    return _PARSERS.get(kind)

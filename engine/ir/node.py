"""Base of every IR node: an immutable dataclass compared by identity.

``a is b`` / ``a == b`` on statements and buffers is *identity*; use
:func:`engine.ir.structural_equal` to compare structure (variables up to renaming).
Identity is what the printer's span map and the schedule's handles key on.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterator

from . import display


class Node:
    """Mixin for all IR nodes (they are ``@dataclass(frozen=True, eq=False)``)."""

    __slots__ = ()

    def fields(self) -> Iterator[tuple[str, Any]]:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            yield f.name, getattr(self, f.name)

    def replace(self, **changes):
        """A copy with some fields changed (the original is untouched)."""
        return dataclasses.replace(self, **changes)

    def same_as(self, other: Any) -> bool:
        """Whether ``other`` is this very node (TVM's ``same_as``: identity, not structure)."""
        return self is other

    def __repr__(self) -> str:  # short, readable repr for debugging and errors
        try:
            return display.render("repr", self)
        except Exception:  # noqa: BLE001 - repr must never fail
            return f"<{type(self).__name__} at {id(self):#x}>"


def node(cls):
    """Class decorator: frozen, identity-compared dataclass."""
    return dataclasses.dataclass(frozen=True, eq=False, repr=False)(cls)

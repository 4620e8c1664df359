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


class AttrMap:
    """A dict as an annotation value (``{"arr": [0, 0], "key": 3}``, TVM's ``Map``): its
    ``(key, value)`` pairs, in order, immutable — as the annotations themselves are pairs
    (a list value is a tuple). Reads like a dict (``m["key"]``, ``keys()``, ``items()``,
    ``dict(m)``, ``len(m)``, iteration over the keys); structural equality and hashing
    compare it pair by pair, and it differs from a tuple of pairs (a list of lists)."""

    __slots__ = ("_pairs",)

    def __init__(self, pairs: Any = ()):
        items = pairs.items() if isinstance(pairs, (dict, AttrMap)) else pairs
        out = []
        for k, v in items:
            if any(k == q for q, _ in out):
                raise ValueError(f"the key {k!r} appears twice in an annotation dict")
            out.append((k, v))
        object.__setattr__(self, "_pairs", tuple(out))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("an AttrMap cannot be changed")

    def items(self) -> tuple:
        return self._pairs

    def keys(self) -> tuple:
        return tuple(k for k, _ in self._pairs)

    def values(self) -> tuple:
        return tuple(v for _, v in self._pairs)

    def get(self, key: Any, default: Any = None) -> Any:
        for k, v in self._pairs:
            if k == key:
                return v
        return default

    def __getitem__(self, key: Any) -> Any:
        for k, v in self._pairs:
            if k == key:
                return v
        raise KeyError(key)

    def __contains__(self, key: Any) -> bool:
        return any(k == key for k, _ in self._pairs)

    def __iter__(self) -> Iterator:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._pairs)

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, dict):
            other = AttrMap(other)
        return isinstance(other, AttrMap) and dict(self._pairs) == dict(other._pairs)

    def __hash__(self) -> int:
        return hash(("AttrMap", frozenset(self._pairs)))

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self._pairs) + "}"


class Pairs(tuple):
    """Annotations: a tuple of ``(key, value)`` pairs, which also reads like a dict by
    key, as TVM's annotations do (``block.annotations["k"]``, ``.get("k")``, ``.keys()``,
    ``.items()``); an integer or a slice indexes the pairs."""

    __slots__ = ()

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, str):
            for k, v in tuple.__iter__(self):
                if k == i:
                    return v
            raise KeyError(i)
        return tuple.__getitem__(self, i)

    def get(self, key: Any, default: Any = None) -> Any:
        for k, v in tuple.__iter__(self):
            if k == key:
                return v
        return default

    def keys(self) -> tuple:
        return tuple(k for k, _ in tuple.__iter__(self))

    def values(self) -> tuple:
        return tuple(v for _, v in tuple.__iter__(self))

    def items(self) -> tuple:
        return tuple(self)


def node(cls):
    """Class decorator: frozen, identity-compared dataclass."""
    return dataclasses.dataclass(frozen=True, eq=False, repr=False)(cls)

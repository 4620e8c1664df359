"""Names in printed text: valid identifiers from name hints, and the scoped name table that
gives variables and buffers sharing a name distinct names (``i``, ``i_1``, ...) while
letting sibling scopes reuse a name."""
from __future__ import annotations

import keyword
from typing import Any

from engine.ir import expr as E
from engine.ir import stmt as S

# names the printer never gives to a variable or buffer (they would shadow the syntax)
RESERVED = frozenset({"T", "tir", "range", "True", "False", "None"}
                     | set(keyword.kwlist))

_SANITIZED: dict[str, str] = {}


def sanitize(hint: Any) -> str:
    """A valid Python identifier derived from a name hint."""
    hint = str(hint)
    out = _SANITIZED.get(hint)
    if out is not None:
        return out
    s = "".join(c if (c.isalnum() or c == "_") and c.isascii() else "_" for c in hint)
    if not s:
        s = "v"
    elif s[0].isdigit():
        s = "v_" + s
    if keyword.iskeyword(s):
        s = s + "_"
    if len(_SANITIZED) < 100000:
        _SANITIZED[hint] = s
    return s


class NameTable:
    """The scoped name table of one printing job (mixed into the printer)."""

    def reset_names(self) -> None:
        self.name_of: dict[int, str] = {}
        self.active: set[str] = set(RESERVED)
        self.frames: list[list] = [[]]
        self.free_vars: list[E.Var] = []
        self.loop_of: dict[int, S.For] = {}
        self.keep: list = []  # keeps defined objects alive while their ids are in use

    def _fresh(self, hint: Any) -> str:
        base = sanitize(hint)
        if base not in self.active:
            return base
        k = 1
        active = self.active
        while f"{base}_{k}" in active:
            k += 1
        return f"{base}_{k}"

    def define(self, obj: Any, hint: Any, frame: int = -1) -> str:
        name = self._fresh(hint)
        self.active.add(name)
        key = id(obj)
        self.frames[frame].append((key, name, self.name_of.get(key)))
        self.name_of[key] = name
        self.keep.append(obj)
        return name

    def push(self) -> None:
        self.frames.append([])

    def pop(self) -> None:
        frame = self.frames.pop()
        for key, name, prev in reversed(frame):
            self.active.discard(name)
            if prev is None:
                self.name_of.pop(key, None)
            else:
                self.name_of[key] = prev

    def name(self, obj: Any) -> str:
        n = self.name_of.get(id(obj))
        if n is None:  # used but never defined: a free variable/buffer, function-wide name
            n = self.define(obj, getattr(obj, "name", "v"), frame=0)
            if isinstance(obj, E.Var):
                self.free_vars.append(obj)
        return n


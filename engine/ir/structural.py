"""Structural equality and hashing (variables and buffers compared up to renaming).

Two trees are structurally equal when they have the same node kinds, constants,
dtypes, block names and shapes, and their variables/buffers correspond one to one.
As in TVM's ``tvm.ir.structural_equal``, a variable is matched with another where both
are *defined* — a loop's variable, a block's axis, a let's variable, the variables of a
function's parameters — and every later use must agree with that; a *free* variable (used
but not defined within the trees compared) equals only itself, unless
``map_free_vars=True`` (then free variables correspond one to one on first sight too).
So ``(vi, vj)`` and ``(vj, vi)`` are not equal when ``vi`` and ``vj`` are free. A function
is a root: within a PrimFunc compared whole, the variables it uses without defining (its
symbolic sizes) are matched on first sight.
Names are not compared, as in TVM: not variables', not blocks' (``name_hint``), not
buffers'; a function's name is (it is TVM's ``global_symbol``).
"""
from __future__ import annotations

import enum
import hashlib
import math
from typing import Any

from .buffer import Buffer
from .expr import Var
from .functor import field_names
from .node import AttrMap, Node


#: the field of each node class that defines a variable (its first field: defined before
#: any use inside the node is compared)
_DEFINES = {"For": "loop_var", "IterVar": "var", "LetStmt": "var", "Let": "var"}
#: fields TVM leaves out of structural equality and hashing
_IGNORED = {("Block", "name_hint")}


class _Equal:
    def __init__(self, map_free_vars: bool = False) -> None:
        self.lmap: dict[int, Any] = {}
        self.rmap: dict[int, Any] = {}
        self.map_free_vars = map_free_vars
        self.defining = False       # comparing a function's parameters: their vars define

    def use(self, a: Any, b: Any) -> bool:
        """Two variables in use: bound to each other, or the same free variable."""
        la = self.lmap.get(id(a))
        rb = self.rmap.get(id(b))
        if la is None and rb is None:
            if self.map_free_vars or self.defining:
                return self.bind(a, b)
            return a is b
        return la is b and rb is a

    def define(self, a: Any, b: Any) -> bool:
        if not (isinstance(a, Var) and isinstance(b, Var)) or a.dtype != b.dtype:
            return self.eq(a, b)
        if self.lmap.get(id(a)) is None and self.rmap.get(id(b)) is None:
            return self.bind(a, b)
        return self.lmap.get(id(a)) is b and self.rmap.get(id(b)) is a

    def bind(self, a: Any, b: Any) -> bool:
        la = self.lmap.get(id(a))
        rb = self.rmap.get(id(b))
        if la is None and rb is None:
            self.lmap[id(a)] = b
            self.rmap[id(b)] = a
            return True
        return la is b and rb is a

    def eq(self, a: Any, b: Any) -> bool:
        if a is b and not isinstance(a, (Var, Buffer)):
            # identical subtrees are equal unless they contain vars bound differently;
            # binding consistency is only checked on first sight, so walk them anyway
            if not isinstance(a, (Node, tuple)):
                return True
        if isinstance(a, Var) or isinstance(b, Var):
            if not (isinstance(a, Var) and isinstance(b, Var)):
                return False
            return a.dtype == b.dtype and self.use(a, b)
        if isinstance(a, Buffer) or isinstance(b, Buffer):
            if not (isinstance(a, Buffer) and isinstance(b, Buffer)):
                return False
            known = self.lmap.get(id(a))
            if known is not None or self.rmap.get(id(b)) is not None:
                return known is b and self.rmap.get(id(b)) is a
            if not self.bind(a, b):
                return False
            return (a.dtype == b.dtype and a.scope == b.scope
                    and a.elem_offset == b.elem_offset and a.align == b.align
                    and self.eq(a.shape, b.shape) and self.eq(a.strides, b.strides))
        if isinstance(a, AttrMap) or isinstance(b, AttrMap):
            # a dict annotation value: the same keys (in any order, as TVM's Map), values
            # equal structurally
            if not (isinstance(a, AttrMap) and isinstance(b, AttrMap)) or \
                    len(a) != len(b) or set(a.keys()) != set(b.keys()):
                return False
            return all(self.eq(a[k], b[k]) for k in a.keys())
        if isinstance(a, tuple) or isinstance(b, tuple):
            if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
                return False
            return all(self.eq(x, y) for x, y in zip(a, b))
        if getattr(a, "structural_var", False) or getattr(b, "structural_var", False):
            # a variable of a higher-level IR (Relax): bound one to one on first sight,
            # compared by kind and struct info, not by name
            if type(a) is not type(b):
                return False
            known = self.lmap.get(id(a))
            if known is not None or self.rmap.get(id(b)) is not None:
                return known is b and self.rmap.get(id(b)) is a
            return self.bind(a, b) and self.eq(a.struct_info, b.struct_info)
        if isinstance(a, Node) or isinstance(b, Node):
            if type(a) is not type(b):
                return False
            kind = type(a).__name__
            if kind == "PrimFunc" and not self.map_free_vars:
                # a function is a root: a variable it uses without defining (a symbolic
                # size written ``n = T.int32()``) is its own, matched on first sight
                self.map_free_vars = True
                try:
                    return self.eq(a, b)
                finally:
                    self.map_free_vars = False
            defined = _DEFINES.get(kind)
            for f in field_names(type(a)):
                if (kind, f) in _IGNORED:
                    continue
                if f == defined:
                    ok = self.define(getattr(a, f), getattr(b, f))
                elif kind == "PrimFunc" and f == "params":
                    self.defining, was = True, self.defining
                    try:
                        ok = self.eq(a.params, b.params)
                    finally:
                        self.defining = was
                else:
                    ok = self.eq(getattr(a, f), getattr(b, f))
                if not ok:
                    return False
            return True
        if isinstance(a, float) and isinstance(b, float):
            return a == b or (math.isnan(a) and math.isnan(b))
        return type(a) is type(b) and a == b


def structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> bool:
    """True when ``a`` and ``b`` have the same structure (see module docstring; free
    variables equal only themselves unless ``map_free_vars``)."""
    return _Equal(map_free_vars).eq(a, b)


class _Hasher:
    """Walks a tree into a list of tokens; the digest is the blake2b of the tokens, each
    followed by a NUL byte (hashed once, at the end: one update per token was most of
    the time of hashing a small program)."""

    def __init__(self) -> None:
        self.ids: dict[int, int] = {}
        self.parts: list[str] = []
        self.put = self.parts.append

    def digest(self) -> str:
        self.parts.append("")
        return hashlib.blake2b("\x00".join(self.parts).encode(), digest_size=16).hexdigest()

    def walk(self, v: Any) -> None:
        if isinstance(v, Var):
            idx = self.ids.setdefault(id(v), len(self.ids))
            self.put(f"V{idx}:{v.dtype}")
            return
        if isinstance(v, Buffer):
            idx = self.ids.get(id(v))
            if idx is not None:
                self.put(f"B{idx}")
                return
            self.ids[id(v)] = len(self.ids)
            self.put(f"Bdef:{v.dtype}:{v.scope}:{v.elem_offset}:{v.align}")
            self.walk(v.shape)
            self.walk(v.strides)
            return
        if isinstance(v, AttrMap):
            self.put(f"M{len(v)}")
            for k in sorted(v.keys(), key=repr):
                self.put(f"K{k!r}")
                self.walk(v[k])
            return
        if isinstance(v, tuple):
            self.put(f"T{len(v)}")
            for x in v:
                self.walk(x)
            return
        if getattr(v, "structural_var", False):
            idx = self.ids.get(id(v))
            if idx is not None:
                self.put(f"R{idx}")
                return
            self.ids[id(v)] = len(self.ids)
            self.put(f"Rdef:{type(v).__name__}")
            self.walk(v.struct_info)
            return
        if isinstance(v, Node):
            kind = type(v).__name__
            self.put(kind)
            for f in field_names(type(v)):
                if (kind, f) not in _IGNORED:
                    value = getattr(v, f)
                    if kind == "Block" and f == "match_buffers" and not value:
                        continue   # (the hashes of blocks without views stay as they were)
                    self.walk(value)
            return
        if isinstance(v, enum.Enum):
            self.put(f"E{v.value}")
            return
        self.put(f"{type(v).__name__}:{v!r}")


def structural_hash(a: Any) -> str:
    """A hex digest equal for structurally equal trees (used as a compile-cache key)."""
    h = _Hasher()
    h.walk(a)
    return h.digest()

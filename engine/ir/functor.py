"""Generic traversal and rewriting of IR trees.

* :func:`post_order_visit` — call ``fn`` on every node, children first.
* :class:`Mutator` — rebuild a tree; override ``visit_<ClassName>`` for the nodes you
  change, everything else is copied only when a child changed (sharing is kept).
* :func:`substitute` — replace variables by expressions.

Buffers are leaves: the generic walk does not enter them, but a Mutator may map them
through :meth:`Mutator.visit_buffer` (used by cache_read, transform_layout, ...).
"""
from __future__ import annotations

import dataclasses
import enum
import operator
from typing import Any, Callable, Mapping

from .buffer import Buffer
from .expr import PrimExpr, Var
from .node import Node

_FIELDS: dict[type, tuple[str, ...]] = {}


def field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls)
                      if f.metadata.get("structural", True))  # e.g. IRModule.workload
        _FIELDS[cls] = names
    return names


def children(n: Any):
    """Direct child nodes of ``n`` (flattening tuples), excluding buffers."""
    if isinstance(n, tuple):
        for x in n:
            yield from _child(x)
        return
    for name in field_names(type(n)):
        yield from _child(getattr(n, name))


def _child(v: Any):
    if isinstance(v, Buffer):
        return
    if isinstance(v, Node):
        yield v
    elif isinstance(v, tuple):
        for x in v:
            yield from _child(x)


def _kids(n: Any, out: list) -> list:
    """Append the direct child nodes of ``n`` to ``out`` (as :func:`children`, no generators:
    this runs for every node of every walk)."""
    for v in (n if isinstance(n, tuple) else _fields_of(n)):
        if isinstance(v, Node):
            if not isinstance(v, Buffer):
                out.append(v)
        elif isinstance(v, tuple):
            _kids(v, out)
    return out


#: per node class, a function returning its structural fields' values as a tuple (one
#: C-level call instead of a getattr per field)
_GETTERS: dict[type, Callable[[Any], tuple]] = {}


def _fields_of(n: Any) -> tuple:
    get = _GETTERS.get(type(n))
    if get is None:
        names = field_names(type(n))
        if not names:
            get = _no_fields
        elif len(names) == 1:
            one = operator.attrgetter(names[0])
            get = (lambda x: (one(x),))
        else:
            get = operator.attrgetter(*names)
        _GETTERS[type(n)] = get
    return get(n)


def _no_fields(n: Any) -> tuple:
    return ()


def post_order_visit(n: Any, fn: Callable[[Any], None]) -> None:
    """Call ``fn(node)`` on every node reachable from ``n`` (not entering buffers)."""
    stack: list[tuple[Any, bool]] = [(n, False)]
    while stack:
        cur, done = stack.pop()
        if done:
            fn(cur)
            continue
        stack.append((cur, True))
        if isinstance(cur, (Node, tuple)):
            for k in reversed(_kids(cur, [])):
                stack.append((k, False))


def pre_order_visit(n: Any, fn: Callable[[Any], bool | None]) -> None:
    """Call ``fn(node)`` parents first; if it returns False the subtree is skipped."""
    if fn(n) is False:
        return
    for k in _kids(n, []):
        pre_order_visit(k, fn)


class Mutator:
    """Rebuild-on-change IR rewriter (statements and expressions)."""

    def visit(self, n: Any) -> Any:
        if n is None:
            return None
        if isinstance(n, tuple):
            return self._visit_tuple(n)
        if isinstance(n, Buffer):
            return self.visit_buffer(n)
        meth = getattr(self, "visit_" + type(n).__name__, None)
        if meth is not None:
            return meth(n)
        return self.generic_visit(n)

    def visit_buffer(self, buf: Buffer) -> Buffer:
        return buf

    def _visit_tuple(self, t: tuple) -> tuple:
        out = tuple(self._visit_value(x) for x in t)
        if all(a is b for a, b in zip(out, t)):
            return t
        return out

    def _visit_value(self, v: Any) -> Any:
        if isinstance(v, (Node, tuple)):
            return self.visit(v)
        return v

    def generic_visit(self, n: Any) -> Any:
        changes = {}
        for name, old in zip(field_names(type(n)), _fields_of(n)):
            if isinstance(old, (Node, tuple)):
                new = self.visit(old)
                if new is not old:
                    changes[name] = new
        if not changes:
            return n
        return dataclasses.replace(n, **changes)


class _Substituter(Mutator):
    def __init__(self, vmap: Mapping[Var, PrimExpr]):
        self.vmap = vmap

    def visit_Var(self, v: Var) -> PrimExpr:
        return self.vmap.get(v, v)


def substitute(n: Any, vmap: Mapping[Var, Any]) -> Any:
    """Replace each variable ``v`` in ``vmap`` by ``vmap[v]`` everywhere in ``n``."""
    if not vmap:
        return n
    from .expr import convert
    return _Substituter({k: convert(v) for k, v in vmap.items()}).visit(n)


def collect_vars(n: Any) -> list[Var]:
    """Variables used in ``n`` (in first-use order, without duplicates)."""
    seen: dict[int, Var] = {}

    def fn(x: Any) -> None:
        if isinstance(x, Var) and id(x) not in seen:
            seen[id(x)] = x

    post_order_visit(n, fn)
    return list(seen.values())


def uses_var(n: Any, var: Var) -> bool:
    found = False

    def fn(x: Any) -> bool | None:
        nonlocal found
        if found:
            return False
        if x is var:
            found = True
            return False
        return None

    pre_order_visit(n, fn)
    return found


def collect(n: Any, cls: type | tuple, into_expressions: bool = True) -> list:
    """All nodes of the given class(es) under ``n``, in pre-order; with
    ``into_expressions=False`` the walk does not descend into expressions (see
    :func:`collect_stmts`)."""
    out: list = []

    def fn(x: Any) -> bool | None:
        if not into_expressions and isinstance(x, PrimExpr):
            return False
        if isinstance(x, cls):
            out.append(x)
        return None

    pre_order_visit(n, fn)
    return out


def collect_stmts(n: Any, cls: type | tuple) -> list:
    """All statements of the given class(es) under ``n``, in pre-order, without walking
    into expressions (no expression holds a statement). On an unrolled, vectorized kernel
    most nodes are index arithmetic: finding its stores this way visits a tenth of them."""
    return collect(n, cls, into_expressions=False)


def is_leaf_value(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool, enum.Enum)) or v is None

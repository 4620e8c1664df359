"""How large a program is, counted at a cost bounded by the count asked for.

The IR shares subtrees (a substitution puts the same expression object at every use), so
a program can hold far more nodes *as a tree* — which is what printing, hashing and
lowering walk — than objects in memory: inlining a chain of stages that each read their
producer twice doubles the tree at every step. :func:`tree_size` counts the tree (a shared
subtree once per use) and stops as soon as the count passes ``limit``, so asking "is this
program over N nodes?" costs at most N steps whatever the program.

    >>> tree_size(func, limit=100_000)      # the count, or limit + 1 when over it
"""
from __future__ import annotations

from typing import Any

from .functor import _kids
from .node import Node

__all__ = ["tree_size"]


def tree_size(node: Any, limit: int) -> int:
    """The number of IR nodes under ``node`` counted as a tree (buffers are leaves, not
    counted), or ``limit + 1`` as soon as it is known to be over ``limit``."""
    count = 0
    stack = [node]
    while stack:
        cur = stack.pop()
        count += 1
        if count > limit:
            return limit + 1
        if isinstance(cur, (Node, tuple)):
            _kids(cur, stack)
    return count

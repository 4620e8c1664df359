"""Navigation and copy-on-write replacement over the immutable statement tree.

Schedule primitives are pure functions over a :class:`~engine.ir.PrimFunc`; they use
:class:`FuncIndex` to find loops/blocks and their parents, and :func:`replace_stmts`
to build the new function with some statements swapped (sharing everything else).

Only statements are indexed (For, Block, BlockRealize, SeqStmt, IfThenElse, ...);
expressions are never entered.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from engine.ir import expr as E
from engine.ir.stmt import (Allocate, Block, BlockRealize, For, IfThenElse, LetStmt, SeqStmt,
                            Stmt, seq)

_STMT_FIELDS = {
    For: ("body",),
    Block: ("init", "body"),
    BlockRealize: ("block",),
    SeqStmt: ("seq",),
    IfThenElse: ("then_case", "else_case"),
    LetStmt: ("body",),
    Allocate: ("body",),
}


def stmt_children(s: Any) -> list[Stmt]:
    """Direct child statements of ``s`` (in execution order)."""
    fields = _STMT_FIELDS.get(type(s))
    if not fields:
        return []
    out: list[Stmt] = []
    for f in fields:
        v = getattr(s, f)
        if v is None:
            continue
        if isinstance(v, tuple):
            out.extend(v)
        else:
            out.append(v)
    return out


class FuncIndex:
    """Parent links and look-up tables for one PrimFunc (built once, read-only).

    * ``parent[id(stmt)]`` — the enclosing statement (None for ``func.body``).
    * ``loops`` — loop variable -> For; ``blocks`` — name -> [Block, ...].
    * ``realize[id(block)]`` — the BlockRealize of a block.
    * ``order[id(stmt)]`` — pre-order position (execution order of statements).
    """

    def __init__(self, func: Any):
        self.func = func
        self.parent: dict[int, Any] = {}
        self.loops: dict[E.Var, For] = {}
        self.blocks: dict[str, list[Block]] = {}
        self.realize: dict[int, BlockRealize] = {}
        self.order: dict[int, int] = {}
        self.end: dict[int, int] = {}
        self._walk(func.body, None)

    def _walk(self, root: Any, parent: Any) -> None:
        counter = 0
        stack: list[tuple[Any, Any, bool]] = [(root, parent, False)]
        while stack:
            s, p, done = stack.pop()
            if done:
                self.end[id(s)] = counter
                continue
            self.parent[id(s)] = p
            self.order[id(s)] = counter
            counter += 1
            if isinstance(s, For):
                self.loops[s.loop_var] = s
            elif isinstance(s, BlockRealize):
                self.realize[id(s.block)] = s
            elif isinstance(s, Block):
                self.blocks.setdefault(s.name_hint, []).append(s)
            stack.append((s, p, True))
            for c in reversed(stmt_children(s)):
                stack.append((c, s, False))

    # ------------------------------------------------------------------ queries
    @property
    def root_block(self) -> Block:
        return self.func.body.block

    def all_blocks(self) -> list[Block]:
        """Every block except the root, in execution order."""
        out = [b for bs in self.blocks.values() for b in bs if b is not self.root_block]
        out.sort(key=lambda b: self.order[id(b)])
        return out

    def contains(self, outer: Any, inner: Any) -> bool:
        """True when ``inner`` is inside ``outer``'s subtree (or is ``outer``)."""
        o, i = self.order[id(outer)], self.order[id(inner)]
        return o <= i < self.end[id(outer)]

    def ancestors(self, s: Any) -> list[Any]:
        """Enclosing statements of ``s``, innermost first (not including ``s``)."""
        out = []
        p = self.parent.get(id(s))
        while p is not None:
            out.append(p)
            p = self.parent.get(id(p))
        return out

    def scope_block(self, s: Any) -> Block:
        """The nearest block strictly enclosing ``s`` (the root block at the top)."""
        for a in self.ancestors(s):
            if isinstance(a, Block):
                return a
        return self.root_block

    def loops_above(self, s: Any) -> list[For]:
        """The loops between ``s`` and its scope block, outermost first (TVM get_loops)."""
        out = []
        for a in self.ancestors(s):
            if isinstance(a, Block):
                break
            if isinstance(a, For):
                out.append(a)
        out.reverse()
        return out

    def child_blocks(self, s: Any) -> list[Block]:
        """Blocks under ``s`` that are not nested inside another block below ``s``."""
        if isinstance(s, BlockRealize):
            s = s.block
        start = [s.body] if isinstance(s, Block) else stmt_children(s)
        out: list[Block] = []
        stack = list(reversed(start))
        while stack:
            c = stack.pop()
            if isinstance(c, BlockRealize):
                out.append(c.block)
                continue
            stack.extend(reversed(stmt_children(c)))
        return out

    def removal_root(self, s: Any) -> Any:
        """The statement to delete so that ``s`` disappears without leaving empty loops:
        climbs through enclosing loops whose only child is the current statement."""
        cur = s
        if isinstance(cur, Block):
            cur = self.realize[id(cur)]
        while True:
            p = self.parent.get(id(cur))
            if isinstance(p, For):
                cur = p
                continue
            return cur

    def blocks_under(self, s: Any) -> list[Block]:
        """All blocks in the subtree of ``s`` (nested ones too), in execution order."""
        out = []
        stack = [s]
        while stack:
            c = stack.pop()
            if isinstance(c, Block) and c is not s:
                out.append(c)
            stack.extend(reversed(stmt_children(c)))
        return out

    def find_block(self, name: str) -> Block | None:
        bs = self.blocks.get(name)
        if not bs:
            return None
        return bs[0]


def iter_stmts(s: Any) -> Iterator[Any]:
    """Pre-order walk over statements."""
    stack = [s]
    while stack:
        c = stack.pop()
        yield c
        stack.extend(reversed(stmt_children(c)))


def map_children(s: Any, fn: Callable[[Any], Any]) -> Any:
    """``s`` with each child statement ``c`` replaced by ``fn(c)`` — ``s`` itself when
    nothing changes. A child mapped to None leaves its sequence; a SeqStmt becomes the
    flattened sequence of its new children (None when none is left)."""
    fields = _STMT_FIELDS.get(type(s))
    if not fields:
        return s
    changes = {}
    for f in fields:
        v = getattr(s, f)
        if v is None:
            continue
        if isinstance(v, tuple):
            new_items = [fn(x) for x in v]
            if any(a is not b for a, b in zip(new_items, v)):
                changes[f] = seq(*new_items)  # seq drops None items
        else:
            nv = fn(v)
            if nv is not v:
                changes[f] = nv
    if not changes:
        return s
    if isinstance(s, SeqStmt):
        return changes["seq"]
    for f, v in changes.items():
        if v is None and f in ("body", "block", "then_case"):
            raise ValueError(f"cannot remove the only statement in the {f} of a {type(s).__name__}")
    return s.replace(**changes)


def _rebuild(s: Any, mapping: dict[int, Any]) -> Any:
    if id(s) in mapping:
        return mapping[id(s)]
    return map_children(s, lambda c: _rebuild(c, mapping))


def replace_stmts(func: Any, mapping: dict[Any, Any]) -> Any:
    """A new PrimFunc with each statement ``old`` (key, by identity) replaced by ``new``.

    A value of ``None`` removes the statement from its enclosing sequence.
    """
    if not mapping:
        return func
    by_id = {id(k): v for k, v in mapping.items()}
    body = _rebuild(func.body, by_id)
    return func if body is func.body else func.replace(body=body)


def remove_from(parent_body: Any, target: Any) -> Any:
    """``parent_body`` (a statement or SeqStmt) without ``target`` (None if empty)."""
    if parent_body is target:
        return None
    if isinstance(parent_body, SeqStmt):
        return seq(*[x for x in parent_body.seq if x is not target])
    return parent_body


def flatten_seq(s: Any) -> list[Any]:
    if s is None:
        return []
    if isinstance(s, SeqStmt):
        return list(s.seq)
    return [s]


def loop_nest_from(loops: Iterable[For], body: Any) -> Any:
    """Wrap ``body`` in copies of ``loops`` (outermost first), keeping vars/kinds."""
    for lp in reversed(list(loops)):
        body = lp.replace(body=body)
    return body

"""A view of a PrimFunc's loop nest as the explorer shows it: loops and blocks with addresses.

Every loop and block the page shows gets a *selection id* that tells the server how to find it
again with the schedule API, the way course code does::

    B/<func>/<block>            sch.get_block(<block>, func_name=<func>)
    L/<func>/<index>/<block>    sch.get_loops(sch.get_block(<block>, ...))[<index>]

A loop is addressed through the first block beneath it and its position among that block's
enclosing loops (loop names are not unique: mm_relu has an ``i`` above Y and another above C).
The program pane (through the printer's span map) and the diagram both use these ids, so a
selection highlights the same thing in both.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.ir import (Block, BlockRealize, For, ForKind, IfThenElse, IRModule, LetStmt, PrimFunc,
                       SeqStmt, as_const_int, collect_vars)
from engine.ir.stmt import Allocate

from ..kept import MiB, KeptByIdentity, ir_bytes
from ..limits import whole_number


@dataclass
class LoopNode:
    node: For
    name: str
    extent: int | None
    extent_text: str
    kind: str                      # "serial" | "parallel" | "vectorized" | "unroll"
    children: list = field(default_factory=list)
    sel: str | None = None         # selection id (None when no block lies beneath)
    block: str | None = None       # the block it is addressed through
    index: int = 0                 # position in get_loops(block)
    depth: int = 0

    is_loop = True


@dataclass
class BlockNode:
    node: Block
    name: str
    reads: list
    writes: list
    has_init: bool
    iter_kinds: str                # e.g. "SSR"
    sel: str = ""
    children: list = field(default_factory=list)   # nested blocks/loops (rare)
    depth: int = 0
    predicate: bool = False
    reduce_loop_vars: tuple = ()   # loop variables bound to the block's reduction axes

    is_loop = False


@dataclass
class FuncTree:
    func_name: str
    roots: list
    by_sel: dict
    by_node: dict                  # id(IR node) -> LoopNode | BlockNode
    allocs: list                   # intermediate buffers (root alloc_buffers)
    params: list                   # parameter buffers


def _extent(e) -> tuple[int | None, str]:
    v = as_const_int(e)
    if v is not None:
        return v, str(v)
    try:
        return None, repr(e)
    except Exception:  # noqa: BLE001
        return None, "?"


def _region_names(regions) -> list[str]:
    out = []
    for r in regions:
        name = getattr(getattr(r, "buffer", None), "name", "?")
        if name not in out:
            out.append(name)
    return out


def build_tree(func: PrimFunc, func_name: str | None = None) -> FuncTree:
    """Walk ``func`` and return its loop/block tree with selection ids."""
    fname = func_name or func.name
    by_sel: dict[str, Any] = {}
    by_node: dict[int, Any] = {}

    def walk(stmt, loop_stack: list[LoopNode], depth: int) -> list:
        if stmt is None:
            return []
        if isinstance(stmt, SeqStmt):
            out = []
            for s in stmt.seq:
                out.extend(walk(s, loop_stack, depth))
            return out
        if isinstance(stmt, For):
            extent, text = _extent(stmt.extent)
            kind = stmt.kind.value if isinstance(stmt.kind, ForKind) else str(stmt.kind)
            ln = LoopNode(stmt, stmt.loop_var.name, extent, text, kind, depth=depth,
                          index=len(loop_stack))
            by_node[id(stmt)] = ln
            ln.children = walk(stmt.body, loop_stack + [ln], depth + 1)
            return [ln]
        if isinstance(stmt, BlockRealize):
            blk = stmt.block
            kinds = "".join(getattr(iv.iter_type, "value", "?") for iv in blk.iter_vars)
            pred = as_const_int(stmt.predicate)
            bn = BlockNode(blk, blk.name_hint, _region_names(blk.reads), _region_names(blk.writes),
                           blk.init is not None, kinds, depth=depth, predicate=pred != 1)
            red: list = []
            for iv, value in zip(blk.iter_vars, stmt.iter_values):
                if getattr(iv.iter_type, "value", "") == "R":
                    red.extend(v for v in collect_vars(value) if all(v is not r for r in red))
            bn.reduce_loop_vars = tuple(red)
            bn.sel = f"B/{fname}/{blk.name_hint}"
            by_sel[bn.sel] = bn
            by_node[id(blk)] = bn
            by_node[id(stmt)] = bn
            # loops above this block that have no address yet are addressed through it
            for ln in loop_stack:
                if ln.sel is None:
                    ln.block = blk.name_hint
                    ln.sel = f"L/{fname}/{ln.index}/{blk.name_hint}"
                    by_sel[ln.sel] = ln
            # loops inside a nested block are counted from that block (get_loops stops there)
            bn.children = walk(blk.body, [], depth + 1)
            return [bn]
        if isinstance(stmt, Block):  # a bare block (should be wrapped; be lenient)
            return walk(BlockRealize((), 1, stmt), loop_stack, depth)
        if isinstance(stmt, IfThenElse):
            return walk(stmt.then_case, loop_stack, depth) + walk(stmt.else_case, loop_stack, depth)
        if isinstance(stmt, (LetStmt, Allocate)):
            return walk(stmt.body, loop_stack, depth)
        return []

    body = func.body
    allocs: list = []
    if isinstance(body, BlockRealize) and body.block.name_hint == "root":
        allocs = list(body.block.alloc_buffers)
        roots = walk(body.block.body, [], 0)
    else:
        roots = walk(body, [], 0)
    return FuncTree(fname, roots, by_sel, by_node, allocs, list(func.params))


#: the trees of the last modules walked, by identity: a click walks the program before it
#: and its new one, and the trace pane the program before each step
_TREES: "KeptByIdentity[list[FuncTree]]" = KeptByIdentity(
    8 * MiB, lambda mod, trees: 2 * ir_bytes(mod))


def module_trees(mod: IRModule) -> list[FuncTree]:
    """One :func:`build_tree` per function of ``mod`` (walked once per module object, see
    :class:`app.kept.KeptByIdentity`; the trees are shared: callers read them, never change
    them)."""
    return list(_TREES.get(mod, lambda: [build_tree(f, name) for name, f in mod.items()]))


def walk_tree(nodes: list):
    """Pre-order over a list of LoopNode/BlockNode."""
    for n in nodes:
        yield n
        yield from walk_tree(n.children)


def parse_sel(sel: str | None) -> dict | None:
    """Decode a selection id into ``{"kind", "func", "block", "index"}`` (None if malformed)."""
    if not sel or not isinstance(sel, str) or len(sel) > 400:
        return None
    if sel.startswith("B/"):
        parts = sel.split("/", 2)
        if len(parts) == 3 and parts[1] and parts[2]:
            return {"kind": "block", "func": parts[1], "block": parts[2], "index": None}
    elif sel.startswith("L/"):
        parts = sel.split("/", 3)
        index = whole_number(parts[2]) if len(parts) == 4 else None
        if index is not None and parts[1] and parts[3]:
            return {"kind": "loop", "func": parts[1], "block": parts[3], "index": index}
    return None


def loops_of_block(tree: FuncTree, block_name: str) -> list[LoopNode]:
    """The loops enclosing ``block_name`` (outermost first), as get_loops returns them."""

    def find(nodes, stack):
        for n in nodes:
            if n.is_loop:
                r = find(n.children, stack + [n])
                if r is not None:
                    return r
            else:
                if n.name == block_name:
                    return stack
                r = find(n.children, [])
                if r is not None:
                    return r
        return None

    return find(tree.roots, []) or []


def names_to_sels(trees: list[FuncTree], names) -> list[str]:
    """Selection ids of every loop/block whose printed name is in ``names``."""
    wanted = {str(n) for n in (names or [])}
    out = []
    for t in trees:
        for n in walk_tree(t.roots):
            if n.name in wanted and n.sel:
                out.append(n.sel)
    return out

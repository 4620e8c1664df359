"""Loop-nest summaries: the shape of a scheduled program, without its arithmetic.

A lesson step or a challenge often cares only about *where the loops are*: which loops
nest inside which, their extents and kinds (serial, parallel, vectorized, unroll), and
which blocks sit where. :func:`loop_nest` extracts that tree from a PrimFunc and
:func:`nest_lines` prints it one node per line, indented two spaces per level::

    for i in serial(128)
      for j_0 in serial(32)
        for k in serial(128)
          for j_1 in serial(4)
            block Y
        for ax0 in serial(4)
          block C

:func:`match_nest` checks such lines against a *pattern*: the same lines, where each
line may use shell wildcards (``*`` any text, ``?`` one character, ``[48]`` a set) and
a line ``...`` matches any run of lines (including none). Indentation in the pattern
is relative: the pattern's first line may be at any depth of the program, and every
pattern line must keep its indentation offset. Only the IR (:mod:`engine.ir`) is used.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any, Iterable

from engine.ir import (Block, BlockRealize, For, IfThenElse, IRModule, LetStmt, PrimFunc,
                       SeqStmt, as_const_int)
from engine.ir.stmt import Allocate

from .printer import repr_node

__all__ = ["NestNode", "loop_nest", "nest_lines", "nest_text", "match_nest", "first_difference",
           "resolve_func"]


@dataclass
class NestNode:
    """One loop (``kind`` = serial/parallel/vectorized/unroll) or block (``kind`` = "block")."""

    kind: str
    name: str
    extent: int | str | None = None
    children: list["NestNode"] = field(default_factory=list)

    @property
    def is_loop(self) -> bool:
        return self.kind != "block"

    def line(self) -> str:
        if self.is_loop:
            return f"for {self.name} in {self.kind}({self.extent})"
        return f"block {self.name}"

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"kind": self.kind, "name": self.name}
        if self.is_loop:
            d["extent"] = self.extent
        if self.children:
            d["children"] = [c.to_dict() for c in self.children]
        return d


def resolve_func(mod: Any, func_name: str | None = None) -> PrimFunc:
    """The PrimFunc to summarise: ``mod`` may be a PrimFunc, an IRModule or a Schedule.

    With several functions in the module and no ``func_name``, the first one is used.
    """
    mod = getattr(mod, "mod", mod)  # a Schedule exposes .mod
    if isinstance(mod, PrimFunc):
        return mod
    if isinstance(mod, IRModule):
        if func_name is not None:
            return mod[func_name]
        if len(mod) == 0:
            raise ValueError("the module has no functions to summarise")
        return mod.functions[0][1]
    raise TypeError(f"expected a Schedule, IRModule or PrimFunc, got {type(mod).__name__}")


def _extent(e: Any) -> int | str:
    v = as_const_int(e)
    if v is not None:
        return v
    try:
        return repr_node(e)
    except Exception:  # noqa: BLE001
        return "?"


def _walk(stmt: Any, out: list[NestNode]) -> None:
    if stmt is None:
        return
    if isinstance(stmt, SeqStmt):
        for s in stmt.seq:
            _walk(s, out)
    elif isinstance(stmt, For):
        node = NestNode(stmt.kind.value, stmt.loop_var.name, _extent(stmt.extent))
        out.append(node)
        _walk(stmt.body, node.children)
    elif isinstance(stmt, BlockRealize):
        _walk(stmt.block, out)
    elif isinstance(stmt, Block):
        node = NestNode("block", stmt.name_hint)
        out.append(node)
        # a block's own body may hold further loops (e.g. the root block, or blockized code)
        _walk(stmt.body, node.children)
    elif isinstance(stmt, IfThenElse):
        _walk(stmt.then_case, out)
        _walk(stmt.else_case, out)
    elif isinstance(stmt, (LetStmt, Allocate)):
        _walk(stmt.body, out)
    # BufferStore / Evaluate: leaves, not part of the nest


def loop_nest(mod: Any, func_name: str | None = None) -> list[NestNode]:
    """The loop/block tree of a function (the implicit ``root`` block is left out)."""
    func = resolve_func(mod, func_name)
    top: list[NestNode] = []
    _walk(func.body, top)
    if len(top) == 1 and top[0].kind == "block" and top[0].name == "root":
        return top[0].children
    return top


def nest_lines(mod: Any, func_name: str | None = None) -> list[str]:
    """:func:`loop_nest` as indented lines (two spaces per level)."""
    lines: list[str] = []

    def emit(nodes: Iterable[NestNode], depth: int) -> None:
        for n in nodes:
            lines.append("  " * depth + n.line())
            emit(n.children, depth + 1)

    emit(loop_nest(mod, func_name), 0)
    return lines


def nest_text(mod: Any, func_name: str | None = None) -> str:
    return "\n".join(nest_lines(mod, func_name))


def _split_indent(line: str) -> tuple[int, str]:
    stripped = line.lstrip(" ")
    return len(line) - len(stripped), stripped.rstrip()


def _normalise_pattern(pattern: str | Iterable[str]) -> list[tuple[int, str]]:
    lines = pattern.splitlines() if isinstance(pattern, str) else list(pattern)
    lines = [ln for ln in lines if ln.strip()]
    if not lines:
        raise ValueError("an empty loop-nest pattern matches nothing; give at least one line "
                         "such as 'for * in vectorized(*)'")
    parsed = [_split_indent(ln) for ln in lines]
    base = min(ind for ind, _ in parsed)
    return [(ind - base, text) for ind, text in parsed]


def match_nest(mod: Any, pattern: str | Iterable[str], func_name: str | None = None) -> bool:
    """True when the program's nest lines match ``pattern`` (see the module docstring).

    The pattern is matched as a contiguous run of lines that may start anywhere in the
    program's nest; ``...`` lines absorb any number of program lines.
    """
    pat = _normalise_pattern(pattern)
    prog = [_split_indent(ln) for ln in nest_lines(mod, func_name)]
    for start in range(len(prog)):
        if _match_from(prog, start, pat, 0, None):
            return True
    return False


def _match_from(prog, pi, pat, qi, base) -> bool:
    if qi == len(pat):
        return True
    ind, text = pat[qi]
    if text == "...":
        return any(_match_from(prog, j, pat, qi + 1, base) for j in range(pi, len(prog) + 1))
    if pi >= len(prog):
        return False
    pind, ptext = prog[pi]
    b = pind - ind if base is None else base
    if pind != b + ind:
        return False
    if not fnmatch.fnmatchcase(ptext, text):
        return False
    return _match_from(prog, pi + 1, pat, qi + 1, b)


def first_difference(expected: list[str], actual: list[str]) -> str | None:
    """A one-paragraph description of where two nest listings first differ (None if equal)."""
    for idx, (e, a) in enumerate(zip(expected, actual)):
        if e != a:
            return (f"line {idx + 1} of the loop nest differs: expected `{e.strip()}` "
                    f"(depth {(len(e) - len(e.lstrip())) // 2}) but found `{a.strip()}` "
                    f"(depth {(len(a) - len(a.lstrip())) // 2})")
    if len(expected) > len(actual):
        return f"the loop nest is missing `{expected[len(actual)].strip()}` and what follows it"
    if len(actual) > len(expected):
        return f"the loop nest has an extra `{actual[len(expected)].strip()}` at the end"
    return None

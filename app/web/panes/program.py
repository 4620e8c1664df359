"""The program pane: the TVMScript text, cut into clickable loops and blocks, with the lines
the last step changed marked (and the diff pane's rows: before/after of the last step).

The text is printed in the session's dialect (``dialect=`` in the link: the course's 2022
TVMScript or Apache TVM 0.27's); the pane's toggle links switch it.

The printer's span map (``engine.script.script_with_spans``) says which lines each loop and
block covers; :mod:`app.web.selection` gives each of them its selection id.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from engine.script import script_with_spans
from engine.script.printer import ScriptTooLarge

from ...errors import AppError
from ...kept import MiB, KeptByIdentity, ir_bytes
from ..selection import FuncTree
from ..services import limits
from ..session import DIALECTS
from . import diff


@dataclass
class Seg:
    """A piece of a program line; clickable when ``sel`` is set."""

    text: str
    sel: str | None = None
    start: int | None = None
    end: int | None = None
    kind: str = ""
    #: the loop's name, for a loop (the badge "vectorized by LLVM" finds its line by it)
    name: str = ""


@dataclass
class Line:
    no: int
    text: str
    sel: str | None = None          # selection id of the first loop/block starting here
    end: int | None = None          # last line of that loop/block
    kind: str = ""
    changed: bool = False
    segs: list = field(default_factory=list)   # the line cut into clickable pieces


def _segments(line: Line, entries: list) -> list[Seg]:
    """Cut a line into pieces: one loop/block starting here -> the whole statement is
    clickable; several (``for i, j, k in T.grid(...)``) -> each loop name is."""
    text = line.text
    if not entries:
        return [Seg(text)]
    indent = len(text) - len(text.lstrip(" "))
    if len(entries) == 1:
        sel, end, kind, name = entries[0]
        return [Seg(text[:indent]), Seg(text[indent:], sel, line.no, end, kind,
                                        name if kind == "loop" else "")]
    head, sep, _rest = text.partition(" in ")
    segs: list[Seg] = []
    pos = 0
    for sel, end, kind, name in entries:
        m = re.search(r"\b" + re.escape(name) + r"\b", head[pos:]) if name else None
        if m is None:
            continue
        a, b = pos + m.start(), pos + m.end()
        segs.append(Seg(text[pos:a]))
        segs.append(Seg(text[a:b], sel, line.no, end, kind, name if kind == "loop" else ""))
        pos = b
    segs.append(Seg(text[pos:]))
    return [sg for sg in segs if sg.text or sg.sel]


def program_lines(text: str, spans, trees: list[FuncTree], changed: set[int]) -> list[Line]:
    """The printed program (``text`` and its span map) as lines of clickable pieces."""
    lines = [Line(i + 1, t, changed=(i + 1) in changed) for i, t in enumerate(text.splitlines())]
    by_node: dict[int, Any] = {}
    for t in trees:
        by_node.update(t.by_node)
    starts: dict[int, list] = {}
    for sp in spans:
        if sp.kind not in ("loop", "block"):
            continue
        entry = by_node.get(id(sp.node))
        start = sp.start_line
        if entry is None or not entry.sel or not 1 <= start <= len(lines):
            continue
        lst = starts.setdefault(start, [])
        if all(e[0] != entry.sel for e in lst):
            lst.append((entry.sel, sp.end_line or start, sp.kind, sp.name or entry.name))
    for ln in lines:
        entries = starts.get(ln.no, [])
        if entries:
            ln.sel, ln.end, ln.kind = entries[0][0], entries[0][1], entries[0][2]
        ln.segs = _segments(ln, entries)
    return lines


#: the last programs printed, by module identity and dialect: a click prints its new
#: program, and its diff needs the program before it, which the click before printed
_PRINTED: "KeptByIdentity[tuple[str, Any]]" = KeptByIdentity(
    8 * MiB, lambda mod, printed: ir_bytes(mod) + 3 * len(printed[0]))


def printed(mod, dialect: str) -> tuple[str, Any]:
    """``engine.script.script_with_spans(mod, dialect=dialect)``: the text and its span
    map, printed once per module object and dialect (see :class:`app.kept.KeptByIdentity`);
    a program whose text would be over ``max_printed_chars`` is a 400 naming the limit."""
    return _PRINTED.get(mod, lambda: _print(mod, dialect), dialect)


def program_text(mod, dialect: str = "course-2022") -> str:
    """The text of :func:`printed` alone."""
    return printed(mod, dialect)[0]


def _print(mod, dialect: str) -> tuple[str, Any]:
    cap = limits().max_printed_chars
    try:
        return script_with_spans(mod, dialect=dialect, max_chars=cap)
    except ScriptTooLarge:
        raise AppError(400, "Over a limit", f"This program's text is longer than {cap} "
                       "characters (max_printed_chars): the explorer does not show programs "
                       "that large. Undo the step that made it grow.") from None


def context(session, mod, trees: list[FuncTree]) -> dict:
    """The program pane and the diff pane of the current step (``lines``, ``diff_rows``,
    ``diff_summary``)."""
    dialect = session.dialect
    text, spans = printed(mod, dialect)
    ctx: dict[str, Any] = {"dialects": [
        (d, label, d == dialect, session.url(dialect=d)) for d, label in DIALECTS.items()]}
    ctx.update(diff_context(session, text))
    rows = ctx["diff_rows"] or []
    changed = {r.new for r in rows if r.kind == "add"}
    ctx["lines"] = program_lines(text, spans, trees, changed)
    ctx["program_text"] = text
    return ctx


def diff_context(session, text: str | None = None) -> dict:
    """The diff pane of the current step (``diff_rows``: None at step 0, ``diff_summary``);
    ``text`` is the current program as printed, when the caller has it."""
    if session.at <= 0:
        return {"diff_rows": None}
    dialect = session.dialect
    if text is None:
        text = printed(session.mod_at(session.at), dialect)[0]
    rows = diff.diff_rows(printed(session.mod_at(session.at - 1), dialect)[0], text)
    return {"diff_rows": rows, "diff_summary": diff.summary(rows)}

"""Before/after view of one schedule step: the whole program, changed lines marked.

:func:`diff_rows` aligns the two texts with :mod:`difflib` and returns one row per displayed
line — ``("same" | "del" | "add", old_lineno, new_lineno, text)`` — so the template can show the
program once, with removed lines struck through in red and added lines in green.

Its cost is bounded in advance: the lines both texts begin and end with are matched
first (linear), and :mod:`difflib` aligns what is left only when that is at most
:data:`MAX_ALIGNED` line pairs (its worst case is quadratic or worse in the lines); beyond,
the middle of the old text is shown removed and the middle of the new added.
:func:`changed_new_lines` gives the line numbers of the new text that the step added or
changed (the program pane marks them in its gutter).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass
class Row:
    kind: str          # "same" | "del" | "add"
    old: int | None    # 1-based line number in the old text
    new: int | None    # 1-based line number in the new text
    text: str


#: line pairs difflib may align (old lines x new lines left after the common ends)
MAX_ALIGNED = 1 << 20


def _opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes for ``a`` -> ``b``, within :data:`MAX_ALIGNED` (see the module)."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    ea, eb = len(a) - tail, len(b) - tail
    out = [("equal", 0, head, 0, head)] if head else []
    if (ea - head) * (eb - head) <= MAX_ALIGNED:
        sm = difflib.SequenceMatcher(a=a[head:ea], b=b[head:eb], autojunk=False)
        out += [(t, i1 + head, i2 + head, j1 + head, j2 + head)
                for t, i1, i2, j1, j2 in sm.get_opcodes()]
    else:
        out.append(("replace", head, ea, head, eb))
    if tail:
        out.append(("equal", ea, len(a), eb, len(b)))
    return out


def diff_rows(old: str, new: str) -> list[Row]:
    a = old.splitlines()
    b = new.splitlines()
    rows: list[Row] = []
    for tag, i1, i2, j1, j2 in _opcodes(a, b):
        if tag == "equal":
            for k in range(i2 - i1):
                rows.append(Row("same", i1 + k + 1, j1 + k + 1, a[i1 + k]))
            continue
        for k in range(i1, i2):
            rows.append(Row("del", k + 1, None, a[k]))
        for k in range(j1, j2):
            rows.append(Row("add", None, k + 1, b[k]))
    return rows


def changed_new_lines(old: str, new: str) -> set[int]:
    return {r.new for r in diff_rows(old, new) if r.kind == "add" and r.new is not None}


def summary(rows: list[Row]) -> str:
    added = sum(1 for r in rows if r.kind == "add")
    removed = sum(1 for r in rows if r.kind == "del")
    if not added and not removed:
        return "no textual change"
    return f"{added} line{'s' if added != 1 else ''} added, {removed} removed"

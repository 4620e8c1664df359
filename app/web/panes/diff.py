"""Before/after view of one schedule step: the whole program, changed lines marked.

:func:`diff_rows` aligns the two texts with :mod:`difflib` and returns one row per displayed
line — ``("same" | "del" | "add", old_lineno, new_lineno, text)`` — so the template can show the
program once, with removed lines struck through in red and added lines in green.
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


def diff_rows(old: str, new: str) -> list[Row]:
    a = old.splitlines()
    b = new.splitlines()
    rows: list[Row] = []
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
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

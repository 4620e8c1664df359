"""Errors raised by schedule primitives and traces.

A :class:`ScheduleError` is what a learner sees when a click is refused, so it is
built from plain parts rather than a formatted string::

    ScheduleError("split", "loop j", "the factors must be positive integers or None",
                  "try factors=[None, 4]", highlight=["j"])
    str(e) == "split refused on loop j: the factors must be positive integers or None. " \
              "Try factors=[None, 4]."

``highlight`` lists the loop/block names the UI should highlight; ``nodes`` (optional)
holds the offending IR nodes themselves so a printer span map can locate them exactly.
"""
from __future__ import annotations

from typing import Any, Iterable


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


class ScheduleError(ValueError, RuntimeError):
    """A schedule primitive refused its arguments; the schedule is unchanged.

    A ``ValueError`` (a bad argument) and, as TVM's ``ScheduleError``, a ``RuntimeError``:
    code written for TVM that catches ``RuntimeError`` around a schedule catches it too.

    Attributes:
        primitive: the method name (``"split"``, ``"compute_at"``, ...).
        subject: what was refused, e.g. ``"loop j"`` or ``"block C"``.
        rule: the requirement that broke, one plain sentence.
        hint: what would work instead (may be empty).
        highlight: names of loops/blocks to highlight in the UI.
        nodes: the IR nodes concerned (For/Block), when known.
    """

    def __init__(self, primitive: str, subject: str, rule: str, hint: str = "",
                 highlight: Iterable[str] = (), nodes: Iterable[Any] = ()):
        self.primitive = primitive
        self.subject = subject
        self.rule = rule.strip().rstrip(".")
        self.hint = hint.strip()
        self.highlight = list(dict.fromkeys(h for h in highlight if h and h != "?"))
        self.nodes = list(nodes)
        super().__init__(self._message())

    def _message(self) -> str:
        head = f"{self.primitive} refused"
        if self.subject:
            head += f" on {self.subject}"
        msg = f"{head}: {self.rule}."
        if self.hint:
            msg += " " + _sentence(self.hint)
        return msg

    def as_dict(self) -> dict:
        """JSON-friendly form for the web UI."""
        return {"primitive": self.primitive, "subject": self.subject, "rule": self.rule,
                "hint": self.hint, "highlight": list(self.highlight), "message": str(self)}


class UnknownHandleError(ScheduleError, IndexError):
    """A handle this schedule does not hold: forgotten with ``remove_rv``, or another
    schedule's. Also an ``IndexError``, as TVM's error for a random variable missing from
    the schedule's symbol table."""


class TraceError(ValueError):
    """A trace document or replay is invalid (unknown version/kind, bad reference, ...).

    When raised by :meth:`Trace.apply_to_schedule`, nothing has been applied; when an
    instruction was refused, ``schedule_error`` is the primitive's ScheduleError.
    """

    schedule_error: "ScheduleError | None" = None

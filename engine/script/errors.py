"""The one exception the script parser raises: :class:`ScriptError`."""
from __future__ import annotations


class ScriptError(ValueError):
    """A problem in TVMScript text, with the 1-based line and column where it was found.

    ``str(err)`` reads like ``line 7, column 16: unknown dtype 'flaot32' (use float32, ...)``.
    The parts are available as ``err.message``, ``err.line`` and ``err.col`` (``line``/``col``
    are None when the problem has no single position, e.g. an empty program).
    """

    def __init__(self, message: str, line: int | None = None, col: int | None = None,
                 filename: str | None = None):
        self.message = message
        self.line = line
        self.col = col
        self.filename = filename
        super().__init__(message, line, col)

    def __str__(self) -> str:
        where = ""
        if self.line is not None:
            where = f"line {self.line}"
            if self.col is not None:
                where += f", column {self.col}"
            where += ": "
        if self.filename:
            where = f"{self.filename}, {where}" if where else f"{self.filename}: "
        return where + self.message

    def __reduce__(self):  # picklable (e.g. across a process pool)
        return (ScriptError, (self.message, self.line, self.col, self.filename))

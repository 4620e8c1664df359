"""User-facing request errors: a status, a plain sentence, and the way back."""
from __future__ import annotations


class AppError(Exception):
    """A request that cannot be honoured (unknown workload, bad parameter, corrupt trace...).

    Rendered as an error page (or, for htmx requests, as a message box) with status ``status``;
    ``back`` is a URL the page offers to go back to.
    """

    def __init__(self, status: int, title: str, message: str, back: str | None = None,
                 back_label: str | None = None):
        super().__init__(message)
        self.status = status
        self.title = title
        self.message = message
        self.back = back
        self.back_label = back_label

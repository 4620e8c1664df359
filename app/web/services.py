"""What a request uses from the app: the measurement service, the store and the limits.

Each is set up once by :func:`app.service.install` (``app.extensions``); the web layer
reaches them only through these functions, inside a request.
"""
from __future__ import annotations

from flask import current_app, has_app_context

from ..limits import DEFAULT_LIMITS, Limits
from ..service.measurer import StepMeasurer
from ..store import Store


def measurer() -> StepMeasurer:
    """The measurement service (stored results, worker processes)."""
    return current_app.extensions["measurer"]


def store() -> Store | None:
    """The store of results and saved traces (None when the app runs without one)."""
    return current_app.extensions.get("store")


def limits() -> Limits:
    """The server's input limits (the defaults outside a request)."""
    return current_app.extensions["limits"] if has_app_context() else DEFAULT_LIMITS


def instance_folder() -> str:
    """The app's instance folder (the store's files, the model's trained weights)."""
    return current_app.config.get("EXPLORER_INSTANCE") or current_app.instance_path

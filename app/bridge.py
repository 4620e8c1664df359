"""The app's only door into the engine: feature detection and small adapters.

The engine is built in parts (workloads, script printer, schedule, runtime, cache). The app
must keep serving while a part is missing or broken, so every pane asks this module for the
part it needs; :func:`part` returns the imported sub-module or raises :class:`NotAvailable`,
which the views render as "not available yet" instead of an error page.

Nothing here implements compiler features; it only adapts calling conventions (a field that
may be a dict key or an attribute, a list of lines that may be one string).
"""
from __future__ import annotations

import importlib
from typing import Any


class NotAvailable(Exception):
    """An engine part the page needs has not landed (or fails to import)."""

    def __init__(self, what: str, detail: str = ""):
        self.what = what
        self.detail = detail
        msg = f"{what} is not available yet"
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)


def part(name: str):
    """Import ``engine.<name>``; raise :class:`NotAvailable` when it is missing or broken."""
    try:
        return importlib.import_module(f"engine.{name}")
    except ImportError as e:
        raise NotAvailable(f"engine.{name}", str(e)) from None
    except Exception as e:  # noqa: BLE001 - a half-written part must not take the app down
        raise NotAvailable(f"engine.{name}", f"it fails to import: {type(e).__name__}: {e}") from None


def attr(name: str, obj_name: str):
    """``engine.<name>.<obj_name>`` or :class:`NotAvailable`."""
    mod = part(name)
    try:
        return getattr(mod, obj_name)
    except AttributeError:
        raise NotAvailable(f"engine.{name}.{obj_name}") from None


def has(name: str, obj_name: str | None = None) -> bool:
    try:
        if obj_name is None:
            part(name)
        else:
            attr(name, obj_name)
        return True
    except NotAvailable:
        return False


def field(obj: Any, key: str, default: Any = None) -> Any:
    """``obj[key]`` for mappings, ``obj.key`` otherwise, ``default`` when absent."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def schedule_error_class():
    """The engine's ScheduleError class, or a private class nothing raises."""
    try:
        return attr("schedule", "ScheduleError")
    except NotAvailable:
        return _Never


def script_error_class():
    try:
        return attr("script", "ScriptError")
    except NotAvailable:
        return _Never


def workload_error_class():
    try:
        return attr("workloads", "WorkloadError")
    except NotAvailable:
        return _Never


class _Never(Exception):
    """Stands in for an engine exception class that does not exist yet."""

"""The deployment form's two entry points, registered from above (as :mod:`.parsers`).

``rt.export_library(path)`` (a built TensorIR module, :mod:`engine.runtime`),
``ex.export_library(path)`` (a Relax executable, :mod:`engine.relax.vm`) and
``engine.runtime.load_module(path)`` live in packages below :mod:`engine.deploy`, which does
the work; the package ``engine`` registers deploy's functions here when it is imported::

    register("export", fn)     # fn(built, path, **options) -> the exported library's record
    register("load", fn)       # fn(path) -> a module that calls the library
    call("export", rt, "kernel.so")
"""
from __future__ import annotations

from typing import Any, Callable

KINDS = ("export", "load")
_HOOKS: dict[str, Callable[..., Any]] = {}


def register(kind: str, fn: Callable[..., Any]) -> None:
    """Make ``fn`` the implementation of ``kind`` (one of :data:`KINDS`); the last one wins."""
    if kind not in KINDS:
        raise ValueError(f"unknown deployment hook {kind!r}; kinds are {', '.join(KINDS)}")
    _HOOKS[kind] = fn


def call(kind: str, *args: Any, **kwargs: Any) -> Any:
    """Run the registered ``kind``; without one (never after ``import engine``) a sentence."""
    fn = _HOOKS.get(kind)
    if fn is None:
        raise RuntimeError(f"no {kind} function is registered: import engine (the package) "
                           "before exporting or loading a library")
    return fn(*args, **kwargs)

"""How IR objects show themselves, without the IR importing the layers that draw them.

``engine.ir`` is the bottom layer: the script printer (``engine.script``) and the notebook
views (``engine.notebook``) sit above it and import it. ``PrimFunc.script()``,
``IRModule.script()``, ``repr(node)`` and the ``_repr_html_`` of modules and schedules ask
this module for the renderer of their *kind*; the package ``engine`` registers them when
it is imported (``engine/__init__.py``), so ``mod.script()`` works wherever the IR is used::

    register("script", fn)        # fn(obj, dialect=...) -> TVMScript text
    register("repr", fn)          # fn(node) -> short text for repr()
    register("html", fn)          # fn(obj) -> HTML for Jupyter
    render("script", mod)         # -> fn(mod)
"""
from __future__ import annotations

from typing import Any, Callable

KINDS = ("script", "repr", "html")
_RENDERERS: dict[str, Callable[[Any], str]] = {}


def register(kind: str, fn: Callable[[Any], str]) -> None:
    """Make ``fn`` the renderer of ``kind`` (one of :data:`KINDS`); the last one wins."""
    if kind not in KINDS:
        raise ValueError(f"unknown display kind {kind!r}; kinds are {', '.join(KINDS)}")
    _RENDERERS[kind] = fn


def render(kind: str, obj: Any, **options: Any) -> str:
    """``obj`` rendered by the registered renderer of ``kind`` (``options`` such as the
    script's ``dialect`` are passed on)."""
    fn = _RENDERERS.get(kind)
    if fn is None:
        raise RuntimeError(f"no {kind} renderer is registered (import engine registers them)")
    return fn(obj, **options)

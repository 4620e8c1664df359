"""The ``R`` namespace for Python code written like the course::

    from engine.script import ir as I, relax as R, tir as T    # tvm.script's too

    @I.ir_module                      # or @tvm.script.ir_module
    class MyModule:
        @T.prim_func
        def relu0(X: T.Buffer((1, 128), "float32"), Y: T.Buffer((1, 128), "float32")):
            ...

        @R.function
        def main(x: R.Tensor((1, 128), "float32")):
            with R.dataflow():
                out = R.call_tir(relu0, (x,), out_sinfo=R.Tensor((1, 128), "float32"))
                R.output(out)
            return out

``@R.function`` only marks the method (a :class:`RelaxFunctionSource`); the body is never
run. ``@I.ir_module`` then reads the class's source with :func:`inspect.getsource` and hands
it to the script parser, which reads the Relax functions with the Relax parser
(``engine.relax``, registered from above through :mod:`engine.ir.parsers`) — the text is
parsed with Python's ``ast`` only, never evaluated. A ``@R.function`` outside a class is
read the same way on its own and becomes the Relax function. Every other name
(``R.Tensor``, ``R.call_tir``, ``R.dataflow``, ...) is a harmless placeholder here, so that
the decorated code imports cleanly (annotations such as ``R.Tensor((1, 784), "float32")``
are evaluated by Python when the ``def`` runs).
"""
from __future__ import annotations

import sys
from typing import Any

from engine.ir import parsers

from .errors import ScriptError
from .tir import _Placeholder

__all__ = ["function", "RelaxFunctionSource", "parse_python_source"]


class RelaxFunctionSource:
    """What ``@R.function`` leaves in a class body: the Python function, read later by
    ``@I.ir_module`` from the class's source."""

    __slots__ = ("func", "options", "__name__", "__qualname__")

    def __init__(self, func: Any, options: dict):
        self.func = func
        self.options = dict(options)
        self.__name__ = getattr(func, "__name__", "?")
        self.__qualname__ = getattr(func, "__qualname__", self.__name__)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise ScriptError(f"{self.__qualname__} is a Relax function of a module class: it is "
                          "not called from Python; build the module (relax.build(mod, "
                          "target=\"llvm\")) and call vm[\"" + self.__name__ + "\"](...)")

    def __repr__(self) -> str:
        return f"<@R.function {self.__qualname__} (read by @I.ir_module)>"


def _in_class(func: Any) -> bool:
    """Is ``func`` defined in a class body (its qualified name ``Cls.f`` or
    ``f.<locals>.Cls.g``)?"""
    parts = getattr(func, "__qualname__", "").split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


def function(func: Any = None, **options: Any) -> Any:
    """Decorator: a Relax function. In a module class: marks the method for
    ``@I.ir_module``. Alone: the Relax function read from its source (options such as
    ``pure=False`` and ``private=True`` are accepted)."""
    if func is None:
        return lambda f: function(f, **options)
    if not callable(func):
        raise ScriptError(f"@R.function decorates a function, not {type(func).__name__}")
    marked = RelaxFunctionSource(func, options)
    if _in_class(func):
        return marked
    mod = parse_python_source(func, {})
    return mod[marked.__name__]


def _namespace_names(obj: Any) -> tuple[set, set]:
    """The names that the module of ``obj`` binds to the ``T`` and ``R`` namespaces
    (``from tvm.script import tir as T, relax as R``)."""
    from . import tir
    relax = sys.modules[__name__]
    g = getattr(sys.modules.get(getattr(obj, "__module__", "")), "__dict__", None) or {}
    return ({k for k, v in g.items() if v is tir}, {k for k, v in g.items() if v is relax})


def parse_python_source(obj: Any, prims: dict) -> IRModule:
    """The IRModule of a module class (or of one ``@R.function``) read from its Python
    source; ``prims``: its ``@T.prim_func`` functions already parsed, by name."""
    from .parser import parse_class_source
    from .tir import _source_of, captured_names
    hook = parsers.get("relax")
    if hook is None:
        raise ScriptError("no Relax parser is registered (importing the package engine "
                          "registers it): import engine before using @R.function")
    text, line_offset, indent, filename = _source_of(obj)
    tir_ns, relax_ns = _namespace_names(obj)
    captured: dict = {}
    members = vars(obj).values() if isinstance(obj, type) else [obj]
    for value in members:
        if isinstance(value, RelaxFunctionSource):
            captured.update(captured_names(value.func))
        elif callable(value) and hasattr(value, "__code__"):
            captured.update(captured_names(value))
    return parse_class_source(text, tir_ns, relax_ns, line_offset, indent, filename,
                              captured, hook, prims)


class _RPlaceholder(_Placeholder):
    __slots__ = ()

    def __repr__(self) -> str:
        return f"R.{self._name}"


def __getattr__(name: str) -> Any:  # R.Tensor, R.call_tir, R.dataflow, ... in imported code
    if name.startswith("__"):
        raise AttributeError(name)
    return _RPlaceholder(name)

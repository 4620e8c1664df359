"""The ``I`` namespace: ``@I.ir_module`` turns a class of ``@T.prim_func`` functions into an
IRModule::

    from engine.script import ir as I
    from engine.script import tir as T

    @I.ir_module
    class MyModule:
        @T.prim_func
        def mm_relu(A: T.Buffer((128, 128), "float32"), ...):
            ...

The ``@T.prim_func`` decorators have already parsed each function when the class body ran,
so this only collects them, in definition order, keyed by their names. A class that also
holds ``@R.function`` methods (``engine.script.relax``) is read from its source
(:func:`inspect.getsource`) by the script parser, which reads the Relax functions with the
parser registered from above (:mod:`engine.ir.parsers`); the ``@T.prim_func`` functions
already parsed are taken as they are.
"""
from __future__ import annotations

from typing import Any

from engine.ir.function import IRModule, PrimFunc

from .errors import ScriptError

__all__ = ["ir_module"]


def ir_module(cls: Any = None, **options: Any) -> Any:
    """Class decorator: an IRModule of the class's ``@T.prim_func`` functions."""
    if cls is None:
        return lambda c: ir_module(c, **options)
    if not isinstance(cls, type):
        raise ScriptError(f"@ir_module decorates a class, not {type(cls).__name__}")
    from .relax import RelaxFunctionSource, parse_python_source
    funcs = []
    relax = False
    for name, value in vars(cls).items():
        if isinstance(value, PrimFunc):
            funcs.append((name, value if value.name == name else value.replace(name=name)))
        elif isinstance(value, RelaxFunctionSource):
            relax = True
    if relax:
        return parse_python_source(cls, dict(funcs))
    if not funcs:
        raise ScriptError(f"class {cls.__name__} has no @T.prim_func functions (nor "
                          "@R.function ones); decorate its methods with @T.prim_func or "
                          "@R.function")
    return IRModule(tuple(funcs))


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from .tir import _Placeholder
    return _Placeholder(name)

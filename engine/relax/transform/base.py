"""Passes as TVM spells them (``tvm.ir.transform``): a pass object is called on an IRModule
and returns a new one (``relax.transform.BindParams("main", params)(mod)``).

* :class:`Pass` — the base: ``info`` (:class:`PassInfo`: ``name``, ``opt_level``,
  ``required``); subclasses implement ``transform_module(mod)`` (or, as TVM's Python
  passes, ``transform_module(mod, ctx)``);
* :class:`Sequential` — several passes in order, each run only when the current
  :class:`PassContext` enables it: its ``opt_level`` at least the pass's, or the pass
  required (by the Sequential or the context), and not disabled by name;
* :class:`PassContext` — ``with PassContext(opt_level=3, disabled_pass=[...]):``;
  ``PassContext.current()`` (opt_level 2 outside any ``with``);
* :func:`module_pass` — TVM's decorator over a class with ``transform_module(self, mod,
  ctx)`` (the decorated class makes passes) or a function ``f(mod, ctx)`` (it becomes a
  pass)::

      @tvm.ir.transform.module_pass(opt_level=2, name="MatmulAddFuse")
      class FuseDenseAddPass:
          def transform_module(self, mod, ctx):
              return MatmulAddFusor(mod).transform()

      fused = FuseDenseAddPass()(mod)

* :func:`function_pass` — ``transform_function(func, mod, ctx)`` on each Relax function.

A pass called directly always runs (``opt_level`` only matters inside a Sequential), as
TVM's do.
"""
from __future__ import annotations

import functools
import inspect
import threading
from dataclasses import dataclass
from typing import Any, Callable

from engine.ir.function import IRModule

__all__ = ["Pass", "ModulePass", "Sequential", "TransformError", "PassContext", "PassInfo",
           "module_pass", "function_pass"]


class TransformError(ValueError):
    """A pass that cannot apply to the module (the message says why and what to do)."""


@dataclass(frozen=True)
class PassInfo:
    """What a pass is: its ``name``, the lowest ``opt_level`` that runs it in a
    Sequential, and the passes it ``required``."""

    opt_level: int
    name: str
    required: tuple = ()
    traceable: bool = False


_local = threading.local()


class PassContext:
    """The settings passes run under (TVM's ``tvm.transform.PassContext``).

    ``opt_level`` (2 by default): a Sequential runs a pass whose ``opt_level`` is at most
    this; ``required_pass``: names run whatever their level; ``disabled_pass``: names never
    run in a Sequential; ``config``: a dict passes may read. A context manager; the
    innermost ``with`` is :meth:`current`."""

    def __init__(self, opt_level: int = 2, required_pass: Any = None,
                 disabled_pass: Any = None, instruments: Any = None, config: Any = None):
        if not isinstance(opt_level, int):
            raise TypeError(f"PassContext's opt_level is an integer, got {opt_level!r}")
        self.opt_level = opt_level
        self.required_pass = tuple(required_pass or ())
        self.disabled_pass = tuple(disabled_pass or ())
        self.instruments = tuple(instruments or ())
        self.config = dict(config or {})

    def __enter__(self) -> "PassContext":
        stack = getattr(_local, "stack", None)
        if stack is None:
            stack = _local.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _local.stack.pop()

    @staticmethod
    def current() -> "PassContext":
        stack = getattr(_local, "stack", None)
        return stack[-1] if stack else _DEFAULT_CONTEXT

    def pass_enabled(self, info: PassInfo) -> bool:
        """Whether a Sequential runs a pass of this ``info`` under this context."""
        if info.name in self.disabled_pass:
            return False
        if info.name in self.required_pass:
            return True
        return info.opt_level <= self.opt_level

    def __repr__(self) -> str:
        return f"PassContext(opt_level={self.opt_level})"


_DEFAULT_CONTEXT = PassContext()


class Pass:
    """A module-to-module transformation; subclasses implement ``transform_module(mod)``
    (``name`` and ``opt_level`` class attributes make its :class:`PassInfo`)."""

    name = "Pass"
    opt_level = 0

    @property
    def info(self) -> PassInfo:
        return PassInfo(self.opt_level, self.name, tuple(getattr(self, "required", ()) or ()))

    def __call__(self, mod: Any) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TransformError(f"{self.name} applies to an IRModule, got "
                                 f"{type(mod).__name__}")
        out = self.transform_module(mod)
        if not isinstance(out, IRModule):
            raise TransformError(f"the pass {self.name} returned {type(out).__name__}, not "
                                 "an IRModule")
        return out

    def transform_module(self, mod: IRModule) -> IRModule:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<relax.transform.{self.name}>"


class ModulePass(Pass):
    """A pass made by :func:`module_pass` from ``transform(mod, ctx)``."""

    def __init__(self, transform: Callable, opt_level: int, name: str,
                 required: Any = (), traceable: bool = False):
        self._transform = transform
        self.opt_level = opt_level
        self.name = name
        self.required = tuple(required or ())
        self.traceable = traceable

    def transform_module(self, mod: IRModule) -> IRModule:
        return self._transform(mod, PassContext.current())

    def __repr__(self) -> str:
        return f"<ModulePass {self.name} opt_level={self.opt_level}>"


class Sequential(Pass):
    """The passes one after another (``tvm.transform.Sequential``), each when the current
    :class:`PassContext` enables it (module docstring)."""

    name = "Sequential"

    def __init__(self, passes: Any = None, opt_level: int = 0, name: str = "sequential",
                 required: Any = None):
        passes = list(passes or [])
        for p in passes:
            if not callable(p):
                raise TransformError(f"Sequential takes passes, got {type(p).__name__}")
        self.passes = passes
        self.opt_level = opt_level
        self.name = name
        self.required = tuple(required or ())

    def transform_module(self, mod: IRModule) -> IRModule:
        ctx = PassContext.current()
        for p in self.passes:
            info = getattr(p, "info", None)
            if isinstance(info, PassInfo) and info.name not in self.required and \
                    not ctx.pass_enabled(info):
                continue
            mod = p(mod)
        return mod


def _takes_ctx(fn: Callable, before: int) -> bool:
    """Whether ``fn`` takes a context argument after its ``before`` others."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return True
    return len([p for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                 p.POSITIONAL_OR_KEYWORD)]) > before


def _pass_decorator(kind: str, method: str, make: Callable, pass_arg: Any, opt_level: Any,
                    name: Any, required: Any, traceable: bool) -> Any:
    if opt_level is None:
        opt_level = 0
    if not isinstance(opt_level, int):
        raise TypeError(f"{kind}: opt_level is an integer, got {opt_level!r}")

    def create(arg: Any) -> Any:
        pass_name = name or getattr(arg, "__name__", kind)
        if inspect.isclass(arg):
            if not callable(getattr(arg, method, None)):
                raise TransformError(f"@{kind} decorates a class with a method {method}, "
                                     f"which {arg.__name__} lacks")

            class PyPass(ModulePass):
                def __init__(self, *args: Any, **kwargs: Any):
                    inst = arg(*args, **kwargs)
                    self.instance = inst
                    super().__init__(make(getattr(inst, method)), opt_level, pass_name,
                                     required, traceable)

                def __getattr__(self, attr: str) -> Any:   # the wrapped object's fields
                    if attr == "instance":
                        raise AttributeError(attr)
                    return getattr(self.instance, attr)

            functools.update_wrapper(PyPass, arg, updated=())
            PyPass.__init__.__doc__ = getattr(arg.__init__, "__doc__", None)
            return PyPass
        if callable(arg):
            return ModulePass(make(arg), opt_level, pass_name, required, traceable)
        raise TransformError(f"@{kind} decorates a class or a function, got {arg!r}")

    return create(pass_arg) if pass_arg is not None else create


def module_pass(pass_func: Any = None, opt_level: Any = None, name: Any = None,
                required: Any = None, traceable: bool = False) -> Any:
    """TVM's ``tvm.ir.transform.module_pass`` (module docstring): over a class, a class
    whose instances are passes calling its ``transform_module(mod, ctx)``; over a function
    ``f(mod, ctx)``, a pass; without one, the decorator."""

    def make(fn: Callable) -> Callable:
        if _takes_ctx(fn, 1):
            return fn
        return lambda mod, ctx: fn(mod)

    return _pass_decorator("module_pass", "transform_module", make, pass_func, opt_level,
                           name, required, traceable)


def function_pass(pass_func: Any = None, opt_level: Any = None, name: Any = None,
                  required: Any = None, traceable: bool = False) -> Any:
    """TVM's ``relax.transform.function_pass``: ``transform_function(func, mod, ctx)`` on
    each Relax function of the module (the module's other functions unchanged)."""

    def make(fn: Callable) -> Callable:
        with_ctx = _takes_ctx(fn, 2)

        def run(mod: IRModule, ctx: PassContext) -> IRModule:
            from ..expr import Function
            funcs = []
            for n, f in mod.functions:
                if isinstance(f, Function):
                    f = fn(f, mod, ctx) if with_ctx else fn(f, mod)
                funcs.append((n, f))
            return IRModule(tuple(funcs))
        return run

    return _pass_decorator("function_pass", "transform_function", make, pass_func,
                           opt_level, name, required, traceable)

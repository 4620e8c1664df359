"""``tvm.runtime``: ``tensor`` (TVM 0.27's name for the course's ``tvm.nd.array``: the
engine's :class:`engine.nd.NDArray`, a numpy array with ``.numpy()``) and ``Executable``,
what :func:`engine.tvm.compile` and :func:`engine.tvm.build` return: the engine's compiled
:class:`engine.runtime.Module` with TVM's call shapes — ``exe(*arrays)`` runs its one
function (or ``main``), ``exe["name"](*arrays)`` one by name, and
``exe.time_evaluator(name, dev, number=10, repeat=1, min_repeat_ms=0)`` takes the device
as TVM's does (the engine's own takes none: it runs on the host CPU). ``load_module(path)``
loads a library written by ``export_library`` (:mod:`engine.deploy`)."""
from __future__ import annotations

from typing import Any, Callable

from engine.nd import NDArray, check_device, cpu, cuda, device, empty
from engine.nd import array as tensor
from engine.runtime import Module, get_global_func, load_module, register_func

Tensor = NDArray

__all__ = ["tensor", "empty", "Tensor", "NDArray", "cpu", "cuda", "device", "Module",
           "Executable", "get_global_func", "register_func", "load_module"]


class Executable:
    """The engine's compiled module with TVM's call shapes (see the module docstring);
    every other attribute is the engine :class:`Module`'s (``get_source``, ...)."""

    def __init__(self, module: Module):
        self.module = module

    def __getitem__(self, name: str) -> Any:
        return self.module[name]

    @property
    def mod(self) -> "Executable":
        """TVM's ``exe.mod`` (its runtime module): ``rt_lib.mod.time_evaluator("main",
        tvm.cpu())``, ``rt_lib.mod["main"]`` — the same calls as the executable's."""
        return self

    def __getattr__(self, name: str) -> Any:
        if name == "module":  # not set yet (a copy being built)
            raise AttributeError(name)
        return getattr(self.module, name)

    def __call__(self, *args: Any) -> Any:
        names = self.module.names()
        if len(names) == 1:
            return self.module[names[0]](*args)
        if "main" in self.module:
            return self.module["main"](*args)
        raise TypeError(f"this module has several functions ({', '.join(names)}) and no "
                        "'main': call one by name, exe['name'](...)")

    def time_evaluator(self, func_name: str, dev: Any = None, number: int = 10,
                       repeat: int = 1, min_repeat_ms: float = 0) -> Callable[..., Any]:
        """TVM's ``time_evaluator(func_name, dev, ...)``: ``dev`` must be the CPU."""
        check_device(dev)
        return self.module.time_evaluator(func_name, number=number, repeat=repeat,
                                          min_repeat_ms=min_repeat_ms)

    def __repr__(self) -> str:
        return f"Executable({self.module!r})"

"""``engine.runtime.load_module(path)``: an exported library back in the engine.

The library is loaded by :class:`~.loader.NativeLibrary` (ctypes); the module it returns
behaves like the build it was exported from: ``mod["mm_relu"](a, b, c)`` for a TensorIR
export (destination passing), ``mod["main"](x)`` returning ``engine.nd.NDArray``\\ s for a
Relax export, as ``vm["main"](x)``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.nd import NDArray

from .loader import LibraryError, NativeLibrary
from .targets import DeployError


class LoadedModule:
    """A loaded library: ``mod[name](...)``, ``mod.functions``, ``mod.metadata``."""

    def __init__(self, library: NativeLibrary):
        self.library = library
        self.metadata = library.metadata
        self.kind = library.kind

    @property
    def functions(self) -> list:
        return self.library.functions

    def names(self) -> list:
        return self.library.functions

    def __contains__(self, name: str) -> bool:
        return name in self.library

    def __getitem__(self, name: str) -> Any:
        f = self.library[name]

        def call(*args: Any) -> Any:
            try:
                out = f(*args)
            except LibraryError as exc:
                from engine.runtime import ArgumentError
                raise ArgumentError(str(exc)) from None
            if self.kind == "relax":
                return _nd(out)
            return out

        call.__name__ = name
        return call

    def __repr__(self) -> str:
        return f"<engine loaded library {self.library.path}: {', '.join(self.functions)}>"


def _nd(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_nd(v) for v in value)
    return value.view(NDArray) if isinstance(value, np.ndarray) else value


def load_module(path: Any) -> LoadedModule:
    """Load a library written by ``export_library`` (TVM's ``tvm.runtime.load_module``)."""
    try:
        return LoadedModule(NativeLibrary(path))
    except LibraryError as exc:
        raise DeployError(str(exc)) from None

"""Passes as TVM spells them: a pass object is called on an IRModule and returns a new one
(``relax.transform.BindParams("main", params)(mod)``); :class:`Sequential` runs several."""
from __future__ import annotations

from typing import Any

from engine.ir.function import IRModule


class TransformError(ValueError):
    """A pass that cannot apply to the module (the message says why and what to do)."""


class Pass:
    """A module-to-module transformation; subclasses implement :meth:`transform_module`."""

    name = "Pass"

    def __call__(self, mod: Any) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TransformError(f"{self.name} applies to an IRModule, got "
                                 f"{type(mod).__name__}")
        return self.transform_module(mod)

    def transform_module(self, mod: IRModule) -> IRModule:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<relax.transform.{self.name}>"


class Sequential(Pass):
    """The passes one after another (``tvm.transform.Sequential``)."""

    name = "Sequential"

    def __init__(self, passes: list):
        for p in passes:
            if not callable(p):
                raise TransformError(f"Sequential takes passes, got {type(p).__name__}")
        self.passes = list(passes)

    def transform_module(self, mod: IRModule) -> IRModule:
        for p in self.passes:
            mod = p(mod)
        return mod

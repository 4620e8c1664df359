"""``tvm.target``: ``Target`` (``Target("cuda")``, ``Target("cuda -arch=sm_80")``,
``Target("nvidia/nvidia-a100")``, ``Target("cuda", host="llvm")``, ``Target("llvm")``) and
``TargetKind``, the engine's :class:`engine.gpu.Target`. ``tvm.compile(mod, target=...)``
still builds for the host CPU only: an llvm Target is accepted there, a CUDA one refused.

TVM's ``Target("llvm", host="llvm")`` (the course's integration chapter) is the llvm
target: an llvm host of an llvm target is the target itself (the engine's own ``Target``
refuses a host for a CPU target, which has none)."""
from __future__ import annotations

from typing import Any

from engine.gpu import Target as _Target
from engine.gpu import TargetKind, list_tags

__all__ = ["Target", "TargetKind", "list_tags"]


def _is_llvm(t: Any) -> bool:
    if isinstance(t, _Target):
        return t.kind.name == "llvm"
    return isinstance(t, str) and t.split()[:1] == ["llvm"]


class Target(_Target):
    """The engine's :class:`engine.gpu.Target`, with TVM's ``host="llvm"`` accepted on an
    llvm target (see the module docstring)."""

    __slots__ = ()

    def __init__(self, target: Any, host: Any = None):
        if host is not None and _is_llvm(target) and _is_llvm(host):
            host = None
        super().__init__(target, host)

"""``tvm.target``: ``Target`` (``Target("cuda")``, ``Target("cuda -arch=sm_80")``,
``Target("nvidia/nvidia-a100")``, ``Target("cuda", host="llvm")``, ``Target("llvm")``) and
``TargetKind``, the engine's :class:`engine.gpu.Target`. ``tvm.compile(mod, target=...)``
still builds for the host CPU only: an llvm Target is accepted there, a CUDA one refused."""
from __future__ import annotations

from engine.gpu import Target, TargetKind, list_tags

__all__ = ["Target", "TargetKind", "list_tags"]

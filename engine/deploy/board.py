"""A kernel built for an ARM board, called on numpy arrays under ``qemu-aarch64``.

::

    rt = engine.build(mod, target="llvm -mtriple=aarch64-linux-gnu")
    run = run_on_board(rt, "mm_relu", [a, b, c], repeat=10)    # c written in place
    run.seconds_per_call                                       # the emulator's time

The build's objects are linked with the cross-compiled thread pool
(:func:`engine.deploy.aarch64.link_kernels`) into a shared object in a temporary
directory, and the kernel is called under qemu as ``rt[name](*arrays)`` would be: the
arrays it writes are updated in place. This is how the explorer's workers check and time a
step compiled for the board; a shipped library is ``rt.export_library``'s.
"""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .aarch64 import link_kernels
from .qemu import TIMEOUT_S, call_under_qemu
from .targets import DeployError


@dataclass(frozen=True)
class BoardRun:
    """What one emulated call cost: the emulator's seconds per call (None when not timed),
    and the wall-clock seconds of the link and of the whole emulated run."""

    seconds_per_call: float | None
    link_s: float
    run_s: float


def _checked(fn, arrays: list) -> list[np.ndarray]:
    """``arrays`` against the kernel's parameters: count, shape, dtype, C order."""
    if fn.scalar_params:
        raise DeployError(f"{fn.name} takes scalar parameters "
                          f"({', '.join(fn.scalar_params)}): a kernel run under qemu takes "
                          "arrays of fixed shapes only")
    if len(arrays) != len(fn.specs):
        raise DeployError(f"{fn.name} takes {len(fn.specs)} arrays "
                          f"({', '.join(s.name for s in fn.specs)}), got {len(arrays)}")
    out = []
    for s, a in zip(fn.specs, arrays):
        if not isinstance(a, np.ndarray) or a.dtype != np.dtype(s.dtype) or \
                tuple(a.shape) != tuple(s.shape):
            got = (f"{a.dtype}{list(a.shape)}" if isinstance(a, np.ndarray)
                   else type(a).__name__)
            raise DeployError(f"argument {s.name} of {fn.name} must be a numpy array "
                              f"{np.dtype(s.dtype).name}{list(s.shape)}, got {got}")
        if s.written and not a.flags.writeable:
            raise DeployError(f"argument {s.name} of {fn.name} is written: pass a "
                              "writeable array")
        out.append(a)
    return out


def run_on_board(rt, name: str, arrays: list, repeat: int = 0,
                 timeout: float = TIMEOUT_S) -> BoardRun:
    """Call kernel ``name`` of a build for aarch64 under qemu on ``arrays`` (every
    parameter, outputs included, in order); written arrays are updated in place. With
    ``repeat`` > 0 it is then called ``repeat`` more times and timed (emulated)."""
    fn = rt[name]
    arrays = _checked(fn, list(arrays))
    with tempfile.TemporaryDirectory(prefix="engine-board-") as tmp:
        t0 = time.perf_counter()
        lib = link_kernels(rt, Path(tmp) / "kernels.so")
        t1 = time.perf_counter()
        written = [s.written for s in fn.specs]
        run = call_under_qemu(lib, fn.symbol, arrays, written, repeat, timeout)
        t2 = time.perf_counter()
    outs = iter(run.outputs)
    for a, w in zip(arrays, written):
        if w:
            a[...] = next(outs)
    return BoardRun(run.seconds_per_call, t1 - t0, t2 - t1)

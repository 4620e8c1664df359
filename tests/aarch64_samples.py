"""What the ARM board's tests build: the engine's target string for the board and mm_relu
scheduled as NEON likes it."""
from __future__ import annotations

from engine import workloads
from engine.schedule import Schedule

#: the engine's target string for an aarch64 Linux board
ARM = "llvm -mtriple=aarch64-linux-gnu"


def mm_relu_neon(n: int = 32, parallel: bool = True):
    """mm_relu (n x n) with its inner j loop split by 4 (NEON's float lanes) under k and
    vectorized, i parallel (unless ``parallel`` is False)."""
    sch = Schedule(workloads.get("mm_relu", n=n))
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(j0, k, j1)
    sch.vectorize(j1)
    if parallel:
        sch.parallel(i)
    return sch.mod

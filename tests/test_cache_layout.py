"""Simulated misses do not depend on where the process's heap happens to be."""
import numpy as np

import engine
from engine import lessons
from engine.cache.simulate import LAYOUT_ALIGN, LAYOUT_STAGGER, default_args

LEVELS = [{"name": "L1", "size": 32768, "ways": 8, "line": 64},
          {"name": "L2", "size": 262144, "ways": 8, "line": 64}]


def _misses(mod):
    rep = engine.cache.simulate(mod, "mm_relu", levels=LEVELS, hardware=False)
    return rep.level("L1").misses, rep.level("L2").misses


def test_same_program_same_misses_whatever_was_allocated_before():
    # lesson 2's strip-mined mm_relu: its 256 KiB intermediate Y lives on the heap
    mod = lessons.get("02_tiling_and_cache").modules({"n": 256})[4]
    first = _misses(mod)
    ballast = [np.empty(n, np.uint8) for n in (4160, 300_000, 1_000_003, 77, 2_500_000)]
    again = _misses(mod)
    del ballast
    assert again == first


def test_arguments_start_at_staggered_offsets():
    func = engine.workloads.get("mm_relu", n=32)["mm_relu"]
    args = default_args(func)
    offsets = [a.ctypes.data % LAYOUT_ALIGN for a in args]
    assert offsets == [k * LAYOUT_STAGGER for k in range(len(args))]

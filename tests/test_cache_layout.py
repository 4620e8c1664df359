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


#: small enough that where a buffer starts decides which of its lines conflict
SMALL = [{"name": "L1", "size": 1024, "ways": 2, "line": 64},
         {"name": "L2", "size": 4096, "ways": 4, "line": 64}]


def _course_misses(mod, **kw):
    rep = engine.cache.simulate(mod, "mm_relu", levels=SMALL, hardware=False, **kw)
    return [(lv.accesses, lv.misses) for lv in rep.levels], rep


def _in_thread(fn):
    import threading
    box = {}
    t = threading.Thread(target=lambda: box.update(value=fn()))
    t.start()
    t.join()
    return box["value"]


def test_an_intermediate_on_the_stack_is_simulated_at_its_placed_address_in_any_thread():
    # the course's mm_relu at n=32: its intermediate Y (4 KiB) lives in the kernel's stack
    # frame; a thread's stack is elsewhere than the main thread's, and a stack address
    # follows the frame layout (the pass pipeline): the simulation must depend on neither
    # (with Y's stack addresses, the thread's run missed 37960 times in L1, the main
    # thread's 33984)
    from engine.cache.instrument import placed_base
    mod = engine.workloads.get("mm_relu", n=32)
    here, rep = _course_misses(mod)
    there, _ = _in_thread(lambda: _course_misses(mod))
    assert here == there
    ids = {name: k for k, name in enumerate(rep.buffers)}
    assert rep.buffers["Y"]["param"] is False
    assert rep.buffers["Y"]["address"] == placed_base(ids["Y"])
    assert placed_base(ids["Y"]) % LAYOUT_ALIGN == ids["Y"] * LAYOUT_STAGGER
    assert rep.buffers["A"]["address"] < placed_base(0)      # a parameter: its real address


def test_the_instrumented_build_s_optimisation_level_does_not_change_the_counts(monkeypatch):
    import sys
    sim_mod = sys.modules["engine.cache.simulate"]
    # lesson 2's strip-mined mm_relu at n=64: Y (16 KiB) on the stack; with its stack
    # addresses, O0, O1 and O3 builds missed 41696, 89824 and 19712 times in L1
    mod = lessons.get("02_tiling_and_cache").modules({"n": 64})[4]
    counts = {}
    for level in (0, 1, 3):
        monkeypatch.setattr(sim_mod, "instrumented_opt_level", lambda n, sites, level=level: level)
        counts[level], rep = _course_misses(mod)
        assert rep.compile_seconds > 0
    assert counts[0] == counts[1] == counts[3]


def test_the_simulator_s_fast_path_is_inlined_at_o0_too(monkeypatch):
    # an O0 build used to run no pass at all: every access was an indirect call to the
    # simulator's access function (a third of a short simulation's time)
    import sys
    sim_mod = sys.modules["engine.cache.simulate"]
    built = {}
    real_build = sim_mod._build

    def keep(func, extra, level):
        rt, how = real_build(func, extra, level)
        built[level] = rt
        return rt, how
    monkeypatch.setattr(sim_mod, "_build", keep)
    monkeypatch.setattr(sim_mod, "instrumented_opt_level", lambda n, sites: 0)
    _course_misses(engine.workloads.get("mm_relu", n=32))
    asm = built[0].get_source("asm")
    kernel = asm[asm.index("engine_fn_mm_relu:"):asm.index(".Lfunc_end0")]
    assert "__cachesim_access" not in kernel
    assert "__cachesim_line" in kernel or "call" in kernel      # the slow path stays a call


def test_a_short_simulation_is_compiled_quickly_a_long_one_for_speed():
    from engine.cache.simulate import O3_ACCESSES_PER_SITE, instrumented_opt_level
    assert instrumented_opt_level(8.4e6, 7) == 0          # the course's mm_relu at n=128
    assert instrumented_opt_level(64e6, 142) == 0         # conv2d-best: much code, sampled
    assert instrumented_opt_level(537e6, 7) == 3          # mm_relu at n=512, unsampled
    assert instrumented_opt_level(O3_ACCESSES_PER_SITE * 3 + 1, 3) == 3

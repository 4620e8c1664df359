"""Every workload compiled by the LLVM backend and checked against its numpy reference,
unscheduled and after random schedules (hypothesis; sizes not divisible by split factors)."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
from engine.ir import Block, collect
from engine.runtime import check_correctness

SMALL = {"n": 12, "m": 10, "k": 9, "batch": 2, "in_channels": 3, "out_channels": 4, "size": 7,
         "channels": 3, "in_features": 20, "hidden": 12, "out_features": 5}
SIZE_KEYS = {"n", "m", "k", "in_features", "hidden", "out_features"}


def small_params(name, draw=None):
    info = engine.workloads.info(name)
    params = {}
    for key, default in info.defaults.items():
        if key in SMALL:
            v = SMALL[key]
            if draw is not None and key in SIZE_KEYS:
                v = draw(st.integers(1, 13))
            elif draw is not None and key == "size":
                v = draw(st.integers(max(3, info.defaults.get("kernel", 3)), 9))
            params[key] = v
    return params


def check(name, mod, params, **build):
    fname = engine.workloads.info(name).func_name
    args = engine.workloads.random_args(name, **params)
    ref = engine.workloads.reference(name, **params)
    rep = check_correctness(mod, fname, ref, args=args, **build)
    assert rep.ok, f"{name} {params}: {rep.message}"


@pytest.mark.parametrize("name", engine.workloads.names())
def test_workload_unscheduled(name):
    params = small_params(name)
    check(name, engine.workloads.get(name, **params), params)


@pytest.mark.parametrize("name", engine.workloads.names())
def test_workload_fast_math_and_o1(name):
    params = small_params(name)
    mod = engine.workloads.get(name, **params)
    check(name, mod, params, opt_level=1)


def test_course_schedule_all_sizes():
    for n in (8, 10, 16):
        sch = engine.presets.get("mm_relu-course", n=n)
        check("mm_relu", sch.mod, {"n": n})


def block_names(mod):
    out = []
    for _, f in mod.functions:
        out += [b.name_hint for b in collect(f.body, Block) if b.name_hint != "root"]
    return out


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_random_schedules_are_correct(data):
    name = data.draw(st.sampled_from(engine.workloads.names()), label="workload")
    params = small_params(name, draw=data.draw)
    mod = engine.workloads.get(name, **params)
    sch = engine.Schedule(mod)
    fname = engine.workloads.info(name).func_name
    for _ in range(data.draw(st.integers(1, 4), label="steps")):
        blocks = block_names(sch.mod)
        bname = data.draw(st.sampled_from(blocks), label="block")
        try:
            blk = sch.get_block(bname, func_name=fname)
            loops = sch.get_loops(blk)
        except Exception:  # noqa: BLE001 - the block may have been inlined meanwhile
            continue
        if not loops:
            continue
        op = data.draw(st.sampled_from(["split", "parallel", "vectorize", "unroll", "fuse",
                                        "reorder", "decompose_reduction", "compute_inline",
                                        "compute_at", "reverse_compute_at"]), label="op")
        idx = data.draw(st.integers(0, len(loops) - 1), label="loop")
        try:
            if op == "split":
                sch.split(loops[idx], factors=[None, data.draw(st.integers(1, 7), label="f")])
            elif op == "parallel":
                sch.parallel(loops[0])
            elif op == "vectorize":
                sch.vectorize(loops[-1])
            elif op == "unroll":
                sch.unroll(loops[idx])
            elif op == "fuse" and len(loops) >= 2 and idx + 1 < len(loops):
                sch.fuse(loops[idx], loops[idx + 1])
            elif op == "reorder" and idx + 1 < len(loops):
                sch.reorder(loops[idx + 1], loops[idx])
            elif op == "decompose_reduction":
                sch.decompose_reduction(blk, loops[idx])
            elif op == "compute_inline":
                sch.compute_inline(blk)
            elif op in ("compute_at", "reverse_compute_at"):
                other = data.draw(st.sampled_from(blocks), label="target block")
                target_loops = sch.get_loops(sch.get_block(other, func_name=fname))
                if target_loops:
                    tl = target_loops[data.draw(st.integers(0, len(target_loops) - 1),
                                                label="target loop")]
                    getattr(sch, op)(blk, tl)
        except engine.ScheduleError:
            continue
    check(name, sch.mod, params)


@pytest.mark.parametrize("name", ["mm_relu", "softmax", "window_sum"])
def test_check_correctness_against_interpreter(name):
    params = {"mm_relu": {"n": 6}, "softmax": {"m": 3, "n": 5}, "window_sum": {"n": 9}}[name]
    mod = engine.workloads.get(name, **params)
    rep = check_correctness(mod, engine.workloads.info(name).func_name, None)
    assert rep.ok, rep.message


@pytest.mark.parametrize("order", ["ijk", "ikj", "jik", "jki", "kij", "kji"])
def test_every_loop_order_with_init(order):
    n = 7
    mod = engine.workloads.get("matmul", n=n)
    sch = engine.Schedule(mod)
    fname = engine.workloads.info("matmul").func_name
    blk = [b for b in block_names(sch.mod)][0]
    i, j, k = sch.get_loops(sch.get_block(blk, func_name=fname))
    loops = {"i": i, "j": j, "k": k}
    sch.reorder(*[loops[c] for c in order])
    check("matmul", sch.mod, {"n": n})

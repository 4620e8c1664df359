"""Parallel loop bodies as LLVM modules of their own, compiled side by side; the compile-time
choices of the code generator (unroll metadata on outer loops, shared index arithmetic)."""
from __future__ import annotations

import gc
import re

import numpy as np
import pytest

import engine
from engine.codegen.llvm import codegen, codegen_units
from engine.codegen.units import compile_units, unit_texts, unlocked_available
from engine.lower import lower
from engine.runtime.module import ASM_UNIT_SEPARATOR


def packed_parallel_matmul(n: int):
    """matmul-best's packing and micro-kernel at size n: two parallel loops."""
    from engine import presets
    sch = engine.Schedule(engine.workloads.get("matmul", n=n))
    presets.info("matmul-best").trace(n=n).apply_to_schedule(sch)
    return sch


def _texts(mod):
    (name, f), = list(mod.functions)
    return unit_texts(codegen_units([(name, lower(f))])[0])


def test_each_parallel_loop_body_is_a_module_of_its_own():
    sch = packed_parallel_matmul(128)
    texts = _texts(sch.mod)
    assert len(texts) == 3                       # the kernel, the packing, the micro-kernel
    assert 'declare i32 @"engine_fn_matmul_par1_task"' in texts[0]
    assert 'define i32 @"engine_fn_matmul_par1_task"' in texts[1]
    assert 'define i32 @"engine_fn_matmul_par2_task"' in texts[2]
    # codegen() still gives one module with the same functions (internal tasks)
    (name, f), = list(sch.mod.functions)
    one, _ = codegen([(name, lower(f))])
    assert 'define internal i32 @"engine_fn_matmul_par2_task"' in str(one)


def test_split_build_runs_correctly_and_reports_its_modules():
    sch = packed_parallel_matmul(128)
    rt = engine.build(sch.mod, cache=False)
    a, b = [np.random.rand(128, 128).astype("float32") for _ in range(2)]
    c = np.zeros((128, 128), "float32")
    rt["matmul"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    st = rt.compile_stats
    assert st["llvm_modules"] == 3 and 1 <= st["llvm_threads"] <= 3
    assert st["llvm_cpu"] > 0 and st["parallel_loops"] == 2
    ll = rt.get_source("ll")
    assert ll.count("; ---- parallel loop body") == 2
    opt = rt.get_source("ll-opt")
    assert opt.count("; ---- parallel loop body") == 2
    assert "; ---- parallel loop body engine_fn_matmul_par2:" in opt
    asm = rt.get_source("asm")
    assert asm.count(ASM_UNIT_SEPARATOR) == 2 and "engine_fn_matmul_par2_task:" in asm


def test_side_by_side_compilation_gives_the_same_machine_code_as_one_by_one():
    texts = _texts(packed_parallel_matmul(64).mod)
    serial = compile_units(texts, max_threads=1)
    both = compile_units(texts, max_threads=2)
    assert [u.obj for u in serial] == [u.obj for u in both]
    assert [u.opt_text for u in serial] == [u.opt_text for u in both]
    if unlocked_available():
        assert {u.thread for u in both} <= {0, 1}


def test_invalid_ir_in_one_module_is_reported_after_all_threads_stop():
    texts = _texts(packed_parallel_matmul(64).mod)
    broken = texts[:1] + [texts[1].replace("ret i32", "ret i64", 1)] + texts[2:]
    with pytest.raises(RuntimeError):
        compile_units(broken, max_threads=2)


def test_many_builds_then_garbage_collection_do_not_crash():
    # each module's LLVM context is disposed of with it, module first: left to the garbage
    # collector, a context could be finalised before its module (a segmentation fault)
    for n in (32, 64, 32):
        rt = engine.build(packed_parallel_matmul(n).mod, cache=False)
        assert rt.get_source("ll-opt")
        del rt
        gc.collect()


def _loop_md(ll: str) -> dict[str, str]:
    """loop-ID metadata of each loop's back edge: {header block: options}."""
    nodes = dict(re.findall(r"^(!\d+) = (?:distinct )?!\{(.*)\}$", ll, re.M))
    out = {}
    # (other attachments, such as the loop marks' ``!dbg``, may come before it)
    for m in re.finditer(r'br label %"(for_[^"]+)"(?:, !dbg !\d+)?, !llvm.loop (!\d+)', ll):
        opts = [nodes.get(x.strip(), "") for x in nodes[m.group(2)].split(",")[1:]]
        out[m.group(1)] = " ".join(opts)
    return out


def test_outer_loops_around_loops_that_stay_loops_are_not_unrolled_by_llvm():
    # i, j around k (1024 iterations): LLVM copied the k loop once per unrolled iteration
    sch = engine.Schedule(engine.workloads.get("matmul", n=256))
    i, j, k = sch.get_loops(sch.get_block("C", func_name="matmul"))
    k0, k1 = sch.split(k, factors=[None, 128])
    md = _loop_md(engine.build(sch.mod, cache=False).get_source("ll"))
    assert all("llvm.loop.unroll.disable" in md[h] for h in ("for_i", "for_j", "for_k_0")), md
    assert "for_k_1" not in md        # the innermost loop: LLVM's unroller decides
    # a nest of short loops is left to LLVM while unrolling it completely would make at
    # most MAX_NEST_COPIES copies of its body (3 x 3 x 3 = 27) ...
    tiny = engine.Schedule(engine.workloads.get("matmul", n=3))
    assert "llvm.loop.unroll.disable" not in engine.build(tiny.mod, cache=False).get_source("ll")
    # ... beyond, the loop that would make too many stays a loop, and so do those around it
    # (16 x 16 copies of k's body for j)
    small = engine.Schedule(engine.workloads.get("matmul", n=16))
    md = _loop_md(engine.build(small.mod, cache=False).get_source("ll"))
    assert all("llvm.loop.unroll.disable" in md[h] for h in ("for_i", "for_j")), md
    assert "for_k" not in md
    # ... and a nest too big for LLVM to unroll completely anyway is left as it was
    # (20 x 20 = 400 copies of k's body for j: more than LLVM's threshold of 300)
    big = engine.Schedule(engine.workloads.get("matmul", n=20))
    assert "llvm.loop.unroll.disable" not in engine.build(big.mod, cache=False).get_source("ll")


def test_unrolled_copies_share_their_index_arithmetic():
    sch = packed_parallel_matmul(128)
    ll = engine.build(sch.mod, cache=False).get_source("ll")
    body = ll[ll.index('define internal i32 @"engine_fn_matmul_par2_work"'):]
    block = body[body.index("for_k_1_body:"):]
    block = block[:block.index("\n\n") if "\n\n" in block else len(block)]
    block = block[:re.search(r"\n[A-Za-z_.\"0-9]+:\n", block).start()]
    assert block.count("fmul") == 16                      # 4 rows x 4 vectors
    # C[i_0*.. + i_1*.. + j_0*64 + row*1024 + v*16]: the common part once, then one add
    # per access; A's and B's likewise (before, each of the 48 accesses had its own chain
    # of 3-4 multiplications)
    assert block.count("mul nsw") <= 8, block
    # the loop variables count in i64: no index needs a sign extension
    assert block.count("sext") == 0, block

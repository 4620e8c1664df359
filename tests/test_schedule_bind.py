"""bind (TVM's Bind): loops become GPU thread axes. The program's meaning is kept (a bound loop
is a serial loop for the interpreter) and every accepted binding is a claim that the
iterations are independent: run in reverse order they compute the same thing. TVM's rules
are refusals with a sentence; T.thread_binding and T.launch_thread print and parse in both
dialects; the step is recorded, replayed and exported."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import engine
from engine.ir import For, ForKind, Mutator, structural_equal, substitute
from engine.ir import expr as E
from engine.lower.errors import BuildError
from engine.schedule import Schedule
from semantics import assert_computes_exactly
from test_schedule_differential import Checker, _blocks, programs
from test_schedule_support import assert_round_trips, refused

VECTOR_ADD = """
@T.prim_func
def main(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32"),
         C: T.Buffer((1024,), "float32")):
    for i in range(1024):
        with T.block("C"):
            vi = T.axis.spatial(1024, i)
            C[vi] = A[vi] + B[vi]
"""

MATMUL = """
@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
         C: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def vector_add():
    return Schedule(engine.parse(VECTOR_ADD), seed=0)


def matmul():
    return Schedule(engine.parse(MATMUL), seed=0)


class _Reversed(Mutator):
    """Every bound loop of constant extent runs its iterations last to first."""

    def visit_For(self, s):
        body = self.visit(s.body)
        ext = E.as_const_int(s.extent)
        if s.kind is ForKind.THREAD_BINDING and ext is not None:
            v = s.loop_var
            body = substitute(body, {v: E.IntImm(v.dtype, ext - 1) - v})
        return s.replace(body=body)


def reversed_bound_loops(mod):
    return engine.ir.IRModule({name: f.replace(body=_Reversed().visit(f.body))
                               for name, f in mod.functions})


def assert_order_free(before, after):
    """``after`` computes what ``before`` computes, and so it does with its bound loops run
    backwards (the iterations of a bound loop are independent)."""
    assert_computes_exactly(before, after, compiled=False)
    assert_computes_exactly(before, reversed_bound_loops(after), compiled=False)


# ------------------------------------------------------------------ the chapter's first step
def test_vector_add_binds_grid_and_block():
    sch = vector_add()
    i, = sch.get_loops("C")
    i0, i1 = sch.split(i, [None, 128])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    text = sch.mod.script()
    assert 'for i_0 in T.thread_binding(8, thread="blockIdx.x"):' in text
    assert 'for i_1 in T.thread_binding(128, thread="threadIdx.x"):' in text
    assert_order_free(vector_add().mod, sch.mod)
    assert_round_trips(sch, vector_add)
    assert sch.trace.as_json()["insts"][-1] == ["Bind", ["l3"], ["threadIdx.x"], []]
    assert 'sch.bind(loop=l3, thread_axis="threadIdx.x")' in sch.trace.export("tvm")
    assert 'sch.bind(loop=l3, thread_axis="threadIdx.x")' in sch.trace.export("course")
    assert 'sch.bind(l3, "threadIdx.x")' in sch.trace.as_python()


def test_the_cpu_build_refuses_a_gpu_program_with_the_way_out():
    sch = vector_add()
    i0, i1 = sch.split(sch.get_loops("C")[0], [None, 128])
    sch.bind(i1, "threadIdx.x")
    with pytest.raises(BuildError, match=r"binds loop i_1 to threadIdx.x: a GPU program "
                       r"cannot be compiled for the CPU .* target=\"cuda\""):
        engine.build(sch.mod)


def test_the_tvm_namespace_binds():
    from engine import tvm
    sch = tvm.s_tir.Schedule(engine.parse(VECTOR_ADD))
    i0, i1 = sch.split(sch.get_loops(sch.get_sblock("C"))[0], [None, 64])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, thread_axis="threadIdx.x")
    loop = sch.get(i1)
    assert loop.kind is ForKind.THREAD_BINDING and loop.thread_tag == "threadIdx.x"


def test_vthread_alias_and_reduction_inside_a_thread():
    """GEMM local blocking's shape: i and j tiled to blockIdx/vthread/threadIdx, the
    reduction loop serial inside each thread."""
    sch = matmul()
    i, j, k = sch.get_loops("C")
    i0, i1, i2 = sch.split(i, [2, 4, 8])
    j0, j1, j2 = sch.split(j, [2, 4, 8])
    sch.reorder(i0, j0, i1, j1, i2, j2, k)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "vthread")
    sch.bind(j1, "vthread.y")
    sch.bind(i2, "threadIdx.y")
    sch.bind(j2, "threadIdx.x")
    assert sch.get(i1).thread_tag == "vthread.x"
    assert_order_free(matmul().mod, sch.mod)
    assert_round_trips(sch, matmul)


# ------------------------------------------------------------------------------ refusals
def test_tvms_rules_are_refusals_that_name_the_rule():
    sch = matmul()
    i, j, k = sch.get_loops("C")
    refused(sch, lambda: sch.bind(k, "threadIdx.x"), "runs the reduction axis vk of block C",
            "cross-thread reduction")
    refused(sch, lambda: sch.bind(i, "threadIdx.w"), "unknown thread axis 'threadIdx.w'")
    sch.bind(i, "blockIdx.x")
    refused(sch, lambda: sch.bind(i, "blockIdx.y"), "already bound to blockIdx.x",
            "a loop is bound once")
    refused(sch, lambda: sch.bind(j, "blockIdx.x"), "loop i, which encloses it, is already "
            "bound to blockIdx.x")
    j0, j1 = sch.split(j, [32, 2])
    sch.bind(j1, "threadIdx.x")
    refused(sch, lambda: sch.bind(j0, "threadIdx.x"), "already bound to threadIdx.x")
    # a blockIdx loop cannot be inside a thread loop
    sch2 = matmul()
    i, j, k = sch2.get_loops("C")
    sch2.bind(i, "threadIdx.x")
    refused(sch2, lambda: sch2.bind(j, "blockIdx.x"), "a blockIdx loop would be inside",
            "the grid's blocks enclose their threads")


def test_threads_per_block_and_one_extent_per_axis():
    sch = matmul()
    i, j, k = sch.get_loops("C")
    sch.bind(i, "threadIdx.y")
    refused(sch, lambda: sch.bind(j, "threadIdx.x"), "64 (threadIdx.x) × 64 (threadIdx.y)",
            "= 4096 threads; a GPU runs at most 1024 per block")
    big = Schedule(engine.parse(VECTOR_ADD.replace("1024", "2048")))
    lp, = big.get_loops("C")
    refused(big, lambda: big.bind(lp, "threadIdx.x"), "has 2048 iterations, but threadIdx.x "
            "goes up to 1024")
    # two loops of one kernel bound to one axis with different extents
    two = """
@T.prim_func
def main(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8, 64), "float32"),
         C: T.Buffer((8, 64), "float32")):
    for b in range(8):
        for t in range(64):
            with T.block("B"):
                vb, vt = T.axis.remap("SS", [b, t])
                B[vb, vt] = A[vb, vt] * T.float32(2)
        for t in range(64):
            with T.block("C"):
                vb, vt = T.axis.remap("SS", [b, t])
                C[vb, vt] = B[vb, vt] + T.float32(1)
"""
    sch = Schedule(engine.parse(two))
    b, t1 = sch.get_loops("B")
    _, t2 = sch.get_loops("C")
    sch.bind(b, "blockIdx.x")
    sch.bind(t1, "threadIdx.x")
    t2o, t2i = sch.split(t2, [2, 32])
    refused(sch, lambda: sch.bind(t2i, "threadIdx.x"), "with 32 iterations, but loop t of "
            "the same kernel is bound to it with 64", "a launch has one size per axis")
    sch.fuse(t2o, t2i)
    sch.bind(sch.get_loops("C")[1], "threadIdx.x")
    assert_order_free(engine.parse(two), sch.mod)


def test_iterations_that_share_an_element_are_refused():
    racy = """
@T.prim_func
def main(A: T.Buffer((128,), "float32"), B: T.Buffer((1,), "float32")):
    for i in range(128):
        with T.block("B"):
            vi = T.axis.spatial(128, i)
            B[0] = A[vi]
"""
    sch = Schedule(engine.parse(racy))
    lp, = sch.get_loops("B")
    refused(sch, lambda: sch.bind(lp, "threadIdx.x"), "could touch the same element of B")


def test_a_shared_buffer_is_one_per_block_and_a_local_one_per_thread():
    """A scratch buffer used only inside a loop: bound to threadIdx, "shared" is shared by
    the threads (a race when they write the same element), "local" is each thread's own."""
    text = """
@T.prim_func
def main(A: T.Buffer((64, 4), "float32"), C: T.Buffer((64,), "float32")):
    for i in range(64):
        S = T.alloc_buffer((4,), scope="SCOPE")
        for k in range(4):
            with T.block("S"):
                vi, vk = T.axis.remap("SS", [i, k])
                S[vk] = A[vi, vk] * T.float32(2)
        with T.block("C"):
            vi = T.axis.spatial(64, i)
            C[vi] = S[0] + S[1] + S[2] + S[3]
"""
    local = Schedule(engine.parse(text.replace("SCOPE", "local")))
    lp, = local.get_loops("S")[:1]
    local.bind(lp, "threadIdx.x")
    assert_order_free(engine.parse(text.replace("SCOPE", "local")), local.mod)
    shared = Schedule(engine.parse(text.replace("SCOPE", "shared")))
    lp, = shared.get_loops("S")[:1]
    refused(shared, lambda: shared.bind(lp, "threadIdx.x"), "could touch the same element "
            "of S")
    per_block = Schedule(engine.parse(text.replace("SCOPE", "shared")))
    lp, = per_block.get_loops("S")[:1]
    per_block.bind(lp, "blockIdx.x")


def test_parallel_and_bound_loops_do_not_mix():
    sch = matmul()
    i, j, k = sch.get_loops("C")
    sch.parallel(i)
    refused(sch, lambda: sch.bind(j, "threadIdx.x"), "loop i, which encloses it, is a CPU "
            "parallel loop")
    refused(sch, lambda: sch.bind(i, "blockIdx.x"), "loop i is parallel; a loop has one kind")


# ------------------------------------------------------------------------- script forms
def test_thread_binding_and_launch_thread_parse_and_print_in_both_dialects():
    text = """
@T.prim_func
def main(A: T.Buffer((1024,), "float32"), C: T.Buffer((1024,), "float32")):
    for bx in T.thread_binding(0, 8, thread="blockIdx.x"):
        for tx in T.thread_binding(128, "threadIdx.x"):
            with T.block("C"):
                vi = T.axis.spatial(1024, bx * 128 + tx)
                C[vi] = A[vi] * T.float32(2)
"""
    mod = engine.parse(text)
    for dialect in ("course-2022", "tvm-0.27"):
        printed = mod.script(dialect=dialect)
        assert 'for bx in T.thread_binding(8, thread="blockIdx.x"):' in printed
        assert structural_equal(engine.parse(printed), mod)
    launched = engine.parse("""
@T.prim_func
def main(A: T.Buffer((1024,), "float32"), C: T.Buffer((1024,), "float32")):
    bx = T.launch_thread("blockIdx.x", 8)
    tx = T.launch_thread("threadIdx.x", 128)
    C[bx * 128 + tx] = A[bx * 128 + tx] * T.float32(2)
""")
    loops = [s for s in engine.ir.collect(launched["main"].body, For)]
    assert [(lp.thread_tag, E.as_const_int(lp.extent)) for lp in loops] == \
        [("blockIdx.x", 8), ("threadIdx.x", 128)]
    a = np.arange(1024, dtype="float32")
    c = np.zeros(1024, "float32")
    engine.interpret(launched, "main", a, c)
    np.testing.assert_array_equal(c, a * 2)


@pytest.mark.parametrize("line,message", [
    ('for t in T.thread_binding(8):', "needs the thread axis"),
    ('for t in T.thread_binding(8, thread="warp.x"):', "unknown thread axis 'warp.x'"),
    ('for t in T.thread_binding(8, thread=3):', 'the thread axis is a string'),
])
def test_bad_thread_bindings_are_refused_by_the_parser(line, message):
    text = f"""
@T.prim_func
def main(A: T.Buffer((8,), "float32")):
    {line}
        A[t] = T.float32(0)
"""
    with pytest.raises(engine.ScriptError, match=message):
        engine.parse(text)


# ------------------------------------------------------------------ random bindings
TAGS = ["blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y", "vthread.x", "bad"]


@given(text=programs(), data=st.data())
def test_random_bindings_keep_the_program_and_are_order_free(text, data):
    """Random loops bound to random axes after random loop transforms: an accepted binding
    keeps every output, and so does running the bound loops backwards."""
    c = Checker(text)
    for _ in range(data.draw(st.integers(0, 2))):
        b = c.sch.get_block(data.draw(st.sampled_from(_blocks(c.sch))))
        loops = c.sch.get_loops(b)
        if loops:
            lp = data.draw(st.sampled_from(loops))
            c.step("split", lambda: c.sch.split(lp, [None, data.draw(st.integers(1, 4))]))
    for _ in range(data.draw(st.integers(1, 4))):
        b = c.sch.get_block(data.draw(st.sampled_from(_blocks(c.sch))))
        loops = c.sch.get_loops(b)
        if not loops:
            continue
        lp = data.draw(st.sampled_from(loops))
        tag = data.draw(st.sampled_from(TAGS))
        if c.step(f"bind({c.sch.get(lp).loop_var.name}, {tag})", lambda: c.sch.bind(lp, tag)):
            got = c.want
            args = [a.copy() for a in c.args]
            engine.interpret(reversed_bound_loops(c.sch.mod), "main", *args)
            for p, w, g in zip(c.orig["main"].params, got, args):
                np.testing.assert_array_equal(g, w, err_msg=f"bound loops run backwards "
                                              f"change {p.name}:\n{c.sch.mod.script()}")
    note(c.sch.mod.script())


def test_running_bound_loops_backwards_shows_an_order_dependence():
    """The property above can fail: a scan written with a bound loop by hand (what bind
    refuses) computes something else backwards."""
    scan = engine.parse("""
@T.prim_func
def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in T.thread_binding(15, thread="threadIdx.x"):
        with T.block("B"):
            vi = T.axis.spatial(15, i)
            B[vi + 1] = B[vi] + A[vi]
""")
    with pytest.raises(AssertionError):
        assert_order_free(scan, scan)
    unbound = engine.parse(scan.script().replace('T.thread_binding(15, thread="threadIdx.x")',
                                                 "T.serial(15)"))
    sch = Schedule(unbound)
    lp, = sch.get_loops("B")
    refused(sch, lambda: sch.bind(lp, "threadIdx.x"), "could touch the same element of B")


WINDOW_SUM_FETCH = """
@T.prim_func
def main(A: T.Buffer((1027,), "float32"), B: T.Buffer((1024,), "float32")):
    A_shared = T.alloc_buffer((1027,), scope="shared")
    for i_0 in T.thread_binding(8, thread="blockIdx.x"):
        for i_1 in T.thread_binding(128, thread="threadIdx.x"):
            for ax0_0, ax0_1 in T.grid(2, 128):
                with T.block("A_shared"):
                    v0 = T.axis.spatial(1027, i_0 * 128 + (ax0_0 * 128 + ax0_1))
                    T.where(ax0_0 * 128 + ax0_1 < FETCHED)
                    A_shared[v0] = A[v0]
            with T.block("C"):
                vi = T.axis.spatial(1024, i_0 * 128 + i_1)
                B[vi] = A_shared[vi] + A_shared[vi + 1] + A_shared[vi + 2]
"""


def test_a_cooperative_fetch_shares_the_enclosing_thread_axis():
    """TVM's window sum after compute_at(A_shared, i_1): the fetch copies the block's 130
    elements in every iteration of i_1, so its inner loop may take threadIdx.x too — on
    the GPU each thread copies its part once."""
    text = WINDOW_SUM_FETCH.replace("FETCHED", "130")
    sch = Schedule(engine.parse(text))
    ax0_0, ax0_1 = sch.get_loops("A_shared")[2:]
    sch.bind(ax0_1, "threadIdx.x")
    assert_order_free(engine.parse(text), sch.mod)
    # one extent per axis still holds for the nested loop
    sch2 = Schedule(engine.parse(text))
    ax0_0, ax0_1 = sch2.get_loops("A_shared")[2:]
    f = sch2.fuse(ax0_0, ax0_1)
    a, b = sch2.split(f, [4, 64])
    refused(sch2, lambda: sch2.bind(b, "threadIdx.x"), "with 64 iterations")


def test_a_nested_loop_that_depends_on_the_outer_thread_is_refused():
    # the fetch reads what thread i_1 needs only: binding its loop to the same axis would
    # make thread t copy element t of every thread's window
    text = WINDOW_SUM_FETCH.replace("FETCHED", "3").replace(
        "i_0 * 128 + (ax0_0 * 128 + ax0_1)", "i_0 * 128 + i_1 + (ax0_0 * 128 + ax0_1)")
    sch = Schedule(engine.parse(text))
    ax0_1 = sch.get_loops("A_shared")[3]
    refused(sch, lambda: sch.bind(ax0_1, "threadIdx.x"), "already bound to threadIdx.x",
            "what runs under loop ax0_1 depends on i_1")


def test_split_fuse_partition_of_a_bound_loop_are_refused_as_tvm():
    sch = matmul()
    i, j, k = sch.get_loops("C")
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    refused(sch, lambda: sch.split(j, [None, 8]), "the loop is bound to threadIdx.x",
            "Split before binding")
    refused(sch, lambda: sch.fuse(i, j), "the loop is bound to blockIdx.x")
    refused(sch, lambda: sch.loop_partition(j, [None, 8]), "the loop is bound to threadIdx.x")


def test_unroll_parallel_vectorize_of_a_bound_loop_drop_the_binding_as_tvm():
    for prim in ("unroll", "vectorize"):
        sch = vector_add()
        i0, i1 = sch.split(sch.get_loops("C")[0], [None, 4])
        sch.bind(i1, "threadIdx.x")
        getattr(sch, prim)(i1)
        lp = sch.get(i1)
        assert lp.thread_tag == "" and lp.kind is not ForKind.THREAD_BINDING
        assert_computes_exactly(vector_add().mod, sch.mod)


def test_with_launch_thread_parses():
    mod = engine.parse("""
@T.prim_func
def main(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32")):
    with T.launch_thread("threadIdx.x", 128) as tx:
        bx = T.launch_thread("blockIdx.x", 2)
        B[bx * 128 + tx] = A[bx * 128 + tx] + T.float32(1)
""")
    a = np.arange(256, dtype="float32")
    b = np.zeros(256, "float32")
    engine.interpret(mod, "main", a, b)
    np.testing.assert_array_equal(b, a + 1)


@given(text=programs(min_stages=2), data=st.data())
def test_primitives_after_random_bindings_refuse_or_keep_the_program(text, data):
    """Loops bound first, then random primitives (split, fuse, reorder, reindex,
    compute_at, reverse_compute_at, unroll, vectorize, parallel): each is refused with a
    sentence or keeps every output — never an exception of another kind."""
    from test_schedule_differential import STEPS
    c = Checker(text)
    for _ in range(data.draw(st.integers(1, 3))):
        b = c.sch.get_block(data.draw(st.sampled_from(_blocks(c.sch))))
        loops = c.sch.get_loops(b)
        if loops:
            lp = data.draw(st.sampled_from(loops))
            tag = data.draw(st.sampled_from(TAGS[:-1]))
            c.step(f"bind({tag})", lambda: c.sch.bind(lp, tag))
    for _ in range(data.draw(st.integers(1, 3))):
        name = data.draw(st.sampled_from(sorted(STEPS) + ["unroll", "vectorize", "parallel"]))
        if name in STEPS:
            STEPS[name](c, data)
            continue
        b = c.sch.get_block(data.draw(st.sampled_from(_blocks(c.sch))))
        loops = c.sch.get_loops(b)
        if loops:
            lp = data.draw(st.sampled_from(loops))
            c.step(name, lambda: getattr(c.sch, name)(lp))

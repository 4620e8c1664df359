"""``engine.tvm``: the course's first TensorIR cells, written against ``from engine import tvm``
as they were against Apache TVM, and the TVM 0.27 names TVM's own schedule tests use."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import tvm
from engine.tvm import testing as tvm_testing
from engine.tvm.s_tir.schedule.testing import (assert_structural_equal_ignore_global_symbol,
                                               verify_trace_roundtrip)
from engine.tvm.script import tir as T
from engine.tvm.script import tirx as Tx


# the course's chapter 2 module, as written in 2022
@tvm.script.ir_module
class MyModule:
    @T.prim_func
    def mm_relu(A: T.Buffer[(128, 128), "float32"],
                B: T.Buffer[(128, 128), "float32"],
                C: T.Buffer[(128, 128), "float32"]):
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        Y = T.alloc_buffer((128, 128), dtype="float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                vk = T.axis.reduce(128, k)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


# the same element-wise program in TVM 0.27's spelling, twice (equal, distinct objects)
@Tx.prim_func(s_tir=True)
def elementwise(a: Tx.handle, b: Tx.handle) -> None:
    A = Tx.match_buffer(a, (128, 128))
    B = Tx.match_buffer(b, (128, 128))
    for i, j in Tx.grid(128, 128):
        with Tx.sblock("B"):
            vi, vj = Tx.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0


@Tx.prim_func(s_tir=True)
def elementwise_again(a: Tx.handle, b: Tx.handle) -> None:
    A = Tx.match_buffer(a, (128, 128))
    B = Tx.match_buffer(b, (128, 128))
    for i, j in Tx.grid(128, 128):
        with Tx.sblock("B"):
            vi, vj = Tx.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0


@Tx.prim_func(s_tir=True)
def elementwise_times_3(a: Tx.handle, b: Tx.handle) -> None:
    A = Tx.match_buffer(a, (128, 128))
    B = Tx.match_buffer(b, (128, 128))
    for i, j in Tx.grid(128, 128):
        with Tx.sblock("B"):
            vi, vj = Tx.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 3.0


def _course_schedule(sch):
    block_Y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    block_C = sch.get_block("C", "mm_relu")
    sch.reverse_compute_at(block_C, j0)
    sch.decompose_reduction(block_Y, k)
    return sch


def _inputs():
    rng = np.random.default_rng(0)
    a_np = rng.uniform(size=(128, 128)).astype("float32")
    b_np = rng.uniform(size=(128, 128)).astype("float32")
    return a_np, b_np, np.maximum(a_np @ b_np, 0)


def test_the_course_cells_schedule_build_and_match_numpy():
    a_np, b_np, c_mm_relu = _inputs()
    a_nd, b_nd = tvm.nd.array(a_np), tvm.nd.array(b_np)
    c_nd = tvm.nd.empty((128, 128), dtype="float32")

    rt_lib = tvm.build(MyModule, target="llvm")
    rt_lib["mm_relu"](a_nd, b_nd, c_nd)
    np.testing.assert_allclose(c_mm_relu, c_nd.numpy(), rtol=1e-5)

    sch = _course_schedule(tvm.tir.Schedule(MyModule))
    loops = sch.get_loops(sch.get_block("Y_update", "mm_relu"))
    assert [sch.get(lp).extent.value for lp in loops] == [128, 32, 128, 4]
    rt_lib_after = tvm.build(sch.mod, target="llvm")
    c_nd = tvm.nd.array(np.zeros((128, 128), dtype="float32"))
    rt_lib_after["mm_relu"](a_nd, b_nd, c_nd)
    np.testing.assert_allclose(c_mm_relu, c_nd.numpy(), rtol=1e-5)

    timer = rt_lib_after.time_evaluator("mm_relu", tvm.cpu(), number=2)
    assert timer(a_nd, b_nd, c_nd).mean > 0


def test_tvm_compile_runs_on_runtime_tensors():
    a_np, b_np, c_mm_relu = _inputs()
    sch = _course_schedule(tvm.s_tir.Schedule(MyModule, debug_mask="all"))
    exe = tvm.compile(sch.mod["mm_relu"], target="llvm")
    c = tvm.runtime.tensor(np.zeros((128, 128), dtype="float32"))
    exe(tvm.runtime.tensor(a_np), tvm.runtime.tensor(b_np), c)   # the one function
    tvm.testing.assert_allclose(c.numpy(), c_mm_relu, rtol=1e-5, atol=1e-5)
    assert tvm.tir.Schedule is tvm.s_tir.Schedule
    assert tvm.cpu() == tvm.runtime.cpu(0)


def test_a_prim_func_alone_becomes_main_and_the_trace_round_trips():
    sch = tvm.s_tir.Schedule(elementwise, debug_mask="all")
    assert sch.mod.names() == ["main"]
    i, j = sch.get_loops(sch.get_sblock("B"))
    sch.fuse(i, j)
    new = verify_trace_roundtrip(sch, elementwise)
    assert isinstance(new, tvm.s_tir.Schedule)
    with pytest.raises(tvm.s_tir.ScheduleError):
        sch.get_sblock("no_such_block")
    # the course's schedule on the course's module replays through JSON and Python too
    verify_trace_roundtrip(_course_schedule(tvm.tir.Schedule(MyModule)), MyModule)


def test_assert_structural_equal_passes_on_equal_programs_and_raises_on_a_difference():
    assert elementwise is not elementwise_again
    assert_structural_equal_ignore_global_symbol(elementwise, elementwise_again)
    tvm.ir.assert_structural_equal(tvm.ir.IRModule({"main": elementwise}),
                                   tvm.IRModule({"main": elementwise_again.with_attr(
                                       "global_symbol", "elementwise")}))
    with pytest.raises(ValueError) as err:
        assert_structural_equal_ignore_global_symbol(elementwise, elementwise_times_3)
    text = str(err.value)
    assert text.startswith("StructuralEqual check failed")
    assert "-" in text and "T.float32(2)" in text and "T.float32(3)" in text
    # names are the engine's global symbols: different names, different functions
    with pytest.raises(ValueError):
        tvm.ir.assert_structural_equal(elementwise, elementwise_again)


def test_tirx_names_are_the_engines_nodes():
    blocks = []
    tvm.tirx.stmt_functor.post_order_visit(
        elementwise.body, lambda n: blocks.append(n) if isinstance(n, tvm.tirx.SBlock) else None)
    assert sorted(b.name_hint for b in blocks) == ["B", "root"]
    assert isinstance(elementwise.body, tvm.tirx.SBlockRealize)
    assert isinstance(elementwise, tvm.tirx.PrimFunc)
    assert tvm.tir.SBlock is tvm.tirx.SBlock is tvm.tirx.stmt.SBlock
    assert isinstance(tvm.tirx.const(3, "int32"), tvm.tirx.IntImm)
    assert tvm.tirx.ForKind.SERIAL.name == "SERIAL"


def test_tirx_primfunc_takes_tvms_constructor():
    """TVM's ``PrimFunc(params, body)``: a nameless function (named main) around any
    statement, compared structurally like any other."""
    params = list(elementwise.params)
    loop = elementwise.body.block.body
    f = tvm.tirx.PrimFunc(params, loop)
    g = tvm.tirx.PrimFunc(params, loop, attrs={"tirx.noalias": True})
    assert isinstance(f, tvm.tirx.PrimFunc) and f.name == "main" and f.body is loop
    assert g.attrs == (("tirx.noalias", True),)
    tvm.ir.assert_structural_equal(f, tvm.tirx.PrimFunc(params, loop))
    with pytest.raises(ValueError):
        tvm.ir.assert_structural_equal(f, tvm.tirx.PrimFunc(params[::-1], loop))


def test_a_global_symbol_names_the_function_whatever_its_def():
    texts = [f'''
@T.prim_func
def {name}(A: T.Buffer((4,), "float32")):
    T.func_attr({{"global_symbol": "main"}})
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            A[vi] = T.float32({value})
''' for name, value in (("before", 1), ("after", 1), ("other", 2))]
    a, b, c = (engine.parse(t) for t in texts)
    fa, fb, fc = a["before"], b["after"], c["other"]
    tvm.ir.assert_structural_equal(fa, fb)
    with pytest.raises(ValueError):
        tvm.ir.assert_structural_equal(fa, fc)


def test_te_create_prim_func_schedules_and_runs():
    A = tvm.te.placeholder((64,), "float32", name="A")
    B = tvm.te.compute((64,), lambda i: A[i] + 1.0, name="B")
    func = tvm.te.create_prim_func([A, B])
    sch = tvm.s_tir.Schedule(func)
    (i,) = sch.get_loops(sch.get_sblock("B"))
    sch.split(i, factors=[None, 8])
    a = tvm.runtime.tensor(np.arange(64, dtype="float32"))
    b = tvm.runtime.tensor(np.zeros(64, dtype="float32"))
    tvm.compile(sch.mod)(a, b)
    np.testing.assert_array_equal(b.numpy(), np.arange(64, dtype="float32") + 1)


def test_what_the_engine_lacks_is_absent_by_name():
    with pytest.raises(AttributeError, match="auto_scheduler"):
        tvm.auto_scheduler  # noqa: B018
    with pytest.raises(AttributeError, match="ScheduleState"):
        tvm.s_tir.ScheduleState  # noqa: B018


use_block_name = tvm_testing.parameter(by_dict={"block_obj": False, "block_name": True})
seen_params: list = []


def test_testing_parameter_is_a_fixture_factory(use_block_name):
    seen_params.append(use_block_name)
    sch = tvm.s_tir.Schedule(elementwise)
    block = "B" if use_block_name else sch.get_sblock("B")
    assert len(sch.get_loops(block)) == 2


def test_testing_parameter_gave_both_values():
    assert sorted(seen_params) == [False, True]


def test_types_of_variables_and_buffers_as_tvm_0_27_gives_them():
    """``.ty.dtype`` / ``.ty.shape`` (TVM 0.27's buffer variables) and
    ``tirx.is_buffer_var``, as TVM's transform_layout tests read them."""
    import engine
    from engine.ir import expr as E
    func = engine.workloads.get("mm_relu", n=16)["mm_relu"]
    a = func.params[0]
    assert a.ty.dtype == "float32" and tuple(s.value for s in a.ty.shape) == (16, 16)
    assert tvm.tirx.is_buffer_var(a) and not tvm.tirx.is_buffer_var(E.Var("n"))
    assert E.Var("i", "int64").ty.dtype == "int64"


def test_a_private_function_takes_its_key_in_a_module_built_from_a_dict():
    """TVM: ``@T.prim_func(private=True)`` has no global symbol; ``IRModule({"main": f})``
    names it ``main``. A public function keeps its own name (its global symbol)."""
    @T.prim_func(private=True)
    def first(A: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("b"):
                vi = T.axis.remap("S", [i])
                A[vi] = T.float32(1)

    @T.prim_func(private=True)
    def second(A: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("b"):
                vi = T.axis.remap("S", [i])
                A[vi] = T.float32(1)

    @T.prim_func
    def public(A: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("b"):
                vi = T.axis.remap("S", [i])
                A[vi] = T.float32(1)

    assert first.private and not public.private
    a, b = tvm.IRModule({"main": first}), tvm.IRModule({"main": second})
    assert a["main"].name == "main"
    tvm.ir.assert_structural_equal(a, b)
    assert not engine.structural_equal(tvm.IRModule({"main": public}), a)
    assert not engine.structural_equal(first, second)     # still two names outside a module


def test_index_map_from_func_maps_compares_and_drives_transform_layout():
    from engine.arith import Analyzer
    from engine.ir.expr import as_const_int
    m = tvm.tir.IndexMap.from_func(lambda i, j: (j, i // 4, i % 4))
    assert [v.name for v in m.initial_indices] == ["i", "j"]
    assert [as_const_int(Analyzer().simplify(x)) for x in m.map_indices([9, 2])] == [2, 2, 1]
    same = tvm.tir.IndexMap.from_func(lambda a, b: (b, a // 4, a % 4))
    other = tvm.tir.IndexMap.from_func(lambda a, b: (a, b // 4, b % 4))
    assert m.is_equivalent_to(same) and not m.is_equivalent_to(other)
    assert tvm.tirx.analysis.expr_deep_equal(
        m.final_indices[1], same.map_indices(m.initial_indices)[1])
    assert not tvm.tirx.analysis.expr_deep_equal(
        m.final_indices[1], other.map_indices(m.initial_indices)[1])

    @T.prim_func
    def twice(A: T.Buffer((8, 4), "float32"), C: T.Buffer((8, 4), "float32")):
        B = T.alloc_buffer((8, 4), "float32")
        for i, j in T.grid(8, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for i, j in T.grid(8, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] + T.float32(1)

    mod = tvm.IRModule({"main": twice})
    sch = tvm.s_tir.Schedule(mod)
    sch.transform_layout("B", ("write", 0), tvm.tir.IndexMap.from_func(lambda i, j: (j, i)))
    alloc = sch.mod["main"].body.block.alloc_buffers[0]
    assert [int(s) for s in alloc.shape] == [4, 8]
    a = np.random.default_rng(0).integers(-4, 5, (8, 4)).astype("float32")
    c = np.zeros((8, 4), "float32")
    engine.build(sch.mod)["main"](a, c)
    np.testing.assert_array_equal(c, a * 2 + 1)

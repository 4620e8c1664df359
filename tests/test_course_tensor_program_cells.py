"""MLC course, chapter "Tensor Program Abstraction" (mlc-ai/mlc-en, chapter_tensor_program:
case_study.md, then tensorir_exercises.md), its cells in order through the engine's ``tvm``
namespace, in the course's current spelling (``tvm.compile``, ``tvm.runtime.tensor``,
``rt_lib.mod.time_evaluator``), the 2022 spelling (``tvm.build``, ``tvm.nd.array``,
``T.Buffer[...]``, ``rt_lib.time_evaluator``) checked beside it.

Each result is compared with numpy. ``IPython.display.Code(x.script(), ...)`` cells are
``x.script()`` here (the text is checked instead of shown). The exercises' TODO cells are
filled with their solutions (the broadcast add, the 2-D convolution, ``bmm_relu`` and its
transformation to the chapter's ``TargetModule``, checked with
``tvm.ir.assert_structural_equal`` as the optional step asks). The convolution exercise's
reference is computed with PyTorch in the course; here with numpy (the same sum).
"""
from __future__ import annotations

import numpy as np
import pytest

from engine import tvm
from engine.tvm import te
from engine.tvm.ir.module import IRModule
from engine.tvm.script import tir as T

# ================================================================ case_study.md
# ---------------------------------------------------------------- cell 1: numpy
dtype = "float32"
a_np = np.random.rand(128, 128).astype(dtype)
b_np = np.random.rand(128, 128).astype(dtype)
# a @ b is equivalent to np.matmul(a, b)
c_mm_relu = np.maximum(a_np @ b_np, 0)


# ---------------------------------------------------------------- cell 2: low-level numpy
def lnumpy_mm_relu(A: np.ndarray, B: np.ndarray, C: np.ndarray):
    Y = np.empty((128, 128), dtype="float32")
    for i in range(128):
        for j in range(128):
            for k in range(128):
                if k == 0:
                    Y[i, j] = 0
                Y[i, j] = Y[i, j] + A[i, k] * B[k, j]
    for i in range(128):
        for j in range(128):
            C[i, j] = max(Y[i, j], 0)


def test_cell_3_low_level_numpy():
    c_np = np.empty((128, 128), dtype=dtype)
    lnumpy_mm_relu(a_np, b_np, c_np)
    np.testing.assert_allclose(c_mm_relu, c_np, rtol=1e-5)


# ---------------------------------------------------------------- cell 4: TVMScript
@tvm.script.ir_module
class MyModule:
    @T.prim_func
    def mm_relu(A: T.Buffer((128, 128), "float32"),
                B: T.Buffer((128, 128), "float32"),
                C: T.Buffer((128, 128), "float32")):
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


# ---------------------------------------------------------------- cell 5: T.axis.remap
@tvm.script.ir_module
class MyModuleWithAxisRemapSugar:
    @T.prim_func
    def mm_relu(A: T.Buffer((128, 128), "float32"),
                B: T.Buffer((128, 128), "float32"),
                C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        Y = T.alloc_buffer((128, 128), dtype="float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


def test_cell_5_the_sugar_is_the_same_program():
    tvm.ir.assert_structural_equal(MyModule, MyModuleWithAxisRemapSugar)


def test_cells_6_7_types():
    assert isinstance(MyModule, IRModule)                       # type(MyModule)
    assert type(MyModule).__name__ == "IRModule"
    assert isinstance(MyModule["mm_relu"], tvm.tir.PrimFunc)   # type(MyModule["mm_relu"])
    assert type(MyModule["mm_relu"]).__name__ == "PrimFunc"


# ---------------------------------------------------------------- cell 8: two functions
@tvm.script.ir_module
class MyModuleWithTwoFunctions:
    @T.prim_func
    def mm(A: T.Buffer((128, 128), "float32"),
           B: T.Buffer((128, 128), "float32"),
           Y: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "mm", "tir.noalias": True})
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func
    def relu(A: T.Buffer((128, 128), "float32"),
             B: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "relu", "tir.noalias": True})
        for i, j in T.grid(128, 128):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.max(A[vi, vj], T.float32(0))


def test_cell_8_two_functions_run_one_after_the_other():
    rt_lib = tvm.compile(MyModuleWithTwoFunctions, target="llvm")
    y = tvm.runtime.tensor(np.empty((128, 128), dtype="float32"))
    c = tvm.runtime.tensor(np.empty((128, 128), dtype="float32"))
    rt_lib["mm"](tvm.runtime.tensor(a_np), tvm.runtime.tensor(b_np), y)
    rt_lib["relu"](y, c)
    np.testing.assert_allclose(c.numpy(), c_mm_relu, rtol=1e-5)


# ---------------------------------------------------------------- cell 9: transformation
def lnumpy_mm_relu_v2(A: np.ndarray, B: np.ndarray, C: np.ndarray):
    Y = np.empty((128, 128), dtype="float32")
    for i in range(128):
        for j0 in range(32):
            for k in range(128):
                for j1 in range(4):
                    j = j0 * 4 + j1
                    if k == 0:
                        Y[i, j] = 0
                    Y[i, j] = Y[i, j] + A[i, k] * B[k, j]
    for i in range(128):
        for j in range(128):
            C[i, j] = max(Y[i, j], 0)


def lnumpy_mm_relu_v3(A: np.ndarray, B: np.ndarray, C: np.ndarray):   # cell 17
    Y = np.empty((128, 128), dtype="float32")
    for i in range(128):
        for j0 in range(32):
            # Y_init
            for j1 in range(4):
                j = j0 * 4 + j1
                Y[i, j] = 0
            # Y_update
            for k in range(128):
                for j1 in range(4):
                    j = j0 * 4 + j1
                    Y[i, j] = Y[i, j] + A[i, k] * B[k, j]
            # C
            for j1 in range(4):
                j = j0 * 4 + j1
                C[i, j] = max(Y[i, j], 0)


def test_cell_9_and_17_low_level_numpy_variants():
    c_np = np.empty((128, 128), dtype=dtype)
    lnumpy_mm_relu_v2(a_np, b_np, c_np)
    np.testing.assert_allclose(c_mm_relu, c_np, rtol=1e-5)
    c_np = np.empty((128, 128), dtype=dtype)
    lnumpy_mm_relu_v3(a_np, b_np, c_np)
    np.testing.assert_allclose(c_mm_relu, c_np, rtol=1e-5)


def _run(mod, name="mm_relu"):
    """What the build cells compute: ``mod`` compiled and run on the course's arrays."""
    rt_lib = tvm.compile(mod, target="llvm")
    c_nd = tvm.runtime.tensor(np.empty((128, 128), dtype="float32"))
    rt_lib[name](tvm.runtime.tensor(a_np), tvm.runtime.tensor(b_np), c_nd)
    return c_nd.numpy()


def course_schedule():
    """Cells 10-16 and the unnumbered decompose_reduction cell, in order; each step's
    program is run and compared with numpy."""
    text = MyModule.script()                                     # cell 10
    assert "def mm_relu(" in text and 'T.block("Y")' in text

    sch = tvm.tir.Schedule(MyModuleWithAxisRemapSugar)           # cell 11

    block_Y = sch.get_block("Y", func_name="mm_relu")            # cell 12
    i, j, k = sch.get_loops(block_Y)

    j0, j1 = sch.split(j, factors=[None, 4])                     # cell 13
    text = sch.mod.script()                                      # cell 14
    assert "for i, j_0, j_1, k in T.grid(128, 32, 4, 128):" in text
    np.testing.assert_allclose(_run(sch.mod), c_mm_relu, rtol=1e-5)

    sch.reorder(j0, k, j1)                                       # cell 15
    text = sch.mod.script()
    assert "for i, j_0, k, j_1 in T.grid(128, 32, 128, 4):" in text
    np.testing.assert_allclose(_run(sch.mod), c_mm_relu, rtol=1e-5)

    block_C = sch.get_block("C", "mm_relu")                      # cell 16
    sch.reverse_compute_at(block_C, j0)
    text = sch.mod.script()
    assert "for ax0 in range(4):" in text or "for ax0 in T.serial(4):" in text
    np.testing.assert_allclose(_run(sch.mod), c_mm_relu, rtol=1e-5)

    sch.decompose_reduction(block_Y, k)                          # (unnumbered cell)
    text = sch.mod.script()
    assert 'T.block("Y_init")' in text
    np.testing.assert_allclose(_run(sch.mod), c_mm_relu, rtol=1e-5)
    return sch


def test_cells_10_to_16_schedule():
    course_schedule()


def test_cells_18_to_24_build_and_run():
    sch = course_schedule()
    rt_lib = tvm.compile(MyModule, target="llvm")                # cell 18

    a_nd = tvm.runtime.tensor(a_np)                              # cell 19
    b_nd = tvm.runtime.tensor(b_np)
    c_nd = tvm.runtime.tensor(np.empty((128, 128), dtype="float32"))
    assert type(c_nd).__name__ in ("Tensor", "NDArray")

    func_mm_relu = rt_lib["mm_relu"]                             # cell 20
    func_mm_relu(a_nd, b_nd, c_nd)

    np.testing.assert_allclose(c_mm_relu, c_nd.numpy(), rtol=1e-5)

    c_nd = tvm.runtime.tensor(np.zeros((128, 128), dtype="float32"))
    rt_lib_after = tvm.compile(sch.mod, target="llvm")           # cell 21
    rt_lib_after["mm_relu"](a_nd, b_nd, c_nd)
    np.testing.assert_allclose(c_mm_relu, c_nd.numpy(), rtol=1e-5)

    f_timer_before = rt_lib.mod.time_evaluator("mm_relu", tvm.cpu())          # cell 22
    print("Time cost of MyModule %g sec" % f_timer_before(a_nd, b_nd, c_nd).mean)
    f_timer_after = rt_lib_after.mod.time_evaluator("mm_relu", tvm.cpu())
    print("Time cost of transformed sch.mod %g sec" % f_timer_after(a_nd, b_nd, c_nd).mean)
    assert f_timer_before(a_nd, b_nd, c_nd).mean > 0
    np.testing.assert_allclose(c_mm_relu, c_nd.numpy(), rtol=1e-5)   # the timer ran it

    assert "def mm_relu(" in MyModule.script()                   # cells 23-24
    assert 'T.block("Y_init")' in sch.mod.script()


# ---------------------------------------------------------------- cell 25: the exercise
def transform(mod, jfactor):
    sch = tvm.tir.Schedule(mod)
    block_Y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, jfactor])
    sch.reorder(j0, k, j1)
    block_C = sch.get_block("C", "mm_relu")
    sch.reverse_compute_at(block_C, j0)
    return sch.mod


@pytest.mark.parametrize("jfactor", [8, 1, 16, 128])
def test_cell_25_jfactor_exercise(jfactor):
    a_nd = tvm.runtime.tensor(a_np)
    b_nd = tvm.runtime.tensor(b_np)
    c_nd = tvm.runtime.tensor(np.empty((128, 128), dtype="float32"))
    mod_transformed = transform(MyModule, jfactor=jfactor)

    rt_lib_transformed = tvm.compile(mod_transformed, "llvm")
    f_timer_transformed = rt_lib_transformed.mod.time_evaluator("mm_relu", tvm.cpu())
    print("Time cost of transformed mod_transformed %g sec"
          % f_timer_transformed(a_nd, b_nd, c_nd).mean)
    # display the code below
    text = mod_transformed.script()
    assert f"for i, j_0 in T.grid(128, {128 // jfactor}):" in text
    assert f"for k, j_1 in T.grid(128, {jfactor}):" in text
    np.testing.assert_allclose(c_nd.numpy(), c_mm_relu, rtol=1e-5)


# ---------------------------------------------------------------- cells 26-27: te
def test_cells_26_27_tensor_expression():
    A = te.placeholder((128, 128), "float32", name="A")
    B = te.placeholder((128, 128), "float32", name="B")
    k = te.reduce_axis((0, 128), "k")
    Y = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((128, 128), lambda i, j: te.max(Y[i, j], 0), name="C")

    te_func = te.create_prim_func([A, B, C]).with_attr({"global_symbol": "mm_relu"})
    MyModuleFromTE = tvm.IRModule({"mm_relu": te_func})
    text = MyModuleFromTE.script()
    assert 'T.block("Y")' in text and 'T.block("C")' in text
    np.testing.assert_allclose(_run(MyModuleFromTE), c_mm_relu, rtol=1e-5)
    # the generated program is the course's, up to the zero's spelling
    sch = tvm.tir.Schedule(MyModuleFromTE)
    np.testing.assert_allclose(_run(transform(sch.mod, 4)), c_mm_relu, rtol=1e-5)


# ---------------------------------------------------------------- the 2022 spelling
@tvm.script.ir_module
class MyModule2022:
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


def test_course_2022_spelling():
    tvm.ir.assert_structural_equal(MyModule2022, MyModule)
    rt_lib = tvm.build(MyModule2022, target="llvm")
    a_nd = tvm.nd.array(a_np)
    b_nd = tvm.nd.array(b_np)
    c_nd = tvm.nd.empty((128, 128), dtype="float32")
    assert type(c_nd).__name__ == "NDArray"
    func_mm_relu = rt_lib["mm_relu"]
    func_mm_relu(a_nd, b_nd, c_nd)
    np.testing.assert_allclose(c_mm_relu, c_nd.numpy(), rtol=1e-5)

    sch = tvm.tir.Schedule(MyModule2022)
    block_Y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    rt_lib_after = tvm.build(sch.mod, target="llvm")
    f_timer_before = rt_lib.time_evaluator("mm_relu", tvm.cpu())
    print("Time cost of MyModule %g sec" % f_timer_before(a_nd, b_nd, c_nd).mean)
    f_timer_after = rt_lib_after.time_evaluator("mm_relu", tvm.cpu())
    print("Time cost of transformed sch.mod %g sec" % f_timer_after(a_nd, b_nd, c_nd).mean)
    np.testing.assert_allclose(c_mm_relu, c_nd.numpy(), rtol=1e-5)

    A = te.placeholder((128, 128), "float32", name="A")          # 2022: the dict form
    B = te.placeholder((128, 128), "float32", name="B")
    k = te.reduce_axis((0, 128), "k")
    Y = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((128, 128), lambda i, j: te.max(Y[i, j], 0), name="C")
    te_func = te.create_prim_func([A, B, C]).with_attr({"global_symbol": "mm_relu"})
    MyModuleFromTE = tvm.IRModule({"mm_relu": te_func})
    np.testing.assert_allclose(_run(MyModuleFromTE), c_mm_relu, rtol=1e-5)


# ================================================================ tensorir_exercises.md
# ---------------------------------------------------------------- section 1: element-wise add
def test_example_element_wise_add():
    # init data
    a = np.arange(16).reshape(4, 4)
    b = np.arange(16, 0, -1).reshape(4, 4)
    # numpy version
    c_np = a + b

    # low-level numpy version
    def lnumpy_add(a: np.ndarray, b: np.ndarray, c: np.ndarray):
        for i in range(4):
            for j in range(4):
                c[i, j] = a[i, j] + b[i, j]
    c_lnumpy = np.empty((4, 4), dtype=np.int64)
    lnumpy_add(a, b, c_lnumpy)
    np.testing.assert_array_equal(c_lnumpy, c_np)

    # TensorIR version
    @tvm.script.ir_module
    class MyAdd:
        @T.prim_func
        def add(A: T.Buffer((4, 4), "int64"),
                B: T.Buffer((4, 4), "int64"),
                C: T.Buffer((4, 4), "int64")):
            T.func_attr({"global_symbol": "add"})
            for i, j in T.grid(4, 4):
                with T.block("C"):
                    vi = T.axis.spatial(4, i)
                    vj = T.axis.spatial(4, j)
                    C[vi, vj] = A[vi, vj] + B[vi, vj]

    rt_lib = tvm.compile(MyAdd, target="llvm")
    a_tvm = tvm.runtime.tensor(a)
    b_tvm = tvm.runtime.tensor(b)
    c_tvm = tvm.runtime.tensor(np.empty((4, 4), dtype=np.int64))
    rt_lib["add"](a_tvm, b_tvm, c_tvm)
    np.testing.assert_allclose(c_tvm.numpy(), c_np, rtol=1e-5)


# ---------------------------------------------------------------- exercise 1: broadcast add
def test_exercise_1_broadcast_add():
    # init data
    a = np.arange(16).reshape(4, 4)
    b = np.arange(4, 0, -1).reshape(4)
    # numpy version
    c_np = a + b

    @tvm.script.ir_module
    class MyAdd:
        @T.prim_func
        def add(A: T.Buffer((4, 4), "int64"),
                B: T.Buffer((4,), "int64"),
                C: T.Buffer((4, 4), "int64")):
            T.func_attr({"global_symbol": "add", "tir.noalias": True})
            for i, j in T.grid(4, 4):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = A[vi, vj] + B[vj]

    rt_lib = tvm.compile(MyAdd, target="llvm")
    a_tvm = tvm.runtime.tensor(a)
    b_tvm = tvm.runtime.tensor(b)
    c_tvm = tvm.runtime.tensor(np.empty((4, 4), dtype=np.int64))
    rt_lib["add"](a_tvm, b_tvm, c_tvm)
    np.testing.assert_allclose(c_tvm.numpy(), c_np, rtol=1e-5)


# ---------------------------------------------------------------- exercise 2: conv2d
def test_exercise_2_conv2d():
    N, CI, H, W, CO, K = 1, 1, 8, 8, 2, 3
    OUT_H, OUT_W = H - K + 1, W - K + 1
    data = np.arange(N*CI*H*W).reshape(N, CI, H, W)
    weight = np.arange(CO*CI*K*K).reshape(CO, CI, K, K)

    # torch version (torch.nn.functional.conv2d): the same sum in numpy
    conv_torch = np.zeros((N, CO, OUT_H, OUT_W), dtype=np.int64)
    for di in range(K):
        for dj in range(K):
            window = data[:, :, di:di + OUT_H, dj:dj + OUT_W]
            conv_torch += np.einsum("bqhw,kq->bkhw", window, weight[:, :, di, dj])

    @tvm.script.ir_module
    class MyConv:
        @T.prim_func
        def conv(A: T.Buffer((1, 1, 8, 8), "int64"),
                 W: T.Buffer((2, 1, 3, 3), "int64"),
                 B: T.Buffer((1, 2, 6, 6), "int64")):
            T.func_attr({"global_symbol": "conv", "tir.noalias": True})
            for b, k, i, j, di, dj, q in T.grid(1, 2, 6, 6, 3, 3, 1):
                with T.block("conv"):
                    vb, vk, vi, vj, vdi, vdj, vq = T.axis.remap("SSSSRRR",
                                                                [b, k, i, j, di, dj, q])
                    with T.init():
                        B[vb, vk, vi, vj] = T.int64(0)
                    B[vb, vk, vi, vj] = B[vb, vk, vi, vj] + \
                        A[vb, vq, vi + vdi, vj + vdj] * W[vk, vq, vdi, vdj]

    rt_lib = tvm.compile(MyConv, target="llvm")
    data_tvm = tvm.runtime.tensor(data)
    weight_tvm = tvm.runtime.tensor(weight)
    conv_tvm = tvm.runtime.tensor(np.empty((N, CO, OUT_H, OUT_W), dtype=np.int64))
    rt_lib["conv"](data_tvm, weight_tvm, conv_tvm)
    np.testing.assert_allclose(conv_tvm.numpy(), conv_torch, rtol=1e-5)


# ---------------------------------------------------------------- section 2: parallel etc.
def test_parallel_vectorize_unroll():
    @tvm.script.ir_module
    class MyAdd:
        @T.prim_func
        def add(A: T.Buffer((4, 4), "int64"),
                B: T.Buffer((4, 4), "int64"),
                C: T.Buffer((4, 4), "int64")):
            T.func_attr({"global_symbol": "add"})
            for i, j in T.grid(4, 4):
                with T.block("C"):
                    vi = T.axis.spatial(4, i)
                    vj = T.axis.spatial(4, j)
                    C[vi, vj] = A[vi, vj] + B[vi, vj]

    sch = tvm.tir.Schedule(MyAdd)
    block = sch.get_block("C", func_name="add")
    i, j = sch.get_loops(block)
    i0, i1 = sch.split(i, factors=[2, 2])
    sch.parallel(i0)
    sch.unroll(i1)
    sch.vectorize(j)
    text = sch.mod.script()
    assert "T.parallel(2)" in text and "T.unroll(2)" in text and "T.vectorized(4)" in text

    a = np.arange(16).reshape(4, 4)
    b = np.arange(16, 0, -1).reshape(4, 4)
    rt_lib = tvm.compile(sch.mod, target="llvm")
    c_tvm = tvm.runtime.tensor(np.empty((4, 4), dtype=np.int64))
    rt_lib["add"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c_tvm)
    np.testing.assert_array_equal(c_tvm.numpy(), a + b)


# ---------------------------------------------------------------- exercise 3: bmm_relu
def lnumpy_bmm_relu(A: np.ndarray, B: np.ndarray, C: np.ndarray):
    # the course names this hint lnumpy_mm_relu_v2 (a name cell 9 already used)
    Y = np.empty((16, 128, 128), dtype="float32")
    for n in range(16):
        for i in range(128):
            for j in range(128):
                for k in range(128):
                    if k == 0:
                        Y[n, i, j] = 0
                    Y[n, i, j] = Y[n, i, j] + A[n, i, k] * B[n, k, j]
    for n in range(16):
        for i in range(128):
            for j in range(128):
                C[n, i, j] = max(Y[n, i, j], 0)


@tvm.script.ir_module
class MyBmmRelu:
    @T.prim_func
    def bmm_relu(A: T.Buffer((16, 128, 128), "float32"),
                 B: T.Buffer((16, 128, 128), "float32"),
                 C: T.Buffer((16, 128, 128), "float32")):
        T.func_attr({"global_symbol": "bmm_relu", "tir.noalias": True})
        Y = T.alloc_buffer((16, 128, 128), dtype="float32")
        for n, i, j, k in T.grid(16, 128, 128, 128):
            with T.block("Y"):
                vn, vi, vj, vk = T.axis.remap("SSSR", [n, i, j, k])
                with T.init():
                    Y[vn, vi, vj] = T.float32(0)
                Y[vn, vi, vj] = Y[vn, vi, vj] + A[vn, vi, vk] * B[vn, vk, vj]
        for n, i, j in T.grid(16, 128, 128):
            with T.block("C"):
                vn, vi, vj = T.axis.remap("SSS", [n, i, j])
                C[vn, vi, vj] = T.max(Y[vn, vi, vj], T.float32(0))


@tvm.script.ir_module
class TargetModule:
    @T.prim_func
    def bmm_relu(A: T.Buffer((16, 128, 128), "float32"), B: T.Buffer((16, 128, 128), "float32"), C: T.Buffer((16, 128, 128), "float32")) -> None:  # noqa: E501 - the course's line
        T.func_attr({"global_symbol": "bmm_relu", "tir.noalias": True})
        Y = T.alloc_buffer([16, 128, 128], dtype="float32")
        for i0 in T.parallel(16):
            for i1, i2_0 in T.grid(128, 16):
                for ax0_init in T.vectorized(8):
                    with T.block("Y_init"):
                        n, i = T.axis.remap("SS", [i0, i1])
                        j = T.axis.spatial(128, i2_0 * 8 + ax0_init)
                        Y[n, i, j] = T.float32(0)
                for ax1_0 in T.serial(32):
                    for ax1_1 in T.unroll(4):
                        for ax0 in T.serial(8):
                            with T.block("Y_update"):
                                n, i = T.axis.remap("SS", [i0, i1])
                                j = T.axis.spatial(128, i2_0 * 8 + ax0)
                                k = T.axis.reduce(128, ax1_0 * 4 + ax1_1)
                                Y[n, i, j] = Y[n, i, j] + A[n, i, k] * B[n, k, j]
                for i2_1 in T.vectorized(8):
                    with T.block("C"):
                        n, i = T.axis.remap("SS", [i0, i1])
                        j = T.axis.spatial(128, i2_0 * 8 + i2_1)
                        C[n, i, j] = T.max(Y[n, i, j], T.float32(0))


def bmm_transform():
    sch = tvm.tir.Schedule(MyBmmRelu)
    # Step 1. Get blocks
    Y = sch.get_block("Y", func_name="bmm_relu")
    C = sch.get_block("C", func_name="bmm_relu")
    # Step 2. Get loops
    b, i, j, k = sch.get_loops(Y)
    # Step 3. Organize the loops
    k0, k1 = sch.split(k, factors=[None, 4])
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(j0, k0, k1, j1)
    sch.reverse_compute_at(C, j0)
    # Step 4. decompose reduction
    Y_init = sch.decompose_reduction(Y, k0)
    # Step 5. vectorize / parallel / unroll
    sch.vectorize(sch.get_loops(Y_init)[-1])
    sch.vectorize(sch.get_loops(C)[-1])
    sch.parallel(b)
    sch.unroll(k1)
    return sch


def test_exercise_3_bmm_relu():
    rng = np.random.default_rng(3)
    a = rng.random((16, 128, 128), dtype=np.float32)
    b = rng.random((16, 128, 128), dtype=np.float32) - 0.5
    c_bmm = np.maximum(a @ b, 0)

    sch = tvm.tir.Schedule(MyBmmRelu)
    assert 'T.block("Y")' in sch.mod.script()
    # Also please validate your result
    rt = tvm.compile(MyBmmRelu, target="llvm")
    c_tvm = tvm.runtime.tensor(np.empty((16, 128, 128), dtype="float32"))
    rt["bmm_relu"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c_tvm)
    np.testing.assert_allclose(c_tvm.numpy(), c_bmm, rtol=1e-5, atol=1e-5)

    sch = bmm_transform()
    assert "T.parallel(16)" in sch.mod.script()
    # OPTIONAL: exactly the target
    tvm.ir.assert_structural_equal(sch.mod, TargetModule)
    print("Pass")

    # Build and Evaluate
    before_rt_lib = tvm.compile(MyBmmRelu, target="llvm")
    after_rt_lib = tvm.compile(sch.mod, target="llvm")
    a_tvm = tvm.runtime.tensor(a)
    b_tvm = tvm.runtime.tensor(b)
    c_tvm = tvm.runtime.tensor(np.random.rand(16, 128, 128).astype("float32"))
    after_rt_lib["bmm_relu"](a_tvm, b_tvm, c_tvm)
    np.testing.assert_allclose(c_tvm.numpy(), c_bmm, rtol=1e-5, atol=1e-5)
    before_timer = before_rt_lib.mod.time_evaluator("bmm_relu", tvm.cpu())
    print("Before transformation:")
    print(before_timer(a_tvm, b_tvm, c_tvm))

    f_timer = after_rt_lib.mod.time_evaluator("bmm_relu", tvm.cpu())
    print("After transformation:")
    print(f_timer(a_tvm, b_tvm, c_tvm))
    np.testing.assert_allclose(c_tvm.numpy(), c_bmm, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_exercise_3_low_level_numpy_hint():
    """The hint's low-level numpy (34 million Python iterations: about 15 s), compared
    with numpy."""
    rng = np.random.default_rng(4)
    a = rng.random((16, 128, 128), dtype=np.float32)
    b = rng.random((16, 128, 128), dtype=np.float32) - 0.5
    c = np.empty((16, 128, 128), dtype="float32")
    lnumpy_bmm_relu(a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5)

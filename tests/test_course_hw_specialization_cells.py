"""MLC course, chapter "GPU and Hardware Acceleration", part 2 — hardware specialization
(mlc-ai/mlc-en, chapter_gpu_acceleration/part2.md, in TVM's current spelling:
``tvm.runtime.tensor``, ``tvm.compile``), its cells in order through the engine's ``tvm``
namespace on the CPU, each result compared with numpy.

The chapter's last cell (``tvm.compile`` of the tensorized program, whose ``tmm16`` is the
C function compiled by clang to LLVM IR and linked through the ``pragma_import_llvm``
annotation) is one the course does not run in its CI; it runs here. The only change to the
course's code: ``from tvm.contrib import utils, clang`` reads ``from engine.tvm.contrib``.
Also: the explorer's build (``engine.runtime.build``, what the workers call) refuses the
import and the extern call, each with a sentence.
"""
from __future__ import annotations

import numpy as np
import pytest

import engine
import engine.schedule.tensor_intrin as tensor_intrin
from engine import tvm
from engine.lower.errors import BuildError
from engine.tvm.script import tir as T

# ---------------------------------------------------------------- key elements (low-level numpy)


def accel_fill_zero(C):
    C[:] = 0


def accel_tmm_add(C, A, B):
    C[:] += A @ B.T


def accel_dma_copy(reg, dram):
    reg[:] = dram[:]


def lnumpy_tmm(A: np.ndarray, B: np.ndarray, C: np.ndarray):
    # a special accumulator memory
    C_accumulator = np.empty((16, 16), dtype="float32")
    A_reg = np.empty((16, 16), dtype="float32")
    B_reg = np.empty((16, 16), dtype="float32")

    for i in range(64):
        for j in range(64):
            accel_fill_zero(C_accumulator[:, :])
            for k in range(64):
                accel_dma_copy(A_reg[:], A[i * 16: i * 16 + 16, k * 16: k * 16 + 16])
                accel_dma_copy(B_reg[:], B[j * 16: j * 16 + 16, k * 16: k * 16 + 16])
                accel_tmm_add(C_accumulator[:, :], A_reg, B_reg)
            accel_dma_copy(C[i * 16: i * 16 + 16, j * 16: j * 16 + 16], C_accumulator[:, :])


dtype = "float32"
_rng = np.random.default_rng(0)
a_np = _rng.random((1024, 1024)).astype(dtype)
b_np = _rng.random((1024, 1024)).astype(dtype)
c_tmm = a_np @ b_np.T


def test_low_level_numpy():
    c_np = np.empty((1024, 1024), dtype="float32")
    lnumpy_tmm(a_np, b_np, c_np)
    np.testing.assert_allclose(c_np, c_tmm, rtol=1e-5)


# ---------------------------------------------------------------- a block with tensorized computation
@tvm.script.ir_module
class MatmulBlockModule:
    @T.prim_func
    def main(
        A: T.Buffer((1024, 1024), "float32"),
        B: T.Buffer((1024, 1024), "float32"),
        C: T.Buffer((1024, 1024), "float32"),
    ) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i0, j0, k0 in T.grid(64, 64, 64):
            with T.block("tmm-16x16"):
                vi0, vj0, vk0 = T.axis.remap("SSR", [i0, j0, k0])
                with T.init():
                    for i1, j1 in T.grid(16, 16):
                        with T.block("tmm_init"):
                            vi1, vj1 = T.axis.remap("SS", [i1, j1])
                            C[vi0 * 16 + vi1, vj0 * 16 + vj1] = T.float32(0)

                for i1, j1, k1 in T.grid(16, 16, 16):
                    with T.block("tmm"):
                        vi1, vj1, vk1 = T.axis.remap("SSR", [i1, j1, k1])
                        C[vi0 * 16 + vi1, vj0 * 16 + vj1] += \
                            A[vi0 * 16 + vi1, vk0 * 16 + vk1] * B[vj0 * 16 + vj1, vk0 * 16 + vk1]


def test_tensorized_block_runs(capsys):
    MatmulBlockModule.show()
    assert 'T.block("tmm-16x16")' in capsys.readouterr().out
    a_nd = tvm.runtime.tensor(a_np)
    b_nd = tvm.runtime.tensor(b_np)

    c_nd = tvm.runtime.tensor(np.empty((1024, 1024), dtype="float32"))

    lib = tvm.compile(MatmulBlockModule, target="llvm")
    lib["main"](a_nd, b_nd, c_nd)
    np.testing.assert_allclose(c_nd.numpy(), c_tmm, rtol=1e-5)


def test_transforming_loops_around_the_tensorized_block(capsys):
    sch = tvm.tir.Schedule(MatmulBlockModule)

    block_mm = sch.get_block("tmm-16x16")
    i, j, k = sch.get_loops(block_mm)

    i0, i1 = sch.split(i, [None, 4])

    sch.reorder(i0, j, i1, k)
    sch.mod.show()
    assert "for i0_0, j0, i0_1, k0 in T.grid(16, 64, 4, 64)" in capsys.readouterr().out


# ---------------------------------------------------------------- blockization .. tensorization
@tvm.script.ir_module
class MatmulModule:
    @T.prim_func
    def main(
        A: T.Buffer((1024, 1024), "float32"),
        B: T.Buffer((1024, 1024), "float32"),
        C: T.Buffer((1024, 1024), "float32"),
    ) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(1024, 1024, 1024):
            with T.block("matmul"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] += A[vi, vk] * B[vj, vk]


@T.prim_func
def tmm16_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float32", offset_factor=16, scope="global.A_reg")
    B = T.match_buffer(b, (16, 16), "float32", offset_factor=16, scope="global.B_reg")
    C = T.match_buffer(c, (16, 16), "float32", offset_factor=16, scope="global.accumulator")

    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        for i, j, k in T.grid(16, 16, 16):
            with T.block(""):
                vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])
                C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vjj, vkk]


@T.prim_func
def tmm16_impl(a: T.handle, b: T.handle, c: T.handle) -> None:
    sa = T.int32()
    sb = T.int32()
    sc = T.int32()
    A = T.match_buffer(a, (16, 16), "float32", offset_factor=16, strides=[sa, 1], scope="global.A_reg")
    B = T.match_buffer(b, (16, 16), "float32", offset_factor=16, strides=[sb, 1], scope="global.B_reg")
    C = T.match_buffer(c, (16, 16), "float32", offset_factor=16, strides=[sc, 1], scope="global.accumulator")

    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        T.evaluate(
            T.call_extern(
                "tmm16",
                C.access_ptr("w"),
                A.access_ptr("r"),
                B.access_ptr("r"),
                sa,
                sb,
                sc,
                dtype="int32",
            )
        )


def tmm_kernel():
    cc_code = """
      extern "C" int tmm16(float *cc, float *aa, float *bb, int stride_a, int stride_b, int stride_c) {
        for (int i = 0; i < 16; ++i) {
            for (int j = 0; j < 16; ++j) {
                for (int k = 0; k < 16; ++k) {
                    cc[i * stride_c + j] += aa[i * stride_a + k] * bb[j * stride_b + k];
                }
            }
        }
        return 0;
      }
    """
    from engine.tvm.contrib import utils, clang

    temp = utils.tempdir()
    ll_path = temp.relpath("temp.ll")
    # Create LLVM ir from c source code
    ll_code = clang.create_llvm(cc_code, output=ll_path)
    return ll_code


@pytest.fixture(scope="module")
def chapter():
    """The chapter's cells from blockization to the annotation, in order (the tensor
    intrinsic registered as the course does, a registration of an earlier test removed)."""
    tensor_intrin._builtins()
    tensor_intrin._REGISTRY.pop("tmm16", None)
    out = {}
    sch = tvm.tir.Schedule(MatmulModule)
    i, j, k = sch.get_loops("matmul")
    i, ii = sch.split(i, factors=[None, 16])
    j, ji = sch.split(j, factors=[None, 16])
    k, ki = sch.split(k, factors=[None, 16])
    sch.reorder(i, j, k, ii, ji, ki)
    sch.mod.show()

    block_mm = sch.blockize(ii)
    sch.mod.show()

    A_reg = sch.cache_read(block_mm, 0, storage_scope="global.A_reg")
    B_reg = sch.cache_read(block_mm, 1, storage_scope="global.B_reg")
    sch.compute_at(A_reg, k)
    sch.compute_at(B_reg, k)

    write_back_block = sch.cache_write(block_mm, 0, storage_scope="global.accumulator")
    sch.reverse_compute_at(write_back_block, j)
    sch.mod.show()
    out["scoped"] = sch.mod.script()

    tvm.tir.TensorIntrin.register("tmm16", tmm16_desc, tmm16_impl)

    sch.decompose_reduction(block_mm, k)
    sch.mod.show()

    sch.tensorize(block_mm, "tmm16")
    sch.mod.show()
    out["tensorized"] = sch.mod.script()
    out["plain"] = sch.copy()

    sch.annotate(i, "pragma_import_llvm", tmm_kernel())
    out["sch"] = sch
    return out


def test_scopes_with_tags(chapter):
    text = chapter["scoped"]
    for buf in ('A_global_A_reg = T.alloc_buffer((1024, 1024), scope="global.A_reg")',
                'B_global_B_reg = T.alloc_buffer((1024, 1024), scope="global.B_reg")',
                'C_global_accumulator = T.alloc_buffer((1024, 1024), scope="global.accumulator")'):
        assert buf in text


def test_tensorized_program_reads_as_tvm_prints_it(chapter):
    text = chapter["tensorized"]
    assert 'strides=(sa, 1)' in text and 'strides=(sc, 1)' in text
    assert ('T.call_extern("int32", "tmm16", T.tvm_access_ptr(T.type_annotation("float32"), '
            'C_1.data, C_1.elem_offset, 256, 2)') in text
    again = engine.parse(text)
    assert engine.structural_equal(again, chapter["plain"].mod, map_free_vars=True)


def test_the_chapter_runs_with_the_c_kernel(chapter):
    sch = chapter["sch"]
    a_nd = tvm.runtime.tensor(a_np)
    b_nd = tvm.runtime.tensor(b_np)

    c_nd = tvm.runtime.tensor(np.empty((1024, 1024), dtype="float32"))

    lib = tvm.compile(sch.mod, target="llvm")
    lib["main"](a_nd, b_nd, c_nd)
    np.testing.assert_allclose(c_nd.numpy(), c_tmm, rtol=1e-5)


def test_clang_ir_is_linked_as_clang_wrote_it():
    """Debian's clang (14) writes typed pointers; llvmlite's LLVM reads them as they are."""
    from engine.tvm.contrib import clang
    text = tmm_kernel()
    assert "define" in text and "@tmm16" in text
    assert clang.find_clang()


# ---------------------------------------------------------------- the explorer never links
def test_the_workers_build_refuses_the_import(chapter):
    from app.service import timing
    assert timing.build is engine.runtime.build   # what the workers compile with
    with pytest.raises(BuildError, match="imports LLVM IR \\(pragma_import_llvm\\): outside "
                                         "code is linked only by engine.build"):
        engine.runtime.build(chapter["sch"].mod)


def test_the_workers_build_refuses_a_pasted_extern_call(chapter):
    pasted = engine.parse(chapter["sch"].mod.script())     # the annotation included
    with pytest.raises(BuildError, match="pragma_import_llvm"):
        engine.runtime.build(pasted)
    plain = engine.parse(chapter["tensorized"])
    with pytest.raises(BuildError, match="unsupported intrinsic 'tmm16'.*only engine.build "
                                         "or tvm.compile"):
        engine.runtime.build(plain)


def test_an_extern_function_must_be_defined_by_the_imported_ir(chapter):
    with pytest.raises(BuildError, match="'tmm16', which no linked LLVM IR defines"):
        engine.build(chapter["plain"].mod)

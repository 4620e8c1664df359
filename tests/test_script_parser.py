"""Parser: the course's mm_relu listings (every syntax variant) parse and print as expected."""
from __future__ import annotations

import engine
from engine.ir import (Block, BlockRealize, BufferStore, For, ForKind, IterType, PrimFunc,
                       collect)
from engine.script import parse, script

from test_script_irgen import (DECOMPOSED_LOOPS, MM_RELU_TEXT, SEED_DECOMPOSED,
                               SEED_PRINTED, SEED_RCA, SYMBOLIC_TEXT, mm_relu)

# The course notebook's first listing: T.Buffer[...] syntax, explicit axes, no reads/writes.
SEED_ORIGINAL = '''
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
'''

EXPECTED_DECOMPOSED_TAIL = "        Y = T.alloc_buffer((128, 128))" + DECOMPOSED_LOOPS


def test_seed_original_listing_infers_regions_and_prints_like_tvm():
    mod = parse(SEED_ORIGINAL)
    assert script(mod) == MM_RELU_TEXT
    assert engine.structural_equal(mod, mm_relu())


def test_seed_printed_listing_equals_hand_built_ir():
    mod = parse(SEED_PRINTED)
    assert engine.structural_equal(mod, mm_relu())
    assert script(mod) == MM_RELU_TEXT


def test_new_buffer_call_syntax_and_module_names():
    text = SEED_PRINTED.replace('T.Buffer[(128, 128), "float32"]', 'T.Buffer((128, 128), "float32")')
    assert text != SEED_PRINTED
    assert engine.structural_equal(parse(text), mm_relu())
    text2 = SEED_PRINTED.replace('T.Buffer[(128, 128), "float32"]',
                                 'T.Buffer([128, 128], dtype="float32")')
    assert engine.structural_equal(parse(text2), mm_relu())
    for deco in ("@I.ir_module", "@ir_module", "@tvm.script.ir_module"):
        assert engine.structural_equal(
            parse(text.replace("@tvm.script.ir_module", deco)), mm_relu())


def test_single_prim_func_with_imports():
    body = SEED_ORIGINAL.split("class MyModule:\n", 1)[1]
    import textwrap
    text = ("import tvm\nfrom tvm.script import tir as T\nfrom tvm.script import ir as I\n"
            + textwrap.dedent(body))
    mod = parse(text)
    assert mod.names() == ["mm_relu"]
    assert engine.structural_equal(mod, mm_relu())
    # printing the PrimFunc alone gives the module's function text, dedented
    f_text = mod["mm_relu"].script()
    assert f_text.startswith("@T.prim_func\ndef mm_relu(")
    assert engine.structural_equal(parse(f_text), mm_relu())


def test_reverse_compute_at_listing():
    mod = parse(SEED_RCA)
    text = script(mod)
    assert "        for i, j_0 in T.grid(128, 32):\n            for k, j_1 in T.grid(128, 4):" in text
    assert "            for ax0 in T.serial(4):" in text
    f = mod["mm_relu"]
    loops = collect(f.body, For)
    assert [l.loop_var.name for l in loops] == ["i", "j_0", "k", "j_1", "ax0"]
    assert [l.extent.value for l in loops] == [128, 32, 128, 4, 4]
    c = [b for b in collect(f.body, Block) if b.name_hint == "C"][0]
    assert [iv.iter_type for iv in c.iter_vars] == [IterType.SPATIAL, IterType.SPATIAL]
    assert engine.structural_equal(parse(text), mod)


def test_tir_prefix_decomposed_listing():
    mod = parse(SEED_DECOMPOSED)
    text = script(mod)
    assert text.endswith(EXPECTED_DECOMPOSED_TAIL)
    blocks = {b.name_hint: b for b in collect(mod["mm_relu"].body, Block)}
    assert set(blocks) == {"root", "Y_init", "Y_update", "C"}
    assert blocks["Y_init"].reads == ()
    assert blocks["Y_update"].init is None


def test_sblock_and_tvm027_spellings():
    text = MM_RELU_TEXT.replace("T.block(", "T.sblock(").replace(
        "T.alloc_buffer(", "T.sblock_alloc_buffer(")
    assert engine.structural_equal(parse(text), mm_relu())


def test_match_buffer_handles():
    text = '''
@T.prim_func
def add(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (8,), "float32")
    B = T.match_buffer(b, [8], dtype="float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.S(8, i)
            B[vi] = A[vi] + T.float32(1)
'''
    f = parse(text)["add"]
    assert [p.name for p in f.params] == ["A", "B"]
    assert "def add(A: T.Buffer((8,), \"float32\"), B: T.Buffer((8,), \"float32\")):" in f.script()


def test_region_inference_relaxes_inner_loops_and_merges_offsets():
    text = '''
@T.prim_func
def f(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    for i in T.serial(4):
        with T.block("blk"):
            vi = T.axis.spatial(4, i)
            for k in range(4):
                B[vi * 4 + k] = A[vi, k * 2] + A[vi, k * 2 + 1] + A[vi + 1, 3]
'''
    text_out = parse(text)["f"].script()
    assert "T.reads(A[vi:vi + 2, 0:8])" in text_out
    assert "T.writes(B[vi * 4:vi * 4 + 4])" in text_out


def test_region_inference_non_affine_uses_whole_dimension():
    text = '''
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((4,), "float32")):
    for i in T.serial(4):
        with T.block("blk"):
            vi = T.axis.spatial(4, i)
            for k in range(4):
                B[vi] = B[vi] + A[(k * k) % 16]
            B[vi // 2] = A[vi * vi]
'''
    out = parse(text)["f"].script()
    assert "T.reads(B[vi], A[0:16])" in out  # one point read of B; A: non-affine
    assert "T.writes(B[0:4])" in out


def test_loop_ranges_annotations_and_expressions():
    text = '''
@T.prim_func
def f(A: T.Buffer((64,), "float32"), I: T.Buffer((64,), "int64")):
    for i in range(2, 10):
        for j in T.parallel(0, 4, annotations={"pragma": 1}):
            A[i * 4 + j] = T.exp(A[i]) / T.float32(2) + T.Cast("float32", I[i]) * 0.5
            I[j] = -I[i] + 3
            A[j] += 1
'''
    f = parse(text)["f"]
    loops = collect(f.body, For)
    assert (loops[0].min.value, loops[0].extent.value) == (2, 8)
    assert loops[1].kind is ForKind.PARALLEL and loops[1].annotations == (("pragma", 1),)
    out = f.script()
    assert "for i in T.serial(2, 10):" in out
    assert 'for j in T.parallel(4, annotations={"pragma": 1}):' in out
    assert ("A[i * 4 + j] = T.exp(A[i]) / T.float32(2) + T.Cast(\"float32\", I[i]) * "
            "T.float32(0.5)") in out
    assert "I[j] = T.int64(0) - I[i] + T.int64(3)" in out
    assert "A[j] = A[j] + T.float32(1)" in out
    stores = collect(f.body, BufferStore)
    assert stores[1].value.dtype == "int64"


def test_symbolic_shapes():
    text = SYMBOLIC_TEXT
    f = parse(text)["f"]
    out = f.script()
    assert out.splitlines()[1:3] == ['def f(A: T.Buffer((n,), "float32")):', "    n = T.int32()"]
    assert engine.structural_equal(parse(out), parse(text))


def test_multiple_functions_and_blocks_without_axes():
    text = '''
@I.ir_module
class M:
    @T.prim_func
    def relu0(X: T.Buffer((1, 128), "float32"), Y: T.Buffer((1, 128), "float32")):
        T.func_attr({"global_symbol": "relu0", "tir.noalias": True})
        for i, j in T.grid(1, 128):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @T.prim_func
    def fill(Z: T.Buffer((4,), "int32")):
        with T.block("fill"):
            for i in range(4):
                Z[i] = i
'''
    mod = parse(text)
    assert mod.names() == ["relu0", "fill"]
    out = script(mod)
    assert '\n\n    @T.prim_func\n    def fill(Z: T.Buffer((4,), "int32")):' in out
    assert '        with T.block("fill"):\n            T.reads()\n            T.writes(Z[0:4])' in out
    assert engine.structural_equal(parse(out), mod)
    assert isinstance(mod["fill"], PrimFunc)
    assert isinstance(mod["fill"].body, BlockRealize)


def test_namespace_alias_from_import():
    text = '''
from tvm.script import tir as tx
@tx.prim_func
def f(A: tx.Buffer((4,), "float32")):
    for i in tx.vectorized(4):
        A[i] = tx.float32(1)
'''
    f = parse(text)["f"]
    assert collect(f.body, For)[0].kind is ForKind.VECTORIZED
    assert f.params[0].shape[0].value == 4


TVM027_TEXT = '''# from tvm.script import ir as I
# from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func(private=True)
    def mm_relu(A: T.Buffer((128, 128)), B: T.Buffer((128, 128)), C: T.Buffer((128, 128))):
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        # with T.sblock("root"):
        Y = T.sblock_alloc_buffer((128, 128))
        for i, j, k in T.grid(128, 128, 128):
            with T.sblock("Y"):
                v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
                T.reads(A[v_i, v_k], B[v_k, v_j])
                T.writes(Y[v_i, v_j])
                with T.init():
                    Y[v_i, v_j] = T.float32(0.0)
                Y[v_i, v_j] = Y[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
        for i, j in T.grid(128, 128):
            with T.sblock("C"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                T.reads(Y[v_i, v_j])
                T.writes(C[v_i, v_j])
                C[v_i, v_j] = T.max(Y[v_i, v_j], T.float32(0.0))
'''


def test_tvm_027_printed_text():
    mod = parse(TVM027_TEXT)
    assert engine.structural_equal(mod, mm_relu())
    assert "v_i, v_j, v_k = T.axis.remap(\"SSR\", [i, j, k])" in script(mod)


def test_region_inference_of_vector_accesses():
    text = '''
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((4,), "float32")):
    for i in T.serial(4):
        with T.block("b"):
            vi = T.axis.spatial(4, i)
            B[T.Ramp(vi * 4, 1, 4)] = A[T.Ramp(vi * 4, 2, 2)] + T.Broadcast(C[vi], 4) + T.Broadcast(C[T.Broadcast(vi, 1)], 4)
'''
    out = parse(text)["f"].script()
    assert "T.reads(A[vi * 4:vi * 4 + 3], C[vi])" in out
    assert "T.writes(B[vi * 4:vi * 4 + 4])" in out


# The BindParams listing of the course (chapter on integration): a 1-D buffer written
# T.Buffer[128, "float32"], a shape without a tuple, as the 2022 parser accepted.
LINEAR0 = '''
@T.prim_func
def linear0(X: T.Buffer[(1, 784), "float32"], W: T.Buffer[(128, 784), "float32"], B: T.Buffer[128, "float32"], Z: T.Buffer[(1, 128), "float32"]) -> None:
    # function attr dict
    T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
    # body
    # with T.block("root")
    Y = T.alloc_buffer([1, 128], dtype="float32")
    for i, j, k in T.grid(1, 128, 784):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(X[vi, vk], W[vj, vk])
            T.writes(Y[vi, vj])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
    for i, j in T.grid(1, 128):
        with T.block("Z"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(Y[vi, vj], B[vj])
            T.writes(Z[vi, vj])
            Z[vi, vj] = Y[vi, vj] + B[vj]
'''


def test_one_dimensional_buffer_shape_without_a_tuple():
    import numpy as np
    import engine
    mod = engine.parse(LINEAR0)
    func = mod["linear0"]
    assert [tuple(int(d.value) for d in p.shape) for p in func.params] == \
        [(1, 784), (128, 784), (128,), (1, 128)]
    assert 'B: T.Buffer((128,), "float32")' in mod.script()
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype("float32") for s in ((1, 784), (128, 784), (128,)))
    z = np.zeros((1, 128), "float32")
    engine.interpret(mod, "linear0", x, w, b, z)
    np.testing.assert_allclose(z, x @ w.T + b, rtol=1e-4, atol=1e-4)


def test_buffer_subscript_with_a_bad_dtype_says_so():
    import pytest
    import engine
    with pytest.raises(engine.ScriptError, match="dtype"):
        engine.parse(LINEAR0.replace('T.Buffer[128, "float32"]', 'T.Buffer[128, "floaty"]'))


def test_several_names_assigned_at_once_as_tvm_writes_them():
    """TVM's tests write ``vi, vj = T.axis.spatial(...), T.axis.spatial(...)`` (and TVM
    prints an empty storage scope as global)."""
    import engine
    src = '''
@T.prim_func
def f(A: T.Buffer((4, 6), "float32")):
    B = T.alloc_buffer((4, 6), scope="")
    for i, j in T.grid(4, 6):
        with T.block("B"):
            vi, vj = T.axis.spatial(4, i), T.axis.spatial(6, j)
            B[vi, vj] = A[vi, vj]
            A[vi, vj] = B[vi, vj] + 1.0
'''
    mod = engine.parse(src)
    same = engine.parse(src.replace("vi, vj = T.axis.spatial(4, i), T.axis.spatial(6, j)",
                                    'vi, vj = T.axis.remap("SS", [i, j])').replace(
        ', scope=""', ""))
    assert engine.structural_equal(mod, same)


def test_a_tuple_assignment_that_reads_its_own_names_is_refused():
    import pytest

    import engine
    from engine.script import ScriptError
    with pytest.raises(ScriptError, match="one per line"):
        engine.parse('''
@T.prim_func
def f(A: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            a, b = vi, a
            A[vi] = b
''')


def test_a_let_written_as_tvm_0_27_writes_it():
    """TVM 0.27 annotates a let as ``x: T.let[T.int32] = ...`` (its rfactor tests' argmax)."""
    import engine
    src = '''
@T.prim_func
def f(A: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            x: LET = vi * 2
            A[vi] = x
'''
    assert engine.structural_equal(engine.parse(src.replace("LET", "T.let[T.int32]")),
                                   engine.parse(src.replace("LET", "T.int32")))


def test_a_region_whose_ends_differ_by_a_constant_has_that_constant_extent():
    """``A[vi - 2:vi + 3]`` is 5 wide, as TVM's parser reads it (equal terms cancel;
    variables compared by identity, so ``vi`` and ``vj`` never do)."""
    func = engine.parse('''
@T.prim_func
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((12, 12), "float32")):
    for i, j in T.grid(12, 12):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi * 2 - 2 + 2:vi * 2 + 3, vj:vi + 1])
            T.writes(B[vi, vj])
            B[vi, vj] = A[vi, vj]
''')["main"]
    block = func.body.block.body.body.body.block
    first, second = block.reads[0].region
    assert isinstance(first.extent, engine.ir.expr.IntImm) and first.extent.value == 3
    assert not isinstance(second.extent, engine.ir.expr.IntImm)   # vi + 1 - vj: not constant


def test_a_written_out_root_block_gets_no_inferred_regions():
    """TVM infers T.reads/T.writes for every block but a function's root."""
    func = engine.parse('''
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    with T.block("root"):
        for i in range(4):
            with T.block("A"):
                vi = T.axis.remap("S", [i])
                A[vi] = T.float32(1)
''')["main"]
    root = func.body.block
    assert root.name_hint == "root" and root.reads == () and root.writes == ()
    inner = root.body.body.block
    assert [r.buffer.name for r in inner.writes] == ["A"]

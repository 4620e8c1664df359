"""Opaque code in TVMScript: ``B.access_ptr(...)`` / ``T.tvm_access_ptr``, ``B.data`` and
``B.elem_offset``, TVM's tensor-core builtins, ``T.call_extern`` in both spellings and
``T.assume``. Read, printed and compared; regions inferred as TVM's detector infers them;
refused by the compiler and the interpreter with a sentence (``T.assume`` aside: it is a
fact, no code); a buffer accessed opaquely is not inlined."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.ir import BufferField, Call, structural_equal
from engine.lower.errors import BuildError
from engine.script import ScriptError

from semantics import assert_computes_exactly, assert_refused

OPAQUE = '''
@T.prim_func
def f(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((8, 8))
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(B[0:8, 0:8])
            T.writes(C[0:8, 0:8])
            T.evaluate(B.access_ptr("r", extent=8))
            T.evaluate(C.access_ptr("rw", offset=vi * 8))
            T.evaluate(T.call_extern("call_impl", B.data, C.elem_offset, dtype=""))
            T.evaluate(T.call_extern("int32", "old_style", vi))
            T.evaluate(T.tvm_mma_sync(C.data, C.elem_offset // 256, B.data, 0,
                                      dtype="handle"))
            T.evaluate(T.tvm_fill_fragment(C.data, 16, 16, 16, 0, T.float32(0)))
            C[vi, vj] = B[vi, vj] + 1.0
'''


def _calls(func, op):
    return engine.ir.collect(func.body, Call) and [c for c in engine.ir.collect(func.body, Call)
                                                   if c.op == op]


def test_opaque_code_parses_prints_and_reads_back_equal():
    mod = engine.parse(OPAQUE)
    text = mod.script()
    assert 'T.tvm_access_ptr(T.type_annotation("float32"), B.data, 0, 8, 1)' in text
    assert 'T.tvm_access_ptr(T.type_annotation("float32"), C.data, vi * 8, 64 - vi * 8, 3)' \
        in text
    assert 'T.call_extern("handle", "call_impl", B.data, C.elem_offset)' in text
    assert "T.tvm_mma_sync(C.data, C.elem_offset // 256, B.data, 0)" in text
    again = engine.parse(text)
    assert structural_equal(again, mod)
    assert engine.structural_hash(again) == engine.structural_hash(mod)
    (ptr, _) = _calls(mod["f"], "tvm_access_ptr")
    assert type(ptr.args[1]) is BufferField and ptr.args[1].field == "data"
    assert ptr.args[1].buffer.name == "B" and ptr.dtype == "handle"


def test_access_ptr_is_tvm_access_ptr():
    short = engine.parse(OPAQUE)
    spelled = engine.parse(OPAQUE.replace(
        'B.access_ptr("r", extent=8)',
        'T.tvm_access_ptr(T.type_annotation("float32"), B.data, 0, 8, 1)'))
    assert structural_equal(short, spelled)
    other = engine.parse(OPAQUE.replace('B.access_ptr("r", extent=8)',
                                        'B.access_ptr("w", extent=8)'))
    assert not structural_equal(short, other)


@pytest.mark.parametrize("bad, words", [
    ('B.access_ptr("x")', "made of 'r' and 'w'"),
    ('B.pointer("r")', "no method 'pointer'"),
    ('B.size', "no field 'size'"),
    ('T.tvm_access_ptr(B.data, 0, 8, 1)', "takes (T.type_annotation"),
    ('T.tvm_access_ptr(T.type_annotation("float32"), vi, 0, 8, 1)', "B.data"),
    ('T.tvm_access_ptr(T.type_annotation("float32"), B.data, 0, 8, 7)', "mask"),
    ('T.call_extern("int32", "call_extern", vi)', "engine's own operations"),
    ('T.call_extern("address_of", vi, dtype="handle")', "engine's own operations"),
    ('T.assume(vi)', "condition"),
])
def test_malformed_opaque_code_is_refused(bad, words):
    with pytest.raises(ScriptError, match=words.replace("(", r"\(").replace(".", r"\.")):
        engine.parse(OPAQUE.replace('B.access_ptr("r", extent=8)', bad))


def test_regions_of_opaque_accesses_are_inferred_as_tvm():
    src = '''
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"),
      C: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("X"):
            vi = T.axis.spatial(8, i)
            T.evaluate(A.access_ptr("r"))
            T.evaluate(B.access_ptr("w"))
            T.evaluate(T.call_extern("g", C.data, dtype="int32"))
            D[vi] = C[vi] + A[vi]
'''
    blk = engine.parse(src)["f"].body.block.body.body.block
    text = [engine.ir.display.render("repr", r) for r in blk.reads]
    reads = {r.buffer.name: r for r in blk.reads}
    writes = {w.buffer.name: w for w in blk.writes}
    # A: the element read and the whole buffer through the pointer; C: opaque, whole
    assert set(reads) == {"A", "C"}, text
    assert set(writes) == {"B", "D", "C"}
    for r in (reads["A"], reads["C"], writes["B"], writes["C"]):
        assert engine.ir.is_const_int(r.region[0].min, 0) and \
            engine.ir.is_const_int(r.region[0].extent, 8)
    assert writes["D"].region[0].extent.value == 1


def test_opaque_code_is_not_built_nor_interpreted():
    mod = engine.parse(OPAQUE)
    with pytest.raises(BuildError, match="opaque code"):
        engine.build(mod)
    with pytest.raises(engine.interpreter.InterpretError, match="opaque code"):
        engine.interpret(mod, "f", np.zeros((8, 8), "float32"), np.zeros((8, 8), "float32"))
    only_data = engine.parse(OPAQUE.split("            T.evaluate(B.access_ptr")[0] + '''
            T.evaluate(B.data)
            C[vi, vj] = B[vi, vj]
''')
    with pytest.raises(BuildError, match="B.data"):
        engine.build(only_data)


ASSUMED = '''
@T.prim_func
def main(A: T.Buffer((4, 4), "int32"), B: T.Buffer((14,), "int32")):
    for i, j in T.grid(4, 4):
        with T.block("assumption"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.evaluate(T.assume(not (vi == 3 and 2 <= vj) or A[vi, vj] == 42))
    for i in T.serial(14):
        with T.block("block"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi // 4, vi % 4]
'''


def test_assume_is_a_fact_not_code():
    mod = engine.parse(ASSUMED)
    assert "T.evaluate(T.assume(not (vi == 3 and 2 <= vj) or A[vi, vj] == 42))" in \
        mod.script()
    assert structural_equal(engine.parse(mod.script()), mod)
    without = engine.parse(ASSUMED.replace(
        "T.evaluate(T.assume(not (vi == 3 and 2 <= vj) or A[vi, vj] == 42))",
        "T.evaluate(0)"))
    assert_computes_exactly(without, mod)


CONSUMED_OPAQUELY = '''
@T.prim_func
def f(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((8, 8))
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(B[0:8, 0:8])
            T.writes(C[vi, vj])
            T.evaluate(OPAQUE_USE)
            C[vi, vj] = B[vi, vj] + 1.0
'''


@pytest.mark.parametrize("use", ['B.access_ptr("r")', "T.call_extern(\"g\", B.data, dtype=\"int32\")",
                                 "B.elem_offset"])
def test_a_buffer_accessed_opaquely_is_not_inlined(use):
    mod = engine.parse(CONSUMED_OPAQUELY.replace("OPAQUE_USE", use))
    sch = engine.Schedule(mod)
    assert_refused(sch, lambda: sch.compute_inline(sch.get_block("B")), "opaque")


def test_inlining_another_buffer_keeps_the_opaque_access():
    src = '''
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    A_cache = T.alloc_buffer((16,))
    BB = T.alloc_buffer((16,))
    with T.block("opaque"):
        T.reads(A[0:8])
        T.writes(A_cache[0:8])
        T.evaluate(A.access_ptr("r", extent=8))
        T.evaluate(A_cache.access_ptr("w", extent=8))
    for i in range(8):
        with T.block("BB"):
            vi = T.axis.spatial(8, i)
            BB[vi] = A_cache[vi] * 2.0
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = BB[vi] + 1.0
'''
    mod = engine.parse(src)
    sch = engine.Schedule(mod)
    sch.compute_inline(sch.get_block("BB"))
    text = sch.mod.script()
    assert "BB" not in text.replace('"BB"', "")
    assert 'T.tvm_access_ptr(T.type_annotation("float32"), A_cache.data, 0, 8, 2)' in text

"""``T.match_buffer`` inside a block: a view of a region of another buffer.

Read, printed, compared; regions inferred through views; lowered and interpreted as
accesses of the region they view (so a program with views computes what the same program
written on the source buffers computes: checked here by compiling and interpreting both on
random small integers); the primitives keep their meaning (set_dtype and set_scope change
the views with their source, a primitive that would leave a view behind is refused)."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.ir import MatchBufferRegion, structural_equal, structural_hash
from engine.ir.views import inline_views
from engine.script import ScriptError

from semantics import assert_computes_exactly, assert_refused

VIEWS = '''
@T.prim_func
def f(A: T.Buffer((8, 12), "float32"), C: T.Buffer((8, 12), "float32")):
    B = T.alloc_buffer((8, 12))
    for i, j in T.grid(8, 12):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            Bs = T.match_buffer(B[vi, vj], ())
            Bs[()] = A[vi, vj] * 2.0
    for i, j in T.grid(8, 3):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            Bb = T.match_buffer(B[vi, vj * 4:vj * 4 + 4], (4,))
            Cc = T.match_buffer(C[vi:vi + 1, vj * 4:vj * 4 + 4], (1, 4))
            for k in range(4):
                Cc[0, k] = Bb[k] + Bb[3 - k] + T.float32(k)
'''

PLAIN = '''
@T.prim_func
def f(A: T.Buffer((8, 12), "float32"), C: T.Buffer((8, 12), "float32")):
    B = T.alloc_buffer((8, 12))
    for i, j in T.grid(8, 12):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(8, 3):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            for k in range(4):
                C[vi, vj * 4 + k] = B[vi, vj * 4 + k] + B[vi, vj * 4 + 3 - k] + T.float32(k)
'''


def _blocks(mod):
    return {b.name_hint: b for b in engine.ir.collect(mod["f"].body, engine.ir.Block)}


def test_views_parse_print_and_read_back():
    mod = engine.parse(VIEWS)
    c = _blocks(mod)["C"]
    assert [m.buffer.name for m in c.match_buffers] == ["Bb", "Cc"]
    assert all(isinstance(m, MatchBufferRegion) for m in c.match_buffers)
    bb = c.match_buffers[0]
    assert [int(d) for d in bb.buffer.shape] == [4] and bb.source.buffer.name == "B"
    text = mod.script()
    assert "Bb = T.match_buffer(B[vi, vj * 4:vj * 4 + 4], (4,))" in text
    assert "Bs = T.match_buffer(B[vi, vj], ())" in text
    again = engine.parse(text)
    assert structural_equal(again, mod) and structural_hash(again) == structural_hash(mod)
    # the names of views do not matter, their regions do
    renamed = engine.parse(VIEWS.replace("Bb", "Zz"))
    assert structural_equal(renamed, mod)
    moved = engine.parse(VIEWS.replace("B[vi, vj * 4:vj * 4 + 4]", "B[vi, vj * 3:vj * 3 + 4]"))
    assert not structural_equal(moved, mod)


def test_regions_are_inferred_through_views():
    blocks = _blocks(engine.parse(VIEWS))
    text = engine.parse(VIEWS).script()
    assert "T.writes(B[vi, vj])" in text
    c = blocks["C"]
    (read,) = c.reads
    (write,) = c.writes
    assert read.buffer.name == "B" and write.buffer.name == "C"
    assert engine.ir.is_const_int(read.region[0].extent, 1)
    assert engine.ir.is_const_int(read.region[1].extent, 4)
    assert engine.ir.is_const_int(write.region[1].extent, 4)


def test_a_view_computes_what_the_region_holds():
    assert_computes_exactly(engine.parse(PLAIN), engine.parse(VIEWS))


def test_inline_views_is_the_plain_program():
    inlined = inline_views(engine.parse(VIEWS)["f"])
    assert not any(b.match_buffers for b in engine.ir.collect(inlined.body, engine.ir.Block))
    assert "match_buffer" not in engine.ir.IRModule((("f", inlined),)).script()


def test_a_view_of_a_view_and_its_offset():
    src = '''
@T.prim_func
def f(A: T.Buffer((4, 6, 8), "float32"), O: T.Buffer((4, 6), "int32"),
      C: T.Buffer((4, 6, 8), "float32")):
    for i, j in T.grid(4, 6):
        with T.block("outer"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj, 0:8])
            T.writes(C[vi, vj, 0:8], O[vi, vj])
            Av = T.match_buffer(A[vi, vj, 0:8], (8,))
            for k in range(2):
                with T.block("inner"):
                    vk = T.axis.spatial(2, k)
                    Aw = T.match_buffer(Av[vk * 4:vk * 4 + 4], (4,))
                    for e in range(4):
                        C[vi, vj, vk * 4 + e] = Aw[e] * T.float32(3)
            O[vi, vj] = Av.elem_offset
'''
    plain = '''
@T.prim_func
def f(A: T.Buffer((4, 6, 8), "float32"), O: T.Buffer((4, 6), "int32"),
      C: T.Buffer((4, 6, 8), "float32")):
    for i, j in T.grid(4, 6):
        with T.block("outer"):
            vi, vj = T.axis.remap("SS", [i, j])
            for k, e in T.grid(2, 4):
                C[vi, vj, k * 4 + e] = A[vi, vj, k * 4 + e] * T.float32(3)
            O[vi, vj] = vi * 48 + vj * 8
'''
    mod = engine.parse(src)
    inner = _blocks(mod)["inner"]
    assert inner.reads[0].buffer.name == "Av"        # an inner block's view of a view
    assert_computes_exactly(engine.parse(plain), mod)


def test_views_of_a_strided_buffer():
    src = '''
@T.prim_func
def f(A: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    B = T.alloc_buffer((4, 4), strides=(7, 1))
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            Bv = T.match_buffer(B[vi, 0:4], (4,))
            for j in range(4):
                Bv[j] = A[vi, j] + T.float32(1)
    for i in range(4):
        with T.block("C"):
            vi = T.axis.spatial(4, i)
            Bv = T.match_buffer(B[0:4, vi], (4, 1))
            for j in range(4):
                C[j, vi] = Bv[j, 0] * T.float32(2)
'''
    plain = '''
@T.prim_func
def f(A: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = (A[vi, vj] + T.float32(1)) * T.float32(2)
'''
    assert_computes_exactly(engine.parse(plain), engine.parse(src))


@pytest.mark.parametrize("view, words", [
    ("T.match_buffer(B[vi, vj * 4:vj * 4 + 4], (3,))", "has 3 elements where the region"),
    ("T.match_buffer(B[vi, vj * 4:vj * 4 + 4], (4,), \"float16\")", "source's dtype"),
    ("T.match_buffer(B[vi, vj * 4:vj * 4 + 4], (4,), scope=\"local\")", "source's scope"),
    ("T.match_buffer(B[vi, vj * 4:vj * 4 + 4], (4,), strides=(1,))", "strides"),
    ("T.match_buffer(B[vi, vj * 4:vj * 4 + 4], (1, 1, 4))", "more than"),
    ("T.match_buffer(B[vi:vi + 2, vj * 4:vj * 4 + 4], (4,))", "leaves it out"),
])
def test_views_that_do_not_fit_are_refused(view, words):
    with pytest.raises(ScriptError, match=words):
        engine.parse(VIEWS.replace("T.match_buffer(B[vi, vj * 4:vj * 4 + 4], (4,))", view))


def test_set_dtype_and_set_scope_take_the_views_along():
    mod = engine.parse(VIEWS)
    sch = engine.Schedule(mod)
    sch.unsafe_set_dtype(sch.get_block("B"), 0, "float64")
    views = [m.buffer for b in _blocks(sch.mod).values() for m in b.match_buffers
             if m.source.buffer.name == "B"]
    assert len(views) == 2 and all(v.dtype == "float64" for v in views)
    assert_computes_exactly(mod, sch.mod)          # float64 holds every float32 exactly
    sch.set_scope(sch.get_block("B"), 0, "local")
    views = [m.buffer for b in _blocks(sch.mod).values() for m in b.match_buffers
             if m.source.buffer.name == "B"]
    assert all(v.scope == "local" and v.dtype == "float64" for v in views)
    assert structural_equal(engine.parse(sch.mod.script()), sch.mod)
    assert_computes_exactly(mod, sch.mod)


def test_loop_primitives_keep_the_views():
    mod = engine.parse(VIEWS)
    sch = engine.Schedule(mod)
    i, j = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 2])
    sch.reorder(ii, io)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[1])
    assert any(m.buffer.name == "Bs" for m in _blocks(sch.mod)["B"].match_buffers)
    assert_computes_exactly(engine.parse(PLAIN), sch.mod)


def test_a_step_that_would_leave_a_view_behind_is_refused():
    """A primitive that rewrote a block's regions (and accesses) to another buffer but not
    its view — the view would still read the old buffer — is refused by the schedule."""
    from engine.schedule.state import _refuse_lost_views
    from engine.schedule.tree import FuncIndex
    func = engine.parse(VIEWS)["f"]
    c = _blocks(engine.parse(VIEWS))["C"]
    c = next(b for b in engine.ir.collect(func.body, engine.ir.Block) if b.name_hint == "C")
    other = engine.ir.Buffer("B_copy", c.reads[0].buffer.shape)
    swapped = c.replace(reads=(engine.ir.BufferRegion(other, c.reads[0].region),))
    from engine.schedule.tree import replace_stmts
    new = replace_stmts(func, {c: swapped})
    with pytest.raises(engine.ScheduleError, match="views a region of B"):
        _refuse_lost_views("cache_read", FuncIndex(func), FuncIndex(new))
    _refuse_lost_views("cache_read", FuncIndex(func), FuncIndex(func))   # nothing lost


def test_a_buffer_viewed_by_a_consumer_is_not_inlined():
    direct = VIEWS.replace("            Bs = T.match_buffer(B[vi, vj], ())\n", "").replace(
        "Bs[()]", "B[vi, vj]")
    sch = engine.Schedule(engine.parse(direct))
    assert_refused(sch, lambda: sch.compute_inline(sch.get_block("B")), "T.match_buffer")


# ---------------------------------------------------------------- tensorize onto views
DOT_DESC = '''
@T.prim_func
def desc(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (4,))
    B = T.match_buffer(b, (4,))
    C = T.match_buffer(c, ())
    with T.block("root"):
        T.reads(C[()], A[0:4], B[0:4])
        T.writes(C[()])
        for i in range(4):
            with T.block("update"):
                vi = T.axis.reduce(4, i)
                C[()] = C[()] + A[vi] * B[vi]
'''

# the same computation, written through the views and using their offsets (which makes
# it "opaque" enough for tensorize to bind views, as TVM always does), still TensorIR
DOT_IMPL_VIEWS = '''
@T.prim_func
def impl(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (4,), offset_factor=1)
    B = T.match_buffer(b, (4,), offset_factor=1)
    C = T.match_buffer(c, (), offset_factor=1)
    with T.block("root"):
        T.reads(C[()], A[0:4], B[0:4])
        T.writes(C[()])
        T.evaluate(A.elem_offset + B.elem_offset + C.elem_offset)
        for i in range(4):
            C[()] = C[()] + A[i] * B[i]
'''

DOT_IMPL_EXTERN = '''
@T.prim_func
def impl(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (4,), offset_factor=1)
    B = T.match_buffer(b, (4,), offset_factor=1)
    C = T.match_buffer(c, (), offset_factor=1)
    with T.block("root"):
        T.reads(C[()], A[0:4], B[0:4])
        T.writes(C[()])
        T.evaluate(T.call_extern("vec4add", C.data, C.elem_offset, A.data, A.elem_offset,
                                 B.data, B.elem_offset, dtype="int32"))
'''

BMM = '''
@T.prim_func
def bmm(A: T.Buffer((2, 8, 8), "float32"), B: T.Buffer((2, 8, 8), "float32"),
        C: T.Buffer((2, 8, 8), "float32")):
    for n, i, j, k in T.grid(2, 8, 8, 8):
        with T.block("update"):
            vn, vi, vj, vk = T.axis.remap("SSSR", [n, i, j, k])
            with T.init():
                C[vn, vi, vj] = T.float32(0)
            C[vn, vi, vj] = C[vn, vi, vj] + A[vn, vi, vk] * B[vn, vj, vk]
'''


def _tensorized(impl: str, name: str):
    engine.TensorIntrin.register(name, engine.parse(DOT_DESC), engine.parse(impl),
                                 override=True)
    mod = engine.parse(BMM)
    sch = engine.Schedule(mod)
    blk = sch.get_block("update")
    *_, k = sch.get_loops(blk)
    ko, ki = sch.split(k, [None, 4])
    sch.decompose_reduction(blk, ko)
    sch.tensorize(ki, name)
    return mod, sch


def test_tensorize_binds_views_for_an_implementation_using_offsets():
    mod, sch = _tensorized(DOT_IMPL_VIEWS, "test_views_dot4")
    outer = [b for b in _blocks_of(sch.mod) if b.match_buffers]
    assert len(outer) == 1
    views = outer[0].match_buffers
    assert [m.source.buffer.name for m in views] == ["A", "B", "C"]
    assert [len(m.buffer.shape) for m in views] == [1, 1, 0]
    assert structural_equal(engine.parse(sch.mod.script()), sch.mod)
    assert_computes_exactly(mod, sch.mod)


def test_tensorize_onto_an_extern_call_is_scheduled_not_built():
    _, sch = _tensorized(DOT_IMPL_EXTERN, "test_extern_dot4")
    text = sch.mod.script()
    assert "T.match_buffer(C[" in text and '"vec4add"' in text
    assert structural_equal(engine.parse(text), sch.mod)
    with pytest.raises(engine.lower.BuildError, match="vec4add"):
        engine.build(sch.mod)


def _blocks_of(mod):
    return engine.ir.collect(mod[mod.names()[0]].body, engine.ir.Block)

"""TVM's Instruction / InstructionKind / Trace API over the engine's traces (``TVMTrace``,
``TVMInstruction``, ``InstructionKind``), with programs of our own. Each test names the test
of TVM's ``test_tir_schedule_trace.py`` / ``test_tir_schedule_instruction.py`` it mirrors."""
from __future__ import annotations

import json

import pytest

import engine
from engine.ir import structural_equal
from engine.ir.expr import FloatImm, IntImm, Var
from engine.schedule import (BlockRV, ExprRV, InstructionKind, LoopRV, Schedule, Trace,
                             TraceError, TVMInstruction, TVMTrace)
from engine.schedule.recorded_trace import read_tvm_json
from engine.schedule.registry import REGISTRY

# Two element-wise stages over a 12x6 buffer: "scale" writes T, "shift" reads it.
STAGES = """
@T.prim_func
def main(X: T.Buffer((12, 6), "float32"), Z: T.Buffer((12, 6), "float32")):
    T_ = T.alloc_buffer((12, 6))
    for p, q in T.grid(12, 6):
        with T.block("scale"):
            vp, vq = T.axis.remap("SS", [p, q])
            T_[vp, vq] = X[vp, vq] * T.float32(3)
    for p, q in T.grid(12, 6):
        with T.block("shift"):
            vp, vq = T.axis.remap("SS", [p, q])
            Z[vp, vq] = T_[vp, vq] - T.float32(1)
"""

HEADER = ["# from tvm import s_tir", "def apply_trace(sch: s_tir.Schedule) -> None:"]


def stages():
    return engine.parse(STAGES)


def kind(name):
    return InstructionKind.get(name)


def get_block(name, out):
    return TVMInstruction(kind("GetSBlock"), [], [name, "main"], [out])


def get_loops(block, outs):
    return TVMInstruction(kind("GetLoops"), [block], [], outs)


def inline(block):
    return TVMInstruction(kind("ComputeInline"), [block], [], [])


def postproc():
    return TVMInstruction(kind("EnterPostproc"), [], [], [])


def script(*lines):
    return "\n".join(HEADER + ["  " + ln for ln in lines])


# --------------------------------------------------------------------------- kinds
def test_instruction_kind_get():
    """TVM's test_inst_kind_get: name and purity of registered kinds; one object per kind."""
    post = kind("EnterPostproc")
    assert post.name == "EnterPostproc" and not post.is_pure
    assert kind("GetLoops").is_pure and kind("SamplePerfectTile").is_pure
    assert kind("SampleCategorical").is_pure and kind("GetConsumers").is_pure
    assert not kind("Split").is_pure and not kind("ComputeInline").is_pure
    # TVM 0.27's name for the engine's GetBlock, either name gives the same kind
    assert kind("GetBlock") is kind("GetSBlock") and kind("GetBlock").name == "GetSBlock"
    assert kind("Split").same_as(kind("Split")) and not kind("Split").same_as(kind("Fuse"))
    assert kind("Split").primitive is REGISTRY["Split"]
    with pytest.raises(TraceError, match="not registered"):
        kind("NoSuchKind")


# --------------------------------------------------------------------------- instructions
def test_instruction_built_by_hand_prints_with_anonymous_handles():
    """TVM's test_inst_construct_1 / test_inst_construct_2: an Instruction holds the very
    handles it was given and prints TVM's line with every handle as ``_``."""
    blk, a, b = BlockRV(), LoopRV(), LoopRV()
    inst = get_loops(blk, [a, b])
    assert str(inst) == "_, _ = sch.get_loops(block=_)"
    assert inst.kind.same_as(kind("GetLoops"))
    assert inst.inputs[0] is blk and inst.outputs == (a, b) and inst.attrs == ()
    assert inst.same_as(inst) and not inst.same_as(get_loops(blk, [a, b]))
    assert str(inline(blk)) == "sch.compute_inline(block=_)"
    assert str(get_loops(blk, [a])) == "_, = sch.get_loops(block=_)"
    assert str(TVMInstruction(kind("Fuse"), [a, b], [True], [LoopRV()])) == \
        "_ = sch.fuse(_, _, preserve_unit_iters=True)"
    with pytest.raises(TypeError):
        TVMInstruction(object(), [], [], [])


# --------------------------------------------------------------------------- traces
def test_trace_built_by_hand_prints_as_tvm():
    """TVM's test_trace_construct_1 and test_trace_construct_get_decision_1."""
    b0, l1, l2 = BlockRV(), LoopRV(), LoopRV()
    trace = TVMTrace([get_block("scale", b0), get_loops(b0, [l1, l2])], {})
    assert str(trace) == script('b0 = sch.get_sblock(name="scale", func_name="main")',
                                "l1, l2 = sch.get_loops(block=b0)")
    assert len(trace.insts) == 2 and trace.decisions == {}
    assert trace.get_decision(trace.insts[0]) is None
    assert trace.get_decision(trace.insts[1]) is None


def test_trace_append_and_pop():
    """TVM's test_trace_construct_append_1, _pop_1 and _pop_2: names continue from the
    handles named before; pop gives back the very instruction, and None when empty."""
    b0 = BlockRV()
    trace = TVMTrace([get_block("scale", b0), get_loops(b0, [LoopRV(), LoopRV()])], {})
    trace.append(inst=get_block("shift", BlockRV()))
    assert str(trace).splitlines()[-1] == '  b3 = sch.get_sblock(name="shift", func_name="main")'
    appended, loops = trace.insts[2], trace.insts[1]
    assert trace.pop().same_as(appended) and trace.pop().same_as(loops)
    assert str(trace) == script('b0 = sch.get_sblock(name="scale", func_name="main")')
    empty = TVMTrace([], {})
    assert str(empty) == script("pass")
    assert empty.pop() is None and str(empty) == script("pass")


def test_pop_removes_the_decision():
    """TVM's Pop: the instruction's decision goes with it."""
    loop, v0, v1 = LoopRV(), ExprRV(), ExprRV()
    tile = TVMInstruction(kind("SamplePerfectTile"), [loop], [2, 4], [v0, v1])
    trace = TVMTrace([get_loops(BlockRV(), [loop])], {})
    with pytest.raises(TraceError, match="used before"):
        trace.as_python()    # the block is used before anything defines it
    trace = TVMTrace([get_block("scale", b := BlockRV()), get_loops(b, [LoopRV(), loop])], {})
    trace.append(tile, [3, 2])
    assert trace.get_decision(tile) == [3, 2] and trace.decisions == {tile: [3, 2]}
    assert trace.as_python()[-1] == ("v3, v4 = sch.sample_perfect_tile(loop=l2, n=2, "
                                     "max_innermost_factor=4, decision=[3, 2])")
    assert trace.pop() is tile and trace.decisions == {} and trace.get_decision(tile) is None


def test_apply_to_schedule_inlines():
    """TVM's test_trace_apply_to_schedule: a trace built by hand replays on a schedule."""
    b0 = BlockRV()
    trace = TVMTrace([get_block("scale", b0), inline(b0)], {})
    sch = Schedule(stages())
    trace.apply_to_schedule(sch, remove_postproc=False, decision_provider=None)
    ref = Schedule(stages())
    ref.compute_inline(ref.get_block("scale"))
    assert structural_equal(sch.mod, ref.mod)
    assert "scale" not in sch.mod.script() and 'T.block("shift")' in sch.mod.script()


def test_as_json_is_tvm_list():
    """TVM's test_trace_as_json_1."""
    b0, l1, l2 = BlockRV(), LoopRV(), LoopRV()
    trace = TVMTrace([get_block("shift", b0), get_loops(b0, [l1, l2])], {})
    assert trace.as_json() == [[["GetSBlock", [], ["shift", "main"], ["b0"]],
                                ["GetLoops", ["b0"], [], ["l1", "l2"]]], []]


def _with_postproc():
    b0, b1 = BlockRV(), BlockRV()
    return TVMTrace([get_block("scale", b0), inline(b0), get_block("shift", b1), postproc(),
                     inline(b1)], {})


FULL = ('b0 = sch.get_sblock(name="scale", func_name="main")', "sch.compute_inline(block=b0)",
        'b1 = sch.get_sblock(name="shift", func_name="main")', "sch.enter_postproc()",
        "sch.compute_inline(block=b1)")


def test_simplified_drops_postproc_and_dead_queries():
    """TVM's test_trace_simplified_1: with remove_postproc, EnterPostproc and what follows
    go, and then the GetSBlock nothing uses."""
    trace = _with_postproc()
    assert str(trace) == script(*FULL)
    assert str(trace.simplified(remove_postproc=True)) == script(*FULL[:2])
    assert trace.as_python(remove_postproc=True) == list(FULL[:3])
    assert len(trace.as_json(remove_postproc=True)[0]) == 3


def test_simplified_keeps_what_is_used():
    """TVM's test_trace_simplified_2: without remove_postproc everything is used."""
    trace = _with_postproc()
    assert str(trace.simplified(remove_postproc=False)) == script(*FULL)
    kept = trace.simplified(remove_postproc=False)
    assert all(a is b for a, b in zip(kept.insts, trace.insts))


def test_simplified_keeps_split_chain():
    """TVM's test_trace_simplified_3 (with Python numbers for the factor and the flags):
    unused outputs of a kept instruction keep it."""
    b0, l1, l2, l3 = BlockRV(), LoopRV(), LoopRV(), LoopRV()
    split = TVMInstruction(kind("Split"), [l1, None, IntImm("int32", 4)],
                           [IntImm("bool", 1), False], [l2, l3])
    trace = TVMTrace([get_block("scale", b0), get_loops(b0, [l1]), split], {})
    assert str(trace.simplified(remove_postproc=False)) == script(
        'b0 = sch.get_sblock(name="scale", func_name="main")',
        "l1, = sch.get_loops(block=b0)",
        "l2, l3 = sch.split(loop=l1, factors=[None, 4], preserve_unit_iters=True, "
        "disable_predication=False)")
    # a query whose results nothing uses goes, also in the middle
    dead = TVMTrace([get_block("shift", BlockRV()), get_block("scale", b0), inline(b0)], {})
    assert dead.simplified(False).as_python() == [
        'b0 = sch.get_sblock(name="scale", func_name="main")', "sch.compute_inline(block=b0)"]


def test_simplified_counts_handles_inside_lists():
    """Beyond TVM (which looks at direct inputs only): a block given in cache_read's
    consumer list keeps its get_sblock, so the simplified trace still replays."""
    sch = Schedule(stages())
    shift = sch.get_block("shift")
    sch.cache_read(shift, 0, "local", consumer_blocks=[sch.get_block("shift")])
    trace = TVMTrace.from_schedule(sch).simplified(remove_postproc=False)
    assert [i.kind.name for i in trace.insts] == ["GetSBlock", "GetSBlock", "CacheRead"]
    again = Schedule(stages())
    trace.apply_to_schedule(again, False)
    assert structural_equal(again.mod, sch.mod)
    assert [i.kind for i in sch.trace.simplified().insts] == ["GetBlock", "GetBlock",
                                                               "CacheRead"]


def test_apply_json_to_schedule():
    """TVM's test_apply_json_to_schedule_1."""
    b0 = BlockRV()
    doc = TVMTrace([get_block("scale", b0), inline(b0)], {}).as_json()
    sch = Schedule(stages())
    TVMTrace.apply_json_to_schedule(doc, sch)
    ref = Schedule(stages())
    ref.compute_inline(ref.get_block("scale"))
    assert structural_equal(sch.mod, ref.mod)


def test_apply_json_sample_categorical_with_tvm_numbers():
    """TVM's test_apply_json_to_schedule_sample_categorical: a tirx Var as the sampled
    value, IntImm/FloatImm attributes kept as objects in the JSON; replayed, the schedule
    records TVM's line (the float written as TVM writes it: ``probs=[1]``)."""
    one = FloatImm("float32", 1.0)
    trace = TVMTrace([TVMInstruction(kind("SampleCategorical"), [],
                                     [[IntImm("int32", 3)], [one]], [Var("v", "int32")])], {})
    doc = trace.as_json()
    assert doc[0][0][0] == "SampleCategorical" and doc[0][0][3] == ["v0"] and doc[1] == []
    assert doc[0][0][2][0][0].value == 3 and doc[0][0][2][1][0] is one
    sch = Schedule(stages())
    TVMTrace.apply_json_to_schedule(doc, sch)
    assert sch.trace.as_tvm_python() == [
        "v0 = sch.sample_categorical(candidates=[3], probs=[1], decision=0)"]
    assert TVMTrace.from_schedule(sch).as_python() == sch.trace.as_tvm_python()


@pytest.mark.parametrize("note", ["SRSR", "", '""', '"', 'say "hi"\\n', "a\\b"])
def test_annotation_strings_survive_json(note):
    """TVM's test_apply_annotation_from_json: any string, quotes and backslashes included,
    comes through TVM's JSON (written between quotes, unescaped, as TVM writes it)."""
    b0 = BlockRV()
    trace = TVMTrace([get_block("shift", b0),
                      TVMInstruction(kind("Annotate"), [b0, note], ["my_note"], [])], {})
    doc = trace.as_json()
    assert doc[0][1][1] == ["b0", '"' + note + '"']
    sch = Schedule(stages())
    TVMTrace.apply_json_to_schedule(doc, sch)
    block = sch.get(sch.get_block("shift"))
    assert dict(block.annotations)["my_note"] == note
    # and through the JSON text, as a TVM log stores it
    assert read_tvm_json(json.loads(json.dumps(doc))).insts[1].inputs[1] == json.dumps(note)


def test_decision_provider_and_remove_postproc():
    """TVM's ApplyToSchedule: the provider is asked for each decision (with the trace's own
    instruction) and its answer is replayed; remove_postproc stops at EnterPostproc."""
    b0, l1, l2, v3, v4 = BlockRV(), LoopRV(), LoopRV(), ExprRV(), ExprRV()
    tile = TVMInstruction(kind("SamplePerfectTile"), [l1], [2, 16], [v3, v4])
    trace = TVMTrace([get_block("scale", b0), get_loops(b0, [l1, l2]), tile,
                      TVMInstruction(kind("Split"), [l1, v3, v4], [True, False],
                                     [LoopRV(), LoopRV()]),
                      postproc(), TVMInstruction(kind("Parallel"), [l2], [], [])],
                     {tile: [4, 3]})
    asked = []

    def provider(inst, inputs, attrs, decision):
        asked.append((inst, decision))
        return [6, 2] if inst is tile else decision

    sch = Schedule(stages())
    trace.apply_to_schedule(sch, True, provider)
    assert [i for i, _ in asked] == list(trace.insts[:4]) and asked[2][1] == [4, 3]
    assert sch.trace.decisions == {sch.trace.insts[2]: [6, 2]}
    assert [i.kind for i in sch.trace.insts] == ["GetBlock", "GetLoops", "SamplePerfectTile",
                                                 "Split"]
    whole = Schedule(stages())
    trace.apply_to_schedule(whole, remove_postproc=False)
    assert whole.trace.insts[-1].kind == "Parallel" and whole.trace.get_decision(2) == [4, 3]
    # a provider's decision of the wrong shape is refused, the schedule unchanged
    bad = Schedule(stages())
    with pytest.raises(TraceError):
        trace.apply_to_schedule(bad, True, lambda i, ins, at, d: [5] if i is tile else d)
    assert len(bad.trace) == 0


def test_with_decision_keeps_the_instructions():
    """TVM's WithDecision: the same instruction objects, one decision replaced; with
    remove_postproc the post-processing goes."""
    b0, l1, v2 = BlockRV(), LoopRV(), ExprRV()
    pick = TVMInstruction(kind("SampleCategorical"), [], [[2, 4], [0.5, 0.5]], [v2])
    trace = TVMTrace([pick, postproc(), get_block("scale", b0), get_loops(b0, [l1, LoopRV()])],
                     {pick: 0})
    new = trace.with_decision(pick, 1, remove_postproc=True)
    assert new.insts == (pick,) and new.get_decision(pick) == 1
    assert trace.get_decision(pick) == 0 and len(trace.insts) == 4
    assert trace.with_decision(pick, 1, False).insts == trace.insts


def test_from_schedule_holds_the_schedules_handles():
    """``sch.trace`` as TVM's: the instructions hold the schedule's own handles; the TVM
    lines equal the engine trace's; a JSON round trip replays to the same program."""
    sch = Schedule(stages(), seed=7)
    blk = sch.get_block("scale")
    p, q = sch.get_loops(blk)
    factors = sch.sample_perfect_tile(q, n=2, max_innermost_factor=3)
    sch.split(q, factors=factors)
    sch.compute_inline(blk)
    trace = TVMTrace.from_schedule(sch)
    assert trace.insts[0].outputs[0] is blk and trace.insts[1].outputs == (p, q)
    assert sch.get(trace.insts[2].outputs[0]) == sch.get(factors[0])
    assert trace.as_python() == sch.trace.as_tvm_python()
    assert trace.decisions == {trace.insts[2]: sch.trace.get_decision(2)}
    for doc in (trace.as_json(), json.loads(json.dumps(trace.as_json())), sch.trace.as_json()):
        again = Schedule(stages())
        TVMTrace.from_json(doc).apply_to_schedule(again)
        assert structural_equal(again.mod, sch.mod)
        assert again.trace == sch.trace


def test_tvm_lines_name_every_argument():
    """TVM's as_python spelling on a recorded trace: arguments named (but a fuse's loops and
    get_child_blocks' target), ``l, =`` for a one-element list, 17-digit floats."""
    sch = Schedule(stages(), seed=1)
    shift = sch.get_block("shift")
    sch.get_child_blocks(shift)
    root = sch.get_block("root")
    sch.get_output_blocks(root)
    p, q = sch.get_loops(shift)
    sch.fuse(p, q)
    sch.sample_categorical([1, 2], [0.15, 0.85])
    lines = sch.trace.as_tvm_python()
    assert lines[1] == "sch.get_child_blocks(b0)"   # a block without child blocks
    assert lines[3] == "b2, = sch.get_output_blocks(block=b1)"
    assert lines[4] == "l3, l4 = sch.get_loops(block=b0)"
    assert lines[5] == "l5 = sch.fuse(l3, l4, preserve_unit_iters=True)"
    assert lines[6].startswith("v6 = sch.sample_categorical(candidates=[1, 2], "
                               "probs=[0.14999999999999999, 0.84999999999999998], decision=")
    # the engine's own exports are unchanged
    assert sch.trace.as_python().splitlines()[4] == "l3, l4 = sch.get_loops(b0)"
    assert "(b2,) = sch.get_output_blocks(b1)" in sch.trace.as_python()


def test_engine_trace_keeps_its_document():
    """The engine's Trace (links, app) is as before: its JSON document, its Python text."""
    sch = Schedule(stages())
    sch.compute_inline(sch.get_block("scale"))
    doc = sch.trace.as_json()
    assert doc["format"] == "schedule-explorer/trace" and doc["insts"][0][0] == "GetBlock"
    assert isinstance(sch.trace.as_python(), str)
    assert Trace.decode(sch.trace.encode()) == sch.trace
    assert TVMTrace.from_recorded(sch.trace).recorded() == sch.trace


def test_values_that_cannot_be_written_are_refused():
    """What TVM's FFI would refuse is a TraceError naming the instruction."""
    from engine.script import tir as T
    b0 = BlockRV()
    trace = TVMTrace([get_block("scale", b0),
                      TVMInstruction(kind("Unroll"), [T.grid(4)], [], [])], {})
    with pytest.raises(TraceError, match=r"instruction 2 \(Unroll\).*no value"):
        trace.as_python()
    twice = TVMTrace([get_block("scale", b0), get_block("shift", b0)], {})
    with pytest.raises(TraceError, match="second time"):
        twice.as_json()
    with pytest.raises(TypeError):
        TVMTrace([["GetSBlock", [], ["scale", "main"], ["b0"]]], {})


def test_tvm_namespace_exports():
    """``tvm.s_tir.schedule`` and the course's ``tvm.tir`` name TVM's classes."""
    from engine.tvm import s_tir, tir
    from engine.tvm.s_tir import schedule
    assert schedule.Trace is TVMTrace and schedule.Instruction is TVMInstruction
    assert schedule.InstructionKind is InstructionKind is s_tir.InstructionKind
    assert tir.Trace is TVMTrace and tir.InstructionKind is InstructionKind
    assert schedule.instruction.Instruction is TVMInstruction


def test_engine_trace_simplified_moves_decisions_with_their_instructions():
    """TVM's Simplified on the engine's recorded trace: an unused sample goes with its
    decision, the decisions of the kept ones follow them to their new positions."""
    sch = Schedule(stages(), seed=3)
    sch.sample_categorical([1, 2, 3], [0.2, 0.3, 0.5])           # unused: dropped
    blk = sch.get_block("scale")
    unused_loops = sch.get_loops(sch.get_block("shift"))          # unused: dropped
    del unused_loops
    p, q = sch.get_loops(blk)
    factors = sch.sample_perfect_tile(q, n=2)
    sch.split(q, factors=factors)
    sch.enter_postproc()
    sch.parallel(p)
    full = sch.trace
    small = full.simplified(remove_postproc=False)
    assert [i.kind for i in small.insts] == ["GetBlock", "GetLoops", "SamplePerfectTile",
                                             "Split", "EnterPostproc", "Parallel"]
    assert small.decisions == {small.insts[2]: full.get_decision(5)}
    assert [i.kind for i in full.simplified(remove_postproc=True).insts] == [
        "GetBlock", "GetLoops", "SamplePerfectTile", "Split"]
    again = Schedule(stages())
    small.apply_to_schedule(again)
    assert structural_equal(again.mod, sch.mod)
    assert full.as_tvm_python(remove_postproc=True)[-1].startswith("l") and \
        len(full.as_tvm_python(remove_postproc=True)) == 7


def test_engine_trace_apply_with_provider_and_remove_postproc():
    """TVM's ApplyToSchedule on the engine's own Trace: the provider is given the engine's
    Instruction, the schedule's handles and the recorded decision; remove_postproc stops
    before EnterPostproc (the default replays everything, as before)."""
    sch = Schedule(stages(), seed=5)
    p, q = sch.get_loops(sch.get_block("shift"))
    sch.split(q, factors=sch.sample_perfect_tile(q, n=2))
    sch.enter_postproc()
    sch.vectorize(sch.get_loops(sch.get_block("shift"))[-1])
    seen = []

    def provider(inst, inputs, attrs, decision):
        seen.append((inst, inputs, decision))
        return [1, 6] if inst.kind == "SamplePerfectTile" else decision

    target = Schedule(stages())
    sch.trace.apply_to_schedule(target, True, provider)
    assert [i for i, _, _ in seen] == list(sch.trace.insts[:4])
    assert isinstance(seen[2][1][0], LoopRV) and seen[2][2] == sch.trace.get_decision(2)
    assert len(target.trace) == 4 and target.trace.get_decision(2) == [1, 6]
    everything = Schedule(stages())
    sch.trace.apply_to_schedule(everything)
    assert everything.trace == sch.trace

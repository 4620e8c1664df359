"""Relax in TVMScript: the course's five listings parse verbatim, print back in the course's
style and round-trip; TVM 0.27's spellings parse to the same IR; bad text gets a ScriptError
with line and column."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
from engine import relax
from engine.relax import expr as X
from engine.relax.struct_info import TensorStructInfo
from relax_listings import (ALL, MY_MODULE, MY_MODULE_MIXTURE, MY_MODULE_WITH_EXTERN_CALL,
                            MY_MODULE_WITH_PARAMS_PRINTED, TWO_DATAFLOW_BLOCKS)

WEIGHT_SHAPES = [(128, 784), (128,), (10, 128), (10,)]


def _weights(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype("float32") for s in WEIGHT_SHAPES]


def _parse(name: str):
    text = ALL[name]
    return engine.parse(text, constants=_weights() if "meta[" in text else None)


@pytest.mark.parametrize("name", sorted(ALL))
def test_every_course_listing_parses_prints_and_round_trips(name):
    mod = _parse(name)
    assert any(isinstance(f, X.Function) for _, f in mod.functions)
    if name == "two_dataflow_blocks":  # a lone function: the module it joins has linear0...
        text = mod["main"].script()
        again = engine.parse(text)
    else:
        text = mod.script()
        again = engine.parse(text, constants=relax.constants_of(mod))
        assert again.script() == text
    assert engine.structural_equal(mod, again)
    assert "R.call_tir(" in text and "with R.dataflow():" in text


def test_the_printed_module_reads_like_the_course():
    text = engine.parse(MY_MODULE).script()
    assert '    @R.function\n    def main(x: Tensor((1, 784), "float32"), w0: Tensor((128, ' \
           '784), "float32")' in text
    assert '            lv0 = R.call_tir(linear0, (x, w0, b0), (1, 128), dtype="float32")\n' \
           '            lv1 = R.call_tir(relu0, (lv0,), (1, 128), dtype="float32")\n' in text
    assert "            R.output(out)\n        return out\n" in text
    ext = engine.parse(MY_MODULE_WITH_EXTERN_CALL).script()
    assert 'R.call_tir("env.linear", (x, w0, b0), (1, 128), dtype="float32")' in ext


def test_the_ir_of_a_listing():
    mod = engine.parse(MY_MODULE)
    assert mod.names() == ["relu0", "linear0", "linear1", "main"]
    assert [n for n, _ in mod.prim_funcs()] == ["relu0", "linear0", "linear1"]
    main = mod["main"]
    assert [p.name_hint for p in main.params] == ["x", "w0", "b0", "w1", "b1"]
    (block,) = main.body.blocks
    assert isinstance(block, X.DataflowBlock)
    kinds = [type(b.var) for b in block.bindings]
    assert kinds == [X.DataflowVar, X.DataflowVar, X.Var]
    call = block.bindings[0].value
    assert call.op.name == "relax.call_tir" and call.args[0].name_hint == "linear0"
    assert call.struct_info.shape == (1, 128)
    assert main.ret_struct_info.shape == (1, 10)


def test_two_dataflow_blocks_and_an_allocation_between_them():
    mod = engine.parse(TWO_DATAFLOW_BLOCKS)
    blocks = mod["main"].body.blocks
    assert [type(b).__name__ for b in blocks] == ["DataflowBlock", "BindingBlock",
                                                  "DataflowBlock"]
    assert blocks[1].bindings[0].value.op.name == "relax.builtin.alloc_tensor"


def test_bound_constants_print_as_meta_and_need_the_constants():
    ws = _weights()
    mod = engine.parse(MY_MODULE_WITH_PARAMS_PRINTED, constants=ws)
    text = mod.script()
    assert "meta[relay.Constant][0]" in text and "meta[relay.Constant][3]" in text
    assert 'def main(x: Tensor((1, 784), "float32")) -> Tensor(None, "float32", ndim=2)' in text
    got = relax.constants_of(mod)
    assert all(np.array_equal(a, b) for a, b in zip(got, ws))
    with pytest.raises(engine.ScriptError, match=r"constants=") as e:
        engine.parse(MY_MODULE_WITH_PARAMS_PRINTED)
    assert e.value.line is not None and e.value.col is not None
    with pytest.raises(engine.ScriptError, match="2 constants were given"):
        engine.parse(MY_MODULE_WITH_PARAMS_PRINTED, constants=ws[:2])


TVM_027 = '''
from tvm.script import ir as I
from tvm.script import tir as T
from tvm.script import relax as R

@I.ir_module
class Module:
    @T.prim_func(private=True)
    def relu0(X: T.Buffer((1, 128), "float32"), Y: T.Buffer((1, 128), "float32")):
        for i, j in T.grid(1, 128):
            with T.sblock("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0.0))

    @R.function
    def main(x: R.Tensor((1, 128), dtype="float32")) -> R.Tensor((1, 128), dtype="float32"):
        cls = Module
        with R.dataflow():
            lv0 = R.call_tir(cls.relu0, (x,), out_sinfo=R.Tensor((1, 128), dtype="float32"))
            lv1: R.Tensor((1, 128), dtype="float32") = R.call_dps_packed("env.relu", (lv0,), out_sinfo=R.Tensor((1, 128), dtype="float32"))
            gv = R.add(lv1, R.const(1.0, "float32"))
            R.output(gv)
        return gv
'''


def test_function_attributes_round_trip():
    text = OPS.replace("    with R.dataflow():\n", "    R.func_attr({\"Primitive\": 1, "
                                                      "\"note\": \"fused\"})\n"
                                                      "    with R.dataflow():\n", 1)
    mod = engine.parse(text)
    assert mod["main"].attrs == (("Primitive", 1), ("note", "fused"))
    printed = mod.script()
    assert 'R.func_attr({"Primitive": 1, "note": "fused"})' in printed
    assert engine.structural_equal(engine.parse(printed), mod)


def test_tvm_027_spellings():
    mod = engine.parse(TVM_027)
    main = mod["main"]
    ops = [b.value.op.name for b in main.bindings()]
    assert ops == ["relax.call_tir", "relax.call_dps_packed", "relax.add"]
    text = mod.script()
    assert 'R.call_tir(relu0, (x,), (1, 128), dtype="float32")' in text
    assert 'R.call_dps_packed("env.relu", (lv0,), out_sinfo=R.Tensor((1, 128), ' \
           '"float32"))' in text
    assert 'R.add(lv1, R.const(1.0, "float32"))' in text
    again = engine.parse(text)
    assert engine.structural_equal(mod, again) and again.script() == text


OPS = '''
@R.function
def main(x: R.Tensor((1, 3, 8, 8), "float32"), w: R.Tensor((4, 3, 3, 3), "float32"),
         m: R.Tensor((16, 10), "float32")):
    with R.dataflow():
        c = R.nn.conv2d(x, w, strides=(1, 1), padding=(1, 1))
        r = R.nn.relu(c)
        t = R.permute_dims(r, axes=[0, 2, 3, 1])
        f = R.reshape(t, (1, -1))
        s = R.reshape(f, R.shape([16, 16]))
        y = R.matmul(s, m)
        z = R.nn.softmax(y, axis=-1)
        pair = (y, z)
        gv = pair[1]
        R.output(gv)
    return gv
'''


def test_high_level_operators_infer_their_shapes_and_round_trip():
    mod = engine.parse(OPS)
    sis = {b.var.name_hint: b.var.struct_info for b in mod["main"].bindings()}
    assert sis["c"].shape == (1, 4, 8, 8)
    assert sis["t"].shape == (1, 8, 8, 4)
    assert sis["f"].shape == (1, 256)
    assert sis["y"].shape == (16, 10)
    assert isinstance(sis["gv"], TensorStructInfo) and sis["gv"].shape == (16, 10)
    text = mod.script()
    assert "R.nn.conv2d(x, w, padding=(1, 1))" in text
    assert "R.permute_dims(r, axes=(0, 2, 3, 1))" in text and "R.reshape(t, (1, -1))" in text
    again = engine.parse(text)
    assert engine.structural_equal(mod, again) and again.script() == text


BAD = [
    (MY_MODULE.replace("R.call_tir(linear1,", "R.call_tir(linear9,"),
     "R.call_tir calls 'linear9', which this module does not define; did you mean 'linear1'"),
    (MY_MODULE.replace("            R.output(out)\n", ""), "ends with R.output"),
    (MY_MODULE.replace("R.output(out)", "R.output(lv1)").replace("return out", "return lv1")
     .replace("lv1, w1, b1", "lv0, w1, b1"), None),
    (MY_MODULE.replace("R.output(out)", "R.output(lv1)"), "local to its dataflow block"),
    (MY_MODULE.replace('(1, 128), dtype="float32")', '(1, 128), dtype="flaot32")', 1),
     "did you mean 'float32'"),
    (MY_MODULE.replace("R.call_tir(relu0", "R.cal_tir(relu0"), "did you mean R.call_tir"),
    (MY_MODULE.replace('x: Tensor((1, 784), "float32")', 'x: Tensor((n, 784), "float32")'),
     "'n' is not a symbolic size of this function"),
    (MY_MODULE.replace("        return out\n", ""), "must end with `return"),
    (MY_MODULE.replace("R.output(out)", "R.output(out, out)"), "listed twice"),
]


@pytest.mark.parametrize("text,message", BAD)
def test_bad_text_says_what_and_where(text, message):
    if message is None:  # a well-formed variation (returning another output)
        engine.parse(text)
        return
    with pytest.raises(engine.ScriptError, match=message.replace("(", r"\(")) as e:
        engine.parse(text)
    assert e.value.line is not None


def test_operator_errors_are_script_errors():
    bad = OPS.replace("R.matmul(s, m)", "R.matmul(m, s)")
    with pytest.raises(engine.ScriptError, match="reduction dimensions differ"):
        engine.parse(bad)
    with pytest.raises(engine.ScriptError, match="no attribute 'axis'"):
        engine.parse(OPS.replace("R.nn.relu(c)", "R.nn.relu(c, axis=1)"))


def test_engine_script_parse_still_reads_tensorir_only():
    with pytest.raises(engine.ScriptError, match="engine.parse reads both"):
        engine.script.parse(MY_MODULE)
    tir_only = MY_MODULE[:MY_MODULE.index("    @R.function")]
    mod = engine.script.parse(tir_only)
    assert engine.structural_equal(mod, engine.parse(tir_only))


def test_tensorir_tools_work_on_the_prim_funcs_of_a_model():
    mod = engine.parse(MY_MODULE_MIXTURE)
    sch = engine.Schedule(mod)  # one TensorIR function: it is the default
    assert sch.func_name == "linear0"
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.split(j, factors=[None, 4])
    assert isinstance(sch.mod["main"], X.Function)
    with pytest.raises(engine.ScheduleError, match="Relax function"):
        engine.Schedule(mod, func_name="main")
    rt = engine.build(mod, target="llvm")  # the TensorIR functions only
    assert rt.names() == ["linear0"]


_SOURCES = [MY_MODULE_MIXTURE, TVM_027, OPS, TWO_DATAFLOW_BLOCKS]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_SOURCES), st.lists(st.tuples(st.floats(0, 1), st.integers(0, 2),
                                                      st.sampled_from(list("()[],.:=R\"'0-9 x\n"
                                                                           "AT_"))),
                                           min_size=1, max_size=4))
def test_mangled_text_is_a_module_or_a_script_error(source, edits):
    """Pasted text is hostile: any edit of a listing parses or says where it is wrong."""
    text = source
    for where, kind, ch in edits:
        i = int(where * len(text))
        text = text[:i] + (ch if kind else "") + text[i + (kind != 1):]
    try:
        mod = engine.parse(text)
    except engine.ScriptError as e:
        assert str(e)
        return
    assert isinstance(mod, engine.IRModule)
    engine.parse(mod.script(), constants=relax.constants_of(mod)) if not \
        _dangling(mod) else None


def _dangling(mod) -> bool:
    names = set(mod.names())
    return any(isinstance(b.value, X.Call) and isinstance(b.value.op, X.Op) and
               b.value.op.name == "relax.call_tir" and
               isinstance(b.value.args[0], X.GlobalVar) and
               b.value.args[0].name_hint not in names
               for _, f in mod.functions if isinstance(f, X.Function) for b in f.bindings())

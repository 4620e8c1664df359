"""The course's graph-optimisation rewrites as engine passes (FuseDenseAddPass, EwiseFMA,
LowerToTensorIRPass) and the pass steps the model page offers by name
(engine.models.passes): each step gives the chapter's graph, the sequence is read as
hostile input, and a step's module runs and is timed operator by operator."""
from __future__ import annotations

import numpy as np
import pytest

from engine.ir.function import PrimFunc
from engine.models.course import mlp_graph
from engine.models.measure import measure_stages
from engine.models.mlp import SHAPES, forward
from engine.models.passes import (GRAPHS, MAX_PASSES, PASS_STEPS, PassStepError, main_calls,
                                  parse_passes, run_passes, runnable)
from engine.relax import VirtualMachine, build
from engine.relax.transform import (EwiseFMA, FuseDenseAddPass, FuseTIR, LowerToTensorIRPass,
                                    PassContext, Sequential)

_rng = np.random.default_rng(0)
W = {n: (_rng.standard_normal(s) * 0.1).astype("float32") for n, s in SHAPES.items()}
X = _rng.random((1, 784)).astype("float32")


def _run(mod, *args):
    return np.asarray(VirtualMachine(build(mod, target="llvm"))["main"](*args))


def _ref(x=X):
    return np.asarray(forward(W, x.astype("float64")))


def _calls(mod, kinds=("tir", "relax", "op")):
    return [f"{k}:{c}" for _, k, c in main_calls(mod) if k in kinds]


def test_fuse_dense_add_makes_the_chapters_fused_functions():
    fused = FuseDenseAddPass()(mlp_graph(1, W))
    assert FuseDenseAddPass().info.name == "MatmulAddFuse"
    assert FuseDenseAddPass().info.opt_level == 2
    assert sorted(fused.names()) == ["fused_matmul_add0", "fused_matmul_add1", "main"]
    assert _calls(fused) == ["op:permute_dims", "relax:fused_matmul_add0", "op:nn.relu",
                             "op:permute_dims", "relax:fused_matmul_add1"]
    for name, (k, n) in (("fused_matmul_add0", (784, 128)), ("fused_matmul_add1", (128, 10))):
        f = fused[name]
        assert f.attr("Primitive") == 1
        assert [p.name_hint for p in f.params] == ["x", "w", "b"]
        assert [p.struct_info.shape for p in f.params] == [(1, k), (k, n), (n,)]
        assert [b.value.op.name for b in f.bindings()] == ["relax.matmul", "relax.add"]
    np.testing.assert_allclose(_run(fused, X), _ref(), rtol=1e-4, atol=1e-5)
    # below its opt_level a Sequential skips it, as the chapter says
    with PassContext(opt_level=1):
        assert Sequential([FuseDenseAddPass()])(mlp_graph(1, W)).names() == ["main"]


def test_fuse_dense_add_keeps_the_modules_other_functions():
    from engine.relax.transform import LegalizeOps
    legal = LegalizeOps()(mlp_graph(1, W))
    assert sorted(FuseDenseAddPass()(legal).names()) == sorted(legal.names())


def test_lower_to_tensor_ir_then_fuse_tir_is_the_chapters_final_module():
    fused = FuseDenseAddPass()(mlp_graph(1, W))
    tir = LowerToTensorIRPass()(fused)
    prims = sorted(n for n, f in tir.functions if isinstance(f, PrimFunc))
    assert prims == ["add", "add1", "matmul", "matmul1", "relu", "transpose", "transpose1"]
    assert _calls(tir) == ["tir:transpose", "relax:fused_matmul_add0", "tir:relu",
                           "tir:transpose1", "relax:fused_matmul_add1"]
    final = FuseTIR()(tir)
    assert sorted(final.names()) == ["fused_matmul_add0", "fused_matmul_add1", "main", "relu",
                                     "transpose", "transpose1"]
    assert isinstance(final["fused_matmul_add0"], PrimFunc)
    assert [b.shape for b in final["fused_matmul_add0"].params] == [
        (1, 784), (784, 128), (128,), (1, 128)]
    for mod in (tir, final):
        np.testing.assert_allclose(_run(mod, X), _ref(), rtol=1e-4, atol=1e-5)


def test_ewise_fma_rewrites_multiply_add_and_removes_the_multiply():
    mod, weights = GRAPHS["ewise"](1)
    out = EwiseFMA()(mod)
    assert _calls(out) == ["op:ewise_fma"]
    assert "R.ewise_fma(x, y, y)" in out.script()
    a = _rng.random((3, 4)).astype("float32")
    b = _rng.random((3, 4)).astype("float32")
    np.testing.assert_allclose(_run(out, a, b), a * b + b, rtol=1e-6)
    # then lowered by the chapter's lowering: one TensorIR function computing it
    low = LowerToTensorIRPass()(out)
    assert _calls(low) == ["tir:ewise_fma"]
    np.testing.assert_allclose(_run(low, a, b), a * b + b, rtol=1e-6)
    # nothing to rewrite: the same module's functions
    assert EwiseFMA()(mlp_graph(1, W))["main"] is mlp_graph(1, W)["main"] or \
        _calls(EwiseFMA()(mlp_graph(1, W))) == _calls(mlp_graph(1, W))


# ---------------------------------------------------------------- the page's pass steps
def test_the_chapters_sequence_step_by_step():
    keys = ["BindParams", "FuseDenseAdd", "LowerToTensorIR", "FuseTIR"]
    mods = run_passes(mlp_graph(1), keys, W)
    assert len(mods) == 5
    assert [p.name_hint for p in mods[0]["main"].params] == ["x", "w0", "b0", "w1", "b1"]
    assert [p.name_hint for p in mods[1]["main"].params] == ["x"]
    assert "relax:fused_matmul_add0" in _calls(mods[2])
    assert _calls(mods[4], ("relax", "op")) == []
    for m in mods:
        np.testing.assert_allclose(_run(runnable(m, W), X), _ref(), rtol=1e-4, atol=1e-5)


def test_tvms_pipeline_step_by_step():
    keys = ["BindParams", "LegalizeOps", "AnnotateTIROpPattern", "FuseOps", "FuseTIR",
            "DeadCodeElimination"]
    mods = run_passes(mlp_graph(1), keys, W)
    assert _calls(mods[2], ("op",)) == []
    assert all("op_pattern" in dict(f.attrs) for _, f in mods[3].items()
               if isinstance(f, PrimFunc))
    assert any(c.startswith("relax:fused_") for c in _calls(mods[4]))
    assert any(c.startswith("tir:fused_matmul") for c in _calls(mods[6]))
    np.testing.assert_allclose(_run(mods[-1], X), _ref(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("raw,match", [
    ("Nope", "no pass named 'Nope'"),
    ("FuseTIR,os.system", "no pass named 'os.system'"),
    ("FuseTIR,,FuseOps", "no pass named ''"),
    ("fusetir", "no pass named 'fusetir'"),
    (",".join(["FuseTIR"] * (MAX_PASSES + 1)), f"at most {MAX_PASSES}"),
    ("é", "comma-separated"),
    ("x" * 2000, "comma-separated"),
])
def test_hostile_pass_lists_are_refused_with_a_sentence(raw, match):
    with pytest.raises(PassStepError, match=match):
        parse_passes(raw)


def test_pass_lists_round_trip():
    keys = list(PASS_STEPS)
    assert parse_passes(",".join(keys)) == keys
    assert parse_passes("") == [] and parse_passes(None) == []


def test_a_pass_that_cannot_apply_is_named():
    with pytest.raises(PassStepError, match=r"step 3, FuseTIR, cannot apply") as e:
        run_passes(mlp_graph(1), ["FuseDenseAdd", "FuseOps", "FuseTIR"], W)
    assert e.value.index == 2


def test_each_step_is_measured_operator_by_operator():
    """What the workers run for the page: every step's module compiled, checked against
    numpy and timed per call — high-level operators, Relax functions and TensorIR."""
    keys = ["BindParams", "FuseDenseAdd", "LowerToTensorIR", "FuseTIR"]
    mods = run_passes(mlp_graph(1), keys, W)
    res = measure_stages([(k, runnable(m, W)) for k, m in zip(["as written"] + keys, mods)],
                         X, _ref(), number=1, repeat=1)
    assert [s["ok"] for s in res["stages"]] == [True] * 5
    names = [[o["name"] for o in s["ops"]] for s in res["stages"]]
    assert names[0] == ["lv = R.permute_dims", "lv1 = R.matmul", "lv2 = R.add",
                        "lv3 = R.nn.relu", "lv4 = R.permute_dims", "lv5 = R.matmul",
                        "lv6 = R.add"]
    assert names[2] == ["lv = R.permute_dims", "fused_matmul_add0", "lv3 = R.nn.relu",
                        "lv4 = R.permute_dims", "fused_matmul_add1"]
    assert names[4] == ["transpose", "fused_matmul_add0", "relu", "transpose1",
                        "fused_matmul_add1"]
    assert all(o["s"] > 0 for s in res["stages"] for o in s["ops"])

"""engine.workloads: the registry contract the app, lessons and schedule rely on."""
import dataclasses

import numpy as np
import pytest

import engine
from engine import workloads as W
from engine.ir import Block, IRModule, PrimFunc, post_order_visit, structural_equal

EXPECTED = ["mm_relu", "matmul", "batch_matmul", "conv2d", "conv2d_relu", "depthwise_conv2d",
            "vector_add", "window_sum", "softmax", "layernorm", "transpose", "add", "relu", "mlp", "sum"]


def block_names(func):
    out = []

    def fn(n):
        if isinstance(n, Block) and n.name_hint != "root":
            out.append(n.name_hint)
    post_order_visit(func.body, fn)
    return out


def test_names_are_exactly_the_presets():
    assert W.names() == EXPECTED
    assert engine.workloads.names() == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_info_contract(name):
    inf = W.info(name)
    assert dataclasses.is_dataclass(inf)
    with pytest.raises(dataclasses.FrozenInstanceError):
        inf.name = "x"
    assert inf.name == name and inf.func_name == name
    assert inf.title and inf.description.endswith(".")
    assert set(inf.defaults) == set(inf.limits)
    for key, value in inf.defaults.items():
        lo, hi = inf.limits[key]
        assert isinstance(value, int) and lo <= value <= hi
    assert isinstance(inf.flops(), int) and inf.flops() >= 0
    assert isinstance(inf.bytes(), int) and inf.bytes() > 0
    func = W.get(name)[inf.func_name]
    assert isinstance(func, PrimFunc)
    assert len(func.params) == inf.num_inputs + inf.num_outputs
    # minimum bytes = every parameter moved once
    assert inf.bytes() == sum(b.nbytes() for b in func.params)


@pytest.mark.parametrize("name", EXPECTED)
def test_get_and_random_args(name):
    inf = W.info(name)
    mod = W.get(name)
    assert isinstance(mod, IRModule) and mod.names() == [inf.func_name]
    func = mod[inf.func_name]
    assert func.attr("global_symbol") == inf.func_name and func.attr("tir.noalias") is True
    args = W.random_args(name)
    assert len(args) == len(func.params)
    for arr, buf in zip(args, func.params):
        assert arr.shape == buf.const_shape() and arr.dtype == np.dtype(buf.dtype)
    for arr in args[inf.num_inputs:]:
        assert not arr.any()
    for arr in args[:inf.num_inputs]:
        assert np.isfinite(arr).all() and np.abs(arr).max() <= 4.0
    again = W.random_args(name, seed=0)
    other = W.random_args(name, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(args, again))
    assert any(not np.array_equal(a, b) for a, b in zip(args[:inf.num_inputs],
                                                        other[:inf.num_inputs]))
    # a fresh module every call, structurally the same
    assert structural_equal(W.get(name)[inf.func_name], func)


def test_reference_shapes_and_values():
    a, b, c = W.random_args("matmul", m=3, n=5, k=4)
    out = W.reference("matmul", m=3, n=5, k=4)(a, b)
    assert out.shape == c.shape and out.dtype == np.float32
    np.testing.assert_allclose(out, a @ b, rtol=1e-5)
    (x, y) = W.random_args("transpose", m=2, n=3)
    np.testing.assert_array_equal(W.reference("transpose", m=2, n=3)(x), x.T)
    s = W.reference("softmax", n=6)(*W.random_args("softmax", n=6)[:1])
    np.testing.assert_allclose(s.sum(axis=1), 1.0, rtol=1e-6)


def test_mm_relu_is_the_course_program():
    func = W.get("mm_relu")["mm_relu"]
    assert [b.name for b in func.params] == ["A", "B", "C"]
    assert [b.const_shape() for b in func.params] == [(128, 128)] * 3
    assert [b.name for b in func.body.block.alloc_buffers] == ["Y"]
    assert block_names(func) == ["Y", "C"]
    from test_te import course_mm_relu  # tests/ is on sys.path (rootdir-less test modules)
    assert structural_equal(func, course_mm_relu(128))
    assert structural_equal(W.get("mm_relu", n=16)["mm_relu"], course_mm_relu(16))


def test_stage_names_for_lessons():
    assert block_names(W.get("conv2d")["conv2d"]) == ["pad", "conv"]
    assert block_names(W.get("conv2d_relu")["conv2d_relu"]) == ["pad", "conv", "relu"]
    assert block_names(W.get("depthwise_conv2d")["depthwise_conv2d"]) == ["pad", "depthwise"]
    assert block_names(W.get("softmax")["softmax"]) == [
        "T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"]
    assert block_names(W.get("mlp")["mlp"]) == ["linear0", "relu0", "linear1"]
    assert block_names(W.get("window_sum")["window_sum"]) == ["C"]
    assert block_names(W.get("sum")["sum"]) == ["B"]
    ws = W.get("window_sum", n=1024)["window_sum"]
    assert [b.const_shape() for b in ws.params] == [(1026,), (1024,)]


def test_follows_makes_square_shapes():
    func = W.get("matmul", n=16)["matmul"]
    assert [b.const_shape() for b in func.params] == [(16, 16)] * 3
    func = W.get("matmul", n=16, k=4)["matmul"]
    assert [b.const_shape() for b in func.params] == [(16, 4), (4, 16), (16, 16)]
    assert W.resolve_params("matmul", n=8) == {"m": 8, "n": 8, "k": 8}
    assert W.resolve_params("add", n="12") == {"m": 12, "n": 12}
    assert W.info("matmul").follows == {"m": "n", "k": "n"}


def test_flop_counts():
    assert W.info("matmul").flops(n=64) == 2 * 64 ** 3
    assert W.info("matmul").flops(m=2, n=3, k=5) == 2 * 2 * 3 * 5
    assert W.info("mm_relu").flops(n=4) == 2 * 64 + 16
    assert W.info("conv2d").flops(batch=1, in_channels=2, out_channels=3, size=5, kernel=3,
                                  pad=1, stride=1) == 2 * 3 * 25 * 2 * 9
    assert W.info("conv2d").flops(size=8, pad=0, kernel=3, stride=2) == \
        2 * 16 * 3 * 3 * 16 * 9
    assert W.info("transpose").flops() == 0
    assert W.info("window_sum").flops(n=10) == 20


def test_unknown_workload_message():
    with pytest.raises(W.WorkloadError, match=r"unknown workload 'x'; available: mm_relu, "
                                              r"matmul, .*, sum$"):
        W.get("x")
    for fn in (W.info, W.reference, W.random_args):
        with pytest.raises(W.WorkloadError, match="unknown workload"):
            fn("nope")
    assert issubclass(W.WorkloadError, ValueError)


def test_bad_parameters_say_the_allowed_range():
    with pytest.raises(W.WorkloadError, match=r"has no parameter 'q'; its parameters are: "
                                              r"n \(1\.\.2048\)"):
        W.get("mm_relu", q=3)
    for bad in ("abc", 1.5, True, None, [4]):
        with pytest.raises(W.WorkloadError, match=r"'n' of workload 'mm_relu' must be an "
                                                  r"integer from 1 to 2048"):
            W.get("mm_relu", n=bad)
    with pytest.raises(W.WorkloadError, match=r"must be from 1 to 2048, got 4096"):
        W.get("matmul", n=4096)
    with pytest.raises(W.WorkloadError, match=r"must be from 1 to 2048, got 0"):
        W.get("mm_relu", n=0)
    with pytest.raises(W.WorkloadError, match="following 'n'"):
        W.get("batch_matmul", n=2000)
    with pytest.raises(W.WorkloadError, match="kernel 7 is larger than the padded input"):
        W.get("conv2d", size=3, pad=1, kernel=7)
    assert W.get("mm_relu", n=np.int64(8))["mm_relu"].params[0].const_shape() == (8, 8)


def test_large_limits_build():
    func = W.get("matmul", n=2048)["matmul"]
    assert func.params[0].const_shape() == (2048, 2048)
    assert W.info("matmul").flops(n=2048) == 2 * 2048 ** 3


def test_cost_model_validates_parameters_too():
    with pytest.raises(W.WorkloadError, match="must be from 1 to 2048"):
        W.info("matmul").flops(n=0)
    with pytest.raises(W.WorkloadError, match="no parameter 'x'"):
        W.info("add").bytes(x=1)
    assert W.info("add").bytes(m=2, n=3) == 4 * 3 * 6


@pytest.mark.parametrize("name", EXPECTED)
def test_every_workload_prints_and_parses_back(name):
    from engine import script
    mod = W.get(name, **({"n": 8} if "n" in W.info(name).defaults else {}))
    fname = W.info(name).func_name
    back = script.parse(mod.script())
    assert structural_equal(back[fname], mod[fname])

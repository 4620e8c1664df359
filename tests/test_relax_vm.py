"""The course's models built and run: ``relax.vm.build`` + ``relax.VirtualMachine`` equal
numpy; ``env.*`` functions registered as in the course; BindParams keeps the results;
intermediate tensors share planned storage; plain errors for unregistered functions and
shape mismatches."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
from engine import relax
from engine.relax.vm import VMError
from relax_listings import (ALL, MY_MODULE, MY_MODULE_MIXTURE, MY_MODULE_WITH_EXTERN_CALL,
                            MY_MODULE_WITH_PARAMS_PRINTED, TWO_DATAFLOW_BLOCKS)

RUNNABLE = {"my_module": MY_MODULE, "my_module_with_extern_call": MY_MODULE_WITH_EXTERN_CALL,
            "my_module_mixture": MY_MODULE_MIXTURE}


@pytest.fixture(autouse=True)
def course_functions():
    """env.linear and env.relu as the course registers them (numpy instead of torch)."""
    @engine.register_func("env.linear", override=True)
    def numpy_linear(x, w, b, out):
        np.matmul(x, w.T, out=out)
        np.add(out, b, out=out)

    @engine.register_func("env.relu", override=True)
    def numpy_relu(x, out):
        np.maximum(x, 0, out=out)

    yield
    for name in ("env.linear", "env.relu"):
        engine.runtime.remove_global_func(name)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 784)).astype("float32")
    params = {"w0": rng.standard_normal((128, 784)).astype("float32") / 28,
              "b0": rng.standard_normal((128,)).astype("float32"),
              "w1": rng.standard_normal((10, 128)).astype("float32") / 11,
              "b1": rng.standard_normal((10,)).astype("float32")}
    p = {k: v.astype("float64") for k, v in params.items()}
    ref = np.maximum(x.astype("float64") @ p["w0"].T + p["b0"], 0) @ p["w1"].T + p["b1"]
    return x, params, ref


def _close(got, ref):
    np.testing.assert_allclose(np.asarray(got, dtype="float64"), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(RUNNABLE))
def test_the_course_listings_run_equal_to_numpy(name, data):
    x, params, ref = data
    ex = relax.vm.build(engine.parse(RUNNABLE[name]), target="llvm")
    vm = relax.VirtualMachine(ex, engine.cpu())
    data_nd = engine.nd.array(x)
    nd_params = {k: engine.nd.array(v) for k, v in params.items()}
    nd_res = vm["main"](data_nd, nd_params["w0"], nd_params["b0"], nd_params["w1"],
                        nd_params["b1"])
    assert isinstance(nd_res, np.ndarray) and nd_res.shape == (1, 10)
    _close(nd_res.numpy(), ref)
    assert type(nd_res.numpy()) is np.ndarray
    # plain numpy arrays in, a second call (the arena is reused) gives the same
    again = vm["main"](x, *params.values())
    np.testing.assert_array_equal(again, nd_res)
    timing = vm.time_evaluator("main", engine.cpu(), number=2, repeat=2)(x, *params.values())
    assert len(timing.results) == 2 and timing.mean > 0


def test_bind_params_keeps_the_results(data):
    x, params, ref = data
    mixture = engine.parse(MY_MODULE_MIXTURE)
    nd_params = {k: engine.nd.array(v) for k, v in params.items()}
    bound = relax.transform.BindParams("main", nd_params)(mixture)
    assert [p.name_hint for p in bound["main"].params] == ["x"]
    text = bound.script()
    assert "meta[relay.Constant][0], meta[relay.Constant][1]" in text
    vm = relax.VirtualMachine(relax.build(bound, target="llvm"), engine.cpu())
    _close(vm["main"](engine.nd.array(x)).numpy(), ref)
    # the printed text, parsed with its constants, is the same module and runs the same
    again = engine.parse(text, constants=relax.constants_of(bound))
    assert engine.structural_equal(again, bound)
    vm2 = relax.VirtualMachine(relax.build(again, target="llvm"))
    np.testing.assert_array_equal(vm2["main"](x), vm["main"](x))


def test_the_course_printed_module_runs_with_its_constants(data):
    x, params, ref = data
    mod = engine.parse(MY_MODULE_WITH_PARAMS_PRINTED,
                       constants=[params[k] for k in ("w0", "b0", "w1", "b1")])
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), engine.cpu())
    _close(vm["main"](x), ref)


def test_bind_params_refuses_wrong_names_and_shapes(data):
    _, params, _ = data
    mixture = engine.parse(MY_MODULE_MIXTURE)
    with pytest.raises(relax.transform.TransformError, match="no parameter 'w9'"):
        relax.transform.BindParams("main", {"w9": params["w0"]})(mixture)
    with pytest.raises(relax.transform.TransformError, match=r"shape \(128, 784\)"):
        relax.transform.BindParams("main", {"w0": params["w0"].T})(mixture)
    with pytest.raises(relax.transform.TransformError, match="no function 'mian'"):
        relax.transform.BindParams("mian", {})(mixture)


def test_an_unregistered_function_is_named(data):
    x, params, _ = data
    engine.runtime.remove_global_func("env.relu")
    vm = relax.VirtualMachine(relax.build(engine.parse(MY_MODULE_WITH_EXTERN_CALL)))
    with pytest.raises(VMError, match=r"no function is registered as 'env.relu'.*"
                                      r"register_func\('env.relu'\)"):
        vm["main"](x, *params.values())
    engine.register_func("env.relu", lambda a, out: np.maximum(a, 0, out=out))
    vm["main"](x, *params.values())  # looked up at each call: registering later works


def test_a_failing_registered_function_is_named(data):
    x, params, _ = data

    @engine.register_func("env.linear", override=True)
    def broken(x, w, b, out):
        raise ValueError("boom")

    vm = relax.VirtualMachine(relax.build(engine.parse(MY_MODULE_WITH_EXTERN_CALL)))
    with pytest.raises(VMError, match="'env.linear' raised ValueError: boom"):
        vm["main"](x, *params.values())


def test_shape_mismatches_are_plain_errors(data):
    x, params, _ = data
    vm = relax.VirtualMachine(relax.build(engine.parse(MY_MODULE)), engine.cpu())
    with pytest.raises(engine.ArgumentError, match=r"shape mismatch: argument 0 \(x\) must be "
                                                   r"a float32 tensor of shape \(1, 784\), got "
                                                   r"shape \(784,\)"):
        vm["main"](x.reshape(784), *params.values())
    with pytest.raises(engine.ArgumentError, match=r"argument 1 \(w0\).*got float64"):
        vm["main"](x, params["w0"].astype("float64"), *list(params.values())[1:])
    with pytest.raises(engine.ArgumentError, match=r"takes 5 argument\(s\)"):
        vm["main"](x)
    # the course's two-block example calls linear1 with a (1, 128) weight
    two = engine.parse(TWO_DATAFLOW_BLOCKS)["main"]
    mod = engine.parse(MY_MODULE).with_function("main", two)
    with pytest.raises(engine.BuildError, match=r"R.call_tir\(linear1, ...\) in main: shape "
                                                r"mismatch: argument 1 \(gv1\) is a float32 "
                                                r"tensor of shape \(1, 128\), but linear1's "
                                                r"buffer W is float32 \(10, 128\)"):
        relax.build(mod)
    with pytest.raises(engine.BuildError, match="calls linear0, which the module does not "
                                                "define"):
        relax.build(engine.parse(TWO_DATAFLOW_BLOCKS))


def test_register_func_is_tvms():
    f = engine.register_func("test.twice", lambda a, out: np.multiply(a, 2, out=out))
    assert engine.get_global_func("test.twice") is f
    with pytest.raises(ValueError, match="override=True"):
        engine.register_func("test.twice", lambda a, out: None)
    engine.runtime.remove_global_func("test.twice")
    assert engine.get_global_func("test.twice", allow_missing=True) is None
    with pytest.raises(LookupError, match="test.twice"):
        engine.get_global_func("test.twice")


CHAIN = '''
@tvm.script.ir_module
class Chain:
    @T.prim_func
    def relu(X: T.Buffer((4, 64), "float32"), Y: T.Buffer((4, 64), "float32")):
        for i, j in T.grid(4, 64):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj] - T.float32(1), T.float32(0))

    @R.function
    def main(x: Tensor((4, 64), "float32")):
        with R.dataflow():
            a = R.call_tir(relu, (x,), (4, 64), dtype="float32")
            b = R.call_tir(relu, (a,), (4, 64), dtype="float32")
            c = R.call_tir(relu, (b,), (4, 64), dtype="float32")
            d = R.call_tir(relu, (c,), (4, 64), dtype="float32")
            e = R.call_tir(relu, (d,), (4, 64), dtype="float32")
            R.output(e)
        return e
'''


def test_intermediates_share_planned_storage():
    ex = relax.build(engine.parse(CHAIN), target="llvm")
    plan = ex.memory_plan("main")
    assert plan == {"tensors": 5, "planned": 4, "escaping": 1, "blocks": 2,
                    "arena_bytes": 2 * 4 * 64 * 4, "naive_bytes": 4 * 4 * 64 * 4}
    vm = relax.VirtualMachine(ex)
    rng = np.random.default_rng(0)
    x1, x2 = (rng.uniform(-2, 8, (4, 64)).astype("float32") for _ in range(2))
    out1 = vm["main"](x1)
    out2 = vm["main"](x2)
    np.testing.assert_array_equal(out1, np.maximum(x1 - 5, 0))  # not overwritten by call 2
    np.testing.assert_array_equal(out2, np.maximum(x2 - 5, 0))


def _dag_text(edges: list, outputs: list) -> str:
    lines = ["@R.function",
             "def main(p0: Tensor((3, 5), \"float32\"), p1: Tensor((3, 5), \"float32\")):",
             "    with R.dataflow():"]
    names = ["p0", "p1"]
    for k, (i, j) in enumerate(edges):
        lines.append(f"        v{k} = R.call_tir(\"test.mix\", ({names[i]}, {names[j]}), "
                     f"(3, 5), dtype=\"float32\")")
        names.append(f"v{k}")
    outs = [names[2 + o] for o in outputs]
    lines.append(f"        t = ({', '.join(outs)},)")
    lines.append("        R.output(t)")
    lines.append("    return t")
    return "\n".join(lines) + "\n"


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100)), min_size=1, max_size=9),
       st.data())
def test_planned_storage_never_clobbers_a_live_value(raw, draw):
    """Random dataflow graphs of a registered function: the planned machine equals a direct
    evaluation, and no two tensors live at once share bytes."""
    engine.register_func("test.mix", lambda a, b, out: np.add(a * 0.5, b - 1, out=out),
                         override=True)
    edges = [(i % (2 + k), j % (2 + k)) for k, (i, j) in enumerate(raw)]
    outputs = sorted(set(draw.draw(st.lists(st.integers(0, len(edges) - 1), min_size=1,
                                            max_size=3))))
    text = _dag_text(edges, outputs)
    ex = relax.build(engine.parse(text))
    rng = np.random.default_rng(len(edges))
    p = [rng.standard_normal((3, 5)).astype("float32") for _ in range(2)]
    vals = list(p)
    for i, j in edges:
        vals.append(np.add(vals[i] * 0.5, vals[j] - 1).astype("float32"))
    got = relax.VirtualMachine(ex)["main"](*p)
    for g, o in zip(got, outputs):
        np.testing.assert_array_equal(g, vals[2 + o])
    plan = ex.programs["main"].plan
    assert plan.arena_bytes <= plan.naive_bytes + 64 * len(edges)
    engine.runtime.remove_global_func("test.mix")


FUNCS_AND_TUPLES = '''
@tvm.script.ir_module
class M:
    @R.function
    def main(x: Tensor((2, 3), "float32"), w: Tensor((3, 3), "float32")):
        R.func_attr({"note": "main"})
        a = layer(x, w)
        b = layer(a, w)
        pair = R.call_tir("test.split", (b,), ((2, 3), (2, 3)), dtype=("float32", "float32"))
        return (pair[1], a)

    @R.function
    def layer(x: Tensor((2, 3), "float32"), w: Tensor((3, 3), "float32")):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.nn.relu(y)
            R.output(z)
        return z
'''


def test_relax_functions_tuples_and_operators_run():
    engine.register_func("test.split", lambda b, lo, hi: (np.minimum(b, 1, out=lo),
                                                          np.maximum(b, 1, out=hi)),
                         override=True)
    mod = engine.parse(FUNCS_AND_TUPLES)
    assert engine.structural_equal(engine.parse(mod.script()), mod)
    assert mod["main"].attrs == (("note", "main"),) and mod["layer"].attrs == ()
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 3)).astype("float32"), rng.standard_normal((3, 3)).astype(
        "float32")
    hi, a = relax.VirtualMachine(relax.build(mod))["main"](x, w)
    a_ref = np.maximum(x @ w, 0)
    np.testing.assert_allclose(a, a_ref, rtol=1e-6)
    np.testing.assert_allclose(hi, np.maximum(np.maximum(a_ref @ w, 0), 1), rtol=1e-6)
    engine.runtime.remove_global_func("test.split")


def test_conv2d_meaning_matches_a_direct_loop():
    from engine.relax.op import OPS
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 4, 6, 5))
    w = rng.standard_normal((6, 2, 3, 2))
    attrs = dict(OPS["relax.nn.conv2d"].attrs)
    attrs.update(strides=(2, 1), padding=(1, 0, 0, 1), dilation=(1, 2), groups=2)
    got = OPS["relax.nn.conv2d"].compute([x, w], attrs)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 1)))
    oh, ow = (xp.shape[2] - 3) // 2 + 1, (xp.shape[3] - 3) // 1 + 1
    ref = np.zeros((1, 6, oh, ow))
    for o in range(6):
        g = o // 3
        for i in range(oh):
            for j in range(ow):
                for c in range(2):
                    for r in range(3):
                        for q in range(2):
                            ref[0, o, i, j] += xp[0, g * 2 + c, i * 2 + r, j + q * 2] * \
                                w[o, c, r, q]
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-10)


def test_devices_other_than_the_cpu_are_refused():
    ex = relax.build(engine.parse(MY_MODULE_WITH_EXTERN_CALL))
    relax.VirtualMachine(ex, "cpu")
    with pytest.raises(ValueError, match="host CPU only"):
        relax.VirtualMachine(ex, "cuda")
    with pytest.raises(engine.BuildError, match="unsupported target"):
        relax.build(engine.parse(MY_MODULE_WITH_EXTERN_CALL), target="cuda")
    assert "main" in ex.stats() and sorted(ALL)

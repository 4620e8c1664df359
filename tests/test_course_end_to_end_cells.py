"""MLC course, chapter "End to End Model Execution" (mlc-ai/mlc-en, chapter_end_to_end),
its cells in order, through the engine's ``tvm`` namespace, written in TVM's current
spelling (``R.Tensor``, ``out_sinfo=``, ``cls.linear0``, ``R.call_dps_packed``,
``relax.build``), the 2022 spelling checked beside it.

Offline: the course downloads FashionMNIST and the trained weights; here the image is
random and the weights are random arrays of the same shapes (``engine.models.mlp.SHAPES``).
Each result is compared with the course's numpy model. The registered functions
``env.linear``/``env.relu`` are written with numpy instead of PyTorch. After the chapter:
the same model with high-level operators (``R.matmul``, ``R.permute_dims``, ``R.add``,
``R.nn.relu``) and with symbolic batch sizes (``m, n, k = T.int64(), ...`` in TensorIR,
``R.Tensor(("n", 784), "float32")`` in Relax).
"""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import tvm
from engine.models.mlp import SHAPES
from engine.script import ScriptError
from engine.tvm import relax
from engine.tvm.ir import IRModule
from engine.tvm.script import relax as R
from engine.tvm.script import tir as T

# ---------------------------------------------------------------- preparations (cells 1-5)
class_names = ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat',
               'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot']

_rng = np.random.default_rng(0)
img = _rng.random((1, 28, 28), dtype=np.float32)
mlp_params = {k: (_rng.standard_normal(shape) * 0.1).astype("float32")
              for k, shape in SHAPES.items()}


def numpy_mlp(data, w0, b0, w1, b1):
    lv0 = data @ w0.T + b0
    lv1 = np.maximum(lv0, 0)
    lv2 = lv1 @ w1.T + b1
    return lv2


# ---------------------------------------------------------------- low-level numpy (cell 6)
def lnumpy_linear0(X: np.ndarray, W: np.ndarray, B: np.ndarray, Z: np.ndarray):
    Y = np.empty((1, 128), dtype="float32")
    for i in range(1):
        for j in range(128):
            Y[i, j] = X[i, :] @ W[j, :]   # the course's k loop, as one dot product
    for i in range(1):
        for j in range(128):
            Z[i, j] = Y[i, j] + B[j]


def lnumpy_relu0(X: np.ndarray, Y: np.ndarray):
    for i in range(1):
        for j in range(128):
            Y[i, j] = np.maximum(X[i, j], 0)


def lnumpy_linear1(X: np.ndarray, W: np.ndarray, B: np.ndarray, Z: np.ndarray):
    Y = np.empty((1, 10), dtype="float32")
    for i in range(1):
        for j in range(10):
            Y[i, j] = X[i, :] @ W[j, :]
    for i in range(1):
        for j in range(10):
            Z[i, j] = Y[i, j] + B[j]


def lnumpy_mlp(data, w0, b0, w1, b1):
    lv0 = np.empty((1, 128), dtype="float32")
    lnumpy_linear0(data, w0, b0, lv0)
    lv1 = np.empty((1, 128), dtype="float32")
    lnumpy_relu0(lv0, lv1)
    out = np.empty((1, 10), dtype="float32")
    lnumpy_linear1(lv1, w1, b1, out)
    return out


# ---------------------------------------------------------------- the IRModule (cell 7)
@tvm.script.ir_module
class MyModule:
    @T.prim_func
    def relu0(X: T.Buffer((1, 128), "float32"),
              Y: T.Buffer((1, 128), "float32")):
        # function attr dict
        T.func_attr({"global_symbol": "relu0", "tir.noalias": True})
        for i, j in T.grid(1, 128):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @T.prim_func
    def linear0(X: T.Buffer((1, 784), "float32"),
                W: T.Buffer((128, 784), "float32"),
                B: T.Buffer((128,), "float32"),
                Z: T.Buffer((1, 128), "float32")):
        T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
        Y = T.alloc_buffer((1, 128), "float32")
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]

        for i, j in T.grid(1, 128):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @T.prim_func
    def linear1(X: T.Buffer((1, 128), "float32"),
                W: T.Buffer((10, 128), "float32"),
                B: T.Buffer((10,), "float32"),
                Z: T.Buffer((1, 10), "float32")):
        T.func_attr({"global_symbol": "linear1", "tir.noalias": True})
        Y = T.alloc_buffer((1, 10), "float32")
        for i, j, k in T.grid(1, 10, 128):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]

        for i, j in T.grid(1, 10):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @R.function
    def main(x: R.Tensor((1, 784), "float32"),
             w0: R.Tensor((128, 784), "float32"),
             b0: R.Tensor((128,), "float32"),
             w1: R.Tensor((10, 128), "float32"),
             b1: R.Tensor((10,), "float32")):
        with R.dataflow():
            cls = MyModule
            lv0 = R.call_tir(cls.linear0, (x, w0, b0), out_sinfo=R.Tensor((1, 128), dtype="float32"))
            lv1 = R.call_tir(cls.relu0, (lv0,), out_sinfo=R.Tensor((1, 128), dtype="float32"))
            out = R.call_tir(cls.linear1, (lv1, w1, b1), out_sinfo=R.Tensor((1, 10), dtype="float32"))
            R.output(out)
        return out


# the same module as the course printed it in 2022 (bare ``Tensor`` annotations: this file
# defers annotations, as the course's first cell does; shape and dtype as arguments)
@tvm.script.ir_module
class MyModule2022:
    @T.prim_func
    def relu0(X: T.Buffer[(1, 128), "float32"],
              Y: T.Buffer[(1, 128), "float32"]):
        T.func_attr({"global_symbol": "relu0", "tir.noalias": True})
        for i, j in T.grid(1, 128):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @R.function
    def main(x: Tensor((1, 128), "float32")):  # noqa: F821 - TVMScript's annotation
        with R.dataflow():
            out = R.call_tir(relu0, (x,), (1, 128), dtype="float32")  # noqa: F821
            R.output(out)
        return out


def lnumpy_call_tir(prim_func, inputs, shape, dtype):
    res = np.empty(shape, dtype=dtype)
    prim_func(*inputs, res)
    return res


def lnumpy_mlp_with_call_tir(data, w0, b0, w1, b1):
    lv0 = lnumpy_call_tir(lnumpy_linear0, (data, w0, b0), (1, 128), dtype="float32")
    lv1 = lnumpy_call_tir(lnumpy_relu0, (lv0, ), (1, 128), dtype="float32")
    out = lnumpy_call_tir(lnumpy_linear1, (lv1, w1, b1), (1, 10), dtype="float32")
    return out


def _expected():
    return numpy_mlp(img.reshape(1, 784), mlp_params["w0"], mlp_params["b0"],
                     mlp_params["w1"], mlp_params["b1"])


def test_numpy_cells():
    res = _expected()
    pred_kind = res.argmax(axis=1)
    assert class_names[pred_kind[0]] in class_names
    result = lnumpy_mlp(img.reshape(1, 784), mlp_params["w0"], mlp_params["b0"],
                        mlp_params["w1"], mlp_params["b1"])
    np.testing.assert_allclose(result, res, rtol=1e-4, atol=1e-4)
    result = lnumpy_mlp_with_call_tir(img.reshape(1, 784), mlp_params["w0"],
                                      mlp_params["b0"], mlp_params["w1"], mlp_params["b1"])
    np.testing.assert_allclose(result, res, rtol=1e-4, atol=1e-4)


def test_my_module_is_an_ir_module_of_four_functions():
    assert isinstance(MyModule, IRModule)
    assert sorted(MyModule.names()) == ["linear0", "linear1", "main", "relu0"]
    text = MyModule.script()            # cell 10: IPython.display.Code(MyModule.script())
    assert "@R.function" in text and "R.call_tir(linear0" in text
    assert "R.dataflow()" in text


# the course's data, made in cell 13 and used by every later cell
data_nd = tvm.nd.array(img.reshape(1, 784))
nd_params = {k: tvm.nd.array(v) for k, v in mlp_params.items()}


def test_build_and_run_my_module():
    ex = relax.build(MyModule, target="llvm")      # cell 11 (2022: relax.vm.build)
    vm = relax.VirtualMachine(ex, tvm.cpu())       # cell 12
    nd_res = vm["main"](data_nd,                   # cell 14
                        nd_params["w0"],
                        nd_params["b0"],
                        nd_params["w1"],
                        nd_params["b1"])
    np.testing.assert_allclose(nd_res.numpy(), _expected(), rtol=1e-4, atol=1e-4)
    pred_kind = np.argmax(nd_res.numpy(), axis=1)  # cell 15
    assert pred_kind[0] == _expected().argmax(axis=1)[0]
    print("MyModule Prediction:", class_names[pred_kind[0]])


def test_course_2022_spelling():
    ex = relax.vm.build(MyModule2022, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    x = _rng.standard_normal((1, 128)).astype("float32")
    np.testing.assert_array_equal(vm["main"](tvm.nd.array(x)).numpy(), np.maximum(x, 0))


# ---------------------------------------------------------------- library functions (16-18)
@tvm.script.ir_module
class MyModuleWithExternCall:
    @R.function
    def main(x: R.Tensor((1, 784), "float32"),
             w0: R.Tensor((128, 784), "float32"),
             b0: R.Tensor((128,), "float32"),
             w1: R.Tensor((10, 128), "float32"),
             b1: R.Tensor((10,), "float32")):
        # block 0
        with R.dataflow():
            lv0 = R.call_dps_packed("env.linear", (x, w0, b0), R.Tensor((1, 128), dtype="float32"))
            lv1 = R.call_dps_packed("env.relu", (lv0,), R.Tensor((1, 128), dtype="float32"))
            out = R.call_dps_packed("env.linear", (lv1, w1, b1), R.Tensor((1, 10), dtype="float32"))
            R.output(out)
        return out


@tvm.register_func("env.linear", override=True)
def numpy_linear(x: tvm.nd.NDArray,
                 w: tvm.nd.NDArray,
                 b: tvm.nd.NDArray,
                 out: tvm.nd.NDArray):
    np.matmul(x.numpy(), w.numpy().T, out=out)
    np.add(out, b.numpy(), out=out)


@tvm.register_func("env.relu", override=True)
def lnumpy_relu(x: tvm.nd.NDArray,
                out: tvm.nd.NDArray):
    np.maximum(x.numpy(), 0.0, out=out)


@pytest.fixture(autouse=True)
def _registered():
    """The cells' registered functions (other test files remove theirs, of these names)."""
    tvm.register_func("env.linear", numpy_linear, override=True)
    tvm.register_func("env.relu", lnumpy_relu, override=True)


def test_extern_call_cells():
    ex = relax.build(MyModuleWithExternCall, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    nd_res = vm["main"](data_nd,
                        nd_params["w0"],
                        nd_params["b0"],
                        nd_params["w1"],
                        nd_params["b1"])
    np.testing.assert_allclose(nd_res.numpy(), _expected(), rtol=1e-4, atol=1e-4)
    pred_kind = np.argmax(nd_res.numpy(), axis=1)
    print("MyModuleWithExternCall Prediction:", class_names[pred_kind[0]])


# ---------------------------------------------------------------- mixing both (19-20)
@tvm.script.ir_module
class MyModuleMixture:
    @T.prim_func
    def linear0(X: T.Buffer((1, 784), "float32"),
                W: T.Buffer((128, 784), "float32"),
                B: T.Buffer((128,), "float32"),
                Z: T.Buffer((1, 128), "float32")):
        T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
        Y = T.alloc_buffer((1, 128), "float32")
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]

        for i, j in T.grid(1, 128):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @R.function
    def main(x: R.Tensor((1, 784), "float32"),
             w0: R.Tensor((128, 784), "float32"),
             b0: R.Tensor((128,), "float32"),
             w1: R.Tensor((10, 128), "float32"),
             b1: R.Tensor((10,), "float32")):
        cls = MyModuleMixture
        with R.dataflow():
            lv0 = R.call_tir(cls.linear0, (x, w0, b0), out_sinfo=R.Tensor((1, 128), dtype="float32"))
            lv1 = R.call_dps_packed("env.relu", (lv0,), R.Tensor((1, 128), dtype="float32"))
            out = R.call_dps_packed("env.linear", (lv1, w1, b1), R.Tensor((1, 10), dtype="float32"))
            R.output(out)
        return out


def test_mixture_cells():
    ex = relax.build(MyModuleMixture, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    nd_res = vm["main"](data_nd,
                        nd_params["w0"],
                        nd_params["b0"],
                        nd_params["w1"],
                        nd_params["b1"])
    np.testing.assert_allclose(nd_res.numpy(), _expected(), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- bind parameters (21-22)
def test_bind_params_cells():
    MyModuleWithParams = relax.transform.BindParams("main", nd_params)(MyModuleMixture)
    text = MyModuleWithParams.script()
    assert "meta[relay.Constant][0]" in text or "metadata[" in text
    ex = relax.build(MyModuleWithParams, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    nd_res = vm["main"](data_nd)
    np.testing.assert_allclose(nd_res.numpy(), _expected(), rtol=1e-4, atol=1e-4)
    pred_kind = np.argmax(nd_res.numpy(), axis=1)
    print("MyModuleWithParams Prediction:", class_names[pred_kind[0]])
    # the printed module reads back with its constants
    reread = engine.parse(text, relax.constants_of(MyModuleWithParams))
    vm2 = relax.VirtualMachine(relax.build(reread, target="llvm"), tvm.cpu())
    np.testing.assert_allclose(vm2["main"](data_nd).numpy(), nd_res.numpy(), rtol=1e-6)


# ---------------------------------------------------------------- R.const in the text
@tvm.script.ir_module
class MyModuleConst:
    @R.function
    def main(x: R.Tensor((1, 128), "float32")):
        with R.dataflow():
            lv0 = R.add(x, R.const(1.5, "float32"))
            out = R.call_dps_packed("env.relu", (lv0,), out_sinfo=R.Tensor((1, 128), "float32"))
            R.output(out)
        return out


def test_r_const():
    vm = relax.VirtualMachine(relax.build(MyModuleConst, target="llvm"), tvm.cpu())
    x = _rng.standard_normal((1, 128)).astype("float32")
    np.testing.assert_allclose(vm["main"](tvm.nd.array(x)).numpy(), np.maximum(x + 1.5, 0))


# ---------------------------------------------------------------- high-level operators
@tvm.script.ir_module
class MyModuleHighLevel:
    @R.function
    def main(x: R.Tensor((1, 784), "float32"),
             w0: R.Tensor((128, 784), "float32"),
             b0: R.Tensor((128,), "float32"),
             w1: R.Tensor((10, 128), "float32"),
             b1: R.Tensor((10,), "float32")) -> R.Tensor((1, 10), "float32"):
        with R.dataflow():
            lv0 = R.permute_dims(w0)
            lv1 = R.matmul(x, lv0)
            lv2 = R.add(lv1, b0)
            lv3 = R.nn.relu(lv2)
            lv4 = R.permute_dims(w1)
            lv5 = R.matmul(lv3, lv4)
            out = R.add(lv5, b1)
            R.output(out)
        return out


def test_high_level_operators():
    args = [data_nd] + [nd_params[k] for k in ("w0", "b0", "w1", "b1")]
    vm = relax.VirtualMachine(relax.build(MyModuleHighLevel, target="llvm"), tvm.cpu())
    np.testing.assert_allclose(vm["main"](*args).numpy(), _expected(), rtol=1e-4, atol=1e-4)
    legal = relax.transform.LegalizeOps()(MyModuleHighLevel)
    vm = relax.VirtualMachine(relax.build(legal, target="llvm"), tvm.cpu())
    np.testing.assert_allclose(vm["main"](*args).numpy(), _expected(), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- refusals
def test_a_relax_method_is_not_called_from_python():
    @tvm.script.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor((4,), "float32")):
            return x

    assert Mod.names() == ["main"]

    class Plain:
        @R.function
        def main(x: R.Tensor((4,), "float32")):
            return x

    with pytest.raises(ScriptError, match="not called from Python"):
        Plain.main(1)


def test_a_relax_error_names_the_file_line():
    with pytest.raises(ScriptError) as e:
        @tvm.script.ir_module
        class Bad:
            @R.function
            def main(x: R.Tensor((4,), "float32")):
                with R.dataflow():
                    y = R.add(x, x)
                return y

    assert "test_course_end_to_end_cells.py" in str(e.value)
    assert "R.output" in str(e.value)


# ---------------------------------------------------------------- symbolic shapes
@tvm.script.ir_module
class MyModuleSym:
    @T.prim_func
    def linear(x: T.handle, w: T.handle, b: T.handle, z: T.handle):
        m, n, k = T.int64(), T.int64(), T.int64()
        X = T.match_buffer(x, (m, k), "float32")
        W = T.match_buffer(w, (n, k), "float32")
        B = T.match_buffer(b, (n,), "float32")
        Z = T.match_buffer(z, (m, n), "float32")
        Y = T.alloc_buffer((m, n), "float32")
        for i, j, kk in T.grid(m, n, k):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, kk])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid(m, n):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @T.prim_func
    def relu(x: T.handle, y: T.handle):
        m, n = T.int64(), T.int64()
        X = T.match_buffer(x, (m, n), "float32")
        Y = T.match_buffer(y, (m, n), "float32")
        for i, j in T.grid(m, n):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @R.function
    def main(x: R.Tensor(("n", 784), "float32"),
             w0: R.Tensor((128, 784), "float32"),
             b0: R.Tensor((128,), "float32"),
             w1: R.Tensor((10, 128), "float32"),
             b1: R.Tensor((10,), "float32")):
        n = T.int64()
        cls = MyModuleSym
        with R.dataflow():
            lv0 = R.call_tir(cls.linear, (x, w0, b0), out_sinfo=R.Tensor((n, 128), "float32"))
            lv1 = R.call_tir(cls.relu, (lv0,), out_sinfo=R.Tensor((n, 128), "float32"))
            out = R.call_tir(cls.linear, (lv1, w1, b1), out_sinfo=R.Tensor(("n", 10), "float32"))
            R.output(out)
        return out


def test_symbolic_batch():
    ex = relax.build(MyModuleSym, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    weights = [nd_params[k] for k in ("w0", "b0", "w1", "b1")]
    for batch in (1, 3, 8):
        x = _rng.random((batch, 784), dtype=np.float32)
        nd_res = vm["main"](tvm.nd.array(x), *weights)
        assert nd_res.shape == (batch, 10)
        np.testing.assert_allclose(nd_res.numpy(), numpy_mlp(x, *mlp_params.values()),
                                   rtol=1e-4, atol=1e-4)
    # the printed module says ("n", 784) and reads back
    text = MyModuleSym.script()
    assert '("n", 784)' in text and "m = T.int64()" in text
    again = relax.VirtualMachine(relax.build(engine.parse(text), target="llvm"), tvm.cpu())
    np.testing.assert_allclose(again["main"](x, *weights).numpy(), nd_res.numpy(), rtol=1e-6)
    with pytest.raises(engine.ArgumentError, match=r"shape \(n, 784\), got shape \(2, 700\)"):
        vm["main"](x[:2, :700], *weights)


def test_symbolic_sizes_shared_by_name():
    @tvm.script.ir_module
    class Two:
        @R.function
        def main(a: R.Tensor(("n", 4), "float32"), b: R.Tensor(("n", 4), "float32")):
            with R.dataflow():
                out = R.call_dps_packed("env.relu", (a,), R.Tensor(("n", 4), "float32"))
                R.output(out)
            return out

    vm = relax.VirtualMachine(relax.build(Two, target="llvm"), tvm.cpu())
    a = _rng.standard_normal((5, 4)).astype("float32")
    np.testing.assert_array_equal(vm["main"](a, a).numpy(), np.maximum(a, 0))
    with pytest.raises(engine.ArgumentError, match=r"argument 1 \(b\) has 3 in dimension 0, "
                                                   r"which is n, but n is 5 from argument 0"):
        vm["main"](a, a[:3])


def test_symbolic_refusals():
    with pytest.raises(ScriptError, match="'k' is not a symbolic size of this function"):
        engine.parse('''
@R.function
def main(x: R.Tensor(("n", 4), "float32")):
    with R.dataflow():
        out = R.call_dps_packed("env.relu", (x,), R.Tensor((k, 4), "float32"))
        R.output(out)
    return out
''')
    with pytest.raises(ScriptError, match="high-level operators take tensors of known shape"):
        engine.parse('''
@R.function
def main(x: R.Tensor(("n", 4), "float32")):
    with R.dataflow():
        out = R.add(x, x)
        R.output(out)
    return out
''')
    mod = engine.parse('''
@R.function
def main(x: R.Tensor((4,), "float32")):
    with R.dataflow():
        out = R.call_dps_packed("env.relu", (x,), R.Tensor(("m",), "float32"))
        R.output(out)
    return out
''')
    with pytest.raises(engine.BuildError, match="no parameter's shape defines"):
        relax.build(mod, target="llvm")


def test_symbolic_buffers_take_one_size_per_call():
    src = MyModuleSym.script().replace('R.call_tir(relu, (lv0,), ("n", 128)',
                                       'R.call_tir(relu, (lv0,), ("n", 10)')
    assert src != MyModuleSym.script()
    with pytest.raises(engine.BuildError, match="buffer Y is float32 \\(m, n\\) \\(a size "
                                                "variable of the buffers gets one size"):
        relax.build(engine.parse(src), target="llvm")

"""MLC course, chapter "Integration with Machine Learning Frameworks" (mlc-ai/mlc-en,
chapter_integration/index.md, the version updated to TVM's current API: ``relax.Var(name,
relax.TensorStructInfo(...))``, ``tvm.compile``, ``tvm.runtime.tensor``), its cells in order
through the engine's ``tvm`` namespace, each result compared with numpy.

Offline and without PyTorch: the chapter's ``from_fx``, ``map_param``, ``fetch_attr`` and
mapping functions are the course's code, unchanged; what they read is a small stand-in for
``torch.fx`` written here (:class:`FxGraph`: nodes with ``op``, ``target``, ``args``,
``name``; ``graph.print_tabular()``; a module's ``named_modules()``), with the models'
graphs as ``fx.symbolic_trace`` gives them, parameters as numpy arrays behind
``detach().cpu().numpy()``, and random weights instead of the downloaded FashionMNIST ones.
After the chapter: the BlockBuilder API the chapter and the graph-optimisation chapter use
(``relax.Call`` with ``tvm.ir.Op.get``, ``normalize``, ``lookup_binding``, ``call_te``,
``add_func``/``update_func``, ``IRModule.from_expr``) and its refusals.

With PyTorch installed, the same ``from_fx`` also reads real ``torch.fx`` traces of the
chapter's ``MyModel`` and ``MLP`` (``nn.Module`` subclasses as the chapter writes them), and
the virtual machine's result is compared with torch's own; without it those tests are
skipped ("torch is not installed").
"""
from __future__ import annotations

import types

import numpy as np
import pytest

from engine import tvm
from engine.tvm import relax, te, topi
from engine.tvm.ir import IRModule

rng = np.random.default_rng(7)


def run_prim(func, *arrays):
    """Build a PrimFunc for the CPU and run it on numpy arrays (the last one written)."""
    rt = tvm.compile(func, target="llvm")
    rt(*arrays)
    return arrays[-1]


def run_vm(mod, *arrays):
    ex = tvm.compile(mod, tvm.target.Target("llvm", host="llvm"))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    return vm["main"](*[tvm.runtime.tensor(a) for a in arrays]).numpy()


# ---------------------------------------------------------------- tensor expression (cells 3-13)
A = te.placeholder((128, 128), name="A", dtype="float32")
B = te.placeholder((128, 128), name="B", dtype="float32")


def te_matmul(A: te.Tensor, B: te.Tensor) -> te.Tensor:
    assert A.shape[1] == B.shape[0]
    n = A.shape[0]
    m = B.shape[1]
    k = te.reduce_axis((0, A.shape[1]), name="k")
    return te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")


def te_relu(A: te.Tensor) -> te.Tensor:
    return te.compute(A.shape, lambda *i: te.max(A(*i), 0), name="relu")


a_np = rng.standard_normal((128, 128)).astype("float32")
b_np = rng.standard_normal((128, 128)).astype("float32")


def test_placeholder_cells():
    assert type(A) is te.Tensor
    assert tuple(A.shape) == (128, 128)


def test_create_prim_func_matmul(capsys):
    C = te_matmul(A, B)
    func = te.create_prim_func([A, B, C])
    func.show()
    text = capsys.readouterr().out
    assert 'with T.block("matmul")' in text
    assert "matmul[vi, vj] = matmul[vi, vj] + A[vi, vk] * B[vk, vj]" in text
    out = run_prim(func, a_np, b_np, np.zeros((128, 128), "float32"))
    np.testing.assert_allclose(out, a_np @ b_np, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(10,), (10, 20)])
def test_te_relu_any_shape(shape, capsys):
    X = te.placeholder(shape, name="X1", dtype="float32")
    Y = te_relu(X)
    func = te.create_prim_func([X, Y])
    func.show()
    assert 'with T.block("relu")' in capsys.readouterr().out
    x = rng.standard_normal(shape).astype("float32")
    np.testing.assert_array_equal(run_prim(func, x, np.zeros(shape, "float32")),
                                  np.maximum(x, 0))


def test_fused_matmul_relu(capsys):
    C = te_matmul(A, B)
    D = te_relu(C)
    fused = te.create_prim_func([A, B, D])     # C a temporary of the function
    fused.show()
    text = capsys.readouterr().out
    assert "matmul = T.alloc_buffer((128, 128))" in text
    ref = np.maximum(a_np @ b_np, 0)
    np.testing.assert_allclose(run_prim(fused, a_np, b_np, np.zeros((128, 128), "float32")),
                               ref, rtol=1e-4, atol=1e-4)
    with_c = te.create_prim_func([A, B, C, D])  # C passed in by the caller
    with_c.show()
    assert "T.alloc_buffer" not in capsys.readouterr().out
    c = np.zeros((128, 128), "float32")
    d = run_prim(with_c, a_np, b_np, c, np.zeros((128, 128), "float32"))
    np.testing.assert_allclose(c, a_np @ b_np, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(d, ref, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- BlockBuilder (cells 14-18)
def build_my_module(params_first: bool = False):
    A = relax.Var("A", relax.TensorStructInfo((128, 128), "float32"))
    B = relax.Var("B", relax.TensorStructInfo((128, 128), "float32"))
    bb = relax.BlockBuilder()
    if params_first:
        with bb.function("main", params=[A, B]):
            with bb.dataflow():
                C = bb.emit_te(te_matmul, A, B)
                D = bb.emit_te(te_relu, C)
                R = bb.emit_output(D)
            bb.emit_func_output(R)
    else:
        with bb.function("main"):
            with bb.dataflow():
                C = bb.emit_te(te_matmul, A, B)
                D = bb.emit_te(te_relu, C)
                R = bb.emit_output(D)
            bb.emit_func_output(R, params=[A, B])
    return bb.get(), C


MY_MODULE_MAIN = '''\
    @R.function
    def main(A: Tensor((128, 128), "float32"), B: Tensor((128, 128), "float32")) -> Tensor((128, 128), "float32"):
        with R.dataflow():
            lv = R.call_tir(te_matmul, (A, B), (128, 128), dtype="float32")
            lv1 = R.call_tir(te_relu, (lv,), (128, 128), dtype="float32")
            gv = lv1
            R.output(gv)
        return gv
'''


def test_block_builder_my_module(capsys):
    MyModule, C = build_my_module()
    MyModule.show()
    text = capsys.readouterr().out
    assert MY_MODULE_MAIN in text
    assert "def te_matmul(A: T.Buffer((128, 128), \"float32\"), B: T.Buffer((128, 128), " \
           "\"float32\"), matmul: T.Buffer((128, 128), \"float32\")):" in text
    assert "def te_relu(lv: T.Buffer((128, 128), \"float32\"), relu: " \
           "T.Buffer((128, 128), \"float32\")):" in text
    assert MyModule.names() == ["te_matmul", "te_relu", "main"]
    # the deep dive: every emit makes a DataflowVar, a relax.Var
    assert type(C) is relax.DataflowVar
    assert isinstance(C, relax.Var)
    np.testing.assert_allclose(run_vm(MyModule, a_np, b_np), np.maximum(a_np @ b_np, 0),
                               rtol=1e-4, atol=1e-4)


def test_block_builder_params_at_the_beginning():
    first, _ = build_my_module(params_first=True)
    last, _ = build_my_module()
    assert first.script() == last.script()
    tvm.ir.assert_structural_equal(first, last)


# ---------------------------------------------------------------- from torch.fx (cells 19-25)
class FxNode:
    """A node of a torch.fx graph: ``op``, ``target``, ``args``, ``name``."""

    def __init__(self, op, name, target, args=()):
        self.op, self.name, self.target, self.args = op, name, target, tuple(args)
        self.kwargs = {}

    def __repr__(self):
        return self.name


class FxGraph:
    def __init__(self, nodes):
        self.nodes = list(nodes)

    def print_tabular(self):
        """torch.fx's table of the nodes (opcode, name, target, args, kwargs)."""
        def target(n):
            return getattr(n.target, "__qualname__", n.target) if callable(n.target) \
                else n.target
        rows = [("opcode", "name", "target", "args", "kwargs")]
        rows += [(n.op, n.name, str(target(n)), str(n.args), str(n.kwargs))
                 for n in self.nodes]
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for k, r in enumerate(rows):
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
            if k == 0:
                print("  ".join("-" * w for w in widths))


class Parameter:
    """An nn.Parameter's face as map_param reads it: ``detach().cpu().numpy()``."""

    def __init__(self, array):
        self.array = np.asarray(array, "float32")

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self.array


class Module:
    def named_modules(self):
        out = [("", self)]
        for k, v in vars(self).items():
            if isinstance(v, Module):
                out.append((k, v))
        return out


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True):
        self.weight = Parameter(rng.standard_normal((out_features, in_features)) * 0.1)
        self.bias = Parameter(rng.standard_normal(out_features) * 0.1) if bias else None


class ReLU(Module):
    pass


class GraphModule(Module):
    """``fx.symbolic_trace(model)``: the model's modules and parameters, and its graph."""

    def __init__(self, model, graph):
        self.__dict__.update(vars(model))
        self.graph = graph


def _matmul(a, b):
    return np.matmul(a, b)


def _relu(a):
    return np.maximum(a, 0)


torch = types.SimpleNamespace(matmul=_matmul, relu=_relu,
                              nn=types.SimpleNamespace(Linear=Linear, ReLU=ReLU,
                                                       Parameter=Parameter))
nn = torch.nn


class MyModel(Module):
    def __init__(self):
        self.weight = Parameter(rng.standard_normal((128, 128)))

    def trace(self):   # forward: x = torch.matmul(x, self.weight); x = torch.relu(x)
        x = FxNode("placeholder", "x", "x")
        weight = FxNode("get_attr", "weight", "weight")
        matmul = FxNode("call_function", "matmul", torch.matmul, (x, weight))
        relu = FxNode("call_function", "relu", torch.relu, (matmul,))
        return FxGraph([x, weight, matmul, relu, FxNode("output", "output", "output",
                                                        (relu,))])


class MLP(Module):
    def __init__(self):
        self.linear0 = nn.Linear(784, 128, bias=True)
        self.relu = nn.ReLU()
        self.linear1 = nn.Linear(128, 10, bias=True)

    def trace(self):   # forward: linear0, relu, linear1
        x = FxNode("placeholder", "x", "x")
        l0 = FxNode("call_module", "linear0", "linear0", (x,))
        r = FxNode("call_module", "relu", "relu", (l0,))
        l1 = FxNode("call_module", "linear1", "linear1", (r,))
        return FxGraph([x, l0, r, l1, FxNode("output", "output", "output", (l1,))])


fx = types.SimpleNamespace(Node=FxNode,
                           symbolic_trace=lambda model: GraphModule(model, model.trace()))


# the course's code, unchanged ------------------------------------------------------------
def map_param(param: nn.Parameter):
    t = param.detach() if hasattr(param, "detach") else param
    arr = t.cpu().numpy().astype("float32")
    return relax.const(arr, "float32")


def fetch_attr(fx_mod, target: str):
    """Helper function to fetch an attr"""
    target_atoms = target.split('.')
    attr_itr = fx_mod
    for i, atom in enumerate(target_atoms):
        if not hasattr(attr_itr, atom):
            raise RuntimeError(f"Node referenced nonexistant target {'.'.join(target_atoms[:i])}")
        attr_itr = getattr(attr_itr, atom)
    return attr_itr


def from_fx(fx_mod, input_shapes, call_function_map, call_module_map):
    input_index = 0
    node_map = {}
    named_modules = dict(fx_mod.named_modules())

    bb = relax.BlockBuilder()

    fn_inputs = []
    fn_output = None
    with bb.function("main"):
        with bb.dataflow():
            for node in fx_mod.graph.nodes:
                if node.op == "placeholder":
                    # create input placeholder
                    shape = input_shapes[input_index]
                    input_index += 1
                    input_var = relax.Var(
                        node.target, relax.TensorStructInfo(shape, "float32")
                    )
                    fn_inputs.append(input_var)
                    node_map[node] = input_var
                elif node.op == "get_attr":
                    node_map[node] = map_param(fetch_attr(fx_mod, node.target))
                elif node.op == "call_function":
                    node_map[node] = call_function_map[node.target](bb, node_map, node)
                elif node.op == "call_module":
                    named_module = named_modules[node.target]
                    node_map[node] = call_module_map[type(named_module)](bb, node_map, node, named_module)
                elif node.op == "output":
                    output = node_map[node.args[0]]
                    assert fn_output is None
                    fn_output = bb.emit_output(output)
        # output and finalize the function
        bb.emit_func_output(output, fn_inputs)
    return bb.get()


def map_matmul(bb, node_map, node: fx.Node):
    A = node_map[node.args[0]]
    B = node_map[node.args[1]]
    return bb.emit_te(te_matmul, A, B)


def map_relu(bb, node_map, node: fx.Node):
    A = node_map[node.args[0]]
    return bb.emit_te(te_relu, A)


def map_nn_linear(bb, node_map, node, nn_mod):
    x = node_map[node.args[0]]
    w = map_param(nn_mod.weight)
    if nn_mod.bias is not None:
        b = map_param(nn_mod.bias)
    y = bb.emit_te(topi.nn.dense, x, w)
    return bb.emit_te(topi.add, y, b)


def map_nn_relu(bb, node_map, node, nn_mod):
    return map_relu(bb, node_map, node)


def map_nn_relu_op(bb, node_map, node, nn_mod):
    A = node_map[node.args[0]]
    return bb.emit(relax.op.nn.relu(A))


def map_nn_linear_op(bb, node_map, node, nn_mod):
    x = node_map[node.args[0]]
    w = map_param(nn_mod.weight)
    b = map_param(nn_mod.bias)
    return bb.emit(relax.op.linear(x, w, b))
# -----------------------------------------------------------------------------------------


def test_fx_graph_print_tabular(capsys):
    model = MyModel()
    fx_module = fx.symbolic_trace(model)
    assert type(fx_module) is GraphModule
    fx_module.graph.print_tabular()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["opcode", "name", "target", "args", "kwargs"]
    assert [ln.split()[0] for ln in lines[2:]] == ["placeholder", "get_attr", "call_function",
                                                    "call_function", "output"]


def test_from_fx_matmul_relu(capsys):
    model = MyModel()
    fx_module = fx.symbolic_trace(model)
    MyModule = from_fx(
        fx_module,
        input_shapes=[(1, 128)],
        call_function_map={
            torch.matmul: map_matmul,
            torch.relu: map_relu,
        },
        call_module_map={},
    )
    MyModule.show()
    text = capsys.readouterr().out
    assert '''\
    @R.function
    def main(x: Tensor((1, 128), "float32")) -> Tensor((1, 128), "float32"):
        with R.dataflow():
            lv = R.call_tir(te_matmul, (x, meta[relay.Constant][0]), (1, 128), dtype="float32")
            lv1 = R.call_tir(te_relu, (lv,), (1, 128), dtype="float32")
            gv = lv1
            R.output(gv)
        return gv
''' in text
    x = rng.standard_normal((1, 128)).astype("float32")
    np.testing.assert_allclose(run_vm(MyModule, x), np.maximum(x @ model.weight.array, 0),
                               rtol=1e-4, atol=1e-4)


img = rng.random((1, 28, 28), dtype=np.float32)
class_names = ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat',
               'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot']


def numpy_mlp(mlp, data):
    h = np.maximum(data @ mlp.linear0.weight.array.T + mlp.linear0.bias.array, 0)
    return h @ mlp.linear1.weight.array.T + mlp.linear1.bias.array


def test_mlp_from_fx_with_topi(capsys):
    mlp_model = MLP()
    MLPModule = from_fx(
        fx.symbolic_trace(mlp_model),
        input_shapes=[(1, 784)],
        call_function_map={
        },
        call_module_map={
            torch.nn.Linear: map_nn_linear,
            torch.nn.ReLU: map_nn_relu,
        },
    )
    MLPModule.show()
    text = capsys.readouterr().out
    assert MLPModule.names() == ["dense", "add", "te_relu", "dense1", "add1", "main"]
    assert '''\
        with R.dataflow():
            lv = R.call_tir(dense, (x, meta[relay.Constant][0]), (1, 128), dtype="float32")
            lv1 = R.call_tir(add, (lv, meta[relay.Constant][1]), (1, 128), dtype="float32")
            lv2 = R.call_tir(te_relu, (lv1,), (1, 128), dtype="float32")
            lv3 = R.call_tir(dense1, (lv2, meta[relay.Constant][2]), (1, 10), dtype="float32")
            lv4 = R.call_tir(add1, (lv3, meta[relay.Constant][3]), (1, 10), dtype="float32")
            gv = lv4
            R.output(gv)
        return gv
''' in text
    assert 'with T.block("T_matmul_NT")' in text

    # the chapter's run: tvm.compile, the virtual machine, the prediction
    target = tvm.target.Target("llvm", host="llvm")
    ex = tvm.compile(MLPModule, target)
    vm = relax.VirtualMachine(ex, tvm.cpu())
    data_nd = tvm.runtime.tensor(img.reshape(1, 784))
    nd_res = vm["main"](data_nd)
    ref = numpy_mlp(mlp_model, img.reshape(1, 784))
    np.testing.assert_allclose(nd_res.numpy(), ref, rtol=1e-4, atol=1e-4)
    pred_kind = np.argmax(nd_res.numpy(), axis=1)
    assert class_names[pred_kind[0]] == class_names[np.argmax(ref, axis=1)[0]]


def test_mlp_from_fx_high_level_operators(capsys):
    mlp_model = MLP()
    MLPModuleHighLevel = from_fx(
        fx.symbolic_trace(mlp_model),
        input_shapes=[(1, 784)],
        call_function_map={
        },
        call_module_map={
            torch.nn.Linear: map_nn_linear_op,
            torch.nn.ReLU: map_nn_relu_op,
        },
    )
    MLPModuleHighLevel.show()
    text = capsys.readouterr().out
    assert '''\
        with R.dataflow():
            lv = R.permute_dims(meta[relay.Constant][0])
            lv1 = R.matmul(x, lv)
            lv2 = R.add(lv1, meta[relay.Constant][1])
            lv3 = R.nn.relu(lv2)
            lv4 = R.permute_dims(meta[relay.Constant][2])
            lv5 = R.matmul(lv3, lv4)
            lv6 = R.add(lv5, meta[relay.Constant][3])
            gv = lv6
            R.output(gv)
        return gv
''' in text
    data = img.reshape(1, 784)
    ref = numpy_mlp(mlp_model, data)
    # the operators run by the virtual machine, and legalized to TensorIR
    np.testing.assert_allclose(run_vm(MLPModuleHighLevel, data), ref, rtol=1e-4, atol=1e-4)
    lowered = relax.transform.LegalizeOps()(MLPModuleHighLevel)
    assert {"transpose", "matmul", "add", "relu"} <= set(lowered.prim_func_names())
    np.testing.assert_allclose(run_vm(lowered, data), ref, rtol=1e-4, atol=1e-4)



# ------------------------------------------- from_fx over a real torch.fx trace (torch optional)
def real_torch():
    """PyTorch itself (``torch``, ``torch.nn``, ``torch.fx``), or the test is skipped: the
    stand-in above is what runs offline; with torch installed, the course's ``from_fx``
    (the same functions, unchanged) also reads what ``fx.symbolic_trace`` really gives."""
    torch_ = pytest.importorskip("torch", reason="torch is not installed")
    from torch import fx as fx_, nn as nn_
    return torch_, nn_, fx_


def test_from_fx_traces_a_torch_module():
    torch_, nn_, fx_ = real_torch()
    torch_.manual_seed(0)

    class MyModel(nn_.Module):          # the chapter's model, as written there
        def __init__(self):
            super(MyModel, self).__init__()
            self.weight = nn_.Parameter(torch_.randn(128, 128))

        def forward(self, x):
            x = torch_.matmul(x, self.weight)
            x = torch_.relu(x)
            return x

    model = MyModel()
    fx_module = fx_.symbolic_trace(model)
    assert [n.op for n in fx_module.graph.nodes] == ["placeholder", "get_attr",
                                                     "call_function", "call_function",
                                                     "output"]
    assert fetch_attr(fx_module, "weight") is fx_module.get_parameter("weight")
    MyModule = from_fx(
        fx_module,
        input_shapes=[(1, 128)],
        call_function_map={
            torch_.matmul: map_matmul,
            torch_.relu: map_relu,
        },
        call_module_map={},
    )
    assert MyModule.names() == ["te_matmul", "te_relu", "main"]
    x = torch_.randn(1, 128)
    with torch_.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(run_vm(MyModule, x.numpy()), expected, rtol=1e-4, atol=1e-4)


def test_mlp_from_fx_traces_a_torch_module():
    torch_, nn_, fx_ = real_torch()
    torch_.manual_seed(0)

    class MLP(nn_.Module):              # the chapter's MLP, as written there
        def __init__(self):
            super(MLP, self).__init__()
            self.linear0 = nn_.Linear(784, 128, bias=True)
            self.relu = nn_.ReLU()
            self.linear1 = nn_.Linear(128, 10, bias=True)

        def forward(self, data):
            x = self.linear0(data)
            x = self.relu(x)
            x = self.linear1(x)
            return x

    mlp_model = MLP()
    fx_module = fx_.symbolic_trace(mlp_model)
    assert [(n.op, n.target) for n in fx_module.graph.nodes][1:4] == [
        ("call_module", "linear0"), ("call_module", "relu"), ("call_module", "linear1")]
    assert fx_module.get_submodule("linear0") is dict(fx_module.named_modules())["linear0"]
    for high_level, maps in ((False, {torch_.nn.Linear: map_nn_linear,
                                      torch_.nn.ReLU: map_nn_relu}),
                             (True, {torch_.nn.Linear: map_nn_linear_op,
                                     torch_.nn.ReLU: map_nn_relu_op})):
        MLPModule = from_fx(fx_module, input_shapes=[(1, 784)], call_function_map={},
                            call_module_map=maps)
        if not high_level:
            assert MLPModule.names() == ["dense", "add", "te_relu", "dense1", "add1", "main"]
        data = torch_.rand(1, 784)
        with torch_.no_grad():
            expected = mlp_model(data).numpy()
        np.testing.assert_allclose(run_vm(MLPModule, data.numpy()), expected,
                                   rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- the API around the chapter
def test_call_with_op_get_normalized_and_looked_up():
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    y = relax.Var("y", relax.TensorStructInfo((2, 3), "float32"))
    add = tvm.ir.Op.get("relax.add")
    assert add is tvm.ir.Op.get("relax.add") and add == relax.Op("relax.add")
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            lv0 = bb.emit(relax.op.multiply(x, y))
            call = relax.Call(add, [lv0, y])
            assert isinstance(call.struct_info, relax.ObjectStructInfo)  # until normalized
            norm = bb.normalize(call)
            assert norm.struct_info.shape == (2, 3) and norm.op == add
            lv1 = bb.emit(call)
            assert bb.lookup_binding(lv1).op == add
            assert bb.lookup_binding(lv0).op == tvm.ir.Op.get("relax.multiply")
            assert bb.lookup_binding(x) is None
            fma = bb.emit(relax.op.ewise_fma(x, y, lv1))
            gv = bb.emit_output(fma)
        gvar = bb.emit_func_output(gv)
    mod = bb.get()
    assert gvar.name_hint == "main" and mod[gvar] is mod["main"]
    xs, ys = (rng.standard_normal((2, 3)).astype("float32") for _ in range(2))
    ref = xs * ys + (xs * ys + ys)
    np.testing.assert_allclose(run_vm(mod, xs, ys), ref, rtol=1e-5)
    lowered = relax.transform.LegalizeOps()(mod)
    assert "ewise_fma" in lowered.prim_func_names()
    np.testing.assert_allclose(run_vm(lowered, xs, ys), ref, rtol=1e-5)


def test_nested_calls_are_bound_first():
    x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit(relax.op.add(relax.op.multiply(x, x), relax.const(1.0, "float32")))
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    text = bb.get().script()
    assert "lv = R.multiply(x, x)" in text and 'lv1 = R.add(lv, R.const(1.0, "float32"))' in text


def test_call_te_add_func_update_func_from_expr():
    x = relax.Var("x", relax.TensorStructInfo((8,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        call = bb.call_te(lambda a: te.compute(a.shape, lambda i: a[i] * 2.0, name="dbl"), x,
                          primfunc_name_hint="double")
        assert call.op == tvm.ir.Op.get("relax.call_tir")
        lv = bb.emit(call)
        lv2 = bb.emit_te(topi.nn.relu, lv)     # outside a dataflow block: gv names
        bb.emit_func_output(lv2)
    mod = bb.get()
    assert mod.names() == ["double", "relu", "main"]
    assert "gv = R.call_tir(double, (x,), (8,), dtype=\"float32\")" in mod.script()
    xs = rng.standard_normal(8).astype("float32")
    np.testing.assert_allclose(run_vm(mod, xs), np.maximum(xs * 2, 0))
    # a structurally equal PrimFunc is not added twice; another name is made unique
    bb2 = relax.BlockBuilder(mod)
    assert bb2.add_func(mod["relu"], "relu_again").name_hint == "relu"
    assert bb2.add_func(mod["double"].replace(name="x"), "double").name_hint == "double"
    new_main = relax.Function("main", mod["main"].params, mod["main"].body,
                              mod["main"].ret_struct_info)
    bb2.update_func(mod.get_global_var("main"), new_main)
    assert bb2.get()["main"] is new_main
    single = IRModule.from_expr(mod["main"])
    assert single.names() == ["main"]


def test_refusals():
    x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
    bb = relax.BlockBuilder()
    with pytest.raises(ValueError, match="inside `with bb.dataflow"):
        with bb.function("main", [x]):
            bb.emit_output(x)
    bb = relax.BlockBuilder()
    with pytest.raises(ValueError, match="without bb.emit_func_output"):
        with bb.function("f", [x]):
            bb.emit(relax.op.nn.relu(x))
    bb = relax.BlockBuilder()
    with pytest.raises(ValueError, match="not seen after it"):
        with bb.function("g", [x]):
            with bb.dataflow():
                lv = bb.emit(relax.op.nn.relu(x))
            bb.emit_func_output(lv)
    y = relax.Var("y", relax.TensorStructInfo((3,), "float32"))
    with pytest.raises(ValueError, match="do not broadcast"):
        relax.op.add(x, y)

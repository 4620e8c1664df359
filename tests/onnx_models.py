"""Small ONNX models built with onnx.helper, for the importer's tests (no files, no downloads)."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype("float32")


def model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def mlp_gemm(seed=0, batch=1):
    """The course's MLP as PyTorch exports it: Gemm(transB=1) -> Relu -> Gemm(transB=1)."""
    rng = np.random.default_rng(seed)
    inits = [("w0", _rand(rng, 128, 784)), ("b0", _rand(rng, 128)),
             ("w1", _rand(rng, 10, 128)), ("b1", _rand(rng, 10))]
    nodes = [helper.make_node("Gemm", ["x", "w0", "b0"], ["h"], transB=1, name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "w1", "b1"], ["y"], transB=1, name="fc2")]
    return model(nodes, [("x", [batch, 784])], [("y", [batch, 10])], inits)


def matmul_add_softmax(seed=0):
    rng = np.random.default_rng(seed)
    inits = [("w", _rand(rng, 16, 8)), ("b", _rand(rng, 8))]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Softmax", ["a"], ["y"], axis=-1)]
    return model(nodes, [("x", [3, 16])], [("y", [3, 8])], inits)


def conv_net(seed=0, pads=(1, 1, 1, 1), strides=(1, 1)):
    """Conv(+bias) -> Relu -> Flatten -> Gemm -> Softmax: a small CNN."""
    rng = np.random.default_rng(seed)
    h = (8 + pads[0] + pads[2] - 3) // strides[0] + 1
    w = (8 + pads[1] + pads[3] - 3) // strides[1] + 1
    inits = [("cw", _rand(rng, 4, 2, 3, 3)), ("cb", _rand(rng, 4)),
             ("fw", _rand(rng, 4 * h * w, 5)), ("fb", _rand(rng, 5))]
    nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], kernel_shape=[3, 3],
                              pads=list(pads), strides=list(strides), name="conv"),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["g"], alpha=0.5, beta=2.0),
             helper.make_node("Softmax", ["g"], ["y"], axis=1)]
    return model(nodes, [("x", [2, 2, 8, 8])], [("y", [2, 5])], inits)


def reshape_chain(seed=0):
    """Reshape with a Constant shape (0 = keep, -1 = infer), Transpose, Identity."""
    shape = numpy_helper.from_array(np.array([0, -1, 4], dtype=np.int64), "s")
    nodes = [helper.make_node("Constant", [], ["shape"], value=shape),
             helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Identity", ["t"], ["i"]),
             helper.make_node("Relu", ["i"], ["y"])]
    return model(nodes, [("x", [2, 3, 8])], [("y", [2, 4, 6])])


def reference(m, feeds):
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(m).run(None, feeds)


def one_op(op_type, x_shape, inits=(), opset=17, name="n", outputs=("y",), **attrs):
    """A model of one ``op_type`` node reading the input ``x`` then the ``inits`` (name,
    array) in order; the outputs are declared without shapes (the reader works them out)."""
    node = helper.make_node(op_type, ["x"] + [n for n, _ in inits], list(outputs), name=name,
                            **attrs)
    return model_of([node], [("x", x_shape)], list(outputs), inits, opset)


def model_of(nodes, inputs, outputs, inits=(), opset=17):
    """Like :func:`model`, with the outputs named only (no declared shape)."""
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def folded_conv_with_huge_pads(pad=16000, stride=16000, dtype="float32"):
    """A few hundred bytes: a Conv of two 1x1x1x1 constants padded by ``pad`` on every side
    (folded at import: the padded input alone would be (2 * pad + 1)**2 values), added to
    the input ``x`` of the (tiny) output's shape."""
    side = (2 * pad + 1 - 1) // stride + 1
    one = np.ones((1, 1, 1, 1), dtype=dtype)
    nodes = [helper.make_node("Conv", ["c", "w"], ["k"], pads=[pad] * 4,
                              strides=[stride, stride], name="conv"),
             helper.make_node("Add", ["x", "k"], ["y"], name="add")]
    return model_of(nodes, [("x", [1, 1, side, side])], ["y"], [("c", one), ("w", one)])

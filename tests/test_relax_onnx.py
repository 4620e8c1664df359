"""engine.relax.from_onnx: small models built with onnx.helper, compiled by the engine (after
LegalizeOps, and after fusion) and run in the VM, against onnx's reference evaluator; hostile
files refused with sentences."""
from __future__ import annotations

import numpy as np

import pytest
from onnx import TensorProto, helper

import onnx_models as om
from engine import relax
from engine.relax.frontend import ImportError_, OnnxLimits
from engine.relax.transform import DeadCodeElimination, FuseOps, FuseTIR, LegalizeOps

CASES = {
    "mlp_gemm": (om.mlp_gemm, (1, 784)),
    "mlp_gemm_batch": (lambda: om.mlp_gemm(batch=3), (3, 784)),
    "matmul_add_softmax": (om.matmul_add_softmax, (3, 16)),
    "conv_net": (om.conv_net, (2, 2, 8, 8)),
    "conv_net_strided": (lambda: om.conv_net(pads=(0, 1, 2, 0), strides=(2, 1)), (2, 2, 8, 8)),
    "reshape_chain": (om.reshape_chain, (2, 3, 8)),
}


def _vm_run(mod, x):
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"))
    return np.asarray(vm["main"](x))


@pytest.mark.parametrize("case", sorted(CASES))
def test_imported_model_matches_onnx_reference_before_and_after_fusion(case):
    make, shape = CASES[case]
    model = make()
    x = np.random.default_rng(7).standard_normal(shape).astype("float32")
    want = om.reference(model, {"x": x})[0]
    mod = relax.from_onnx(model)
    legal = LegalizeOps()(mod)
    fused = DeadCodeElimination()(FuseTIR()(FuseOps()(legal)))
    for m in (legal, fused):
        np.testing.assert_allclose(_vm_run(m, x), want, rtol=1e-4, atol=1e-5)


def test_bytes_and_model_give_the_same_module():
    m = om.matmul_add_softmax()
    a = relax.from_onnx(m)
    b = relax.from_onnx(m.SerializeToString())
    assert a.script() == b.script()


def test_gemm_with_constant_weights_folds_the_transpose():
    mod = relax.from_onnx(om.mlp_gemm())
    ops = [b.value.op.name for b in mod["main"].bindings()]
    assert ops == ["relax.matmul", "relax.add", "relax.nn.relu", "relax.matmul", "relax.add"]


def _one_node(op_type, **attrs):
    node = helper.make_node(op_type, ["x"], ["y"], **attrs)
    return om.model([node], [("x", [2, 3])], [("y", [2, 3])])


@pytest.mark.parametrize("op", ["Sigmoid", "LSTM", "Tanh"])
def test_unsupported_operator_is_refused_by_name(op):
    with pytest.raises(ImportError_, match=f"ONNX operator '{op}'.*not supported; supported: Gemm"):
        relax.from_onnx(_one_node(op))


def test_hostile_files_are_refused_with_sentences():
    with pytest.raises(ImportError_, match="not an ONNX model"):
        relax.from_onnx(b"\x00\x01garbage" * 10)
    with pytest.raises(ImportError_, match="limit is 100 bytes"):
        relax.from_onnx(om.mlp_gemm().SerializeToString(), limits=OnnxLimits(max_bytes=100))
    with pytest.raises(ImportError_, match="3 nodes; the limit is 2"):
        relax.from_onnx(om.mlp_gemm(), limits=OnnxLimits(max_nodes=2))
    with pytest.raises(ImportError_, match="elements; the limit"):
        relax.from_onnx(om.mlp_gemm(), limits=OnnxLimits(max_tensor_elements=1000))
    with pytest.raises(ImportError_, match="onnx.ModelProto"):
        relax.from_onnx({"not": "a model"})


def test_external_data_is_refused_without_opening_files():
    m = om.matmul_add_softmax()
    w = m.graph.initializer[0]
    w.ClearField("raw_data")
    w.ClearField("float_data")
    w.data_location = TensorProto.EXTERNAL
    entry = w.external_data.add()
    entry.key, entry.value = "location", "/etc/passwd"
    with pytest.raises(ImportError_, match="external data"):
        relax.from_onnx(m)


def test_dynamic_batch_needs_a_shape_and_takes_one():
    m = om.mlp_gemm()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    with pytest.raises(ImportError_, match="shape_dict"):
        relax.from_onnx(m)
    mod = relax.from_onnx(m, shape_dict={"x": (4, 784)})
    assert mod["main"].params[0].struct_info.shape == (4, 784)


def test_shape_mismatch_names_the_node():
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="proj")]
    m = om.model(nodes, [("x", [2, 5])], [("y", [2, 3])],
                 [("w", rng.standard_normal((4, 3)).astype("float32"))])
    with pytest.raises(ImportError_, match="MatMul 'proj'"):
        relax.from_onnx(m)


def test_reshape_needs_a_constant_shape():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"])]
    graph = helper.make_graph(nodes, "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
        helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ImportError_, match="target shape must be a constant"):
        relax.from_onnx(m)


def test_softmax_before_opset_13_flattens_around_its_axis():
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    m = om.model([node], [("x", [2, 3, 4])], [("y", [2, 3, 4])], opset=11)
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype("float32")
    got = _vm_run(LegalizeOps()(relax.from_onnx(m)), x)
    # the operator's definition before opset 13 (onnx.reference runs every opset's Softmax
    # with the opset-13 meaning, so the spec's is written out here)
    flat = x.reshape(2, 12).astype("float64")
    e = np.exp(flat - flat.max(1, keepdims=True))
    np.testing.assert_allclose(got, (e / e.sum(1, keepdims=True)).reshape(2, 3, 4), rtol=1e-5,
                               atol=1e-6)




@pytest.mark.parametrize("stage", ["scheduled", "fused+scheduled"])
def test_default_schedules_keep_an_imported_model_correct(stage):
    from engine.models.pipeline import stage_module

    model = om.mlp_gemm(batch=4)
    x = np.random.default_rng(3).standard_normal((4, 784)).astype("float32")
    mod, traces = stage_module(relax.from_onnx(model), stage)
    assert any(len(t.insts) > 5 for t in traces.values())   # the matmuls were tiled
    np.testing.assert_allclose(_vm_run(mod, x), om.reference(model, {"x": x})[0], rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_read_graph_survives_its_plain_data_form(case):
    """graph_to_doc -> JSON -> graph_from_doc gives the same graph, computing the same
    numbers (what a sandboxed worker sends back through a pipe)."""
    import json

    from engine.relax.frontend import graph_from_doc, graph_to_doc
    from engine.relax.frontend.graph import evaluate
    from engine.relax.frontend.onnx_reader import read_onnx

    make, shape = CASES[case]
    g = read_onnx(make())
    back = graph_from_doc(json.loads(json.dumps(graph_to_doc(g))))
    assert (back.inputs, back.calls, back.outputs, back.shapes) == \
        (g.inputs, g.calls, g.outputs, g.shapes)
    x = np.random.default_rng(5).standard_normal(shape).astype("float32")
    for got, want in zip(evaluate(back, {"x": x}), evaluate(g, {"x": x})):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("pads, strides, dilations, kernel", [
    ((1, 1, 1, 1), (1, 1), (1, 1), (5, 5)),     # more kernel positions than output ones
    ((0, 2, 1, 0), (2, 1), (1, 2), (2, 3)),
    ((0, 0, 0, 0), (1, 1), (1, 1), (7, 7)),     # the kernel covers the whole input
])
def test_numpy_convolution_matches_onnx_either_way_it_loops(pads, strides, dilations, kernel):
    from engine.relax.frontend.graph import evaluate
    from engine.relax.frontend.onnx_reader import read_onnx

    rng = np.random.default_rng(2)
    m = om.one_op("Conv", [1, 2, 7, 7], [("w", rng.standard_normal((3, 2) + kernel)
                                          .astype("float32"))],
                  pads=list(pads), strides=list(strides), dilations=list(dilations))
    x = rng.standard_normal((1, 2, 7, 7)).astype("float32")
    np.testing.assert_allclose(evaluate(read_onnx(m), {"x": x})[0],
                               om.reference(m, {"x": x})[0], rtol=1e-4, atol=1e-5)

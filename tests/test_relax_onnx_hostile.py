"""ONNX models from outside are hostile input: every malformed one is refused with an
``ImportError_`` sentence (never another exception, which the web app would answer with a
500), and the work of reading one (numpy folding, the reference forward pass) is bounded
from shapes before anything is allocated.

The first tests are the holes found by an attacker against the server, one each; then the
limits; then :mod:`engine.relax.frontend.graph_doc` (the plain-data form a sandboxed worker
sends back); then two hypothesis fuzzers (models with random attributes and shapes, and
mutated docs) that accept a graph or an ``ImportError_`` and nothing else.
"""
from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_models as om
from engine.models import zoo
from engine.relax.frontend import ImportError_, OnnxLimits
from engine.relax.frontend.graph import evaluate
from engine.relax.frontend.onnx_reader import read_onnx

RNG = np.random.default_rng(0)


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _read(m, limits=None):
    """The graph of ``m`` read from its bytes, as the web app reads an upload."""
    return read_onnx(m.SerializeToString(), None, limits)


def _refused(m, match, limits=None):
    with pytest.raises(ImportError_, match=match):
        _read(m, limits)


# ------------------------------------------------------------------ attributes of the wrong kind
def test_gemm_alpha_given_as_a_list_is_a_sentence():
    m = om.one_op("Gemm", [2, 3], [("w", _rand(3, 4))], name="fc1", alpha=[1.0, 2.0])
    _refused(m, r"Gemm 'fc1': alpha must be a number, got a list \[1\.0, 2\.0\]")


def test_conv_group_given_as_a_list_is_a_sentence():
    m = om.one_op("Conv", [1, 2, 5, 5], [("w", _rand(3, 2, 3, 3))], name="c", group=[1, 2])
    _refused(m, r"Conv 'c': group must be an integer, got a list \[1, 2\]")


def test_flatten_axis_given_as_a_list_is_a_sentence():
    m = om.one_op("Flatten", [2, 3], name="f", axis=[1])
    _refused(m, r"Flatten 'f': axis must be an integer from -2 to 2, got a list \[1\]")


@pytest.mark.parametrize("perm", [[0, 5], [0, 0], [0, 1, 2], [-1, 0], [1]])
def test_transpose_perm_must_be_a_permutation_of_the_input_rank(perm):
    m = om.one_op("Transpose", [2, 3], name="t", perm=perm)
    _refused(m, r"Transpose 't': perm must be a permutation of 0\.\.1 \(2 integers\), got")


@pytest.mark.parametrize("auto_pad", ["NOTSET", "SAME_UPPER", "SAME_LOWER"])
def test_conv_stride_of_zero_is_a_sentence(auto_pad):
    m = om.one_op("Conv", [1, 2, 5, 5], [("w", _rand(3, 2, 3, 3))], name="c", strides=[0, 1],
                  auto_pad=auto_pad)
    _refused(m, r"Conv 'c': strides must be 2 integers from 1 to \d+, got a list \[0, 1\]")


def test_matmul_of_a_scalar_is_refused():
    m = om.one_op("MatMul", [], [("w", _rand(3))], name="mm")
    _refused(m, r"MatMul 'mm': .*at least one dimension")


def test_matmul_of_two_vectors_is_refused_as_the_compiler_would_refuse_it():
    m = om.one_op("MatMul", [3], [("w", _rand(3))], name="mm")
    _refused(m, r"MatMul 'mm': .*two vectors is a scalar")


def test_a_model_of_two_outputs_is_refused_by_the_model_page():
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["z"])]
    m = om.model_of(nodes, [("x", [3])], ["y", "z"])
    with pytest.raises(ImportError_, match="2 outputs; the model page runs models of one "
                                           "input and one output"):
        zoo.from_onnx_bytes(m.SerializeToString())


def test_a_model_of_two_inputs_is_an_import_error_not_a_value_error():
    nodes = [helper.make_node("Add", ["x", "x2"], ["y"])]
    m = om.model_of(nodes, [("x", [3]), ("x2", [3])], ["y"])
    with pytest.raises(ImportError_, match="2 inputs and 1 output; the model page runs "
                                           "models of one input and one output"):
        zoo.from_onnx_bytes(m.SerializeToString())


@pytest.mark.parametrize("kind", ["graph", "sparse_tensor", "undefined"])
def test_an_attribute_the_reader_cannot_decode_is_a_sentence(kind):
    m = om.one_op("Relu", [2, 3], name="r")
    if kind == "graph":
        sub = helper.make_graph([], "sub", [], [])
        m.graph.node[0].attribute.append(helper.make_attribute("body", sub))
        want = r"Relu 'r': attribute 'body' is a graph"
    elif kind == "sparse_tensor":
        values = numpy_helper.from_array(np.ones(1, "float32"), "v")
        indices = numpy_helper.from_array(np.zeros(1, "int64"), "i")
        sparse = helper.make_sparse_tensor(values, indices, [3])
        m.graph.node[0].attribute.append(helper.make_attribute("s", sparse))
        want = r"Relu 'r': attribute 's' is a sparse tensor"
    else:
        m.graph.node[0].attribute.add(name="odd")   # no type at all
        want = r"Relu 'r': attribute 'odd' has no type"
    _refused(m, want)


def test_a_node_without_an_output_is_a_sentence():
    m = om.one_op("Relu", [2, 3], name="r")
    del m.graph.node[0].output[:]
    _refused(m, r"Relu 'r' has 0 outputs; it makes 1")


def test_a_node_overwriting_an_existing_value_is_a_sentence():
    nodes = [helper.make_node("Relu", ["x"], ["x"], name="r")]
    m = om.model_of(nodes, [("x", [2, 3])], ["x"])
    _refused(m, r"Relu 'r' writes 'x', which is already defined")


# ------------------------------------------------------------------ Reshape: every error a sentence
@pytest.mark.parametrize("target, allowzero, want", [
    ([-1, -1], 0, "more than one -1"),
    ([4, 2], 0, "has 6 elements"),
    ([2, 3, 0], 0, r"a 0 at position 2, which copies a dimension the input \(shape \(2, 3\)\) "
                    "does not have"),
    ([0, 6], 1, "allowzero=1 makes an empty tensor"),
    ([], 0, "reshape to a scalar is not supported"),
    ([-2, 3], 0, "not a shape"),
])
def test_reshape_errors_are_sentences(target, allowzero, want):
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="rs", allowzero=allowzero)]
    m = om.model_of(nodes, [("x", [2, 3])], ["y"], [("s", np.array(target, dtype=np.int64))])
    _refused(m, "Reshape 'rs': .*" + want)


def test_reshape_target_must_be_integers():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")]
    m = om.model_of(nodes, [("x", [2, 3])], ["y"], [("s", np.array([3.0, 2.0], "float32"))])
    _refused(m, r"Reshape 'rs': the target shape must be a 1-D int64 tensor")


# ------------------------------------------------------------------ bounded before allocating
def _peak_bytes(fn):
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize("dtype, match", [
    ("float32", r"Conv 'conv': its padded input would hold 1024064001 elements; the limit is "
                r"16777216 per tensor \(max_tensor_elements\)"),
    ("int64", r"Conv 'conv': the operand 'c' is int64; only float32 tensors are computed")])
def test_a_tiny_model_with_huge_pads_is_refused_without_allocating(dtype, match):
    """The attacker's 185-byte models (4.5 GB, and 8.4 GB in int64, in np.pad before)."""
    data = om.folded_conv_with_huge_pads(dtype=dtype).SerializeToString()
    assert len(data) < 300

    def attempt():
        with pytest.raises(ImportError_, match=match):
            read_onnx(data)

    start = time.perf_counter()
    assert _peak_bytes(attempt) < 50 * 1024 * 1024
    assert time.perf_counter() - start < 5


def test_a_forward_pass_over_the_flop_limit_is_refused_from_shapes():
    """The attacker's 18 KB model: its numpy reference took 29 s and 2.6 GB."""
    m = om.one_op("Conv", [1, 16, 1024, 1024], [("w", _rand(16, 16, 3, 3))], name="big")
    assert len(m.SerializeToString()) < 20_000
    start = time.perf_counter()
    _refused(m, r"Conv 'big': the model's forward pass would take 4\.81e\+09 FLOPs up to this "
                r"node; the limit is 4e\+09 \(max_model_flops\) — export a smaller model")
    assert time.perf_counter() - start < 2


def test_folding_over_the_fold_flop_limit_is_refused_before_evaluating():
    ones = np.ones((600, 600), "float32")
    nodes = [helper.make_node("MatMul", ["a", "b"], ["ab"], name="fold"),
             helper.make_node("Add", ["x", "ab"], ["y"])]
    m = om.model_of(nodes, [("x", [600, 600])], ["y"], [("a", ones), ("b", ones)])
    start = time.perf_counter()
    _refused(m, r"MatMul 'fold': folding the model's constant computations would take "
                r"4\.32e\+08 FLOPs at import; the limit is 2e\+08 \(max_fold_flops\)")
    assert time.perf_counter() - start < 2


def test_gemm_scaling_a_weight_counts_as_folding():
    m = om.one_op("Gemm", [2, 64], [("w", _rand(64, 64))], name="fc", alpha=2.0)
    _refused(m, r"Gemm 'fc': folding .* 4\.1e\+03 FLOPs .*max_fold_flops",
             OnnxLimits(max_fold_flops=1000))


def test_the_intermediate_values_of_a_forward_pass_are_bounded_in_all():
    nodes = [helper.make_node("Relu", [f"v{k}"], [f"v{k + 1}"], name=f"r{k}") for k in range(4)]
    m = om.model_of(nodes, [("v0", [1024, 1024])], ["v4"])
    _read(m, OnnxLimits(max_activation_elements=4 * 1024 * 1024))
    _refused(m, r"Relu 'r2': the model's intermediate values would hold 3145728 elements up "
                r"to this node; the limit is 3000000 \(max_activation_elements\)",
             OnnxLimits(max_activation_elements=3_000_000))


def test_graph_flops_counts_the_forward_pass_from_shapes():
    from engine.relax.frontend.graph import graph_flops

    g = _read(om.mlp_gemm())
    assert graph_flops(g) == 2 * 784 * 128 + 128 + 128 + 2 * 128 * 10 + 10
    conv = _read(om.conv_net())   # conv 2*(2*4*8*8)*(2*3*3) + bias + relu + gemm + softmax
    assert graph_flops(conv) == (2 * 512 * 18 + 512 + 512 + 2 * 2 * 5 * 256 + 10 + 5 * 10)


def test_from_onnx_bytes_reads_the_model_once(monkeypatch):
    from engine.relax.frontend import onnx_reader

    parses = []
    real = onnx_reader._parse
    monkeypatch.setattr(onnx_reader, "_parse", lambda *a: parses.append(1) or real(*a))
    model = zoo.from_onnx_bytes(om.mlp_gemm().SerializeToString())
    assert len(parses) == 1
    x = np.ones((1, 784), "float32")
    np.testing.assert_allclose(model.numpy_fn(x), om.reference(om.mlp_gemm(), {"x": x})[0],
                               rtol=1e-4, atol=1e-4)

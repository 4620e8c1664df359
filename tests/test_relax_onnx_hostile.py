"""ONNX models from outside are hostile input: every malformed one is refused with an
``ImportError_`` sentence (never another exception, which the web app would answer with a
500), and the work of reading one (numpy folding, the reference forward pass) is bounded
from shapes before anything is allocated.

The first tests are the holes found by an attacker against the server, one each; then the
limits; then :mod:`engine.relax.frontend.graph_doc` (the plain-data form a sandboxed worker
sends back); then three hypothesis fuzzers (models with random attributes and shapes, their
bytes altered, mutated docs) that accept a graph or an ``ImportError_`` and nothing else.
"""
from __future__ import annotations

import copy
import json
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, strategies as st
from onnx import AttributeProto, helper, numpy_helper

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


def test_a_name_that_is_not_utf8_text_is_a_sentence():
    """protobuf hands an invalid UTF-8 string over as bytes (found by the byte fuzzer)."""
    raw = om.one_op("Relu", [2, 3], name="r", outputs=("yy",)).SerializeToString()
    at = raw.index(b"yy")
    bad = raw[:at] + b"\xff\xfe" + raw[at + 2:]
    with pytest.raises(ImportError_, match="a name that is not UTF-8 text"):
        read_onnx(bad)


def test_the_parts_of_a_model_are_counted_before_they_are_walked():
    """Millions of tiny weights or attributes in 64 MB would take minutes to read."""
    tiny = [(f"w{k}", np.ones(1, "float32")) for k in range(9)]
    _refused(om.one_op("Relu", [2], tiny), r"the model has 9 weights; the limit is 8",
             OnnxLimits(max_nodes=2))
    m = om.one_op("Relu", [2], name="r")
    m.graph.node[0].attribute.extend(helper.make_attribute(f"a{k}", k) for k in range(65))
    _refused(m, r"node 0 \('Relu'\) has 65 attributes; at most 64 are read")


# ------------------------------------------------------------------ Reshape: errors are sentences
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


# ------------------------------------------------------------------ the graph's plain-data form
def _doc(make=om.conv_net):
    from engine.relax.frontend import graph_to_doc

    return json.loads(json.dumps(graph_to_doc(_read(make()))))


def _doc_refused(doc, match, limits=None):
    from engine.relax.frontend import graph_from_doc

    with pytest.raises(ImportError_, match=match):
        graph_from_doc(doc, limits)


def _first_conv(doc):
    return next(c for c in doc["calls"] if c["op"] == "nn.conv2d")


def test_a_doc_whose_declared_shape_lies_is_refused():
    doc = _doc()
    out = _first_conv(doc)["output"]
    doc["shapes"][out] = [2, 4, 8, 9]
    _doc_refused(doc, r"shapes says '.*' \(call 0 \(Conv 'conv'\)\) has shape \(2, 4, 8, 9\), "
                      r"but it has \(2, 4, 8, 8\)")


def test_a_doc_with_truncated_or_invalid_base64_is_refused_before_decoding():
    doc = _doc()
    doc["constants"]["cw"]["data"] = doc["constants"]["cw"]["data"][:-4]
    _doc_refused(doc, r"the data of constant 'cw' must be 384 characters of base64 \(288 bytes "
                      r"of float32 for shape \(4, 2, 3, 3\)\), got 380 characters")
    doc = _doc()
    doc["constants"]["cw"]["data"] = "!" * 384
    _doc_refused(doc, "the data of constant 'cw' is not valid base64")


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.pop("outputs"), "the document must have the fields"),
    (lambda d: d.__setitem__("format", "other/1"), "format must be"),
    (lambda d: d["calls"][0].__setitem__("op", "nn.gelu"), "call 0's op must be one of"),
    (lambda d: d["calls"][0].__setitem__("inputs", ["x"]), "takes 2 operand"),
    (lambda d: d["calls"][0].__setitem__("inputs", ["x", "later"]),
     "reads 'later', which is not defined before it"),
    (lambda d: d["calls"][0]["attrs"].__setitem__("strides", [1.5, 1]),
     r"nn.conv2d's strides must be 2 integers"),
    (lambda d: d["calls"][0]["attrs"].pop("padding"), r"takes 3 attribute\(s\), got 2"),
    (lambda d: d["calls"][0]["attrs"].__setitem__("pad", d["calls"][0]["attrs"].pop("padding")),
     "takes the attributes"),
    (lambda d: d["calls"][0]["attrs"].__setitem__("strides", [0, 1]),
     "strides and dilation must be at least 1"),
    (lambda d: d["calls"][1].__setitem__("output", d["calls"][0]["output"]),
     "which is already defined"),
    (lambda d: d["constants"]["cw"].__setitem__("shape", [4, 2, 3, 4]),
     r"the data of constant .cw. must be 512 characters"),
    (lambda d: d["constants"]["cw"].__setitem__("dtype", "float16"),
     "the dtype of constant .cw. must be one of"),
    (lambda d: d["inputs"][0].__setitem__("shape", [2, 2, 8, True]), "positive integers"),
    (lambda d: d["shapes"].__setitem__("ghost", [1]), "which the graph does not define"),
    (lambda d: d["outputs"].__setitem__(0, "x"), "not computed by any call"),
    (lambda d: d.__setitem__("calls", {}), "calls must be a list"),
])
def test_a_malformed_doc_is_refused_with_a_sentence(mutate, match):
    doc = _doc()
    mutate(doc)
    _doc_refused(doc, match)


def test_a_doc_is_held_to_the_same_limits_as_a_model():
    doc = _doc()
    _doc_refused(doc, r"the model's forward pass would take .* \(max_model_flops\)",
                 OnnxLimits(max_model_flops=1000))
    _doc_refused(doc, r"the shape of constant 'g_Bscaled__3' has 1280 elements; the limit is 1000",
                 OnnxLimits(max_tensor_elements=1000))
    conv = _first_conv(doc)
    conv["attrs"]["padding"] = [10 ** 6, 0, 0, 0]
    conv["attrs"]["strides"] = [10 ** 6, 1]        # the output stays small
    _doc_refused(doc, "padded input would hold")


# ------------------------------------------------------------------ fuzzing the reader

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
_ODD_INTS = st.sampled_from([0, -1, -2, 1, 2, 3, 16000, 2 ** 31, 2 ** 62, -(2 ** 63)])
_INT = st.one_of(st.integers(-3, 4), _ODD_INTS)


def _tensor_attr(dims):
    return numpy_helper.from_array(np.ones(dims, "float32"))


#: any ONNX attribute value: numbers (odd ones too), strings, lists of each, tensors
ATTR_VALUES = st.one_of(
    _INT, _INT, st.floats(width=32), _TEXT,
    st.sampled_from(["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]),
    st.lists(st.integers(-1, 4), min_size=1, max_size=5),
    st.lists(_INT, min_size=1, max_size=5),
    st.lists(st.floats(-3, 3, width=32), min_size=1, max_size=3),
    st.lists(_TEXT, min_size=1, max_size=3),
    st.lists(st.integers(1, 3), max_size=3).map(_tensor_attr),
    st.just("EMPTY_INTS"),
)

#: the attributes each operator reads (others are made too, and must be ignored)
OP_ATTRS = {
    "Gemm": ["alpha", "beta", "transA", "transB"],
    "Conv": ["group", "strides", "dilations", "pads", "kernel_shape", "auto_pad"],
    "Softmax": ["axis"], "Flatten": ["axis"], "Transpose": ["perm"], "Reshape": ["allowzero"],
    "MatMul": [], "Add": [], "Relu": [], "Identity": [], "Constant": ["value"],
}
_SHAPE = st.lists(st.integers(1, 4), max_size=4)


def _sane_attr(name, rank):
    """Values an exporter would write (so that the fuzzer reaches accepted models too)."""
    pair = st.lists(st.integers(1, 2), min_size=2, max_size=2)
    return {
        "alpha": st.floats(-2, 2, width=32), "beta": st.floats(-2, 2, width=32),
        "transA": st.integers(0, 1), "transB": st.integers(0, 1), "allowzero": st.integers(0, 1),
        "group": st.just(1), "strides": pair, "dilations": pair, "kernel_shape": pair,
        "pads": st.lists(st.integers(0, 2), min_size=4, max_size=4),
        "auto_pad": st.sampled_from(["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]),
        "axis": st.integers(-rank, max(rank - 1, 0)),
        "perm": st.permutations(list(range(rank))).filter(bool),
        "value": _SHAPE.map(_tensor_attr), "junk": ATTR_VALUES,
    }[name]


def _attribute(name, value):
    if value == "EMPTY_INTS":
        return helper.make_attribute(name, [], attr_type=AttributeProto.INTS)
    return helper.make_attribute(name, value)


def _reshape_target(draw, x_shape):
    """A target shape for ``x_shape``: one that fits (with -1 or 0) or any."""
    size = int(np.prod(x_shape))
    fitting = st.sampled_from([[-1], [size], [1, -1], [size, 1], list(x_shape[:1]) + [-1],
                               [0, -1] if x_shape else [1]])
    return draw(st.one_of(fitting, st.lists(st.sampled_from([-2, -1, 0, 1, 2, 3, 4, 6, 24]),
                                            max_size=4)))


@st.composite
def fuzzed_models(draw):
    """One supported operator with random attributes (half of them values an exporter
    would write) and small random shapes: its data either the input ``x`` or a weight
    (folded at import); its other operands weights that fit or not; then an Add of the
    input ``z`` (of shape (1,)) or a Relu, so that something is computed."""
    op = draw(st.sampled_from(sorted(OP_ATTRS)))
    x_shape = draw(_SHAPE)
    if op == "Conv" and draw(st.integers(0, 3)):
        x_shape = [draw(st.integers(1, 2)), draw(st.integers(1, 3))] + \
            [draw(st.integers(1, 6)) for _ in range(2)]
    if op == "Gemm" and draw(st.integers(0, 3)):
        x_shape = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))

    def weight(shape):
        return rng.standard_normal(shape).astype("float32")

    fits = draw(st.integers(0, 3)) > 0
    last = x_shape[-1] if x_shape else 1
    others = []
    if op == "Gemm":
        others = [weight((last, 3) if fits else draw(_SHAPE))]
        if draw(st.booleans()):
            others.append(weight(draw(st.sampled_from([(3,), (1, 3), (), (2, 3), (4,)]))))
    elif op == "MatMul":
        others = [weight((last, 2) if fits else draw(_SHAPE))]
    elif op == "Add":
        others = [weight(x_shape[-1:] if fits else draw(_SHAPE))]
    elif op == "Conv":
        c = x_shape[1] if len(x_shape) > 1 and fits else draw(st.integers(1, 3))
        kernel = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
        others = [weight([2, c] + kernel) if fits else weight(draw(_SHAPE))]
        if draw(st.booleans()):
            others.append(weight((2,) if fits else draw(_SHAPE)))
    elif op == "Reshape":
        others = [np.array(_reshape_target(draw, x_shape),
                           dtype="int64" if fits else draw(st.sampled_from(["int64", "float32"])))]
    names = draw(st.lists(st.sampled_from(OP_ATTRS[op] + ["junk"]), unique=True, max_size=4))
    if op == "Constant" and fits and "value" not in names:
        names.append("value")
    sane = [_sane_attr(n, len(x_shape)) for n in names]      # drawn two times in three
    attrs = [_attribute(n, draw(st.one_of(v, v, ATTR_VALUES))) for n, v in zip(names, sane)]
    folded = draw(st.booleans())
    inputs = [] if op == "Constant" else ["xc" if folded else "x"] + \
        [f"w{k}" for k in range(len(others))]
    node = helper.make_node(op, inputs, ["y"], name="n")
    node.attribute.extend(attrs)
    inits = [(f"w{k}", a) for k, a in enumerate(others)]
    if folded or op == "Constant":
        inits.append(("xc", weight(x_shape)))
        after = helper.make_node("Add", ["y", "z"], ["out"], name="after")
        model_inputs = [("z", [1])]
    else:
        after = helper.make_node("Relu", ["y"], ["out"], name="after")
        model_inputs = [("x", x_shape)]
    opset = draw(st.sampled_from([11, 13, 17]))
    return om.model_of([node, after], model_inputs, ["out"], inits, opset)


def _check_read(data):
    """``read_onnx(data)`` is a graph whose evaluation has the shapes it says (and which
    becomes Relax), or an ImportError_ — nothing else."""
    from engine.relax.frontend import graph_to_relax

    try:
        g = read_onnx(data)
    except ImportError_:
        return None
    feeds = {n: np.ones(s, "float32") for n, (s, _) in g.inputs.items()}
    for name, value in zip(g.outputs, evaluate(g, feeds)):
        assert value.shape == g.shapes[name] and value.dtype == np.float32
    graph_to_relax(g)
    return g


@given(fuzzed_models())
def test_fuzzed_models_are_read_or_refused_with_a_sentence(m):
    _check_read(m.SerializeToString())


@given(fuzzed_models(), st.data())
def test_fuzzed_model_bytes_are_read_or_refused_with_a_sentence(m, data):
    raw = bytearray(m.SerializeToString())
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    _check_read(bytes(raw))


# ------------------------------------------------------------------ fuzzing the doc reader
_JSON_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 5), _ODD_INTS, st.floats(), _TEXT,
    st.lists(st.integers(-2, 9), max_size=5), st.dictionaries(_TEXT, st.integers(), max_size=2),
    st.sampled_from(["x", "nn.conv2d", "add", "float32", "int64", "AAAA", "cw"]))
_DOC_SOURCES = {"conv_net": om.conv_net, "reshape_chain": om.reshape_chain,
                "matmul_add_softmax": om.matmul_add_softmax}
_DOCS = {}


def _pristine_doc(name):
    if name not in _DOCS:
        _DOCS[name] = _doc(_DOC_SOURCES[name])
    return copy.deepcopy(_DOCS[name])


def _mutate(doc, data):
    """Walk from the top to a random place and alter it: drop it, replace it with any JSON
    value, truncate it, or duplicate an entry."""
    node = doc
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            return
        key = data.draw(st.sampled_from(keys))
        child = node[key]
        if isinstance(child, (dict, list)) and child and data.draw(st.booleans()):
            node = child
            continue
        action = data.draw(st.sampled_from(["drop", "replace", "truncate", "duplicate"]))
        if action == "drop":
            del node[key]
        elif action == "replace":
            node[key] = data.draw(_JSON_VALUES)
        elif action == "truncate" and isinstance(child, (str, list)):
            node[key] = child[:data.draw(st.integers(0, max(0, len(child) - 1)))]
        elif action == "duplicate" and isinstance(node, list):
            node.append(child)
        return


@given(st.sampled_from(sorted(_DOC_SOURCES)), st.data())
def test_mutated_docs_are_read_or_refused_with_a_sentence(name, data):
    from engine.relax.frontend import graph_from_doc, graph_to_relax

    doc = _pristine_doc(name)
    for _ in range(data.draw(st.integers(1, 3))):
        _mutate(doc, data)
    try:
        g = graph_from_doc(doc)
    except ImportError_:
        return
    feeds = {n: np.ones(s, "float32") for n, (s, _) in g.inputs.items()}
    for out, value in zip(g.outputs, evaluate(g, feeds)):
        assert value.shape == g.shapes[out]
    graph_to_relax(g)

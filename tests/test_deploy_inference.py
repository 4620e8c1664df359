"""The endpoint's request reader (``engine.deploy.inference``) on random functions and
requests: every accepted request gives back exactly the arrays that were sent, one input
set per batch item, and an answer laid out as the inputs came (checked with a function
whose outputs are its inputs); a shape that fits no form is refused naming the input and
both shapes."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.deploy.inference import (FunctionSpec, RequestError, TensorSpec, outputs_doc,
                                     read_request, shape_text)

MAX_BATCH = 4


@st.composite
def functions(draw):
    """A function of 1-2 float32 inputs (shapes of 1-3 small sizes, often with a leading
    1) whose outputs mirror its inputs."""
    n_in = draw(st.integers(1, 2))
    ins = []
    for k in range(n_in):
        shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
        if draw(st.booleans()):
            shape = (1,) + shape[1:]
        ins.append(TensorSpec(f"in{k}", shape, "float32"))
    outs = tuple(TensorSpec(f"out{k}", t.shape, t.dtype) for k, t in enumerate(ins))
    return FunctionSpec("f", tuple(ins), outs)


def _echo(batch, spec):
    """The answer of a function whose outputs are its inputs."""
    return outputs_doc(batch, [list(item) for item in batch.items], spec)


@given(functions(), st.integers(1, MAX_BATCH), st.sampled_from(
    ["one", "one-squeezed", "stacked", "stacked-squeezed", "list"]), st.booleans(),
    st.integers(0, 2**31))
def test_accepted_requests_give_back_the_arrays_sent(spec, n, form, by_name, seed):
    rng = np.random.default_rng(seed)
    squeezable = all(t.shape[0] == 1 for t in spec.inputs)
    if form.endswith("squeezed") and not squeezable:
        form = form.removesuffix("-squeezed")
    if form.startswith("one"):
        n = 1
    items = [[rng.standard_normal(t.shape).astype("float32") for t in spec.inputs]
             for _ in range(n)]

    def sent(arrays):
        if form == "one":
            return list(arrays)
        if form == "one-squeezed":
            return [a.reshape(a.shape[1:]) for a in arrays]
        raise AssertionError(form)

    if form == "list":
        doc = {"batch": [_named(spec, [a.tolist() for a in item], by_name) for item in items]}
    elif form.startswith("stacked"):
        per_input = []
        for i in range(len(spec.inputs)):
            stack = np.stack([item[i] for item in items])
            if form == "stacked-squeezed":
                stack = stack.reshape((n,) + spec.inputs[i].shape[1:])
            per_input.append(stack.tolist())
        doc = {"inputs": _named(spec, per_input, by_name)}
    else:
        doc = {"inputs": _named(spec, [a.tolist() for a in sent(items[0])], by_name)}
    batch = read_request(json.dumps(doc).encode(), spec, MAX_BATCH)
    assert len(batch.items) == n
    for got, want in zip(batch.items, items):
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == np.float32
            np.testing.assert_array_equal(g, w)
    # the answer comes back the way the inputs came: echoed, it is the request's inputs
    answer = _echo(batch, spec)
    if form == "list":
        assert answer == [_named(spec, [a.tolist() for a in item], by_name, "out")
                          for item in items]
    else:
        sent_inputs = doc["inputs"]
        if by_name:
            assert answer == {f"out{k}": sent_inputs[f"in{k}"]
                              for k in range(len(spec.inputs))}
        else:
            assert answer == sent_inputs


def _named(spec, values, by_name, prefix="in"):
    return {f"{prefix}{k}": v for k, v in enumerate(values)} if by_name else values


@given(functions(), st.integers(0, 2**31))
def test_a_shape_that_fits_no_form_names_the_input_and_both_shapes(spec, seed):
    rng = np.random.default_rng(seed)
    t = spec.inputs[0]
    # the last size one larger (a (2,) for a (1,) would be two inputs stacked: (1, 2) then)
    wrong = (1, 2) if t.shape == (1,) else t.shape[:-1] + (t.shape[-1] + 1,)
    arrays = [rng.standard_normal(wrong).astype("float32").tolist()] + \
        [rng.standard_normal(s.shape).astype("float32").tolist() for s in spec.inputs[1:]]
    with pytest.raises(RequestError) as e:
        read_request(json.dumps({"inputs": arrays}).encode(), spec, MAX_BATCH)
    assert e.value.status == 400
    text = str(e.value)
    assert f"Input '{t.name}'" in text and shape_text(wrong) in text and \
        shape_text(t.shape) in text


def test_integer_and_bool_inputs_are_checked_for_their_dtype():
    spec = FunctionSpec("g", (TensorSpec("i", (2,), "int32"), TensorSpec("m", (2,), "bool")),
                        (TensorSpec("o", (2,), "int32"),))
    batch = read_request(b'{"inputs": [[1, -2], [true, false]]}', spec, 1)
    i, m = batch.items[0]
    assert i.dtype == np.int32 and i.tolist() == [1, -2]
    assert m.dtype == np.bool_ and m.tolist() == [True, False]
    for body, words in [(b'{"inputs": [[1.5, 2], [0, 1]]}', "fractions"),
                        (b'{"inputs": [[1, 3000000000], [0, 1]]}', "outside int32"),
                        (b'{"inputs": [[1, 2], [0, 2]]}', "true/false"),
                        (b'{"inputs": [[1, 2], [0, 1]], "extra": 1, "batch": []}', '"inputs"')]:
        with pytest.raises(RequestError) as e:
            read_request(body, spec, 1)
        assert words in str(e.value)

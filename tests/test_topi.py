"""engine.topi: every operator LegalizeOps uses, compiled and compared with numpy."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import engine
from engine import te, topi


def _run(inputs: list[np.ndarray], build_out, *, interpret: bool = False) -> np.ndarray:
    phs = [te.placeholder(a.shape, str(a.dtype), name=f"in{i}") for i, a in enumerate(inputs)]
    out = build_out(*phs)
    func = te.create_prim_func(phs + [out], name="f")
    res = np.zeros(out.shape, out.dtype)
    mod = engine.IRModule({"f": func})
    if interpret:
        engine.interpret(mod, "f", *inputs, res)
    else:
        engine.build(mod)["f"](*inputs, res)
    return res


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


@pytest.mark.parametrize("a_shape,b_shape", [((2, 3), (3,)), ((1, 128), (128,)), ((4, 1), (1, 5)),
                                             ((2, 3, 4), (3, 1)), ((5,), (5,))])
def test_add_broadcasts_like_numpy(a_shape, b_shape):
    a, b = _rand(*a_shape), _rand(*b_shape, seed=1)
    np.testing.assert_allclose(_run([a, b], topi.add), a + b, rtol=1e-6)


def test_add_refuses_shapes_that_do_not_broadcast():
    with pytest.raises(topi.TopiError, match=r"\(2, 3\) and \(4,\) cannot be broadcast"):
        topi.add(te.placeholder((2, 3), name="a"), te.placeholder((4,), name="b"))


@pytest.mark.parametrize("a_shape,b_shape", [((1, 784), (784, 128)), ((3, 4), (4, 5)),
                                             ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                                             ((4,), (4, 3)), ((3, 4), (4,))])
def test_matmul_matches_numpy(a_shape, b_shape):
    a, b = _rand(*a_shape), _rand(*b_shape, seed=1)
    np.testing.assert_allclose(_run([a, b], topi.matmul), a @ b, rtol=1e-4, atol=1e-4)


def test_matmul_names_the_disagreeing_dimension():
    with pytest.raises(topi.TopiError, match="3 columns, the second 4 rows"):
        topi.matmul(te.placeholder((2, 3), name="a"), te.placeholder((4, 5), name="b"))


def test_linear_is_the_course_program_and_computes_x_wt_plus_b():
    x, w, b = _rand(2, 7), _rand(5, 7, seed=1), _rand(5, seed=2)
    np.testing.assert_allclose(_run([x, w, b], topi.linear), x @ w.T + b, rtol=1e-5, atol=1e-5)
    X, W, B = (te.placeholder(s, name=n) for s, n in [((1, 784), "X"), ((128, 784), "W"),
                                                    ((128,), "B")])
    text = te.create_prim_func([X, W, B, topi.linear(X, W, B)], name="linear0").script()
    assert 'with T.block("Y")' in text and "Y[vi, vj] + X[vi, vk] * W[vj, vk]" in text
    assert "Z[vi, vj] = Y[vi, vj] + B[vj]" in text


def test_relu():
    x = _rand(3, 8)
    np.testing.assert_array_equal(_run([x], topi.relu), np.maximum(x, 0))


def _conv_ref(x, w, stride, pad, dil):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x.astype("float64"), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for ry in range(kh):
        for rx in range(kw):
            patch = xp[:, :, ry * dil: ry * dil + stride * (oh - 1) + 1: stride,
                       rx * dil: rx * dil + stride * (ow - 1) + 1: stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, ry, rx])
    return out


@pytest.mark.parametrize("stride,pad,dil", [(1, 0, 1), (1, 1, 1), (2, 1, 1), (1, 2, 2)])
def test_conv2d_matches_a_direct_convolution(stride, pad, dil):
    x, w = _rand(2, 3, 7, 6), _rand(4, 3, 3, 3, seed=1)
    got = _run([x, w], lambda a, b: topi.conv2d_nchw(a, b, stride, pad, dil))
    np.testing.assert_allclose(got, _conv_ref(x, w, stride, pad, dil), rtol=1e-4, atol=1e-4)


def test_conv2d_refuses_channel_mismatch_and_oversized_kernels():
    with pytest.raises(topi.TopiError, match="3 channels but the weight expects 2"):
        topi.conv2d_shape((1, 3, 8, 8), (4, 2, 3, 3))
    with pytest.raises(topi.TopiError, match="does not fit"):
        topi.conv2d_shape((1, 3, 2, 2), (4, 3, 5, 5))


@pytest.mark.parametrize("shape,axis", [((2, 10), -1), ((2, 10), 0), ((2, 3, 4), 1)])
def test_softmax(shape, axis):
    x = _rand(*shape) * 4
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    np.testing.assert_allclose(_run([x], lambda a: topi.softmax(a, axis)),
                               e / e.sum(axis=axis, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,axes", [((3, 4), None), ((2, 3, 4), (1, 2, 0)), ((2, 3, 4), (0, -1, 1))])
def test_permute_dims(shape, axes):
    x = _rand(*shape)
    np.testing.assert_array_equal(_run([x], lambda a: topi.permute_dims(a, axes)),
                                  np.transpose(x, axes))


def test_permute_dims_refuses_a_non_permutation():
    with pytest.raises(topi.TopiError, match="not a permutation"):
        topi.permute_dims(te.placeholder((2, 3), name="a"), (0, 0))


@settings(max_examples=15, deadline=None)
@given(st.sampled_from([(1, 784), (28, 28), (2, 3, 4), (24,), (6, 1, 4)]), st.data())
def test_reshape_matches_numpy(shape, data):
    size = int(np.prod(shape))
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    first = data.draw(st.sampled_from(divisors))
    new = data.draw(st.sampled_from([(first, -1), (-1,), (first, size // first), (1, -1, first)]))
    x = np.arange(size, dtype="float32").reshape(shape)
    np.testing.assert_array_equal(_run([x], lambda a: topi.reshape(a, new), interpret=True),
                                  x.reshape(new))


def test_reshape_refuses_a_shape_of_another_size():
    with pytest.raises(topi.TopiError, match="has 12 elements but"):
        topi.reshape_shape((3, 4), (5, 2))
    with pytest.raises(topi.TopiError, match="more than one -1"):
        topi.reshape_shape((3, 4), (-1, -1))


@pytest.mark.parametrize("op,fn", [("subtract", np.subtract), ("multiply", np.multiply),
                                   ("divide", np.divide)])
def test_other_binary_operators(op, fn):
    a, b = _rand(3, 4), _rand(4, seed=1) + 3
    np.testing.assert_allclose(_run([a, b], getattr(topi, op)), fn(a, b), rtol=1e-6)


def test_grouped_conv2d_matches_per_group_convolutions():
    x, w = _rand(1, 4, 6, 6), _rand(6, 2, 3, 3, seed=1)
    got = _run([x, w], lambda a, b: topi.conv2d_nchw(a, b, 1, 1, 1, groups=2))
    ref = np.concatenate([_conv_ref(x[:, :2], w[:3], 1, 1, 1), _conv_ref(x[:, 2:], w[3:], 1, 1, 1)],
                         axis=1)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)

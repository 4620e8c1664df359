"""The preset programs, built with :mod:`engine.te` (and :mod:`engine.ir` where te cannot
say it the course's way), each with a numpy reference and a cost model.

References compute in float64 and round the result to float32 once, so they are the
"true" answer that schedules and the backend are compared against (with a tolerance).
"""
from __future__ import annotations

import numpy as np

from engine import te
from engine.ir import expr as E
from engine.ir.buffer import Buffer, Range
from engine.ir.function import PrimFunc
from engine.ir.stmt import Block, BlockRealize, BufferStore, For, ForKind, IterType, IterVar

from .registry import Spec, register

F32 = "float32"
_MAX2 = 2048     # largest side of a square matrix
_MAXE = 4096     # largest side of an element-wise 2-D array


def _f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).astype(np.float32)


def _unit(lo=-1.0, hi=1.0):
    return (lo, hi)


# --------------------------------------------------------------------------- mm_relu
def _build_mm_relu(p):
    n = p["n"]
    A = te.placeholder((n, n), F32, name="A")
    B = te.placeholder((n, n), F32, name="B")
    k = te.reduce_axis((0, n), name="k")
    Y = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((n, n), lambda i, j: te.max(Y[i, j], 0), name="C")
    return te.create_prim_func([A, B, C], name="mm_relu")


def _ref_mm_relu(p):
    def f(a, b):
        return _f32(np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0.0))
    return f


register(Spec(
    name="mm_relu", title="Matmul + ReLU (the course's mm_relu)",
    description="The TensorIR chapter's running example: Y = A @ B as a reduction block, "
                "then C = max(Y, 0) — the program the course splits, reorders and fuses.",
    defaults={"n": 128}, limits={"n": (1, _MAX2)}, func_name="mm_relu", num_inputs=2,
    build=_build_mm_relu, reference=_ref_mm_relu,
    flops=lambda p: 2 * p["n"] ** 3 + p["n"] ** 2,
    bytes=lambda p: 4 * 3 * p["n"] ** 2,
    input_ranges=lambda p: [_unit(), _unit()],
))


# --------------------------------------------------------------------------- matmul
def _build_matmul(p):
    m, n, kk = p["m"], p["n"], p["k"]
    A = te.placeholder((m, kk), F32, name="A")
    B = te.placeholder((kk, n), F32, name="B")
    k = te.reduce_axis((0, kk), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C], name="matmul")


register(Spec(
    name="matmul", title="Matrix multiplication",
    description="C = A @ B: the classic loop nest for learning tiling, loop order and "
                "vectorisation (square by default; m and k follow n unless given).",
    defaults={"m": 128, "n": 128, "k": 128},
    limits={"m": (1, _MAX2), "n": (1, _MAX2), "k": (1, _MAX2)},
    follows={"m": "n", "k": "n"}, func_name="matmul", num_inputs=2,
    build=_build_matmul,
    reference=lambda p: lambda a, b: _f32(a.astype(np.float64) @ b.astype(np.float64)),
    flops=lambda p: 2 * p["m"] * p["n"] * p["k"],
    bytes=lambda p: 4 * (p["m"] * p["k"] + p["k"] * p["n"] + p["m"] * p["n"]),
    input_ranges=lambda p: [_unit(), _unit()],
))


# --------------------------------------------------------------------------- batch_matmul
def _build_batch_matmul(p):
    bs, m, n, kk = p["batch"], p["m"], p["n"], p["k"]
    A = te.placeholder((bs, m, kk), F32, name="A")
    B = te.placeholder((bs, kk, n), F32, name="B")
    k = te.reduce_axis((0, kk), name="k")
    C = te.compute((bs, m, n), lambda b, i, j: te.sum(A[b, i, k] * B[b, k, j], axis=k),
                   name="C")
    return te.create_prim_func([A, B, C], name="batch_matmul")


register(Spec(
    name="batch_matmul", title="Batched matrix multiplication",
    description="C[b] = A[b] @ B[b] for every batch b: a matmul with an extra outer "
                "spatial loop to parallelise over.",
    defaults={"batch": 4, "m": 64, "n": 64, "k": 64},
    limits={"batch": (1, 64), "m": (1, 1024), "n": (1, 1024), "k": (1, 1024)},
    follows={"m": "n", "k": "n"}, func_name="batch_matmul", num_inputs=2,
    build=_build_batch_matmul,
    reference=lambda p: lambda a, b: _f32(np.matmul(a.astype(np.float64),
                                                    b.astype(np.float64))),
    flops=lambda p: 2 * p["batch"] * p["m"] * p["n"] * p["k"],
    bytes=lambda p: 4 * p["batch"] * (p["m"] * p["k"] + p["k"] * p["n"] + p["m"] * p["n"]),
    input_ranges=lambda p: [_unit(), _unit()],
))


# --------------------------------------------------------------------------- conv2d family
def _out_size(p) -> int:
    return (p["size"] + 2 * p["pad"] - p["kernel"]) // p["stride"] + 1


def _conv_check(p) -> str | None:
    if p["kernel"] > p["size"] + 2 * p["pad"]:
        return (f"kernel {p['kernel']} is larger than the padded input "
                f"({p['size']} + 2*{p['pad']} = {p['size'] + 2 * p['pad']}); use a smaller "
                "kernel or more padding")
    return None


def _pad_stage(data, channels: int, p):
    """The zero-padding stage ``pad`` (a plain copy when pad = 0)."""
    N, H, pad = p["batch"], p["size"], p["pad"]
    shape = (N, channels, H + 2 * pad, H + 2 * pad)
    if pad == 0:
        return te.compute(shape, lambda n, c, h, w: data[n, c, h, w], name="pad")

    def f(n, c, h, w):
        inside = te.all(h >= pad, h < H + pad, w >= pad, w < H + pad)
        return te.if_then_else(inside, data[n, c, h - pad, w - pad], 0.0)
    return te.compute(shape, f, name="pad")


def _scaled(v, s: int):
    return v * s if s != 1 else v


def _conv_stages(p):
    N, CI, CO, H, K = p["batch"], p["in_channels"], p["out_channels"], p["size"], p["kernel"]
    s = p["stride"]
    O = _out_size(p)
    data = te.placeholder((N, CI, H, H), F32, name="data")
    weight = te.placeholder((CO, CI, K, K), F32, name="weight")
    pad = _pad_stage(data, CI, p)
    ci = te.reduce_axis((0, CI), name="ci")
    kh = te.reduce_axis((0, K), name="kh")
    kw = te.reduce_axis((0, K), name="kw")
    conv = te.compute(
        (N, CO, O, O),
        lambda n, co, oh, ow: te.sum(
            pad[n, ci, _scaled(oh, s) + kh, _scaled(ow, s) + kw] * weight[co, ci, kh, kw],
            axis=[ci, kh, kw]),
        name="conv")
    return data, weight, conv


def _conv_windows(data: np.ndarray, p, dtype=np.float64):
    """For each kernel tap ``(kh, kw)``: the window of the zero-padded input (in
    ``dtype``) that the tap multiplies at every output position, as ``(kh, kw, window)``."""
    K, s, pad = p["kernel"], p["stride"], p["pad"]
    O = _out_size(p)
    x = np.pad(data.astype(dtype, copy=False), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    for kh in range(K):
        for kw in range(K):
            yield kh, kw, x[:, :, kh:kh + s * (O - 1) + 1:s, kw:kw + s * (O - 1) + 1:s]


def _ref_conv(p, relu: bool):
    O = _out_size(p)

    def f(data, weight):
        w = weight.astype(np.float64)
        out = np.zeros((data.shape[0], w.shape[0], O, O))
        for kh, kw, patch in _conv_windows(data, p):
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, kh, kw])
        if relu:
            out = np.maximum(out, 0.0)
        return _f32(out)
    return f


def _conv_flops(p) -> int:
    O = _out_size(p)
    return 2 * p["batch"] * p["out_channels"] * O * O * p["in_channels"] * p["kernel"] ** 2


def _conv_bytes(p) -> int:
    O = _out_size(p)
    return 4 * (p["batch"] * p["in_channels"] * p["size"] ** 2
                + p["out_channels"] * p["in_channels"] * p["kernel"] ** 2
                + p["batch"] * p["out_channels"] * O * O)


_CONV_DEFAULTS = {"batch": 1, "in_channels": 16, "out_channels": 16, "size": 32, "kernel": 3,
                  "pad": 1, "stride": 1}
_CONV_LIMITS = {"batch": (1, 16), "in_channels": (1, 512), "out_channels": (1, 512),
                "size": (1, 512), "kernel": (1, 11), "pad": (0, 5), "stride": (1, 4)}


def _build_conv2d(p):
    data, weight, conv = _conv_stages(p)
    return te.create_prim_func([data, weight, conv], name="conv2d")


register(Spec(
    name="conv2d", title="2-D convolution (NCHW)",
    description="A padding stage then a 7-deep convolution nest: the place to practise "
                "compute_inline of the padding and tiling of output rows and channels.",
    defaults=dict(_CONV_DEFAULTS), limits=dict(_CONV_LIMITS), func_name="conv2d",
    num_inputs=2, build=_build_conv2d, reference=lambda p: _ref_conv(p, relu=False),
    flops=_conv_flops, bytes=_conv_bytes, check=_conv_check,
    input_ranges=lambda p: [_unit(), _unit()],
))


def _build_conv2d_relu(p):
    data, weight, conv = _conv_stages(p)
    relu = te.compute(conv.shape, lambda n, c, h, w: te.max(conv[n, c, h, w], 0), name="relu")
    return te.create_prim_func([data, weight, relu], name="conv2d_relu")


register(Spec(
    name="conv2d_relu", title="Convolution + ReLU",
    description="Padding, convolution and an element-wise ReLU: three stages to fuse, "
                "e.g. by moving the ReLU into the convolution's loops (reverse_compute_at).",
    defaults=dict(_CONV_DEFAULTS), limits=dict(_CONV_LIMITS), func_name="conv2d_relu",
    num_inputs=2, build=_build_conv2d_relu, reference=lambda p: _ref_conv(p, relu=True),
    flops=lambda p: _conv_flops(p) + p["batch"] * p["out_channels"] * _out_size(p) ** 2,
    bytes=_conv_bytes, check=_conv_check,
    input_ranges=lambda p: [_unit(), _unit()],
))


def _build_depthwise(p):
    N, C, H, K, s = p["batch"], p["channels"], p["size"], p["kernel"], p["stride"]
    O = _out_size(p)
    data = te.placeholder((N, C, H, H), F32, name="data")
    weight = te.placeholder((C, K, K), F32, name="weight")
    pad = _pad_stage(data, C, p)
    kh = te.reduce_axis((0, K), name="kh")
    kw = te.reduce_axis((0, K), name="kw")
    out = te.compute(
        (N, C, O, O),
        lambda n, c, oh, ow: te.sum(
            pad[n, c, _scaled(oh, s) + kh, _scaled(ow, s) + kw] * weight[c, kh, kw],
            axis=[kh, kw]),
        name="depthwise")
    return te.create_prim_func([data, weight, out], name="depthwise_conv2d")


def _ref_depthwise(p):
    O = _out_size(p)

    def f(data, weight):
        w = weight.astype(np.float64)
        out = np.zeros((data.shape[0], data.shape[1], O, O))
        for kh, kw, patch in _conv_windows(data, p):
            out += patch * w[None, :, kh, kw, None, None]
        return _f32(out)
    return f


register(Spec(
    name="depthwise_conv2d", title="Depthwise 2-D convolution",
    description="Each channel convolved with its own small filter: little arithmetic per "
                "byte, so memory layout and loop order dominate.",
    defaults={"batch": 1, "channels": 16, "size": 32, "kernel": 3, "pad": 1, "stride": 1},
    limits={"batch": (1, 16), "channels": (1, 1024), "size": (1, 512), "kernel": (1, 11),
            "pad": (0, 5), "stride": (1, 4)},
    func_name="depthwise_conv2d", num_inputs=2, build=_build_depthwise,
    reference=_ref_depthwise,
    flops=lambda p: 2 * p["batch"] * p["channels"] * _out_size(p) ** 2 * p["kernel"] ** 2,
    bytes=lambda p: 4 * (p["batch"] * p["channels"] * p["size"] ** 2
                         + p["channels"] * p["kernel"] ** 2
                         + p["batch"] * p["channels"] * _out_size(p) ** 2),
    check=_conv_check, input_ranges=lambda p: [_unit(), _unit()],
))


# --------------------------------------------------------------------------- vector_add
def _build_vector_add(p):
    n = p["n"]
    A = te.placeholder((n,), F32, name="A")
    B = te.placeholder((n,), F32, name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    return te.create_prim_func([A, B, C], name="vector_add")


register(Spec(
    name="vector_add", title="Vector add (course GPU chapter)",
    description="C[i] = A[i] + B[i]: the GPU chapter's first program — split the loop and "
                "bind its parts to blockIdx.x and threadIdx.x.",
    defaults={"n": 1024}, limits={"n": (1, 1 << 24)}, func_name="vector_add", num_inputs=2,
    build=_build_vector_add,
    reference=lambda p: lambda a, b: _f32(a.astype(np.float64) + b),
    flops=lambda p: p["n"], bytes=lambda p: 4 * 3 * p["n"],
    input_ranges=lambda p: [_unit(), _unit()],
))


# --------------------------------------------------------------------------- window_sum
def _build_window_sum(p):
    """Hand-built to match the course's GPU chapter exactly (block "C" writing B)."""
    n = p["n"]
    A = Buffer("A", (n + 2,), F32)
    B = Buffer("B", (n,), F32)
    i = E.Var("i", "int32")
    vi = E.Var("vi", "int32")
    iv = IterVar(vi, Range(E.IntImm("int32", 0), E.IntImm("int32", n)), IterType.SPATIAL)
    body = BufferStore(B, A[vi] + A[vi + 1] + A[vi + 2], (vi,))
    reads, writes = te.infer_block_regions(body, (iv,))
    block = Block(iter_vars=(iv,), reads=reads, writes=writes, name_hint="C", body=body)
    loop = For(i, E.IntImm("int32", 0), E.IntImm("int32", n), ForKind.SERIAL,
               BlockRealize((i,), E.IntImm("bool", 1), block))
    root = Block(iter_vars=(), reads=(), writes=(), name_hint="root", body=loop)
    return PrimFunc("window_sum", (A, B), BlockRealize((), E.IntImm("bool", 1), root),
                    attrs=(("global_symbol", "window_sum"), ("tir.noalias", True)))


def _ref_window_sum(p):
    def f(a):
        a = a.astype(np.float64)
        return _f32(a[:-2] + a[1:-1] + a[2:])
    return f


register(Spec(
    name="window_sum", title="1-D window sum (course GPU chapter)",
    description="B[i] = A[i] + A[i+1] + A[i+2]: neighbouring outputs share inputs, the "
                "course's example for cooperative fetching into a cache buffer.",
    defaults={"n": 1024}, limits={"n": (1, 1 << 22)}, func_name="window_sum", num_inputs=1,
    build=_build_window_sum, reference=_ref_window_sum,
    flops=lambda p: 2 * p["n"], bytes=lambda p: 4 * (2 * p["n"] + 2),
    input_ranges=lambda p: [_unit()],
))


# --------------------------------------------------------------------------- softmax
def _build_softmax(p):
    m, n = p["m"], p["n"]
    A = te.placeholder((m, n), F32, name="A")
    k = te.reduce_axis((0, n), name="k")
    maxelem = te.compute((m,), lambda i: te.max(A[i, k], axis=k), name="T_softmax_maxelem")
    exp = te.compute((m, n), lambda i, j: te.exp(A[i, j] - maxelem[i]), name="T_softmax_exp")
    k2 = te.reduce_axis((0, n), name="k")
    expsum = te.compute((m,), lambda i: te.sum(exp[i, k2], axis=k2), name="T_softmax_expsum")
    norm = te.compute((m, n), lambda i, j: exp[i, j] / expsum[i], name="T_softmax_norm")
    return te.create_prim_func([A, norm], name="softmax")


def _ref_softmax(p):
    def f(a):
        a = a.astype(np.float64)
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return _f32(e / e.sum(axis=1, keepdims=True))
    return f


register(Spec(
    name="softmax", title="Row-wise softmax",
    description="Four stages per row — max, exp, sum, divide — with two reductions: "
                "a lesson in fusing stages with compute_at to keep a row in cache.",
    defaults={"m": 128, "n": 128}, limits={"m": (1, _MAXE), "n": (1, _MAXE)},
    follows={"m": "n"}, func_name="softmax", num_inputs=1,
    build=_build_softmax, reference=_ref_softmax,
    flops=lambda p: 5 * p["m"] * p["n"], bytes=lambda p: 4 * 2 * p["m"] * p["n"],
    input_ranges=lambda p: [(-4.0, 4.0)],
))


# --------------------------------------------------------------------------- layernorm
_EPS = 1e-5


def _build_layernorm(p):
    m, n = p["m"], p["n"]
    A = te.placeholder((m, n), F32, name="A")
    gamma = te.placeholder((n,), F32, name="gamma")
    beta = te.placeholder((n,), F32, name="beta")
    nf = te.const(float(n), F32)
    k = te.reduce_axis((0, n), name="k")
    row_sum = te.compute((m,), lambda i: te.sum(A[i, k], axis=k), name="row_sum")
    k2 = te.reduce_axis((0, n), name="k")

    def sqdev(i):
        d = A[i, k2] - row_sum[i] / nf
        return te.sum(d * d, axis=k2)
    row_sqdev = te.compute((m,), sqdev, name="row_sqdev")
    eps = te.const(_EPS, F32)
    norm = te.compute(
        (m, n),
        lambda i, j: (A[i, j] - row_sum[i] / nf) / te.sqrt(row_sqdev[i] / nf + eps)
        * gamma[j] + beta[j],
        name="norm")
    return te.create_prim_func([A, gamma, beta, norm], name="layernorm")


def _ref_layernorm(p):
    def f(a, gamma, beta):
        a = a.astype(np.float64)
        mean = a.mean(axis=1, keepdims=True)
        var = ((a - mean) ** 2).mean(axis=1, keepdims=True)
        return _f32((a - mean) / np.sqrt(var + _EPS) * gamma.astype(np.float64)
                    + beta.astype(np.float64))
    return f


register(Spec(
    name="layernorm", title="Layer normalisation",
    description="Normalise each row to mean 0 and variance 1, then scale and shift: two "
                "row reductions (sum, squared deviation) feeding an element-wise stage.",
    defaults={"m": 128, "n": 128}, limits={"m": (1, _MAXE), "n": (1, _MAXE)},
    follows={"m": "n"}, func_name="layernorm", num_inputs=3,
    build=_build_layernorm, reference=_ref_layernorm,
    flops=lambda p: 12 * p["m"] * p["n"],
    bytes=lambda p: 4 * (2 * p["m"] * p["n"] + 2 * p["n"]),
    input_ranges=lambda p: [_unit(), (0.5, 1.5), (-0.5, 0.5)],
))


# --------------------------------------------------------------------------- element-wise
def _build_transpose(p):
    m, n = p["m"], p["n"]
    A = te.placeholder((m, n), F32, name="A")
    B = te.compute((n, m), lambda i, j: A[j, i], name="B")
    return te.create_prim_func([A, B], name="transpose")


register(Spec(
    name="transpose", title="Matrix transpose",
    description="B[i, j] = A[j, i]: no arithmetic at all, so the only cost is memory "
                "traffic — one of the two arrays is always walked with a large stride.",
    defaults={"m": 256, "n": 256}, limits={"m": (1, _MAXE), "n": (1, _MAXE)},
    follows={"m": "n"}, func_name="transpose", num_inputs=1,
    build=_build_transpose, reference=lambda p: lambda a: np.ascontiguousarray(a.T),
    flops=lambda p: 0, bytes=lambda p: 4 * 2 * p["m"] * p["n"],
    input_ranges=lambda p: [_unit()],
))


def _build_add(p):
    m, n = p["m"], p["n"]
    A = te.placeholder((m, n), F32, name="A")
    B = te.placeholder((m, n), F32, name="B")
    C = te.compute((m, n), lambda i, j: A[i, j] + B[i, j], name="C")
    return te.create_prim_func([A, B, C], name="add")


register(Spec(
    name="add", title="Element-wise add",
    description="C = A + B element by element: the simplest loop nest, for first steps "
                "with split, parallel and vectorize.",
    defaults={"m": 256, "n": 256}, limits={"m": (1, _MAXE), "n": (1, _MAXE)},
    follows={"m": "n"}, func_name="add", num_inputs=2, build=_build_add,
    reference=lambda p: lambda a, b: _f32(a.astype(np.float64) + b),
    flops=lambda p: p["m"] * p["n"], bytes=lambda p: 4 * 3 * p["m"] * p["n"],
    input_ranges=lambda p: [_unit(), _unit()],
))


def _build_relu(p):
    m, n = p["m"], p["n"]
    A = te.placeholder((m, n), F32, name="A")
    B = te.compute((m, n), lambda i, j: te.max(A[i, j], 0), name="B")
    return te.create_prim_func([A, B], name="relu")


register(Spec(
    name="relu", title="ReLU",
    description="B = max(A, 0) element by element (the course's relu0): a memory-bound "
                "loop nest to vectorise.",
    defaults={"m": 256, "n": 256}, limits={"m": (1, _MAXE), "n": (1, _MAXE)},
    follows={"m": "n"}, func_name="relu", num_inputs=1, build=_build_relu,
    reference=lambda p: lambda a: np.maximum(a, np.float32(0)),
    flops=lambda p: p["m"] * p["n"], bytes=lambda p: 4 * 2 * p["m"] * p["n"],
    input_ranges=lambda p: [_unit()],
))


# --------------------------------------------------------------------------- mlp
def _build_mlp(p):
    b, fin, hid, fout = p["batch"], p["in_features"], p["hidden"], p["out_features"]
    X = te.placeholder((b, fin), F32, name="X")
    W0 = te.placeholder((hid, fin), F32, name="W0")
    B0 = te.placeholder((hid,), F32, name="B0")
    W1 = te.placeholder((fout, hid), F32, name="W1")
    B1 = te.placeholder((fout,), F32, name="B1")
    k = te.reduce_axis((0, fin), name="k")
    lin0 = te.compute((b, hid), lambda i, j: te.sum(X[i, k] * W0[j, k], axis=k, init=B0[j]),
                      name="linear0")
    relu0 = te.compute((b, hid), lambda i, j: te.max(lin0[i, j], 0), name="relu0")
    k1 = te.reduce_axis((0, hid), name="k")
    lin1 = te.compute((b, fout),
                      lambda i, j: te.sum(relu0[i, k1] * W1[j, k1], axis=k1, init=B1[j]),
                      name="linear1")
    return te.create_prim_func([X, W0, B0, W1, B1, lin1], name="mlp")


def _ref_mlp(p):
    def f(x, w0, b0, w1, b1):
        h = np.maximum(x.astype(np.float64) @ w0.astype(np.float64).T + b0, 0.0)
        return _f32(h @ w1.astype(np.float64).T + b1)
    return f


register(Spec(
    name="mlp", title="Two-layer MLP (the course's model)",
    description="linear0 -> relu0 -> linear1 of the course's end-to-end chapter in one "
                "function (biases are the reductions' initial values), for fusion lessons.",
    defaults={"batch": 1, "in_features": 784, "hidden": 128, "out_features": 10},
    limits={"batch": (1, 256), "in_features": (1, 4096), "hidden": (1, 4096),
            "out_features": (1, 4096)},
    func_name="mlp", num_inputs=5, build=_build_mlp, reference=_ref_mlp,
    flops=lambda p: (2 * p["batch"] * p["in_features"] * p["hidden"]
                     + 2 * p["batch"] * p["hidden"]
                     + 2 * p["batch"] * p["hidden"] * p["out_features"]
                     + p["batch"] * p["out_features"]),
    bytes=lambda p: 4 * (p["batch"] * p["in_features"] + p["hidden"] * p["in_features"]
                         + p["hidden"] + p["out_features"] * p["hidden"] + p["out_features"]
                         + p["batch"] * p["out_features"]),
    input_ranges=lambda p: [(0.0, 1.0), (-0.1, 0.1), (-0.1, 0.1), (-0.1, 0.1), (-0.1, 0.1)],
))


# --------------------------------------------------------------------------- sum
def _build_sum(p):
    m, n = p["m"], p["n"]
    A = te.placeholder((m, n), F32, name="A")
    k = te.reduce_axis((0, n), name="k")
    B = te.compute((m,), lambda i: te.sum(A[i, k], axis=k), name="B")
    return te.create_prim_func([A, B], name="sum")


register(Spec(
    name="sum", title="Row sum",
    description="B[i] = sum over k of A[i, k]: a plain reduction, for learning rfactor "
                "and how to parallelise or vectorise along a reduction axis.",
    defaults={"m": 128, "n": 128}, limits={"m": (1, _MAXE), "n": (1, 1 << 20)},
    func_name="sum", num_inputs=1, build=_build_sum,
    reference=lambda p: lambda a: _f32(a.astype(np.float64).sum(axis=1)),
    flops=lambda p: p["m"] * p["n"], bytes=lambda p: 4 * (p["m"] * p["n"] + p["m"]),
    input_ranges=lambda p: [_unit()],
))

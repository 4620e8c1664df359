"""Neural-network operators: ``relu``, ``dense``, ``conv2d_nchw`` (with its padding stage),
``softmax``."""
from __future__ import annotations

from typing import Sequence

from engine import te

from .broadcast import TopiError, add, compute_nd
from .linalg import matmul as _matmul
from .transform import permute_dims

__all__ = ["relu", "dense", "matmul", "conv2d_shape", "conv2d_nchw", "softmax"]


def relu(x: te.Tensor, name: str = "compute") -> te.Tensor:
    """``max(x, 0)`` element-wise (the course's ``relu0``)::

        for i0, i1 in T.grid(1, 128):
            with T.block("compute"):
                v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
                compute[v_i0, v_i1] = T.max(X[v_i0, v_i1], T.float32(0))
    """
    return compute_nd(x.shape, lambda *i: te.max(x[i], te.const(0, x.dtype)), name, "i")


def dense(data: te.Tensor, weight: te.Tensor, bias: te.Tensor | None = None,
          out_dtype: str | None = None) -> te.Tensor:
    """``data @ weight.T`` (+ ``bias``): TVM's ``topi.nn.dense``, ``weight`` of shape
    ``(out_features, in_features)`` as PyTorch keeps it (the course's ``map_nn_linear``)::

        for i0, i1, k in T.grid(1, 128, 784):
            with T.block("T_matmul_NT"):
                v_i0, v_i1, v_k = T.axis.remap("SSR", [i0, i1, k])
                with T.init():
                    T_matmul_NT[v_i0, v_i1] = T.float32(0)
                T_matmul_NT[v_i0, v_i1] = T_matmul_NT[v_i0, v_i1] + x[v_i0, v_k] * B[v_i1, v_k]
    """
    if data.ndim != 2 or weight.ndim != 2:
        raise TopiError(f"dense: data and weight must be matrices, got shapes {data.shape} "
                        f"and {weight.shape}")
    (n, kin), (m, kw) = data.shape, weight.shape
    if kin != kw:
        raise TopiError(f"dense: data {data.shape} has {kin} columns but weight "
                        f"{weight.shape} has {kw}; weight is (out_features, in_features)")
    dtype = out_dtype or data.dtype

    def cast(e, t):
        return e if t.dtype == dtype else te.cast(e, dtype)

    k = te.reduce_axis((0, kin), name="k")
    out = compute_nd((n, m), lambda i, j: te.sum(cast(data[i, k], data) * cast(weight[j, k],
                                                                               weight),
                                                 axis=k), "T_matmul_NT", "i")
    if bias is None:
        return out
    if tuple(bias.shape) != (m,):
        raise TopiError(f"dense: bias must have shape ({m},), got {bias.shape}")
    return compute_nd((n, m), lambda i, j: out[i, j] + cast(bias[j], bias), "T_add", "ax")


def _pair(v, what: str, n: int = 2) -> tuple[int, ...]:
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * n
    if (isinstance(v, (tuple, list)) and len(v) == n
            and all(isinstance(x, int) and not isinstance(x, bool) for x in v)):
        return tuple(v)
    raise TopiError(f"conv2d: {what} must be an integer or {n} integers, got {v!r}")


def _padding(padding) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from 1, 2 or 4 integers (TVM's order)."""
    if isinstance(padding, int) and not isinstance(padding, bool):
        return (padding,) * 4
    if isinstance(padding, (tuple, list)) and len(padding) == 2:
        t, l = _pair(tuple(padding), "padding")
        return (t, l, t, l)
    return _pair(padding, "padding (top, left, bottom, right)", 4)


def conv2d_shape(data: Sequence[int], weight: Sequence[int], strides=1, padding=0,
                 dilation=1, groups: int = 1) -> tuple[int, int, int, int]:
    """The output shape of an NCHW/OIHW convolution, or a :class:`TopiError` naming the
    mismatch."""
    if len(data) != 4 or len(weight) != 4:
        raise TopiError(f"conv2d: data must be NCHW and weight OIHW (4 dimensions each), got "
                        f"shapes {tuple(data)} and {tuple(weight)}")
    n, c, h, w = data
    o, i, kh, kw = weight
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise TopiError(f"conv2d: groups must be a positive integer, got {groups!r}")
    if c % groups or o % groups or i * groups != c:
        raise TopiError(f"conv2d: data has {c} channels but the weight expects {i}"
                        + (f" per group of {groups}" if groups > 1 else "")
                        + (f"; with groups={groups} both channel counts must divide by it"
                           if groups > 1 else ""))
    sh, sw = _pair(strides, "strides")
    dh, dw = _pair(dilation, "dilation")
    pt, pl, pb, pr = _padding(padding)
    if min(sh, sw, dh, dw) < 1 or min(pt, pl, pb, pr) < 0:
        raise TopiError("conv2d: strides and dilation must be at least 1 and padding at least 0")
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise TopiError(f"conv2d: a {kh}x{kw} kernel does not fit in the padded {h}x{w} input")
    return (n, o, oh, ow)


def conv2d_nchw(data: te.Tensor, weight: te.Tensor, strides=1, padding=0,
                dilation=1, groups: int = 1) -> te.Tensor:
    """2-D convolution, data NCHW, weight OIHW (``R.nn.conv2d``, ONNX ``Conv``).  With
    padding a ``pad_temp`` stage first copies the input into a zero-bordered buffer::

        pad_temp[i0, i1, i2, i3] = T.if_then_else(1 <= i2 and i2 < 29 and ..., A[i0, i1, i2 - 1, i3 - 1], T.float32(0))
        conv2d_nchw[nn, ff, yy, xx] += pad_temp[nn, rc, yy * 1 + ry, xx * 1 + rx] * W[ff, rc, ry, rx]
    """
    if data.dtype != weight.dtype:
        raise TopiError(f"conv2d: data is {data.dtype} but the weight is {weight.dtype}")
    shape = conv2d_shape(data.shape, weight.shape, strides, padding, dilation, groups)
    sh, sw = _pair(strides, "strides")
    dh, dw = _pair(dilation, "dilation")
    pt, pl, pb, pr = _padding(padding)
    _, c, h, w = data.shape
    o, cg, kh, kw = weight.shape
    src = data
    if pt or pl or pb or pr:
        def pad(i0, i1, i2, i3):
            inside = te.all(i2 >= pt, i2 < h + pt, i3 >= pl, i3 < w + pl)
            return te.if_then_else(inside, data[i0, i1, i2 - pt, i3 - pl],
                                   te.const(0, data.dtype))
        src = te.compute((data.shape[0], c, h + pt + pb, w + pl + pr), pad, name="pad_temp")
    rc = te.reduce_axis((0, cg), name="rc")
    per_group = o // groups
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")

    def conv(nn, ff, yy, xx):
        chan = rc if groups == 1 else ff // per_group * cg + rc
        return te.sum(src[nn, chan, yy * sh + ry * dh, xx * sw + rx * dw]
                      * weight[ff, rc, ry, rx], axis=[rc, ry, rx])

    return te.compute(shape, conv, name="conv2d_nchw")


def softmax(x: te.Tensor, axis: int = -1) -> te.Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``, in TVM's four stages
    ``T_softmax_maxelem``, ``T_softmax_exp``, ``T_softmax_expsum``, ``T_softmax_norm``."""
    nd = x.ndim
    if not isinstance(axis, int) or isinstance(axis, bool) or not -nd <= axis < nd:
        raise TopiError(f"softmax: axis {axis!r} is out of range for a tensor of {nd} "
                        "dimension(s)")
    axis %= nd
    red_shape = x.shape[:axis] + x.shape[axis + 1:]
    km = te.reduce_axis((0, x.shape[axis]), name="k")

    def with_k(idx: tuple, k) -> tuple:
        return tuple(idx[:axis]) + (k,) + tuple(idx[axis:])

    def drop(idx: tuple) -> tuple:
        return tuple(idx[:axis]) + tuple(idx[axis + 1:])

    if red_shape:
        maxelem = compute_nd(red_shape, lambda *i: te.max(x[with_k(i, km)], axis=km),
                             "T_softmax_maxelem", "i")
    else:
        raise TopiError("softmax: a 1-D tensor has nothing left after the reduction; "
                        "reshape it to (1, n)")
    exp = compute_nd(x.shape, lambda *i: te.exp(x[i] - maxelem[drop(i)]), "T_softmax_exp", "i")
    ks = te.reduce_axis((0, x.shape[axis]), name="k")
    expsum = compute_nd(red_shape, lambda *i: te.sum(exp[with_k(i, ks)], axis=ks),
                        "T_softmax_expsum", "i")
    return compute_nd(x.shape, lambda *i: exp[i] / expsum[drop(i)], "T_softmax_norm", "i")


def matmul(tensor_a: te.Tensor, tensor_b: te.Tensor, bias: te.Tensor | None = None,
           out_dtype: str | None = None, transpose_a: bool = False,
           transpose_b: bool = False) -> te.Tensor:
    """TVM's ``topi.nn.matmul``: ``a @ b`` (each operand's last two dimensions transposed
    first when asked: an extra ``T_transpose`` stage here), plus ``bias`` when given; the
    product's block is ``T_matmul_NN`` (``NT``, ``TN``, ``TT`` with transposes), as TVM
    names it."""
    if out_dtype not in (None, tensor_a.dtype):
        raise TopiError(f"nn.matmul: out_dtype={out_dtype!r} differs from the operands' "
                        f"{tensor_a.dtype}; cast the operands first")

    def swap(t: te.Tensor) -> te.Tensor:
        if t.ndim < 2:
            raise TopiError(f"nn.matmul: a transposed operand needs two dimensions, got "
                            f"shape {t.shape}")
        axes = list(range(t.ndim))
        axes[-2], axes[-1] = axes[-1], axes[-2]
        return permute_dims(t, axes)

    a = swap(tensor_a) if transpose_a else tensor_a
    b = swap(tensor_b) if transpose_b else tensor_b
    name = "T_matmul_" + ("T" if transpose_a else "N") + ("T" if transpose_b else "N")
    out = _matmul(a, b, name=name)
    return add(out, bias) if bias is not None else out

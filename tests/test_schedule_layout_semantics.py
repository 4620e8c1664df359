"""transform_layout: semantics first (a differential property test).

Random small programs (an element-wise chain, a row reduction into an intermediate, a
matmul reducing into its output parameter), sometimes split or computed-at first, get one
random ``transform_layout`` of one of their buffers — an intermediate, an input parameter
or an output parameter — with a random index map: a permutation, a split ``i // c, i % c``
(``c`` dividing the axis or not: padding), a fusion ``i * n + j``, a split followed by a
permutation, and maps that must be refused (two elements on one place, a negative index,
holes ``2 * i``, an offset ``i + 1``); with a random ``pad_value`` (none, a number of the
buffer's type, of the wrong type, a lambda over the new indices) and now and then TVM's
``assume_injective_transform``.

An accepted transform must keep the program's meaning: the interpreter and the compiled
code on the new program equal the interpreter on the original, a transformed parameter
compared after mapping the original's array through the same index map (its padding, in
an output the program writes, holds the pad value; elsewhere it is left as it was). A
refused one is a ScheduleError with a sentence, and leaves the schedule as it was — never
another exception.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import event, given
from hypothesis import strategies as st

import engine
from engine.schedule import ScheduleError
from engine.schedule.primitives.index_map_check import _np_eval
from engine.schedule.primitives.layout import parse_index_map
from semantics import small_integer_args

SENTINEL = {"float32": np.float32(1234.5), "int32": np.int32(-77)}


# ---------------------------------------------------------------------------
# the programs (this project's own)
# ---------------------------------------------------------------------------
def _loops(shape, names):
    if len(shape) == 1:
        return f"for {names[0]} in T.serial({shape[0]}):"
    return f"for {', '.join(names)} in T.grid({', '.join(map(str, shape))}):"


def _elementwise(shape, dtype):
    n = len(shape)
    loops = [f"i{d}" for d in range(n)]
    axes = [f"v{d}" for d in range(n)]
    idx = ", ".join(axes)
    kinds = "S" * n
    two = "T.float32(2)" if dtype == "float32" else "2"
    return f'''
@T.prim_func
def main(A: T.Buffer({tuple(shape)}, "{dtype}"), C: T.Buffer({tuple(shape)}, "{dtype}")):
    B = T.alloc_buffer({tuple(shape)}, "{dtype}")
    {_loops(shape, loops)}
        with T.block("B"):
            {idx} = T.axis.remap("{kinds}", [{", ".join(loops)}])
            B[{idx}] = A[{idx}] * {two}
    {_loops(shape, loops)}
        with T.block("C"):
            {idx} = T.axis.remap("{kinds}", [{", ".join(loops)}])
            C[{idx}] = B[{idx}] + A[{idx}]
'''


def _row_sum(m, k, dtype):
    zero = "T.float32(0)" if dtype == "float32" else "0"
    two = "T.float32(2)" if dtype == "float32" else "2"
    return f'''
@T.prim_func
def main(A: T.Buffer(({m}, {k}), "{dtype}"), C: T.Buffer(({m},), "{dtype}")):
    B = T.alloc_buffer(({m},), "{dtype}")
    for i, r in T.grid({m}, {k}):
        with T.block("B"):
            vi, vr = T.axis.remap("SR", [i, r])
            with T.init():
                B[vi] = {zero}
            B[vi] = B[vi] + A[vi, vr]
    for i in T.serial({m}):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi] * {two}
'''


def _matmul(m, n, k, dtype):
    zero = "T.float32(0)" if dtype == "float32" else "0"
    return f'''
@T.prim_func
def main(A: T.Buffer(({m}, {k}), "{dtype}"), W: T.Buffer(({k}, {n}), "{dtype}"),
         C: T.Buffer(({m}, {n}), "{dtype}")):
    for i, j, r in T.grid({m}, {n}, {k}):
        with T.block("C"):
            vi, vj, vr = T.axis.remap("SSR", [i, j, r])
            with T.init():
                C[vi, vj] = {zero}
            C[vi, vj] = C[vi, vj] + A[vi, vr] * W[vr, vj]
'''


@st.composite
def programs(draw):
    """(TVMScript text, {buffer name: (writer block, shape)}, dtype)."""
    dtype = draw(st.sampled_from(["float32", "int32"]))
    size = st.integers(2, 6)
    kind = draw(st.sampled_from(["elementwise", "row_sum", "matmul"]))
    if kind == "elementwise":
        shape = tuple(draw(st.lists(size, min_size=1, max_size=3)))
        return (_elementwise(shape, dtype), {"A": ("B", shape), "B": ("B", shape),
                                             "C": ("C", shape)}, dtype)
    if kind == "row_sum":
        m, k = draw(size), draw(size)
        return (_row_sum(m, k, dtype), {"A": ("B", (m, k)), "B": ("B", (m,)),
                                        "C": ("C", (m,))}, dtype)
    m, n, k = draw(size), draw(size), draw(size)
    return (_matmul(m, n, k, dtype), {"A": ("C", (m, k)), "W": ("C", (k, n)),
                                      "C": ("C", (m, n))}, dtype)


# ---------------------------------------------------------------------------
# the index maps
# ---------------------------------------------------------------------------
@st.composite
def index_maps(draw, shape):
    """A lambda string over ``len(shape)`` indices: mostly one-to-one maps (some with
    padding), sometimes one that must be refused."""
    n = len(shape)
    names = [f"x{d}" for d in range(n)]
    outs = list(names)
    kind = draw(st.sampled_from(["permute", "split", "split", "split", "fuse",
                                 "split_permute", "split_permute", "split_twice",
                                 "identity", "bad"]))
    if kind in ("permute", "split_permute") and n > 1:
        outs = draw(st.permutations(outs))
    splits = {"split": 1, "split_permute": 1, "split_twice": min(n, 2)}.get(kind, 0)
    for d in draw(st.permutations(range(n)))[:splits]:
        c = draw(st.integers(2, 4))
        x = names[d]
        pos = outs.index(x)
        outs[pos:pos + 1] = [f"{x} // {c}", f"{x} % {c}"]
        if draw(st.booleans()):            # the inner part moved to the end
            outs.append(outs.pop(pos + 1))
    if kind == "fuse" and n > 1:
        d = draw(st.integers(0, n - 2))
        outs[d:d + 2] = [f"{names[d]} * {shape[d + 1]} + {names[d + 1]}"]
    if kind == "bad":
        d = draw(st.integers(0, n - 1))
        x = names[d]
        outs[d] = draw(st.sampled_from([f"{x} // 2", f"{x} % 2", f"{x} - 1", f"{x} * 2",
                                        f"{x} + 1", f"{x} * 0"]))
    return f"lambda {', '.join(names)}: ({', '.join(outs)},)"


@st.composite
def pad_values(draw, dtype, new_ndim):
    kind = draw(st.sampled_from(["none", "number", "number", "number", "wrong", "lambda"]))
    if kind == "none":
        return None
    if kind == "number":
        return draw(st.sampled_from([0.0, -3.5])) if dtype == "float32" else \
            draw(st.sampled_from([0, 42]))
    if kind == "wrong":
        return 0 if dtype == "float32" else 0.0
    names = [f"p{d}" for d in range(new_ndim)]
    return f"lambda {', '.join(names)}: {' * 3 + '.join(names)}"


# ---------------------------------------------------------------------------
# arrays in a new layout
# ---------------------------------------------------------------------------
def _image(text: str, shape: tuple) -> tuple:
    """The new indices of every old element (row-major), one array per new dimension."""
    params, exprs = parse_index_map(text)
    grids = np.meshgrid(*[np.arange(s, dtype=np.int64) for s in shape], indexing="ij")
    env = {p: g.ravel() for p, g in zip(params, grids)}
    size = grids[0].size
    return tuple(np.broadcast_to(_np_eval(x, env), (size,)) for x in exprs)


def to_layout(arr: np.ndarray, text: str, new_shape: tuple, fill) -> np.ndarray:
    out = np.full(new_shape, fill, dtype=arr.dtype)
    out[_image(text, arr.shape)] = arr.ravel()
    return out


def _pad_expected(pad, new_shape, dtype):
    """The pad value at every new index."""
    if not isinstance(pad, str):
        return np.full(new_shape, pad, dtype=dtype)
    params, exprs = parse_index_map(pad)
    grids = np.meshgrid(*[np.arange(s, dtype=np.int64) for s in new_shape], indexing="ij")
    val = _np_eval(exprs[0], dict(zip(params, grids)))
    return np.broadcast_to(val, new_shape).astype(dtype)


def _buffers(func) -> list:
    from engine.schedule.primitives.buffers import all_buffers
    return all_buffers(func)


def _random_args(func, seed):
    return small_integer_args(func, seed)


def _pre_schedule(sch, draw_choice):
    """Now and then a split or a compute_at before the transform (refusals ignored)."""
    what = draw_choice
    try:
        if what == "split_writer":
            blk = sch.get_block(sch.index().all_blocks()[0].name_hint)
            loop = sch.get_loops(blk)[0]
            sch.split(loop, [None, 2])
        elif what == "compute_at":
            blocks = [b.name_hint for b in sch.index().all_blocks()]
            if blocks == ["B", "C"]:
                sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    except ScheduleError:
        pass


@given(data=st.data())
def test_transform_layout_keeps_the_meaning_or_refuses(data):
    src, buffers, dtype = data.draw(programs())
    mod = engine.parse(src)
    sch = engine.Schedule(mod)
    _pre_schedule(sch, data.draw(st.sampled_from(["none", "none", "split_writer",
                                                  "compute_at"])))
    target = data.draw(st.sampled_from(sorted(buffers) + ["B"] * ("B" in buffers)))
    writer, shape = buffers[target]
    block = sch.get_block(writer)
    before = sch.mod
    text = data.draw(index_maps(shape))
    new_ndim = len(parse_index_map(text)[1])
    pad = data.draw(pad_values(dtype, new_ndim))
    assume = data.draw(st.sampled_from([False, False, False, True]))
    n_steps = len(sch.trace)
    try:
        sch.transform_layout(block, target, text, pad_value=pad,
                             assume_injective_transform=assume)
    except ScheduleError as e:
        msg = str(e)
        event(f"refused: {msg.split(': ', 1)[-1][:40]}")
        assert msg.startswith("transform_layout refused") and msg.endswith("."), msg
        assert sch.mod is before and len(sch.trace) == n_steps
        return
    after = sch.mod
    # TVM's rules: a pad value of another type than the buffer's is refused, and padding
    # without a pad value too (unless assume_injective_transform)
    assert not (pad is not None and not isinstance(pad, str) and
                isinstance(pad, float) != (dtype == "float32")), "a mistyped pad_value"
    new_buf = {b.name: b for b in _buffers(after["main"])}[target]
    padded = math.prod(new_buf.const_shape()) > math.prod(shape)
    if pad is None and not assume:
        assert not padded, "padding without a pad_value"
    event(f"accepted ({'parameter' if target != 'B' else 'intermediate'}, "
          f"{'padded' if padded else 'plain'})")
    name = "main"
    old_params = before[name].params
    new_params = after[name].params
    params_transformed = {p.name: q for p, q in zip(old_params, new_params) if p is not q}
    assert set(params_transformed) <= {target}
    for seed in (0, 1):
        args = _random_args(before[name], seed)
        want = [a.copy() for a in args]
        engine.interpret(before, name, *want)
        new_args = []
        for p, a in zip(old_params, args):
            q = params_transformed.get(p.name)
            new_args.append(a.copy() if q is None else
                            to_layout(a, text, q.const_shape(), SENTINEL[dtype]))
        got_i = [a.copy() for a in new_args]
        engine.interpret(after, name, *got_i)
        got_c = [a.copy() for a in new_args]
        engine.build(after)[name](*got_c)
        for how, got in (("interpreted", got_i), ("compiled", got_c)):
            for p, w, g, a0 in zip(old_params, want, got, new_args):
                q = params_transformed.get(p.name)
                if q is None:
                    np.testing.assert_allclose(g, w, rtol=1e-5,
                                               err_msg=f"{p.name} ({how}) differs")
                    continue
                image = _image(text, w.shape)
                np.testing.assert_allclose(g[image], w.ravel(), rtol=1e-5,
                                           err_msg=f"{p.name} ({how}, new layout) differs")
                pad_mask = np.ones(g.shape, dtype=bool)
                pad_mask[image] = False
                if not pad_mask.any():
                    continue
                assert math.prod(g.shape) > w.size
                # an input's padding is the caller's promise (TVM's T.assume): untouched
                stored = {st.buffer.name for st in engine.ir.collect(before[name].body,
                                                                     engine.ir.BufferStore)}
                written = p.name in stored and not assume and pad is not None
                expect = _pad_expected(pad, g.shape, dtype) if written else a0
                np.testing.assert_array_equal(g[pad_mask], expect[pad_mask],
                                              err_msg=f"{p.name} ({how}): the padding")

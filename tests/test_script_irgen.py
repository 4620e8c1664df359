"""Shared helpers for the script tests: hand-built IR (the course's mm_relu) and hypothesis
strategies producing random, well-typed programs.  (No tests in this module.)"""
from __future__ import annotations

from hypothesis import strategies as st

from engine.ir import (THREAD_TAGS, Add, And, Block, BlockRealize, Buffer, BufferLoad, BufferRegion,
                       BufferStore, Cast, Call, Div, EQ, FloatImm, FloorDiv, FloorMod, For,
                       ForKind, GE, GT, IfThenElse, IntImm, IRModule, IterType, IterVar, LE,
                       LT, Max, Min, Mod, Mul, NE, Not, Or, PrimFunc, Range, Select, Sub, Var,
                       seq)

TRUE = IntImm("bool", 1)


def full(buf: Buffer) -> BufferRegion:
    return BufferRegion.full(buf)


def point(buf: Buffer, *idx) -> BufferRegion:
    return BufferRegion(buf, tuple(Range(i, IntImm(i.dtype, 1)) for i in idx))


def mm_relu(n: int = 128) -> IRModule:
    """The course's mm_relu, built node by node (as TVM's parser would build it)."""
    A = Buffer("A", (n, n), "float32")
    B = Buffer("B", (n, n), "float32")
    C = Buffer("C", (n, n), "float32")
    Y = Buffer("Y", (n, n), "float32")
    i, j, k = Var("i"), Var("j"), Var("k")
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    dom = Range(0, n)
    y_block = Block(
        iter_vars=(IterVar(vi, dom, IterType.SPATIAL), IterVar(vj, dom, IterType.SPATIAL),
                   IterVar(vk, dom, IterType.REDUCE)),
        reads=(point(A, vi, vk), point(B, vk, vj)),
        writes=(point(Y, vi, vj),),
        name_hint="Y",
        body=BufferStore(Y, Y[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
        init=BufferStore(Y, FloatImm("float32", 0), (vi, vj)))
    loop_y = For(i, 0, n, ForKind.SERIAL, For(j, 0, n, ForKind.SERIAL, For(
        k, 0, n, ForKind.SERIAL, BlockRealize((i, j, k), TRUE, y_block))))
    i2, j2 = Var("i"), Var("j")
    vi2, vj2 = Var("vi"), Var("vj")
    c_block = Block(
        iter_vars=(IterVar(vi2, dom, IterType.SPATIAL), IterVar(vj2, dom, IterType.SPATIAL)),
        reads=(point(Y, vi2, vj2),), writes=(point(C, vi2, vj2),), name_hint="C",
        body=BufferStore(C, Max(Y[vi2, vj2], FloatImm("float32", 0)), (vi2, vj2)))
    loop_c = For(i2, 0, n, ForKind.SERIAL, For(j2, 0, n, ForKind.SERIAL,
                                               BlockRealize((i2, j2), TRUE, c_block)))
    root = Block((), (), (), "root", seq(loop_y, loop_c), None, (Y,), ())
    func = PrimFunc("mm_relu", (A, B, C), BlockRealize((), TRUE, root),
                    (("global_symbol", "mm_relu"), ("tir.noalias", True)))
    return IRModule((("mm_relu", func),))


# The course's mm_relu loop nests (seeds/004), as the printer writes them, one listing per
# step of the walk-through; the parser, printer, schedule and te tests share these texts.
MM_RELU_LOOPS = """
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(Y[vi, vj])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(Y[vi, vj])
                T.writes(C[vi, vj])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
"""

# After split + reorder + reverse_compute_at.
RCA_LOOPS = """
        for i, j_0 in T.grid(128, 32):
            for k, j_1 in T.grid(128, 4):
                with T.block("Y"):
                    vi = T.axis.spatial(128, i)
                    vj = T.axis.spatial(128, j_0 * 4 + j_1)
                    vk = T.axis.reduce(128, k)
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(Y[vi, vj])
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
            for ax0 in T.serial(4):
                with T.block("C"):
                    vi = T.axis.spatial(128, i)
                    vj = T.axis.spatial(128, j_0 * 4 + ax0)
                    T.reads(Y[vi, vj])
                    T.writes(C[vi, vj])
                    C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
"""

# After decompose_reduction of block Y at loop j_0.
DECOMPOSED_LOOPS = """
        for i, j_0 in T.grid(128, 32):
            for j_1_init in T.serial(4):
                with T.block("Y_init"):
                    vi = T.axis.spatial(128, i)
                    vj = T.axis.spatial(128, j_0 * 4 + j_1_init)
                    T.reads()
                    T.writes(Y[vi, vj])
                    Y[vi, vj] = T.float32(0)
            for k, j_1 in T.grid(128, 4):
                with T.block("Y_update"):
                    vi = T.axis.spatial(128, i)
                    vj = T.axis.spatial(128, j_0 * 4 + j_1)
                    vk = T.axis.reduce(128, k)
                    T.reads(Y[vi, vj], A[vi, vk], B[vk, vj])
                    T.writes(Y[vi, vj])
                    Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
            for ax0 in T.serial(4):
                with T.block("C"):
                    vi = T.axis.spatial(128, i)
                    vj = T.axis.spatial(128, j_0 * 4 + ax0)
                    T.reads(Y[vi, vj])
                    T.writes(C[vi, vj])
                    C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
"""

# What our printer writes for mm_relu (TVM's current course-style output).
MM_RELU_TEXT = '''# from tvm.script import tir as T
@tvm.script.ir_module
class Module:
    @T.prim_func
    def mm_relu(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        # with T.block("root"):
        Y = T.alloc_buffer((128, 128))''' + MM_RELU_LOOPS

# The head of a module as TVM printed it in 2022 (T.Buffer[...], comments, "-> None").
PRINTED_2022_HEAD = '''
@tvm.script.ir_module
class Module:
    @T.prim_func
    def mm_relu(A: T.Buffer[(128, 128), "float32"], B: T.Buffer[(128, 128), "float32"], C: T.Buffer[(128, 128), "float32"]) -> None:
        # function attr dict
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        # body
        # with T.block("root")
        Y = T.alloc_buffer([128, 128], dtype="float32")'''

# The course's listings as TVM printed them in 2022: the original program, after
# reverse_compute_at, and after decompose_reduction (printed with the `tir.` prefix).
SEED_PRINTED = PRINTED_2022_HEAD + MM_RELU_LOOPS
SEED_RCA = PRINTED_2022_HEAD + RCA_LOOPS
SEED_DECOMPOSED = (PRINTED_2022_HEAD + DECOMPOSED_LOOPS).replace("T.", "tir.")


# A function whose buffer shape is a symbolic variable declared in its body.
SYMBOLIC_TEXT = '''
@T.prim_func
def f(A: T.Buffer((n,), "float32")):
    n = T.int32()
    for i in range(n):
        A[i] = T.float32(0)
'''


# ---------------------------------------------------------------------------
# Hypothesis strategies: random well-typed programs
# ---------------------------------------------------------------------------
INT_TYPES = ("int32", "int64")
FLOAT_TYPES = ("float32", "float64", "float16")
BUF_TYPES = ("float32", "float64", "int32", "int64", "float16", "int8", "uint8")
# name pools with duplicates and names that need sanitizing (var names are not compared)
LOOP_NAMES = ("i", "j", "k", "i", "j_0", "i.outer", "ax0", "for", "T", "range", "1x")
AXIS_NAMES = ("vi", "vj", "vk", "vi", "v", "vi_1", "lambda")
BLOCK_NAMES = ("Y", "C", "init", "b\"q", "Y", "blk_0", "", "root2")
ANNOTATIONS = ((), (("pragma_unroll_explicit", 1),), (("pragma_x", "text"), ("flag", True)),
               (("ratio", 0.5), ("list", (1, 2, 3))))


class _Ctx:
    """What the generator can reference at a point of the program."""

    def __init__(self, buffers, ivars, counter=None, loop_vars=()):
        self.buffers = list(buffers)
        self.ivars = list(ivars)  # integer vars in scope
        self.counter = counter if counter is not None else [0]
        self.loop_vars = list(loop_vars)  # those of ivars that are loop variables

    def child(self, more_vars=(), more_bufs=(), loops=False):
        return _Ctx(self.buffers + list(more_bufs), self.ivars + list(more_vars), self.counter,
                    self.loop_vars + (list(more_vars) if loops else []))

    def inside_block(self, axes):
        """Inside a block with ``axes``: the enclosing loops' variables are out of reach
        (the block sees them only through its axes' bindings, as in TVM)."""
        outer = [v for v in self.ivars if not any(v is lv for lv in self.loop_vars)]
        return _Ctx(self.buffers, outer + list(axes), self.counter)

    def fresh_buffer_name(self):
        # buffer names are compared by structural_equal, so keep them distinct
        self.counter[0] += 1
        return f"L{self.counter[0]}"


def _int_const(draw, dtype):
    return IntImm(dtype, draw(st.integers(-20, 40)))


def _float_const(draw, dtype):
    v = draw(st.one_of(st.sampled_from([0.0, 1.0, -2.5, 0.1, 1e-5, 3.4e38, 7.0]),
                       st.floats(-1e6, 1e6, allow_nan=False, width=32),
                       st.sampled_from([float("inf"), float("-inf"), float("nan")])))
    return FloatImm(dtype, v)


def _cast_to(e, dtype):
    return e if e.dtype == dtype else Cast(dtype, e)


def index_expr(draw, ctx, dtype="int32", depth=2):
    """A random (mostly affine) integer expression over the variables in scope."""
    choice = draw(st.integers(0, 9 if depth > 0 else 2))
    if choice <= 1 and ctx.ivars:
        return _cast_to(draw(st.sampled_from(ctx.ivars)), dtype)
    if choice == 2 or not ctx.ivars:
        return IntImm(dtype, draw(st.integers(-3, 12)))
    a = index_expr(draw, ctx, dtype, depth - 1)
    b = index_expr(draw, ctx, dtype, depth - 1)
    cls = draw(st.sampled_from([Add, Sub, Mul, FloorDiv, FloorMod, Min, Max, Div, Mod]))
    if cls in (FloorDiv, FloorMod, Div, Mod):
        b = IntImm(dtype, draw(st.integers(1, 8)))
    return cls(a, b)


def load(draw, ctx, dtype):
    cands = [b for b in ctx.buffers if b.dtype == dtype]
    if not cands:
        return None
    buf = draw(st.sampled_from(cands))
    return BufferLoad(buf, tuple(index_expr(draw, ctx, "int32", 1) for _ in buf.shape))


def bool_expr(draw, ctx, depth):
    choice = draw(st.integers(0, 5 if depth > 0 else 1))
    if choice == 0:
        return IntImm("bool", draw(st.integers(0, 1)))
    if choice == 1 or choice == 2:
        t = draw(st.sampled_from(INT_TYPES + ("float32",)))
        a = value_expr(draw, ctx, t, depth - 1)
        b = value_expr(draw, ctx, t, depth - 1)
        return draw(st.sampled_from([EQ, NE, LT, LE, GT, GE]))(a, b)
    if choice == 3:
        return Not(bool_expr(draw, ctx, depth - 1))
    return draw(st.sampled_from([And, Or]))(bool_expr(draw, ctx, depth - 1),
                                            bool_expr(draw, ctx, depth - 1))


def value_expr(draw, ctx, dtype, depth=3):
    """A random expression of the given dtype using every operator kind."""
    if dtype == "bool":
        return bool_expr(draw, ctx, depth)
    is_f = dtype.startswith("float")
    choice = draw(st.integers(0, 12 if depth > 0 else 2))
    if choice == 0:
        return _float_const(draw, dtype) if is_f else _int_const(draw, dtype)
    if choice == 1:
        ld = load(draw, ctx, dtype)
        if ld is not None:
            return ld
        return _float_const(draw, dtype) if is_f else _int_const(draw, dtype)
    if choice == 2:
        if ctx.ivars:
            return _cast_to(draw(st.sampled_from(ctx.ivars)), dtype)
        return _float_const(draw, dtype) if is_f else _int_const(draw, dtype)
    sub = lambda: value_expr(draw, ctx, dtype, depth - 1)  # noqa: E731
    if choice <= 6:
        ops = [Add, Sub, Mul, Min, Max, Div] + ([] if is_f else [FloorDiv, FloorMod, Mod])
        return draw(st.sampled_from(ops))(sub(), sub())
    if choice == 7:
        return Select(bool_expr(draw, ctx, depth - 1), sub(), sub())
    if choice == 8:
        src = draw(st.sampled_from(BUF_TYPES))
        return _cast_to(value_expr(draw, ctx, src, depth - 1), dtype)
    if choice == 9:
        return Call(dtype, "if_then_else", (bool_expr(draw, ctx, depth - 1), sub(), sub()))
    if choice == 10 and is_f:
        op = draw(st.sampled_from(["exp", "sqrt", "tanh", "log", "fabs", "sigmoid"]))
        return Call(dtype, op, (sub(),))
    if choice == 11 and is_f:
        return Call(dtype, "pow", (sub(), sub()))
    if choice == 12:
        # an intrinsic whose result dtype differs from its argument / an extern call
        if draw(st.booleans()):
            return Call(dtype, "my_extern", (sub(), IntImm("int32", 3)))
        return Call(dtype, "abs", (value_expr(draw, ctx, "float64", depth - 1),))
    return sub()


def region(draw, ctx, buf):
    rs = []
    for dim in buf.shape:
        kind = draw(st.integers(0, 2))
        if kind == 0 and ctx.ivars:
            rs.append(Range(index_expr(draw, ctx, "int32", 1), IntImm("int32", 1)))
        elif kind == 1 and ctx.ivars:
            mn = index_expr(draw, ctx, "int32", 1)
            rs.append(Range(mn, IntImm("int32", draw(st.integers(2, 4)))))
        else:
            lo = draw(st.integers(0, 2))
            rs.append(Range(IntImm("int32", lo), IntImm("int32", draw(st.integers(1, 5)))))
    return BufferRegion(buf, tuple(rs))


def store(draw, ctx):
    buf = draw(st.sampled_from(ctx.buffers))
    idx = tuple(index_expr(draw, ctx, "int32", 2) for _ in buf.shape)
    return BufferStore(buf, value_expr(draw, ctx, buf.dtype, 3), idx)


def block_realize(draw, ctx, loops, depth=1):
    n_axes = draw(st.integers(0, 3))
    ivs, vals = [], []
    for _ in range(n_axes):
        name = draw(st.sampled_from(AXIS_NAMES))
        if loops and draw(st.booleans()):
            loop = draw(st.sampled_from(loops))
            val = loop.loop_var
            dom = Range(IntImm(loop.extent.dtype, 0), loop.extent) if draw(st.booleans()) \
                else Range(0, draw(st.integers(1, 64)))
            dtype = val.dtype if draw(st.integers(0, 4)) else "int32"
        else:
            val = index_expr(draw, ctx, "int32", 2)
            dtype = "int32"
            dom = Range(draw(st.sampled_from([0, 0, 2])), draw(st.integers(1, 64)))
            if dom.min.value == 2:
                dom = Range(IntImm("int32", 2), IntImm("int32", dom.extent.value))
        ivs.append(IterVar(Var(name, dtype), dom,
                           draw(st.sampled_from([IterType.SPATIAL, IterType.REDUCE]))))
        vals.append(val)
    inner = ctx.inside_block([iv.var for iv in ivs]) if ivs else ctx.child()
    allocs = ()
    if draw(st.integers(0, 4)) == 0:
        allocs = (Buffer(ctx.fresh_buffer_name(), (4,), draw(st.sampled_from(BUF_TYPES)), "local"),)
        inner = inner.child(more_bufs=allocs)
    body = statements(draw, inner, [], depth - 1)
    init = store(draw, inner) if draw(st.booleans()) else None
    reads = tuple(region(draw, inner, b) for b in
                  draw(st.lists(st.sampled_from(ctx.buffers), max_size=3)))
    writes = tuple(region(draw, inner, b) for b in
                   draw(st.lists(st.sampled_from(ctx.buffers), max_size=2)))
    pred = TRUE if draw(st.booleans()) else bool_expr(draw, ctx, 1)
    ann = draw(st.sampled_from(ANNOTATIONS))
    block = Block(tuple(ivs), reads, writes, draw(st.sampled_from(BLOCK_NAMES)), body, init,
                  allocs, ann)
    return BlockRealize(tuple(vals), pred, block)


def loop_nest(draw, ctx, loops, depth):
    n = draw(st.integers(1, 3))
    made = []
    inner_ctx = ctx
    for _ in range(n):
        dt = "int64" if draw(st.integers(0, 6)) == 0 else "int32"
        v = Var(draw(st.sampled_from(LOOP_NAMES)), dt)
        mn = IntImm(dt, 0) if draw(st.integers(0, 3)) else IntImm(dt, draw(st.integers(1, 5)))
        ext = IntImm(dt, draw(st.integers(1, 8)))
        if draw(st.integers(0, 5)) == 0 and inner_ctx.ivars:
            iv = draw(st.sampled_from([x for x in inner_ctx.ivars if x.dtype == dt] or [None]))
            if iv is not None:
                mn = Mul(iv, IntImm(dt, 4))  # non-constant start
        kind = draw(st.sampled_from(list(ForKind)))
        tag = draw(st.sampled_from(THREAD_TAGS)) if kind is ForKind.THREAD_BINDING else ""
        ann = draw(st.sampled_from(ANNOTATIONS)) if draw(st.integers(0, 3)) == 0 else ()
        made.append((v, mn, ext, kind, ann, tag))
        inner_ctx = inner_ctx.child([v], loops=True)
    fake_loops = loops + [For(v, mn, ext, kind, None, ann, tag)
                          for v, mn, ext, kind, ann, tag in made]
    body = statements(draw, inner_ctx, fake_loops, depth - 1)
    for v, mn, ext, kind, ann, tag in reversed(made):
        body = For(v, mn, ext, kind, body, ann, tag)
    return body


def statement(draw, ctx, loops, depth):
    if depth < 0:
        return store(draw, ctx)
    choice = draw(st.integers(0, 7 if depth > 0 else 2))
    if choice <= 1:
        return store(draw, ctx)
    if choice == 2:
        return block_realize(draw, ctx, loops, depth)
    if choice <= 4:
        return loop_nest(draw, ctx, loops, depth)
    if choice == 5:
        then = statements(draw, ctx, loops, depth - 1)
        els = None
        if draw(st.booleans()):
            els = statements(draw, ctx, loops, depth - 1) if draw(st.booleans()) else \
                IfThenElse(bool_expr(draw, ctx, 1), store(draw, ctx))
        return IfThenElse(bool_expr(draw, ctx, 2), then, els)
    if choice == 6:
        from engine.ir import LetStmt
        dt = draw(st.sampled_from(INT_TYPES))
        v = Var(draw(st.sampled_from(["x", "i", "x"])), dt)
        return LetStmt(v, index_expr(draw, ctx, dt, 2),
                       statements(draw, ctx.child([v]), loops, depth - 1))
    if choice == 7 and draw(st.booleans()):
        return vector_store(draw, ctx)
    from engine.ir import Evaluate
    return Evaluate(value_expr(draw, ctx, draw(st.sampled_from(BUF_TYPES)), 2))


def vector_store(draw, ctx):
    """``A[T.Ramp(b, s, n), ...] = T.Broadcast(v, n) + A[T.Ramp(...), ...]`` (vectorized code)."""
    from engine.ir import Broadcast, Ramp
    buf = draw(st.sampled_from(ctx.buffers))
    if not buf.shape:
        return store(draw, ctx)
    lanes = draw(st.sampled_from([2, 4, 8]))
    ramp = lambda: Ramp(index_expr(draw, ctx, "int32", 1),  # noqa: E731
                        IntImm("int32", draw(st.integers(0, 3))), lanes)
    idx = (ramp(),) + tuple(index_expr(draw, ctx, "int32", 1) for _ in buf.shape[1:])
    value = Broadcast(value_expr(draw, ctx, buf.dtype, 1), lanes)
    if draw(st.booleans()):
        load_idx = (ramp(),) + tuple(index_expr(draw, ctx, "int32", 1) for _ in buf.shape[1:])
        value = Add(value, BufferLoad(buf, load_idx))
    return BufferStore(buf, value, idx)


def statements(draw, ctx, loops, depth):
    n = draw(st.integers(1, 3))
    return seq(*[statement(draw, ctx, loops, depth) for _ in range(n)])


@st.composite
def programs(draw):
    """A random PrimFunc-in-IRModule: loop nests of all kinds with annotations, blocks
    with affine bindings/predicates/init/regions, if/else, lets, every expression kind."""
    names = draw(st.lists(st.sampled_from(["A", "B", "C", "D", "out", "T_add"]),
                          min_size=1, max_size=3, unique=True))
    params = []
    for name in names:
        shape = tuple(draw(st.lists(st.integers(1, 16), min_size=1, max_size=3)))
        params.append(Buffer(name, shape, draw(st.sampled_from(BUF_TYPES))))
    allocs = []
    for name in draw(st.lists(st.sampled_from(["X", "Y", "Z"]), max_size=2, unique=True)):
        shape = tuple(draw(st.lists(st.integers(1, 8), min_size=0, max_size=2)))
        allocs.append(Buffer(name, shape, draw(st.sampled_from(BUF_TYPES)),
                             draw(st.sampled_from(["global", "local"]))))
    ctx = _Ctx(params + allocs, [])
    body = statements(draw, ctx, [], 2)
    from engine.ir import collect
    if draw(st.booleans()) or allocs or collect(body, Block):
        # (a body with blocks always has a root block, as in TVM)
        body = BlockRealize((), TRUE, Block((), (), (), "root", body, None, tuple(allocs), ()))
    attrs = draw(st.sampled_from([(), (("global_symbol", "f"), ("tir.noalias", True))]))
    fname = draw(st.sampled_from(["main", "f", "mm_relu"]))
    return IRModule(((fname, PrimFunc(fname, tuple(params), body, attrs)),))

"""The model page's default recipe, sized from a vector ISA given explicitly, and the
transposed constant weights: every program compiles and matches numpy."""
import numpy as np
import pytest

from engine import relax, te, topi
from engine.codegen.isa import AVX2, AVX512, NEON
from engine.ir.function import IRModule
from engine.ir.stmt import ForKind
from engine.models.layouts import pretranspose_weights
from engine.models.schedules import default_schedule, recipe_sizes
from engine.runtime import build

ISAS = [AVX512, AVX2, NEON]


def _matmul_bias_relu(m, k, n):
    x = te.placeholder((m, k), "float32", name="X")
    w = te.placeholder((k, n), "float32", name="W")
    b = te.placeholder((n,), "float32", name="B")
    r = te.reduce_axis((0, k), name="k")
    y = te.compute((m, n), lambda i, j: te.sum(x[i, r] * w[r, j], axis=r), name="Y")
    z = te.compute((m, n), lambda i, j: y[i, j] + b[j], name="Z")
    out = te.compute((m, n), lambda i, j: te.max(z[i, j], te.const(0, "float32")), name="R")
    return IRModule((("f", te.create_prim_func([x, w, b, out], name="f")),))


def _kinds(func):
    from engine.ir.functor import post_order_visit
    from engine.ir.stmt import For
    found = []
    post_order_visit(func.body, lambda s: found.append(s.kind) if isinstance(s, For) else None)
    return found


@pytest.mark.parametrize("isa", ISAS, ids=lambda i: i.name)
@pytest.mark.parametrize("m,k,n", [(1, 48, 64), (8, 40, 64), (6, 24, 10), (5, 16, 48)])
def test_recipe_for_each_isa_matches_numpy(isa, m, k, n):
    sch = default_schedule(_matmul_bias_relu(m, k, n), "f", isa)
    kinds = _kinds(sch.mod["f"])
    assert ForKind.VECTORIZED in kinds
    rng = np.random.default_rng(m * 100 + n)
    x, w = rng.standard_normal((m, k), "float32"), rng.standard_normal((k, n), "float32")
    b, out = rng.standard_normal(n, "float32"), np.empty((m, n), "float32")
    build(sch.mod)["f"](x, w, b, out)
    np.testing.assert_allclose(out, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-4)


def test_recipe_sizes_follow_the_isa():
    assert recipe_sizes(AVX512, 64, 128) == (16, 4, 4)     # 16 accumulators of 16 lanes
    assert recipe_sizes(AVX2, 64, 128) == (8, 2, 4)        # 8 accumulators of 8 lanes
    assert recipe_sizes(NEON, 64, 128) == (4, 4, 4)
    assert recipe_sizes(AVX512, 1, 128) == (16, 8, 1)      # matrix-vector: 8 vectors
    assert recipe_sizes(AVX2, 1, 128) == (8, 4, 1)
    assert recipe_sizes(AVX512, 64, 10) == (10, 1, 8)      # one vector of 10 columns


def _mlp_params(seed):
    rng = np.random.default_rng(seed)
    return {"w0": rng.standard_normal((128, 784), "float32") * 0.05,
            "b0": rng.standard_normal(128, "float32"),
            "w1": rng.standard_normal((10, 128), "float32") * 0.1,
            "b1": rng.standard_normal(10, "float32")}


def _mlp_numpy(x, params):
    return np.maximum(x @ params["w0"].T + params["b0"], 0) @ params["w1"].T + params["b1"]


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("isa", ISAS, ids=lambda i: i.name)
def test_linear_with_transposed_weights_is_stored_transposed_and_scheduled(batch, isa):
    """x @ W.T with W a constant: the stages as written keep the course's W[j, k]; the
    recipe's first step transposes W (transform_layout), main passes W stored transposed,
    and the recipe vectorizes j."""
    from engine.models.course import mlp_module
    from engine.models.pipeline import stage_module
    params = _mlp_params(batch)
    x = np.random.default_rng(9).standard_normal((batch, 784), "float32")
    for stage in ("unscheduled", "fused", "scheduled", "fused+scheduled"):
        mod, traces = stage_module(mlp_module(batch, params), stage, isa)
        name = next(n for n in mod.names() if n.startswith(("linear0", "fused_linear0")))
        lin = mod[name]
        if stage in ("unscheduled", "fused"):
            assert tuple(lin.buffer_params[1].shape) == (128, 784)
            assert traces == {}
        else:
            assert tuple(lin.buffer_params[1].shape) == (784, 128)
            assert traces[name].insts[1].kind == "TransformLayout"
            assert ForKind.VECTORIZED in _kinds(lin)
        got = np.asarray(relax.VirtualMachine(relax.build(mod))["main"](x))
        np.testing.assert_allclose(got, _mlp_numpy(x, params), rtol=1e-4, atol=1e-4)


def test_computed_weights_are_left_alone():
    """A linear layer whose weight is a parameter of main keeps W[j, k]."""
    from engine.models.course import mlp_module
    mod = relax.transform.LegalizeOps()(mlp_module(1))
    assert pretranspose_weights(mod) is mod


def _scheduled_linear0(mod, index_map):
    """linear0 of ``mod`` with its weight (read 1 of block Y) given the layout of
    ``index_map``; (function, trace)."""
    from engine.schedule import Schedule
    sch = Schedule(IRModule((("linear0", mod["linear0"]),)))
    sch.transform_layout(sch.get_block("Y", func_name="linear0"), ("read", 1), index_map)
    return sch.mod["linear0"], sch.trace


@pytest.mark.parametrize("index_map", ["lambda j, k: (k, j)",
                                       "lambda j, k: (j // 8, k, j % 8)"])
def test_a_trace_changing_a_weights_layout_gets_it_stored_so(index_map):
    """A trace from the explorer that gives linear0's constant weight another layout (a
    transpose, or panels of 8 rows): the module passes the weight in that layout, computed
    once, and still computes numpy's result; the weight as written is not changed."""
    from engine.models.course import mlp_module
    from engine.models.layouts import with_schedules
    from engine.models.pipeline import stage_module
    params = _mlp_params(0)
    base, _ = stage_module(mlp_module(2, params), "unscheduled")
    func, trace = _scheduled_linear0(base, index_map)
    mod = with_schedules(base, {"linear0": func}, {"linear0": trace})
    assert tuple(mod["linear0"].buffer_params[1].shape) != (128, 784)
    x = np.random.default_rng(1).standard_normal((2, 784), "float32")
    for m in (mod, base):
        got = np.asarray(relax.VirtualMachine(relax.build(m))["main"](x))
        np.testing.assert_allclose(got, _mlp_numpy(x, params), rtol=1e-4, atol=1e-4)


def test_a_computed_weight_in_another_layout_is_refused_with_a_sentence():
    """main passes linear0's weight as its own parameter: a trace transposing it cannot be
    stored so, and says which parameter and what to do instead."""
    from engine.models.course import mlp_module
    from engine.models.layouts import LayoutError, with_schedules
    base = relax.transform.LegalizeOps()(mlp_module(1))
    func, trace = _scheduled_linear0(base, "lambda j, k: (k, j)")
    with pytest.raises(LayoutError, match="not a constant weight.*cache_read"):
        with_schedules(base, {"linear0": func}, {"linear0": trace})


def test_a_reduction_larger_than_l2_is_cut_into_panels():
    """An ISA with a 4 KiB L2: the strip of B (96 x 16 floats) is more than half of it, so
    k is cut into panels with a block of rows inside each; still numpy's result."""
    from engine.codegen.isa import VectorISA
    from engine.models.schedules import _cache_block, recipe_sizes
    tiny = VectorISA("tiny", 8, 16, 1024, 4096, None, True)
    assert _cache_block(tiny, recipe_sizes(tiny, 32, 32), 32, 96) == (32, 32)
    assert _cache_block(AVX512, recipe_sizes(AVX512, 64, 128), 64, 784) == (64, 784)
    m, k, n = 32, 96, 32
    sch = default_schedule(_matmul_bias_relu(m, k, n), "f", tiny)
    text = sch.mod.script()
    assert "k_0" in text and "k_1" in text
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((m, k), "float32"), rng.standard_normal((k, n), "float32")
    b, out = rng.standard_normal(n, "float32"), np.empty((m, n), "float32")
    build(sch.mod)["f"](x, w, b, out)
    np.testing.assert_allclose(out, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("maps", [(), ("lambda j, k: (j // 2, k, j % 2)",),
                                  ("lambda j, k: (k, j)", "lambda k, j: (j, k)")])
def test_the_tuner_checks_a_trace_relaying_a_weight_on_inputs_in_that_layout(maps):
    """The search's starting point (the recipe: its weight transposed) and explorer traces
    giving the weight other layouts (panels; transposed and back) are checked and timed
    with their inputs in the layouts they give their parameters: correct, timed."""
    from engine.models.course import mlp_module
    from engine.models.layouts import constant_params
    from engine.models.pipeline import stage_module
    from engine.schedule import Schedule
    from engine.tune.measure import TaskContext
    from engine.tune.task import task_of
    base, _ = stage_module(mlp_module(2, _mlp_params(3)), "fused")
    one = IRModule((("linear1", base["linear1"]),))
    ctx = TaskContext(task_of(one, "linear1", "start"))
    if maps:
        sch = Schedule(one)
        for m in maps:
            sch.transform_layout(sch.get_block("Y", func_name="linear1"), ("read", 1), m)
    else:
        sch = default_schedule(one, "linear1", weights=constant_params(base, "linear1"))
        assert sch.trace.insts[1].kind == "TransformLayout"
    got = ctx.time(ctx.build(sch.trace.as_json()))
    assert got.correct and got.error is None and got.seconds > 0

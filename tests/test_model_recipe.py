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


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("isa", ISAS, ids=lambda i: i.name)
def test_linear_with_transposed_weights_is_stored_transposed_and_scheduled(batch, isa):
    """x @ W.T with W a constant: the stage reads W[k, j] and the recipe vectorizes j."""
    from engine.models.pipeline import stage_module
    rng = np.random.default_rng(batch)
    params = {"w0": rng.standard_normal((128, 784), "float32") * 0.05,
              "b0": rng.standard_normal(128, "float32"),
              "w1": rng.standard_normal((10, 128), "float32") * 0.1,
              "b1": rng.standard_normal(10, "float32")}
    from engine.models.course import mlp_module
    x = rng.standard_normal((batch, 784), "float32")
    want = np.maximum(x @ params["w0"].T + params["b0"], 0) @ params["w1"].T + params["b1"]
    for stage in ("unscheduled", "scheduled", "fused+scheduled"):
        mod, _ = stage_module(mlp_module(batch, params), stage, isa)
        lin = [f for n, f in mod.items() if n.startswith(("linear0", "fused_linear0"))][0]
        assert tuple(lin.buffer_params[1].shape) == (784, 128)
        if stage != "unscheduled":
            assert ForKind.VECTORIZED in _kinds(lin)
        got = np.asarray(relax.VirtualMachine(relax.build(mod))["main"](x))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_computed_weights_are_left_alone():
    """A linear layer whose weight is a parameter of main keeps W[j, k]."""
    from engine.models.course import mlp_module
    mod = relax.transform.LegalizeOps()(mlp_module(1))
    assert pretranspose_weights(mod) is mod


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

"""MLC course, chapter "Automatic Program Optimization" (mlc-ai/mlc-en,
chapter_auto_program_optimization), its cells in order through the engine's ``tvm``
namespace, in the course's current spelling (``tvm.compile``, ``tvm.runtime.tensor``,
``ms.tune_tir(...)`` returning a database, ``ms.tir_integration.compile_tir``,
``tvm.register_global_func``), each result compared with numpy.

Changes, all for running offline and quickly: ``IPython.display.HTML(code2html(x))`` cells
are ``code2html(x)`` (the course's helper, pygments' HTML; the program read back from it is
checked); the tuning cells search 8 candidates instead of 64 (``max_trials_global=8``) in
a ``tmp_path`` work directory instead of ``./tune_tmp``; the stochastic cells that the
course runs several times unseeded are seeded; the end-to-end part's FashionMNIST image
and trained weights (downloaded by the course with torchvision and wget) are random arrays
of the same shapes (``engine.models.mlp.SHAPES``); the registered ``env.linear``/
``env.relu`` are written with numpy instead of PyTorch (``torch.from_dlpack``), and the
cell that shows the image with matplotlib is left out (it only draws).

One result differs from TVM's: cell 15's ``type(j_factors[0])`` is the engine's handle
class ``ExprRV`` (a symbolic variable standing for the sampled value, as the course says),
where TVM shows ``tvm.tir.expr.Var``.
"""
from __future__ import annotations

import numpy as np
import pytest

from engine import tvm
from engine.models.mlp import SHAPES
from engine.tvm import relax
from engine.tvm.ir.module import IRModule  # noqa: F401 - the course's import
from engine.tvm.script import relax as R
from engine.tvm.script import tir as T

TRIALS = 8   # the course's max_trials_global=64, num_trials_per_iter=64


def code2html(code):
    """Helper function to use pygments to turn the code string into highlighted html."""
    import pygments
    from pygments.lexers import Python3Lexer
    from pygments.formatters import HtmlFormatter
    formatter = HtmlFormatter()
    html = pygments.highlight(code, Python3Lexer(), formatter)
    return "<style>%s</style>%s\n" % (formatter.get_style_defs(".highlight"), html)


def _text(html):
    """The program text of ``code2html``'s HTML (its spans removed), for the checks."""
    import html as html_lib
    import re
    return html_lib.unescape(re.sub(r"<[^>]+>", "", html.split("</style>", 1)[1]))


# ---------------------------------------------------------------- recap (cells 2-7)
@tvm.script.ir_module
class MyModule:
    @T.prim_func
    def main(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(128, 128, 128):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


dtype = "float32"
a_np = np.random.rand(128, 128).astype(dtype)
b_np = np.random.rand(128, 128).astype(dtype)
c_mm = a_np @ b_np

a_nd = tvm.runtime.tensor(a_np)
b_nd = tvm.runtime.tensor(b_np)
c_nd = tvm.runtime.tensor(np.empty((128, 128), dtype="float32"))


def check(sch_or_mod):
    """What a cell's program computes, against numpy."""
    mod = getattr(sch_or_mod, "mod", sch_or_mod)
    lib = tvm.compile(mod, target="llvm")
    c = tvm.runtime.tensor(np.zeros((128, 128), dtype="float32"))
    lib["main"](a_nd, b_nd, c)
    np.testing.assert_allclose(c.numpy(), c_mm, rtol=1e-5)


def test_cell_4_build_and_time():
    lib = tvm.compile(MyModule, target="llvm")
    f_timer_before = lib.mod.time_evaluator("main", tvm.cpu())
    print("Time cost of MyModule: %.3f ms" % (f_timer_before(a_nd, b_nd, c_nd).mean * 1000))
    np.testing.assert_allclose(c_nd.numpy(), c_mm, rtol=1e-5)


def schedule_mm(sch: tvm.tir.Schedule, jfactor=4):
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_0, j_1 = sch.split(loop=j, factors=[None, jfactor])
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


def test_cells_5_to_9_schedule_and_trace(capsys):
    sch = tvm.tir.Schedule(MyModule)                              # cell 6
    sch = schedule_mm(sch)
    html = code2html(sch.mod.script())
    assert 'T.block("C_init")' in _text(html)

    lib = tvm.compile(sch.mod, target="llvm")                     # cell 7
    f_timer_after = lib.mod.time_evaluator("main", tvm.cpu())
    c = tvm.runtime.tensor(np.empty((128, 128), dtype="float32"))
    print("Time cost of MyModule=>schedule_mm: %.3f ms"
          % (f_timer_after(a_nd, b_nd, c).mean * 1000))
    np.testing.assert_allclose(c.numpy(), c_mm, rtol=1e-5)

    capsys.readouterr()
    print(sch.trace)                                              # cell 8
    out = capsys.readouterr().out
    assert out.startswith("# from tvm import s_tir\ndef apply_trace(sch: s_tir.Schedule)")
    assert 'b0 = sch.get_sblock(name="C", func_name="main")' in out   # TVM 0.27's name
    assert "l1, l2, l3 = sch.get_loops(block=b0)" in out
    assert "l4, l5 = sch.split(loop=l2, factors=[None, 4]" in out
    assert "sch.reorder(l1, l4, l3, l5)" in out
    assert "b6 = sch.decompose_reduction(block=b0, loop=l3)" in out


# ---------------------------------------------------------------- stochastic (cells 10-22)
def stochastic_schedule_mm(sch: tvm.tir.Schedule):
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_factors = sch.sample_perfect_tile(loop=j, n=2)
    j_0, j_1 = sch.split(loop=j, factors=j_factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


def test_cells_11_to_13_stochastic_schedule(capsys):
    seen = set()
    for seed in range(6):   # "run the code block multiple times" (seeded here: repeatable)
        sch = tvm.tir.Schedule(MyModule, seed=seed)               # cell 11
        sch = stochastic_schedule_mm(sch)
        code2html(sch.mod.script())
        capsys.readouterr()
        print(sch.trace)                                          # cell 12 / 13
        out = capsys.readouterr().out
        assert "sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=16, decision=[" \
            in out
        decision = out.split("decision=[", 1)[1].split("]", 1)[0]
        j0, j1 = (int(x) for x in decision.split(","))
        assert j0 * j1 == 128 and j1 <= 16
        assert f"for i, j_0 in T.grid(128, {j0}):" in sch.mod.script()
        assert f"for k, j_1 in T.grid(128, {j1}):" in sch.mod.script()
        seen.add(j1)
        check(sch)
    assert len(seen) > 1    # the loop bound of j_1 changes between runs


def test_cells_14_to_22_step_by_step(capsys):
    sch = tvm.tir.Schedule(MyModule, seed=4)                      # cell 14 (seeded here)
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_factors = sch.sample_perfect_tile(loop=j, n=2)

    # cell 15: type(j_factors[0]) -- a symbolic variable referring to the sampled value,
    # not a number; TVM shows tvm.tir.expr.Var, the engine its own handle class ExprRV
    assert type(j_factors[0]).__name__ == "ExprRV"
    assert not isinstance(j_factors[0], int)
    assert sch.get(j_factors[0]) * sch.get(j_factors[1]) == 128

    capsys.readouterr()
    print(sch.trace)                                              # cell 16
    out = capsys.readouterr().out
    assert "sample_perfect_tile" in out and "split" not in out

    tvm.ir.assert_structural_equal(sch.mod, MyModule)            # cell 17: unchanged

    j_0, j_1 = sch.split(loop=j, factors=j_factors)              # cell 18
    sch.reorder(i, j_0, k, j_1)

    capsys.readouterr()
    print(sch.trace)                                              # cell 19
    out = capsys.readouterr().out
    assert "l6, l7 = sch.split(loop=l2, factors=[v4, v5]" in out
    assert "sch.reorder(l1, l6, l3, l7)" in out

    check(sch)                                                    # cell 20
    sch.reorder(i, j_0, k, j_1)                                   # cell 21
    sch.decompose_reduction(block_C, k)
    assert 'T.block("C_init")' in _text(code2html(sch.mod.script()))    # cell 22
    check(sch)


# ---------------------------------------------------------------- search (cells 23-32)
def random_search(mod: tvm.IRModule, num_trials=5):
    best_result = None
    best_sch = None

    for i in range(num_trials):
        sch = stochastic_schedule_mm(tvm.tir.Schedule(mod))
        lib = tvm.compile(sch.mod, target="llvm")
        f_timer_after = lib.mod.time_evaluator("main", tvm.cpu())
        result = f_timer_after(a_nd, b_nd, c_nd).mean

        print("=====Attempt %d, time-cost: %.3f ms====" % (i, result * 1000))
        print(sch.trace)

        # book keep the best result so far
        if best_result is None or result < best_result:
            best_result = result
            best_sch = sch

    return best_sch


def test_cells_23_24_random_search(capsys):
    sch = random_search(MyModule)
    out = capsys.readouterr().out
    assert out.count("=====Attempt") == 5
    print(sch.trace)                                              # cell 24
    assert "decision=[" in capsys.readouterr().out
    np.testing.assert_allclose(c_nd.numpy(), c_mm, rtol=1e-5)
    check(sch)


def test_cells_25_to_28_tune_with_the_stochastic_space(tmp_path, capsys):
    from engine.tvm import meta_schedule as ms

    database = ms.tune_tir(
        mod=MyModule,
        target="llvm --num-cores=1",
        max_trials_global=TRIALS,
        num_trials_per_iter=TRIALS,
        space=ms.space_generator.ScheduleFn(stochastic_schedule_mm),
        work_dir=str(tmp_path / "tune_tmp"),
    )

    sch = ms.tir_integration.compile_tir(database, MyModule, "llvm --num-cores=1")
    assert (tmp_path / "tune_tmp" / "database.sqlite3").exists()

    capsys.readouterr()
    sch.trace.show()                                              # cell 26
    out = capsys.readouterr().out
    assert "sample_perfect_tile" in out and "decompose_reduction" in out
    assert 'T.block("C_init")' in _text(code2html(sch.mod.script()))    # cell 27

    lib = tvm.compile(sch.mod, target="llvm")                     # cell 28
    f_timer_after = lib.mod.time_evaluator("main", tvm.cpu())
    print("Time cost of MyModule after tuning: %.3f ms"
          % (f_timer_after(a_nd, b_nd, c_nd).mean * 1000))
    np.testing.assert_allclose(c_nd.numpy(), c_mm, rtol=1e-5)


def test_cells_29_to_32_tune_with_the_default_space(tmp_path, capsys):
    from engine.tvm import meta_schedule as ms

    database = ms.tune_tir(
        mod=MyModule,
        target="llvm --num-cores=1",
        max_trials_global=TRIALS,
        num_trials_per_iter=TRIALS,
        work_dir=str(tmp_path / "tune_tmp"),
    )
    sch = ms.tir_integration.compile_tir(database, MyModule, "llvm --num-cores=1")

    lib = tvm.compile(sch.mod, target="llvm")                     # cell 30
    f_timer_after = lib.mod.time_evaluator("main", tvm.cpu())
    print("Time cost of MyModule after tuning: %.3f ms"
          % (f_timer_after(a_nd, b_nd, c_nd).mean * 1000))
    np.testing.assert_allclose(c_nd.numpy(), c_mm, rtol=1e-5)

    capsys.readouterr()
    sch.trace.show()                                              # cell 31
    assert 'sch.get_sblock(name="C", func_name="main")' in capsys.readouterr().out
    code2html(sch.mod.script())                                   # cell 32
    check(sch)


# ---------------------------------------------------------------- end to end (cells 33-46)
class_names = ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat',
               'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot']

# cell 33 (offline): a random image instead of FashionMNIST's; cell 34 (matplotlib) left out
_rng = np.random.default_rng(0)
img = _rng.random((1, 28, 28), dtype=np.float32)
# cells 35-36 (offline): random weights of the trained ones' shapes
mlp_params = {k: (_rng.standard_normal(shape) * 0.1).astype("float32")
              for k, shape in SHAPES.items()}

data_nd = tvm.runtime.tensor(img.reshape(1, 784))
nd_params = {k: tvm.runtime.tensor(v) for k, v in mlp_params.items()}


def numpy_mlp(data, w0, b0, w1, b1):
    lv0 = data @ w0.T + b0
    lv1 = np.maximum(lv0, 0)
    lv2 = lv1 @ w1.T + b1
    return lv2


def _expected():
    return numpy_mlp(img.reshape(1, 784), mlp_params["w0"], mlp_params["b0"],
                     mlp_params["w1"], mlp_params["b1"])


@tvm.script.ir_module
class MyModuleMixture:
    @T.prim_func
    def linear0(X: T.Buffer((1, 784), "float32"),
                W: T.Buffer((128, 784), "float32"),
                B: T.Buffer((128,), "float32"),
                Z: T.Buffer((1, 128), "float32")):
        T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
        Y = T.alloc_buffer((1, 128), "float32")
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]

        for i, j in T.grid(1, 128):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @R.function
    def main(x: R.Tensor((1, 784), "float32"),
             w0: R.Tensor((128, 784), "float32"),
             b0: R.Tensor((128,), "float32"),
             w1: R.Tensor((10, 128), "float32"),
             b1: R.Tensor((10,), "float32")):
        with R.dataflow():
            lv0 = R.call_dps_packed("linear0", (x, w0, b0), R.Tensor((1, 128), dtype="float32"))
            lv1 = R.call_dps_packed("env.relu", (lv0,), R.Tensor((1, 128), dtype="float32"))
            out = R.call_dps_packed("env.linear", (lv1, w1, b1), R.Tensor((1, 10), dtype="float32"))
            R.output(out)
        return out


@tvm.register_global_func("env.linear", override=True)
def numpy_linear(x: tvm.runtime.Tensor,
                 w: tvm.runtime.Tensor,
                 b: tvm.runtime.Tensor,
                 out: tvm.runtime.Tensor):
    np.matmul(x.numpy(), w.numpy().T, out=out)
    np.add(out, b.numpy(), out=out)


@tvm.register_global_func("env.relu", override=True)
def lnumpy_relu(x: tvm.runtime.Tensor,
                out: tvm.runtime.Tensor):
    np.maximum(x.numpy(), 0.0, out=out)


@pytest.fixture(autouse=True)
def _registered():
    """The cells' registered functions (other test files remove theirs, of these names)."""
    tvm.register_global_func("env.linear", numpy_linear, override=True)
    tvm.register_global_func("env.relu", lnumpy_relu, override=True)


def test_cells_39_to_41_the_mixture_module():
    MyModuleWithParams = relax.transform.BindParams("main", nd_params)(MyModuleMixture)

    target = tvm.target.Target("llvm", host="llvm")               # cell 40
    ex = tvm.compile(MyModuleWithParams, target)
    vm = relax.VirtualMachine(ex, tvm.cpu())

    nd_res = vm["main"](data_nd)

    pred_kind = np.argmax(nd_res.numpy(), axis=1)
    print("MyModuleWithParams Prediction:", class_names[pred_kind[0]])
    np.testing.assert_allclose(nd_res.numpy(), _expected(), rtol=1e-4, atol=1e-4)

    ftimer = vm.module.time_evaluator("main", tvm.cpu(), number=100)   # cell 41

    print("MyModuleWithParams time-cost: %g ms" % (ftimer(data_nd).mean * 1000))


def test_cells_42_to_46_tune_linear0_and_replace_it(tmp_path):
    from engine.tvm import meta_schedule as ms

    mod_linear = tvm.IRModule.from_expr(MyModuleMixture["linear0"].with_attr("global_symbol", "main"))  # noqa: E501
    assert "def main(" in _text(code2html(mod_linear.script()))

    database = ms.tune_tir(                                       # cell 43
        mod=mod_linear,
        target="llvm --num-cores=1",
        max_trials_global=TRIALS,
        num_trials_per_iter=TRIALS,
        work_dir=str(tmp_path / "tune_tmp"),
    )
    sch = ms.tir_integration.compile_tir(database, mod_linear, "llvm --num-cores=1")
    assert len(sch.trace.insts) > 0                               # a tuned program

    MyModuleWithParams2 = relax.transform.BindParams("main", nd_params)(MyModuleMixture)
    new_func = sch.mod["main"].with_attr("global_symbol", "linear0")
    gv = MyModuleWithParams2.get_global_var("linear0")
    MyModuleWithParams2.update_func(gv, new_func)
    text = _text(code2html(MyModuleWithParams2.script()))
    assert MyModuleWithParams2["linear0"] is new_func             # replaced, in place
    assert "def linear0(" in text

    target = tvm.target.Target("llvm", host="llvm")               # cell 45
    ex = tvm.compile(MyModuleWithParams2, target)
    vm = relax.VirtualMachine(ex, tvm.cpu())

    nd_res = vm["main"](data_nd)

    pred_kind = np.argmax(nd_res.numpy(), axis=1)
    print("MyModuleWithParams2 Prediction:", class_names[pred_kind[0]])
    np.testing.assert_allclose(nd_res.numpy(), _expected(), rtol=1e-4, atol=1e-4)

    ftimer = vm.module.time_evaluator("main", tvm.cpu(), number=50)    # cell 46

    print("MyModuleWithParams2 time-cost: %g ms" % (ftimer(data_nd).mean * 1000))


# ---------------------------------------------------------------- the 2022 spelling
@tvm.script.ir_module
class MyModuleMixture2022:
    @T.prim_func
    def linear0(X: T.Buffer[(1, 784), "float32"],
                W: T.Buffer[(128, 784), "float32"],
                B: T.Buffer[(128,), "float32"],
                Z: T.Buffer[(1, 128), "float32"]):
        T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
        Y = T.alloc_buffer((1, 128), "float32")
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]

        for i, j in T.grid(1, 128):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @R.function
    def main(x: Tensor((1, 784), "float32"),  # noqa: F821 - TVMScript's annotation
             w0: Tensor((128, 784), "float32"),  # noqa: F821
             b0: Tensor((128,), "float32"),  # noqa: F821
             w1: Tensor((10, 128), "float32"),  # noqa: F821
             b1: Tensor((10,), "float32")):  # noqa: F821
        with R.dataflow():
            lv0 = R.call_tir("linear0", (x, w0, b0), (1, 128), dtype="float32")
            lv1 = R.call_tir("env.relu", (lv0,), (1, 128), dtype="float32")
            out = R.call_tir("env.linear", (lv1, w1, b1), (1, 10), dtype="float32")
            R.output(out)
        return out


def test_course_2022_spelling(tmp_path, capsys):
    """The 2022 course: ``tune_tir(..., config=ms.TuneConfig(...), task_name="main")``
    returning the schedule, ``sch.mod.show()``, ``tvm.build`` and ``rt.time_evaluator``,
    ``R.call_tir("linear0", ...)`` of the module's own function by name, ``relax.vm.build``."""
    from engine.tvm import meta_schedule as ms

    sch = ms.tune_tir(
        mod=MyModule,
        target="llvm --num-cores=1",
        config=ms.TuneConfig(
            max_trials_global=TRIALS,
            num_trials_per_iter=TRIALS,
        ),
        space=ms.space_generator.ScheduleFn(stochastic_schedule_mm),
        work_dir=str(tmp_path / "tune_tmp"),
        task_name="main",
    )
    sch.trace.show()
    capsys.readouterr()
    sch.mod.show()
    assert 'T.block("C_init")' in capsys.readouterr().out
    lib = tvm.build(sch.mod, target="llvm")
    f_timer_after = lib.time_evaluator("main", tvm.cpu())
    c = tvm.nd.array(np.zeros((128, 128), dtype="float32"))
    print("Time cost of MyModule after tuning: %.3f ms"
          % (f_timer_after(tvm.nd.array(a_np), tvm.nd.array(b_np), c).mean * 1000))
    np.testing.assert_allclose(c.numpy(), c_mm, rtol=1e-5)

    params = {k: tvm.nd.array(v) for k, v in mlp_params.items()}
    MyModuleWithParams = relax.transform.BindParams("main", params)(MyModuleMixture2022)
    ex = relax.vm.build(MyModuleWithParams, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    nd_res = vm["main"](tvm.nd.array(img.reshape(1, 784)))
    np.testing.assert_allclose(nd_res.numpy(), _expected(), rtol=1e-4, atol=1e-4)


def test_update_func_refuses_what_names_no_function():
    mod = relax.transform.BindParams("main", nd_params)(MyModuleMixture)
    with pytest.raises(TypeError, match="GlobalVar"):
        mod.update_func(3, mod["linear0"])

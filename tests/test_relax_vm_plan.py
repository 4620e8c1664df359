"""The virtual machine's compiled plan (engine/relax/vm/plan.py, engine/runtime/sequence.py):
a function of ``R.call_tir`` calls runs as one native call from its third call on, with
the same results as the instruction loop (compared with numpy, call after call), the same
one-sentence errors for bad arguments, fresh returned tensors, its own arena for a
concurrent call, and the instruction loop kept (with the reason) for what it cannot plan."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine
from engine import relax
from engine.relax.vm.plan import COMPILE_AT_CALL, NativePlan
from relax_listings import MY_MODULE, MY_MODULE_MIXTURE

KERNELS = '''
    @T.prim_func
    def shift(X: T.Buffer((4, 16), "float32"), Y: T.Buffer((4, 16), "float32")):
        for i, j in T.grid(4, 16):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj] - T.float32(1), T.float32(-3))

    @T.prim_func
    def mix(A: T.Buffer((4, 16), "float32"), B: T.Buffer((4, 16), "float32"),
            C: T.Buffer((4, 16), "float32")):
        for i, j in T.grid(4, 16):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] * T.float32(0.5) + B[vi, vj] - T.float32(1)
'''


def _shift(x):
    return np.maximum(x - 1, -3).astype("float32")


def _mix(a, b):
    return (a * np.float32(0.5) + b - np.float32(1)).astype("float32")


def _module(main: str) -> str:
    return "@tvm.script.ir_module\nclass M:" + KERNELS + "\n" + main


CHAIN = _module('''
    @R.function
    def main(x: Tensor((4, 16), "float32")):
        with R.dataflow():
            a = R.call_tir(shift, (x,), (4, 16), dtype="float32")
            b = R.call_tir(shift, (a,), (4, 16), dtype="float32")
            c = R.call_tir(mix, (a, b), (4, 16), dtype="float32")
            d = R.call_tir(shift, (c,), (4, 16), dtype="float32")
            R.output(d)
        return d
''')


def _chain(x):
    a = _shift(x)
    return _shift(_mix(a, _shift(a)))


def _inputs(seed: int, n: int = 1):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-4, 4, (4, 16)).astype("float32") for _ in range(n)]


def _planned_vm(text: str):
    ex = relax.build(engine.parse(text))
    plan = ex.native_plan("main")
    assert isinstance(plan, NativePlan), plan
    return ex, relax.VirtualMachine(ex)


def test_the_plan_equals_numpy_call_after_call_and_returns_fresh_tensors():
    ex, vm = _planned_vm(CHAIN)
    main = vm["main"]
    xs = _inputs(1, 3 * COMPILE_AT_CALL)
    outs = [main(x) for x in xs]                 # the loop first, then the plan
    assert main._native is not None
    for x, out in zip(xs, outs):                 # none overwritten by a later call
        assert isinstance(out, engine.nd.NDArray) and out.flags.writeable
        np.testing.assert_array_equal(out, _chain(x))
    assert len({id(o) for o in outs}) == len(outs)
    stats = ex.memory_plan("main")               # the arena is the instruction loop's
    assert stats["planned"] == 3 and stats["escaping"] == 1


def test_bad_arguments_get_the_same_sentences_once_planned():
    _, vm = _planned_vm(CHAIN)
    main = vm["main"]
    for x in _inputs(2, COMPILE_AT_CALL):
        main(x)
    assert main._native is not None
    x = _inputs(3)[0]
    with pytest.raises(engine.ArgumentError, match=r"shape mismatch: argument 0 \(x\) must "
                                                   r"be a float32 tensor of shape \(4, 16\), "
                                                   r"got shape \(64,\)"):
        main(x.reshape(64))
    with pytest.raises(engine.ArgumentError, match=r"argument 0 \(x\) must be a float32 "
                                                   r"tensor.*got float64"):
        main(x.astype("float64"))
    with pytest.raises(engine.ArgumentError, match=r"takes 1 argument\(s\) \(x\), got 2"):
        main(x, x)
    with pytest.raises(engine.ArgumentError, match="must be an array"):
        main(x.tolist())
    # accepted after conversion: a transposed copy's transpose, an NDArray, a read-only one
    fortran = np.asfortranarray(x)
    ro = x.copy()
    ro.flags.writeable = False
    for given in (fortran, engine.nd.array(x), ro):
        np.testing.assert_array_equal(main(given), _chain(x))


def test_returned_inputs_and_tuples_keep_the_loops_semantics():
    text = _module('''
    @R.function
    def main(x: Tensor((4, 16), "float32"), y: Tensor((4, 16), "float32")):
        with R.dataflow():
            a = R.call_tir(mix, (x, y), (4, 16), dtype="float32")
            b = R.call_tir(shift, (a,), (4, 16), dtype="float32")
            t = (b, x, a)
            R.output(t)
        return t
''')
    _, vm = _planned_vm(text)
    for x, y in zip(_inputs(4, 4), _inputs(5, 4)):
        b, same_x, a = vm["main"](x, y)
        np.testing.assert_array_equal(a, _mix(x, y))
        np.testing.assert_array_equal(b, _shift(_mix(x, y)))
        assert np.shares_memory(same_x, x)        # an argument returned is the argument


def test_what_cannot_be_planned_says_why_and_still_runs():
    mixture = relax.build(engine.parse(MY_MODULE_MIXTURE))
    assert "registered function 'env.relu'" in mixture.native_plan("main")
    symbolic = _module('''
    @T.prim_func
    def relu_n(var_x: T.handle, var_y: T.handle):
        n = T.int64()
        X = T.match_buffer(var_x, (n, 16), "float32")
        Y = T.match_buffer(var_y, (n, 16), "float32")
        for i, j in T.grid(n, 16):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @R.function
    def main(x: R.Tensor(("n", 16), "float32")):
        n = T.int64()
        with R.dataflow():
            a = R.call_tir(relu_n, (x,), R.Tensor((n, 16), "float32"))
            R.output(a)
        return a
''')
    ex = relax.build(engine.parse(symbolic))
    assert "no constant tensor shape" in ex.native_plan("main")
    vm = relax.VirtualMachine(ex)
    x = _inputs(6)[0]
    for _ in range(COMPILE_AT_CALL + 1):
        np.testing.assert_array_equal(vm["main"](x), np.maximum(x, 0))


def test_the_course_mlp_with_bound_weights_runs_planned():
    rng = np.random.default_rng(7)
    params = {"w0": rng.standard_normal((128, 784)).astype("float32") / 28,
              "b0": rng.standard_normal((128,)).astype("float32"),
              "w1": rng.standard_normal((10, 128)).astype("float32") / 11,
              "b1": rng.standard_normal((10,)).astype("float32")}
    mod = relax.transform.BindParams("main", params)(engine.parse(MY_MODULE))
    ex = relax.build(mod)
    assert isinstance(ex.native_plan("main"), NativePlan)
    vm = relax.VirtualMachine(ex)
    p = {k: v.astype("float64") for k, v in params.items()}
    for k in range(2 * COMPILE_AT_CALL):
        x = rng.standard_normal((1, 784)).astype("float32")
        want = np.maximum(x @ p["w0"].T + p["b0"], 0) @ p["w1"].T + p["b1"]
        np.testing.assert_allclose(vm["main"](x), want, rtol=1e-4, atol=1e-4)
    timing = vm.time_evaluator("main", engine.cpu(), number=3, repeat=2)(x)
    assert timing.mean > 0


def test_concurrent_calls_each_get_their_own_arena():
    _, vm = _planned_vm(CHAIN)
    main = vm["main"]
    for x in _inputs(8, COMPILE_AT_CALL):
        main(x)
    bad = []

    def worker(seed: int) -> None:
        for x in _inputs(seed, 150):
            if not np.array_equal(main(x), _chain(x)):
                bad.append(seed)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


@pytest.mark.parametrize("switch", ["ENGINE_VM_PLAN", "ENGINE_COMPILED_CHECKS"])
def test_the_plan_turned_off_keeps_the_instruction_loop(monkeypatch, switch):
    monkeypatch.setenv(switch, "0")
    vm = relax.VirtualMachine(relax.build(engine.parse(CHAIN)))
    for x in _inputs(9, COMPILE_AT_CALL + 2):
        np.testing.assert_array_equal(vm["main"](x), _chain(x))
    assert vm["main"]._native is None


@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100), st.booleans()),
                min_size=1, max_size=8), st.data())
def test_random_kernel_graphs_planned_equal_numpy(raw, draw):
    """Random dataflow graphs of the two kernels, some results returned (a tuple): the
    planned machine equals a direct numpy evaluation on every call, so no planned arena
    block is clobbered while it is live and no returned tensor is shared between calls."""
    lines = ['    @R.function',
             '    def main(p0: Tensor((4, 16), "float32"), p1: Tensor((4, 16), "float32")):',
             '        with R.dataflow():']
    names, edges = ["p0", "p1"], []
    for k, (i, j, unary) in enumerate(raw):
        i, j = i % len(names), j % len(names)
        edges.append((i, j, unary))
        call = f"R.call_tir(shift, ({names[i]},)" if unary else \
            f"R.call_tir(mix, ({names[i]}, {names[j]})"
        lines.append(f'            v{k} = {call}, (4, 16), dtype="float32")')
        names.append(f"v{k}")
    outputs = sorted(set(draw.draw(st.lists(st.integers(0, len(edges) - 1), min_size=1,
                                            max_size=3))))
    lines += [f"            t = ({', '.join(names[2 + o] for o in outputs)},)",
              "            R.output(t)", "        return t"]
    ex, vm = _planned_vm(_module("\n".join(lines) + "\n"))
    results = []
    for call in range(COMPILE_AT_CALL + 2):
        p = _inputs(100 + call, 2)
        vals = list(p)
        for i, j, unary in edges:
            vals.append(_shift(vals[i]) if unary else _mix(vals[i], vals[j]))
        results.append(([vals[2 + o] for o in outputs], vm["main"](*p)))
    assert vm["main"]._native is not None
    for want, got in results:
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g, w)

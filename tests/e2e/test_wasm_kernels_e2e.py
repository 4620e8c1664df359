"""Kernels compiled for wasm32 (engine.wasm: llvmlite's WebAssembly backend, wasm-ld) run in
Debian's Chromium through the page's own loader (static/engine_wasm.js) and match numpy.

The program covers what a wasm build must supply itself: a parallel loop (the serial
launch), a vectorized loop (SIMD), an intermediate over the stack limit (the runtime's
allocator), libm calls imported from JavaScript (expf, tanhf, erff) and an expansion
(sigmoid). Both ways to the browser: engine.wasm.kernels_wasm and rt.export_library(..., target="wasm32")."""
from __future__ import annotations

import base64
import math
import os
import shutil

import numpy as np
import pytest

import engine

pytestmark = pytest.mark.e2e

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOADER = os.path.join(ROOT, "static", "engine_wasm.js")

PROGRAM = '''
@T.prim_func
def act(A: T.Buffer((64, 300), "float32"), B: T.Buffer((64, 300), "float32")):
    C = T.alloc_buffer((64, 300), "float32")
    for i, j in T.grid(64, 300):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.exp(A[vi, vj]) * T.float32(0.5)
    for i, j in T.grid(64, 300):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.tanh(C[vi, vj]) + T.erf(A[vi, vj]) + T.sigmoid(C[vi, vj])
'''

RUN = """async ([b64, a, n, symbol]) => {
  const bytes = EngineWasm.fromBase64(b64);
  const valid = WebAssembly.validate(bytes);
  const m = await EngineWasm.instantiate(bytes);
  const A = m.alloc(4 * n), B = m.alloc(4 * n);
  m.write(A, new Float32Array(a));
  const rcs = [];
  for (let k = 0; k < 3; k++) rcs.push(m.exports[symbol](A, B));  // freed each call
  return {valid, rcs, out: Array.from(m.read(B, n)),
          pages: m.memory.buffer.byteLength / 65536};
}"""


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x.astype("float64"))


def _scheduled():
    sch = engine.Schedule(engine.parse(PROGRAM))
    i, j = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)
    _, j1 = sch.split(j, factors=[None, 4])
    sch.vectorize(j1)
    return sch.mod


@pytest.fixture(scope="module", params=["kernels_wasm", "export_library"])
def kernel_bytes(request, tmp_path_factory):
    """The kernel as engine.wasm compiles it (exported ``engine_fn_act``), or as
    ``rt.export_library("act.wasm", target="wasm32")`` exports a build (``act_act``)."""
    if shutil.which("wasm-ld") is None:
        pytest.skip("wasm-ld is not installed (Debian's lld; ./run-tests.sh installs it)")
    if request.param == "kernels_wasm":
        from engine.wasm import kernels_wasm
        data, symbols = kernels_wasm(_scheduled())
        assert symbols == {"act": "engine_fn_act"}
        symbol = "engine_fn_act"
    else:
        path = tmp_path_factory.mktemp("act") / "act.wasm"
        lib = engine.build(_scheduled()).export_library(str(path), target="wasm32")
        symbol = lib.metadata["functions"]["act"]["symbol"]
        assert symbol == "act_act"
        data = path.read_bytes()
    assert data[:4] == b"\0asm"
    return data, symbol


def test_wasm_kernel_validates_and_matches_numpy_in_chromium(browser, kernel_bytes):
    data, symbol = kernel_bytes
    page = browser.new_page()
    try:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.add_script_tag(path=LOADER)
        a = np.random.default_rng(0).uniform(-3, 2, (64, 300)).astype("float32")
        got = page.evaluate(RUN, [base64.b64encode(data).decode(), a.ravel().tolist(),
                                  a.size, symbol])
        assert not errors, errors
    finally:
        page.close()
    assert got["valid"] is True
    assert got["rcs"] == [0, 0, 0]
    c = np.exp(a.astype("float64")) * 0.5
    ref = np.tanh(c) + _erf(a) + 1 / (1 + np.exp(-c))
    np.testing.assert_allclose(np.array(got["out"]).reshape(64, 300), ref, rtol=2e-6, atol=2e-6)


def test_wasm_link_refuses_an_unknown_import():
    """A module calling a function neither the runtime nor the page provides does not link:
    a sentence, not a module that fails in the browser."""
    if shutil.which("wasm-ld") is None:
        pytest.skip("wasm-ld is not installed")
    from engine.lower.errors import BuildError
    from engine.wasm import link_wasm, wasm_object
    ll = ("declare float @mystery(float)\n"
          "define float @f(float %x) {\n  %r = call float @mystery(float %x)\n  ret float %r\n}\n")
    with pytest.raises(BuildError, match="mystery"):
        link_wasm([wasm_object(ll)], ["f"])


SYMBOLIC = '''
@T.prim_func
def f(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 64), "float32")
    B = T.match_buffer(b, (n, 64), "float32")
    C = T.alloc_buffer((n, 64), "float32")
    for i, j in T.grid(n, 64):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(n, 64):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = C[vi, vj] + T.float32(1)
'''

RUN_SYMBOLIC = """async ([b64, n]) => {
  const m = await EngineWasm.instantiate(EngineWasm.fromBase64(b64));
  const A = m.alloc(4 * n * 64), B = m.alloc(4 * n * 64);
  const a = new Float32Array(n * 64).map((_, i) => i % 97);
  m.write(A, a);
  const before = m.memory.buffer.byteLength;
  const rcs = [m.exports.engine_fn_f(A, B, n)];
  const after = m.memory.buffer.byteLength;
  for (let k = 0; k < 5; k++) rcs.push(m.exports.engine_fn_f(A, B, n));
  const same = m.memory.buffer.byteLength === after;   // each call's intermediate was freed
  const b = m.read(B, n * 64);
  let wrong = 0;
  for (let i = 0; i < n * 64; i++) if (b[i] !== a[i] * 2 + 1) wrong++;
  const huge = m.exports.engine_fn_f(A, B, 2 ** 30);   // 256 GiB of intermediate: refused
  return {rcs, wrong, grew: after > before, same, huge};
}"""


def test_symbolic_sizes_grow_the_memory_and_refuse_what_cannot_fit(browser):
    """A symbolic size (passed after the pointers) and an intermediate of that size: the
    runtime's allocator grows the module's memory (768 KiB here), frees it after each
    call, and a size that cannot be allocated makes the kernel return -1."""
    if shutil.which("wasm-ld") is None:
        pytest.skip("wasm-ld is not installed")
    from engine.wasm import kernels_wasm
    data, _ = kernels_wasm(engine.parse(SYMBOLIC))
    page = browser.new_page()
    try:
        page.add_script_tag(path=LOADER)
        got = page.evaluate(RUN_SYMBOLIC, [base64.b64encode(data).decode(), 3000])
    finally:
        page.close()
    assert got == {"rcs": [0] * 6, "wrong": 0, "grew": True, "same": True, "huge": -1}


HALF = '''
@T.prim_func
def h(A: T.Buffer((256,), "float16"), B: T.Buffer((256,), "float16"),
      C: T.Buffer((256,), "float32")):
    for i in range(256):
        with T.block("B"):
            vi = T.axis.spatial(256, i)
            B[vi] = A[vi] * T.float16(3) + T.float16(0.1)
            C[vi] = T.Cast("float32", A[vi]) * T.float32(0.5)
'''

RUN_HALF = """async ([b64, bits]) => {
  const m = await EngineWasm.instantiate(EngineWasm.fromBase64(b64));
  const A = m.alloc(2 * bits.length), B = m.alloc(2 * bits.length), C = m.alloc(4 * bits.length);
  new Uint16Array(m.memory.buffer, A, bits.length).set(bits);
  const rc = m.exports.engine_fn_h(A, B, C);
  return {rc, b: Array.from(new Uint16Array(m.memory.buffer, B, bits.length)),
          c: Array.from(m.read(C, bits.length))};
}"""


def test_float16_kernels_use_the_pages_conversions(browser):
    """float16 arithmetic (LLVM calls compiler-rt's __extendhfsf2/__truncsfhf2 on wasm32,
    given by the page's loader): the same bits as the engine's interpreter."""
    if shutil.which("wasm-ld") is None:
        pytest.skip("wasm-ld is not installed")
    from engine.wasm import kernels_wasm
    mod = engine.parse(HALF)
    data, _ = kernels_wasm(mod)
    rng = np.random.default_rng(0)
    a = np.concatenate([rng.standard_normal(250) * np.exp(rng.uniform(-8, 8, 250)),
                        [0.0, -0.0, 60000.0, 1e-7, -3.0, 65504.0]]).astype("float16")
    b, c = np.zeros(256, "float16"), np.zeros(256, "float32")
    engine.interpret(mod, "h", a, b, c)
    page = browser.new_page()
    try:
        page.add_script_tag(path=LOADER)
        got = page.evaluate(RUN_HALF, [base64.b64encode(data).decode(),
                                       a.view("uint16").tolist()])
    finally:
        page.close()
    assert got["rc"] == 0
    assert got["b"] == b.view("uint16").tolist()
    np.testing.assert_array_equal(np.array(got["c"], "float32"), c)


def test_the_loaders_float16_conversions_are_numpys_on_every_half(browser):
    """Every float16 to float32, and float32 to float16 of every finite half, every midpoint
    between neighbours (ties to even) and values beyond the range: numpy's bits."""
    halves = np.arange(65536, dtype="uint16").view("float16")
    finite = halves[np.isfinite(halves)].astype("float64")
    pos = np.sort(finite[finite >= 0])
    mids = (pos[:-1] + pos[1:]) / 2
    xs = np.concatenate([finite, mids, -mids, [65520.0, 1e5, -1e6, 2.0 ** -26, 1e-30]])
    xs = xs.astype("float32")
    page = browser.new_page()
    try:
        page.add_script_tag(path=LOADER)
        got = page.evaluate("""(xs) => ({
            trunc: xs.map(EngineWasm.floatToHalf),
            extend: Array.from({length: 65536}, (_, i) => EngineWasm.halfToFloat(i))
                         .map(v => Number.isFinite(v) ? v : String(v))})""", xs.tolist())
    finally:
        page.close()
    with np.errstate(over="ignore"):
        assert got["trunc"] == xs.astype("float16").view("uint16").tolist()
    extend = np.array([float(v) for v in got["extend"]])
    np.testing.assert_array_equal(extend, halves.astype("float64"))

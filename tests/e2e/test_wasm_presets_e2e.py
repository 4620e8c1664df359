"""The explorer's CPU presets (the course's and the tiled/best schedules of matmul, mm_relu
and conv2d: packing, parallel loops, vectors, unrolled micro-kernels, padding under a
condition), at small sizes, compiled for wasm32 by engine.wasm and run in Debian's Chromium
against the workloads' numpy references — the code generator's output as WebAssembly, not
only the MLP's."""
from __future__ import annotations

import base64
import os
import shutil

import numpy as np
import pytest

import engine
import engine.presets as presets

pytestmark = pytest.mark.e2e

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOADER = os.path.join(ROOT, "static", "engine_wasm.js")

SMALL = {"mm_relu": dict(n=64), "matmul": dict(n=64),
         "conv2d": dict(batch=1, in_channels=8, out_channels=16, size=14, kernel=3, pad=1,
                        stride=1)}
CPU_PRESETS = [n for n in presets.names() if presets.info(n).workload in SMALL
               and not getattr(presets.info(n), "target", None)]

RUN = """async ([b64, symbol, inputs, outSize]) => {
  const m = await EngineWasm.instantiate(EngineWasm.fromBase64(b64));
  const ptrs = inputs.map(a => { const p = m.alloc(4 * a.length); m.write(p, a); return p; });
  const out = m.alloc(4 * outSize);
  const rc = m.exports[symbol](...ptrs, out);
  return {rc, out: Array.from(m.read(out, outSize))};
}"""


def test_the_cpu_presets_are_all_here():
    assert len(CPU_PRESETS) >= 8


@pytest.mark.parametrize("name", CPU_PRESETS)
def test_preset_compiled_for_wasm_matches_numpy_in_chromium(browser, name):
    if shutil.which("wasm-ld") is None:
        pytest.skip("wasm-ld is not installed (Debian's lld; ./run-tests.sh installs it)")
    from engine.wasm import kernels_wasm
    info = presets.info(name)
    params = SMALL[info.workload]
    sch = presets.get(name, **params)
    data, symbols = kernels_wasm(sch.mod)
    (func, symbol), = symbols.items()
    args = engine.workloads.random_args(info.workload, **params)
    ref = engine.workloads.reference(info.workload, **params)(*args[:-1])
    page = browser.new_page()
    try:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.add_script_tag(path=LOADER)
        got = page.evaluate(RUN, [base64.b64encode(data).decode(), symbol,
                                  [a.ravel().tolist() for a in args[:-1]], args[-1].size])
        assert not errors, errors
    finally:
        page.close()
    assert got["rc"] == 0
    np.testing.assert_allclose(np.array(got["out"]).reshape(ref.shape), ref,
                               rtol=1e-4, atol=1e-4)

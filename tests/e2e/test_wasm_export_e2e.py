"""``ex.export_library("mlp.wasm", target="wasm32")``: the course's MLP (fused, scheduled:
parallel and vectorized kernels) as one .wasm — kernels, plan, weights — run in Debian's
Chromium through static/engine_wasm.js on the test images, in batches of 2, against
numpy's forward pass; its metadata read from the module's own memory."""
from __future__ import annotations

import base64
import json
import os
import shutil

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOADER = os.path.join(ROOT, "static", "engine_wasm.js")

RUN = """async ([b64, rows, n_in, n_out, batch]) => {
  const m = await EngineWasm.instantiate(EngineWasm.fromBase64(b64));
  const p = m.exports.engine_deploy_metadata();
  const u8 = new Uint8Array(m.memory.buffer); let e = p; while (u8[e]) e++;
  const meta = new TextDecoder().decode(u8.slice(p, e));
  const x = m.alloc(4 * n_in * batch), y = m.alloc(4 * n_out * batch);
  const outs = [], rcs = [];
  for (let s = 0; s < rows.length; s += batch) {
    const chunk = new Float32Array(n_in * batch);
    for (let k = 0; k < batch && s + k < rows.length; k++) chunk.set(rows[s + k], k * n_in);
    m.write(x, chunk);
    rcs.push(m.exports.mlp_main(x, y));
    const got = m.read(y, n_out * batch);
    for (let k = 0; k < batch && s + k < rows.length; k++)
      outs.push(Array.from(got.subarray(k * n_out, (k + 1) * n_out)));
  }
  return {meta, outs, rcs, exports: Object.keys(m.exports).sort()};
}"""


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    if shutil.which("wasm-ld") is None:
        pytest.skip("wasm-ld is not installed (Debian's lld; ./run-tests.sh installs it)")
    from engine import relax
    from engine.models import zoo
    from engine.models.pipeline import stage_module
    model = zoo.get("mlp", str(tmp_path_factory.mktemp("mlp")))
    ex = relax.build(stage_module(model.build(2), "fused+scheduled")[0], target="llvm")
    path = tmp_path_factory.mktemp("wasm") / "mlp.wasm"
    lib = ex.export_library(str(path), target="wasm32")
    return model, path, lib


def test_exported_mlp_wasm_matches_numpy_in_chromium(browser, mlp):
    model, path, lib = mlp
    data = path.read_bytes()
    assert data[:8] == b"\0asm\x01\0\0\0"
    assert lib.metadata["target"]["triple"] == "wasm32-unknown-unknown"
    images = model.test_images[:9].reshape(9, -1).astype("float32")   # 9: a padded last batch
    page = browser.new_page()
    try:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.add_script_tag(path=LOADER)
        got = page.evaluate(RUN, [base64.b64encode(data).decode(), images.tolist(), 784, 10, 2])
        assert not errors, errors
    finally:
        page.close()
    assert got["rcs"] == [0] * 5
    assert got["exports"] == ["engine_deploy_metadata", "engine_wasm_alloc", "memory",
                              "mlp_main", "mlp_metadata"]
    meta = json.loads(got["meta"])
    assert meta["functions"]["main"]["args"][0]["shape"] == [2, 784]
    ref = model.numpy_fn(images)
    np.testing.assert_allclose(np.array(got["outs"]), ref, rtol=1e-5, atol=1e-4)
    assert (np.array(got["outs"]).argmax(1) == ref.argmax(1)).all()


def test_wasm32_export_without_wasm_ld_says_how_to_install_it(mlp, monkeypatch, tmp_path):
    """No linker on the PATH: one sentence naming the package, no half-written file."""
    from engine import relax
    from engine.deploy import DeployError
    from engine.lower.errors import BuildError
    model, _, _ = mlp
    from engine.models.pipeline import stage_module
    ex = relax.build(stage_module(model.build(1), "fused")[0], target="llvm")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises((BuildError, DeployError), match="lld"):
        ex.export_library(str(tmp_path / "m.wasm"), target="wasm32")
    assert not (tmp_path / "m.wasm").exists()

"""The course's MLP in the browser: the ``.wasm`` of ``ex.export_library(..., target="wasm32")``
run in Debian's Chromium (Playwright, headless) against the same model on this machine, in
the same run.

    python benchmarks/bench_wasm.py                 (batch 1; fused + scheduled)
    python benchmarks/bench_wasm.py --batch 8 --stage fused

Printed: the file's size (code and weights apart), the export's time, the page's time to
compile and instantiate it, the browser's time per inference (performance.now over repeated
calls of ``<prefix>_main``: the best of 5 rounds of at least 0.2 s) and, measured here the
same way, the engine's own virtual machine (native code, the thread pool) and numpy's
forward pass; the ratios browser / engine and browser / numpy; and the largest difference
of the browser's outputs from numpy's over the test images.
"""
from __future__ import annotations

import argparse
import base64
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LOADER = ROOT / "static" / "engine_wasm.js"
CHROMIUM = "/usr/bin/chromium"

PAGE = """async ([b64, rows, nIn, nOut, batch]) => {
  const t0 = performance.now();
  const m = await EngineWasm.instantiate(EngineWasm.fromBase64(b64));
  const load = (performance.now() - t0) / 1000;
  const x = m.alloc(4 * nIn * batch), y = m.alloc(4 * nOut * batch);
  const outs = [];
  for (let s = 0; s < rows.length; s += batch) {
    const chunk = new Float32Array(nIn * batch);
    for (let k = 0; k < batch && s + k < rows.length; k++) chunk.set(rows[s + k], k * nIn);
    m.write(x, chunk);
    if (m.exports.mlp_main(x, y) !== 0) throw new Error("mlp_main failed");
    const got = m.read(y, nOut * batch);
    for (let k = 0; k < batch && s + k < rows.length; k++)
      outs.push(Array.from(got.subarray(k * nOut, (k + 1) * nOut)));
  }
  let n = 1; const w = performance.now();
  while (performance.now() - w < 200) { m.exports.mlp_main(x, y); n++; }
  let best = Infinity;
  for (let r = 0; r < 5; r++) {
    const a = performance.now();
    for (let i = 0; i < n; i++) m.exports.mlp_main(x, y);
    best = Math.min(best, (performance.now() - a) / n);
  }
  return {load, perCall: best / 1000, outs};
}"""


def best_of(fn, min_s: float = 0.2, rounds: int = 5) -> float:
    n, t0 = 1, time.perf_counter()
    fn()
    while time.perf_counter() - t0 < min_s:
        fn()
        n += 1
    best = float("inf")
    for _ in range(rounds):
        a = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - a) / n)
    return best


def _us(s: float) -> str:
    return f"{s * 1e6:9.1f} us"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--stage", default="fused+scheduled",
                    choices=["unscheduled", "scheduled", "fused", "fused+scheduled"])
    args = ap.parse_args()
    from engine import relax
    from engine.models import zoo
    from engine.models.pipeline import stage_module

    model = zoo.get("mlp", os.path.join(tempfile.gettempdir(), "bench-wasm-mlp"))
    ex = relax.build(stage_module(model.build(args.batch), args.stage)[0], target="llvm")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        lib = ex.export_library(os.path.join(tmp, "mlp.wasm"), target="wasm32")
        export_s = time.perf_counter() - t0
        data = Path(lib.path).read_bytes()
    images = model.test_images.reshape(len(model.test_images), -1).astype("float32")
    x = np.ascontiguousarray(images[:args.batch])
    vm = relax.VirtualMachine(ex)["main"]
    engine_s = best_of(lambda: vm(x))
    numpy_s = best_of(lambda: model.numpy_fn(x))

    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_page()
        page.add_script_tag(path=str(LOADER))
        got = page.evaluate(PAGE, [base64.b64encode(data).decode(), images.tolist(), 784, 10,
                                   args.batch])
        version = browser.version
        browser.close()
    outs = np.array(got["outs"])
    ref = model.numpy_fn(images)
    err = float(np.max(np.abs(outs - ref)))
    agree = float((outs.argmax(1) == ref.argmax(1)).mean())
    consts = lib.constants_bytes
    print(f"MLP 784-128-10, {args.stage}, batch {args.batch}; Chromium {version}")
    print(f"  .wasm file           {len(data):9d} bytes (weights {consts}, code and plan "
          f"{len(data) - consts})")
    print(f"  export (wasm32)      {export_s * 1e3:9.1f} ms")
    print(f"  compile+instantiate  {got['load'] * 1e3:9.1f} ms (in the page)")
    print(f"  browser (wasm)       {_us(got['perCall'])} per call of main")
    print(f"  engine VM (native)   {_us(engine_s)} per call (this machine, thread pool)")
    print(f"  numpy                {_us(numpy_s)} per call")
    print(f"  browser / engine     {got['perCall'] / engine_s:9.2f}x")
    print(f"  browser / numpy      {got['perCall'] / numpy_s:9.2f}x")
    print(f"  vs numpy over {len(images)} test images: max |diff| {err:.2e}, "
          f"same class for {agree * 100:.1f}%")


if __name__ == "__main__":
    main()

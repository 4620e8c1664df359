"""The model page's "Run in your browser" in Debian's Chromium against ``python -m app``: the
page's program comes as a .wasm built by a worker (/model/mlp/model.wasm), the page runs the
test images through it — outputs read from the page and compared with numpy's forward pass
of the same weights —, times an inference beside the server's time, and classifies a digit
drawn on the canvas with mouse moves (a zero). Screenshot: test-artifacts/screenshots/model-wasm.png."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """The gallery's MLP as the server trains it (seeded numpy training: the same weights)."""
    from engine.models import zoo
    return zoo.get("mlp", str(tmp_path_factory.mktemp("mlp")))


def _draw_zero(page) -> None:
    page.locator("#wasm-canvas").scroll_into_view_if_needed()
    box = page.locator("#wasm-canvas").bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    rx, ry = box["width"] * 0.22, box["height"] * 0.36
    page.mouse.move(cx, cy - ry)
    page.mouse.down()
    for k in range(1, 41):
        t = 2 * np.pi * k / 40
        page.mouse.move(cx + rx * np.sin(t), cy - ry * np.cos(t), steps=2)
    page.mouse.up()


def test_run_in_your_browser_matches_numpy(page, server, shot, mlp):
    page.goto(server + "/model/mlp?batch=1&fused=1")
    page.wait_for_selector("#wasm-run")
    page.click("#wasm-run")
    page.wait_for_selector("#model-wasm[data-ready], #model-wasm[data-error]", timeout=240_000)
    assert page.get_attribute("#model-wasm", "data-error") is None, \
        page.get_attribute("#model-wasm", "data-error")
    outputs = np.array(json.loads(page.get_attribute("#wasm-outputs", "data-outputs")))
    images = mlp.test_images[:8].reshape(8, -1).astype("float32")
    ref = mlp.numpy_fn(images)
    assert outputs.shape == ref.shape == (8, 10)
    np.testing.assert_allclose(outputs, ref, rtol=1e-5, atol=1e-4)
    shown = [int(t) for t in page.locator(".wasm-pred").all_inner_texts()]
    assert shown == ref.argmax(axis=1).tolist()
    seconds = float(page.get_attribute("#wasm-time", "data-seconds"))
    assert 0 < seconds < 1
    # the server's time of the same program, from the measurement pane, beside it
    page.wait_for_selector("#wasm-server-time[data-seconds]", timeout=240_000)
    assert float(page.get_attribute("#wasm-server-time", "data-seconds")) > 0
    # a digit drawn with the mouse gets a class
    _draw_zero(page)
    page.wait_for_selector("#wasm-canvas[data-class]")
    cls = int(page.get_attribute("#wasm-canvas", "data-class"))
    assert cls == 0, "an ellipse drawn over the canvas's height reads as a zero"
    assert page.inner_text("#wasm-drawn-class") == str(cls)
    drawn = json.loads(page.get_attribute("#wasm-canvas", "data-outputs"))
    assert len(drawn) == 10 and all(np.isfinite(drawn))
    page.locator("#model-wasm").scroll_into_view_if_needed()
    shot(page, "model-wasm")
    # Clear empties the canvas and the class
    page.click("#wasm-clear")
    assert page.get_attribute("#wasm-canvas", "data-class") is None
    assert not page.js_errors, page.js_errors  # type: ignore[attr-defined]


def test_a_program_that_cannot_run_in_the_browser_says_why(page, server):
    """The graph after BindParams alone still has Relax operators the VM runs in numpy: the
    worker refuses to export it and the page shows the sentence (the button stays usable)."""
    page.goto(server + "/model/mlp?batch=1&passes=BindParams")
    page.click("#wasm-run")
    page.wait_for_selector("#model-wasm[data-error]", timeout=240_000)
    text = page.inner_text("#wasm-status")
    assert text.startswith("could not run in your browser:") and "TensorIR" in text
    assert page.is_enabled("#wasm-run")
    assert page.is_hidden("#wasm-cols")
    assert not page.js_errors, page.js_errors  # type: ignore[attr-defined]

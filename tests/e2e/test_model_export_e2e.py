"""The model page's Export in a real Chromium against ``python -m app``: a click on "this
machine (.so)" downloads a zip built by a worker; its library, loaded with the zip's own
ctypes loader, matches the MLP in numpy on the test images.
Screenshot: test-artifacts/screenshots/model-export.png."""
from __future__ import annotations

import importlib.util
import zipfile

import numpy as np
import pytest

pytestmark = pytest.mark.e2e


def test_export_downloads_a_library_that_matches_numpy(page, server, shot, tmp_path):
    from engine.models.mlp import forward, trained_mlp

    page.goto(server + "/model/mlp?batch=1&fused=1")
    page.wait_for_selector("#model-export #export-host")
    page.locator("#model-export").scroll_into_view_if_needed()
    shot(page, "model-export")
    labels = page.locator("#model-export .export-targets a").all_inner_texts()
    assert "this machine (.so)" in labels
    with page.expect_download(timeout=240_000) as got:
        page.click("#export-host")
    download = got.value
    assert download.suggested_filename == "mlp-host.zip"
    path = tmp_path / "mlp-host.zip"
    download.save_as(path)
    with zipfile.ZipFile(path) as z:
        assert {"mlp.so", "mlp.h", "loader.py", "README.txt"} <= set(z.namelist())
        z.extractall(tmp_path)
    spec = importlib.util.spec_from_file_location("downloaded_loader", tmp_path / "loader.py")
    loader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loader)
    lib = loader.NativeLibrary(str(tmp_path / "mlp.so"))
    trained = trained_mlp()
    params = {k: np.asarray(v, "float32") for k, v in trained.params.items()}
    images = np.asarray(trained.data.test_images[:8], "float32").reshape(8, 1, 784)
    for x in images:
        np.testing.assert_allclose(lib["main"](x), forward(params, x), rtol=1e-4, atol=1e-4)
    assert not page.js_errors, page.js_errors  # type: ignore[attr-defined]

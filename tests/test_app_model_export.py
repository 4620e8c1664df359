"""The model page's Export through the app (the inline service: the worker's own code in this
process): the page offers the targets, the download is a zip with the library and its
header built by the ``export`` job, the library loads with ctypes (the zip's own loader)
and matches numpy on the test images, the same state is served again without another
build (ETag, 304), a scheduled link exports its own program, and bad requests are refused
with a sentence before any job."""
from __future__ import annotations

import importlib.util
import io
import shutil
import zipfile

import numpy as np
import pytest

from inline_service import drain, make_test_app


@pytest.fixture(scope="module")
def client():
    app = make_test_app()
    with app.app_context():
        yield app, app.test_client()


def _jobs(app) -> list:
    measurer = app.extensions["measurer"]
    return [j for j in measurer.pool.jobs if j.actions == ("export",)] \
        if measurer.started else []


def _load_native(tmp_path, zdata: bytes, stem: str = "mlp"):
    """The zip extracted into ``tmp_path`` and its library loaded with the zip's loader.py
    (ctypes + numpy only)."""
    with zipfile.ZipFile(io.BytesIO(zdata)) as z:
        z.extractall(tmp_path)
    spec = importlib.util.spec_from_file_location(f"zip_loader_{id(tmp_path)}",
                                                  tmp_path / "loader.py")
    loader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loader)
    return loader.NativeLibrary(str(tmp_path / f"{stem}.so"))


def _images_and_reference(app):
    from app.web.model import get_model
    model = get_model("mlp")
    x = np.asarray(model.test_images[:8], dtype="float32").reshape(8, 1, 784)
    return x, [model.numpy_fn(xi) for xi in x]


def test_the_page_offers_the_targets(client):
    app, c = client
    html = c.get("/model/mlp?batch=1&fused=1").get_data(as_text=True)
    assert 'id="model-export"' in html
    assert 'id="export-host"' in html and "/model/mlp/export?target=host&amp;batch=1" in html
    from app.web.model_export import offered_targets
    for t in offered_targets():
        assert f'id="export-{t.key}"' in html


def test_the_host_zip_loads_with_ctypes_and_matches_numpy(client, tmp_path):
    app, c = client
    before = len(_jobs(app))
    r = c.get("/model/mlp/export?target=host&batch=1&fused=1")
    assert r.status_code == 200, r.get_data(as_text=True)[:500]
    assert r.headers["Content-Type"] == "application/zip"
    assert 'filename="mlp-host.zip"' in r.headers["Content-Disposition"]
    data = r.get_data()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert sorted(z.namelist()) == ["README.txt", "loader.py", "mlp.h", "mlp.so"]
        header = z.read("mlp.h").decode()
    assert "int mlp_main(const float* x, float* out);" in header
    assert len(_jobs(app)) == before + 1
    lib = _load_native(tmp_path, data)
    x, refs = _images_and_reference(app)
    for xi, ref in zip(x, refs):
        np.testing.assert_allclose(lib["main"](xi), ref, rtol=1e-4, atol=1e-4)
    # the same state again: the same bytes, no second build; a 304 for the browser's copy
    again = c.get("/model/mlp/export?target=host&batch=1&fused=1")
    assert again.get_data() == data and len(_jobs(app)) == before + 1
    etag = again.headers["ETag"]
    assert c.get("/model/mlp/export?target=host&batch=1&fused=1",
                 headers={"If-None-Match": etag}).status_code == 304


def test_a_scheduled_link_exports_its_own_program(client, tmp_path):
    import engine
    from engine import IRModule
    from engine.models.course import mlp_module
    from engine.models.pipeline import stage_module

    app, c = client
    mod, _ = stage_module(mlp_module(2), "fused")
    one = IRModule((("fused_linear0_relu0", mod["fused_linear0_relu0"]),))
    sch = engine.Schedule(one)
    _, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(j0, k, j1)
    sch.vectorize(j1)
    token = sch.trace.encode()
    url = f"/model/mlp/export?target=host&batch=2&fused=1&t.fused_linear0_relu0={token}"
    r = c.get(url)
    assert r.status_code == 200, r.get_data(as_text=True)[:500]
    lib = _load_native(tmp_path, r.get_data())
    assert lib.metadata["functions"]["main"]["inputs"][0]["shape"] == [2, 784]
    x, refs = _images_and_reference(app)
    got = lib["main"](x[:2].reshape(2, 784))
    np.testing.assert_allclose(got, np.concatenate(refs[:2]), rtol=1e-4, atol=1e-4)
    plain = c.get("/model/mlp/export?target=host&batch=2&fused=1")
    assert plain.headers["ETag"] != r.headers["ETag"]


def test_other_targets_give_their_own_library(client, tmp_path):
    from app.web.model_export import offered_targets

    app, c = client
    keys = {t.key for t in offered_targets()}
    if "wasm32" in keys and shutil.which("wasm-ld"):
        r = c.get("/model/mlp/export?target=wasm32&batch=1&fused=1")
        assert r.status_code == 200, r.get_data(as_text=True)[:500]
        with zipfile.ZipFile(io.BytesIO(r.get_data())) as z:
            assert sorted(z.namelist()) == ["README.txt", "engine_wasm.js", "mlp.h",
                                            "mlp.wasm"]
            assert z.read("mlp.wasm")[:8] == b"\0asm\x01\0\0\0"
    if "aarch64" in keys and shutil.which("aarch64-linux-gnu-gcc"):
        r = c.get("/model/mlp/export?target=aarch64&batch=1&fused=1")
        assert r.status_code == 200, r.get_data(as_text=True)[:500]
        with zipfile.ZipFile(io.BytesIO(r.get_data())) as z:
            so = z.read("mlp.so")
        assert so[:4] == b"\x7fELF" and int.from_bytes(so[18:20], "little") == 183  # AArch64
        if shutil.which("qemu-aarch64"):          # the board's library, run under qemu
            from engine.deploy import run_under_qemu
            (tmp_path / "mlp.so").write_bytes(so)
            x, refs = _images_and_reference(app)
            out, = run_under_qemu(tmp_path / "mlp.so", "main", [x[0]])
            np.testing.assert_allclose(out, refs[0], rtol=1e-4, atol=1e-4)


def test_bad_requests_are_refused_before_any_build(client):
    app, c = client
    drain(app)
    before = len(_jobs(app))
    r = c.get("/model/mlp/export?target=sparc&batch=1&fused=1")
    assert r.status_code == 400
    text = r.get_data(as_text=True)
    assert "sparc" in text and "host" in text
    r = c.get("/model/mlp/export?target=host&batch=1&fused=1&t.fused_linear0_relu0=nonsense")
    assert r.status_code == 400
    r = c.get("/model/mlp/export?target=host&batch=100000")
    assert r.status_code == 400
    assert len(_jobs(app)) == before


def test_a_graph_not_lowered_to_tensorir_is_a_sentence_and_a_lowered_one_exports(client):
    app, c = client
    r = c.get("/model/mlp/export?target=host&batch=1&passes=BindParams")
    assert r.status_code == 422
    text = r.get_data(as_text=True)
    assert "could not be built" in text and "LegalizeOps" in text
    r = c.get("/model/mlp/export?target=host&batch=1&passes=BindParams,LegalizeOps")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/zip"

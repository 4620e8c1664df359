"""``python -m engine serve mlp.so``: the exported MLP behind the HTTP JSON endpoint, started
as a subprocess on a free port.  The test images are posted one by one, by name, along a
leading batch dimension and as a ``"batch"`` list, and every answer is compared with the
model in numpy; every refusal (shape, not JSON, non-numbers, body size, unknown function,
over the batch limit, wrong method) is checked for its status and sentence, and the server
answers correctly right after each."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from engine import relax
from engine.models.course import mlp_module
from engine.models.mlp import forward, trained_mlp
from engine.models.pipeline import stage_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_BATCH = 8
MAX_BODY = 200_000


@pytest.fixture(scope="module")
def model():
    trained = trained_mlp()
    params = {k: np.asarray(v, dtype="float32") for k, v in trained.params.items()}
    images = np.asarray(trained.data.test_images[:16], dtype="float32").reshape(-1, 784)
    return params, images


@pytest.fixture(scope="module")
def library(model, tmp_path_factory):
    params, _ = model
    mod, _ = stage_module(mlp_module(1, params), "fused+scheduled")
    path = tmp_path_factory.mktemp("serve") / "mlp.so"
    relax.build(mod, target="llvm").export_library(str(path))
    return path


def _start(args: list[str], out_path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with open(out_path, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "engine", "serve", *args], cwd=ROOT,
                                env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


@pytest.fixture(scope="module")
def server(library, tmp_path_factory):
    """The endpoint on a port it picked (``--port 0``, printed on its first line)."""
    log = tmp_path_factory.mktemp("serve-log") / "serve.log"
    proc = _start([str(library), "--port", "0", "--max-batch", str(MAX_BATCH),
                   "--max-body-bytes", str(MAX_BODY), "--threads", "4"], log)
    deadline = time.monotonic() + 60
    url = None
    while url is None and time.monotonic() < deadline:     # a hang guard, not a measure
        text = log.read_text(errors="replace")
        if "serving " in text:
            url = text.split(" on ", 1)[1].split()[0].rstrip("/")
        elif proc.poll() is not None:
            pytest.fail(f"python -m engine serve exited: {text}")
        else:
            time.sleep(0.1)
    assert url, f"the endpoint did not start: {log.read_text(errors='replace')}"
    yield url
    proc.send_signal(signal.SIGINT)         # Ctrl-C stops it cleanly
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    assert proc.returncode == 0 and "stopped" in log.read_text(errors="replace")


def request(url: str, body: bytes | None = None, method: str = "POST") -> tuple[int, dict]:
    req = urllib.request.Request(url, data=body, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def post(url: str, doc) -> tuple[int, dict]:
    return request(url + "/v1/main", json.dumps(doc).encode())


def assert_still_serving(server: str, model) -> None:
    params, images = model
    status, doc = post(server, {"inputs": [images[3:4].tolist()]})
    assert status == 200, doc
    np.testing.assert_allclose(np.asarray(doc["outputs"][0], "float32"),
                               forward(params, images[3:4]), rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------- answers
def test_metadata_describes_the_functions_from_the_library(server):
    for path in ("/", "/v1/metadata"):
        status, doc = request(server + path, method="GET")
        assert status == 200
        main = doc["functions"]["main"]
        assert [(t["name"], t["shape"], t["dtype"]) for t in main["inputs"]] == \
            [("x", [1, 784], "float32")]
        assert [(t["shape"], t["dtype"]) for t in main["outputs"]] == [([1, 10], "float32")]
        assert main["url"] == "/v1/main"
        assert doc["library"] == "mlp.so" and doc["target"]["name"] == "host"
        assert doc["max_batch"] == MAX_BATCH and doc["max_body_bytes"] == MAX_BODY


def test_each_test_image_matches_numpy(server, model):
    params, images = model
    for x in images:
        status, doc = post(server, {"inputs": [x.reshape(1, 784).tolist()]})
        assert status == 200, doc
        got = np.asarray(doc["outputs"][0], dtype="float32")
        assert got.shape == (1, 10)
        np.testing.assert_allclose(got, forward(params, x[None]), rtol=1e-4, atol=1e-4)
        assert doc["batch"] == 1 and doc["ms"] >= 0


def test_inputs_by_name_and_without_the_unit_batch_dimension(server, model):
    params, images = model
    status, doc = post(server, {"inputs": {"x": images[0].tolist()}})     # shape (784,)
    assert status == 200, doc
    got = np.asarray(doc["outputs"]["out"], dtype="float32")
    assert got.shape == (10,)
    np.testing.assert_allclose(got, forward(params, images[:1])[0], rtol=1e-4, atol=1e-4)


def test_a_leading_batch_dimension_runs_n_inputs(server, model):
    params, images = model
    status, doc = post(server, {"inputs": [images[:MAX_BATCH].tolist()]})   # (8, 784)
    assert status == 200, doc
    got = np.asarray(doc["outputs"][0], dtype="float32")
    assert got.shape == (MAX_BATCH, 10) and doc["batch"] == MAX_BATCH
    np.testing.assert_allclose(got, forward(params, images[:MAX_BATCH]), rtol=1e-4,
                               atol=1e-4)
    stacked = images[:3].reshape(3, 1, 784)                                 # (3, 1, 784)
    status, doc = post(server, {"inputs": {"x": stacked.tolist()}})
    got = np.asarray(doc["outputs"]["out"], dtype="float32")
    assert status == 200 and got.shape == (3, 1, 10)
    np.testing.assert_allclose(got[:, 0], forward(params, images[:3]), rtol=1e-4, atol=1e-4)


def test_a_batch_list_of_input_sets(server, model):
    params, images = model
    sets = [{"x": images[k:k + 1].tolist()} for k in (5, 6, 7)]
    status, doc = post(server, {"batch": sets})
    assert status == 200, doc
    assert doc["batch"] == 3
    for k, out in zip((5, 6, 7), doc["outputs"]):
        np.testing.assert_allclose(np.asarray(out["out"], "float32"),
                                   forward(params, images[k:k + 1]), rtol=1e-4, atol=1e-4)


def test_concurrent_requests_are_serialized_and_each_gets_its_own_answer(server, model):
    params, images = model
    answers: dict[int, np.ndarray] = {}
    failures: list = []

    def client(k: int) -> None:
        for _ in range(3):
            status, doc = post(server, {"inputs": [images[k:k + 1].tolist()]})
            if status != 200:
                failures.append(doc)
                return
            answers[k] = np.asarray(doc["outputs"][0], "float32")
            if not np.allclose(answers[k], forward(params, images[k:k + 1]), rtol=1e-4,
                               atol=1e-4):
                failures.append(f"image {k} got another answer")

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures and len(answers) == 8


# --------------------------------------------------------------------------- refusals
REFUSALS = [
    ("shape", lambda im: json.dumps({"inputs": [im[:2, :100].tolist()]}).encode(), 400,
     ["'x'", "(2, 100)", "(1, 784)", "(n, 784)"]),
    ("not JSON", lambda im: b'{"inputs": [1, 2', 400, ["not JSON"]),
    ("strings", lambda im: json.dumps({"inputs": [["a"] * 784]}).encode(), 400,
     ["'x'", "strings", "float32"]),
    ("null", lambda im: json.dumps({"inputs": [[None] * 784]}).encode(), 400,
     ["'x'", "not numbers", "float32"]),
    ("ragged", lambda im: json.dumps({"inputs": [[[0.0] * 784, [0.0] * 3]]}).encode(), 400,
     ["'x'", "rectangular"]),
    ("NaN", lambda im: b'{"inputs": [[NaN]]}', 400, ["NaN", "not a JSON number"]),
    ("no inputs key", lambda im: json.dumps({"x": im[0].tolist()}).encode(), 400,
     ['"inputs"']),
    ("wrong count", lambda im: json.dumps({"inputs": im[0].tolist()}).encode(), 400,
     ["takes 1 input", "got 784", '{"inputs": [x]}']),
    ("unknown name", lambda im: json.dumps({"inputs": {"y": im[0].tolist()}}).encode(), 400,
     ["no input 'y'", "x"]),
    ("over max batch", lambda im: json.dumps({"inputs": [im[:MAX_BATCH + 1].tolist()]}
                                             ).encode(), 400,
     [f"{MAX_BATCH + 1} inputs", f"at most {MAX_BATCH}", "--max-batch"]),
    ("batch list over max", lambda im: json.dumps(
        {"batch": [[im[:1].tolist()]] * (MAX_BATCH + 1)}).encode(), 400,
     [f"at most {MAX_BATCH}", "--max-batch"]),
    ("too large", lambda im: b'{"inputs": [[0' + b" " * MAX_BODY + b"]]}", 413,
     [f"over {MAX_BODY} bytes", "--max-body-bytes"]),
]


@pytest.mark.parametrize("what,body,status,words", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_a_refusal_is_one_sentence_and_the_server_keeps_serving(server, model, what, body,
                                                                status, words):
    got, doc = request(server + "/v1/main", body(model[1]))
    assert got == status, doc
    assert set(doc) == {"error"}
    for w in words:
        assert w in doc["error"], (w, doc["error"])
    assert_still_serving(server, model)


def test_unknown_function_and_path_and_method(server, model):
    status, doc = request(server + "/v1/predict", b'{"inputs": []}')
    assert status == 404 and "no function 'predict'" in doc["error"] and "main" in doc["error"]
    status, doc = request(server + "/predict", b"{}")
    assert status == 404 and "POST /v1/<function>" in doc["error"]
    status, doc = request(server + "/v1/main", method="GET")
    assert status == 405 and "POST" in doc["error"]
    assert_still_serving(server, model)


# --------------------------------------------------------------------------- the command
@pytest.mark.parametrize("make,words", [
    (lambda d: d / "notes.txt", ["notes.txt", "cannot be loaded as a shared library"]),
    (lambda d: d / "missing.so", ["no file", "missing.so"]),
    (lambda d: d, ["is a directory", "export_library"]),
], ids=["text file", "missing", "directory"])
def test_a_file_that_is_not_an_exported_library_is_one_sentence(tmp_path, make, words):
    (tmp_path / "notes.txt").write_text("not a library\n")
    path = make(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "engine", "serve", str(path), "--port", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert err.startswith("error: ") and "Traceback" not in err and err.count("\n") == 0
    for w in words:
        assert w in err, (w, err)


def test_a_library_without_the_engines_metadata_is_refused(tmp_path):
    libm = "/lib/x86_64-linux-gnu/libm.so.6"
    if not os.path.exists(libm):
        pytest.skip("no libm at the Debian path")
    proc = subprocess.run([sys.executable, "-m", "engine", "serve", libm, "--port", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "not a library exported by the engine" in proc.stderr


def test_bad_options_are_refused(library):
    proc = subprocess.run([sys.executable, "-m", "engine", "serve", str(library),
                           "--max-batch", "0"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "--max-batch must be from 1 to 4096" in proc.stderr


# --------------------------------------------------------------------------- a kernel library
def test_a_tensorir_library_serves_its_kernel_with_two_inputs(tmp_path):
    """``rt.export_library`` of mm_relu: two inputs by name and by position, batched."""
    import engine

    n = 16
    path = tmp_path / "kernel.so"
    engine.build(engine.workloads.get("mm_relu", n=n)).export_library(str(path))
    log = tmp_path / "serve.log"
    proc = _start([str(path), "--port", "0"], log)
    try:
        deadline = time.monotonic() + 60
        while "serving " not in log.read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        url = log.read_text().split(" on ", 1)[1].split()[0].rstrip("/")
        rng = np.random.default_rng(0)
        a, b = (rng.standard_normal((2, n, n)).astype("float32") for _ in range(2))
        want = [np.maximum(a[k] @ b[k], 0) for k in range(2)]
        status, doc = request(url + "/v1/mm_relu",
                              json.dumps({"inputs": {"B": b[0].tolist(),
                                                     "A": a[0].tolist()}}).encode())
        assert status == 200, doc
        np.testing.assert_allclose(np.asarray(doc["outputs"]["C"], "float32"), want[0],
                                   rtol=1e-4, atol=1e-4)
        status, doc = request(url + "/v1/mm_relu",
                              json.dumps({"inputs": [a.tolist(), b.tolist()]}).encode())
        assert status == 200 and doc["batch"] == 2, doc
        np.testing.assert_allclose(np.asarray(doc["outputs"][0], "float32"), np.stack(want),
                                   rtol=1e-4, atol=1e-4)
        status, doc = request(url + "/v1/mm_relu",
                              json.dumps({"inputs": [a.tolist(), b[0].tolist()]}).encode())
        assert status == 400 and "different batch sizes" in doc["error"]
        status, doc = request(url + "/v1/mm_relu",
                              json.dumps({"inputs": {"A": a[0].tolist()}}).encode())
        assert status == 400 and "Input 'B' of mm_relu is missing" in doc["error"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(10)

"""Serving the course's MLP: ``python -m engine serve mlp.so`` (the exported library behind
waitress) against a Flask endpoint running the same model in numpy (served by waitress the
same way, same threads), in the same run.

    python benchmarks/bench_serve.py                  (1, 8 and 32 concurrent clients)
    python benchmarks/bench_serve.py --seconds 5 --threads 4 --clients 1 --clients 8

The MLP (trained weights, fused + scheduled, batch 1) is exported with
``ex.export_library``; both endpoints are checked to give numpy's outputs on the test
images first.  Then, for each number of concurrent clients, each endpoint gets the same
load: ``clients`` threads in this process, each with its own keep-alive connection,
sending one test image per request (``{"inputs": [x]}``, x of shape (1, 784)) for
``--seconds``; the endpoints take turns, one at a time.  Printed: requests per second,
p50 and p99 latency (as the clients see them: JSON encoding, HTTP, the model, decoding),
the model's own time in the server (the answers' ``ms``, median) and the ratios
engine / numpy.  The clients share the machine with the server under test,
as a load generator on the same host does.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PYTHON = sys.executable


# --------------------------------------------------------------------------- the reference
def reference_app(weights_path: str):
    """The numpy endpoint: Flask, ``POST /v1/main`` with ``{"inputs": [x]}`` (x of shape
    (1, 784) or (784,)), the model as a user writes it in numpy (float32)."""
    from flask import Flask, jsonify, request

    from engine.models.mlp import forward

    params = {k: v.astype("float32") for k, v in np.load(weights_path).items()}
    app = Flask("numpy-mlp")

    @app.post("/v1/main")
    def main():
        doc = request.get_json(silent=True)
        if not isinstance(doc, dict) or not isinstance(doc.get("inputs"), list) or \
                len(doc["inputs"]) != 1:
            return jsonify(error='send {"inputs": [x]}'), 400
        try:
            x = np.asarray(doc["inputs"][0], dtype="float32").reshape(1, 784)
        except (ValueError, TypeError):
            return jsonify(error="x must be 784 numbers"), 400
        t0 = time.perf_counter()
        y = forward(params, x)
        ms = (time.perf_counter() - t0) * 1e3
        return jsonify(function="main", outputs=[y.tolist()], batch=1, ms=round(ms, 4))

    return app


def serve_reference(weights_path: str, port: int, threads: int) -> None:
    from waitress import serve
    print(f"numpy reference on port {port}", flush=True)
    serve(reference_app(weights_path), host="127.0.0.1", port=port, threads=threads,
          ident="numpy-mlp")


# --------------------------------------------------------------------------- processes
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(proc: subprocess.Popen, port: int, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            with open(proc.log_path, errors="replace") as f:
                raise SystemExit(f"{what} exited with status {proc.returncode}: "
                                 f"{f.read()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{what} did not listen on port {port} within {timeout:.0f} s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --------------------------------------------------------------------------- the load
def post(conn: http.client.HTTPConnection, body: bytes) -> dict:
    conn.request("POST", "/v1/main", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"status {r.status}: {data[:200]!r}")
    return json.loads(data)


def load(port: int, clients: int, seconds: float, bodies: list[bytes]) -> dict:
    """``clients`` threads posting ``bodies`` in turn for ``seconds``: requests/s, p50,
    p99 (ms) and the failures."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    model_ms: list[list[float]] = [[] for _ in range(clients)]
    failures: list[str] = []
    stop_at = [0.0]

    def set_clock() -> None:       # run by the last thread to arrive, before any goes on
        stop_at[0] = time.perf_counter() + seconds

    start = threading.Barrier(clients + 1, action=set_clock)

    def client(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine, i = latencies[k], k
        try:
            post(conn, bodies[0])            # connected and warm before the clock starts
            start.wait()
            while time.perf_counter() < stop_at[0]:
                t0 = time.perf_counter()
                answer = post(conn, bodies[i % len(bodies)])
                mine.append(time.perf_counter() - t0)
                model_ms[k].append(float(answer.get("ms", "nan")))
                i += 1
        except Exception as e:  # noqa: BLE001 - reported in the table
            failures.append(str(e)[:200])
            if start.n_waiting and not start.broken:
                start.abort()
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(clients)]
    for t in threads:
        t.start()
    try:
        start.wait()
    except threading.BrokenBarrierError:
        pass
    t0 = stop_at[0] - seconds
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    lat = np.array([x for xs in latencies for x in xs]) * 1e3
    inside = np.array([x for xs in model_ms for x in xs])
    return {"rps": len(lat) / elapsed if elapsed > 0 else 0.0,
            "p50": float(np.percentile(lat, 50)) if len(lat) else float("nan"),
            "p99": float(np.percentile(lat, 99)) if len(lat) else float("nan"),
            "model_ms": float(np.median(inside)) if len(inside) else float("nan"),
            "n": len(lat), "failures": failures}


# --------------------------------------------------------------------------- the model
def export_mlp(workdir: str) -> tuple[str, str, dict, np.ndarray]:
    """The trained MLP exported (fused + scheduled, batch 1) to ``workdir/mlp.so``; its
    weights saved for the reference; the test images."""
    from engine import relax
    from engine.models import mlp
    from engine.models.course import mlp_module
    from engine.models.pipeline import stage_module

    trained = mlp.trained_mlp(os.environ.get("EXPLORER_INSTANCE") or str(ROOT / "instance"))
    params = {k: np.asarray(v, dtype="float32") for k, v in trained.params.items()}
    mod, _ = stage_module(mlp_module(1, params), "fused+scheduled")
    t0 = time.perf_counter()
    ex = relax.build(mod, target="llvm")
    so = os.path.join(workdir, "mlp.so")
    ex.export_library(so)
    print(f"exported {so}: {os.path.getsize(so)} bytes in "
          f"{time.perf_counter() - t0:.2f} s", flush=True)
    weights = os.path.join(workdir, "weights.npz")
    np.savez(weights, **params)
    images = np.asarray(trained.data.test_images, dtype="float32").reshape(-1, 1, 784)
    return so, weights, params, images


def check_outputs(port: int, images: np.ndarray, params: dict, what: str) -> float:
    """Both endpoints must answer numpy's logits: the largest difference on 16 images."""
    from engine.models.mlp import forward

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    worst = 0.0
    try:
        for x in images[:16]:
            got = np.asarray(post(conn, json.dumps({"inputs": [x.tolist()]}).encode())
                             ["outputs"][0], dtype="float32")
            want = forward(params, x)
            worst = max(worst, float(np.abs(got - want).max()))
            if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
                raise SystemExit(f"{what} answers {got.ravel()[:4]}..., numpy "
                                 f"{want.ravel()[:4]}...")
    finally:
        conn.close()
    return worst


def wsgi_cpu_us(app, body: bytes, requests: int = 1000, rounds: int = 3) -> float:
    """CPU microseconds per request inside a WSGI app, called in this process (no HTTP): the
    request read and checked, JSON decoded, the model run, the answer encoded (least of
    ``rounds``)."""
    import io

    def environ() -> dict:
        return {"REQUEST_METHOD": "POST", "PATH_INFO": "/v1/main", "SCRIPT_NAME": "",
                "QUERY_STRING": "", "CONTENT_TYPE": "application/json",
                "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body),
                "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
                "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr}

    def start_response(status, headers):
        if not status.startswith("200"):
            raise RuntimeError(f"the app answered {status}")

    for _ in range(100):
        b"".join(app(environ(), start_response))
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(requests):
            b"".join(app(environ(), start_response))
        best = min(best, (time.process_time() - t0) / requests * 1e6)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, action="append",
                    help="concurrent clients (repeatable; default 1, 8, 32)")
    ap.add_argument("--seconds", type=float, default=3.0, help="load per measurement")
    ap.add_argument("--threads", type=int, default=4, help="waitress threads of both")
    ap.add_argument("--serve-reference", nargs=2, metavar=("WEIGHTS", "PORT"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_reference:
        serve_reference(args.serve_reference[0], int(args.serve_reference[1]), args.threads)
        return
    clients = args.clients or [1, 8, 32]
    work = tempfile.mkdtemp(prefix="bench-serve-")
    so, weights, params, images = export_mlp(work)
    bodies = [json.dumps({"inputs": [x.tolist()]}).encode() for x in images[:64]]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    eng_port, ref_port = free_port(), free_port()
    t0 = time.perf_counter()
    # each server's output goes to a file (waitress logs every queued task under load: a
    # pipe nobody reads would fill and stop the server)
    with open(os.path.join(work, "engine.log"), "wb") as log:
        engine_proc = subprocess.Popen(
            [PYTHON, "-m", "engine", "serve", so, "--port", str(eng_port), "--threads",
             str(args.threads)], cwd=str(ROOT), env=env, stdout=log,
            stderr=subprocess.STDOUT)
    engine_proc.log_path = log.name
    with open(os.path.join(work, "numpy.log"), "wb") as log:
        ref_proc = subprocess.Popen(
            [PYTHON, __file__, "--serve-reference", weights, str(ref_port), "--threads",
             str(args.threads)], cwd=str(ROOT), env=env, stdout=log,
            stderr=subprocess.STDOUT)
    ref_proc.log_path = log.name
    try:
        wait_listening(engine_proc, eng_port, "python -m engine serve")
        print(f"engine endpoint listening {time.perf_counter() - t0:.2f} s after start",
              flush=True)
        wait_listening(ref_proc, ref_port, "the numpy reference")
        err_e = check_outputs(eng_port, images, params, "the engine's endpoint")
        err_r = check_outputs(ref_port, images, params, "the numpy endpoint")
        print(f"outputs match numpy on 16 test images (max |diff|: engine {err_e:.2e}, "
              f"numpy endpoint {err_r:.2e})", flush=True)
        rows = []
        for c in clients:
            eng = load(eng_port, c, args.seconds, bodies)
            ref = load(ref_port, c, args.seconds, bodies)
            rows.append((c, eng, ref))
            print(f"  {c} clients: engine {eng['rps']:.0f} req/s, numpy {ref['rps']:.0f} "
                  f"req/s", flush=True)
    finally:
        stop(engine_proc)
        stop(ref_proc)
    print()
    print(f"MLP 784-128-10, batch 1 per request, {args.threads} waitress threads each, "
          f"{args.seconds:.0f} s per measurement, {os.cpu_count()} cores")
    head = (f"{'clients':>7}  {'endpoint':<14} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}  "
            f"{'model ms':>8}  {'requests':>8}")
    print(head)
    print("-" * len(head))
    for c, eng, ref in rows:
        for name, r in (("engine .so", eng), ("flask+numpy", ref)):
            fail = f"  {len(r['failures'])} failed: {r['failures'][0]}" if r["failures"] else ""
            print(f"{c:>7}  {name:<14} {r['rps']:>8.0f} {r['p50']:>8.2f} {r['p99']:>8.2f}  "
                  f"{r['model_ms']:>8.3f}  {r['n']:>8}{fail}")
        if min(ref["rps"], ref["p50"], ref["p99"]) > 0:
            print(f"{'':>7}  {'ratio':<14} {eng['rps'] / ref['rps']:>7.2f}x "
                  f"{eng['p50'] / ref['p50']:>7.2f}x {eng['p99'] / ref['p99']:>7.2f}x")
    from engine.deploy.serve import InferenceApp, open_library

    functions, call, about = open_library(so)
    cpu_engine = wsgi_cpu_us(InferenceApp(functions, call, about), bodies[0])
    cpu_numpy = wsgi_cpu_us(reference_app(weights), bodies[0])
    print(f"{'':>7}  CPU per request inside the WSGI app (this process, no HTTP): engine "
          f"{cpu_engine:.0f} us, flask+numpy {cpu_numpy:.0f} us ({cpu_engine / cpu_numpy:.2f}x)")
    print("(ratio: engine / numpy; above 1x is more requests/s, below 1x lower latency; "
          "model ms: the median time of the model itself in the server, as it reports it — "
          "the rest of a request is HTTP, JSON and waiting for a thread)")


if __name__ == "__main__":
    main()

"""The explorer on a GPU (issue 39, the plumbing): the session's target in the link and in
the trace document, the worker's GPU step (built for the target, emulated, checked against
numpy, modeled), the toolbar's bind (only on a GPU target) and GPU scopes, the GPU code
views and the GPU presets."""
from __future__ import annotations

import json
import re

import pytest

from inline_service import HX, state_of, text

from app.service import timing
from app.web import targets
from engine import presets, workloads
from engine.schedule import Schedule

GPU = {"target": "cuda-h100-sxm"}


def apply(client, q: dict, sel: str, prim: str, workload: str = "vector_add", **args):
    data = dict(q, sel=sel, primitive=prim, **args)
    return client.post(f"/explore/{workload}/apply", data=data, headers=HX)


def bound_vector_add(client, n: int = 256) -> dict:
    """split by 128, bind blockIdx.x / threadIdx.x through the apply endpoint."""
    q = dict(GPU, n=str(n))
    for sel, prim, args in (("L/vector_add/0/C", "split", {"factors": "None, 128"}),
                            ("L/vector_add/0/C", "bind", {"thread_axis": "blockIdx.x"}),
                            ("L/vector_add/1/C", "bind", {"thread_axis": "threadIdx.x"})):
        r = apply(client, q, sel, prim, **args)
        assert r.status_code == 200, text(r)
        q = state_of(r.headers["HX-Push-Url"])
    return q


# ---------------------------------------------------------------------------- the link
def test_targets_table():
    assert targets.choice(None).key == "cpu" and not targets.choice("").is_gpu
    t = targets.choice("cuda-a100")
    assert t.is_gpu and t.engine == "cuda -model=a100" and t.gpu == "a100"
    for bad in ("cuda", "CUDA-A100", "cuda -model=a100", "cuda-v100-sxm2", "<x>", "cpu "):
        with pytest.raises(ValueError, match="target= must be one of"):
            targets.choice(bad)
    assert targets.from_document(None).key == "cpu"
    assert targets.from_document("llvm").key == "cpu"
    assert targets.from_document("cuda -model=rtx-4090").key == "cuda-rtx-4090"
    assert targets.from_document("cuda-tesla-p100").key == "cuda-tesla-p100"
    for bad in ("cuda -model=a100 -arch=sm_60", 7, ["cuda"], "nvidia/nvidia-a100"):
        with pytest.raises(ValueError):
            targets.from_document(bad)


def test_target_round_trips_through_the_link(client):
    q = bound_vector_add(client)
    assert q["target"] == "cuda-h100-sxm"
    page = text(client.get("/explore/vector_add", query_string=q))
    assert "Target: H100 SXM" in page and 'id="tab-res"' in page and ">CUDA C<" in page
    # the page's own links keep the target
    share = re.search(r'id="share-url"[^>]*value="([^"]+)"', page).group(1)
    assert state_of(share.replace("&amp;", "&"))["target"] == "cuda-h100-sxm"


def test_links_without_target_stay_cpu(client):
    page = text(client.get("/explore/vector_add?n=64"))
    assert "Target: CPU (this machine)" in page and ">LLVM IR<" in page
    assert 'id="tab-res"' not in page


@pytest.mark.parametrize("bad", ["cuda", "nvidia/nvidia-h100", "cuda-h100-sxm%00",
                                 "%3Cscript%3Ealert(1)%3C/script%3E", "x" * 300])
def test_hostile_target_is_a_400_keeping_the_state(client, bad):
    r = client.get(f"/explore/vector_add?n=64&target={bad}")
    assert r.status_code == 400
    body = text(r)
    assert "Unknown target" in body and "target= must be one of cpu, cuda-h100-sxm" in body
    assert "<script>alert" not in body
    assert 'href="/explore/vector_add?n=64"' in body       # the way back: this state on the CPU


def test_export_and_import_carry_the_target(client):
    q = bound_vector_add(client)
    doc = json.loads(text(client.get("/explore/vector_add/export/json", query_string=q)))
    assert doc["target"] == "cuda -model=h100-sxm"
    for fmt, build in (("python", 'engine.build(sch.mod, target="cuda -model=h100-sxm")'),
                       ("tvm", 'target="cuda"'), ("course", 'target="cuda"')):
        body = text(client.get(f"/explore/vector_add/export/{fmt}", query_string=q))
        assert body.startswith("# target: cuda -model=h100-sxm"), body[:200]
        assert build in body
    # imported back: the link opens on the GPU with the same trace
    r = client.post("/import", data={"text": json.dumps(doc)})
    assert r.status_code == 303
    back = state_of(r.headers["Location"])
    assert back["target"] == "cuda-h100-sxm" and back["t"] == q["t"]
    # a CPU session's document has no target; an old document without one imports as CPU
    cpu = json.loads(text(client.get("/explore/vector_add/export/json",
                                     query_string={"n": "256", "t": q["t"]})))
    assert "target" not in cpu
    r = client.post("/import", data={"text": json.dumps(cpu)})
    assert r.status_code == 303 and "target" not in state_of(r.headers["Location"])
    cpu_export = text(client.get("/explore/vector_add/export/python",
                                 query_string={"n": "256", "t": q["t"]}))
    assert "# target:" not in cpu_export


def test_import_refuses_a_hostile_target(client):
    q = bound_vector_add(client)
    doc = json.loads(text(client.get("/explore/vector_add/export/json", query_string=q)))
    doc["target"] = "cuda -model=a100; rm -rf /"
    r = client.post("/import", data={"text": json.dumps(doc)})
    assert r.status_code == 400 and "the trace&#39;s target must be one of" in text(r)


# ---------------------------------------------------------------------------- the toolbar
def _toolbar(client, q, sel, workload="vector_add"):
    return text(client.get(f"/explore/{workload}/toolbar", query_string=dict(q, sel=sel)))


def test_bind_is_offered_only_on_a_gpu_target(client):
    cpu = _toolbar(client, {"n": "256"}, "L/vector_add/0/C")
    assert 'data-prim="bind"' not in cpu and 'data-prim="split"' in cpu
    gpu = _toolbar(client, dict(GPU, n="256"), "L/vector_add/0/C")
    assert 'data-prim="bind"' in gpu
    # a CPU session's form asking for bind is refused, the trace unchanged
    r = apply(client, {"n": "256"}, "L/vector_add/0/C", "bind", thread_axis="blockIdx.x")
    assert r.status_code == 422 and "switch the target to a GPU" in text(r)


def test_bind_offers_the_legal_axes_and_says_why_not_the_others(client):
    q = dict(GPU, n="256")
    r = apply(client, q, "L/vector_add/0/C", "split", factors="None, 128")
    q = state_of(r.headers["HX-Push-Url"])
    r = apply(client, q, "L/vector_add/0/C", "bind", thread_axis="blockIdx.x")
    q = state_of(r.headers["HX-Push-Url"])
    bar = _toolbar(client, q, "L/vector_add/1/C")
    axes = re.search(r'<select name="thread_axis".*?</select>', bar, re.S).group(0)
    assert 'value="threadIdx.x" selected' in axes
    assert 'value="blockIdx.x"' not in axes              # bound above: not offered
    note = re.search(r'data-note="bind">.*?<p>(.*?)</p>', bar, re.S).group(1)
    assert "blockIdx.x:" in note


def test_bind_refusal_over_1024_threads_keeps_the_state(client):
    q = dict(GPU, n="4096")
    r = apply(client, q, "L/vector_add/0/C", "split", factors="None, 2048")
    q = state_of(r.headers["HX-Push-Url"])
    r = apply(client, q, "L/vector_add/1/C", "bind", thread_axis="threadIdx.x")
    assert r.status_code == 422
    body = text(r)
    assert "1024" in body and "HX-Push-Url" not in r.headers
    assert "i_1" in body                                    # highlighted


def test_gpu_scopes_for_cache_stages(client):
    gpu = _toolbar(client, dict(GPU, n="64"), "B/matmul/C", workload="matmul")
    cr = re.search(r'data-prim="cache_read"|<input type="hidden" name="primitive" '
                   r'value="cache_read">.*?</form>', gpu, re.S).group(0)
    assert 'value="shared" selected' in cr
    assert 'value="set_scope"' in gpu
    cpu = _toolbar(client, {"n": "64"}, "B/matmul/C", workload="matmul")
    assert 'value="set_scope"' not in cpu


# ---------------------------------------------------------------------------- the worker
def _bound(n: int = 256):
    mod = workloads.get("vector_add", n=n)
    sch = Schedule(mod, workload=("vector_add", {"n": n}))
    (i,) = sch.get_loops(sch.get_block("C", func_name="vector_add"))
    i0, i1 = sch.split(i, [None, 64])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    return sch.mod


def test_worker_gpu_step_matches_numpy_and_is_modeled():
    d = timing.measure_gpu_step(_bound(), "vector_add", {"n": 256}, "cuda -model=h100-sxm",
                                func_name="vector_add")
    assert d["ok"] and d["stage"] == "done" and d["correct"] is True, d
    assert d["gpu"] == "h100-sxm" and d["time_ms"] > 0 and d["modeled_ms"] > 0
    if d["ran_on"] == "emulator":
        assert d["time_kind"] == "modeled" and d["time_ms"] == d["modeled_ms"]
        assert d["race_checked"] is True
    assert d["model"]["bottleneck"] and d["model"]["summary"]
    assert d["resources"][0]["block"] == [64, 1, 1]
    json.dumps(d)                                           # plain data for the store


def test_worker_gpu_step_of_an_unbound_program_says_did_you_forget_to_bind():
    mod = workloads.get("vector_add", n=64)
    d = timing.measure_gpu_step(mod, "vector_add", {"n": 64}, "cuda -model=a100")
    assert d["not_gpu"].startswith("not a GPU program yet") and "forget to bind" in d["not_gpu"]
    assert d["error"] is None and d["time_ms"] is None and d["ok"]


def test_worker_gpu_step_not_a_kernel_yet_is_said_not_failed():
    mod = workloads.get("vector_add", n=64)
    sch = Schedule(mod)
    (i,) = sch.get_loops(sch.get_block("C", func_name="vector_add"))
    i0, i1 = sch.split(i, [None, 32])
    sch.bind(i1, "threadIdx.x")                     # a loop around the kernel: bind it next
    d = timing.measure_gpu_step(sch.mod, "vector_add", {"n": 64}, "cuda -model=a100")
    assert d["ok"] and d["error"] is None and d["time_ms"] is None
    assert d["not_gpu"].startswith("not a GPU program yet: loop i_0 (serial) encloses")


def test_worker_gpu_step_refused_at_build_is_a_sentence():
    # A read into "shared" at the block's loop of a 64 x 64-blocked GEMM (256): 64 KiB per
    # block, over the A100's 48 (the explorer refuses the click; a link can still carry it)
    mod = workloads.get("matmul", n=256)
    sch = Schedule(mod)
    c = sch.get_block("C", func_name="matmul")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 64])
    j0, j1 = sch.split(j, [None, 64])
    sch.reorder(i0, j0, i1, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.compute_at(sch.cache_read(c, 0, "shared"), j0)
    d = timing.measure_gpu_step(sch.mod, "matmul", {"n": 256, "m": 256, "k": 256},
                                "cuda -model=a100", func_name="matmul")
    assert d["ok"] is False and d["error"].startswith("refused at build:")
    assert "shared memory" in d["error"] and "48 KiB" in d["error"]


def test_gpu_results_are_stored_apart_from_the_cpu(client, app):
    q = bound_vector_add(client, n=128)
    m = text(client.get("/explore/vector_add/measure", query_string=q))
    assert "modeled for H100 SXM (no GPU on this machine)" in m
    assert "✓ matches numpy" in m
    fig = json.loads(re.search(r'data-plotly="([^"]+)"', m).group(1).replace("&#34;", '"')
                     .replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    assert [t["name"] for t in fig["data"]] == ["modeled for H100 SXM (no GPU on this machine)"]
    assert fig["layout"]["yaxis"]["title"]["text"] == "modeled ms"
    # the same program on another GPU and on the CPU: other results
    other = text(client.get("/explore/vector_add/measure", query_string=dict(q,
                                                                             target="cuda-a100")))
    assert "modeled for A100" in other
    cpu = text(client.get("/explore/vector_add/measure",
                          query_string={k: v for k, v in q.items() if k != "target"}))
    assert "modeled for" not in cpu


def test_step_zero_of_a_gpu_session_is_not_an_error_page(client):
    r = client.get("/explore/vector_add/measure", query_string=dict(GPU, n="64"))
    assert r.status_code == 200
    assert "not a GPU program yet" in text(r) and "did you forget to bind?" in text(r)


def test_code_pane_of_a_gpu_step(client):
    q = bound_vector_add(client)
    cuda = text(client.get("/explore/vector_add/code", query_string=dict(q, kind="cuda")))
    assert "__global__ void" in cuda and "threadIdx.x" in cuda
    ptx = text(client.get("/explore/vector_add/code", query_string=dict(q, kind="ptx")))
    assert ".entry" in ptx or ".visible" in ptx
    res = text(client.get("/explore/vector_add/code", query_string=dict(q, kind="resources")))
    assert "registers" in res and "occupancy" in res and "grid=(2, 1, 1)" in res
    assert client.get("/explore/vector_add/code",
                      query_string=dict(q, kind="asm")).status_code == 400


# ---------------------------------------------------------------------------- presets
@pytest.mark.parametrize("name", ["gpu-vector-add", "gpu-window-sum", "gpu-gemm-local",
                                  "gpu-gemm-shared"])
def test_gpu_presets_open_with_the_gpu_target(name):
    p = presets.info(name)
    assert p.target == "cuda -model=h100-sxm"
    assert p.explore_url().endswith("&target=cuda-h100-sxm")


def test_gpu_preset_page_offers_bind(client):
    url = presets.info("gpu-window-sum").explore_url(n=256)
    page = text(client.get(url))
    assert "Target: H100 SXM" in page
    q = state_of(url)
    m = text(client.get("/explore/window_sum/measure", query_string=q))
    assert "✓ matches numpy" in m and "modeled for H100 SXM" in m


def test_the_tvm_export_of_the_shared_gemm_is_tvm_python_for_cuda(client, monkeypatch):
    """The TVM export of the course's shared-memory GEMM (gpu_chapter's trace, on the H100
    SXM target): Python that parses, defines ``apply_trace``, and run with the engine's
    ``tvm`` namespace on the original program rebuilds the explorer's program; its build
    (a snippet in comments, as every export's) compiles for target="cuda" — and that
    build, run here in the emulator, matches numpy."""
    import ast
    import sys

    import numpy as np

    import engine
    from engine import tvm as etvm
    from engine.presets import gpu_chapter

    params = {"m": 128, "n": 128, "k": 128}
    base = workloads.get("matmul", **params)
    sch = Schedule(base)
    gpu_chapter.apply_gemm_shared(sch, 8, 8, 8, 8, 8, func_name="matmul")
    q = dict(GPU, **{k: str(v) for k, v in params.items()}, t=sch.trace.encode())
    r = client.get("/explore/matmul/export/tvm", query_string=q)
    assert r.status_code == 200, text(r)
    body = text(r)
    tree = ast.parse(body)
    assert [f.name for f in tree.body if isinstance(f, ast.FunctionDef)] == ["apply_trace"]
    comments = [ln for ln in body.splitlines() if ln.startswith("#")]
    assert comments[0].startswith("# target: cuda -model=h100-sxm")
    build = [ln for ln in comments if "tvm.compile(" in ln]
    assert build == ['#     rt = tvm.compile(sch.mod, target="cuda")'], comments
    assert "#     apply_trace(sch)" in comments
    # run as TVM Python against the engine's tvm namespace, on the original program
    monkeypatch.setitem(sys.modules, "tvm", etvm)
    monkeypatch.setitem(sys.modules, "tvm.s_tir", etvm.s_tir)
    ns: dict = {}
    exec(compile(tree, "matmul-tvm.py", "exec"), ns)     # the explorer's own export
    tsch = etvm.s_tir.Schedule(workloads.get("matmul", **params))
    ns["apply_trace"](tsch)
    assert engine.structural_equal(tsch.mod["matmul"], sch.mod["matmul"])
    # the snippet's build line, as written (after "#     ")
    local = {"tvm": etvm, "sch": tsch}
    exec(build[0][len("#     "):], local)
    rt = local["rt"]
    a, b = (np.random.default_rng(i).random((128, 128), np.float32) for i in (1, 2))
    c = np.zeros((128, 128), np.float32)
    rt["matmul"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)

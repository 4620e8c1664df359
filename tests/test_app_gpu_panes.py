"""The explorer's panes for a GPU step (issue 39): the loop diagram's grid and block
markers, the memory pane (the cache pane's place on a GPU target: the model's accesses and
traffic), the GPU roofline. Pane contexts from worker results built here (the worker's own
function, run in the test's process), and the pages through the test app."""
from __future__ import annotations

import html
import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest

from inline_service import make_test_app

from app.service import timing
from app.web import plots
from app.web.panes import diagram, gpu_memory
from app.web.selection import module_trees
from engine import presets
from engine.presets import gpu_chapter
from engine.schedule import Schedule

H100 = "cuda -model=h100-sxm"


def _naive_gemm(n: int) -> Schedule:
    """One C element per thread, 8x8 threads per block, A and B read from global memory
    at every k (no blocking)."""
    sch = Schedule(gpu_chapter.matmul_program(n))
    i, j, _ = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, i1, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    return sch


def _step(sch: Schedule, workload: str, n: int) -> dict:
    params = {"n": n} if workload != "matmul" else {"m": n, "n": n, "k": n}
    d = timing.measure_gpu_step(sch.mod, workload, params, H100, func_name="main")
    assert d["ok"] and d["correct"] is True, d
    json.dumps(d)
    return d


@pytest.fixture(scope="module")
def gemms() -> dict:
    """The worker's results for the naive, local-blocking and shared-memory GEMMs (256)."""
    return {"naive": _step(_naive_gemm(256), "matmul", 256),
            "local": _step(gpu_chapter.gemm_local(256), "matmul", 256),
            "shared": _step(gpu_chapter.gemm_shared(256), "matmul", 256)}


# ---------------------------------------------------------------------------- memory pane
def test_worker_result_has_the_access_figures(gemms):
    k = gemms["shared"]["model"]["kernels"][0]
    assert k["name"] == "main_kernel0" and k["accesses_total"] == len(k["accesses"]) == 7
    a = next(a for a in k["accesses"] if a["buffer"] == "A_shared" and a["kind"] == "load")
    assert a["scope"] == "shared" and a["conflict_ways"] == 4.0 and a["executions"] > 0
    assert k["occupancy"]["occupancy"] == 1.0 and k["registers_from"] == "ptxas"


def test_memory_rows_of_the_shared_gemm(gemms):
    ctx = gpu_memory.memory_context(0, {0: gemms["shared"]}, "h100-sxm")
    (kernel,) = ctx["kernels"]
    rows = {(r["buffer"], r["kind"]): r for r in kernel["rows"]}
    assert set(rows) == {("A", "load"), ("B", "load"), ("A_shared", "store"),
                         ("B_shared", "store"), ("A_shared", "load"), ("B_shared", "load"),
                         ("C", "store")}
    a_sh = rows[("A_shared", "load")]
    assert a_sh["scope"] == "shared" and a_sh["conflict_ways"] == 4.0
    assert a_sh["what"] == "4-way bank conflict" and a_sh["bad"]
    assert rows[("B_shared", "load")]["what"] == "2-way bank conflict"
    assert rows[("A_shared", "store")]["what"] == "no bank conflict"
    fetch = rows[("A", "load")]
    assert fetch["scope"] == "global" and fetch["vector_lanes"] == 4
    assert fetch["efficiency"] == 1.0 and "100% coalesced" in fetch["what"]
    assert rows[("C", "store")]["efficiency"] < 0.2 and rows[("C", "store")]["bad"]
    t = ctx["traffic"]
    assert t["dram_bytes"] > 0 and t["l2_bytes"] > 0 and t["shared_wavefronts"] > 0
    assert t["shared_bytes"] > 0
    (res,) = ctx["resources"]
    assert res["grid"] == [4, 4, 1] and res["block"] == [64, 1, 1] and res["threads"] == 64
    assert res["shared_bytes"] == 4096 and res["shared_per_block"] == 48 * 1024
    assert res["registers"] and res["occupancy"] == 1.0


def test_shared_tiles_and_blocking_cut_the_memory_traffic(gemms):
    """The course's point, in the model's figures: each blocking step moves fewer bytes
    between the SMs and memory (L2 sector traffic); the DRAM bytes fall from naive to
    blocked and never rise. (At these sizes A, B and C fit in the H100's 50 MB L2: DRAM
    moves each buffer's footprint once for both blocked GEMMs — the model says so, and the
    pane shows it rather than a difference that is not there.)"""
    t = {k: gpu_memory.traffic(v) for k, v in gemms.items()}
    assert t["shared"]["l2_bytes"] < t["local"]["l2_bytes"] < t["naive"]["l2_bytes"]
    assert t["shared"]["l2_bytes"] * 5 < t["local"]["l2_bytes"]
    assert t["shared"]["dram_bytes"] <= t["local"]["dram_bytes"] < t["naive"]["dram_bytes"]
    assert t["naive"]["shared_wavefronts"] == 0 and t["shared"]["shared_wavefronts"] > 0


def test_dram_falls_with_shared_tiles_when_l2_cannot_hold_the_operands():
    """On the Tesla P100 (4 MB of L2) a 2048 GEMM's operands do not fit: the local
    blocking's re-reads go to DRAM, the shared tiles' far fewer (the model only: no run)."""
    from engine.gpu.build import build_gpu
    from engine.gpu.target import Target
    tgt = Target("cuda -model=tesla-p100")
    local = build_gpu(gpu_chapter.gemm_local(2048).mod, tgt).model("main").dram_bytes
    shared = build_gpu(gpu_chapter.gemm_shared(2048).mod, tgt).model("main").dram_bytes
    assert shared * 4 < local


def test_cooperative_fetch_cuts_the_window_sums_traffic():
    def plain(n):
        sch = Schedule(gpu_chapter.window_sum_program(n))
        (i,) = sch.get_loops(sch.get_block("C"))
        i0, i1 = sch.split(i, [None, 128])
        sch.bind(i0, "blockIdx.x")
        sch.bind(i1, "threadIdx.x")
        return sch
    without = gpu_memory.traffic(_step(plain(1024), "window_sum", 1024))
    fetched = _step(gpu_chapter.window_sum(1024), "window_sum", 1024)
    with_fetch = gpu_memory.traffic(fetched)
    assert with_fetch["l2_bytes"] < without["l2_bytes"]
    assert with_fetch["dram_bytes"] <= without["dram_bytes"]
    rows = gpu_memory.access_rows(fetched["model"]["kernels"][0])
    assert [r["buffer"] for r in rows if r["scope"] == "global" and r["kind"] == "load"] == ["A"]
    assert {r["buffer"] for r in rows if r["scope"] == "shared"} == {"A_shared"}


def test_memory_figure_over_the_steps(gemms):
    by_step = {0: {"ok": True, "not_gpu": "not a GPU program yet"}, 1: gemms["naive"],
               2: gemms["local"], 3: gemms["shared"]}
    ctx = gpu_memory.memory_context(3, by_step, "h100-sxm")
    assert [s["step"] for s in ctx["steps"]] == [1, 2, 3]
    fig = json.loads(ctx["fig"])
    names = [d["name"] for d in fig["data"]]
    assert names == ["DRAM bytes (modeled)", "L2 bytes (modeled)",
                     "shared wavefronts (modeled)"]
    assert fig["data"][0]["x"] == [1, 2, 3]
    assert fig["data"][2]["x"] == [3]                   # only the shared GEMM has wavefronts
    assert fig["layout"]["yaxis2"]["overlaying"] == "y"


def test_memory_context_reads_a_worker_result_defensively():
    hostile = {"model": {"dram_bytes": "lots", "l2_bytes": float("nan"), "kernels": [
        {"name": "<k>", "accesses": [{"buffer": "<script>", "scope": "shared",
                                      "conflict_ways": "x", "executions": None}, 7]}, "x"]},
               "resources": [{"grid": [1, 2], "block": "no"}, None]}
    ctx = gpu_memory.memory_context(0, {0: hostile}, "h100-sxm")
    (row,) = ctx["kernels"][0]["rows"]
    assert row["what"] == "no bank conflict" and row["executions"] == 0.0
    assert ctx["traffic"]["dram_bytes"] is None and ctx["steps"] == []
    assert ctx["resources"][0]["grid"] is None
    old = gpu_memory.memory_context(0, {0: {"model": {"dram_bytes": 5.0, "kernels": [
        {"name": "k"}]}}}, "a100")
    assert old["kernels"][0]["has_accesses"] is False and old["fig"] is not None


# ---------------------------------------------------------------------------- the diagram
def test_diagram_kernels_grid_block_and_warp_of_the_local_gemm():
    sch = gpu_chapter.gemm_local(256)
    (tree,) = module_trees(sch.mod)
    (k,) = diagram.gpu_kernels(tree)
    assert k["grid"] == (4, 4, 1) and k["block"] == (8, 8, 1)
    assert k["threads"] == 64 and k["warps"] == 2 and k["blocks"] == 16
    svg = str(diagram.render_svg(tree, kernels=[k]))
    assert 'data-grid="4,4,1" data-block="8,8,1"' in svg
    assert "kernel 0: grid (4,4,1) × block (8,8,1) = 64 threads" in svg
    assert svg.count('class="dnode dloop kind-grid"') == 2
    assert svg.count('class="dnode dloop kind-thread"') == 2
    assert 'data-thread="blockIdx.y"' in svg and 'data-thread="threadIdx.x"' in svg
    # a warp: 8 threads along x by 4 along y
    assert "warp 0 = threadIdx.x 0–7 × threadIdx.y 0–3" in svg


def test_diagram_of_the_shared_gemm_marks_the_cooperative_fetch():
    sch = gpu_chapter.gemm_shared(256)
    (tree,) = module_trees(sch.mod)
    (k,) = diagram.gpu_kernels(tree)
    assert k["grid"] == (4, 4, 1) and k["block"] == (64, 1, 1)
    svg = str(diagram.render_svg(tree, kernels=[k]))
    # the block's threadIdx.x and the two fetches' inner loops on the same axis
    assert svg.count('data-thread="threadIdx.x"') == 3
    assert svg.count('class="warp"') == 3
    assert "warp 0 = threadIdx.x 0–31; 2 warps along x" in svg


def test_cpu_program_has_no_kernels():
    from engine import workloads
    (tree,) = module_trees(workloads.get("matmul", m=16, n=16, k=16))
    assert diagram.gpu_kernels(tree) == []
    assert "kernel-line" not in str(diagram.render_svg(tree))


# ---------------------------------------------------------------------------- the pages
@pytest.fixture(scope="module")
def client():
    return make_test_app().test_client()


def _q(url: str) -> dict:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def _settle(client, workload: str, q: dict, path: str) -> str:
    for _ in range(200):
        body = client.get(f"/explore/{workload}/{path}", query_string=q).get_data(as_text=True)
        if "-pending" not in body:
            return body
    raise AssertionError(body)


def _fig(body: str, plot_id: str) -> dict:
    m = re.search(rf'id="{plot_id}" data-plotly="([^"]+)"', body)
    return json.loads(html.unescape(m.group(1)))


def test_memory_pane_and_diagram_of_the_shared_gemm_preset(client):
    url = presets.info("gpu-gemm-shared").explore_url(n=128)
    q = _q(url)
    page = client.get(url).get_data(as_text=True)
    assert 'class="lg lg-grid"' in page and 'class="lg lg-thread"' in page
    assert "one iteration fits in" not in page           # no CPU cache footprints
    assert 'data-grid="2,2,1" data-block="64,1,1"' in page
    cache = _settle(client, "matmul", q, "cache")
    assert "modeled for H100 SXM" in cache and 'id="gpu-dram"' in cache
    assert re.search(r'data-buffer="A_shared"[^>]*>\s*<td>A_shared</td><td>shared load</td>'
                     r'\s*<td class="what">4-way bank conflict', cache)
    fig = _fig(cache, "gpu-memory-plot")
    assert fig["data"][0]["name"] == "DRAM bytes (modeled)"
    # the diagram's strip, now that the step is stored: ptxas's registers, occupancy
    page = client.get(url).get_data(as_text=True)
    strip = re.search(r'id="diagram-gpu">(.*?)</div>', page, re.S).group(1)
    assert "registers/thread" in strip and "occupancy" in strip and "4 KiB" in strip
    assert "4 KiB of 48 KiB/block, 228 KiB/SM" in strip
    # the GPU roofline: the sheet's roofs, the modeled point
    measure = _settle(client, "matmul", q, "measure")
    roof = _fig(measure, "roofline-plot")
    texts = [a["text"] for a in roof["layout"]["annotations"]]
    assert any(t.startswith("FP32 peak 66,908 GFLOP/s") for t in texts)
    assert any(t.startswith("DRAM 3,350 GB/s") for t in texts)
    assert roof["layout"]["yaxis"]["title"]["text"] == "modeled GFLOP/s"
    assert "modeled for H100 SXM" in roof["data"][-1]["hovertemplate"]
    assert 'id="roofline-gpu"' in measure and "specification sheet" in measure


def test_memory_pane_of_an_unbound_step(client):
    body = _settle(client, "vector_add", {"n": "64", "target": "cuda-h100-sxm"}, "cache")
    assert "not a GPU program yet" in body and "gpu-memory-plot" not in body


def test_cpu_cache_pane_unchanged(client):
    body = _settle(client, "vector_add", {"n": "64"}, "cache")
    assert "gpu-dram" not in body and "misses" in body
    page = client.get("/explore/vector_add?n=64").get_data(as_text=True)
    assert 'id="diagram-gpu"' not in page and "one iteration fits in" in page


def test_plots_roofline_modeled_labels():
    peaks = {"peak_gflops": 1000.0, "bandwidth_gbs": 100.0, "ridge_intensity": 10.0,
             "threads": 1}
    fig = json.loads(plots.roofline_figure([{"step": 1, "intensity": 2.0, "gflops": 50.0}],
                                           peaks, current=1, modeled="modeled for X"))
    assert fig["layout"]["xaxis"]["title"]["text"] == "flop per modeled DRAM byte"
    cpu = json.loads(plots.roofline_figure([{"step": 1, "intensity": 2.0, "gflops": 50.0}],
                                           peaks, current=1))
    assert cpu["layout"]["yaxis"]["title"]["text"] == "GFLOP/s"
    assert not any("FP32" in a["text"] for a in cpu["layout"]["annotations"])

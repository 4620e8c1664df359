"""A GPU session's refusals (issue 39): one sentence, the parts highlighted, the state
unchanged — shared memory over the GPU's limit at the click (app.web.gpu_refusals), a race
found by the emulator when the worker's result comes (the step is withdrawn)."""
from __future__ import annotations

import re

from inline_service import HX, drain, state_of, text

GPU = {"target": "cuda-h100-sxm"}


def click(client, workload: str, q: dict, sel: str, prim: str, status: int = 200, **args):
    r = client.post(f"/explore/{workload}/apply", data=dict(q, sel=sel, primitive=prim, **args),
                    headers=HX)
    assert r.status_code == status, text(r)[:2000]
    return r


def steps(client, workload: str, q: dict, clicks) -> dict:
    for sel, prim, args in clicks:
        q = state_of(click(client, workload, q, sel, prim, **args).headers["HX-Push-Url"])
    return q


#: matmul in 64 x 64 blocks on the grid, A read into "shared" (not placed yet)
GEMM_BLOCKS = [
    ("L/matmul/0/C", "split", {"factors": "None, 64"}),
    ("L/matmul/2/C", "split", {"factors": "None, 64"}),
    ("L/matmul/0/C", "reorder", {"order": "i_0, j_0, i_1, j_1"}),
    ("L/matmul/0/C", "bind", {"thread_axis": "blockIdx.y"}),
    ("L/matmul/1/C", "bind", {"thread_axis": "blockIdx.x"}),
    ("B/matmul/C", "cache_read", {"buffer": "0", "scope": "shared"}),
]


def test_shared_memory_over_the_limit_is_refused_at_the_click(client):
    q = steps(client, "matmul", dict(GPU, n="256"), GEMM_BLOCKS)
    page = text(client.get("/explore/matmul", query_string=q))
    assert "A_shared" in page
    # A_shared computed at the block's loop j_0: a 64 x 256 float tile, 64 KiB per block
    r = click(client, "matmul", q, "B/matmul/A_shared", "compute_at", status=422,
              loop="L/matmul/1/C")
    body = text(r)
    assert "HX-Push-Url" not in r.headers                    # the state is unchanged
    assert "64 KiB of shared memory per thread block" in body and "48 KiB" in body
    assert "A_shared 64 x 256 float32" in body and "loop j_0" in body
    hl = re.search(r'data-highlight="([^"]*)"', body).group(1).split()
    assert "B/matmul/A_shared" in hl and any(h.startswith("L/matmul/1/") for h in hl)
    # the same stage computed at the k loop: a 64 x 1 tile per iteration, accepted
    r = click(client, "matmul", q, "B/matmul/A_shared", "compute_at", loop="L/matmul/4/C")
    assert "HX-Push-Url" in r.headers


def test_a_state_not_yet_a_kernel_is_not_refused(client):
    # the stage placed under a loop that is not bound yet: no kernel holds it, no refusal
    q = steps(client, "matmul", dict(GPU, n="256"), [
        ("L/matmul/0/C", "split", {"factors": "None, 64"}),
        ("B/matmul/C", "cache_read", {"buffer": "0", "scope": "shared"}),
        ("B/matmul/A_shared", "compute_at", {"loop": "L/matmul/0/C"}),
    ])
    assert q["t"]
    # binding that loop makes it a kernel holding a 64 KiB tile: that step is refused
    r = click(client, "matmul", q, "L/matmul/0/A_shared", "bind", status=422,
              thread_axis="blockIdx.x")
    assert "64 KiB of shared memory" in text(r) and "HX-Push-Url" not in r.headers


#: the window sum bound as the chapter's, A read into a *global* copy computed at the thread
#: loop: each thread copies its three elements, then reads two its neighbours copy — with
#: nothing ordering them (the lowering puts barriers only for "shared"): a race the emulator
#: finds, which every static check accepts (bind's rules were met when the loops were bound)
WINDOW_RACE = [
    ("L/window_sum/0/C", "split", {"factors": "None, 64"}),
    ("L/window_sum/0/C", "bind", {"thread_axis": "blockIdx.x"}),
    ("L/window_sum/1/C", "bind", {"thread_axis": "threadIdx.x"}),
    ("B/window_sum/C", "cache_read", {"buffer": "0", "scope": "global"}),
    ("B/window_sum/A_global", "compute_at", {"loop": "L/window_sum/1/C"}),
]


def test_a_race_found_by_the_emulator_withdraws_the_step(app, client):
    q = steps(client, "window_sum", dict(GPU, n="256"), WINDOW_RACE)
    client.get("/explore/window_sum/measure", query_string=q)
    drain(app)
    m = text(client.get("/explore/window_sum/measure", query_string=q))
    w = re.search(r'<div class="withdrawn[^>]*>', m)
    assert w, m[:3000]
    tag = w.group(0)
    back = re.search(r'data-withdraw="([^"]+)"', tag).group(1).replace("&amp;", "&")
    assert "Step 5 is withdrawn: the emulator found a data race" in m
    assert "global buffer &#39;A_global&#39;" in m and "thread (" in m
    hl = re.search(r'data-highlight="([^"]*)"', tag).group(1).split()
    assert "B/window_sum/A_global" in hl
    assert "Back to step 4" in m
    # the state to go back to is the trace without the step: four steps, A_global at the root
    before = state_of(back)
    page = text(client.get("/explore/window_sum", query_string=before))
    assert 'data-sel="B/window_sum/A_global"' in page
    q4 = steps(client, "window_sum", dict(GPU, n="256"), WINDOW_RACE[:4])
    assert before["t"] == q4["t"] and "at" not in before
    # an earlier step's race, looked at from a later step, stays on its row: no withdrawal
    q5 = dict(q, at="4")
    m4 = text(client.get("/explore/window_sum/measure", query_string=q5))
    assert "data-withdraw" not in m4

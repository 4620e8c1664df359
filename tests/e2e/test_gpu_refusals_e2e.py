"""A GPU session's refusals in a real Chromium (issue 39): one sentence with the highlight,
the state unchanged, as for the CPU.

* Shared memory over the GPU's per-block limit is refused at the click: GEMM (256) in
  64 x 64 blocks, A read into "shared" and computed at the block's loop ``j_0`` — a 64 x 256
  float tile, 64 KiB of the H100's 48 KiB — is refused, the stage and the loop highlighted,
  the trace and the address unchanged; computed at ``k_0`` it is accepted.
* A race the emulator finds withdraws the step when the worker's result comes: the window
  sum bound as the chapter's, its input read into a *global* copy computed at the thread
  loop (each thread copies three elements and reads two its neighbours copy, with nothing
  ordering them). The page goes back to the state before the step by itself — the trace
  without it, the address of that state — and says the race (buffer, element, the two
  threads) with the blocks touching the buffer highlighted.

Screenshots: test-artifacts/screenshots/gpu-refused-*.png."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from test_explorer_e2e import n_steps, program_text, wait_address
from test_gpu_chapter_clicks_e2e import do_step, loop_sel
from test_gpu_panes_e2e import top

pytestmark = pytest.mark.e2e


def state(url: str) -> dict:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def submit(page, func: str, step) -> None:
    """Select and fill in as :func:`do_step` does, and click, without waiting for a step."""
    prim, subject, form_args = step
    sel = loop_sel(page, subject[1], subject[2]) if subject[0] == "loop" else \
        f"B/{func}/{subject[1]}"
    page.click(f'#program-pane [data-sel="{sel}"]')
    page.wait_for_selector(f'#toolbar[data-selected="{sel}"] form.prim')
    form = f'#toolbar form.prim:has(button[data-prim="{prim}"])'
    for key, value in form_args.items():
        field = page.locator(f"{form} [name={key}]")
        if key == "loop":
            field.select_option(label=value)
        else:
            field.select_option(value) if field.evaluate("e => e.tagName") == "SELECT" \
                else field.fill(value)
    page.click(f'{form} button[data-prim="{prim}"]')


GEMM_BLOCKS = [
    ("split", ("loop", "i", "C"), {"factors": "None, 64"}),
    ("split", ("loop", "j", "C"), {"factors": "None, 64"}),
    ("split", ("loop", "k", "C"), {"factors": "None, 8"}),
    ("reorder", ("loop", "i_0", "C"), {"order": "i_0, j_0, k_0, i_1, j_1, k_1"}),
    ("bind", ("loop", "i_0", "C"), {"thread_axis": "blockIdx.y"}),
    ("bind", ("loop", "j_0", "C"), {"thread_axis": "blockIdx.x"}),
    ("cache_read", ("block", "C"), {"buffer": "0", "scope": "shared"}),
]


def test_shared_memory_over_the_limit_is_refused_at_the_click(page, server, shot):
    page.goto(f"{server}/explore/matmul?m=256&n=256&k=256&target=cuda-h100-sxm")
    page.wait_for_selector("#program-pane .node")
    for k, step in enumerate(GEMM_BLOCKS, start=1):
        do_step(page, "matmul", k, step)
    wait_address(page)
    before_url, before_program = page.url, program_text(page)

    submit(page, "matmul", ("compute_at", ("block", "A_shared"), {"loop": "j_0 (above C)"}))
    page.wait_for_selector("#message.msg-refused")
    msg = page.inner_text("#message")
    assert "64 KiB of shared memory per thread block" in msg and "48 KiB" in msg, msg
    assert "A_shared 64 x 256 float32" in msg and "loop j_0" in msg
    # highlighted: the stage and the loop it would be computed at
    assert page.locator('#program-pane [data-sel="B/matmul/A_shared"].offending').count() >= 1
    assert page.locator('#program-pane [data-sel^="L/matmul/1/"].offending').count() >= 1
    # the state is unchanged: the trace, the program, the address
    assert n_steps(page) == len(GEMM_BLOCKS)
    assert program_text(page) == before_program and page.url == before_url
    shot(page, "gpu-refused-shared-memory")

    # computed at k_0 instead: a 64 x 8 tile per iteration, accepted
    do_step(page, "matmul", len(GEMM_BLOCKS) + 1,
            ("compute_at", ("block", "A_shared"), {"loop": "k_0 (above C)"}))
    assert page.locator("#message.msg-refused").count() == 0


WINDOW_RACE = [
    ("split", ("loop", "i", "C"), {"factors": "None, 64"}),
    ("bind", ("loop", "i_0", "C"), {"thread_axis": "blockIdx.x"}),
    ("bind", ("loop", "i_1", "C"), {"thread_axis": "threadIdx.x"}),
    ("cache_read", ("block", "C"), {"buffer": "0", "scope": "global"}),
]


def test_a_race_found_by_the_emulator_withdraws_the_step(page, server, shot):
    page.goto(f"{server}/explore/window_sum?n=256&target=cuda-h100-sxm")
    page.wait_for_selector("#program-pane .node")
    for k, step in enumerate(WINDOW_RACE, start=1):
        do_step(page, "window_sum", k, step)
    wait_address(page)
    before = state(page.url)
    before_program = program_text(page)

    # the step that races: accepted by every static check, then withdrawn by the worker
    do_step(page, "window_sum", 5,
            ("compute_at", ("block", "A_global"), {"loop": "i_1 (above C)"}))
    page.wait_for_function(
        "() => { const m = document.getElementById('message');"
        " return m && m.classList.contains('msg-refused') &&"
        " m.textContent.includes('withdrawn'); }", timeout=240_000)
    page.wait_for_function(
        "() => document.querySelectorAll('#trace-pane li.step').length === 5")
    msg = page.inner_text("#message")
    assert "Step 5 is withdrawn: the emulator found a data race" in msg, msg
    assert "global buffer 'A_global'" in msg and "thread (" in msg and "element" in msg
    # back at the state before the step: its trace, its program, its address
    assert n_steps(page) == 4 and program_text(page) == before_program
    page.wait_for_function("t => new URLSearchParams(location.search).get('t') === t",
                           arg=before["t"])
    assert state(page.url) == before or state(page.url).get("t") == before["t"]
    assert "compute_at" not in page.inner_text("#trace-pane")
    # the blocks touching the buffer are highlighted
    assert page.locator('#program-pane [data-sel="B/window_sum/A_global"].offending').count() >= 1
    # the measurement pane is the state's own again: no withdrawal pending
    page.wait_for_function("() => !document.querySelector('#withdrawn')"
                           " && document.getElementById('measure-now')"
                           " && document.getElementById('measure-now').textContent"
                           ".includes('Step 4')", timeout=240_000)
    shot(page, "gpu-refused-race-withdrawn")


def test_the_diagrams_gpu_line_fills_when_the_workers_result_arrives(page, server, shot):
    """Registers per thread, shared memory and occupancy come with the worker's result: the
    measurement body's answer fills the diagram's GPU line, the diagram itself not redrawn."""
    page.goto(f"{server}/explore/window_sum?n=512&target=cuda-h100-sxm")
    page.wait_for_selector("#program-pane .node")
    steps = [("split", ("loop", "i", "C"), {"factors": "None, 128"}),
             ("bind", ("loop", "i_0", "C"), {"thread_axis": "blockIdx.x"}),
             ("bind", ("loop", "i_1", "C"), {"thread_axis": "threadIdx.x"}),
             ("cache_read", ("block", "C"), {"buffer": "0", "scope": "shared"}),
             ("compute_at", ("block", "A_shared"), {"loop": "i_1 (above C)"})]
    for k, step in enumerate(steps, start=1):
        do_step(page, "window_sum", k, step)
    page.evaluate("() => { document.getElementById('diagram-pane').dataset.mark = 'click'; }")
    page.wait_for_function(
        "() => /\\d+ registers\\/thread/.test(document.getElementById('diagram-gpu').textContent)",
        timeout=240_000)
    strip = page.inner_text("#diagram-gpu")
    assert "block 128×1×1 = 128 of 1024 threads" in strip
    assert "shared" in strip and "of 48 KiB/block" in strip and "occupancy" in strip
    # the same diagram pane as the click's answer drew: only its GPU line was filled in
    assert page.get_attribute("#diagram-pane", "data-mark") == "click"
    top(page, "#diagram-pane")
    shot(page, "gpu-strip-filled")

"""The GPU chapter's first lesson in a real Chromium (issue 39): it opens on the H100 SXM
target, the learner splits i and binds blockIdx.x / threadIdx.x with the toolbar ("try it
yourself"); each step is checked against the lesson and by its checks — the binding from
the IR at once, "matches numpy" and "no race" once the workers' emulated run is in (the
list polls) — and the runtime plot shows the modeled point. Screenshots:
test-artifacts/screenshots/gpu-lesson-*.png."""
from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.e2e

L = "gpu_1_vector_add"


def toolbar_step(page, sel: str, prim: str, **fields) -> None:
    if not page.locator("#program-pane").is_visible():   # the step points at another tab
        page.click("#tab-program")
    page.click(f'#program-pane [data-sel="{sel}"]')
    page.wait_for_selector(f'#toolbar[data-selected="{sel}"] form.prim')
    form = f'#toolbar form.prim:has(button[data-prim="{prim}"])'
    for name, value in fields.items():
        field = page.locator(f'{form} [name="{name}"]')
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)
    page.click(f'#toolbar button[data-prim="{prim}"]')


def test_gpu_lesson_first_steps_with_checks(page, server, shot):
    page.goto(server + f"/lessons/{L}")
    page.wait_for_selector("#lesson-pane")
    assert "Step 1 of 4" in page.inner_text("#lesson-pane")
    page.wait_for_selector("#not-gpu")          # the program is not a kernel yet
    shot(page, "gpu-lesson-01-opens-on-h100")
    page.click("#lesson-next")
    page.wait_for_url(re.compile(r"step=1(&|$)"))
    page.wait_for_selector("#lesson-target")
    assert "TARGET: H100 SXM" in page.inner_text("#lesson-target").upper()

    # step 2: split i by 128 (no parallel in a GPU session's toolbar, vectorize stays)
    page.click("#try-yourself > summary")
    page.click('#program-pane [data-sel="L/vector_add/0/C"]')
    page.wait_for_selector('#toolbar[data-selected="L/vector_add/0/C"] form.prim')
    prims = page.locator("#toolbar button[data-prim]").evaluate_all(
        "bs => bs.map(b => b.dataset.prim)")
    assert "bind" in prims and "vectorize" in prims and "parallel" not in prims
    toolbar_step(page, "L/vector_add/0/C", "split", factors="None, 128")
    page.wait_for_selector("#lesson-check.ok")
    assert "i_0" in page.inner_text("#program-pane")

    # step 3: bind i_0 to blockIdx.x — its check is read from the program
    page.click("#lesson-next")
    page.wait_for_url(re.compile(r"step=2&t="))
    page.wait_for_selector("#try-yourself")
    toolbar_step(page, "L/vector_add/0/C", "bind", thread_axis="blockIdx.x")
    page.wait_for_selector("#lesson-check.ok")
    page.wait_for_selector('#lesson-checks li[data-state="ok"]')
    assert "bound to blockIdx.x" in page.inner_text("#lesson-checks")
    page.locator("#lesson-checks").scroll_into_view_if_needed()
    shot(page, "gpu-lesson-02-bind-blockidx-checked")

    # step 4: bind i_1 to threadIdx.x — a kernel: the workers' result checks come in
    page.click("#lesson-next")
    page.wait_for_url(re.compile(r"step=3&t="))
    page.wait_for_selector("#try-yourself")
    toolbar_step(page, "L/vector_add/1/C", "bind", thread_axis="threadIdx.x")
    page.wait_for_selector("#lesson-check.ok")
    page.wait_for_function(
        "() => { const l = document.querySelectorAll('#lesson-checks li');"
        " return l.length === 4 && [...l].every(x => x.dataset.state === 'ok'); }",
        timeout=120_000)
    checks = page.inner_text("#lesson-checks")
    assert "the result matches numpy" in checks and "finds no race" in checks
    page.wait_for_function(
        "() => { const e = document.querySelector('#runtime-plot[data-drawn]');"
        " return e && parseInt(e.dataset.points) >= 1; }", timeout=120_000)
    assert "modeled for H100 SXM" in page.inner_text("#measure-body")
    assert "CUDA C / PTX / Resources" in page.inner_text("#lesson-pane")
    page.locator("#lesson-checks").scroll_into_view_if_needed()
    shot(page, "gpu-lesson-03-kernel-checks-modeled")
    page.click("#tab-ll")                       # where the step points: the CUDA C
    page.wait_for_selector("#code-ll pre")
    assert "__global__" in page.inner_text("#code-ll")
    shot(page, "gpu-lesson-04-cuda-c")
    page.click("#lesson-next")
    page.wait_for_url(re.compile(r"step=4&t="))
    page.wait_for_selector("text=Lesson finished")
    assert not page.js_errors, page.js_errors

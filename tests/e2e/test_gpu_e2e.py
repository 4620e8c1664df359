"""The explorer on a GPU target in a real Chromium: vector add switched to the H100 SXM
target from the state bar, split, then bound to blockIdx.x / threadIdx.x through the
toolbar; the code pane shows CUDA C, the runtime plot a point labelled as modeled; the
reloaded link gives the same state. Screenshots: test-artifacts/screenshots/gpu-*.png."""
from __future__ import annotations

import pytest

from test_explorer_e2e import program_text, select, wait_address, wait_plot, wait_steps

pytestmark = pytest.mark.e2e

MODELED = "modeled for H100 SXM (no GPU on this machine)"


def test_vector_add_on_a_gpu_split_bind_cuda_modeled_reload(page, server, shot):
    page.goto(server + "/explore/vector_add")
    page.wait_for_selector("#program-pane .node")
    assert "Target: CPU" in page.inner_text("#target-now")
    # --- the target switch in the state bar
    page.click("#target-now")
    page.click('#target-menu button[data-target="cuda-h100-sxm"]')
    page.wait_for_url("**target=cuda-h100-sxm**")
    page.wait_for_selector("#program-pane .node")
    assert "Target: H100 SXM" in page.inner_text("#target-now")
    assert page.inner_text("#tab-ll") == "CUDA C"
    page.wait_for_selector("#not-gpu")                 # step 0: not a GPU program yet
    assert "did you forget to bind?" in page.inner_text("#measure-body")
    shot(page, "gpu-01-vector-add-on-h100")

    # --- split i by 128
    select(page, "L/vector_add/0/C")
    assert page.locator('#toolbar button[data-prim="bind"]').count() == 1
    page.fill('#toolbar input[name="factors"]', "None, 128")
    page.click('#toolbar button[data-prim="split"]')
    wait_steps(page, 1)
    assert "i_0" in program_text(page) and "i_1" in program_text(page)

    # --- bind i_0 to blockIdx.x (the toolbar's default there)
    select(page, "L/vector_add/0/C")
    form = '#toolbar form.prim:has(button[data-prim="bind"])'
    assert page.input_value(f"{form} select[name=thread_axis]") == "blockIdx.x"
    shot(page, "gpu-02-bind-offered")
    page.click('#toolbar button[data-prim="bind"]')
    wait_steps(page, 2)

    # --- bind i_1 to threadIdx.x (blockIdx.x is not offered there: bound above)
    select(page, "L/vector_add/1/C")
    options = page.locator(f"{form} select[name=thread_axis] option").all_inner_texts()
    assert "threadIdx.x" in options and "blockIdx.x" not in options
    page.select_option(f"{form} select[name=thread_axis]", "threadIdx.x")
    page.click('#toolbar button[data-prim="bind"]')
    wait_steps(page, 3)
    text = program_text(page)
    assert 'T.thread_binding(8, thread="blockIdx.x")' in text or "blockIdx.x" in text
    assert "threadIdx.x" in text
    wait_address(page)
    wait_plot(page, 2)                                   # steps 2 and 3 have a time
    measure = page.inner_text("#measure-body")
    assert MODELED in measure and "matches numpy" in measure
    assert MODELED in page.inner_text('ul.plotlegend[data-for="runtime-plot"]')
    shot(page, "gpu-03-bound-modeled-point")

    # --- the code pane: CUDA C, then the resources
    page.click("#tab-ll")
    page.wait_for_selector("#code-ll pre")
    cuda = page.inner_text("#code-ll")
    assert "__global__" in cuda and "threadIdx.x" in cuda and "blockIdx.x" in cuda
    shot(page, "gpu-04-cuda-c")
    page.click("#tab-res")
    page.wait_for_selector("#code-res pre")
    res = page.inner_text("#code-res")
    assert "registers" in res and "grid=(8, 1, 1), block=(128, 1, 1)" in res
    shot(page, "gpu-05-resources")

    # --- reload the link: the same state
    url = page.url
    page.goto(url)
    page.wait_for_selector("#program-pane .node")
    assert "Target: H100 SXM" in page.inner_text("#target-now")
    assert program_text(page) == text
    wait_plot(page, 2)
    assert MODELED in page.inner_text("#measure-body")
    shot(page, "gpu-06-reloaded")
    assert page.js_errors == []

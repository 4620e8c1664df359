"""The explorer's panes for a GPU step in a real Chromium (issue 39): the GEMM presets of
the course's GPU chapter on the H100 SXM target — the loop diagram's grid and block, the
warp slice and the block's resources; the memory pane's accesses (A_shared's bank
conflicts) and traffic; the roofline against the GPU's sheet, modeled. Screenshots:
test-artifacts/screenshots/gpu-panes-*.png."""
from __future__ import annotations

import pytest

from engine import presets

pytestmark = pytest.mark.e2e


def wait_memory(page) -> None:
    """Until the memory pane shows the current step's model and nothing is pending."""
    page.wait_for_function(
        "() => document.querySelector('#cache-body #gpu-dram') &&"
        " !document.querySelector('#cache-pending') &&"
        " document.querySelector('#gpu-memory-plot[data-drawn]')", timeout=240_000)


def top(page, selector: str) -> None:
    """Scroll the pane holding ``selector`` so that it is at the top (for a screenshot)."""
    page.eval_on_selector(selector, "e => e.scrollIntoView({block: 'start'})")


def traffic(page) -> dict:
    return {k: float(page.get_attribute(f"#gpu-{k}", "data-bytes")) for k in ("dram", "l2")}


def test_gemm_presets_diagram_memory_and_roofline(page, server, shot):
    # --- the shared-memory GEMM
    page.goto(server + presets.info("gpu-gemm-shared").explore_url())
    page.wait_for_selector("#program-pane .node")
    assert "Target: H100 SXM" in page.inner_text("#target-now")
    diagram = "#diagram-pane svg"
    line = page.locator(f"{diagram} .kernel-line")
    assert line.get_attribute("data-grid") == "16,16,1"
    assert line.get_attribute("data-block") == "64,1,1"
    assert page.locator(f'{diagram} [data-thread^="blockIdx"]').count() == 2
    assert page.locator(f'{diagram} [data-thread="threadIdx.x"]').count() == 3
    assert "warp 0 = threadIdx.x 0–31" in page.text_content(f"{diagram} .warp-text >> nth=0")
    strip = page.inner_text("#diagram-gpu")
    assert "grid 16×16×1 (256 blocks)" in strip and "block 64×1×1 = 64 of 1024 threads" in strip
    assert "Memory behaviour (modeled for H100 SXM" in page.inner_text("#measure-pane")
    wait_memory(page)
    memory = page.inner_text("#cache-body")
    assert "modeled for H100 SXM" in memory
    row = page.locator('#cache-body tr[data-buffer="A_shared"]:has-text("load")')
    assert "4-way bank conflict" in row.inner_text()
    assert "100% coalesced" in page.inner_text('#cache-body tr[data-buffer="A"]')
    shared = traffic(page)
    top(page, "#memory-title")
    shot(page, "gpu-panes-01-shared-gemm-memory")
    top(page, "table.gpu-accesses")
    shot(page, "gpu-panes-01b-shared-gemm-accesses")

    # --- the roofline: the GPU's roofs, the modeled point
    page.click("#mtab-roofline")
    page.wait_for_selector("#roofline-plot[data-drawn]")
    assert "modeled" in page.inner_text("#roofline-now")
    assert "specification sheet" in page.inner_text("#roofline-gpu")
    assert "FP32 peak" in page.text_content("#roofline-plot")
    top(page, "#measure-now")
    shot(page, "gpu-panes-02-shared-gemm-roofline")

    # --- reloaded: the step is stored, the diagram's strip has ptxas's figures
    page.goto(page.url)
    page.wait_for_selector("#diagram-gpu .gpu-regs")
    strip = page.inner_text("#diagram-gpu")
    assert "registers/thread" in strip and "occupancy" in strip and "4 KiB" in strip
    page.eval_on_selector("#diagram-pane .svgwrap", "e => e.scrollIntoView({block: 'start'})")
    shot(page, "gpu-panes-03-shared-gemm-diagram")

    # --- the local-blocking GEMM: 8x8 threads, no shared tiles, more traffic
    page.goto(server + presets.info("gpu-gemm-local").explore_url())
    page.wait_for_selector("#program-pane .node")
    line = page.locator(f"{diagram} .kernel-line")
    assert line.get_attribute("data-block") == "8,8,1"
    assert page.locator(f'{diagram} [data-thread="threadIdx.y"]').count() == 1
    assert ("warp 0 = threadIdx.x 0–7 × threadIdx.y 0–3"
            in page.text_content(f"{diagram} .warp-text >> nth=0"))
    wait_memory(page)
    assert page.locator('#cache-body tr.scope-shared').count() == 0
    local = traffic(page)
    # the shared tiles cut the SMs' traffic through L2 tenfold; DRAM moves each buffer's
    # footprint once in both (A, B and C fit in the H100's 50 MB L2 at this size)
    assert shared["l2"] * 5 < local["l2"]
    assert shared["dram"] <= local["dram"]
    top(page, "#memory-title")
    shot(page, "gpu-panes-04-local-gemm-memory")
    assert page.js_errors == []

"""The explorer on an ARM board in Chromium: a link with target=aarch64 opens, its steps are
built for aarch64, checked against numpy and timed under qemu-aarch64 by the real workers,
and the runtime plot and the pane say the times are the emulator's.

Needs Debian's qemu-user and gcc-aarch64-linux-gnu (./run-tests.sh installs them)."""
from __future__ import annotations

from test_explorer_e2e import select, wait_plot, wait_steps

LABEL = "under emulation (qemu-aarch64), not an ARM board's time"


def test_mm_relu_on_the_arm_board_is_timed_under_emulation(page, server, shot):
    page.goto(server + "/explore/mm_relu?n=16&target=aarch64")
    page.wait_for_selector("#program-pane .node")
    assert "Target: ARM board (aarch64, NEON)" in page.inner_text("#target-now")
    wait_plot(page, 1)                                   # step 0, run under qemu
    measure = page.inner_text("#measure-body")
    assert LABEL in measure and "matches numpy" in measure, measure
    assert LABEL in page.inner_text("#measure-body .plot-legend, #measure-body")
    # split j by 4 (NEON's float lanes) with the toolbar: a second emulated point
    select(page, "L/mm_relu/1/Y")
    page.fill('#toolbar input[name="factors"]', "None, 4")
    page.click('#toolbar button[data-prim="split"]')
    wait_steps(page, 1)
    wait_plot(page, 2)
    measure = page.inner_text("#measure-body")
    assert LABEL in measure and "matches numpy" in measure, measure
    shot(page, "aarch64-01-mm-relu-under-qemu")
    assert not page.js_errors, page.js_errors

"""A learner switches the program pane to TVM 0.27's TVMScript, applies a step (the pane stays
in that dialect) and finds the dialect in the link. Screenshot:
test-artifacts/screenshots/program-dialect-tvm-0.27.png."""
from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.e2e


def test_toggle_prints_the_program_as_tvm_0_27(page, server, shot):
    page.goto(server + "/explore/mm_relu?n=64")
    page.wait_for_selector("#program-pane .node")
    assert 'T.block("Y")' in page.inner_text("#program-pane")
    page.click("#program-pane .dialect-toggle a[data-dialect='tvm-0.27']")
    page.wait_for_url(re.compile(r"dialect=tvm-0\.27"))
    page.wait_for_selector("#program-pane .node")
    program = page.inner_text("#program-pane")
    assert 'with T.sblock("Y")' in program and "T.sblock_alloc_buffer" in program
    assert "@I.ir_module" in program and 'T.block("Y")' not in program
    # a step applied from here keeps the dialect: select loop j of Y and split it
    page.click('#program-pane [data-sel="L/mm_relu/1/Y"]')
    page.wait_for_selector('#toolbar[data-selected="L/mm_relu/1/Y"] form.prim')
    form = page.locator("#toolbar form.prim:has(button[data-prim='split'])")
    form.locator("input[name='factors']").fill("None, 4")
    form.locator("button[data-prim='split']").click()
    page.wait_for_function("() => document.body.innerText.includes('step 1 of 1')")
    page.wait_for_function("() => document.querySelector('#program-pane').innerText"
                           ".includes('j_1')")
    program = page.inner_text("#program-pane")
    assert "j_1" in program and 'with T.sblock("Y")' in program
    assert "dialect=tvm-0.27" in page.input_value("#share-url")
    shot(page, "program-dialect-tvm-0.27")
    assert page.js_errors == []

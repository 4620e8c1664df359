"""The course's GPU chapter clicked through in a real Chromium (issue 39): each of its four
programs — vector add, window sum, GEMM with local blocking, GEMM with shared-memory
blocking — opened in the explorer on the H100 SXM target (``target=cuda-h100-sxm``) at a
small size, and its chapter schedule applied **entirely through the toolbar**, every step
as a learner does it: the loop or block selected in the program (its address read from the
loop diagram by the loop's name, as a learner reads the diagram), the primitive's form
filled in (factors, order, thread axis, buffer and scope, the loop to move under) and
submitted. No preset link and no trace token is used: GEMM local blocking is 12 clicks,
shared blocking 23 (``engine.presets.gpu_chapter`` is the same schedule written in
Python: the last program, read back from the page, is structurally equal to it).

After the last step: the loop diagram shows the kernel's grid and block, the memory pane
the modeled accesses and traffic, the code pane CUDA C, and the step's modeled time is
checked against numpy (in the emulator, race-checked); the shared GEMM's trace, exported
as TVM Python, parses, says how to build it for target="cuda", and run with the engine's
``tvm`` namespace rebuilds the same program. Screenshots of each program's last
step: test-artifacts/screenshots/gpu-chapter-*.png."""
from __future__ import annotations

import ast
import contextlib
import sys

import pytest

from test_explorer_e2e import program_text, select, wait_address, wait_steps
from test_gpu_panes_e2e import top, wait_memory

import engine
from engine import tvm as etvm
from engine import workloads
from engine.presets import gpu_chapter
from engine.schedule import Schedule

pytestmark = pytest.mark.e2e

MODELED = "modeled for H100 SXM (no GPU on this machine)"


# A step: (primitive, subject, form) — subject ("loop", name, block) or ("block", block);
# form values are typed into text inputs or chosen in selects; a select of loops ("loop")
# is chosen by its label ("j_1 (above C)", or the block's own loop "k_0").
def _split_bind(n_thread: int) -> list:
    return [("split", ("loop", "i", "C"), {"factors": f"None, {n_thread}"}),
            ("bind", ("loop", "i_0", "C"), {"thread_axis": "blockIdx.x"}),
            ("bind", ("loop", "i_1", "C"), {"thread_axis": "threadIdx.x"})]


VECTOR_ADD = _split_bind(128)

WINDOW_SUM = _split_bind(128) + [
    ("cache_read", ("block", "C"), {"buffer": "0", "scope": "shared"}),
    ("compute_at", ("block", "A_shared"), {"loop": "i_1 (above C)"}),
    ("split", ("loop", "ax0", "A_shared"), {"factors": "None, 128"}),
    ("bind", ("loop", "ax0_1", "A_shared"), {"thread_axis": "threadIdx.x"}),
]


def _tiles(k_tile: int) -> list:
    return [
        ("cache_write", ("block", "C"), {"buffer": "0", "scope": "local"}),
        ("split", ("loop", "i", "C"), {"factors": "None, 8, 8"}),
        ("split", ("loop", "j", "C"), {"factors": "None, 8, 8"}),
        ("split", ("loop", "k", "C"), {"factors": f"None, {k_tile}"}),
    ]


GEMM_LOCAL = _tiles(4) + [
    ("unroll", ("loop", "k_1", "C"), {}),
    ("reorder", ("loop", "i_0", "C"), {"order": "i_0, j_0, i_1, j_1, k_0, k_1, i_2, j_2"}),
    ("reverse_compute_at", ("block", "C_local"), {"loop": "j_1 (above C)"}),
    ("bind", ("loop", "i_0", "C"), {"thread_axis": "blockIdx.y"}),
    ("bind", ("loop", "j_0", "C"), {"thread_axis": "blockIdx.x"}),
    ("bind", ("loop", "i_1", "C"), {"thread_axis": "threadIdx.y"}),
    ("bind", ("loop", "j_1", "C"), {"thread_axis": "threadIdx.x"}),
    ("decompose_reduction", ("block", "C"), {"loop": "k_0"}),
]


def _shared_tile(index: str, buf: str, k_0: str) -> list:
    """cache_read into "shared" at k_0 (``k_0``: its label in the toolbar, which names the
    first block under a loop) and the cooperative, vectorized fetch."""
    return [
        ("cache_read", ("block", "C"), {"buffer": index, "scope": "shared"}),
        ("compute_at", ("block", buf), {"loop": k_0}),
        ("fuse", ("loop", "ax0", buf), {}),
        ("split", ("loop", "ax0_ax1_fused", buf), {"factors": "None, 64, 4"}),
        ("vectorize", ("loop", "ax0_ax1_fused_2", buf), {}),
        ("bind", ("loop", "ax0_ax1_fused_1", buf), {"thread_axis": "threadIdx.x"}),
    ]


GEMM_SHARED = _tiles(8) + [
    ("reorder", ("loop", "i_0", "C"), {"order": "i_0, j_0, i_1, j_1, k_0, k_1, i_2, j_2"}),
    ("reverse_compute_at", ("block", "C_local"), {"loop": "j_1 (above C)"}),
    ("bind", ("loop", "i_0", "C"), {"thread_axis": "blockIdx.y"}),
    ("bind", ("loop", "j_0", "C"), {"thread_axis": "blockIdx.x"}),
    ("fuse", ("loop", "i_1", "C"), {}),
    ("bind", ("loop", "i_1_j_1_fused", "C"), {"thread_axis": "threadIdx.x"}),
    *_shared_tile("0", "A_shared", "k_0 (above C)"),
    *_shared_tile("1", "B_shared", "k_0 (above A_shared)"),
    ("decompose_reduction", ("block", "C"), {"loop": "k_0"}),
]

#: name -> (explorer path, the steps, the chapter's own schedule at that size, the kernel's
#: grid and block, what the memory pane must list)
PROGRAMS = {
    "vector-add": ("vector_add", {"n": 1024}, VECTOR_ADD,
                   lambda sch, f: gpu_chapter.apply_vector_add(sch, 128, func_name=f),
                   "8,1,1", "128,1,1", ("A", "C")),
    "window-sum": ("window_sum", {"n": 1024}, WINDOW_SUM,
                   lambda sch, f: gpu_chapter.apply_window_sum(sch, 128, func_name=f),
                   "8,1,1", "128,1,1", ("A", "A_shared", "B")),
    "gemm-local": ("matmul", {"m": 128, "n": 128, "k": 128}, GEMM_LOCAL,
                   lambda sch, f: gpu_chapter.apply_gemm_local(sch, 8, 8, 8, 8, 4, func_name=f),
                   "2,2,1", "8,8,1", ("A", "B", "C")),
    "gemm-shared": ("matmul", {"m": 128, "n": 128, "k": 128}, GEMM_SHARED,
                    lambda sch, f: gpu_chapter.apply_gemm_shared(sch, 8, 8, 8, 8, 8,
                                                                 func_name=f),
                    "2,2,1", "64,1,1", ("A", "A_shared", "B_shared")),
}


@contextlib.contextmanager
def tvm_is_the_engines():
    """``import tvm`` gives the engine's TVM namespace (engine/tvm) for a while."""
    saved = {k: sys.modules.get(k) for k in ("tvm", "tvm.s_tir")}
    sys.modules["tvm"], sys.modules["tvm.s_tir"] = etvm, etvm.s_tir
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def page_program(page) -> str:
    """The program pane's text without its line numbers (the TVMScript shown)."""
    return page.evaluate("""() => Array.from(
        document.querySelectorAll('#program-pane pre code > .line'), line => {
            const copy = line.cloneNode(true);
            copy.querySelectorAll('.gutter').forEach(g => g.remove());
            return copy.textContent.replace(/\\n$/, ''); }).join('\\n')""")


def chapter_program(workload: str, params: dict, apply_chapter):
    """The chapter's schedule (``engine.presets.gpu_chapter``) applied in Python to the
    workload the explorer opened."""
    func = workloads.info(workload).func_name
    sch = Schedule(workloads.get(workload, **params))
    apply_chapter(sch, func)
    return sch.mod[func]


def loop_sel(page, name: str, block: str) -> str:
    """The address of loop ``name`` above ``block``, read from the loop diagram."""
    loc = page.locator(f'#diagram-pane [data-sel^="L/"][data-sel$="/{block}"]'
                       f'[aria-label^="loop {name},"]')
    assert loc.count() >= 1, f"no loop {name} above {block} in the diagram"
    return loc.first.get_attribute("data-sel")


def do_step(page, func: str, k: int, step) -> None:
    prim, subject, form_args = step
    if subject[0] == "loop":
        sel = loop_sel(page, subject[1], subject[2])
    else:
        sel = f"B/{func}/{subject[1]}"
    select(page, sel)
    form = f'#toolbar form.prim:has(button[data-prim="{prim}"])'
    for key, value in form_args.items():
        field = page.locator(f"{form} [name={key}]")
        if field.evaluate("e => e.tagName") == "SELECT":
            if key == "loop":
                labels = field.locator("option").all_inner_texts()
                assert value in labels, f"step {k} ({prim}): no {value!r} among {labels}"
                field.select_option(label=value)
            else:
                field.select_option(value)
        else:
            field.fill(value)
    page.click(f'{form} button[data-prim="{prim}"]')
    wait_steps(page, k)


def wait_current_measured(page, k: int) -> str:
    """Until the measurement pane shows step ``k``'s result (not queued); its text."""
    page.wait_for_function(
        "k => { const e = document.getElementById('measure-now');"
        " return e && !e.classList.contains('queued') &&"
        " e.textContent.includes('Step ' + k + ':') &&"
        " (e.classList.contains('good') || e.classList.contains('bad') ||"
        "  e.querySelector('.error-text')); }", arg=k, timeout=240_000)
    return page.inner_text("#measure-now")


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_the_chapter_through_the_toolbar(page, server, shot, name):
    workload, params, steps, apply_chapter, grid, block, buffers = PROGRAMS[name]
    func = workloads.info(workload).func_name
    query = "&".join(f"{k}={v}" for k, v in params.items())
    page.goto(f"{server}/explore/{workload}?{query}&target=cuda-h100-sxm")
    page.wait_for_selector("#program-pane .node")
    assert "Target: H100 SXM" in page.inner_text("#target-now")
    for k, step in enumerate(steps, start=1):
        do_step(page, func, k, step)
    n = len(steps)
    wait_address(page)

    # the program clicked is the chapter's (engine.presets.gpu_chapter, the course's cells)
    text = program_text(page)
    assert "blockIdx.x" in text and "threadIdx.x" in text
    assert engine.structural_equal(engine.parse(page_program(page))[func],
                                   chapter_program(workload, params, apply_chapter))

    # the modeled time, checked against numpy in the emulator (race-checked)
    measured = wait_current_measured(page, n)
    assert "✓ matches numpy" in measured, measured
    assert MODELED in measured and "checked for data races" in measured
    assert page.locator("#measure-now.good").count() == 1

    # the loop diagram: the kernel's grid and block
    line = page.locator("#diagram-pane svg .kernel-line")
    assert line.get_attribute("data-grid") == grid
    assert line.get_attribute("data-block") == block
    strip = page.inner_text("#diagram-gpu")
    assert "grid" in strip and "block" in strip

    # the memory pane: the model's accesses and traffic
    wait_memory(page)
    memory = page.inner_text("#cache-body")
    assert "modeled for H100 SXM" in memory
    for buf in buffers:
        assert page.locator(f'#cache-body tr[data-buffer="{buf}"]').count() >= 1, buf
    top(page, "#memory-title")
    shot(page, f"gpu-chapter-{name}-memory")

    # the code pane: CUDA C
    page.click("#tab-ll")
    page.wait_for_selector("#code-ll pre")
    cuda = page.inner_text("#code-ll")
    assert "__global__" in cuda and "threadIdx.x" in cuda
    if "shared" in name or name == "window-sum":
        assert "__shared__" in cuda and "__syncthreads()" in cuda
    if name == "gemm-shared":   # the learner's trace exported as TVM Python for CUDA
        query = page.url.split("?", 1)[1]
        body = page.request.get(f"{server}/explore/{workload}/export/tvm?{query}").text()
        assert '#     rt = tvm.compile(sch.mod, target="cuda")' in body
        tree = ast.parse(body)
        assert [f.name for f in tree.body if isinstance(f, ast.FunctionDef)] == ["apply_trace"]
        ns: dict = {}
        with tvm_is_the_engines():
            exec(body, ns)                       # the explorer's own export
            tsch = etvm.s_tir.Schedule(workloads.get(workload, **params))
            ns["apply_trace"](tsch)
        assert engine.structural_equal(tsch.mod[func],
                                       chapter_program(workload, params, apply_chapter))
    top(page, "#measure-now")
    # the kernel itself (after TVM's header) in view
    page.eval_on_selector("#code-ll pre", """e => {
        for (let p = e; p; p = p.parentElement) {
            if (p.scrollHeight > p.clientHeight + 4) { p.scrollTop = p.scrollHeight; break; } } }""")
    shot(page, f"gpu-chapter-{name}-last-step")
    assert page.js_errors == []

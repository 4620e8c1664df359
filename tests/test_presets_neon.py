"""Presets for a target (issue 42, Edge): a preset applied for the ARM board sizes its
vectors for NEON (4 float lanes) — in the engine (``presets.get(name, isa=...)``) and in an
explorer session on the board, whose preset links replay to a program that, built for
aarch64 and run under qemu-aarch64, matches numpy. On this machine's CPU (and for a GPU
preset) nothing changes.

Needs Debian's qemu-user and gcc-aarch64-linux-gnu (./run-tests.sh installs them): without
them the qemu test fails with the install sentence, it never skips."""
from __future__ import annotations

import html as htmlmod
import re
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest

from aarch64_samples import ARM

import engine
from engine import presets, workloads
from engine.codegen.isa import isa_of
from engine.deploy.board import run_on_board
from engine.ir.functor import post_order_visit
from engine.ir.stmt import For, ForKind
from engine.schedule.trace import replay


def vector_extents(mod) -> list[int]:
    """The extents of every vectorized loop of ``mod``'s functions."""
    out: list[int] = []
    for name in mod.names():
        post_order_visit(mod[name].body, lambda s: out.append(int(s.extent.value))
                         if isinstance(s, For) and s.kind is ForKind.VECTORIZED else None)
    return out


def run_on_arm_and_compare(workload: str, mod, **params) -> None:
    rt = engine.build(mod, target=ARM)
    fname = workloads.info(workload).func_name
    args = [np.array(a) for a in workloads.random_args(workload, 0, **params)]
    n_in = workloads.info(workload).num_inputs
    want = workloads.reference(workload, **params)(*args[:n_in])
    run_on_board(rt, fname, args, repeat=1)
    np.testing.assert_allclose(args[n_in], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("isa", ["raspberry-pi-5", ARM])
def test_best_preset_for_the_board_vectorizes_by_4(isa):
    sch = presets.get("matmul-best", isa=isa, n=32)
    widths = vector_extents(sch.mod)
    assert widths and set(widths) == {4}, widths
    tiled = presets.get("mm_relu-tiled", isa=isa, n=32)
    # 4 NEON vectors per row of the register block (32 registers: 4 rows x 4 vectors)
    assert set(vector_extents(tiled.mod)) == {16}


def test_host_preset_is_unchanged_by_the_new_parameter():
    lanes = isa_of().lanes
    host = presets.get("matmul-best", n=64)
    assert engine.structural_equal(host.mod, presets.info("matmul-best").schedule(n=64).mod)
    assert set(vector_extents(host.mod)) == {min(lanes, 64)}
    assert "target" not in presets.trace_json("matmul-best", n=64)
    assert "target=" not in presets.info("matmul-best").explore_url(n=64)


def test_trace_document_and_link_for_the_board_name_it():
    doc = presets.trace_json("mm_relu-best", isa="raspberry-pi-5", n=16)
    assert doc["target"] == ARM
    url = presets.info("mm_relu-best").explore_url("raspberry-pi-5", n=16)
    assert parse_qs(urlparse(url).query)["target"] == ["aarch64"]
    # a GPU preset keeps its own target whatever the CPU ISA asked for
    gpu = presets.info("gpu-gemm-local")
    assert gpu.explore_url("raspberry-pi-5", n=64) == gpu.explore_url(n=64)


def test_a_recipe_that_ignores_the_width_is_the_same_for_the_board():
    a = presets.get("mm_relu-course", isa="raspberry-pi-5", n=16)
    b = presets.get("mm_relu-course", n=16)
    assert engine.structural_equal(a.mod, b.mod)


def preset_links(client, query: str) -> dict[str, str]:
    page = client.get(f"/explore/mm_relu?{query}").get_data(as_text=True)
    box = page.split('id="trace-presets"', 1)[1].split("</details>", 1)[0]
    hrefs = [htmlmod.unescape(h) for h in re.findall(r'href="([^"]+)"', box)]
    out = {}
    for h in hrefs:
        q = parse_qs(urlparse(h).query)
        out.setdefault((q.get("n", [""])[0], tuple(q.get("target", []))), []).append(h)
    return out


def test_board_session_preset_replays_to_neon_and_matches_numpy_under_qemu(client):
    links = preset_links(client, "target=aarch64&n=16")
    board = links[("16", ("aarch64",))]            # the presets at this session's size
    best = presets.info("mm_relu-best").explore_url(ARM, n=16)
    assert best in board and presets.info("mm_relu-best").explore_url(n=16) not in board
    sch = replay("mm_relu", {"n": 16}, parse_qs(urlparse(best).query)["t"][0])
    widths = vector_extents(sch.mod)
    assert widths and set(widths) == {4}, widths
    run_on_arm_and_compare("mm_relu", sch.mod, n=16)
    # the link opens on the board at the preset's last step
    page = client.get(best)
    assert page.status_code == 200


def test_cpu_session_presets_are_the_hosts(client):
    links = preset_links(client, "n=16")
    cpu = links[("16", ())]
    assert presets.info("mm_relu-best").explore_url(n=16) in cpu
    assert presets.info("mm_relu-tiled").explore_url(n=16) in cpu
    assert not any(k[1] for k in links)            # no link opens another target

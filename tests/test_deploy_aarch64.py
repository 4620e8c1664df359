"""Code for an ARM board run on this machine under qemu-aarch64, compared with numpy.

Needs Debian's qemu-user and gcc-aarch64-linux-gnu (``./run-tests.sh`` installs them): a
test here fails with the install sentence when they are missing, it never skips.
"""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

import engine
from engine import presets, workloads
from engine.deploy.aarch64 import link_kernels
from engine.deploy.board import run_on_board
from engine.deploy.qemu import call_under_qemu
from engine.deploy.targets import DeployError
from engine.schedule import Schedule

ARM = "llvm -mtriple=aarch64-linux-gnu"


def _mm_relu(n: int):
    """mm_relu with its inner j loop vectorized by 4 (NEON's float lanes) and i parallel."""
    sch = Schedule(workloads.get("mm_relu", n=n))
    b = sch.get_block("Y")
    i, j, k = sch.get_loops(b)
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(j0, k, j1)
    sch.vectorize(j1)
    sch.parallel(i)
    return sch.mod


def _check_against_numpy(workload: str, mod, target: str = ARM, **params):
    rt = engine.build(mod, target=target)
    fname = workloads.info(workload).func_name
    args = [np.array(a) for a in workloads.random_args(workload, 0, **params)]
    n_in = workloads.info(workload).num_inputs
    want = workloads.reference(workload, **params)(*args[:n_in])
    run = run_on_board(rt, fname, args, repeat=2)
    np.testing.assert_allclose(args[n_in], want, rtol=1e-4, atol=1e-4)
    assert run.seconds_per_call is not None and run.seconds_per_call > 0
    return rt


def test_mm_relu_vectorized_parallel_under_qemu():
    rt = _check_against_numpy("mm_relu", _mm_relu(24), n=24)
    assert "fmla\tv" in rt.get_source("asm")


def test_conv2d_tiled_preset_under_qemu_on_the_named_board():
    params = dict(batch=1, in_channels=4, out_channels=8, size=8, kernel=3, pad=1, stride=1)
    sch = presets.get("conv2d-tiled", **params)
    _check_against_numpy("conv2d", sch.mod, target="raspberry-pi-5", **params)


def test_softmax_under_qemu():
    _check_against_numpy("softmax", workloads.get("softmax", m=6, n=20), m=6, n=20)


def test_linked_library_is_aarch64_and_needs_only_libc(tmp_path):
    rt = engine.build(_mm_relu(8), target=ARM)
    lib = link_kernels(rt, tmp_path / "k.so")
    head = subprocess.run(["readelf", "-h", str(lib)], capture_output=True, text=True).stdout
    assert "AArch64" in head
    dyn = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
    needed = {line.split("[")[1].rstrip("]") for line in dyn.splitlines() if "NEEDED" in line}
    assert needed <= {"libc.so.6", "libm.so.6"}, needed


def test_wrong_arguments_are_refused_with_a_sentence(tmp_path):
    rt = engine.build(_mm_relu(8), target=ARM)
    a = np.zeros((8, 8), np.float32)
    with pytest.raises(DeployError, match="must be a numpy array float32"):
        run_on_board(rt, "mm_relu", [a, a.astype(np.float64), a.copy()])
    with pytest.raises(DeployError, match="not an aarch64 ELF library"):
        call_under_qemu(__file__, "x", [a], [True])

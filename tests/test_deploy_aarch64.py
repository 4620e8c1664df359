"""Code for an ARM board run on this machine under qemu-aarch64, compared with numpy.

Needs Debian's qemu-user and gcc-aarch64-linux-gnu (``./run-tests.sh`` installs them): a
test here fails with the install sentence when they are missing, it never skips.
"""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from aarch64_samples import ARM, mm_relu_neon

import engine
from engine import presets, workloads
from engine.deploy.aarch64 import link_kernels
from engine.deploy.board import run_on_board
from engine.deploy.qemu import (call_under_qemu, library_metadata, measure_under_qemu,
                               run_under_qemu)
from engine.deploy.targets import DeployError

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
    rt = _check_against_numpy("mm_relu", mm_relu_neon(24), n=24)
    assert "fmla\tv" in rt.get_source("asm")


def test_conv2d_tiled_preset_under_qemu_on_the_named_board():
    params = dict(batch=1, in_channels=4, out_channels=8, size=8, kernel=3, pad=1, stride=1)
    sch = presets.get("conv2d-tiled", **params)
    _check_against_numpy("conv2d", sch.mod, target="raspberry-pi-5", **params)


def test_softmax_under_qemu():
    _check_against_numpy("softmax", workloads.get("softmax", m=6, n=20), m=6, n=20)


def test_linked_library_is_aarch64_and_needs_only_libc(tmp_path):
    rt = engine.build(mm_relu_neon(8), target=ARM)
    lib = link_kernels(rt, tmp_path / "k.so")
    head = subprocess.run(["readelf", "-h", str(lib)], capture_output=True, text=True).stdout
    assert "AArch64" in head
    dyn = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
    needed = {line.split("[")[1].rstrip("]") for line in dyn.splitlines() if "NEEDED" in line}
    assert needed <= {"libc.so.6", "libm.so.6"}, needed


def test_wrong_arguments_are_refused_with_a_sentence(tmp_path):
    rt = engine.build(mm_relu_neon(8), target=ARM)
    a = np.zeros((8, 8), np.float32)
    with pytest.raises(DeployError, match="must be a numpy array float32"):
        run_on_board(rt, "mm_relu", [a, a.astype(np.float64), a.copy()])
    with pytest.raises(DeployError, match="not an aarch64 ELF library"):
        call_under_qemu(__file__, "x", [a], [True])


def _readelf(flag: str, path) -> str:
    return subprocess.run(["readelf", flag, str(path)], capture_output=True, text=True,
                          check=True).stdout


def test_exported_course_mlp_runs_under_qemu(tmp_path):
    from engine.models.course import mlp_module
    from engine.models.mlp import SHAPES
    rng = np.random.default_rng(0)
    params = {k: (rng.standard_normal(s) * 0.1).astype(np.float32) for k, s in SHAPES.items()}
    ex = engine.relax.build(mlp_module(1, params), target="llvm")
    lib = ex.export_library(tmp_path / "mlp.so", target="raspberry-pi-5")
    assert lib.metadata["target"]["triple"] == "aarch64-linux-gnu"
    assert "Machine:                           AArch64" in _readelf("-h", lib.path)
    x = rng.standard_normal((1, 784)).astype(np.float32)
    run = measure_under_qemu(lib.path, "main", [x], repeat=3)
    want = np.maximum(x @ params["w0"].T + params["b0"], 0) @ params["w1"].T + params["b1"]
    np.testing.assert_allclose(run.outputs[0], want, rtol=1e-4, atol=1e-5)
    assert run.seconds_per_call > 0
    assert library_metadata(lib.path)["functions"]["main"]["symbol"] == "mlp_main"


def test_exported_kernel_of_a_board_build_and_of_a_host_build(tmp_path):
    a = np.random.default_rng(1).random((16, 16), dtype=np.float32)
    b = np.random.default_rng(2).random((16, 16), dtype=np.float32)
    want = np.maximum(a @ b, 0)
    board = engine.build(mm_relu_neon(16), target=ARM).export_library(tmp_path / "k.so")
    host = engine.build(mm_relu_neon(16)).export_library(tmp_path / "h.so", target=ARM)
    for lib in (board, host):
        assert "AArch64" in _readelf("-h", lib.path)
        needed = {line.split("[")[1].rstrip("]")
                  for line in _readelf("-d", lib.path).splitlines() if "NEEDED" in line}
        assert needed <= {"libc.so.6", "libm.so.6"}, needed
        out, = run_under_qemu(lib.path, "mm_relu", [a, b])
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(DeployError, match="must have shape"):
        run_under_qemu(board.path, "mm_relu", [a, b[:8]])
    with pytest.raises(DeployError, match="has no function 'nope'"):
        run_under_qemu(board.path, "nope", [a, b])


def test_model_recipe_for_the_board_uses_neon_lanes_and_matches_numpy(tmp_path):
    """The model page's fused+scheduled stage sized for raspberry-pi-5 (NEON: 4 float
    lanes) vectorizes the hidden layer by 4, and the exported model is right under qemu."""
    from engine.ir import For, ForKind
    from engine.ir.functor import collect_stmts
    from engine.models.course import mlp_module
    from engine.models.mlp import SHAPES
    from engine.models.pipeline import stage_module
    rng = np.random.default_rng(3)
    params = {k: (rng.standard_normal(s) * 0.1).astype(np.float32) for k, s in SHAPES.items()}
    mod, _ = stage_module(mlp_module(1, params), "fused+scheduled", "raspberry-pi-5")
    hidden = next(f for n, f in mod.prim_funcs() if n.startswith("fused_linear0"))
    lanes = {s.extent.value for s in collect_stmts(hidden.body, For)
             if s.kind is ForKind.VECTORIZED}
    assert lanes == {4}, lanes
    lib = engine.relax.build(mod, target="llvm").export_library(tmp_path / "m.so",
                                                                target="raspberry-pi-5")
    x = rng.standard_normal((1, 784)).astype(np.float32)
    out, = run_under_qemu(lib.path, "main", [x])
    want = np.maximum(x @ params["w0"].T + params["b0"], 0) @ params["w1"].T + params["b1"]
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_relax_build_for_the_board_exports_for_it_and_is_not_run_here(tmp_path):
    from engine.lower.errors import BuildError
    from engine.models.course import mlp_module
    from engine.models.mlp import SHAPES
    rng = np.random.default_rng(5)
    params = {k: (rng.standard_normal(s) * 0.1).astype(np.float32) for k, s in SHAPES.items()}
    ex = engine.relax.build(mlp_module(1, params), target=ARM)
    lib = ex.export_library(tmp_path / "mlp.so")              # for the board it was built for
    assert lib.metadata["target"]["triple"] == "aarch64-linux-gnu"
    x = rng.standard_normal((1, 784)).astype(np.float32)
    out, = run_under_qemu(lib.path, "main", [x])
    want = np.maximum(x @ params["w0"].T + params["b0"], 0) @ params["w1"].T + params["b1"]
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(BuildError, match="cannot run"):
        engine.relax.VirtualMachine(ex)["main"](x)

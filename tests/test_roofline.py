"""engine.roofline: measured roofs (structure, positivity) and the intensity arithmetic."""
import math

import numpy as np
import pytest

import engine
from engine import roofline


def test_kernels_parse_and_compute_what_they_claim():
    rt = engine.build(engine.parse(roofline.fma_kernel_text(2, 3, rows=2, lanes=16)))
    x = np.full((2, 2, 16), 0.5, np.float32)
    y = np.zeros((2, 2, 16), np.float32)
    rt["fma_peak"](x, y)
    expect = 0.0
    for _ in range(3):
        expect = expect * 0.5 + 0.5
    assert np.allclose(y, expect)
    rt = engine.build(engine.parse(roofline.copy_kernel_text(4, 5, lanes=16)))
    a = np.arange(4 * 5 * 16, dtype=np.float32).reshape(4, 5, 16)
    b = np.zeros_like(a)
    rt["stream_copy"](a, b)
    assert np.array_equal(a, b)


def test_small_measurements_are_positive():
    f = roofline.measure_peak_gflops(iters=1000, repeat=1)
    assert f["gflops"] > 0 and f["threads"] >= 1
    c = roofline.measure_bandwidth_gbs(megabytes=1, repeat=1)
    assert c["gbs"] > 0 and c["bytes"] == 2 * (1 << 20)


def test_intensity_of_matmul():
    # 2 n^3 flops over 3 n^2 float32 (A, B read once, C written once)
    n = 256
    assert roofline.intensity("matmul", {"n": n}) == pytest.approx(2 * n ** 3 / (3 * n * n * 4))


PEAKS = {"peak_gflops": 100.0, "bandwidth_gbs": 10.0}


def test_point_compute_and_memory_bound():
    p = roofline.point("matmul", {"n": 256}, 0.01, peaks=PEAKS)
    assert p["bound"] == "compute"
    assert p["attainable_gflops"] == 100.0
    assert p["gflops"] == pytest.approx(2 * 256 ** 3 / 0.01 / 1e9)
    assert p["fraction_of_roof"] == pytest.approx(p["gflops"] / 100.0)
    q = roofline.point("add", None, 0.001, peaks=PEAKS)
    assert q["bound"] == "memory"
    assert q["attainable_gflops"] == pytest.approx(10.0 * q["intensity"])
    assert q["intensity"] < 1


def test_bad_arguments_are_explained():
    with pytest.raises(roofline.RooflineError, match="unknown workload"):
        roofline.point("nope", {}, 1.0, peaks=PEAKS)
    with pytest.raises(roofline.RooflineError, match="positive number"):
        roofline.point("matmul", {"n": 8}, 0, peaks=PEAKS)
    with pytest.raises(roofline.RooflineError, match="no parameter"):
        roofline.intensity("matmul", {"size": 8})


def test_machine_peaks_cached_and_sane():
    pk = roofline.machine_peaks()
    assert pk["peak_gflops"] > 0 and pk["bandwidth_gbs"] > 0
    assert math.isclose(pk["ridge_intensity"], pk["peak_gflops"] / pk["bandwidth_gbs"])
    assert roofline.machine_peaks()["measured_at"] == pk["measured_at"]   # cached
    curve = roofline.roof_curve(pk, points=8)
    assert len(curve["intensity"]) == 8
    assert max(curve["gflops"]) <= pk["peak_gflops"] + 1e-9

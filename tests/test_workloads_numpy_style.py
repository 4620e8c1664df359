"""The float32 numpy versions (the speed reference) compute what the reference computes."""
import numpy as np
import pytest

import engine
from engine.workloads.numpy_style import NUMPY_STYLE

SMALL = {
    "mm_relu": {"n": 24}, "matmul": {"n": 20, "m": 12, "k": 28}, "batch_matmul": {},
    "conv2d": {"batch": 2, "in_channels": 3, "out_channels": 5, "size": 9, "kernel": 3,
               "pad": 1, "stride": 2},
    "conv2d_relu": {"batch": 1, "in_channels": 4, "out_channels": 3, "size": 7, "kernel": 3,
                    "pad": 0, "stride": 1},
    "depthwise_conv2d": {}, "window_sum": {"n": 50}, "softmax": {"m": 6, "n": 33},
    "layernorm": {}, "transpose": {}, "add": {}, "relu": {}, "mlp": {}, "sum": {},
}


def _small(name):
    info = engine.workloads.info(name)
    params = dict(SMALL.get(name, {}))
    # shrink every default size to at most 32 (keep the workload's cross-checks happy)
    for k, v in info.defaults.items():
        if k not in params and isinstance(v, int) and v > 32 and k not in info.follows:
            params[k] = 32
    return params


def test_every_workload_has_a_numpy_version():
    assert set(NUMPY_STYLE) == set(engine.workloads.names())


@pytest.mark.parametrize("name", sorted(NUMPY_STYLE))
def test_numpy_version_matches_the_reference(name):
    params = _small(name)
    info = engine.workloads.info(name)
    args = engine.workloads.random_args(name, 1, **params)
    inputs = args[:info.num_inputs]
    want = engine.workloads.reference(name, **params)(*inputs)
    got = engine.workloads.numpy_style(name, **params)(*[a.copy() for a in inputs])
    want = want if isinstance(want, (tuple, list)) else [want]
    got = got if isinstance(got, (tuple, list)) else [got]
    for w, g in zip(want, got):
        g = np.asarray(g)
        assert g.shape == np.asarray(w).shape
        assert g.dtype == np.float32, f"{name}: the speed reference must stay float32"
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(w).max())))


def test_unknown_workload_is_refused():
    with pytest.raises(engine.workloads.WorkloadError):
        engine.workloads.numpy_style("nope")

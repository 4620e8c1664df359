"""The MLP trained on the bundled digits: deterministic, cached, accurate; the engine runs it
to the same predictions; ``python -m engine run-model``."""
from __future__ import annotations

import io
import os

import numpy as np
import pytest

from engine.models import digits, mlp


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return mlp.trained_mlp(str(tmp_path_factory.mktemp("instance")))


def test_digits_are_scaled_to_28x28_in_unit_range_and_split_by_seed():
    d = digits.load()
    assert d.train_images.shape[1:] == (28, 28) and d.test_images.shape[1:] == (28, 28)
    assert len(d.train_labels) + len(d.test_labels) == 1797
    assert 0 <= d.train_images.min() and d.train_images.max() <= 1
    again = digits.load()
    np.testing.assert_array_equal(d.test_labels, again.test_labels)
    # bilinear scaling keeps a constant image constant
    np.testing.assert_allclose(digits.resize_bilinear(np.full((1, 8, 8), 3.0)), 3.0)


def test_training_is_deterministic_and_accurate(trained):
    assert trained.test_accuracy > 0.9
    again = mlp.train(trained.data)
    for k, v in trained.params.items():
        np.testing.assert_array_equal(v, again[k])
        assert v.dtype == np.float32 and v.shape == mlp.SHAPES[k]


def test_weights_are_cached_and_a_damaged_cache_is_replaced(trained, tmp_path):
    folder = str(tmp_path)
    first = mlp.trained_mlp(folder)
    assert not first.from_cache and os.path.exists(os.path.join(folder, mlp.CACHE_FILE))
    second = mlp.trained_mlp(folder)
    assert second.from_cache
    np.testing.assert_array_equal(first.params["w0"], second.params["w0"])
    with open(os.path.join(folder, mlp.CACHE_FILE), "wb") as f:
        f.write(b"not an npz file")
    third = mlp.trained_mlp(folder)
    assert not third.from_cache and third.test_accuracy == first.test_accuracy
    np.savez(os.path.join(folder, mlp.CACHE_FILE), w0=np.zeros((2, 2), "float32"))
    assert not mlp.trained_mlp(folder).from_cache


def test_engine_mlp_predicts_as_numpy(trained):
    from engine import relax
    from engine.models.course import mlp_module
    from engine.models.pipeline import stage_module

    x = trained.data.test_images[:16].reshape(16, 784)
    want = mlp.forward(trained.params, x)
    for stage in ("unscheduled", "fused+scheduled"):
        mod, _ = stage_module(mlp_module(16, trained.params), stage)
        got = np.asarray(relax.VirtualMachine(relax.build(mod))["main"](x))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(got.argmax(1), want.argmax(1))


def test_cli_run_model_prints_accuracy_time_and_the_table(tmp_path):
    from engine.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(["run-model", "mlp", "--cache", str(tmp_path), "--stage", "fused",
                 "--number", "2", "--repeat", "1"], out, err)
    text = out.getvalue()
    assert code == 0, err.getvalue()
    assert "test accuracy (engine, 359 images)" in text
    assert "[fused] batch 1: end to end" in text and "VM overhead" in text
    assert "fused_linear0_relu0" in text and "linear1" in text


def test_cli_run_model_refuses_unknown_models_and_bad_onnx(tmp_path):
    from engine.cli import main

    out, err = io.StringIO(), io.StringIO()
    assert main(["run-model", "resnet"], out, err) == 2
    assert "no model named 'resnet'" in err.getvalue()
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"garbage")
    err = io.StringIO()
    assert main(["run-model", str(bad)], out, err) == 2
    assert "not an ONNX model" in err.getvalue()

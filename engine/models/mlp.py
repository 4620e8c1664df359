"""The course's two-layer MLP (784-128-10), trained in numpy on the bundled digits.

``trained_mlp(cache_dir)`` returns the weights — ``w0 (128, 784)``, ``b0 (128,)``,
``w1 (10, 128)``, ``b1 (10,)``, float32, laid out as the course's ``linear0``/``linear1``
read them (``X @ W.T + B``) — training them on first use (seconds: mini-batch SGD with
momentum, a fixed seed, float64 arithmetic) and keeping them in ``cache_dir`` (the app's
instance folder) so later uses load them.  A cache file that does not hold exactly these
arrays, finite, is ignored and rewritten.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

import numpy as np

from . import digits

__all__ = ["MLP", "SHAPES", "CACHE_FILE", "train", "trained_mlp", "forward", "accuracy"]

#: the parameters and their shapes (the course's names)
SHAPES = {"w0": (128, 784), "b0": (128,), "w1": (10, 128), "b1": (10,)}
#: the cache file's name (its version changes whenever training changes)
CACHE_FILE = "mlp-digits-v2.npz"
SEED = 0
EPOCHS = 20
BATCH = 32
LEARNING_RATE = 0.05
MOMENTUM = 0.9


@dataclass(frozen=True)
class MLP:
    """Trained weights plus the data they were tested on."""

    params: dict[str, np.ndarray]
    data: digits.Digits = field(repr=False)
    test_accuracy: float = 0.0
    from_cache: bool = False


def forward(params: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """The MLP in numpy (the course's ``numpy_mlp``): ``relu(x @ w0.T + b0) @ w1.T + b1``."""
    h = np.maximum(x @ params["w0"].T + params["b0"], 0)
    return h @ params["w1"].T + params["b1"]


def accuracy(params: dict[str, np.ndarray], images: np.ndarray, labels: np.ndarray) -> float:
    logits = forward(params, images.reshape(len(images), -1).astype("float32"))
    return float((logits.argmax(axis=1) == labels).mean())


def train(data: digits.Digits, seed: int = SEED, epochs: int = EPOCHS) -> dict[str, np.ndarray]:
    """Mini-batch SGD with momentum on softmax cross-entropy; the same ``seed`` gives the
    same weights (float64 arithmetic on one BLAS thread, a seeded initialisation and batch
    order).  One thread is also the fast way: the products are small, and on a busy
    machine a BLAS thread pool spends its time waiting for cores."""
    from threadpoolctl import threadpool_limits  # a dependency of scikit-learn

    with threadpool_limits(1):
        return _train(data, seed, epochs)


def _train(data: digits.Digits, seed: int, epochs: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = data.train_images.reshape(len(data.train_images), -1).astype("float64")
    y = data.train_labels
    p = {"w0": rng.standard_normal(SHAPES["w0"]) * np.sqrt(2 / 784), "b0": np.zeros(128),
         "w1": rng.standard_normal(SHAPES["w1"]) * np.sqrt(2 / 128), "b1": np.zeros(10)}
    vel = {k: np.zeros_like(v) for k, v in p.items()}
    onehot = np.eye(10)[y]
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for start in range(0, len(x), BATCH):
            idx = order[start:start + BATCH]
            xb, tb = x[idx], onehot[idx]
            pre = xb @ p["w0"].T + p["b0"]
            h = np.maximum(pre, 0)
            logits = h @ p["w1"].T + p["b1"]
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            grad_logits = (e / e.sum(axis=1, keepdims=True) - tb) / len(idx)
            grad_h = grad_logits @ p["w1"] * (pre > 0)
            grads = {"w1": grad_logits.T @ h, "b1": grad_logits.sum(0),
                     "w0": grad_h.T @ xb, "b0": grad_h.sum(0)}
            for k in p:
                vel[k] = MOMENTUM * vel[k] - LEARNING_RATE * grads[k]
                p[k] = p[k] + vel[k]
    return {k: v.astype("float32") for k, v in p.items()}


def _read_cache(path: str) -> dict[str, np.ndarray] | None:
    try:
        with np.load(path, allow_pickle=False) as f:
            out = {k: np.array(f[k]) for k in SHAPES if k in f.files}
    except (OSError, ValueError, KeyError, EOFError):
        return None
    ok = (set(out) == set(SHAPES)
          and all(out[k].shape == s and out[k].dtype == np.float32
                  and np.isfinite(out[k]).all() for k, s in SHAPES.items()))
    return out if ok else None


def _write_cache(path: str, params: dict[str, np.ndarray]) -> None:
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".mlp-", suffix=".npz", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **params)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def trained_mlp(cache_dir: str | None = None) -> MLP:
    """The trained MLP: loaded from ``cache_dir/mlp-digits-v2.npz`` when that holds valid
    weights, else trained now (and written there when ``cache_dir`` is given)."""
    data = digits.load()
    path = os.path.join(cache_dir, CACHE_FILE) if cache_dir else None
    params = _read_cache(path) if path and os.path.exists(path) else None
    cached = params is not None
    if params is None:
        params = train(data)
        if path:
            try:
                _write_cache(path, params)
            except OSError:
                pass  # a read-only folder: train again next time
    return MLP(params, data, accuracy(params, data.test_images, data.test_labels), cached)

"""The handwritten digits that ship inside scikit-learn's wheel, at the course's 28x28.

``sklearn.datasets.load_digits`` reads a file bundled with the package (1797 images of
8x8 pixels, values 0..16): nothing is downloaded.  Each image is scaled to 28x28 with
bilinear interpolation (so the course's MLP shapes, 784 inputs, hold) and to values in
[0, 1]; a seeded permutation splits it into a training and a test set.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Digits", "load", "resize_bilinear", "SIDE"]

SIDE = 28


@dataclass(frozen=True)
class Digits:
    """Images ``(n, 28, 28)`` float32 in [0, 1] and labels ``(n,)`` int64, split in two."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray


def _interp_matrix(n_in: int, n_out: int) -> np.ndarray:
    """``(n_out, n_in)`` weights of 1-D bilinear interpolation, pixel centres aligned."""
    pos = (np.arange(n_out) + 0.5) * n_in / n_out - 0.5
    pos = np.clip(pos, 0, n_in - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, n_in - 1)
    frac = pos - lo
    m = np.zeros((n_out, n_in))
    m[np.arange(n_out), lo] += 1 - frac
    m[np.arange(n_out), hi] += frac
    return m


def resize_bilinear(images: np.ndarray, side: int = SIDE) -> np.ndarray:
    """``(n, h, w)`` images to ``(n, side, side)``, separable bilinear interpolation."""
    _, h, w = images.shape
    rows, cols = _interp_matrix(h, side), _interp_matrix(w, side)
    return np.einsum("ih,nhw,jw->nij", rows, images.astype("float64"), cols)


def load(test_fraction: float = 0.2, seed: int = 0) -> Digits:
    """The digits at 28x28 in [0, 1], split by a permutation drawn from ``seed``."""
    from sklearn.datasets import load_digits  # the data file is inside the package

    raw = load_digits()
    images = (resize_bilinear(raw.images) / 16.0).clip(0, 1).astype("float32")
    labels = raw.target.astype("int64")
    order = np.random.default_rng(seed).permutation(len(labels))
    n_test = int(round(len(labels) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return Digits(images[train], labels[train], images[test], labels[test])

"""The cost model: gradient-boosted trees (LightGBM) on loop-nest features.

As in MetaSchedule's XGBoost model, the model learns a candidate's *normalised throughput*
— its GFLOP/s divided by the best measured so far (1.0 for the best, 0 for a candidate
that failed or computed a wrong result) — from the :mod:`.features` of its loop nest, and
predicts it for candidates not yet measured, so the search measures only the most promising
ones. It is retrained from every measured record after each round of measurements; until
it has seen enough records (:data:`MIN_RECORDS`) it predicts nothing and the search samples
at random.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np

__all__ = ["CostModel", "MIN_RECORDS"]

#: records needed (with at least two distinct throughputs) before the model is trained
MIN_RECORDS = 8


class CostModel:
    """``update(features, throughputs)`` then ``predict(features)`` -> scores (higher is
    better). ``seed`` makes the trees reproducible."""

    def __init__(self, seed: int = 0, rounds: int = 120):
        self.seed = int(seed)
        self.rounds = int(rounds)
        self._model = None
        self._x: list[list[float]] = []
        self._y: list[float] = []

    @property
    def trained(self) -> bool:
        return self._model is not None

    def update(self, features: Sequence[Sequence[float]], throughputs: Sequence[float]) -> None:
        """Add measured records (throughput: seconds⁻¹ or GFLOP/s, 0 for a failure) and
        retrain on all records seen so far."""
        self._x.extend([list(map(float, f)) for f in features])
        self._y.extend(float(t) for t in throughputs)
        y = np.asarray(self._y, dtype=np.float64)
        if len(y) < MIN_RECORDS or np.unique(np.round(y, 12)).size < 2 or y.max() <= 0:
            return
        import lightgbm  # noqa: PLC0415 - imported on first training (slow to import)
        target = y / y.max()
        x = np.asarray(self._x, dtype=np.float64)
        params = {"objective": "regression", "learning_rate": 0.1, "num_leaves": 15,
                  "min_data_in_leaf": 2, "min_data_in_bin": 1, "feature_fraction": 0.9,
                  "bagging_fraction": 0.9, "bagging_freq": 1, "lambda_l2": 1.0,
                  "seed": self.seed, "deterministic": True, "num_threads": 1,
                  "verbosity": -1}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = lightgbm.Dataset(x, label=target, params={"verbosity": -1,
                                                             "min_data_in_bin": 1})
            self._model = lightgbm.train(params, data, num_boost_round=self.rounds)

    def predict(self, features: Sequence[Sequence[float]]) -> np.ndarray:
        """Predicted normalised throughput per candidate (zeros before training)."""
        if not len(features):
            return np.zeros(0)
        if self._model is None:
            return np.zeros(len(features))
        x = np.asarray([list(map(float, f)) for f in features], dtype=np.float64)
        return np.asarray(self._model.predict(x, num_threads=1), dtype=np.float64)

"""Real models for the explorer: the course's MLP trained on bundled data (:mod:`.mlp`)."""
from __future__ import annotations

from .digits import Digits
from .mlp import MLP, trained_mlp

__all__ = ["Digits", "MLP", "trained_mlp"]

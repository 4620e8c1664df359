"""engine.arith — integer/float simplification, bound analysis and affine detection.

* :func:`simplify` / :class:`Analyzer` — canonical affine form, range-aware ``//`` ``%``.
* :func:`bound_of` — constant interval of an expression; :func:`relax` — symbolic interval
  when some variables range over intervals (region inference for compute_at).
* :func:`affine_terms` / :func:`is_quasi_affine` — affine detectors.
"""
from .affine import affine_terms, is_quasi_affine
from .bound import bound_of, relax
from .simplify import Analyzer, simplify

__all__ = ["simplify", "Analyzer", "bound_of", "relax", "affine_terms", "is_quasi_affine"]

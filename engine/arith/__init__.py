"""engine.arith — integer/float simplification and bound analysis over engine.ir.

Owned by the schedule work; see :mod:`.simplify`.
"""
from .simplify import simplify

__all__ = ["simplify"]

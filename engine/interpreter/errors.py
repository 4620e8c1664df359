"""The interpreter's errors, and the messages of the checks its programs make as they run."""
from __future__ import annotations

from typing import NoReturn

import numpy as np

from engine.ir import expr as E
from engine.ir.buffer import Buffer


class InterpretError(RuntimeError):
    """The program cannot be run: an undefined variable, a division by zero, a binding
    outside its block's domain, an unknown intrinsic, ..."""


class ArgumentError(InterpretError, ValueError):
    """The arrays passed do not match the function's parameters (count, dtype, shape)."""


class OutOfBoundsError(InterpretError, IndexError):
    """A buffer was read or written outside its shape."""


def fmt_index(idx: tuple) -> str:
    """``(1, array([2, 3]))`` -> ``"[1, [2, 3]]"``."""
    parts = []
    for v in idx:
        if isinstance(v, np.ndarray):
            parts.append("[" + ", ".join(str(int(x)) for x in v) + "]")
        else:
            parts.append(str(v))
    return "[" + ", ".join(parts) + "]"


def out_of_bounds(buf: Buffer, idx: tuple, what: str, where: str) -> NoReturn:
    """Raise :class:`OutOfBoundsError` for a ``what`` ("read"/"write") of ``buf`` at ``idx``."""
    shape = tuple(E.as_const_int(s) if E.as_const_int(s) is not None else "?"
                  for s in buf.shape)
    raise OutOfBoundsError(
        f"out-of-bounds {what} of buffer {buf.name!r} at index {fmt_index(idx)}{where}; "
        f"its shape is {shape}")


def bad_binding(block: str, var: str, v, lo, hi) -> NoReturn:
    """Raise the error of a block iter var ``var`` bound to ``v`` outside ``[lo, hi)``."""
    raise InterpretError(
        f"block {block!r}: iter var {var} is bound to {v}, outside its domain "
        f"[{lo}, {hi}) — the loops around the block run past the block's iteration "
        "space (a split or tile without a T.where predicate?)")

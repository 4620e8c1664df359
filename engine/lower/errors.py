"""Errors raised while lowering / compiling a program."""
from __future__ import annotations


class BuildError(Exception):
    """A program that cannot be lowered or compiled by the LLVM backend.

    The message names the offending node (block, buffer, intrinsic, loop) and says what
    to do, e.g. ``unsupported intrinsic 'foo' in block 'Y'``.
    """

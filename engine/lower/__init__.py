"""engine.lower — TensorIR blocks -> loops over flat buffers, ready for LLVM codegen.

Public: :func:`lower` (PrimFunc/IRModule -> lowered PrimFunc/IRModule), :class:`BuildError`.
See :mod:`engine.lower.lower` for the passes and the lowered form.
"""
from .errors import BuildError
from .lower import flat_buffer, lower

__all__ = ["lower", "BuildError", "flat_buffer"]

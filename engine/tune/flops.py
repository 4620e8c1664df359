"""The floating-point work of a TensorIR function, for GFLOP/s outside the gallery.

A gallery workload knows its FLOP count; any other function (a model's fused operator, a
pasted program) gets this estimate, in the spirit of TVM's ``estimate_tir_flops``: every
floating-point arithmetic operation (``+ - * /``, ``min``/``max``, a call such as ``exp``)
in a stored value counts once per execution of its store, which is the product of the
extents of the loops around it. A reduction's ``T.init()`` and index arithmetic do not count.

For example ``Y[i, j] = Y[i, j] + A[i, k] * B[k, j]`` under loops of 128 x 128 x 128
counts 2 x 128**3 operations; ``C[i] = T.max(A[i], T.float32(0))`` under a loop of 64
counts 64.
"""
from __future__ import annotations

from typing import Any

from engine.ir import PrimFunc
from engine.ir.expr import BinaryOp, Call, CmpOp, IntImm, Select
from engine.ir.functor import post_order_visit
from engine.ir.stmt import Block, BlockRealize, BufferStore, For, IfThenElse, LetStmt, SeqStmt

__all__ = ["estimate_flops"]


def estimate_flops(func: PrimFunc) -> int:
    """The floating-point operations one call of ``func`` performs (0 when the loop
    extents are not constants)."""
    return _stmt_flops(func.body, 1)


def _stmt_flops(s: Any, trips: int) -> int:
    if isinstance(s, For):
        ext = s.extent
        if not isinstance(ext, IntImm):
            return 0
        return _stmt_flops(s.body, trips * int(ext.value))
    if isinstance(s, BlockRealize):
        return _stmt_flops(s.block, trips)
    if isinstance(s, Block):
        return _stmt_flops(s.body, trips)   # the init runs once per output: not counted
    if isinstance(s, SeqStmt):
        return sum(_stmt_flops(x, trips) for x in s.seq)
    if isinstance(s, BufferStore):
        return trips * _expr_flops(s.value)
    if isinstance(s, IfThenElse):
        return _stmt_flops(s.then_case, trips) + (
            _stmt_flops(s.else_case, trips) if s.else_case is not None else 0)
    if isinstance(s, LetStmt):
        return _stmt_flops(s.body, trips) + trips * _expr_flops(s.value)
    body = getattr(s, "body", None)
    return _stmt_flops(body, trips) if body is not None else 0


def _expr_flops(e: Any) -> int:
    count = 0

    def visit(n: Any) -> None:
        nonlocal count
        if isinstance(n, (BinaryOp, Select, Call)) and not isinstance(n, CmpOp) and \
                str(n.dtype).startswith("float"):
            count += 1
    post_order_visit(e, visit)
    return count

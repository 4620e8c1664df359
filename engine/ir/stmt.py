"""Statements of the IR (TVM's Stmt family), including TensorIR blocks."""
from __future__ import annotations

import enum
from typing import Any

from .buffer import Buffer, BufferRegion, Range
from .expr import PrimExpr, Var, convert
from .node import Node, Pairs, node


class Stmt(Node):
    __slots__ = ()
    __hash__ = object.__hash__


class ForKind(enum.Enum):
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unroll"
    THREAD_BINDING = "thread_binding"


#: TVM's thread axes a loop may be bound to (``T.thread_binding(n, thread=...)``): the grid
#: (``blockIdx``), the threads of a block (``threadIdx``) and virtual threads (``vthread``,
#: run one after the other by each thread).
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
               "threadIdx.z", "vthread.x", "vthread.y", "vthread.z")


class IterType(enum.Enum):
    """Block axis kind: ``T.axis.spatial`` ("S"), ``T.axis.reduce`` ("R"), and TVM's
    ``T.axis.scan`` (iterations in order, each on the one before) and ``T.axis.opaque``
    (nothing known: rolling_buffer marks its rolled axis so). The schedule transforms only
    spatial and reduction axes: a primitive given a block with a scan or opaque axis (or a
    loop above one) refuses it."""

    SPATIAL = "S"
    REDUCE = "R"
    SCAN = "scan"
    OPAQUE = "opaque"


@node
class For(Stmt):
    """``for i in T.serial(min, min + extent)`` and its parallel/vectorized/unroll kinds,
    and ``T.thread_binding(min, min + extent, thread=...)``: a loop bound to a GPU thread
    axis (``kind`` THREAD_BINDING, ``thread_tag`` one of :data:`THREAD_TAGS`; every other
    kind has no tag). A bound loop means what a serial loop means — its iterations run one
    after the other in the program's order —; the GPU build runs them as threads.

    ``annotations`` is a tuple of ``(key, value)`` pairs (``T.annotate``-style pragmas).
    """

    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: ForKind
    body: Stmt
    annotations: tuple = ()
    thread_tag: str = ""

    def __post_init__(self):
        object.__setattr__(self, "min", convert(self.min))
        object.__setattr__(self, "extent", convert(self.extent))
        if type(self.annotations) is not Pairs:
            object.__setattr__(self, "annotations", Pairs(self.annotations))
        if (self.kind is ForKind.THREAD_BINDING) != bool(self.thread_tag):
            raise ValueError(f"a loop of kind {self.kind.value} with thread tag "
                             f"{self.thread_tag!r}: a thread_binding loop names its thread "
                             "axis, no other loop has one")
        if self.thread_tag and self.thread_tag not in THREAD_TAGS:
            raise ValueError(f"unknown thread axis {self.thread_tag!r}; use one of "
                             + ", ".join(THREAD_TAGS))


@node
class IterVar(Node):
    """A block axis: variable, domain and kind (spatial or reduce)."""

    var: Var
    dom: Range
    iter_type: IterType

    __hash__ = object.__hash__


@node
class MatchBufferRegion(Node):
    """``Bb = T.match_buffer(B[vi:vi + 4, vj], (4,))`` inside a block: ``buffer`` is a *view*
    of the region ``source`` of another buffer — its element ``Bb[k]`` is ``B[vi + k, vj]``
    (the source's trailing dimensions line up with the view's; leading ones of extent 1
    stay at their start), its storage the source's, its strides the source's. The view's
    shape is the region's extents, its dtype and scope the source's."""

    buffer: Buffer
    source: BufferRegion

    __hash__ = object.__hash__


@node
class Block(Stmt):
    """``with T.block(name):`` — the unit of computation TensorIR schedules.

    Fields mirror TVM: block axes (``iter_vars``), ``reads``/``writes`` regions,
    ``init`` (the ``with T.init():`` statement of a reduction, or None), buffers
    allocated inside (``alloc_buffers``), ``annotations`` (pairs) and the views of regions
    the block declares with ``T.match_buffer`` (``match_buffers``,
    :class:`MatchBufferRegion`; last, so that blocks built positionally need not name it).
    """

    iter_vars: tuple
    reads: tuple
    writes: tuple
    name_hint: str
    body: Stmt
    init: Stmt | None = None
    alloc_buffers: tuple = ()
    annotations: tuple = ()
    match_buffers: tuple = ()

    def __post_init__(self):
        if type(self.annotations) is not Pairs:
            object.__setattr__(self, "annotations", Pairs(self.annotations))


@node
class BlockRealize(Stmt):
    """A block together with the values bound to its axes and a predicate (``T.where``)."""

    iter_values: tuple
    predicate: PrimExpr
    block: Block

    def __post_init__(self):
        object.__setattr__(self, "iter_values", tuple(convert(v) for v in self.iter_values))
        object.__setattr__(self, "predicate", convert(self.predicate))


@node
class BufferStore(Stmt):
    """``A[i, j] = value``."""

    buffer: Buffer
    value: PrimExpr
    indices: tuple

    def __post_init__(self):
        object.__setattr__(self, "indices", tuple(convert(i) for i in self.indices))
        object.__setattr__(self, "value", convert(self.value, self.buffer.dtype))


@node
class SeqStmt(Stmt):
    seq: tuple

    def __post_init__(self):
        object.__setattr__(self, "seq", tuple(self.seq))


@node
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None


@node
class Evaluate(Stmt):
    value: PrimExpr


@node
class LetStmt(Stmt):
    var: Var
    value: PrimExpr
    body: Stmt


@node
class Allocate(Stmt):
    """Lowered allocation of a buffer's storage for the duration of ``body``."""

    buffer: Buffer
    body: Stmt


def seq(*stmts: Any) -> Stmt:
    """Flatten nested SeqStmts; a single statement is returned as is."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, (list, tuple)):
            s = seq(*s)
            if s is None:
                continue
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        else:
            flat.append(s)
    if not flat:
        return None  # type: ignore[return-value]
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


def region_of(buffer: Buffer, *ranges: Range) -> BufferRegion:
    return BufferRegion(buffer, tuple(ranges))

"""Loops: serial loops (with their unroll metadata); parallel ones go to :mod:`.functions`.

A ``T.unroll`` loop that reaches the code generator gets ``llvm.loop.unroll.full`` on its
back edge; an outer loop around a loop that stays a loop, or whose complete unrolling would
make more than :data:`MAX_NEST_COPIES` copies of its innermost body, gets
``llvm.loop.unroll.disable``. An innermost loop that reads under a condition (a
convolution's padding) gets ``llvm.loop.vectorize.enable``: LLVM's loop vectorizer
vectorizes that loop whatever its cost model says, also with ``auto_vectorize=False``
(:func:`guarded_element_loop`). An int32 loop counts in i64
(the indices computed from it need no sign extension: see
:meth:`engine.codegen.memory.MemoryMixin.index`).

LLVM's loop vectorizer runs on every loop, as in TVM's LLVM pipeline, except the loops
this module turns it off for (``llvm.loop.vectorize.enable`` false, :func:`keeps_vectorizer_off`):
a loop whose body holds the schedule's own vectors (its ``vectorize``, already vector code)
and a loop with loops inside (LLVM unrolls short inner loops completely before it
vectorizes; vectorizing the outer loop across the unrolled copies made strided vector
accesses and shuffles: conv2d with ``ow`` split by 8 under the reduction, 4.4 ms without,
73 ms in TVM 0.27, which vectorizes it). Every instruction of a loop's body carries the
loop's number as its debug location (:mod:`.loop_lines`), so the loops LLVM vectorized on
its own can be read back from the optimised IR. When the copies of a nest of short loops
are counted (:data:`MAX_NEST_COPIES`), an innermost loop the loop vectorizer is expected to
vectorize (no schedule vectors, every store along the loop) counts its vector iterations
(:func:`vector_iterations`), so a 3 x 3 window around a 56-wide row is unrolled as TVM's
build unrolls it (conv2d, row under the reduction: 2.05 -> 1.93 ms, TVM 0.27 1.95).
"""
from __future__ import annotations

import llvmlite.ir as ir

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.functor import collect, collect_stmts, pre_order_visit

from .generator import restore
from .llvm_types import I64, llvm_type, sanitize
from .target import UNROLL_FULL_MD


class _LoopID(ir.values.MDValue):
    """A distinct, self-referential loop-ID node: ``distinct !{!N, <options>}``.

    llvmlite's :class:`~llvmlite.ir.values.MDValue` cannot refer to itself; LLVM only reads
    ``!llvm.loop`` options from a node whose first operand is the node itself.
    """

    def __init__(self, module: ir.Module, options: list):
        super().__init__(module, options, name=str(len(module.metadata)))

    def descr(self, buf):
        ops = ", ".join([self.get_reference()] + [op.get_reference() for op in self.operands])
        buf += (f"distinct !{{{ops}}}", "\n")

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)


#: LLVM O3's full-unroll threshold, in instructions of the unrolled loop
LLVM_FULL_UNROLL_THRESHOLD = 300

#: a loop with at least this many iterations is never unrolled completely by LLVM's O3
#: (an iteration costs at least about 5 instructions)
LONG_LOOP_TRIP = 64

#: an outer loop whose full unrolling (its own and its inner short loops') would make more
#: than this many copies of the innermost body stays a loop (``llvm.loop.unroll.disable``)
#: while LLVM could still unroll it completely (at most LLVM_FULL_UNROLL_THRESHOLD copies):
#: LLVM's O3 unrolls a nest of short loops completely whenever its unrolled size is under
#: the threshold, however many copies that makes (a bigger nest is left as it was)
MAX_NEST_COPIES = 48

#: a guarded element loop (:func:`guarded_element_loop`) shorter than this is left to LLVM
VECTORIZE_GUARDED_MIN_TRIP = 16

#: float32 lanes assumed for LLVM's loop vectorizer when counting the copies a nest of short
#: loops unrolls into (see :func:`vector_iterations`)
LOOP_VECTORIZER_LANES = 16


def stores_along(body: S.Stmt, var: E.Var) -> bool:
    """Does every store in ``body`` write an element indexed by ``var`` (no accumulator
    that stays put while ``var`` runs: a float sum LLVM's loop vectorizer may not reorder)?"""
    stores = collect_stmts(body, S.BufferStore)
    return bool(stores) and all(
        any(n is var for i in st.indices for n in collect(i, E.Var)) for st in stores)


def vector_iterations(trip: int, lanes: int = LOOP_VECTORIZER_LANES) -> int:
    """The iterations an innermost loop of ``trip`` iterations has once LLVM's loop
    vectorizer made vectors of ``lanes`` elements of it: what its complete unrolling
    copies (a 56-long output row under a 3 x 3 window: 4 x 9 copies of its body, not 56 x 9,
    so the window is unrolled as TVM's build unrolls it)."""
    return -(-trip // lanes)


def loop_id(module: ir.Module, flags: list) -> ir.values.MDValue:
    """A new loop ID with these options: a name alone (``llvm.loop.unroll.disable``), a
    name with a true flag (``llvm.loop.vectorize.enable``) or a ``(name, bool)`` pair
    (``("llvm.loop.vectorize.enable", False)``: the loop vectorizer leaves the loop)."""
    options = []
    for flag in flags:
        name, value = flag if isinstance(flag, tuple) else (flag, True)
        ops = [ir.MetaDataString(module, name)]
        if name in _BOOLEAN_OPTIONS:
            ops.append(ir.Constant(ir.IntType(1), int(bool(value))))
        options.append(module.add_metadata(ops))
    return _LoopID(module, options)


#: loop options that take a boolean operand
_BOOLEAN_OPTIONS = {"llvm.loop.vectorize.enable"}

#: the loop option that keeps LLVM's loop vectorizer off a loop
VECTORIZER_OFF = ("llvm.loop.vectorize.enable", False)


def holds_vectors(body: S.Stmt) -> bool:
    """Does ``body`` hold vector expressions (the schedule's ``vectorize``, lowered)?"""
    found = []

    def look(n) -> bool | None:
        if found:
            return False
        if isinstance(n, (E.Ramp, E.Broadcast)):
            found.append(n)
            return False
        return None
    pre_order_visit(body, look)
    return bool(found)


def keeps_vectorizer_off(innermost: bool, schedule_vectors: bool) -> bool:
    """Is LLVM's loop vectorizer kept off a loop (see the module docstring): one with loops
    inside, or one whose body holds the schedule's own vectors."""
    return not innermost or schedule_vectors


def guarded_element_loop(body: S.Stmt) -> bool:
    """True for the body of an innermost loop that copies or computes under a condition,
    element by element: no loop inside, no call but ``if_then_else``, no vector (the
    schedule vectorized it: a masked vector access is a call LLVM cannot vectorize again),
    and a buffer load
    inside an ``if_then_else`` or an ``if`` (the padding of a convolution: ``pad[c, h, w] =
    T.if_then_else(1 <= w < 57, data[c, h - 1, w - 1], 0)``). LLVM's loop vectorizer turns
    such a loop into vector code with the first and last vectors masked; our vectorize and
    LLVM's SLP vectorizer leave it a branch per element. Anything else (a call — the cache
    simulator's hooks —, a math function) could leave LLVM unable to do what it was asked,
    which it reports on stderr."""
    state = {"other": False, "guarded": False}

    def look(n) -> bool | None:
        if state["other"]:
            return False
        if isinstance(n, (S.For, S.Evaluate, S.Allocate, E.Ramp, E.Broadcast)) or \
                (isinstance(n, E.Call) and n.op not in _GUARD_CALLS):
            state["other"] = True
            return False
        if (isinstance(n, E.Call) and n.op == "if_then_else") or isinstance(n, S.IfThenElse):
            if collect(n, E.BufferLoad):
                state["guarded"] = True
        return None
    pre_order_visit(body, look)
    return state["guarded"] and not state["other"]


#: the calls a guarded element loop may hold
_GUARD_CALLS = frozenset({"if_then_else", "likely"})


class Narrowed:
    """An int32 loop variable's value, not made yet: the truncation of its i64 counter
    ``phi``, made at the end of the loop's header ``head`` (which dominates the body) when
    first asked for (:meth:`value`), so that a loop whose variable only indexes has none."""

    def __init__(self, head: ir.Block, phi: ir.Value, ty: ir.Type, name: str):
        self.head, self.phi, self.ty, self.name = head, phi, ty, name
        self.made: ir.Value | None = None

    def value(self, builder: ir.IRBuilder) -> ir.Value:
        if self.made is None:
            with builder.goto_block(self.head):
                self.made = builder.trunc(self.phi, self.ty, name=self.name + "_i32")
        return self.made


def _widened(var: E.Var) -> bool:
    """Does the loop over ``var`` count in i64 (an int32 variable: see :meth:`LoopMixin.serial_loop`)?"""
    return var.dtype == "int32"


class LoopMixin:
    """``For`` statements: serial and unrolled loops, and the dispatch of parallel ones."""

    def s_For(self, s: S.For) -> None:
        if s.kind is S.ForKind.PARALLEL and self.frame.parallel_depth == 0:
            self.parallel_for(s)
            return
        for k, v in s.annotations:
            if k == "vectorize_fallback":
                self.builder.comment(f"vectorize fallback for loop {s.loop_var.name}: {v}")
                if self.info is not None:
                    self.info.num_vector_fallbacks += 1
            elif k == "unroll_skipped":
                self.builder.comment(f"loop {s.loop_var.name} not unrolled: {v}")
        if s.kind is S.ForKind.PARALLEL:
            self.builder.comment(f"nested parallel loop {s.loop_var.name} runs serially")
        if _widened(s.loop_var):
            lo, ext = self.index(s.min), self.index(s.extent)
        else:
            lo, ext = self.expr(s.min), self.expr(s.extent)
        self.serial_loop(s.loop_var, lo, ext, s.body, nonneg=self._nonneg_expr(s.min),
                         unroll=s.kind is S.ForKind.UNROLLED)

    def serial_loop(self, var: E.Var, lo: ir.Value, ext: ir.Value, body: S.Stmt,
                    nonneg: bool = False, hi: ir.Value | None = None,
                    unroll: bool = False) -> None:
        """The loop ``for var in [lo, lo + ext)`` (or ``[lo, hi)``) around ``body``.

        An int32 ``var`` counts in i64: its i64 counter is what the indices use
        (``self.wide``), its int32 value (the counter truncated) what everything else does.
        """
        b = self.builder
        wide = _widened(var)
        ty = I64 if wide else llvm_type(var.dtype)
        lo = self.cast_int(lo, ty)
        if hi is None:
            ext = self.cast_int(ext, ty)
            if isinstance(lo, ir.Constant) and isinstance(ext, ir.Constant):
                hi = ir.Constant(ty, int(lo.constant) + int(ext.constant))
            else:
                hi = b.add(lo, ext, flags=["nsw"])
        else:
            hi = self.cast_int(hi, ty)
        pre = b.block
        head = self.frame.func.append_basic_block(f"for_{sanitize(var.name)}")
        loop_body = self.frame.func.append_basic_block(f"for_{sanitize(var.name)}_body")
        done = self.frame.func.append_basic_block(f"for_{sanitize(var.name)}_end")
        b.branch(head)
        schedule_vectors = holds_vectors(body)
        outer_location = b.debug_metadata
        b.debug_metadata = self.loop_lines.location(
            self.frame.func, self.loop_lines.new_loop(self.func_name, var.name, schedule_vectors))
        b.position_at_end(head)
        phi = b.phi(ty, name=sanitize(var.name))
        phi.add_incoming(lo, pre)
        cond = b.icmp_signed("<", phi, hi)
        b.cbranch(cond, loop_body, done)
        b.position_at_end(loop_body)
        old = self.vars.get(id(var))
        old_wide = self.wide.get(id(var))
        if wide:
            # the loop counts in i64; the variable's own int32 value is its truncation,
            # made in the loop's header the first time something needs it
            self.wide[id(var)] = phi
            self.vars[id(var)] = Narrowed(head, phi, llvm_type(var.dtype), sanitize(var.name))
        else:
            self.vars[id(var)] = phi
        if nonneg:
            self.nonneg.add(id(var))
        long_before = self.long_loops
        outer_copies, self.nest_copies = self.nest_copies, 0
        self.stmt(body)
        inner_copies, self.nest_copies = self.nest_copies, outer_copies
        nxt = self.builder.add(phi, ir.Constant(ty, 1), flags=["nsw"])
        phi.add_incoming(nxt, self.builder.block)
        latch = self.builder.branch(head)
        const_trip = (isinstance(lo, ir.Constant) and isinstance(hi, ir.Constant))
        trip = int(hi.constant) - int(lo.constant) if const_trip else None
        stays = False
        flags: list[str] = []
        if unroll:
            flags.append(UNROLL_FULL_MD)
            if self.info is not None:
                self.info.num_unrolled_loops += 1
        elif self.long_loops > long_before:
            # an outer loop around a loop that stays a loop: unrolling it only copies the
            # inner loop (k_0 around a 128-long k_1 became 8 copies of k_1, each then
            # unrolled 16x by LLVM: 2x the compile time for the same inner loop)
            flags.append("llvm.loop.unroll.disable")
        elif (inner_copies and trip is not None and trip < LONG_LOOP_TRIP
              and MAX_NEST_COPIES < trip * inner_copies <= LLVM_FULL_UNROLL_THRESHOLD):
            # a nest of short loops that LLVM would unroll into more than MAX_NEST_COPIES
            # copies of its body (the best matmul's packing copy, 16 x 4 vectors, became
            # 64 copies: 5x the compile time of its module, for a copy loop)
            flags.append("llvm.loop.unroll.disable")
            stays = True
        innermost = self.long_loops == long_before and not inner_copies
        if innermost and not unroll and (trip is None or trip >= VECTORIZE_GUARDED_MIN_TRIP) \
                and guarded_element_loop(body):
            # LLVM's loop vectorizer, which otherwise runs only with auto_vectorize, is asked
            # for this loop (see guarded_element_loop)
            flags.append("llvm.loop.vectorize.enable")
            if self.info is not None:
                self.info.num_guarded_vectorized += 1
        elif not unroll and keeps_vectorizer_off(innermost, schedule_vectors):
            flags.append(VECTORIZER_OFF)
        if flags:
            latch.set_metadata("llvm.loop", loop_id(self.module, flags))
        if not unroll and (trip is None or trip >= LONG_LOOP_TRIP or stays):
            self.long_loops += 1
        else:
            copies = trip or 1
            if innermost and not unroll and not schedule_vectors \
                    and copies >= 2 * LOOP_VECTORIZER_LANES and stores_along(body, var):
                copies = vector_iterations(copies)
            self.nest_copies = max(self.nest_copies, copies * max(1, inner_copies))
        self.builder.position_at_end(done)
        self.builder.debug_metadata = outer_location
        self.nonneg.discard(id(var))
        restore(self.vars, id(var), old)
        restore(self.wide, id(var), old_wide)

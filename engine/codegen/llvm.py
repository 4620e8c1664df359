"""LLVM IR generation with llvmlite's IRBuilder: one method per IR node kind.

Input: lowered PrimFuncs (see :mod:`engine.lower`): loops, flat 1-D buffers, no blocks.
Output: an ``llvmlite.ir.Module`` where each PrimFunc ``f`` becomes::

    i32 @<symbol>(ptr noalias align <elem> %A, ptr noalias align <elem> %B, ...)

returning 0 on success (-1: a heap allocation failed; other values: a task of a parallel
loop failed). Choices worth knowing:

* **Alignment of arguments.** Kernels are called zero-copy on numpy arrays, whose data is
  only guaranteed to be aligned to the element size (numpy/glibc give 16 bytes, not 64).
  Parameters therefore declare the element size as alignment (the runtime checks it and
  refuses unaligned arrays with an ArgumentError). On x86-64 an unaligned vector load of
  aligned data costs the same as an aligned one, so nothing is lost; buffers the kernel
  allocates itself are 64-byte aligned and declared so.
* **noalias.** Every buffer parameter is ``noalias`` (the runtime refuses overlapping
  arrays), so LLVM vectorizes without run-time alias checks.
* **Index arithmetic** is done in the index dtype with ``nsw`` (as TVM does) and sign
  extended to i64 for ``getelementptr``.
* **FloorDiv/FloorMod** use floor semantics for negative operands; by a positive power
  of two they become an arithmetic shift / a mask (exact for every sign); by another
  positive constant with a provably non-negative dividend they become ``sdiv``/``srem``.
* **Vectors.** ``Ramp`` indices with stride 1 become one vector load/store of
  ``lanes`` elements; other vector indices gather/scatter element by element.
* **Allocate.** ``local`` buffers and ``global`` ones up to :data:`STACK_LIMIT` bytes are
  ``alloca``'d (64-byte aligned) in the function's entry block — LLVM's SROA/mem2reg can
  then keep small ones in registers; bigger ones use ``aligned_alloc``/``free``. An
  ``Allocate`` inside a parallel loop's body (engine.lower places compacted buffers there)
  lands in the outlined worker's entry block, so every task has its own copy.
* **Parallel loops** are outlined: the body becomes ``i32 body(i32 task, i32 ntasks, ptr env)``
  (``env`` holds the captured buffers and variables) that computes its chunk of iterations
  and calls an internal ``noalias`` worker function; the loop itself becomes a call of
  ``engine_parallel_launch(body, env, extent)`` from the native runtime
  (engine/runtime/parallel.c), which splits the iterations into chunks that the pool's
  threads claim dynamically.
  Parallel loops nested inside a parallel loop run serially.
* **Unrolled loops** are normally expanded by :mod:`engine.lower.legalize`; a ``T.unroll``
  loop that still reaches the code generator (IR lowered with ``legalize=False``) gets the
  loop metadata ``!llvm.loop !{self, !{"llvm.loop.unroll.full"}}`` on its back edge, so
  LLVM's unroller expands it (see :func:`engine.codegen.target.optimize` for the O1 run
  this needs outside parallel loops); other loops are left to LLVM's own heuristics.
* **Intrinsics** (:data:`engine.ir.expr.INTRINSICS`) map to LLVM intrinsics (``llvm.exp``,
  ``llvm.sqrt``, ``llvm.fma``, ...), to libm (``tanh``, ``erf``) or to an expansion
  (``sigmoid``, ``rsqrt``); ``if_then_else`` evaluates only the chosen branch.
* **Hooks for instrumentation** (used by the cache simulator):
  ``Call("int64", "address_of", (BufferLoad(buf, (index,)),))`` is the element's address as
  i64; ``Call(dtype, "call_extern", (StringImm("symbol"), *args))`` calls
  ``dtype symbol(args...)`` with arguments typed by their dtypes (a "handle" result is a
  pointer; for a C ``void`` function declare "int32" and ignore the value). Symbols resolve
  against the process (libc, libm, the parallel runtime) and the ``extra_modules`` given to
  :func:`engine.build`.
* ``fast_math=True`` puts the ``fast`` flag on floating-point instructions and calls;
  otherwise only ``contract`` is set (a*b+c may become one fused multiply-add, as C
  compilers do by default with -ffp-contract=on).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import llvmlite.ir as ir

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import (bits_of, bytes_of, element_of, is_bool, is_float, is_int, is_uint,
                             lanes_of, split_lanes)
from engine.ir.function import PrimFunc
from engine.ir.functor import collect, post_order_visit
from engine.lower.errors import BuildError

STACK_LIMIT = 64 * 1024          # global-scope buffers up to this size live on the stack
LOCAL_STACK_LIMIT = 1024 * 1024  # local-scope buffers above this go to the heap

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
LAUNCH_SYMBOL = "engine_parallel_launch"


def scalar_type(dtype: str) -> ir.Type:
    base = element_of(dtype)
    if base == "float32":
        return ir.FloatType()
    if base == "float64":
        return ir.DoubleType()
    if base == "float16":
        return ir.HalfType()
    if base == "bool":
        return I1
    if base == "handle":
        return PTR
    return ir.IntType(bits_of(base))


def llvm_type(dtype: str) -> ir.Type:
    """LLVM register type of an IR dtype (``float32x8`` -> ``<8 x float>``, bool -> i1)."""
    base, lanes = split_lanes(dtype)
    t = scalar_type(base)
    return t if lanes == 1 else ir.VectorType(t, lanes)


def mem_type(dtype: str) -> ir.Type:
    """LLVM in-memory element type (bool is stored as a byte)."""
    return I8 if is_bool(dtype) else scalar_type(dtype)


def sanitize(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


@dataclass
class FuncInfo:
    """What the runtime needs to call a generated function."""

    name: str
    symbol: str
    params: tuple            # flat buffers
    orig_params: tuple       # the original (multi-dimensional) buffers
    num_parallel: int = 0
    num_vector_fallbacks: int = 0
    #: ``T.unroll`` loops that reached the code generator unexpanded (marked for LLVM's
    #: full unroll; see engine.codegen.target.optimize)
    num_unrolled_loops: int = 0
    notes: list = field(default_factory=list)


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


#: a loop with at least this many iterations is never unrolled completely by LLVM's O3
#: (its full-unroll threshold is 300 instructions, an iteration costs at least about 5)
LONG_LOOP_TRIP = 64


#: the index arithmetic CodeGen.index shares within a block: expression type -> LLVM op
_INDEX_OPS = {E.Add: "add", E.Sub: "sub", E.Mul: "mul", E.FloorDiv: "sdiv", E.FloorMod: "srem"}


def _signed_int(dtype: str) -> bool:
    """int8..int64 scalars (not uint, not bool, not vectors)."""
    return is_int(dtype) and not is_uint(dtype) and not is_bool(dtype) and lanes_of(dtype) == 1


def unroll_disable_loop_id(module: ir.Module) -> ir.values.MDValue:
    """A new loop ID asking LLVM not to unroll its loop."""
    option = module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")])
    return _LoopID(module, [option])


def unroll_full_loop_id(module: ir.Module) -> ir.values.MDValue:
    """A new loop ID asking LLVM to unroll its loop completely."""
    from .target import UNROLL_FULL_MD
    option = module.add_metadata([ir.MetaDataString(module, UNROLL_FULL_MD)])
    return _LoopID(module, [option])


class _Frame:
    """Per-LLVM-function state (the kernel itself or an outlined parallel body)."""

    def __init__(self, func: ir.Function, parallel_depth: int):
        self.func = func
        self.entry = func.append_basic_block("entry")
        self.alloca_builder = ir.IRBuilder(self.entry)
        self.body_block = func.append_basic_block("body")
        self.alloca_builder.branch(self.body_block)
        self.builder = ir.IRBuilder(self.body_block)
        self.parallel_depth = parallel_depth
        self.fail_block: ir.Block | None = None

    def alloca(self, ty: ir.Type, name: str, align: int = 64):
        b = self.alloca_builder
        b.position_before(self.entry.terminator)
        inst = b.alloca(ty, name=name)
        inst.align = align
        inst.type = PTR  # an opaque pointer like every other buffer pointer (prints the same)
        return inst


class CodeGen:
    """Builds one llvmlite module from lowered PrimFuncs."""

    def __init__(self, module_name: str = "engine", fast_math: bool = False,
                 heap_layout: tuple[int, int, int] | None = None,
                 split_parallel: bool = False):
        self.module = ir.Module(name=module_name)
        #: with split_parallel, each outlined parallel loop body is a module of its own
        #: (appended to ``units``), so that LLVM can compile them side by side
        self.split_parallel = split_parallel
        self.units: list[ir.Module] = []
        self.fast_math = fast_math
        # (alignment, stagger, first): the k-th heap buffer starts (first + k) * stagger
        # past an alignment boundary — the cache simulator's deterministic addresses
        self.heap_layout = heap_layout
        self.heap_count = 0
        # "contract" lets LLVM fuse a*b+c into one FMA (what C compilers do by default,
        # -ffp-contract=on); it only ever makes results more accurate.
        self.fflags = ("fast",) if fast_math else ("contract",)
        self.vars: dict[int, Any] = {}
        self.bufs: dict[int, Any] = {}
        self.nonneg: set[int] = set()
        self.frame: _Frame | None = None
        self.func_name = ""
        self.outline_count = 0
        #: structural key -> (basic block, value) of index arithmetic (see index())
        self.index_values: dict = {}
        #: loops emitted so far that LLVM will not unroll completely (see serial_loop)
        self.long_loops = 0
        self.infos: dict[str, FuncInfo] = {}
        self.info: FuncInfo | None = None
        self.mask: ir.Value | None = None  # active lanes inside a vector-predicated region

    # ------------------------------------------------------------------ entry points
    def add_function(self, func: PrimFunc, name: str | None = None) -> FuncInfo:
        if not func.attr("lowered", False):
            raise BuildError(f"function {func.name!r} is not lowered; call engine.lower.lower "
                             "first (or use engine.build, which lowers for you)")
        name = name or func.name
        self.func_name = name
        symbol = "engine_fn_" + sanitize(name)
        params = func.params
        orig = func.attr("lowered_params", params)
        fnty = ir.FunctionType(I32, [PTR] * len(params))
        fn = ir.Function(self.module, fnty, name=symbol)
        info = FuncInfo(name, symbol, tuple(params), tuple(orig))
        self.info = info
        self.vars, self.bufs, self.nonneg = {}, {}, set()
        for arg, buf in zip(fn.args, params):
            arg.name = sanitize(buf.name)
            arg.add_attribute("noalias")
            arg.attributes.align = max(1, bytes_of(element_of(buf.dtype)))
            self.bufs[id(buf)] = arg
        self.frame = _Frame(fn, 0)
        self.stmt(func.body)
        self.builder.ret(ir.Constant(I32, 0))
        self.infos[name] = info
        return info

    @property
    def builder(self) -> ir.IRBuilder:
        return self.frame.builder

    # ------------------------------------------------------------------ helpers
    def err(self, msg: str) -> BuildError:
        return BuildError(f"{msg} (in function {self.func_name!r})")

    def declare(self, name: str, ret: ir.Type, args: list, **attrs) -> ir.Function:
        fn = self.module.globals.get(name)
        fnty = ir.FunctionType(ret, args)
        if fn is None:
            fn = ir.Function(self.module, fnty, name=name)
            return fn
        if fn.function_type != fnty:
            raise self.err(f"external function {name!r} is used with two different "
                           f"signatures ({fn.function_type} and {fnty})")
        return fn

    def intrinsic(self, name: str, ty: ir.Type, nargs: int) -> ir.Function:
        """Declare ``llvm.<name>.<type suffix>`` overloaded on ``ty``."""
        if isinstance(ty, ir.VectorType):
            suffix = f"v{ty.count}{_type_suffix(ty.element)}"
        else:
            suffix = _type_suffix(ty)
        return self.declare(f"llvm.{name}.{suffix}", ty, [ty] * nargs)

    def fail_with(self, code: ir.Value) -> None:
        """Return ``code`` from the current LLVM function (the caller continues after)."""
        b = self.builder
        fail = self.frame.func.append_basic_block("fail")
        cont = self.frame.func.append_basic_block("cont")
        is_err = b.icmp_signed("!=", code, ir.Constant(I32, 0))
        b.cbranch(is_err, fail, cont)
        with b.goto_block(fail):
            b.ret(code)
        b.position_at_end(cont)

    def splat(self, v: ir.Value, lanes: int) -> ir.Value:
        if isinstance(v.type, ir.VectorType):
            return v
        vt = ir.VectorType(v.type, lanes)
        if isinstance(v, ir.Constant):
            return ir.Constant(vt, [v.constant] * lanes) if v.constant is not None else \
                self._splat_dyn(v, vt)
        return self._splat_dyn(v, vt)

    def _splat_dyn(self, v, vt):
        b = self.builder
        undef = ir.Constant(vt, ir.Undefined)
        ins = b.insert_element(undef, v, ir.Constant(I32, 0))
        mask = ir.Constant(ir.VectorType(I32, vt.count), [0] * vt.count)
        return b.shuffle_vector(ins, undef, mask)

    def match(self, a: ir.Value, b: ir.Value):
        la = a.type.count if isinstance(a.type, ir.VectorType) else 1
        lb = b.type.count if isinstance(b.type, ir.VectorType) else 1
        if la == lb:
            return a, b
        if la == 1:
            return self.splat(a, lb), b
        if lb == 1:
            return a, self.splat(b, la)
        raise self.err(f"vector operands with different lanes ({la} and {lb})")

    def const_like(self, dtype: str, value) -> ir.Value:
        t = llvm_type(dtype)
        st = scalar_type(dtype)
        c = ir.Constant(st, value)
        if isinstance(t, ir.VectorType):
            return ir.Constant(t, [c.constant] * t.count)
        return c

    # ------------------------------------------------------------------ statements
    def stmt(self, s: Any) -> None:
        if s is None:
            return
        meth = getattr(self, "s_" + type(s).__name__, None)
        if meth is None:
            raise self.err(f"cannot generate code for statement {type(s).__name__}; "
                           "was the function lowered?")
        meth(s)

    def s_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def s_Evaluate(self, s: S.Evaluate) -> None:
        if isinstance(s.value, (E.IntImm, E.FloatImm)):
            return
        self.expr(s.value)

    def s_LetStmt(self, s: S.LetStmt) -> None:
        v = self.expr(s.value)
        old = self.vars.get(id(s.var))
        self.vars[id(s.var)] = v
        self.stmt(s.body)
        if old is None:
            self.vars.pop(id(s.var), None)
        else:
            self.vars[id(s.var)] = old

    def s_IfThenElse(self, s: S.IfThenElse) -> None:
        if lanes_of(s.condition.dtype) > 1:
            self._masked_if(s)
            return
        cond = self.as_i1(self.expr(s.condition), s.condition.dtype)
        b = self.builder
        if s.else_case is None:
            with b.if_then(cond):
                self.stmt(s.then_case)
        else:
            with b.if_else(cond) as (then, otherwise):
                with then:
                    self.stmt(s.then_case)
                with otherwise:
                    self.stmt(s.else_case)

    # ---- vector predicates (a T.where on a vectorized loop, if_then_else on lanes) ----
    def _and_mask(self, cond: ir.Value) -> ir.Value:
        if self.mask is None:
            return cond
        return self.builder.and_(self.mask, cond)

    def _any(self, mask: ir.Value) -> ir.Value:
        fn = self.declare(f"llvm.vector.reduce.or.v{mask.type.count}i1", I1, [mask.type])
        return self.builder.call(fn, [mask])

    def _under_mask(self, mask: ir.Value, emit) -> None:
        """Run ``emit()`` with ``mask`` active, only if some lane is active.

        Vector loads/stores inside become masked (never touching inactive lanes' memory);
        lane-invariant scalar loads inside run only when some lane is active, i.e. only
        when the scalar program would have executed them too.
        """
        saved = self.mask
        with self.builder.if_then(self._any(mask)):
            self.mask = mask
            try:
                emit()
            finally:
                self.mask = saved

    def _masked_if(self, s: S.IfThenElse) -> None:
        cond = self.as_i1v(s.condition)
        b = self.builder
        self._under_mask(self._and_mask(cond), lambda: self.stmt(s.then_case))
        if s.else_case is not None:
            self._under_mask(self._and_mask(b.not_(cond)), lambda: self.stmt(s.else_case))

    def s_BufferStore(self, s: S.BufferStore) -> None:
        buf = s.buffer
        if len(s.indices) != 1:
            raise self.err(f"store to buffer {buf.name!r} is not flattened")
        val = self.expr(s.value)
        idx_e = s.indices[0]
        lanes = lanes_of(idx_e.dtype)
        if lanes > 1 and not isinstance(val.type, ir.VectorType):
            val = self.splat(val, lanes)
        if is_bool(buf.dtype):
            val = self.builder.zext(val, ir.VectorType(I8, lanes) if lanes > 1 else I8)
        elif lanes == 1 and isinstance(val.type, ir.VectorType):
            raise self.err(f"vector value stored at a scalar index of buffer {buf.name!r}")
        self._access(buf, idx_e, val)

    def s_Allocate(self, s: S.Allocate) -> None:
        buf = s.buffer
        n = 1
        for d in buf.const_shape():
            n *= d
        nbytes = max(1, n * bytes_of(buf.dtype))
        ety = mem_type(buf.dtype)
        heap = (buf.scope != "local" and nbytes > STACK_LIMIT) or nbytes > LOCAL_STACK_LIMIT
        b = self.builder
        if not heap:
            ptr = self.frame.alloca(ir.ArrayType(ety, max(n, 1)), sanitize(buf.name),
                                    align=max(64, buf.align))
        else:
            align, offset = 64, 0
            if self.heap_layout is not None:
                align, stagger, first = self.heap_layout
                offset = (first + self.heap_count) * stagger % align
                self.heap_count += 1
            size = (nbytes + offset + 63) // 64 * 64
            alloc = self.declare("aligned_alloc", PTR, [I64, I64])
            raw = b.call(alloc, [ir.Constant(I64, align), ir.Constant(I64, size)],
                         name=sanitize(buf.name) + "_mem")
            null = b.icmp_unsigned("==", raw, ir.Constant(PTR, None))
            code = b.select(null, ir.Constant(I32, -1), ir.Constant(I32, 0))
            self.fail_with(code)
            ptr = raw if not offset else b.gep(raw, [ir.Constant(I64, offset)], inbounds=True,
                                               source_etype=I8, name=sanitize(buf.name))
        old = self.bufs.get(id(buf))
        self.bufs[id(buf)] = ptr
        self.stmt(s.body)
        if heap:
            self.builder.call(self.declare("free", ir.VoidType(), [PTR]), [raw])
        if old is None:
            self.bufs.pop(id(buf), None)
        else:
            self.bufs[id(buf)] = old

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
        lo = self.expr(s.min)
        ext = self.expr(s.extent)
        self.serial_loop(s.loop_var, lo, ext, s.body, nonneg=self._nonneg_expr(s.min),
                         unroll=s.kind is S.ForKind.UNROLLED)

    def serial_loop(self, var: E.Var, lo: ir.Value, ext: ir.Value, body: S.Stmt,
                    nonneg: bool = False, hi: ir.Value | None = None,
                    unroll: bool = False) -> None:
        b = self.builder
        ty = llvm_type(var.dtype)
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
        b.position_at_end(head)
        phi = b.phi(ty, name=sanitize(var.name))
        phi.add_incoming(lo, pre)
        cond = b.icmp_signed("<", phi, hi)
        b.cbranch(cond, loop_body, done)
        b.position_at_end(loop_body)
        old = self.vars.get(id(var))
        self.vars[id(var)] = phi
        if nonneg:
            self.nonneg.add(id(var))
        long_before = self.long_loops
        self.stmt(body)
        nxt = self.builder.add(phi, ir.Constant(ty, 1), flags=["nsw"])
        phi.add_incoming(nxt, self.builder.block)
        latch = self.builder.branch(head)
        if unroll:
            latch.set_metadata("llvm.loop", unroll_full_loop_id(self.module))
            if self.info is not None:
                self.info.num_unrolled_loops += 1
        elif self.long_loops > long_before:
            # an outer loop around a loop that stays a loop: unrolling it only copies the
            # inner loop (k_0 around a 128-long k_1 became 8 copies of k_1, each then
            # unrolled 16x by LLVM: 2x the compile time for the same inner loop)
            latch.set_metadata("llvm.loop", unroll_disable_loop_id(self.module))
        const_trip = (isinstance(lo, ir.Constant) and isinstance(hi, ir.Constant))
        if not unroll and (not const_trip or int(hi.constant) - int(lo.constant)
                           >= LONG_LOOP_TRIP):
            self.long_loops += 1
        self.builder.position_at_end(done)
        self.nonneg.discard(id(var))
        if old is None:
            self.vars.pop(id(var), None)
        else:
            self.vars[id(var)] = old

    # ------------------------------------------------------------------ parallel outlining
    def parallel_for(self, s: S.For) -> None:
        body = s.body
        # one walk of the body: the variables it defines and uses, the buffers it allocates
        # and accesses (an unrolled micro-kernel's body is large: four walks cost 5 ms)
        defined: set[int] = {id(s.loop_var)}
        used_vars: list[E.Var] = []
        seen: set[int] = set()
        allocated: set[int] = set()
        used_bufs: list[Buffer] = []
        seen_b: set[int] = set()

        def note(n):
            if isinstance(n, E.Var):
                if id(n) not in seen:
                    seen.add(id(n))
                    used_vars.append(n)
            elif isinstance(n, (E.BufferLoad, S.BufferStore)):
                if id(n.buffer) not in seen_b:
                    seen_b.add(id(n.buffer))
                    used_bufs.append(n.buffer)
            elif isinstance(n, S.For):
                defined.add(id(n.loop_var))
            elif isinstance(n, (S.LetStmt, E.Let)):
                defined.add(id(n.var))
            elif isinstance(n, S.Allocate):
                allocated.add(id(n.buffer))
        post_order_visit(body, note)
        free_vars = [v for v in used_vars if id(v) not in defined]
        bufs = [bb for bb in used_bufs if id(bb) not in allocated]
        for v in free_vars:
            if id(v) not in self.vars:
                raise self.err(f"variable {v.name!r} is used in parallel loop "
                               f"{s.loop_var.name!r} but never defined")
        for bb in bufs:
            if id(bb) not in self.bufs:
                raise self.err(f"buffer {bb.name!r} is used but never allocated")
        b = self.builder
        lo = self.cast_int(self.expr(s.min), I64)
        ext = self.cast_int(self.expr(s.extent), I64)
        # env = {lo, ext, buffers..., vars...}
        captured_types = [I64, I64] + [PTR] * len(bufs) + [self.vars[id(v)].type for v in free_vars]
        env_ty = ir.LiteralStructType(captured_types)
        env = self.frame.alloca(env_ty, "par_env", align=16)
        values = [lo, ext] + [self.bufs[id(bb)] for bb in bufs] + [self.vars[id(v)] for v in free_vars]
        for i, v in enumerate(values):
            b.store(v, b.gep(env, [ir.Constant(I32, 0), ir.Constant(I32, i)], inbounds=True,
                             source_etype=env_ty))
        self.outline_count += 1
        base = f"{self.info.symbol}_par{self.outline_count}"
        # worker: i32 worker(ptr noalias bufs..., vars..., i64 begin, i64 end)
        wty = ir.FunctionType(I32, [PTR] * len(bufs) + [self.vars[id(v)].type for v in free_vars]
                              + [I64, I64])
        parent_module = self.module
        unit = parent_module
        if self.split_parallel:
            # the loop body becomes a module of its own, optimized and compiled to machine
            # code on its own thread (engine.codegen.units): its task is external there and
            # declared in this module
            unit = ir.Module(name=base)
            self.units.append(unit)
        worker = ir.Function(unit, wty, name=base + "_work")
        worker.linkage = "internal"
        # inlined into its task by LLVM's always-inliner, before any simplification: the
        # body is optimized once, in the task (with the worker's noalias parameters turned
        # into alias scopes). Left to the CGSCC inliner, it was simplified as a function
        # of its own, then again after inlining: 8-10 ms more per compile of the best
        # matmul, for the same code.
        worker.attributes.add("alwaysinline")
        # task: i32 task(i32 task_id, i32 num_tasks, ptr env)
        task_ty = ir.FunctionType(I32, [I32, I32, PTR])
        task = ir.Function(unit, task_ty, name=base + "_task")
        if unit is parent_module:
            task.linkage = "internal"
            task_ref = task
        else:
            task_ref = self.declare(base + "_task", I32, [I32, I32, PTR])
        if self.info is not None:
            self.info.num_parallel += 1

        # --- launch from the current function
        launch = self.declare(LAUNCH_SYMBOL, I32, [PTR, PTR, I32])
        big = b.icmp_signed(">", ext, ir.Constant(I64, 65535))
        hint = b.trunc(b.select(big, ir.Constant(I64, 65535), ext), I32)
        rc = b.call(launch, [task_ref, env, hint])
        self.fail_with(rc)

        # --- task function: load env, compute the chunk, call the worker
        saved = (self.frame, self.vars, self.bufs, self.nonneg)
        self.frame = _Frame(task, saved[0].parallel_depth + 1)
        tb = self.builder
        tid, ntasks, penv = task.args
        loaded = []
        for i, t in enumerate(captured_types):
            p = tb.gep(penv, [ir.Constant(I32, 0), ir.Constant(I32, i)], inbounds=True,
                       source_etype=env_ty)
            loaded.append(tb.load(p, typ=t))
        t_lo, t_ext = loaded[0], loaded[1]
        nt = tb.sext(ntasks, I64)
        per = tb.sdiv(tb.add(t_ext, tb.sub(nt, ir.Constant(I64, 1))), nt)
        begin = tb.mul(tb.sext(tid, I64), per)
        end = tb.add(begin, per)
        end = tb.select(tb.icmp_signed("<", end, t_ext), end, t_ext)
        begin = tb.select(tb.icmp_signed("<", begin, t_ext), begin, t_ext)
        rc2 = tb.call(worker, loaded[2:] + [tb.add(t_lo, begin), tb.add(t_lo, end)])
        tb.ret(rc2)

        # --- worker function: the loop over [begin, end)
        self.frame = _Frame(worker, saved[0].parallel_depth + 1)
        self.vars, self.bufs = {}, {}
        self.nonneg = set(saved[3])
        args = list(worker.args)
        for bb, a in zip(bufs, args[:len(bufs)]):
            a.name = sanitize(bb.name)
            a.add_attribute("noalias")
            self.bufs[id(bb)] = a
        for v, a in zip(free_vars, args[len(bufs):len(bufs) + len(free_vars)]):
            a.name = sanitize(v.name)
            self.vars[id(v)] = a
        wbegin, wend = args[-2], args[-1]
        self.module = unit  # declarations and loop metadata of the body go to its module
        try:
            self.serial_loop(s.loop_var, wbegin, None, body,
                             nonneg=self._nonneg_expr(s.min), hi=wend)
            self.builder.ret(ir.Constant(I32, 0))
        finally:
            self.module = parent_module
        self.frame, self.vars, self.bufs, self.nonneg = saved

    # ------------------------------------------------------------------ memory access
    def _ptr(self, buf: Buffer) -> ir.Value:
        p = self.bufs.get(id(buf))
        if p is None:
            raise self.err(f"buffer {buf.name!r} is used outside of its allocation "
                           "(not a parameter and not allocated by an enclosing block)")
        return p

    def _elem_ptr(self, buf: Buffer, idx: ir.Value) -> ir.Value:
        ety = mem_type(buf.dtype)
        return self.builder.gep(self._ptr(buf), [self.cast_int(idx, I64)], inbounds=True,
                                source_etype=ety)

    def _access(self, buf: Buffer, idx_e: E.PrimExpr, store_val: ir.Value | None):
        """Load (store_val None) or store at a flat index, scalar or vector."""
        b = self.builder
        ety = mem_type(buf.dtype)
        esize = max(1, bytes_of(element_of(buf.dtype)))
        lanes = lanes_of(idx_e.dtype)
        if lanes == 1:
            p = self._elem_ptr(buf, self.index(idx_e))
            if store_val is None:
                return b.load(p, typ=ety, align=esize)
            b.store(store_val, p, align=esize)
            return None
        vty = ir.VectorType(ety, lanes)
        mask = self.mask
        if mask is not None and mask.type.count != lanes:
            raise self.err(f"access to {buf.name!r} with {lanes} lanes under a predicate "
                           f"of {mask.type.count} lanes")
        if isinstance(idx_e, E.Ramp) and E.as_const_int(idx_e.stride) == 1:
            p = self._elem_ptr(buf, self.index(idx_e.base))
            suffix = f"v{lanes}{_type_suffix(ety)}.p0"
            if store_val is None:
                if mask is None:
                    return b.load(p, typ=vty, align=esize)
                fn = self.declare(f"llvm.masked.load.{suffix}", vty, [PTR, I32, mask.type, vty])
                return b.call(fn, [p, ir.Constant(I32, esize), mask, ir.Constant(vty, None)])
            if mask is None:
                b.store(store_val, p, align=esize)
            else:
                fn = self.declare(f"llvm.masked.store.{suffix}", ir.VoidType(),
                                  [vty, PTR, I32, mask.type])
                b.call(fn, [store_val, p, ir.Constant(I32, esize), mask])
            return None
        # gather / scatter lane by lane (a lane masked off is not touched at all)
        idx = self.expr(idx_e)
        out = ir.Constant(vty, None) if store_val is None else None
        for lane in range(lanes):
            lc = ir.Constant(I32, lane)
            li = b.extract_element(idx, lc)
            if mask is None:
                p = self._elem_ptr(buf, li)
                if store_val is None:
                    out = b.insert_element(out, b.load(p, typ=ety, align=esize), lc)
                else:
                    b.store(b.extract_element(store_val, lc), p, align=esize)
                continue
            on = b.extract_element(mask, lc)
            if store_val is None:
                before = b.block
                with b.if_then(on):
                    p = self._elem_ptr(buf, li)
                    loaded = b.insert_element(out, b.load(p, typ=ety, align=esize), lc)
                    inside = b.block
                phi = b.phi(vty)
                phi.add_incoming(loaded, inside)
                phi.add_incoming(out, before)
                out = phi
            else:
                with b.if_then(on):
                    b.store(b.extract_element(store_val, lc), self._elem_ptr(buf, li),
                            align=esize)
        return out

    # ------------------------------------------------------------------ flat indices
    def index(self, e: E.PrimExpr) -> ir.Value:
        """A scalar flat index as an i64 value; identical index arithmetic in one basic
        block is emitted once.

        The 16 copies of an unrolled micro-kernel's ``C[i_0 * 32768 + i_1 * 4096 + ...]``
        compute their common part once (common sub-expressions of signed integer ``+ - *``
        and of floor division / modulo by a positive constant). The arithmetic stays in
        the index's own type, sign-extended at the end as before: computing it in i64
        instead changes LLVM's unrolling decisions (cheaper-looking loop bodies got
        unrolled completely: the best matmul's packing loop became 64 copies and its
        compile 15 ms slower).
        """
        v, key = self._index(e)
        if v.type == I64:
            return v
        return self._cse(None if key is None else ("i64", key),
                         lambda: self.cast_int(v, I64))[0]

    def _index(self, e: E.PrimExpr) -> tuple[ir.Value, Any]:
        """(value in e's type, structural key or None); see :meth:`index`."""
        t = type(e)
        if t is E.IntImm:
            v = self.e_IntImm(e)
            return v, (e.dtype, int(e.value))
        if t is E.Var:
            v = self.e_Var(e)
            return v, ("v", id(v))
        op = _INDEX_OPS.get(t)
        if op is None or not _signed_int(e.dtype):
            return self.expr(e), None
        if op in ("sdiv", "srem"):
            c = E.as_const_int(e.b)
            if c is None or c <= 0:
                return self.expr(e), None
            if c & (c - 1) == 0:       # a power of two: floor semantics for any sign
                a, ka = self._index(e.a)
                if op == "sdiv":
                    k = c.bit_length() - 1
                    if k == 0:
                        return a, ka
                    return self._cse(None if ka is None else ("ashr", ka, k),
                                     lambda: self.builder.ashr(a, ir.Constant(a.type, k)))
                return self._cse(None if ka is None else ("and", ka, c - 1),
                                 lambda: self.builder.and_(a, ir.Constant(a.type, c - 1)))
            if not self._nonneg_expr(e.a):  # truncating division = floor division
                return self.expr(e), None
        a, ka = self._index(e.a)
        b, kb = self._index(e.b)
        a, b = self.match(a, b)
        key = None if ka is None or kb is None else (op, ka, kb)
        if op in ("add", "sub", "mul"):
            return self._cse(key, lambda: getattr(self.builder, op)(a, b, flags=["nsw"]))
        return self._cse(key, lambda: getattr(self.builder, op)(a, b))

    def _cse(self, key, make) -> tuple[ir.Value, Any]:
        """``make()``, or the value made for ``key`` earlier in the current basic block
        (which dominates the insertion point)."""
        block = self.builder.block
        if key is not None:
            hit = self.index_values.get(key)
            if hit is not None and hit[0] is block:
                return hit[1], key
        v = make()
        if key is not None:
            self.index_values[key] = (block, v)
        return v, key

    # ------------------------------------------------------------------ expressions
    def expr(self, e: Any) -> ir.Value:
        meth = getattr(self, "e_" + type(e).__name__, None)
        if meth is None:
            raise self.err(f"cannot generate code for expression {type(e).__name__}")
        return meth(e)

    def e_Var(self, e: E.Var):
        v = self.vars.get(id(e))
        if v is None:
            raise self.err(f"variable {e.name!r} is used but never defined "
                           "(a block axis outside its block, or a free variable)")
        return v

    def e_IntImm(self, e: E.IntImm):
        return ir.Constant(llvm_type(e.dtype), int(e.value) & ((1 << bits_of(e.dtype)) - 1)
                           if is_uint(e.dtype) else int(e.value))

    def e_FloatImm(self, e: E.FloatImm):
        return ir.Constant(llvm_type(e.dtype), float(e.value))

    def e_StringImm(self, e: E.StringImm):
        raise self.err(f"a string constant {e.value!r} can only be the symbol of call_extern")

    def e_BufferLoad(self, e: E.BufferLoad):
        if len(e.indices) != 1:
            raise self.err(f"load from buffer {e.buffer.name!r} is not flattened")
        v = self._access(e.buffer, e.indices[0], None)
        if is_bool(e.buffer.dtype):
            zero = ir.Constant(v.type, None) if isinstance(v.type, ir.VectorType) else ir.Constant(I8, 0)
            v = self.builder.icmp_unsigned("!=", v, zero)
        return v

    def e_Ramp(self, e: E.Ramp):
        base = self.expr(e.base)
        stride = self.expr(e.stride)
        b = self.builder
        lanes = e.lanes
        vb = self.splat(base, lanes)
        vs = self.splat(stride, lanes)
        st = base.type
        iota = ir.Constant(ir.VectorType(st, lanes), list(range(lanes)))
        return b.add(vb, b.mul(vs, iota))

    def e_Broadcast(self, e: E.Broadcast):
        return self.splat(self.expr(e.value), e.lanes)

    def e_Let(self, e: E.Let):
        v = self.expr(e.value)
        old = self.vars.get(id(e.var))
        self.vars[id(e.var)] = v
        out = self.expr(e.body)
        if old is None:
            self.vars.pop(id(e.var), None)
        else:
            self.vars[id(e.var)] = old
        return out

    def e_Cast(self, e: E.Cast):
        v = self.expr(e.value)
        return self.convert(v, e.value.dtype, e.dtype)

    def convert(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        b = self.builder
        lanes = lanes_of(dst)
        if lanes > 1 and not isinstance(v.type, ir.VectorType):
            v = self.splat(v, lanes)
        dt = llvm_type(dst) if lanes > 1 or not isinstance(v.type, ir.VectorType) else \
            ir.VectorType(scalar_type(dst), v.type.count)
        if v.type == dt and element_of(src) == element_of(dst):
            return v
        if is_bool(dst):
            if is_float(src):
                return b.fcmp_unordered("!=", v, ir.Constant(v.type, None))
            if v.type == dt:
                return v
            return b.icmp_unsigned("!=", v, ir.Constant(v.type, None))
        if is_float(dst):
            if is_float(src):
                sb, db = bits_of(src), bits_of(dst)
                if sb == db:
                    return v
                return b.fpext(v, dt) if db > sb else b.fptrunc(v, dt)
            if is_uint(src) or is_bool(src):
                return b.uitofp(v, dt)
            return b.sitofp(v, dt)
        if element_of(dst) == "handle":
            return b.inttoptr(v, dt) if not isinstance(v.type, ir.PointerType) else v
        # integer destination
        if is_float(src):
            return b.fptoui(v, dt) if is_uint(dst) else b.fptosi(v, dt)
        if element_of(src) == "handle":
            return b.ptrtoint(v, dt)
        sb = 1 if is_bool(src) else bits_of(src)
        db = bits_of(dst)
        if sb == db:
            return v
        if db < sb:
            return b.trunc(v, dt)
        if is_uint(src) or is_bool(src):
            return b.zext(v, dt)
        return b.sext(v, dt)

    def cast_int(self, v: ir.Value, ty: ir.IntType) -> ir.Value:
        if v.type == ty:
            return v
        if isinstance(v, ir.Constant) and isinstance(v.constant, int):
            return ir.Constant(ty, v.constant)
        if v.type.width < ty.width:
            return self.builder.sext(v, ty)
        return self.builder.trunc(v, ty)

    def as_i1(self, v: ir.Value, dtype: str) -> ir.Value:
        if v.type == I1:
            return v
        return self.convert(v, dtype, "bool")

    # arithmetic ---------------------------------------------------------------
    def _operands(self, e):
        a, b = self.expr(e.a), self.expr(e.b)
        return self.match(a, b)

    def e_Add(self, e):
        a, b = self._operands(e)
        if is_float(e.a.dtype):
            return self.builder.fadd(a, b, flags=self.fflags)
        return self.builder.add(a, b, flags=self._iflags(e.a.dtype))

    def e_Sub(self, e):
        a, b = self._operands(e)
        if is_float(e.a.dtype):
            return self.builder.fsub(a, b, flags=self.fflags)
        return self.builder.sub(a, b, flags=self._iflags(e.a.dtype))

    def e_Mul(self, e):
        a, b = self._operands(e)
        if is_float(e.a.dtype):
            return self.builder.fmul(a, b, flags=self.fflags)
        return self.builder.mul(a, b, flags=self._iflags(e.a.dtype))

    def _iflags(self, dtype: str):
        return ["nsw"] if is_int(dtype) and not is_uint(dtype) and not is_bool(dtype) else []

    def e_Div(self, e):
        a, b = self._operands(e)
        if is_float(e.a.dtype):
            return self.builder.fdiv(a, b, flags=self.fflags)
        if is_uint(e.a.dtype) or is_bool(e.a.dtype):
            return self.builder.udiv(a, b)
        return self.builder.sdiv(a, b)

    def e_Mod(self, e):
        a, b = self._operands(e)
        if is_float(e.a.dtype):
            return self.builder.frem(a, b, flags=self.fflags)
        if is_uint(e.a.dtype) or is_bool(e.a.dtype):
            return self.builder.urem(a, b)
        return self.builder.srem(a, b)

    def _nonneg_expr(self, e: E.PrimExpr) -> bool:
        """Conservatively: is ``e`` >= 0 for all values of the variables in scope?"""
        if isinstance(e, E.IntImm):
            return e.value >= 0
        if isinstance(e, E.Var):
            return id(e) in self.nonneg
        if isinstance(e, (E.Add, E.Mul, E.FloorDiv, E.Div, E.Min)):
            return self._nonneg_expr(e.a) and self._nonneg_expr(e.b)
        if isinstance(e, (E.FloorMod, E.Mod)):
            return self._nonneg_expr(e.b) if isinstance(e, E.FloorMod) else \
                self._nonneg_expr(e.a) and self._nonneg_expr(e.b)
        if isinstance(e, E.Max):
            return self._nonneg_expr(e.a) or self._nonneg_expr(e.b)
        if isinstance(e, E.Cast) and is_int(e.dtype) and is_int(e.value.dtype):
            return bits_of(e.dtype) >= bits_of(e.value.dtype) and self._nonneg_expr(e.value)
        if isinstance(e, E.Ramp):
            return self._nonneg_expr(e.base) and self._nonneg_expr(e.stride)
        if isinstance(e, E.Broadcast):
            return self._nonneg_expr(e.value)
        return False

    def _floor(self, e, want_div: bool):
        b = self.builder
        dt = e.a.dtype
        if is_float(dt):
            a, d = self._operands(e)
            q = b.fdiv(a, d, flags=self.fflags)
            fl = b.call(self.intrinsic("floor", q.type, 1), [q])
            if want_div:
                return fl
            return b.fsub(a, b.fmul(fl, d, flags=self.fflags), flags=self.fflags)
        if is_uint(dt) or is_bool(dt):
            a, d = self._operands(e)
            return b.udiv(a, d) if want_div else b.urem(a, d)
        c = E.as_const_int(e.b) if not isinstance(e.b, E.Broadcast) else E.as_const_int(e.b.value)
        a, d = self._operands(e)
        if c is not None and c > 0 and (c & (c - 1)) == 0:
            k = c.bit_length() - 1
            if want_div:
                return b.ashr(a, self.const_like(dt, k)) if k else a
            return b.and_(a, self.const_like(dt, c - 1))
        if c is not None and c > 0 and self._nonneg_expr(e.a):
            return b.sdiv(a, d) if want_div else b.srem(a, d)
        # general floor semantics
        zero = self.const_like(dt, 0)
        q = b.sdiv(a, d)
        r = b.srem(a, d)
        r_nz = b.icmp_signed("!=", r, zero)
        sign_diff = b.xor(b.icmp_signed("<", r, zero), b.icmp_signed("<", d, zero))
        adjust = b.and_(r_nz, sign_diff)
        if want_div:
            return b.sub(q, b.zext(adjust, q.type))
        return b.select(adjust, b.add(r, d), r)

    def e_FloorDiv(self, e):
        return self._floor(e, True)

    def e_FloorMod(self, e):
        return self._floor(e, False)

    def _minmax(self, e, is_min: bool):
        a, b_ = self._operands(e)
        b = self.builder
        dt = e.a.dtype
        if is_float(dt):
            c = b.fcmp_ordered("<" if is_min else ">", a, b_, flags=self.fflags)
        elif is_uint(dt) or is_bool(dt):
            c = b.icmp_unsigned("<" if is_min else ">", a, b_)
        else:
            c = b.icmp_signed("<" if is_min else ">", a, b_)
        return b.select(c, a, b_)

    def e_Min(self, e):
        return self._minmax(e, True)

    def e_Max(self, e):
        return self._minmax(e, False)

    def _cmp(self, e, op: str):
        a, b_ = self._operands(e)
        b = self.builder
        dt = e.a.dtype
        if is_float(dt):
            if op == "!=":
                return b.fcmp_unordered(op, a, b_, flags=self.fflags)
            return b.fcmp_ordered(op, a, b_, flags=self.fflags)
        if is_uint(dt) or is_bool(dt):
            return b.icmp_unsigned(op, a, b_)
        if element_of(dt) == "handle":
            return b.icmp_unsigned(op, a, b_)
        return b.icmp_signed(op, a, b_)

    def e_EQ(self, e): return self._cmp(e, "==")
    def e_NE(self, e): return self._cmp(e, "!=")
    def e_LT(self, e): return self._cmp(e, "<")
    def e_LE(self, e): return self._cmp(e, "<=")
    def e_GT(self, e): return self._cmp(e, ">")
    def e_GE(self, e): return self._cmp(e, ">=")

    def e_And(self, e):
        a, b_ = self.match(self.as_i1v(e.a), self.as_i1v(e.b))
        return self.builder.and_(a, b_)

    def e_Or(self, e):
        a, b_ = self.match(self.as_i1v(e.a), self.as_i1v(e.b))
        return self.builder.or_(a, b_)

    def as_i1v(self, x: E.PrimExpr) -> ir.Value:
        v = self.expr(x)
        if is_bool(x.dtype):
            return v
        return self.convert(v, x.dtype, "bool" if lanes_of(x.dtype) == 1
                            else f"boolx{lanes_of(x.dtype)}")

    def e_Not(self, e):
        v = self.as_i1v(e.a)
        return self.builder.not_(v)

    def e_Select(self, e):
        c = self.as_i1v(e.condition)
        t, f = self.match(self.expr(e.true_value), self.expr(e.false_value))
        if isinstance(t.type, ir.VectorType) and not isinstance(c.type, ir.VectorType):
            pass  # scalar condition selects whole vectors
        elif isinstance(c.type, ir.VectorType) and not isinstance(t.type, ir.VectorType):
            t, f = self.splat(t, c.type.count), self.splat(f, c.type.count)
        return self.builder.select(c, t, f)

    # calls ----------------------------------------------------------------------
    def e_Call(self, e: E.Call):
        op = e.op
        if op == "address_of":
            return self._address_of(e)
        if op == "call_extern":
            return self._call_extern(e)
        if op not in E.INTRINSICS:
            raise self.err(f"unsupported intrinsic {op!r}")
        if len(e.args) != E.INTRINSICS[op]:
            raise self.err(f"intrinsic {op!r} takes {E.INTRINSICS[op]} arguments, "
                           f"got {len(e.args)}")
        b = self.builder
        if op == "likely":
            return self.expr(e.args[0])
        if op == "if_then_else":
            return self._if_then_else(e)
        args = [self.expr(a) for a in e.args]
        lanes = max([a.type.count if isinstance(a.type, ir.VectorType) else 1 for a in args])
        if lanes > 1:
            args = [self.splat(a, lanes) for a in args]
        dt = e.args[0].dtype
        if op in ("abs", "fabs") and not is_float(dt):
            x = args[0]
            if is_uint(dt) or is_bool(dt):
                return x
            neg = b.sub(self.const_like(dt, 0) if lanes == 1 else ir.Constant(x.type, None), x)
            return b.select(b.icmp_signed("<", x, ir.Constant(x.type, None)), neg, x)
        if not is_float(dt):
            # integer argument to a float function: compute in float64 then cast back
            ft = "float64" if lanes == 1 else f"float64x{lanes}"
            args = [self.convert(a, x.dtype, ft) for a, x in zip(args, e.args)]
            val = self._float_call(op, args, ft)
            return self.convert(val, ft, e.dtype)
        val = self._float_call(op, args, dt if lanes == 1 else f"{element_of(dt)}x{lanes}")
        if element_of(e.dtype) != element_of(dt):
            val = self.convert(val, dt, e.dtype)
        return val

    _LLVM_UNARY = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2",
                   "sqrt": "sqrt", "fabs": "fabs", "abs": "fabs", "floor": "floor",
                   "ceil": "ceil", "round": "roundeven", "trunc": "trunc",
                   "sin": "sin", "cos": "cos"}
    _LIBM = {"tanh": ("tanhf", "tanh"), "erf": ("erff", "erf")}

    def _float_call(self, op: str, args: list, dtype: str) -> ir.Value:
        b = self.builder
        ty = args[0].type
        fm = self.fflags
        if op in self._LLVM_UNARY:
            return b.call(self.intrinsic(self._LLVM_UNARY[op], ty, 1), args, fastmath=fm)
        if op == "pow":
            return b.call(self.intrinsic("pow", ty, 2), args, fastmath=fm)
        if op == "fma":
            return b.call(self.intrinsic("fma", ty, 3), args, fastmath=fm)
        if op == "rsqrt":
            s = b.call(self.intrinsic("sqrt", ty, 1), args, fastmath=fm)
            return b.fdiv(self.const_like(dtype, 1.0), s, flags=fm)
        if op == "sigmoid":
            x = args[0]
            neg = b.fneg(x, flags=fm)
            ex = b.call(self.intrinsic("exp", ty, 1), [neg], fastmath=fm)
            one = self.const_like(dtype, 1.0)
            return b.fdiv(one, b.fadd(one, ex, flags=fm), flags=fm)
        if op in self._LIBM:
            base = element_of(dtype)
            if base == "float16":
                wide = "float32" if lanes_of(dtype) == 1 else f"float32x{lanes_of(dtype)}"
                r = self._float_call(op, [self.convert(a, dtype, wide) for a in args], wide)
                return self.convert(r, wide, dtype)
            sym = self._LIBM[op][0 if base == "float32" else 1]
            st = scalar_type(base)
            fn = self.declare(sym, st, [st])
            if isinstance(ty, ir.VectorType):
                out = ir.Constant(ty, ir.Undefined)
                for lane in range(ty.count):
                    x = b.extract_element(args[0], ir.Constant(I32, lane))
                    out = b.insert_element(out, b.call(fn, [x]), ir.Constant(I32, lane))
                return out
            return b.call(fn, args)
        raise self.err(f"unsupported intrinsic {op!r}")

    def _if_then_else(self, e: E.Call) -> ir.Value:
        cond_e, t_e, f_e = e.args
        if lanes_of(cond_e.dtype) > 1:
            # each branch is evaluated only for its lanes (masked loads), then blended
            c = self.as_i1v(cond_e)
            b = self.builder
            vals = []
            for m, branch in ((self._and_mask(c), t_e), (self._and_mask(b.not_(c)), f_e)):
                ty = llvm_type(branch.dtype) if lanes_of(branch.dtype) > 1 else \
                    ir.VectorType(scalar_type(branch.dtype), c.type.count)
                before = b.block
                result = {}

                def emit(branch=branch, result=result):
                    v = self.expr(branch)
                    if not isinstance(v.type, ir.VectorType):
                        v = self.splat(v, c.type.count)
                    result["v"], result["block"] = v, b.block
                self._under_mask(m, emit)
                phi = b.phi(ty)
                phi.add_incoming(result["v"], result["block"])
                phi.add_incoming(ir.Constant(ty, None), before)
                vals.append(phi)
            return b.select(c, vals[0], vals[1])
        c = self.as_i1(self.expr(cond_e), cond_e.dtype)
        b = self.builder
        with b.if_else(c) as (then, otherwise):
            with then:
                tv = self.expr(t_e)
                tb = b.block
            with otherwise:
                fv = self.expr(f_e)
                fb = b.block
        tv, fv = self.match(tv, fv)
        phi = b.phi(tv.type)
        phi.add_incoming(tv, tb)
        phi.add_incoming(fv, fb)
        return phi

    def _address_of(self, e: E.Call) -> ir.Value:
        if len(e.args) != 1 or not isinstance(e.args[0], E.BufferLoad):
            raise self.err("address_of takes one argument, a BufferLoad such as A[i]")
        ld = e.args[0]
        if len(ld.indices) != 1 or lanes_of(ld.indices[0].dtype) != 1:
            raise self.err("address_of needs a flattened scalar BufferLoad (lower first)")
        p = self._elem_ptr(ld.buffer, self.index(ld.indices[0]))
        v = self.builder.ptrtoint(p, I64)
        return self.convert(v, "int64", e.dtype) if e.dtype != "int64" else v

    def _call_extern(self, e: E.Call) -> ir.Value:
        if not e.args or not isinstance(e.args[0], E.StringImm):
            raise self.err("call_extern needs the symbol name as its first argument "
                           "(a StringImm)")
        sym = e.args[0].value
        args = [self.expr(a) for a in e.args[1:]]
        for a, x in zip(args, e.args[1:]):
            if isinstance(a.type, ir.VectorType):
                raise self.err(f"call_extern {sym!r} got a vector argument")
        ret = llvm_type(e.dtype)
        fn = self.declare(sym, ret, [a.type for a in args])
        return self.builder.call(fn, args)


def _type_suffix(t: ir.Type) -> str:
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.HalfType):
        return "f16"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    raise BuildError(f"no LLVM intrinsic suffix for type {t}")


def _generate(funcs: list, module_name: str, fast_math: bool,
              heap_layout: tuple[int, int, int] | None, split_parallel: bool) -> CodeGen:
    cg = CodeGen(module_name, fast_math=fast_math, heap_layout=heap_layout,
                 split_parallel=split_parallel)
    for name, f in funcs:
        cg.add_function(f, name)
    return cg


def codegen(funcs: list, module_name: str = "engine", fast_math: bool = False,
            heap_layout: tuple[int, int, int] | None = None):
    """Generate one llvmlite module for lowered PrimFuncs ``[(name, func), ...]``.

    ``heap_layout=(alignment, stagger, first)`` places the k-th heap buffer
    ``(first + k) * stagger`` bytes past an ``alignment`` boundary (default: 64-byte
    aligned, wherever malloc puts it).
    Returns ``(llvmlite.ir.Module, {name: FuncInfo})``.
    """
    cg = _generate(funcs, module_name, fast_math, heap_layout, split_parallel=False)
    return cg.module, cg.infos


def codegen_units(funcs: list, module_name: str = "engine", fast_math: bool = False,
                  heap_layout: tuple[int, int, int] | None = None):
    """Like :func:`codegen`, with each parallel loop body in a module of its own.

    Returns ``([main module, body modules...], {name: FuncInfo})``. The main module
    declares each body's task function (``<symbol>_par<k>_task``), which its body module
    defines; linked together in one JIT they are the program :func:`codegen` gives as
    one module. :func:`engine.build` compiles the modules side by side
    (:func:`engine.codegen.units.compile_units`).
    """
    cg = _generate(funcs, module_name, fast_math, heap_layout, split_parallel=True)
    return [cg.module] + cg.units, cg.infos

"""The compiled cache simulator: LLVM IR (built with llvmlite's IRBuilder) for the lookup.

:func:`build_sim_module` emits an ``llvmlite.ir.Module`` defining

``i32 __cachesim_access(i64 address, i64 nbytes, i32 buffer_id, i32 slot)``
    one access (load or store — the model does not distinguish them) of ``nbytes`` bytes;
    every cache line it touches is looked up in L1, then on a miss in L2, ... and installed
    as most-recently-used in every level where it missed (write-allocate, true LRU,
    cachegrind's rules; see :mod:`engine.cache.reference` for the same rules in Python).
    Counters are kept per ``(buffer_id, slot)``; a slot is a block of the program (the
    instrumentation also uses one spare slot for warm-up accesses that are simulated but
    not counted). The common case — the line is the most recently used one of its L1 set —
    is a few instructions and is marked ``alwaysinline`` so it is inlined into the
    instrumented kernel; the rest is a call to ``__cachesim_line``.

``i32 __cachesim_base(i32 buffer_id, i64 address)``
    records the first address seen for a buffer (reported so that other tools, e.g. the
    cachegrind comparison, can lay data out identically).

``void __cachesim_stream(i64* addresses, i64* nbytes, i32* buffer_ids, i64 n)``
    runs a whole recorded access stream (used by tests and the speed benchmark).

All simulator state lives in numpy arrays owned by a :class:`SimState`; their addresses are
baked into the generated code as constants, so the state must outlive every function
compiled against it (``SimState`` objects are kept alive by whoever holds the compiled code).
"""
from __future__ import annotations

import ctypes
import itertools
from typing import Sequence

import numpy as np
from llvmlite import ir

from .geometry import CacheLevel, Geometry, resolve

I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
I64P = I64.as_pointer()
I32P = I32.as_pointer()

ACCESS_SYMBOL = "__cachesim_access"
BASE_SYMBOL = "__cachesim_base"
LINE_SYMBOL = "__cachesim_line"
STREAM_SYMBOL = "__cachesim_stream"

_uid = itertools.count()


def _padded_ways(ways: int) -> int:
    p = 1
    while p < ways:
        p *= 2
    return p


class SimState:
    """Numpy-backed state of one simulated hierarchy.

    * ``tags[k]``: level ``k`` as ``sets`` rows of ``P`` slots (``P`` = ways rounded up to a
      power of two, so that a set is searched with one vector compare); each row holds the
      set's line numbers ordered most recently used first (``-1`` = empty way). Slots at
      and beyond ``ways`` are scratch (masked out of every compare): a miss shifts the row
      by one slot, which moves the least recently used line out of the set.
    * ``counters[0, b, s]``: lines accessed in L1 by buffer ``b`` from slot ``s``;
      ``counters[1 + k, b, s]``: misses in level ``k``. Accesses of level ``k+1`` are the
      misses of level ``k``.
    * ``bases[b]``: first address recorded for buffer ``b`` (``-1`` if none).
    """

    def __init__(self, levels: Sequence[CacheLevel], nbuf: int, nslot: int,
                 tags: list | None = None):
        self.levels = tuple(levels)
        self.nbuf = max(1, int(nbuf))
        self.nslot = max(1, int(nslot))
        self.padded = [_padded_ways(lv.ways) for lv in self.levels]
        # ``tags``: the rows of a :class:`ResidentLookup` (its compiled lookup reads them)
        self.tags = tags if tags is not None else [
            np.empty(lv.sets * p, dtype=np.int64) for lv, p in zip(self.levels, self.padded)]
        self.counters = np.zeros((1 + len(self.levels), self.nbuf, self.nslot), dtype=np.int64)
        self.bases = np.full(self.nbuf, -1, dtype=np.int64)
        self.reset()

    def reset(self) -> None:
        for t in self.tags:
            t.fill(-1)
        self.counters.fill(0)
        self.bases.fill(-1)

    def accesses(self, level: int) -> np.ndarray:
        """``(nbuf, nslot)`` accesses of level ``level`` (0 = L1)."""
        return self.counters[level]

    def misses(self, level: int) -> np.ndarray:
        return self.counters[level + 1]


def _ptr(arr: np.ndarray, ty=I64P):
    return ir.Constant(I64, arr.ctypes.data).inttoptr(ty)


def _counter_ptr(b: ir.IRBuilder, state: SimState, row: int, idx):
    base = _ptr(state.counters)
    off = b.add(ir.Constant(I64, row * state.nbuf * state.nslot), idx)
    return b.gep(base, [off], inbounds=True)


def _incr(b: ir.IRBuilder, ptr) -> None:
    b.store(b.add(b.load(ptr), ir.Constant(I64, 1)), ptr)


def _intrinsic(module: ir.Module, name: str, ret, args) -> ir.Function:
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name)
    return fn


def _splat(b: ir.IRBuilder, v, p: int):
    vt = ir.VectorType(v.type, p)
    one = b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(I32, 0))
    return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined),
                            ir.Constant(ir.VectorType(I32, p), [0] * p))


def _emit_line_fn(module: ir.Module, state: SimState, name: str,
                  inline: bool = False) -> ir.Function:
    """``void line(i64 line_no, i64 idx)``: full lookup of one line through all levels,
    counting in ``state``'s counters at ``idx`` (see :func:`_emit_lookup`)."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64, I64]), name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline" if inline else "noinline")
    fn.attributes.add("nounwind")
    line_no, idx = fn.args
    _emit_lookup(module, fn, state.levels, state.padded, state.tags, line_no,
                 lambda b, row: _counter_ptr(b, state, row, idx))
    return fn


def _emit_lookup(module: ir.Module, fn: ir.Function, levels, padded, tags, line_no,
                 counter) -> None:
    """The body of a full lookup of ``line_no`` through all levels (``counter(b, row)``: the
    address of the counter of row ``row``: 0 accesses, ``k + 1`` misses of level ``k``).

    Per level: load the set's row (MRU first), compare all ways at once; on a hit in
    way ``p`` the row's slots ``0..p-1`` move one slot down and the line goes to slot 0; on
    a miss the whole row moves one slot down (the LRU line leaves the set), the line goes
    to slot 0 and the next level is consulted."""
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    _incr(b, counter(b, 0))
    done = fn.append_basic_block("done")
    level_blocks = [fn.append_basic_block(f"L{k}") for k in range(len(levels))]
    b.branch(level_blocks[0])
    cttz = _intrinsic(module, "llvm.cttz.i64", I64, [I64, I1])
    for k, lv in enumerate(levels):
        p = padded[k]
        vt = ir.VectorType(I64, p)
        b = ir.IRBuilder(level_blocks[k])
        off = b.mul(b.and_(line_no, ir.Constant(I64, lv.sets - 1)), ir.Constant(I64, p))
        row_p = b.bitcast(b.gep(_ptr(tags[k]), [off], inbounds=True), vt.as_pointer())
        row = b.load(row_p, align=8)
        eq = b.icmp_signed("==", row, _splat(b, line_no, p))
        if lv.ways < p:
            eq = b.and_(eq, ir.Constant(ir.VectorType(I1, p), [int(i < lv.ways) for i in range(p)]))
        bits = b.bitcast(eq, ir.IntType(p))
        bits64 = b.zext(bits, I64) if p < 64 else bits
        hit_blk = fn.append_basic_block(f"L{k}.hit")
        move_blk = fn.append_basic_block(f"L{k}.move")
        miss_blk = fn.append_basic_block(f"L{k}.miss")
        b.cbranch(b.icmp_unsigned("!=", bits64, ir.Constant(I64, 0)), hit_blk, miss_blk)
        # row shifted down one slot (slot 0 is then overwritten with the line)
        shift_mask = ir.Constant(ir.VectorType(I32, p), [0] + list(range(p - 1)))
        bh = ir.IRBuilder(hit_blk)
        way = bh.call(cttz, [bits64, ir.Constant(I1, 1)])
        bh.cbranch(bh.icmp_unsigned("==", way, ir.Constant(I64, 0)), done, move_blk)
        bmv = ir.IRBuilder(move_blk)
        shifted = bmv.shuffle_vector(row, ir.Constant(vt, ir.Undefined), shift_mask)
        lanes = ir.Constant(vt, list(range(p)))
        upto = bmv.icmp_unsigned("<=", lanes, _splat(bmv, way, p))
        moved = bmv.select(upto, shifted, row)
        bmv.store(bmv.insert_element(moved, line_no, ir.Constant(I32, 0)), row_p, align=8)
        bmv.branch(done)
        bm = ir.IRBuilder(miss_blk)
        _incr(bm, counter(bm, k + 1))
        shifted = bm.shuffle_vector(row, ir.Constant(vt, ir.Undefined), shift_mask)
        bm.store(bm.insert_element(shifted, line_no, ir.Constant(I32, 0)), row_p, align=8)
        bm.branch(level_blocks[k + 1] if k + 1 < len(levels) else done)
    ir.IRBuilder(done).ret_void()


class ResidentLookup:
    """The full lookup of one cache geometry, compiled once per process and kept.

    Its LRU rows (``tags``) live as long as the process; the compiled function,
    ``void <symbol>(i64 line_no, i64* counter, i64 stride)`` (counts accesses at
    ``counter[0]`` and level ``k``'s misses at ``counter[(k + 1) * stride]``), is known to
    every later JIT by its symbol (``llvm.add_symbol``). A kernel instrumented by
    :func:`build_sim_module` with ``resident=`` then compiles only its own code and the
    small inlined fast path, not the lookup (whose wide vector shuffles took most of an
    instrumented build's LLVM time). One simulation at a time uses the rows: hold
    :attr:`lock` from :meth:`reset` until the run has ended."""

    def __init__(self, levels: Sequence[CacheLevel]):
        import threading

        import llvmlite.binding as llvm
        self.levels = tuple(levels)
        self.padded = [_padded_ways(lv.ways) for lv in self.levels]
        self.tags = [np.full(lv.sets * p, -1, dtype=np.int64)
                     for lv, p in zip(self.levels, self.padded)]
        self.lock = threading.RLock()
        self.symbol = f"__cachesim_resident_line_{next(_uid)}"
        module = ir.Module(name=f"cachesim_resident{next(_uid)}")
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64, I64P, I64]), self.symbol)
        fn.attributes.add("nounwind")
        line_no, ctr, stride = fn.args
        _emit_lookup(module, fn, self.levels, self.padded, self.tags, line_no,
                     lambda b, row: ctr if row == 0 else b.gep(
                         ctr, [b.mul(stride, ir.Constant(I64, row))], inbounds=True))
        self._ee = compile_module(module)
        self.address = self._ee.get_function_address(self.symbol)
        if not self.address:
            raise RuntimeError("internal error: the cache lookup was not compiled")
        llvm.add_symbol(self.symbol, self.address)

    def reset(self) -> None:
        for t in self.tags:
            t.fill(-1)


_RESIDENT: dict = {}


def resident_lookup(levels: Sequence[CacheLevel]) -> ResidentLookup:
    """The process's :class:`ResidentLookup` for ``levels`` (compiled on first use)."""
    key = tuple((lv.name, lv.size, lv.ways, lv.line) for lv in levels)
    got = _RESIDENT.get(key)
    if got is None:
        got = _RESIDENT.setdefault(key, ResidentLookup(levels))
    return got


def _emit_access_fn(module: ir.Module, state: SimState, line_fn: ir.Function,
                    name: str, resident: bool = False) -> ir.Function:
    """The access function (inlined into the kernel): the MRU fast path, else ``line_fn``
    — ``line(line_no, idx)`` of this module, or (``resident``) the resident lookup
    ``line(line_no, &counters[idx], nbuf * nslot)``."""
    fn = ir.Function(module, ir.FunctionType(I32, [I64, I64, I32, I32]), name)
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    addr, nbytes, buf, slot = fn.args
    l1 = state.levels[0]
    lb = ir.Constant(I64, l1.line_bits)
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    idx = b.add(b.mul(b.zext(buf, I64), ir.Constant(I64, state.nslot)), b.zext(slot, I64))
    first = b.lshr(addr, lb)
    last = b.lshr(b.sub(b.add(addr, nbytes), ir.Constant(I64, 1)), lb)
    one_line = fn.append_basic_block("one_line")
    mru_hit = fn.append_basic_block("mru_hit")
    slow = fn.append_basic_block("slow")
    multi = fn.append_basic_block("multi")
    ret = fn.append_basic_block("ret")
    b.cbranch(b.icmp_unsigned("==", first, last), one_line, multi)
    # fast path: the line is the most recently used one of its L1 set (slot 0): no update
    b = ir.IRBuilder(one_line)
    set_idx = b.and_(first, ir.Constant(I64, l1.sets - 1))
    mru = b.gep(_ptr(state.tags[0]), [b.mul(set_idx, ir.Constant(I64, state.padded[0]))],
                inbounds=True)
    b.cbranch(b.icmp_signed("==", b.load(mru), first), mru_hit, slow)
    b = ir.IRBuilder(mru_hit)
    _incr(b, _counter_ptr(b, state, 0, idx))
    b.branch(ret)
    stride = ir.Constant(I64, state.nbuf * state.nslot)

    def lookup(b, line_no):
        if resident:
            b.call(line_fn, [line_no, _counter_ptr(b, state, 0, idx), stride])
        else:
            b.call(line_fn, [line_no, idx])
    b = ir.IRBuilder(slow)
    lookup(b, first)
    b.branch(ret)
    # an access spanning several lines: one full lookup per line
    b = ir.IRBuilder(multi)
    cur = b.phi(I64, "cur")
    cur.add_incoming(first, entry)
    lookup(b, cur)
    nxt = b.add(cur, ir.Constant(I64, 1))
    cur.add_incoming(nxt, multi)
    b.cbranch(b.icmp_unsigned("<=", nxt, last), multi, ret)
    ir.IRBuilder(ret).ret(ir.Constant(I32, 0))
    return fn


def _emit_base_fn(module: ir.Module, state: SimState, name: str) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(I32, [I32, I64]), name)
    fn.attributes.add("nounwind")
    buf, addr = fn.args
    entry = fn.append_basic_block("entry")
    setb = fn.append_basic_block("set")
    ret = fn.append_basic_block("ret")
    b = ir.IRBuilder(entry)
    p = b.gep(_ptr(state.bases), [b.zext(buf, I64)], inbounds=True)
    b.cbranch(b.icmp_signed("==", b.load(p), ir.Constant(I64, -1)), setb, ret)
    b = ir.IRBuilder(setb)
    b.store(addr, p)
    b.branch(ret)
    ir.IRBuilder(ret).ret(ir.Constant(I32, 0))
    return fn


def _emit_stream_fn(module: ir.Module, access: ir.Function, name: str) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64P, I64P, I32P, I64]), name)
    addrs, sizes, bufs, n = fn.args
    entry = fn.append_basic_block("entry")
    loop = fn.append_basic_block("loop")
    done = fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(I64, 0)), loop, done)
    b = ir.IRBuilder(loop)
    i = b.phi(I64, "i")
    i.add_incoming(ir.Constant(I64, 0), entry)
    a = b.load(b.gep(addrs, [i], inbounds=True))
    s = b.load(b.gep(sizes, [i], inbounds=True))
    k = b.load(b.gep(bufs, [i], inbounds=True))
    b.call(access, [a, s, k, ir.Constant(I32, 0)])
    i1 = b.add(i, ir.Constant(I64, 1))
    i.add_incoming(i1, loop)
    b.cbranch(b.icmp_signed("<", i1, n), loop, done)
    ir.IRBuilder(done).ret_void()
    return fn


def build_sim_module(state: SimState, *, access_symbol: str = ACCESS_SYMBOL,
                     base_symbol: str = BASE_SYMBOL, stream_symbol: str | None = None,
                     inline_lookup: bool = False,
                     resident: "ResidentLookup | None" = None) -> ir.Module:
    """An llvmlite module implementing the simulator over ``state`` (see module docstring).

    ``inline_lookup`` also marks the full lookup ``alwaysinline`` (faster for kernels with a
    few access sites: the counter addresses become constants; bigger code). ``resident``
    (whose ``tags`` ``state`` shares) calls that process-wide compiled lookup instead of
    compiling one into this module."""
    module = ir.Module(name=f"cachesim{next(_uid)}")
    if resident is not None:
        if state.tags is not resident.tags:
            raise ValueError("the state must use the resident lookup's rows (tags=)")
        line_fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64, I64P, I64]),
                              resident.symbol)
        line_fn.attributes.add("nounwind")
    else:
        line_fn = _emit_line_fn(module, state, f"{LINE_SYMBOL}{next(_uid)}", inline_lookup)
    access = _emit_access_fn(module, state, line_fn, access_symbol,
                             resident=resident is not None)
    _emit_base_fn(module, state, base_symbol)
    if stream_symbol:
        _emit_stream_fn(module, access, stream_symbol)
    return module


# --------------------------------------------------------------------------------------
# Standalone JIT for access streams (tests, speed benchmark). Kernels go through engine.build.
def _target_machine():
    """A fresh host TargetMachine. MCJIT takes ownership of the TargetMachine it is given
    (and frees it with the engine), so every engine needs its own."""
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return llvm, target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                              features=llvm.get_host_cpu_features().flatten(),
                                              opt=3, codemodel="jitdefault")


def compile_module(module: ir.Module):
    """Optimise (O3) and JIT-compile a standalone llvmlite module; returns the engine."""
    llvm, tm = _target_machine()
    mod = llvm.parse_assembly(str(module))
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    ee = llvm.create_mcjit_compiler(mod, tm)
    ee.finalize_object()
    return ee


class StreamSimulator:
    """Simulate recorded access streams with the compiled simulator.

    ``StreamSimulator(levels, nbuf=4)`` then ``run(addresses, nbytes, buffer_ids)``
    (numpy arrays; ``nbytes``/``buffer_ids`` may be scalars). State persists across calls
    until :meth:`reset`. ``accesses(k)`` / ``misses(k)`` give per-buffer totals of level ``k``.
    """

    def __init__(self, levels=None, nbuf: int = 1):
        self.geometry: Geometry = resolve(levels)
        self.state = SimState(self.geometry.levels, nbuf, 1)
        sym = f"__cachesim_stream_{next(_uid)}"
        self.module = build_sim_module(self.state, access_symbol=f"{ACCESS_SYMBOL}_{next(_uid)}",
                                       base_symbol=f"{BASE_SYMBOL}_{next(_uid)}",
                                       stream_symbol=sym)
        self._ee = compile_module(self.module)
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_int64)(self._ee.get_function_address(sym))

    def reset(self) -> None:
        self.state.reset()

    def run(self, addresses, nbytes=4, buffer_ids=0) -> None:
        a = np.ascontiguousarray(addresses, dtype=np.int64)
        n = a.shape[0]
        s = np.ascontiguousarray(np.broadcast_to(np.asarray(nbytes, dtype=np.int64), (n,)))
        k = np.ascontiguousarray(np.broadcast_to(np.asarray(buffer_ids, dtype=np.int32), (n,)))
        if n and (k.min() < 0 or k.max() >= self.state.nbuf):
            raise ValueError(f"buffer ids must be in 0..{self.state.nbuf - 1}")
        if n and s.min() < 1:
            raise ValueError("every access must be at least one byte")
        self._fn(a.ctypes.data, s.ctypes.data, k.ctypes.data, n)

    def accesses(self, level: int) -> np.ndarray:
        return self.state.counters[level, :, 0].copy()

    def misses(self, level: int) -> np.ndarray:
        return self.state.counters[level + 1, :, 0].copy()


# --------------------------------------------------------------------------------------
# Access recorder (for access-pattern pictures): same call interface as the simulator.
class RecorderState:
    """Numpy buffers receiving up to ``capacity`` access events ``(address, nbytes, buffer)``;
    ``count[0]`` is the number of events that occurred (it may exceed ``capacity``)."""

    def __init__(self, nbuf: int, capacity: int):
        self.nbuf = max(1, int(nbuf))
        self.capacity = max(1, int(capacity))
        self.addresses = np.zeros(self.capacity, dtype=np.int64)
        self.nbytes = np.zeros(self.capacity, dtype=np.int64)
        self.buffers = np.zeros(self.capacity, dtype=np.int32)
        self.count = np.zeros(1, dtype=np.int64)
        self.bases = np.full(self.nbuf, -1, dtype=np.int64)


def build_recorder_module(rec: RecorderState, *, access_symbol: str,
                          base_symbol: str) -> ir.Module:
    """An llvmlite module whose ``access_symbol`` appends the access to ``rec``."""
    module = ir.Module(name=f"cacherec{next(_uid)}")
    fn = ir.Function(module, ir.FunctionType(I32, [I64, I64, I32, I32]), access_symbol)
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    addr, nbytes, buf, _slot = fn.args
    entry = fn.append_basic_block("entry")
    store = fn.append_basic_block("store")
    ret = fn.append_basic_block("ret")
    b = ir.IRBuilder(entry)
    cnt_p = _ptr(rec.count)
    i = b.load(cnt_p)
    b.store(b.add(i, ir.Constant(I64, 1)), cnt_p)
    b.cbranch(b.icmp_signed("<", i, ir.Constant(I64, rec.capacity)), store, ret)
    b = ir.IRBuilder(store)
    b.store(addr, b.gep(_ptr(rec.addresses), [i], inbounds=True))
    b.store(nbytes, b.gep(_ptr(rec.nbytes), [i], inbounds=True))
    b.store(buf, b.gep(_ptr(rec.buffers, I32P), [i], inbounds=True))
    b.branch(ret)
    ir.IRBuilder(ret).ret(ir.Constant(I32, 0))
    shadow = SimState.__new__(SimState)
    shadow.bases = rec.bases
    _emit_base_fn(module, shadow, base_symbol)
    return module

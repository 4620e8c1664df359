"""An analytic performance model of a lowered GPU kernel on a named GPU (no GPU needed).

What the explorer shows as "modeled for H100 SXM (no GPU on this machine)": a kernel's
memory accesses analysed warp by warp, its traffic through DRAM, L2 and shared memory, its
occupancy, and a time per hardware pipe; the slowest pipe is the bottleneck.

Entry points: :func:`model_kernel` (one :class:`~engine.gpu.kernel.Kernel`) and
:func:`model_function` (a :class:`~engine.gpu.kernel.GpuFunction`: its kernels one after
the other). Both take the GPU as a :class:`~engine.gpu.specs.GPUSpec`, a short name
(``"h100-sxm"``) or a :class:`~engine.gpu.target.Target`.

**Access analysis** (:class:`AccessModel`, one per load or store site of a global or shared
buffer in the kernel's body; "local" buffers are registers and are not analysed). A warp is
32 consecutive threads of the block in CUDA's linear order (threadIdx.x fastest, then y,
then z); lanes past the block's last thread are inactive. The site's flat index is
evaluated for the warp's 32 lanes with numpy, the thread variables replaced by the lanes'
values and each enclosing serial loop's variable by a sample value: :data:`SAMPLES` samples,
the first with every loop at its minimum, block 0, warp 0, the second with every loop at
its last iteration, the others drawn from a seeded generator (a random block, warp and
iteration). A vector access (a ``Ramp`` index) touches ``lanes`` elements per thread. Per
sample, then averaged over the samples:

* global memory: ``sectors_per_request`` = the distinct 32-byte sectors the warp's bytes
  fall in (buffers start 256-byte aligned, as ``cudaMalloc`` gives);
  ``bytes_per_request`` = the distinct bytes asked for (a value several lanes read counts
  once); ``efficiency = bytes_per_request / (32 x sectors_per_request)``;
* shared memory: 32 banks of 4-byte words. A request is served in phases — the whole warp
  when each thread moves at most 4 bytes, 16 threads for 8 bytes, 8 for 16 (128 bytes per
  phase) — and a phase takes as many wavefronts as the largest number of *distinct* words
  falling in one bank (the same word read by several lanes is a broadcast: no conflict).
  ``conflict_ways`` = wavefronts / phases (1: conflict-free; 32: a 32-way conflict);
  ``wavefronts_per_request`` = the total;
* ``executions``: how many times one thread runs the site: the product of the enclosing
  loops' trip counts (a trip count that depends on other variables: its mean over the
  samples). A *load* is not repeated by a loop its index does not depend on when nothing
  under that loop stores to its buffer: the compiler keeps the value in a register (loop-
  invariant code motion and, in unrolled tiles, common subexpressions: what nvcc does with
  TVM's ``__restrict__`` pointers). A site under an ``if`` is counted as executed by every
  thread, every time (conservative: guards are not evaluated; ``guarded`` says so), both
  branches of an ``if``/``else`` alike.

An index the model cannot evaluate (it reads a buffer, or an unknown variable) is marked
``analysed=False`` and assumed scattered: one sector per element on every active lane, no
bank conflict.

**Traffic.** For ``W`` warps in the grid (blocks x warps per block), a global site moves
``sectors_per_request x 32 B x executions x W`` between the SMs and L2: the **L2 bytes**
are their sum (no L1 reuse is modelled). **DRAM bytes**, per buffer: its *footprint* (the
distinct bytes the whole grid may touch, from interval bounds of its indices; read and
written counted separately) is the floor. The excess of its L2 traffic over the floor is
served by L2 when the per-wave working set fits in L2; when it does not, a fraction
``1 - L2 size / working set`` of the excess comes from DRAM again. The working set: the
blocks of a wave are taken to advance through their loops in step, so it is what one block
touches in one iteration of each site's outermost loop (block 0, every thread, the inner
loops enumerated: distinct sectors x 32 B) x the blocks resident at once, capped by the
grid's footprint. The **shared wavefronts** are ``wavefronts_per_request x executions x W``
summed over shared sites.

**Occupancy** is CUDA's (:func:`engine.gpu.occupancy.occupancy`) from the threads per
block, the shared bytes per block and the registers per thread: ptxas's figure when given
(``registers_per_thread`` an int, a :class:`~engine.gpu.toolchain.AssemblyReport` or a
:class:`~engine.gpu.toolchain.KernelResources`), else an estimate: 32 plus the 4-byte words
of the kernel's "local" arrays (which live in registers), at most 255.

**Time**, per pipe, then ``time_s = max(pipes) + LAUNCH_OVERHEAD_S`` (3 us):

* ``compute``: FP32 instructions of the busiest SM (it runs ``ceil(blocks / SMs)`` blocks,
  each issuing ``warps x executions x instructions``) at ``fp32 cores per SM / 32`` warp
  instructions per clock. Instructions are the float operations of the body (vector ops
  count their lanes; ``a * b + c`` is one FMA: two FLOPs, one instruction; a math call is one
  instruction, one FLOP); FLOPs = their FLOPs x executions x threads in the grid. Integer
  and address arithmetic, and the load/store instructions' issue slots, are not counted;
* ``shared``: shared wavefronts of the busiest SM at one wavefront per clock;
* ``dram``, ``l2``: bytes / the sheet's bandwidth.

Latency hiding, kept simple: an SM keeps its pipes busy when each of its warp schedulers
(``warp_allocation_granularity`` of the sheet: 4, 2 on GP100) has :data:`WARPS_PER_SCHEDULER`
resident warps to choose from. With fewer — few blocks in the grid, or a low occupancy —
the per-SM pipes run at ``resident warps / (schedulers x 2)`` of their rate (the SM pipes
with the busiest SM's resident warps; DRAM and L2 with the mean over all SMs).

What the model ignores: L1 caching of global loads, instruction issue limits other than
FP32, dependent-latency chains, integer work, tensor cores, DRAM page effects, and the
difference between FP32 and other float types (every float op counts at FP32's rate).
It ranks schedules and names their bottleneck; its times are estimates, not measurements.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import bytes_of, is_float, lanes_of
from engine.ir.functor import children, collect_stmts, collect_vars

from .kernel import BLOCK_AXES, GRID_AXES, GpuFunction, Kernel, is_barrier
from .occupancy import Occupancy, occupancy
from .specs import GPUSpec, get_spec

#: samples (block, warp, loop iterations) each access is evaluated at
SAMPLES = 8
#: bytes per global-memory sector
SECTOR_BYTES = 32
#: shared memory banks and their width
BANKS = 32
BANK_BYTES = 4
#: bytes one shared-memory phase (wavefront without conflicts) serves
PHASE_BYTES = 128
#: a kernel launch's fixed cost, seconds
LAUNCH_OVERHEAD_S = 3e-6
#: registers assumed per thread without ptxas's figure (plus the kernel's local arrays)
DEFAULT_REGISTERS = 32
#: resident warps per warp scheduler that keep an SM's pipes busy
WARPS_PER_SCHEDULER = 2
#: the pipes, in the order they are reported
PIPES = ("compute", "dram", "l2", "shared")


class ModelError(ValueError):
    """The kernel cannot be modelled (a loop of unknown trip count, a size not given...)."""


class _Unknown(Exception):
    """An index the model cannot evaluate."""


# ------------------------------------------------------------------------------ results
@dataclass(frozen=True)
class AccessModel:
    """One load or store site of a global or shared buffer, for one warp request."""

    buffer: str
    kind: str                    # "load" | "store"
    scope: str                   # "global" | "shared"
    sectors_per_request: float   # global: distinct 32-byte sectors (0 for shared)
    bytes_per_request: float     # distinct bytes the warp asks for
    efficiency: float            # global: bytes asked / bytes moved (1.0 for shared)
    conflict_ways: float         # shared: wavefronts per phase (1 for global)
    executions: float            # per thread
    wavefronts_per_request: float = 0.0   # shared: total wavefronts of one request
    vector_lanes: int = 1        # elements per thread per request
    guarded: bool = False        # under an ``if``: counted as always executed
    analysed: bool = True        # False: the index could not be evaluated
    index: str = ""              # the flat index, as text

    def describe(self) -> str:
        where = f"{self.kind} {self.buffer}[{self.index}]" if self.index else \
            f"{self.kind} {self.buffer}"
        vec = f" x{self.vector_lanes}" if self.vector_lanes > 1 else ""
        if self.scope == "shared":
            what = (f"{self.conflict_ways:.3g}-way bank conflicts"
                    if self.conflict_ways > 1.0001 else "no bank conflict")
        else:
            what = (f"{self.sectors_per_request:.3g} sectors/request, "
                    f"{self.efficiency:.0%} efficient")
        notes = ("" if self.analysed else ", index not analysed (assumed scattered)") + \
            (", guarded (counted as executed)" if self.guarded else "")
        return (f"{self.scope} {where}{vec}: {what}, {self.executions:.6g} per thread"
                f"{notes}")


@dataclass(frozen=True)
class KernelModel:
    """The model of one kernel on one GPU. Bytes and wavefronts are totals over the grid;
    times in seconds."""

    kernel: str
    gpu: str                     # the sheet's display name
    accesses: tuple              # AccessModel
    dram_bytes: float
    l2_bytes: float
    shared_wavefronts: float
    flops: float
    fp32_instructions: float     # warp instructions over the grid
    occupancy: Occupancy
    registers_per_thread: int
    registers_from: str          # "ptxas" | "estimate"
    blocks: int
    threads_per_block: int
    waves: int
    latency_efficiency: float    # of the busiest SM's pipes, in (0, 1]
    time_s_per_pipe: dict        # pipe -> seconds
    bottleneck: str
    launch_s: float
    time_s: float
    notes: tuple = ()
    dram_bytes_per_buffer: dict = field(default_factory=dict)

    @property
    def gflops(self) -> float:
        return self.flops / self.time_s / 1e9 if self.time_s else 0.0

    def summary(self) -> list[str]:
        """Lines of text: the time and bottleneck, occupancy, traffic, each access."""
        us = self.time_s * 1e6
        pipes = ", ".join(f"{p} {self.time_s_per_pipe[p] * 1e6:.3g} us" for p in PIPES)
        lines = [
            f"{self.kernel}: modeled {us:.4g} us ({self.gflops:.4g} GFLOP/s) on {self.gpu}, "
            f"bound by {self.bottleneck}",
            f"  pipes: {pipes}; launch {self.launch_s * 1e6:.3g} us",
            f"  grid {self.blocks} blocks x {self.threads_per_block} threads, "
            f"{self.waves} wave(s); {self.occupancy.summary()}; "
            f"{self.registers_per_thread} registers/thread ({self.registers_from})",
            f"  DRAM {_bytes(self.dram_bytes)}, L2 {_bytes(self.l2_bytes)}, "
            f"shared {self.shared_wavefronts:.4g} wavefronts, {self.flops:.4g} FLOPs",
        ]
        lines += [f"  {a.describe()}" for a in self.accesses]
        lines += [f"  note: {n}" for n in self.notes]
        return lines


@dataclass(frozen=True)
class FunctionModel:
    """A GPU function's kernels modeled one after the other."""

    name: str
    gpu: str
    kernels: tuple               # KernelModel

    @property
    def time_s(self) -> float:
        return sum(k.time_s for k in self.kernels)

    @property
    def flops(self) -> float:
        return sum(k.flops for k in self.kernels)

    @property
    def dram_bytes(self) -> float:
        return sum(k.dram_bytes for k in self.kernels)

    @property
    def l2_bytes(self) -> float:
        return sum(k.l2_bytes for k in self.kernels)

    @property
    def shared_wavefronts(self) -> float:
        return sum(k.shared_wavefronts for k in self.kernels)

    @property
    def gflops(self) -> float:
        return self.flops / self.time_s / 1e9 if self.time_s else 0.0

    @property
    def bottleneck(self) -> str:
        """The bottleneck of the kernel that takes longest."""
        return max(self.kernels, key=lambda k: k.time_s).bottleneck if self.kernels else ""

    def summary(self) -> list[str]:
        lines = [f"{self.name}: modeled {self.time_s * 1e6:.4g} us ({self.gflops:.4g} GFLOP/s)"
                 f" on {self.gpu}, {len(self.kernels)} kernel(s)"]
        for k in self.kernels:
            lines += ["  " + line for line in k.summary()]
        return lines


def _bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.3g} B"


# --------------------------------------------------------------------- index evaluation
def _as3(v: Any) -> np.ndarray:
    a = np.asarray(v)
    if a.ndim < 3:
        a = a.reshape(a.shape + (1,) * (3 - a.ndim)) if a.ndim else a.reshape(1, 1, 1)
    return a


def _int_div(a, b, floor: bool):
    a, b = np.asarray(a), np.asarray(b)
    if np.any(b == 0):
        raise _Unknown("division by zero")
    if floor:
        return np.floor_divide(a, b)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


_BITWISE = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
            "bitwise_xor": np.bitwise_xor, "shift_left": np.left_shift,
            "shift_right": np.right_shift}


def _eval(e: Any, env: dict) -> np.ndarray:
    """The value of an index expression for every sample and lane: an array broadcastable
    to ``(samples, 32, vector lanes)``."""
    t = type(e)
    if t is E.IntImm:
        return _as3(np.int64(e.value))
    if t is E.Var:
        v = env.get(e)
        if v is None:
            raise _Unknown(f"unknown variable {e.name}")
        return v
    if t is E.Add:
        return _eval(e.a, env) + _eval(e.b, env)
    if t is E.Sub:
        return _eval(e.a, env) - _eval(e.b, env)
    if t is E.Mul:
        return _eval(e.a, env) * _eval(e.b, env)
    if t is E.FloorDiv:
        return _int_div(_eval(e.a, env), _eval(e.b, env), True)
    if t is E.FloorMod:
        a, b = _eval(e.a, env), _eval(e.b, env)
        return a - b * _int_div(a, b, True)
    if t is E.Div and not is_float(e.dtype):
        return _int_div(_eval(e.a, env), _eval(e.b, env), False)
    if t is E.Mod:
        a, b = _eval(e.a, env), _eval(e.b, env)
        return a - b * _int_div(a, b, False)
    if t is E.Min:
        return np.minimum(_eval(e.a, env), _eval(e.b, env))
    if t is E.Max:
        return np.maximum(_eval(e.a, env), _eval(e.b, env))
    if t in _CMP:
        return _CMP[t](_eval(e.a, env), _eval(e.b, env))
    if t is E.Not:
        return np.logical_not(_eval(e.a, env))
    if t is E.Select:
        return np.where(_eval(e.condition, env), _eval(e.true_value, env),
                        _eval(e.false_value, env))
    if t is E.Cast:
        v = _eval(e.value, env)
        if is_float(e.dtype):
            raise _Unknown("a float index")
        return np.asarray(np.trunc(v), dtype=np.int64) if v.dtype.kind == "f" else \
            np.asarray(v, dtype=np.int64)
    if t is E.Ramp:
        base, stride = _eval(e.base, env), _eval(e.stride, env)
        return base + stride * np.arange(e.lanes, dtype=np.int64).reshape(1, 1, -1)
    if t is E.Broadcast:
        v = _eval(e.value, env)
        return np.broadcast_to(v, v.shape[:2] + (e.lanes,))
    if t is E.Let:
        inner = dict(env)
        inner[e.var] = _eval(e.value, env)
        return _eval(e.body, inner)
    if t is E.Call and e.op in _BITWISE:
        return _BITWISE[e.op](*(_eval(a, env) for a in e.args))
    if t is E.Call and e.op == "bitwise_not" and len(e.args) == 1:
        return np.invert(_eval(e.args[0], env))
    raise _Unknown(f"cannot evaluate {t.__name__}")


_CMP = {E.EQ: np.equal, E.NE: np.not_equal, E.LT: np.less, E.LE: np.less_equal,
        E.GT: np.greater, E.GE: np.greater_equal, E.And: np.logical_and,
        E.Or: np.logical_or}


# ------------------------------------------------------------------------- warp metrics
def _global_metrics(addr: np.ndarray, active: np.ndarray, elem: int) -> tuple:
    """(sectors, distinct bytes) per sample of a warp's global request."""
    sectors, distinct = [], []
    for s in range(addr.shape[0]):
        a = addr[s][active[s]].ravel()
        if a.size == 0:
            sectors.append(0.0)
            distinct.append(0.0)
            continue
        u = np.unique(a)
        distinct.append(float(u.size * elem))
        first, last = u // SECTOR_BYTES, (u + elem - 1) // SECTOR_BYTES
        sectors.append(float(np.unique(np.concatenate([first, last])).size))
    return sectors, distinct


def _shared_metrics(addr: np.ndarray, active: np.ndarray, elem: int) -> tuple:
    """(wavefronts, phases, distinct bytes) per sample of a warp's shared request."""
    per_thread = elem * addr.shape[2]
    lanes_per_phase = 32 if per_thread <= BANK_BYTES else max(1, PHASE_BYTES // per_thread)
    words_per_elem = max(1, elem // BANK_BYTES)
    out = []
    for s in range(addr.shape[0]):
        wave = phases = 0
        distinct = set()
        for p0 in range(0, 32, lanes_per_phase):
            act = active[s, p0:p0 + lanes_per_phase]
            if not act.any():
                continue
            a = addr[s, p0:p0 + lanes_per_phase][act].ravel()
            words = (a // BANK_BYTES)[:, None] + np.arange(words_per_elem)[None, :]
            words = np.unique(words.ravel())
            distinct.update(np.unique(a).tolist())
            banks = np.bincount(words % BANKS, minlength=BANKS)
            wave += int(banks.max())
            phases += 1
        out.append((float(wave), float(phases), float(len(distinct) * elem)))
    return out


# ------------------------------------------------------------------------ the body walk
@dataclass
class _Site:
    buffer: Buffer
    kind: str
    scope: str
    index: Any
    lanes: int
    executions: float
    guarded: bool
    metrics: dict
    analysed: bool
    ranges: dict      # var -> (lo, hi) of every enclosing variable (for bounds)
    loops: tuple = ()  # the enclosing loops' variables, outermost first
    lets: dict = field(default_factory=dict)   # let variable -> its value


class _Walker:
    """Walks the kernel body once, carrying the samples' variable values and the trip
    counts, and records every access site and the float work."""

    def __init__(self, kernel: Kernel, sizes: dict, shared: set):
        self.kernel = kernel
        self.shared = shared
        self.sites: list[_Site] = []
        self.flops = 0.0           # per thread
        self.instructions = 0.0    # per thread
        self.local_words = 0
        self.notes: list[str] = []
        self.loop_counter = 0
        self.sizes = sizes
        # the enclosing loops: (var, trips per sample, buffers stored under the loop)
        self.loops: list = []
        self.lets: dict = {}        # let variable -> its value (an expression)
        env, ranges, self.active = self._threads(kernel, sizes)
        self.env0, self.ranges0 = env, ranges

    # the samples' thread indices -----------------------------------------------------
    def _threads(self, kernel: Kernel, sizes: dict):
        bx, by, bz = kernel.block
        threads = bx * by * bz
        warps = -(-threads // 32)
        gx, gy, gz = kernel.grid
        blocks = gx * gy * gz
        rng = np.random.default_rng(7)
        warp = np.zeros(SAMPLES, dtype=np.int64)
        block = np.zeros(SAMPLES, dtype=np.int64)
        if SAMPLES > 2:
            warp[2:] = rng.integers(0, warps, SAMPLES - 2)
            block[2:] = rng.integers(0, blocks, SAMPLES - 2)
        linear = warp[:, None] * 32 + np.arange(32)[None, :]
        active = linear < threads
        values = {
            "threadIdx.x": linear % bx, "threadIdx.y": (linear // bx) % by,
            "threadIdx.z": linear // (bx * by),
            "blockIdx.x": (block % gx)[:, None], "blockIdx.y": ((block // gx) % gy)[:, None],
            "blockIdx.z": (block // (gx * gy))[:, None]}
        extents = dict(zip(BLOCK_AXES, kernel.block)) | dict(zip(GRID_AXES, kernel.grid))
        env: dict = {}
        ranges: dict = {}
        for axis, var in kernel.thread_vars.items():
            if axis not in values:
                raise ModelError(f"unknown thread axis {axis!r} (expected one of "
                                 f"{', '.join(GRID_AXES + BLOCK_AXES)})")
            env[var] = _as3(values[axis].astype(np.int64))
            ranges[var] = (0, extents[axis] - 1)
        for p in kernel.scalar_params:
            value = sizes.get(p, sizes.get(getattr(p, "name", None)))
            if value is not None:
                env[p] = _as3(np.int64(value))
                ranges[p] = (int(value), int(value))
        return env, ranges, active

    # statements ------------------------------------------------------------------
    def walk(self, s: Any, env: dict, ranges: dict, trips: np.ndarray, guarded: bool):
        t = type(s)
        if t is S.SeqStmt:
            for x in s.seq:
                self.walk(x, env, ranges, trips, guarded)
        elif t is S.For:
            self._for(s, env, ranges, trips, guarded)
        elif t is S.BufferStore:
            self._exprs(s.value, env, ranges, trips, guarded)
            for i in s.indices:
                self._exprs(i, env, ranges, trips, guarded)
            self._site(s.buffer, "store", s.indices, s.value.dtype, env, ranges, trips,
                       guarded)
            self._float_work(s.value, trips)
        elif t is S.IfThenElse:
            self._exprs(s.condition, env, ranges, trips, guarded)
            self._float_work(s.condition, trips)
            self.walk(s.then_case, env, ranges, trips, True)
            if s.else_case is not None:
                self.walk(s.else_case, env, ranges, trips, True)
        elif t is S.LetStmt:
            self._exprs(s.value, env, ranges, trips, guarded)
            self._float_work(s.value, trips)
            inner = dict(env)
            try:
                inner[s.var] = _eval(s.value, env)
            except (_Unknown, TypeError, ValueError, OverflowError):
                pass
            self.lets[s.var] = s.value
            self.walk(s.body, inner, ranges, trips, guarded)
        elif t is S.Allocate:
            if s.buffer.scope.startswith("local"):
                n = 1
                for d in s.buffer.shape:
                    c = E.as_const_int(d)
                    n *= c if c is not None else 1
                self.local_words += -(-n * bytes_of(s.buffer.dtype) // 4)
            self.walk(s.body, env, ranges, trips, guarded)
        elif t is S.Evaluate:
            if not is_barrier(s):
                self._exprs(s.value, env, ranges, trips, guarded)
                self._float_work(s.value, trips)
        elif t in (S.Block, S.BlockRealize):
            raise ModelError("the kernel body still has blocks: model a lowered kernel")
        elif s is None:
            return
        else:
            raise ModelError(f"cannot model a {t.__name__} statement")

    def _for(self, s: S.For, env, ranges, trips, guarded):
        try:
            lo = _eval(s.min, env)
            ext = _eval(s.extent, env)
        except _Unknown as exc:
            raise ModelError(f"loop {s.loop_var.name}: its range cannot be evaluated "
                             f"({exc}); give the kernel's sizes") from None
        # one value per sample: the first active lane's
        lo = np.broadcast_to(lo, (SAMPLES, 32, 1))[:, 0, 0].astype(np.int64)
        ext = np.broadcast_to(ext, (SAMPLES, 32, 1))[:, 0, 0].astype(np.int64)
        ext_pos = np.maximum(ext, 0)
        self.loop_counter += 1
        frac = np.random.default_rng(self.loop_counter * 7919).random(SAMPLES)
        frac[0] = 0.0
        if SAMPLES > 1:
            frac[1] = 1.0
        values = lo + np.minimum(np.floor(frac * ext_pos).astype(np.int64),
                                 np.maximum(ext_pos - 1, 0))
        inner = dict(env)
        inner[s.loop_var] = _as3(values.reshape(SAMPLES, 1))
        inner_ranges = dict(ranges)
        lo_b = self._bounds(s.min, ranges)
        ext_b = self._bounds(s.extent, ranges)
        if lo_b is not None and ext_b is not None:
            inner_ranges[s.loop_var] = (lo_b[0], lo_b[1] + max(ext_b[1], 1) - 1)
        stored = {st.buffer for st in collect_stmts(s.body, S.BufferStore)}
        self.loops.append((s.loop_var, ext_pos.astype(np.float64), stored))
        try:
            self.walk(s.body, inner, inner_ranges, trips * ext_pos, guarded)
        finally:
            self.loops.pop()

    @staticmethod
    def _bounds(e, ranges):
        c = E.as_const_int(e)
        if c is not None:
            return c, c
        from engine.arith import bound_of
        try:
            lo, hi = bound_of(e, ranges)
        except Exception:   # an expression the bounds analysis does not take
            return None
        return None if lo is None or hi is None else (lo, hi)

    # expressions: loads inside them, float work ------------------------------------
    def _exprs(self, e, env, ranges, trips, guarded):
        """Record the buffer loads of an expression (children first, in order)."""
        stack = [e]
        while stack:
            x = stack.pop()
            t = type(x)
            if t is E.BufferLoad:
                for i in x.indices:
                    self._exprs(i, env, ranges, trips, guarded)
                self._site(x.buffer, "load", x.indices, x.dtype, env, ranges, trips,
                           guarded)
                continue
            if t is E.Let:
                self._exprs(x.value, env, ranges, trips, guarded)
                inner = dict(env)
                try:
                    inner[x.var] = _eval(x.value, env)
                except (_Unknown, TypeError, ValueError, OverflowError):
                    pass
                self._exprs(x.body, inner, ranges, trips, guarded)
                continue
            if isinstance(x, E.PrimExpr):
                stack.extend(reversed(list(children(x))))

    def _float_work(self, e, trips):
        flops, instr = _float_ops(e)
        if flops or instr:
            mean = float(np.mean(trips))
            self.flops += flops * mean
            self.instructions += instr * mean

    # one access site ----------------------------------------------------------------
    def _site(self, buf: Buffer, kind: str, indices, dtype: str, env, ranges, trips,
              guarded):
        scope = "shared" if (buf in self.shared or buf.scope.startswith("shared")) else (
            "local" if buf.scope.startswith("local") else "global")
        if scope == "local":
            return
        if len(indices) != 1:
            raise ModelError(f"{buf.name}: the model reads flat (1-D) buffers; got "
                             f"{len(indices)} indices")
        index = indices[0]
        elem = bytes_of(buf.dtype)
        lanes = lanes_of(dtype) // max(1, lanes_of(buf.dtype))
        analysed = True
        try:
            idx = _eval(index, env)
            idx = np.broadcast_to(idx, (SAMPLES, 32, max(idx.shape[2], 1)))
            addr = (idx + int(buf.elem_offset or 0)) * elem
        except (_Unknown, TypeError, ValueError, OverflowError):
            analysed = False
            # scattered: every element of every lane its own sector / bank
            addr = (np.arange(32 * lanes, dtype=np.int64).reshape(1, 32, lanes)
                    * (SECTOR_BYTES * BANKS))
            addr = np.broadcast_to(addr, (SAMPLES, 32, lanes))
        metrics: dict = {}
        if scope == "global":
            sectors, distinct = _global_metrics(addr, self.active, elem)
            metrics["sectors"] = float(np.mean(sectors))
            metrics["bytes"] = float(np.mean(distinct))
        else:
            if analysed:
                m = _shared_metrics(addr, self.active, elem)
            else:
                per_thread = elem * lanes
                ph = 1 if per_thread <= BANK_BYTES else -(-32 * per_thread // PHASE_BYTES)
                m = [(float(ph), float(ph), float(32 * per_thread))]
            metrics["wavefronts"] = float(np.mean([x[0] for x in m]))
            metrics["phases"] = float(np.mean([x[1] for x in m]))
            metrics["bytes"] = float(np.mean([x[2] for x in m]))
        if kind == "load":
            trips = self._load_trips(buf, index)
        self.sites.append(_Site(buf, kind, scope, index, lanes, float(np.mean(trips)),
                                guarded, metrics, analysed, dict(ranges),
                                tuple(v for v, _, _ in self.loops), dict(self.lets)))

    def _load_trips(self, buf: Buffer, index) -> np.ndarray:
        """Trips of a load: a loop the index does not depend on, and under which nothing
        stores the buffer, does not repeat it (the compiler keeps the value in a register)."""
        deps = self._deps(index)
        trips = np.ones(SAMPLES, dtype=np.float64)
        for var, ext, stored in self.loops:
            if var in deps or buf in stored:
                trips = trips * ext
        return trips

    def _deps(self, e) -> set:
        out: set = set()
        todo = list(collect_vars(e))
        while todo:
            v = todo.pop()
            if v in out:
                continue
            out.add(v)
            if v in self.lets:
                todo.extend(collect_vars(self.lets[v]))
        return out


def _float_ops(e) -> tuple[float, float]:
    """(FLOPs, FP32 instructions) of one evaluation of an expression: float Add/Sub/Mul/
    Div/Min/Max and math calls; ``a * b + c`` (or ``c + a * b``, ``a * b - c``) is one FMA."""
    flops = instr = 0.0
    stack = [e]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is E.BufferLoad:
            stack.extend(x.indices)
            continue
        if isinstance(x, E.PrimExpr) and is_float(getattr(x, "dtype", "int32")):
            lanes = lanes_of(x.dtype)
            if t in (E.Add, E.Sub) and (type(x.a) is E.Mul or type(x.b) is E.Mul):
                mul = x.a if type(x.a) is E.Mul else x.b
                other = x.b if mul is x.a else x.a
                flops += 2 * lanes
                instr += lanes
                stack.extend((mul.a, mul.b, other))
                continue
            if t in (E.Add, E.Sub, E.Mul, E.Div, E.Min, E.Max, E.FloorDiv, E.FloorMod) or (
                    t is E.Call):
                flops += lanes
                instr += lanes
        if isinstance(x, E.PrimExpr):
            stack.extend(children(x))
    return flops, instr


# ------------------------------------------------------------------------------ traffic
def _union_length(intervals: list) -> int:
    total, end = 0, None
    for lo, hi in sorted(intervals):
        if end is None or lo > end:
            total += hi - lo + 1
            end = hi
        elif hi > end:
            total += hi - end
            end = hi
    return total


def _site_interval(site: _Site, ranges: dict):
    """Inclusive element interval a site may touch over ``ranges``, clipped to its buffer."""
    index = site.index
    span = 0
    if type(index) is E.Ramp:
        stride = E.as_const_int(index.stride)
        if stride is None:
            return None
        span = stride * (index.lanes - 1)
        index = index.base
    if lanes_of(index.dtype) != 1:
        return None
    b = _Walker._bounds(index, ranges)
    if b is None:
        return None
    lo, hi = min(b[0], b[0] + span), max(b[1], b[1] + span)
    size = 1
    for d in site.buffer.shape:
        c = E.as_const_int(d)
        if c is None:
            return lo, hi
        size *= c
    lo, hi = max(lo, 0), min(hi, size - 1)
    return (lo, hi) if lo <= hi else None


def _grid_footprints(sites: list) -> dict:
    """Distinct bytes the whole grid may touch per (buffer, kind): the union of the sites'
    index intervals (interval bounds over every variable's range); a site without bounds
    counts its buffer whole."""
    out: dict = {}
    for site in sites:
        if site.scope != "global":
            continue
        iv = _site_interval(site, site.ranges)
        if iv is None:
            iv = (0, _buffer_elements(site.buffer) - 1)
        out.setdefault((site.buffer, site.kind), []).append(iv)
    return {k: _union_length(v) * bytes_of(k[0].dtype) for k, v in out.items()}


#: the most (thread, iteration) points enumerated for one site's per-block footprint
ENUMERATION_LIMIT = 1 << 18


def _block_sectors(site: _Site, kernel: Kernel, scalars: dict):
    """The sectors one block touches at a site in one iteration of the site's outermost
    loop (block 0, all its threads, the inner loops over their whole ranges), as an array
    of sector numbers; None when it cannot be enumerated. When the points exceed
    :data:`ENUMERATION_LIMIT`, more outer loops are held at their first iteration."""
    bx, by, bz = kernel.block
    linear = np.arange(bx * by * bz, dtype=np.int64)
    thread_values = {"threadIdx.x": linear % bx, "threadIdx.y": (linear // bx) % by,
                     "threadIdx.z": linear // (bx * by)}
    free = []
    for v in site.loops:
        r = site.ranges.get(v)
        if r is None:
            return None
        free.append((v, r))
    fixed = {}
    free = [(v, r) for v, r in free if r[1] > r[0] or fixed.setdefault(v, r[0]) is None]
    if free:
        v, r = free.pop(0)
        fixed[v] = r[0]
    points = len(linear)
    while free and points * math.prod(r[1] - r[0] + 1 for _, r in free) > ENUMERATION_LIMIT:
        v, r = free.pop(0)
        fixed[v] = r[0]
    axes = [linear] + [np.arange(r[0], r[1] + 1, dtype=np.int64) for _, r in free]
    grids = np.meshgrid(*axes, indexing="ij") if len(axes) > 1 else axes
    flat = [g.reshape(-1, 1, 1) for g in grids]
    env: dict = dict(scalars)
    for axis, var in kernel.thread_vars.items():
        if axis in thread_values:
            env[var] = thread_values[axis][flat[0].ravel()].reshape(-1, 1, 1)
        else:
            env[var] = _as3(np.int64(0))
    for (v, _), values in zip(free, flat[1:]):
        env[v] = values
    for v, value in fixed.items():
        env[v] = _as3(np.int64(value))
    for var, value in site.lets.items():
        try:
            env[var] = _eval(value, env)
        except (_Unknown, TypeError, ValueError, OverflowError):
            pass
    try:
        idx = _eval(site.index, env)
    except (_Unknown, TypeError, ValueError, OverflowError):
        return None
    addr = (np.asarray(idx, dtype=np.int64) + int(site.buffer.elem_offset or 0)) \
        * bytes_of(site.buffer.dtype)
    return np.unique(addr // SECTOR_BYTES)


def _buffer_elements(buf: Buffer) -> int:
    n = 1
    for d in buf.shape:
        c = E.as_const_int(d)
        if c is None:
            return 1 << 40
        n *= c
    return n


# ------------------------------------------------------------------------------- model
def _resolve_spec(spec: Any) -> GPUSpec:
    if isinstance(spec, GPUSpec):
        return spec
    if isinstance(spec, str):
        return get_spec(spec)
    inner = getattr(spec, "spec", None)
    if isinstance(inner, GPUSpec):
        return inner
    raise TypeError(f"expected a GPUSpec, a GPU name or a Target, got {spec!r}")


def _registers(registers: Any, kernel: Kernel, local_words: int) -> tuple[int, str]:
    if registers is None:
        return min(255, DEFAULT_REGISTERS + local_words), "estimate"
    if isinstance(registers, bool):
        raise TypeError("registers_per_thread must be an int or a ptxas report")
    if isinstance(registers, int):
        return registers, "ptxas"
    if isinstance(registers, dict):
        if kernel.name in registers:
            return _registers(registers[kernel.name], kernel, local_words)
        return min(255, DEFAULT_REGISTERS + local_words), "estimate"
    kernel_of = getattr(registers, "kernel", None)
    if callable(kernel_of):       # an AssemblyReport
        try:
            return int(kernel_of(kernel.name).registers), "ptxas"
        except KeyError:
            return int(registers.registers), "ptxas"
    if hasattr(registers, "registers"):   # KernelResources
        return int(registers.registers), "ptxas"
    raise TypeError(f"registers_per_thread: expected an int or a ptxas report, got "
                    f"{registers!r}")


def model_kernel(kernel: Kernel, spec: Any, registers_per_thread: Any = None,
                 sizes: dict | None = None) -> KernelModel:
    """The analytic model of ``kernel`` on the GPU ``spec`` (a GPUSpec, a short name or a
    Target). ``registers_per_thread``: ptxas's figure (an int, an AssemblyReport, a
    KernelResources, or a dict by kernel name); without it, an estimate. ``sizes``: values
    of the kernel's scalar parameters (by Var or name), when loop ranges depend on them."""
    spec = _resolve_spec(spec)
    shared = set(kernel.shared)
    walker = _Walker(kernel, dict(sizes or {}), shared)
    trips = np.ones(SAMPLES, dtype=np.float64)
    walker.walk(kernel.body, walker.env0, walker.ranges0, trips, False)

    threads = kernel.threads_per_block
    warps_per_block = -(-threads // spec.warp_size)
    blocks = kernel.grid[0] * kernel.grid[1] * kernel.grid[2]
    total_warps = blocks * warps_per_block
    total_threads = blocks * threads
    notes: list[str] = []

    # accesses --------------------------------------------------------------------
    accesses = []
    l2_per_buffer: dict = {}
    wavefronts = 0.0
    for site in walker.sites:
        m = site.metrics
        text = _index_text(site.index)
        if site.scope == "global":
            sectors = m["sectors"]
            moved = sectors * SECTOR_BYTES
            acc = AccessModel(
                buffer=site.buffer.name, kind=site.kind, scope="global",
                sectors_per_request=sectors, bytes_per_request=m["bytes"],
                efficiency=(m["bytes"] / moved if moved else 1.0), conflict_ways=1.0,
                executions=site.executions, vector_lanes=site.lanes, guarded=site.guarded,
                analysed=site.analysed, index=text)
            key = (site.buffer, site.kind)
            l2_per_buffer[key] = l2_per_buffer.get(key, 0.0) + \
                moved * site.executions * total_warps
        else:
            phases = m["phases"] or 1.0
            acc = AccessModel(
                buffer=site.buffer.name, kind=site.kind, scope="shared",
                sectors_per_request=0.0, bytes_per_request=m["bytes"], efficiency=1.0,
                conflict_ways=m["wavefronts"] / phases, executions=site.executions,
                wavefronts_per_request=m["wavefronts"], vector_lanes=site.lanes,
                guarded=site.guarded, analysed=site.analysed, index=text)
            wavefronts += m["wavefronts"] * site.executions * total_warps
        accesses.append(acc)
    if any(a.guarded for a in accesses):
        notes.append("accesses under an if are counted as executed by every thread")
    if any(not a.analysed for a in accesses):
        notes.append("an index that reads memory is assumed scattered")

    # occupancy ---------------------------------------------------------------------
    regs, regs_from = _registers(registers_per_thread, kernel, walker.local_words)
    occ = occupancy(spec, threads, regs, kernel.shared_bytes)
    if occ.active_blocks_per_sm == 0:
        raise ModelError(f"{kernel.name} cannot launch on {spec.display_name}: "
                         f"{occ.summary()}")
    per_wave = spec.sm_count * occ.active_blocks_per_sm
    waves = -(-blocks // per_wave)

    # DRAM: footprint floor, L2 reuse of the excess ------------------------------------
    grid_fp = _grid_footprints(walker.sites)
    concurrent = min(blocks, per_wave)
    block_sectors: dict = {}
    scalars = {v: x for v, x in walker.env0.items() if v in set(kernel.scalar_params)}
    for site in walker.sites:
        if site.scope != "global":
            continue
        key = (site.buffer, site.kind)
        sec = _block_sectors(site, kernel, scalars)
        if sec is None:       # not enumerable: the whole grid's footprint
            block_sectors[key] = None
        elif block_sectors.get(key, ()) is not None:
            block_sectors[key] = np.union1d(block_sectors.get(key, sec), sec)
    working_set = 0.0
    for key, fp in grid_fp.items():
        sec = block_sectors.get(key)
        working_set += fp if sec is None else min(fp, sec.size * SECTOR_BYTES * concurrent)
    hit = 1.0 if working_set <= spec.l2_size else spec.l2_size / working_set
    dram_per_buffer: dict = {}
    for key, traffic in l2_per_buffer.items():
        floor = min(traffic, grid_fp.get(key, traffic))
        dram_per_buffer[f"{key[0].name} ({key[1]})"] = floor + (traffic - floor) * (1 - hit)
    dram = sum(dram_per_buffer.values())
    l2 = sum(l2_per_buffer.values())
    if hit < 1.0:
        notes.append(f"the per-wave working set ({_bytes(working_set)}) exceeds L2 "
                     f"({_bytes(spec.l2_size)}): part of the reuse comes from DRAM")

    # time per pipe ---------------------------------------------------------------------
    clock = spec.boost_clock_mhz * 1e6
    busiest_blocks = -(-blocks // spec.sm_count)
    schedulers = spec.warp_allocation_granularity
    needed = schedulers * WARPS_PER_SCHEDULER
    resident_sm = min(occ.active_blocks_per_sm, busiest_blocks) * warps_per_block
    eff_sm = min(1.0, resident_sm / needed)
    resident_mean = min(blocks, per_wave) * warps_per_block / spec.sm_count
    eff_mem = min(1.0, resident_mean / needed)
    warp_instr_per_block = walker.instructions * warps_per_block
    fp32_warp_instr_per_clock = spec.fp32_cores_per_sm / spec.warp_size
    wavefronts_per_block = wavefronts / blocks if blocks else 0.0
    times = {
        "compute": busiest_blocks * warp_instr_per_block
        / (fp32_warp_instr_per_clock * clock) / eff_sm,
        "dram": dram / (spec.dram_bandwidth_gbs * 1e9) / eff_mem,
        "l2": l2 / (spec.l2_bandwidth_gbs * 1e9) / eff_mem,
        "shared": busiest_blocks * wavefronts_per_block / clock / eff_sm,
    }
    bottleneck = max(PIPES, key=lambda p: times[p])
    if eff_sm < 1.0:
        notes.append(f"{resident_sm} resident warps on the busiest SM of the "
                     f"{needed} that hide latency: its pipes run at {eff_sm:.0%}")
    flops = walker.flops * total_threads
    return KernelModel(
        kernel=kernel.name, gpu=spec.display_name, accesses=tuple(accesses),
        dram_bytes=dram, l2_bytes=l2, shared_wavefronts=wavefronts, flops=flops,
        fp32_instructions=walker.instructions * total_warps, occupancy=occ,
        registers_per_thread=regs, registers_from=regs_from, blocks=blocks,
        threads_per_block=threads, waves=waves, latency_efficiency=eff_sm,
        time_s_per_pipe=times, bottleneck=bottleneck, launch_s=LAUNCH_OVERHEAD_S,
        time_s=times[bottleneck] + LAUNCH_OVERHEAD_S, notes=tuple(notes),
        dram_bytes_per_buffer=dram_per_buffer)


def model_function(gpu_function: GpuFunction, spec: Any, registers_per_thread: Any = None,
                   sizes: dict | None = None) -> FunctionModel:
    """Every kernel of ``gpu_function`` modeled (:func:`model_kernel`), launched one after
    the other: the times add up. ``registers_per_thread`` as for :func:`model_kernel` (an
    AssemblyReport gives each kernel its own figure)."""
    spec = _resolve_spec(spec)
    kernels = tuple(model_kernel(k, spec, registers_per_thread, sizes)
                    for k in gpu_function.kernels)
    return FunctionModel(name=gpu_function.name, gpu=spec.display_name, kernels=kernels)


def _index_text(index) -> str:
    return _expr_text(index)


_OPS = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%",
        E.Div: "/", E.Mod: "%"}


def _expr_text(e, depth: int = 0) -> str:
    """A short infix text of an index (for the summary)."""
    t = type(e)
    if depth > 12:
        return "..."
    if t is E.IntImm:
        return str(e.value)
    if t is E.Var:
        return e.name
    if t in _OPS:
        return f"({_expr_text(e.a, depth + 1)} {_OPS[t]} {_expr_text(e.b, depth + 1)})" \
            if depth else f"{_expr_text(e.a, depth + 1)} {_OPS[t]} {_expr_text(e.b, depth + 1)}"
    if t is E.Ramp:
        return f"ramp({_expr_text(e.base, depth + 1)}, {_expr_text(e.stride, depth + 1)}, " \
               f"{e.lanes})"
    if t is E.Broadcast:
        return f"broadcast({_expr_text(e.value, depth + 1)}, {e.lanes})"
    if t in (E.Min, E.Max):
        return f"{t.__name__.lower()}({_expr_text(e.a, depth + 1)}, " \
               f"{_expr_text(e.b, depth + 1)})"
    if t is E.BufferLoad:
        return f"{e.buffer.name}[...]"
    return t.__name__


__all__ = ["AccessModel", "KernelModel", "FunctionModel", "ModelError", "model_kernel",
           "model_function", "PIPES", "LAUNCH_OVERHEAD_S", "DEFAULT_REGISTERS"]

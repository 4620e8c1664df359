"""``engine.cache.simulate``: cache behaviour of a program, by running an instrumented build.

Pipeline: mark blocks -> ``engine.lower.lower`` -> plan sampling -> instrument (one
simulator call per access) -> ``engine.build(..., lowered=True, extra_modules=[simulator])``
-> run on the arguments -> read the simulator's counters -> :class:`CacheReport`.
"""
from __future__ import annotations

import itertools
import threading
import time
from typing import Any, Sequence

import numpy as np

from engine.ir.function import IRModule, PrimFunc

from . import hwcounters
from .footprint import loop_footprints
from .geometry import Geometry, resolve
from .instrument import (LAYOUT_ALIGN, LAYOUT_STAGGER, SamplePlan, instrument, mark_blocks,
                         plan_sampling)
from .report import CacheReport, LevelStats
from .simcore import ACCESS_SYMBOL, BASE_SYMBOL, SimState, build_sim_module, resident_lookup

#: Above this many (estimated) accesses, outer-loop iterations are sampled.
DEFAULT_MAX_ACCESSES = 64_000_000

#: The instrumented build is compiled at O3 when it simulates more than this many accesses
#: per access site in its code, else at O0. Its simulated access stream does not depend on
#: the level (every access is a call, in program order, and the buffers the kernel
#: allocates report placed addresses, not their stack or heap ones: see
#: :mod:`engine.cache.instrument`); only the time does. At both levels the simulator's fast
#: path is inlined into the kernel (O0 runs LLVM's always-inliner); O3 costs about 10 ms
#: more of compile per access site and saves about 2 ns per simulated access, so it pays
#: above about 5 M accesses a site. Measured on the course's mm_relu steps at n=128 (7
#: sites, 8.4 M accesses): O0 compiles in 14 ms and simulates 240 M accesses/s, O3 in
#: 85 ms and 500 M/s.
O3_ACCESSES_PER_SITE = 5_000_000


def instrumented_opt_level(estimated_accesses: float, access_sites: int) -> int:
    """The optimisation level of the instrumented build of a program with ``access_sites``
    simulator calls in its code that simulates about ``estimated_accesses`` accesses
    (:data:`O3_ACCESSES_PER_SITE`)."""
    return 3 if estimated_accesses > max(1, access_sites) * O3_ACCESSES_PER_SITE else 0

_uid = itertools.count()


class CacheSimError(ValueError):
    """Bad arguments to :func:`simulate` (the message says what to pass instead)."""


def _pick_func(mod: Any, func_name: str | None) -> PrimFunc:
    if isinstance(mod, PrimFunc):
        if func_name is not None and func_name != mod.name:
            raise CacheSimError(f"the PrimFunc is named {mod.name!r}, not {func_name!r}")
        return mod
    if not isinstance(mod, IRModule):
        raise CacheSimError(f"simulate() expects an IRModule or PrimFunc, got {type(mod).__name__}")
    if func_name is None:
        if len(mod) != 1:
            raise CacheSimError(f"the module has {len(mod)} functions ({', '.join(mod.names())});"
                                " pass func_name=")
        return mod.functions[0][1]
    try:
        return mod[func_name]
    except KeyError as exc:
        raise CacheSimError(str(exc.args[0])) from None


def aligned_empty(shape: tuple, dtype: Any, align: int = 64, offset: int = 0) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts ``offset`` bytes past an
    ``align``-byte boundary."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape)) * dt.itemsize
    raw = np.empty(n + align + offset, dtype=np.uint8)
    start = (-raw.ctypes.data) % align + offset
    return raw[start:start + n].view(dt).reshape(shape)


def default_args(func: PrimFunc, seed: int = 0) -> list[np.ndarray]:
    """Random arrays for the parameters of ``func``, the k-th one ``k * LAYOUT_STAGGER``
    bytes past a ``LAYOUT_ALIGN`` boundary (see :data:`LAYOUT_ALIGN`)."""
    from engine.runtime.module import NUMPY_DTYPES
    rng = np.random.default_rng(seed)
    out = []
    for k, p in enumerate(func.params):
        dt = np.dtype(NUMPY_DTYPES[p.dtype])
        a = aligned_empty(p.const_shape(), dt, LAYOUT_ALIGN, k * LAYOUT_STAGGER % LAYOUT_ALIGN)
        if dt.kind == "f":
            a[...] = rng.uniform(-1, 1, size=a.shape)
        elif dt.kind == "b":
            a[...] = rng.integers(0, 2, size=a.shape).astype(bool)
        else:
            a[...] = rng.integers(0, 8, size=a.shape)
        out.append(a)
    return out


def _build_linked(func: PrimFunc, simmod, opt_level: int) -> Any:
    """Compile the instrumented lowered ``func`` with the backend's code generator and
    pass pipeline (at ``opt_level``), the simulator module *linked in* before
    optimisation so that LLVM inlines its fast path (and folds the constant buffer/slot
    arguments) into the kernel."""
    from engine.codegen import codegen, host_cpu, init_llvm, optimize
    from engine.runtime import native
    from engine.runtime.module import Function, Module, make_specs

    native.load()
    init_llvm()
    with _llvm_lock():
        return _build_linked_locked(func, simmod, opt_level, codegen, host_cpu, optimize,
                                    Function, Module, make_specs)


def _llvm_lock():
    """The backend's compile lock when it has one (llvmlite's LLVM context is shared by the
    whole process), else this module's own."""
    try:
        from engine.runtime import build as _b
        lock = getattr(_b, "_compile_lock", None)
    except Exception:  # noqa: BLE001
        lock = None
    return lock if lock is not None else _LOCK


_LOCK = threading.RLock()


def _build_linked_locked(func, simmod, opt_level, codegen, host_cpu, optimize, Function,
                         Module, make_specs):
    import llvmlite.binding as llvm
    ir_mod, infos = codegen([(func.name, func)])
    ll_text = str(ir_mod)
    cpu, feats = host_cpu()
    tm = llvm.Target.from_default_triple().create_target_machine(
        cpu=cpu, features=feats, opt=opt_level, reloc="default", codemodel="jitdefault")
    llmod = llvm.parse_assembly(ll_text)
    sim = llvm.parse_assembly(str(simmod))
    sim.verify()
    llmod.link_in(sim)
    llmod.triple = tm.triple
    llmod.data_layout = str(tm.target_data)
    llmod.verify()
    optimize(llmod, tm, opt_level)
    ee = llvm.create_mcjit_compiler(llmod, tm)  # takes ownership of tm
    ee.finalize_object()
    functions: dict = {}
    module = Module(ee, llmod, ll_text, functions, {}, {func.name: func},
                    {"fast_math": False, "opt_level": opt_level})
    info = infos[func.name]
    addr = ee.get_function_address(info.symbol)
    if not addr:
        raise RuntimeError(f"internal error: instrumented {func.name!r} was not compiled")
    functions[func.name] = Function(module, func.name, addr,
                                    make_specs(info.params, info.orig_params, func.body))
    return module


def _build(func: PrimFunc, extra, opt_level: int) -> Any:
    """Instrumented build at ``opt_level`` (:func:`instrumented_opt_level`): linked
    (inlined simulator) when possible, else ``engine.build`` with the simulator as an extra
    module of the same JIT (one native call per access)."""
    try:
        return _build_linked(func, extra, opt_level), "linked"
    except Exception:  # noqa: BLE001 - fall back to the backend's own path
        from engine.runtime import build
        return build(IRModule.from_funcs(func), target="llvm", lowered=True,
                     extra_modules=[extra], cache=False,
                     opt_level=opt_level), "extra_modules"


def simulate(mod: Any, func_name: str | None = None, levels: Sequence | None = None,
             args: Sequence[np.ndarray] | None = None,
             max_accesses: int = DEFAULT_MAX_ACCESSES, hardware: bool = True,
             seed: int = 0) -> CacheReport:
    """Simulate the cache behaviour of ``mod[func_name]``.

    * ``levels``: ``None`` for the host's caches (from ``/sys``, sanity-checked) or a list of
      dicts ``{"name": "L1", "size": 49152, "ways": 12, "line": 64}`` (1 to 4 levels, L1
      first); bad geometry raises :class:`CacheConfigError`.
    * ``args``: the numpy arrays to run on (default: random 64-byte-aligned arrays). Their
      addresses are the ones simulated.
    * ``max_accesses``: programs estimated above this many accesses are simulated on a
      sample of outer-loop iterations; the report then says "estimated from k of n
      iterations of loop ...". The sample is a few windows of consecutive iterations: the
      first window (the program's cold start) counts once, the others — each preceded by
      uncounted warm-up iterations — stand for all remaining iterations. Code *after* a
      sampled loop sees a cache without the skipped iterations' data, so a large level's
      misses there can be overestimated.
    * ``hardware``: also run the normal (uninstrumented) build once between
      ``perf_event_open`` counters, when the machine has them.

    Returns a :class:`CacheReport` (``summary()`` for text, ``to_dict()`` for plots).
    """
    func = _pick_func(mod, func_name)
    geometry: Geometry = resolve(levels)
    if not isinstance(max_accesses, int) or isinstance(max_accesses, bool) or max_accesses < 1:
        raise CacheSimError(f"max_accesses must be a positive integer, got {max_accesses!r}")
    line = geometry.line
    from engine.lower import lower
    if func.attr("lowered", False):
        marked, block_names = func, []
    else:
        marked, block_names = mark_blocks(func)
    lowered = lower(marked)
    plan: SamplePlan = plan_sampling(lowered, max_accesses, line)
    uid = next(_uid)
    access_sym, base_sym = f"{ACCESS_SYMBOL}_{uid}", f"{BASE_SYMBOL}_{uid}"
    ins = instrument(lowered, len(block_names), plan, line, access_sym, base_sym)
    # the full lookup is compiled once per process and geometry (its LRU rows with it);
    # the kernel inlines only the fast path (the line is its L1 set's most recent one)
    resident = resident_lookup(geometry.levels)
    state = SimState(geometry.levels, len(ins.buffers), ins.nslots, tags=resident.tags)
    simmod = build_sim_module(state, access_symbol=access_sym, base_symbol=base_sym,
                              resident=resident)
    notes: list[str] = []
    if plan.estimated_simulated > 2 * max_accesses:
        notes.append(f"the program could not be sampled down to max_accesses={max_accesses:,}"
                     f" (about {int(plan.estimated_simulated):,} accesses were simulated): "
                     "its innermost loops alone exceed the budget")
    if any(f.kind.value == "parallel" for f in _loops(func)):
        notes.append("parallel loops were simulated serially on one core's hierarchy")
    t0 = time.perf_counter()
    rt, how = _build(ins.func, simmod,
                     instrumented_opt_level(plan.estimated_simulated, ins.static_accesses))
    if how != "linked":
        notes.append("the simulator was called (not inlined) from the kernel")
    compile_s = time.perf_counter() - t0
    kernel = rt[func.name]
    if args is None:
        args = default_args(func, seed)
    ptrs = kernel.pointers(tuple(args))
    with resident.lock:             # one simulation at a time uses the resident rows
        state.reset()
        c0, t0 = time.process_time(), time.perf_counter()
        kernel.call_pointers(ptrs)
        sim_s = time.perf_counter() - t0
        sim_cpu = time.process_time() - c0
        counters = state.counters.copy()
    simulated = int(counters[0].sum())

    # -- aggregate: scale sampled regions, drop warm-up ------------------------------------
    nb = len(block_names)
    stride = nb + 1
    scale = np.zeros(ins.nslots)
    for r in range(ins.nregions):
        s = 1.0  # region 0 (not sampled) and first windows (standing for themselves)
        if r > 0 and r % 2 == 0:
            s = plan.loops[r // 2 - 1].steady_scale
        scale[r * stride:(r + 1) * stride] = s
    names = [lv.name for lv in geometry.levels]
    nl = len(names)
    scaled = counters[:1 + nl] * scale[None, None, :]  # (1+L, nbuf, nslot)

    def stats(arr) -> list:
        return [LevelStats(names[k], int(round(arr[k])), int(round(arr[k + 1])))
                for k in range(nl)]

    levels_out = stats(scaled.sum(axis=(1, 2)))
    per_buffer: dict = {}
    for b, buf in enumerate(ins.buffers):
        tot = scaled[:, b, :].sum(axis=1)
        if tot[0] == 0 and buf.name in per_buffer:
            continue
        prev = per_buffer.get(buf.name)
        if prev is not None:
            tot = tot + np.array([prev[0].accesses] + [p.misses for p in prev])
        per_buffer[buf.name] = stats(tot)
    block_label = list(block_names) + ["(outside blocks)"]
    per_block: dict = {}
    block_tot: dict = {}
    for r in range(ins.nregions):
        for bi in range(stride):
            tot = scaled[:, :, r * stride + bi].sum(axis=1)
            if tot[0] == 0:
                continue
            name = block_label[bi]
            block_tot[name] = block_tot.get(name, 0) + tot
    for name, tot in block_tot.items():
        per_block[name] = stats(tot)
    buffers = {}
    for b, buf in enumerate(ins.buffers):
        try:
            nbytes = buf.nbytes()
        except ValueError:
            nbytes = None
        buffers[buf.name] = {"bytes": nbytes, "scope": buf.scope,
                             "address": int(state.bases[b]) if state.bases[b] != -1 else None,
                             "param": any(buf is p for p in lowered.params)}
    sampling = []
    for sl in plan.loops:
        blocks = sorted({block_label[b] for b in sl.blocks})
        sampling.append({"loop": sl.name, "k": sl.k, "n": sl.n, "blocks": blocks,
                         "windows": [list(w) for w in sl.windows], "text": sl.describe()})
    hw = None
    if hardware and plan.loops:
        # the kernel is too big to simulate whole, so two more real runs of it (warm-up
        # and counted) would cost far more than the sampled simulation did
        hw = hwcounters.CounterResult(False, "skipped: the program is too large for an "
                                      "extra full run; its simulation above is sampled")
    elif hardware:
        hw = _hardware(func, args, geometry)
    return CacheReport(func.name, geometry, levels_out, per_buffer, per_block, buffers,
                       loop_footprints(func, geometry.levels), sampling, hw, simulated, sim_s,
                       compile_s, notes, sim_cpu)


def _loops(func: PrimFunc) -> list:
    from engine.ir.functor import collect
    from engine.ir.stmt import For
    return collect(func.body, For)


def _flush_caches(nbytes: int) -> None:
    """Evict the kernel's data from the real caches by writing ``nbytes`` of other memory
    (allocated per call, not kept), so the measured run starts cold like the simulated one."""
    buf = np.empty(nbytes // 8, dtype=np.int64)
    buf.fill(1)
    del buf


def _hardware(func: PrimFunc, args, geometry: Geometry) -> Any:
    """L1D/LLC miss counters around one cold run of the normal (uninstrumented) build."""
    pr = hwcounters.probe()
    if not pr.available:
        return pr
    from engine.runtime import build
    try:
        rt = build(IRModule.from_funcs(func), target="llvm")
        kernel = rt[func.name]
        ptrs = kernel.pointers(tuple(args))
    except Exception as exc:  # noqa: BLE001 - counters are optional; say why they are missing
        return hwcounters.CounterResult(False, f"could not build the uninstrumented kernel: {exc}")
    kernel.call_pointers(ptrs)  # warm the code, page in the arrays
    flush = min(2 * max(lv.size for lv in geometry.levels), 256 << 20)
    res = hwcounters.measure(lambda: kernel.call_pointers(ptrs),
                             before=lambda: _flush_caches(flush))
    if res.available and any(f.kind.value == "parallel" for f in _loops(func)):
        res.reason = ("counted on the calling thread only; the parallel loops' other "
                      "threads are not included")
    return res

"""``engine.build``: lower -> codegen -> O3 -> JIT, with a compile cache.

::

    rt = engine.build(mod, target="llvm", fast_math=False, opt_level=3)
    rt["mm_relu"](a, b, c)

Options:

* ``fast_math`` (False) — allow LLVM to reassociate floating-point arithmetic;
* ``opt_level`` (3) — 0..3, the new pass manager's ``default<O{n}>`` pipeline;
* ``lowered`` (False) — the input is already lowered (``engine.lower.lower(func)``,
  possibly rewritten by an instrumentation pass); it is compiled as is;
* ``extra_modules`` (None) — ``llvmlite.ir.Module`` objects (or LLVM IR text) added to the
  same JIT, so symbols they define resolve for ``call_extern``;
* ``link_extern`` (False) — link outside code: the extern calls of the program
  (``T.call_extern("int32", "tmm16", C.access_ptr("w"), ...)``, a tensor intrinsic's) are
  compiled (:mod:`engine.lower.extern`) and the LLVM IR of each ``pragma_import_llvm``
  annotation of a loop or block (TVM's, the course's ``sch.annotate(i,
  "pragma_import_llvm", clang.create_llvm(c_code))``) is linked into the module, which must
  define every extern function called. Only :func:`engine.build` and ``tvm.compile``/
  ``tvm.build`` — Python run by the user in their own process — pass it; without it (the
  explorer's workers, which build pasted and imported programs) an extern call is refused
  as opaque code and an import as outside code, each with a sentence;
* ``auto_vectorize`` (True) — LLVM's loop vectorizer on the loops the schedule left
  unvectorized, as in TVM's LLVM pipeline (not on a loop holding the schedule's own
  vectors, nor on one with loops inside: :mod:`engine.codegen.loops`); with False only on
  the loops the code generator asks it for (innermost loops that read under a condition,
  such as a convolution's padding). LLVM's SLP vectorizer runs on straight-line code
  either way. The loops LLVM vectorized on its own are listed in
  ``compile_stats["llvm_vectorized"]`` (``[{"func", "loop", "lanes"}]``, read back from
  the optimised IR: :mod:`engine.codegen.loop_lines`). See
  :func:`engine.codegen.target.optimize`;
* ``cache`` (True) — reuse a previous build of a structurally equal module with the same
  options (a bounded LRU of :data:`CACHE_SIZE` entries keyed by
  ``engine.structural_hash`` + options).
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from typing import Any

import llvmlite.binding as llvm

from engine.codegen.target import JIT_LOCK
from engine.ir import stmt as S
from engine.ir.function import IRModule, PrimFunc
from engine.ir.functor import collect_stmts
from engine.ir.structural import structural_hash
from engine.lower.errors import BuildError

from engine.ir.buffer import Buffer

from .binding import Binding
from .module import NUMPY_DTYPES, Function, Module, join_units, make_specs, written_buffers

CACHE_SIZE = 64
_cache: "OrderedDict[tuple, Module]" = OrderedDict()
_cache_lock = threading.Lock()
_compile_lock = JIT_LOCK   # (the cache simulator takes it from here too)
_stats = {"hits": 0, "misses": 0}

_OPTIONS = {"fast_math": False, "opt_level": 3, "lowered": False, "extra_modules": None,
            "cache": True, "auto_vectorize": True, "link_extern": False}

#: the annotation of a loop or block whose value is LLVM IR text to link (TVM's)
IMPORT_LLVM = "pragma_import_llvm"


def cache_info() -> dict:
    """Compile-cache counters: hits, misses, current size, capacity."""
    with _cache_lock:
        return {"hits": _stats["hits"], "misses": _stats["misses"], "size": len(_cache),
                "capacity": CACHE_SIZE}


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
        _stats["hits"] = _stats["misses"] = 0


def _written_originals(info: Any, body: Any) -> set:
    """The ids of the original buffer parameters whose flat buffers ``body`` stores into."""
    written = written_buffers(body)
    return {id(op) for fp, op in zip(info.params, info.orig_params) if id(fp) in written}


def _functions_of(mod: Any) -> list[tuple[str, PrimFunc]]:
    if isinstance(mod, PrimFunc):
        return [(mod.name, mod)]
    if isinstance(mod, IRModule):
        if len(mod) == 0:
            raise BuildError("the IRModule has no functions to build")
        prims = mod.prim_funcs()
        if not prims:
            raise BuildError("the IRModule has only Relax functions; build a model with "
                             "engine.relax.build(mod, target=\"llvm\")")
        return prims
    raise BuildError(f"engine.build expects an IRModule or a PrimFunc, got {type(mod).__name__}")


def _refuse_thread_bindings(name: str, func: PrimFunc) -> None:
    """A loop bound to a GPU thread axis is a GPU program: the CPU build refuses it (as TVM's
    ``llvm`` target does) with the way out."""
    bound = [s for s in collect_stmts(func.body, S.For) if s.kind is S.ForKind.THREAD_BINDING]
    if bound:
        loop = bound[0]
        raise BuildError(f"function {name!r} binds loop {loop.loop_var.name} to "
                         f"{loop.thread_tag}: a GPU program cannot be compiled for the CPU "
                         "(target 'llvm'); build it with target=\"cuda\", or unbind the "
                         "loops")


def _imported_llvm(name: str, func: PrimFunc, link: bool) -> list[str]:
    """The LLVM IR texts of ``func``'s ``pragma_import_llvm`` annotations; refused with a
    sentence unless the build links outside code."""
    out = []
    for node in (*collect_stmts(func.body, S.For), *collect_stmts(func.body, S.Block)):
        for key, value in node.annotations or ():
            if key != IMPORT_LLVM:
                continue
            what = (f"loop {node.loop_var.name}" if isinstance(node, S.For)
                    else f"block {node.name_hint!r}")
            if not link:
                raise BuildError(f"{what} of function {name!r} imports LLVM IR "
                                 f"({IMPORT_LLVM}): outside code is linked only by "
                                 "engine.build or tvm.compile called from your own Python; "
                                 "a program pasted into or measured by the explorer never "
                                 "links it")
            if not isinstance(value, str):
                raise BuildError(f"the {IMPORT_LLVM} annotation of {what} of function "
                                 f"{name!r} must be LLVM IR text, got "
                                 f"{type(value).__name__}")
            if value not in out:
                out.append(value)
    return out


def build(mod: Any, target: str = "llvm", **options: Any) -> Module:
    """Compile ``mod`` (IRModule or PrimFunc) for the host CPU; see the module docstring.

    For another CPU (``target="llvm -mtriple=aarch64-linux-gnu"``, ``"raspberry-pi-5"``:
    :mod:`engine.codegen.machine`) the result is a :class:`engine.runtime.cross.CrossModule`
    of object code to export, not to call here."""
    machine = _machine_of(target)
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise BuildError(f"unknown build option(s) {sorted(unknown)}; "
                         f"known options: {sorted(_OPTIONS)}")
    opts = dict(_OPTIONS)
    opts.update(options)
    opt_level = opts["opt_level"]
    if not isinstance(opt_level, int) or not 0 <= opt_level <= 3:
        raise BuildError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    funcs = _functions_of(mod)
    extra = opts["extra_modules"] or []
    if not isinstance(extra, (list, tuple)):
        extra = [extra]
    extra_texts = [str(m) for m in extra]
    link = bool(opts["link_extern"])
    for name, f in funcs:
        extra_texts += [t for t in _imported_llvm(name, f, link) if t not in extra_texts]
    key = None
    if opts["cache"]:
        h = structural_hash(tuple(funcs))
        ex = hashlib.sha256("\0".join(extra_texts).encode()).hexdigest() if extra_texts else ""
        key = (h, bool(opts["fast_math"]), opt_level, bool(opts["lowered"]), ex,
               bool(opts["auto_vectorize"]), link, machine)
        with _cache_lock:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
                _stats["hits"] += 1
                return hit
            _stats["misses"] += 1
    for name, f in funcs:      # a cached build passed this check when it was made
        _refuse_thread_bindings(name, f)
    out = _compile(funcs, opts, extra_texts) if machine is None \
        else _compile_for(machine, funcs, opts, extra_texts)
    if key is not None:
        with _cache_lock:
            _cache[key] = out
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    return out


def _machine_of(target: Any):
    """The :class:`engine.codegen.machine.Machine` ``target`` names (None: the host), or a
    BuildError with the sentence."""
    from engine.codegen.machine import NAMED_MACHINES, TargetStringError, parse_machine
    if not isinstance(target, str) or not (target.split()[0:1] == ["llvm"]
                                           or target.strip() in NAMED_MACHINES):
        raise BuildError(f"unsupported target {target!r}; the engine compiles for 'llvm' "
                         "(the host CPU), 'llvm -mtriple=aarch64-linux-gnu' or "
                         f"{', '.join(map(repr, NAMED_MACHINES))} (an ARM board) and, "
                         "through engine.build, for 'cuda' (a GPU: 'cuda -arch=sm_80', "
                         "'nvidia/nvidia-a100', ...)")
    try:
        return parse_machine(target)
    except TargetStringError as exc:
        raise BuildError(str(exc)) from None


def _compile_for(machine: Any, funcs: list, opts: dict, extra_texts: list[str]) -> Any:
    """A :class:`engine.runtime.cross.CrossModule`: object code for another CPU."""
    from engine.lower import lower
    from .cross import compile_cross
    if extra_texts:
        raise BuildError(f"a build for {machine.name} links no outside code (extra_modules, "
                         "pragma_import_llvm): build it for 'llvm' to use them")
    t0 = time.perf_counter()
    lowered = []
    for name, f in funcs:
        if opts["lowered"]:
            lowered.append((name, f))
        else:
            lowered.append((name, lower(f)))   # an extern call is refused with a sentence
    t1 = time.perf_counter()
    out = compile_cross(lowered, opts, machine)
    out.compile_stats["lower"] = t1 - t0
    out.compile_stats["total"] += t1 - t0
    return out


def llvm_vectorized(infos: dict, opt_texts: list[str]) -> list[dict]:
    """The loops LLVM vectorized on its own, ``[{"func", "loop", "lanes"}]``, from the
    optimised modules' texts (:func:`engine.codegen.loop_lines.vectorized_loops`)."""
    from engine.codegen.loop_lines import vectorized_loops
    lines = next((i.loop_lines for i in infos.values() if i.loop_lines is not None), None)
    return vectorized_loops(lines.marks, opt_texts) if lines is not None else []


def _check_defined(funcs: list, extra_mods: list) -> None:
    """Every extern function the program calls is defined by a linked module (never looked
    up among the process's own symbols)."""
    from engine.lower.extern import extern_symbols
    defined = {f.name for m in extra_mods for f in m.functions if not f.is_declaration}
    for name, f in funcs:
        for sym in extern_symbols(f):
            if sym not in defined:
                raise BuildError(f"function {name!r} calls the extern function {sym!r}, "
                                 "which no linked LLVM IR defines: give its LLVM IR with "
                                 f"sch.annotate(loop, \"{IMPORT_LLVM}\", ll_text) "
                                 "(tvm.contrib.clang.create_llvm compiles C or C++ to it) "
                                 "or engine.build(..., extra_modules=[ll_text])")


def _compile(funcs: list, opts: dict, extra_texts: list[str]) -> Module:
    from engine.codegen.llvm import codegen_units
    from engine.codegen.target import new_target_machine, set_host_target
    from engine.codegen.units import compile_units, unit_texts
    from engine.lower import lower
    from . import native

    native.load()  # the parallel runtime's symbols must exist before JIT linking
    t0 = time.perf_counter()
    lowered = []
    for name, f in funcs:
        if opts["lowered"]:
            if not f.attr("lowered", False):
                raise BuildError(f"function {name!r} was passed with lowered=True but is not "
                                 "lowered; call engine.lower.lower(func) first or drop "
                                 "lowered=True")
            lowered.append((name, f))
        else:
            lowered.append((name, lower(f, extern=bool(opts["link_extern"]))))
    t1 = time.perf_counter()
    # the kernels, and each parallel loop body as a module of its own (compiled side by side)
    ir_mods, infos = codegen_units(lowered, fast_math=bool(opts["fast_math"]))
    texts = unit_texts(ir_mods, opts["opt_level"])
    ll_text = join_units(texts)
    t2 = time.perf_counter()
    with _compile_lock:
        extra_mods = []
        for text in extra_texts:
            try:
                em = llvm.parse_assembly(text)
                em.verify()
            except RuntimeError as exc:
                raise BuildError(f"an extra module is not valid LLVM IR: {exc}") from exc
            extra_mods.append(em)
        if opts["link_extern"]:
            _check_defined(funcs, extra_mods)
        try:
            units = compile_units(texts, opts["opt_level"],
                                  auto_vectorize=bool(opts["auto_vectorize"]),
                                  unroll_first=any(i.num_unrolled_loops for i in infos.values()))
        except RuntimeError as exc:  # a codegen bug: say so clearly
            raise BuildError(f"internal error: generated LLVM IR is invalid: {exc}") from exc
        t3 = time.perf_counter()
        holder = llvm.parse_assembly("")
        set_host_target(holder, opts["opt_level"])
        tm = new_target_machine(opts["opt_level"])
        ee = llvm.create_mcjit_compiler(holder, tm)
        for u in units:
            ee.add_object_file(llvm.ObjectFileRef.from_data(u.obj))
        for em in extra_mods:
            # the JIT's layout (a module from another compiler — clang 14 — names an older
            # one, and MCJIT aborts the process on a mismatch)
            em.triple = tm.triple
            em.data_layout = str(tm.target_data)
            ee.add_module(em)
        ee.finalize_object()
        functions = {}
        lowered_map = dict(lowered)
        module = Module(ee, [u.opt_text for u in units], ll_text, functions, {}, lowered_map,
                        {"fast_math": bool(opts["fast_math"]), "opt_level": opts["opt_level"]},
                        keepalive=())
        for name, info in infos.items():
            addr = ee.get_function_address(info.symbol)
            if not addr:
                raise BuildError(f"internal error: function {name!r} was not compiled")
            lf = lowered_map[name]
            specs = make_specs(info.params, info.orig_params, lf.body)
            binding = None
            if lf.attr("size_vars") or any(not isinstance(p, Buffer) for p in info.orig_params):
                binding = Binding(name, info.orig_params, lf.attr("size_vars", ()),
                                  _written_originals(info, lf.body), NUMPY_DTYPES)
            functions[name] = Function(module, name, addr, specs, binding)
        t4 = time.perf_counter()
    module.compile_stats = {
        "lower": t1 - t0, "codegen": t2 - t1,
        # wall time of LLVM's optimisation + machine code for all modules (side by side)
        "llvm_opt": t3 - t2,
        # loading the object code into the JIT and linking it
        "llvm_jit": t4 - t3, "total": t4 - t0,
        # the same LLVM work one module after the other (one core)
        "llvm_cpu": sum(u.opt_seconds + u.codegen_seconds for u in units) + (t4 - t3),
        "llvm_modules": len(units),
        "llvm_threads": len({u.thread for u in units}),
        "parallel_loops": sum(i.num_parallel for i in infos.values()),
        "vectorize_fallbacks": sum(i.num_vector_fallbacks for i in infos.values()),
        # innermost loops reading under a condition, given to LLVM's loop vectorizer
        "guarded_vectorized": sum(i.num_guarded_vectorized for i in infos.values()),
        # the loops LLVM vectorized on its own (the schedule left them unvectorized)
        "llvm_vectorized": llvm_vectorized(infos, [u.opt_text for u in units])}
    return module

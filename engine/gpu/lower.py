"""GPU lowering: a scheduled PrimFunc with thread-bound loops -> :class:`~.kernel.GpuModule`.

``lower_gpu(mod_or_func, target)`` does what TVM's GPU passes do (SplitHostDevice,
thread-axis substitution, ``CompactBufferAllocation`` by storage scope, ``ThreadSync``),
reusing the CPU lowering (:mod:`engine.lower`) for everything else:

1. **Kernels.** Every top-level statement of the function (under the root block, after its
   ``alloc_buffers``) is one kernel, ``<func>_kernel<k>``: a nest whose outermost loops are
   bound to ``blockIdx`` (none: a grid of one block) and that binds its threads inside. A
   statement without a bound loop is refused ("did you forget to bind?"), so is a serial
   loop around a kernel (it would run on the host: not supported), a ``blockIdx`` loop under
   another kind of loop, and a symbolic buffer shape. Grid = the ``blockIdx`` extents, block
   = the ``threadIdx`` extents (every loop bound to one axis in a kernel has one extent).
2. **Thread variables.** Each bound loop is replaced by its axis' variable
   (``kernel.thread_vars["threadIdx.x"]``, a ``Var("threadIdx_x", "int32")`` as TVM names
   it; plus the loop's ``min`` if it has one). Loops nested in a loop bound to the same axis
   (the cooperative fetch under ``compute_at`` at a ``threadIdx`` loop) become the same
   variable; the nested loop's body must not use the enclosing loop's variable (then every
   thread of the enclosing loop would fetch the same thing in the serial meaning and its
   own part on the GPU), else it is refused. ``vthread`` loops become serial loops.
   A block outside some ``threadIdx`` loop of the kernel runs in every thread of that axis;
   one that reads what it writes (an accumulation) there is refused.
3. **Blocks -> loops**, local buffers' placement and compaction, bounds proof, flattening,
   simplification, vectorize/unroll legalisation: :mod:`engine.lower`, run on the kernel
   wrapped in serial loops over its thread variables (their ranges), which are then removed.
4. **Buffers by scope.** ``shared`` buffers (allocated by the root or by blocks inside a
   kernel) become ``kernel.shared``: one per thread block, shaped to the box the block uses
   — the accesses relaxed over the thread variables and the loops inside the innermost
   thread-uniform loop enclosing every access (``k_0`` in GEMM shared blocking: a 64x8 tile
   per iteration), the ``blockIdx`` variables and those outer loops fixed: indices are
   shifted by the box's minimum (``A_shared[v0 - blockIdx_x * 128]``). The per-iteration box
   is used only when different iterations' boxes are disjoint (no value flows from one
   iteration to the next through the window), else the box over the whole kernel;
   ``T.where`` and ``if`` guards narrow the box (window sum: 130 floats, not 256).
   ``local`` buffers become ``Allocate`` statements in the body, compacted per thread by
   :func:`engine.lower.compact.compact_buffers`. ``global`` buffers the function allocates
   are ``GpuFunction.temporaries``. Shared memory over the target's per-block limit is
   refused with the numbers.
5. **Barriers** (TVM's ThreadSync for ``shared``), conservative: in a sequence, a barrier
   before a statement that reads or writes a shared buffer an earlier statement (since the
   last barrier) wrote, or writes one an earlier statement read; at the end of a loop body
   that reads and writes the same shared buffer (the next iteration overwrites what this
   one read). Barriers go only where every thread arrives (not under a condition or in a
   loop that depends on a thread variable or on memory): one needed there is refused.

:func:`lower_gpu` returns a :class:`~.kernel.GpuModule`; each kernel's body follows the
contract in :mod:`.kernel`.
"""
from __future__ import annotations

from typing import Any

from engine.arith import Analyzer
from engine.arith.guarded import GuardedBounds
from engine.arith.lower_simplify import lower_simplify
from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer, base_scope
from engine.ir.function import IRModule, PrimFunc
from engine.ir.functor import Mutator, collect_stmts, collect_vars, pre_order_visit, substitute
from engine.lower.errors import BuildError

from .kernel import BLOCK_AXES, GRID_AXES, GpuFunction, GpuModule, Kernel, barrier, is_barrier

TB = S.ForKind.THREAD_BINDING


class NotAKernelYet(BuildError):
    """The program is not made of kernels yet — a statement outside any thread-bound loop,
    a loop around the thread-bound loops, blockIdx loops not outermost — a state a schedule
    passes through on its way to a GPU program (bind the loops, move the stage into the
    kernel), not a program the GPU cannot run."""


def lower_gpu(mod_or_func: Any, target: Any = "cuda") -> GpuModule:
    """Lower every PrimFunc of ``mod_or_func`` for the GPU ``target`` (an
    :class:`engine.gpu.Target` or its string); see the module docstring."""
    from .target import Target
    target = target if isinstance(target, Target) else Target(target)
    if getattr(target.kind, "name", "cuda") != "cuda":
        raise BuildError(f"lower_gpu needs a CUDA target, got {target}")
    if isinstance(mod_or_func, PrimFunc):
        funcs = [(mod_or_func.name, mod_or_func)]
    elif isinstance(mod_or_func, IRModule):
        funcs = [(n, f) for n, f in mod_or_func.functions if isinstance(f, PrimFunc)]
    else:
        raise BuildError(f"lower_gpu expects a PrimFunc or IRModule, got "
                         f"{type(mod_or_func).__name__}")
    return GpuModule(tuple(_FunctionLowerer(name, f, target).run() for name, f in funcs),
                     target)


# ---------------------------------------------------------------------------
def _axis_var_name(tag: str) -> str:
    return tag.replace(".", "_")


def _first_block_name(s: Any) -> str | None:
    blocks = collect_stmts(s, S.BlockRealize)
    return blocks[0].block.name_hint if blocks else None


def _buffers_used(s: Any) -> list:
    """Buffers loaded or stored in ``s``, first use first."""
    seen: dict = {}

    def fn(x):
        if type(x) in (E.BufferLoad, S.BufferStore):
            seen.setdefault(id(x.buffer), x.buffer)
    pre_order_visit(s, fn)
    return list(seen.values())


def _flatten_seq(s: Any) -> list:
    if type(s) is S.SeqStmt:
        out = []
        for x in s.seq:
            out.extend(_flatten_seq(x))
        return out
    return [s]


class _FunctionLowerer:
    def __init__(self, name: str, func: PrimFunc, target: Any):
        self.name, self.func, self.target = name, func, target

    def refuse(self, msg: str) -> BuildError:
        return BuildError(f"function {self.name!r}: {msg}")

    def not_yet(self, msg: str) -> NotAKernelYet:
        return NotAKernelYet(f"function {self.name!r}: {msg}")

    def statements(self) -> tuple:
        """``(func with its views inlined, the root's global buffers, its on-chip ones, the
        top-level statements (the kernels to be), {on-chip buffer id: [statement index]})``;
        refuses symbolic shapes and a root block with axes."""
        from engine.ir.views import inline_views
        func = inline_views(self.func)
        for p in func.params:
            if isinstance(p, Buffer):
                try:
                    p.const_shape()
                except ValueError:
                    raise self.refuse(
                        f"buffer {p.name!r} has a symbolic shape; the GPU lowering needs "
                        "constant shapes for now (give the sizes as numbers)") from None
        root = func.body
        if not isinstance(root, S.BlockRealize):
            root = S.BlockRealize((), E.IntImm("bool", 1), S.Block((), (), (), "root", root))
        rb = root.block
        if rb.init is not None or rb.iter_vars:
            raise self.refuse("the root block has axes or an init; a GPU function's root "
                              "block only allocates buffers")
        allocs = list(rb.alloc_buffers)
        for b in allocs:
            try:
                b.const_shape()
            except ValueError:
                raise self.refuse(f"buffer {b.name!r} has a symbolic shape; the GPU lowering "
                                  "needs constant shapes for now") from None
        temporaries = [b for b in allocs if base_scope(b.scope) == "global"]
        on_chip = [b for b in allocs if base_scope(b.scope) != "global"]
        stmts = [s for s in _flatten_seq(rb.body)
                 if not (type(s) is S.Evaluate and E.as_const_int(s.value) is not None)]
        # which kernel uses each root-allocated shared/local buffer
        users: dict = {}
        for k, s in enumerate(stmts):
            for b in _buffers_used(s):
                if any(b is c for c in on_chip):
                    users.setdefault(id(b), []).append(k)
        return func, temporaries, on_chip, stmts, users

    def run(self) -> GpuFunction:
        from engine.lower.lower import _Flattener
        func, temporaries, on_chip, stmts, users = self.statements()
        self.fl = _Flattener()
        params = tuple(self.fl.flat(p) if isinstance(p, Buffer) else p for p in func.params)
        temps = tuple(self.fl.flat(b) for b in temporaries)
        for b in on_chip:
            ks = users.get(id(b), [])
            if len(ks) > 1:
                raise self.refuse(
                    f"{base_scope(b.scope)} buffer {b.name!r} is used by kernels "
                    f"{self.name}_kernel{ks[0]} and {self.name}_kernel{ks[1]}: {b.scope} "
                    "memory does not outlive a kernel; make it a global buffer, or compute "
                    "its producer and consumers in one kernel (compute_at)")
        kernels = []
        for k, s in enumerate(stmts):
            mine = [b for b in on_chip if users.get(id(b)) == [k]]
            kernels.append(_KernelLowerer(self, f"{self.name}_kernel{k}", s, mine).run(
                params, temps))
        return GpuFunction(self.name, params, tuple(kernels), temps, self.func)


# ---------------------------------------------------------------------------
class _Threads(Mutator):
    """Replaces thread-bound loops by the kernel's axis variables (module docstring, 2.)."""

    def __init__(self, kl: "_KernelLowerer"):
        self.kl = kl
        self.vars: dict = {}          # tag -> Var
        self.extents: dict = {}       # tag -> int
        self.active: dict = {}        # tag -> [enclosing loops bound to it]
        self.leaves: list = []        # (BlockRealize, frozenset of enclosing threadIdx tags)

    def visit_For(self, s: S.For):
        if s.kind is not TB:
            return self.generic_visit(s)
        tag = s.thread_tag
        if tag.startswith("vthread"):
            body = self.visit(s.body)
            return S.For(s.loop_var, s.min, s.extent, S.ForKind.SERIAL, body, s.annotations)
        ext, mn = E.as_const_int(s.extent), E.as_const_int(s.min)
        if ext is None or mn is None:
            raise self.kl.refuse(f"loop {s.loop_var.name} is bound to {tag} with a "
                                 "non-constant range; a thread axis needs a constant extent")
        if ext < 1:
            raise self.kl.refuse(f"loop {s.loop_var.name} is bound to {tag} with extent "
                                 f"{ext}; a thread axis has at least one thread")
        if tag in self.extents and self.extents[tag] != ext:
            raise self.kl.refuse(f"loops bound to {tag} have extents {self.extents[tag]} and "
                                 f"{ext} (loop {s.loop_var.name}); every loop bound to one "
                                 "axis in a kernel must have the same extent")
        self.extents[tag] = ext
        outer = self.active.get(tag, [])
        if outer:
            if tag in GRID_AXES:
                raise self.kl.refuse(f"loop {s.loop_var.name} is bound to {tag} inside loop "
                                     f"{outer[-1].loop_var.name}, bound to it too; bind each "
                                     "blockIdx axis once per kernel")
            used = {id(v) for v in collect_vars(s)}
            for o in outer:
                if id(o.loop_var) in used:
                    raise self.kl.refuse(
                        f"loop {s.loop_var.name} is bound to {tag} inside loop "
                        f"{o.loop_var.name} (also {tag}) and uses {o.loop_var.name}: both "
                        f"become the same thread variable, so thread t would run only "
                        f"iteration t of {s.loop_var.name} for its own {o.loop_var.name} = t, "
                        "not what the program means. A cooperative fetch must not depend on "
                        f"the enclosing thread loop: compute the stage at a loop outside "
                        f"{o.loop_var.name} (its region then covers every thread's), or "
                        "unbind the inner loop")
        self.active.setdefault(tag, []).append(s)
        try:
            body = self.visit(s.body)
        finally:
            self.active[tag].pop()
        if ext == 1:   # an axis of one thread (or block) is index 0: no variable
            return substitute(body, {s.loop_var: E.IntImm(s.loop_var.dtype, mn)})
        tv = self.vars.get(tag)
        if tv is None:
            tv = self.vars[tag] = E.Var(_axis_var_name(tag), "int32")
        repl: E.PrimExpr = tv if s.loop_var.dtype == "int32" else E.Cast(s.loop_var.dtype, tv)
        if mn:
            repl = E.binary(E.Add, repl, E.IntImm(repl.dtype, mn))
        return substitute(body, {s.loop_var: repl})

    def visit_BlockRealize(self, br: S.BlockRealize):
        if not collect_stmts(br.block.body, S.BlockRealize):
            self.leaves.append((br, frozenset(t for t, lst in self.active.items()
                                              if lst and t in BLOCK_AXES)))
        return self.generic_visit(br)


class _LiftShared(Mutator):
    """Removes shared buffers from the blocks that allocate them inside a kernel (they are
    the kernel's); refuses global ones (a kernel cannot allocate global memory)."""

    def __init__(self, kl: "_KernelLowerer"):
        self.kl = kl
        self.shared: list = []

    def visit_Block(self, b: S.Block):
        out = self.generic_visit(b)
        keep = []
        for buf in b.alloc_buffers:
            sc = base_scope(buf.scope)
            if sc == "shared":
                self.shared.append(buf)
            elif sc == "global":
                raise self.kl.refuse(f"block {b.name_hint!r} allocates global buffer "
                                     f"{buf.name!r} inside the kernel; a kernel cannot "
                                     "allocate global memory: allocate it at the root, or "
                                     "make it \"local\" or \"shared\"")
            else:
                keep.append(buf)
        if len(keep) != len(b.alloc_buffers):
            out = out.replace(alloc_buffers=tuple(keep))
        return out


class _KernelLowerer:
    def __init__(self, fn: _FunctionLowerer, name: str, stmt: S.Stmt, on_chip: list):
        self.fn, self.name, self.stmt, self.on_chip = fn, name, stmt, on_chip

    def refuse(self, msg: str) -> BuildError:
        return BuildError(f"kernel {self.name} of function {self.fn.name!r}: {msg}")

    # 1. the kernel's shape ---------------------------------------------------
    def check_shape(self) -> None:
        s = self.stmt
        bound = [f for f in collect_stmts(s, S.For) if f.kind is TB]
        if not bound:
            blk = _first_block_name(s)
            what = f"block {blk!r}" if blk else "a statement"
            raise self.fn.not_yet(
                f"{what} is outside any thread-bound loop: on a GPU every computation runs "
                "in a kernel's threads (did you forget to bind? bind its outer loops to "
                "blockIdx.x and threadIdx.x with sch.bind, or compute it at a loop of a "
                "kernel with compute_at)")
        if not (type(s) is S.For and s.kind is TB):
            if type(s) is S.For:
                raise self.fn.not_yet(
                    f"loop {s.loop_var.name} ({s.kind.value}) encloses the thread-bound loops "
                    f"{bound[0].loop_var.name} ({bound[0].thread_tag}): a loop around a kernel "
                    "would run on the host, which this GPU lowering does not support; bind it "
                    "(e.g. to blockIdx.y) or move it inside the thread-bound loops")
            blk = _first_block_name(s)
            raise self.fn.not_yet(
                f"a top-level {type(s).__name__}{f' (block {blk!r})' if blk else ''} is not a "
                "kernel: each statement of a GPU function's body must be a loop nest whose "
                "outermost loops are thread-bound")
        cur = s
        while type(cur) is S.For and cur.kind is TB and cur.thread_tag in GRID_AXES:
            cur = cur.body
        for f in collect_stmts(cur, S.For):
            if f.kind is TB and f.thread_tag in GRID_AXES:
                raise NotAKernelYet(
                    f"kernel {self.name} of function {self.fn.name!r}: "
                    f"loop {f.loop_var.name} is bound to {f.thread_tag} but is not among the "
                    "kernel's outermost loops; the blockIdx loops must enclose everything "
                    "else (reorder them outermost)")

    # the whole kernel --------------------------------------------------------
    def threads(self) -> tuple:
        """Steps 1-2 (module docstring): ``(_Threads, body with the thread variables,
        shared buffers, local buffers)``; refuses an ill-formed kernel."""
        self.check_shape()
        th = _Threads(self)
        body = th.visit(self.stmt)
        lift = _LiftShared(self)
        body = lift.visit(body)
        shared = [b for b in self.on_chip if base_scope(b.scope) == "shared"] + lift.shared
        local = [b for b in self.on_chip if base_scope(b.scope) == "local"]
        block = tuple(th.extents.get(a, 1) for a in BLOCK_AXES)
        tpb = block[0] * block[1] * block[2]
        limit = self.fn.target.attrs.get("max_threads_per_block", 1024)
        if tpb > limit:
            raise self.refuse(f"{tpb} threads per block ({' x '.join(map(str, block))}); "
                              f"{self._gpu()} allows {limit}")
        return th, body, shared, local

    def loops(self, th: _Threads, body: S.Stmt, local: list) -> tuple:
        """Step 3's blocks -> loops on the kernel wrapped in serial loops over its thread
        variables: ``(loops, the wrapping variables, the axes in order)``."""
        from engine.lower.compact import compact_buffers
        from engine.lower.lower import _BlockLowerer
        order = [a for a in GRID_AXES + BLOCK_AXES if a in th.vars]
        kblock = S.Block((), (), (), f"{self.name}_threads", body, None, tuple(local))
        wrapped: S.Stmt = S.BlockRealize((), E.IntImm("bool", 1), kblock)
        wraps = []
        for a in reversed(order):
            wrapped = S.For(th.vars[a], E.IntImm("int32", 0), E.IntImm("int32", th.extents[a]),
                            S.ForKind.SERIAL, wrapped)
            wraps.append(th.vars[a])
        rootb = S.Block((), (), (), "root", wrapped)
        mini = PrimFunc(self.fn.name, self.fn.func.params,
                        S.BlockRealize((), E.IntImm("bool", 1), rootb))
        mini = compact_buffers(mini)
        loops = _BlockLowerer(self.fn.name).stmt(mini.body, {})
        if loops is None:
            loops = S.Evaluate(E.IntImm("int32", 0))
        return loops, wraps, order

    def shared_tiles(self) -> tuple:
        """``(the thread axes' extents, the kernel's shared buffers as one thread block
        holds them)`` (step 4's boxes), without the rest of the lowering (:mod:`.footprint`)."""
        th, body, shared, local = self.threads()
        if not shared:
            return dict(th.extents), []
        loops, _, _ = self.loops(th, body, local)
        return dict(th.extents), _compact_shared(loops, shared, th, self)[1]

    def run(self, params: tuple, temps: tuple) -> Kernel:
        from engine.lower.bounds_check import check_bounds
        from engine.lower.legalize import legalize_loops
        from engine.lower.tails import peel_vector_tails
        th, body, shared, local = self.threads()
        grid = tuple(th.extents.get(a, 1) for a in GRID_AXES)
        block = tuple(th.extents.get(a, 1) for a in BLOCK_AXES)
        self.check_redundant(th)
        loops, wraps, order = self.loops(th, body, local)
        self.check_no_parallel(loops)
        check_bounds(loops, self.fn.name, (), self.fn.func.params)
        loops, compacted = _compact_shared(loops, shared, th, self)
        if any(c is not b for c, b in zip(compacted, shared)):
            check_bounds(loops, self.fn.name, (), self.fn.func.params)
        fl = self.fn.fl
        loops = fl.visit(loops)
        loops = lower_simplify(loops)
        loops = legalize_loops(loops, self.fn.name)
        loops = peel_vector_tails(loops)
        kbody = _strip_wraps(loops, {id(v) for v in wraps})
        flat_shared = tuple(fl.flat(b) for b in compacted)
        kbody = _Barriers(self, {v for a, v in th.vars.items() if a in BLOCK_AXES}).run(kbody)
        used = {id(b) for b in _buffers_used(kbody)}
        kparams = [p for p in params + temps if isinstance(p, Buffer) and id(p) in used]
        fv = {id(v) for v in collect_vars(kbody)}
        kparams += [p for p in params if not isinstance(p, Buffer) and id(p) in fv]
        kernel = Kernel(self.name, tuple(kparams), kbody, grid, block,
                        {a: th.vars[a] for a in order}, flat_shared)
        self.check_shared(kernel)
        return kernel

    def _gpu(self) -> str:
        spec = self.fn.target.spec
        return spec.display_name.removeprefix("NVIDIA ") if spec is not None else "the target"

    def check_shared(self, kernel: Kernel) -> None:
        limit = self.fn.target.attrs.get("max_shared_memory_per_block")
        if limit is None:
            return
        need = kernel.shared_bytes
        if need > limit:
            sizes = ", ".join(f"{b.name} {b.shape[0]} x {b.dtype}" for b in kernel.shared)
            raise self.refuse(
                f"kernel {self.name} needs {need / 1024:.1f} KiB of shared memory per block "
                f"({sizes}); {self._gpu()} allows {limit / 1024:g} KiB (static). Use smaller "
                "tiles")

    def check_redundant(self, th: _Threads) -> None:
        axes = {a for a in BLOCK_AXES if th.extents.get(a, 1) > 1}
        for br, inside in th.leaves:
            missing = axes - inside
            if not missing:
                continue
            blk = br.block
            stores = {id(s.buffer): s.buffer for s in collect_stmts(blk.body, S.BufferStore)}
            if blk.init is not None:
                stores.update({id(s.buffer): s.buffer
                               for s in collect_stmts(blk.init, S.BufferStore)})
            loads = {id(b.buffer) for b in _loads(blk.body)}
            for bid, buf in stores.items():
                if base_scope(buf.scope) == "local":
                    continue
                if bid in loads or blk.init is not None:
                    ax = ", ".join(sorted(missing))
                    raise self.refuse(
                        f"block {blk.name_hint!r} is outside the loops bound to {ax}, so "
                        f"every thread of {ax} runs it, and it updates {buf.name!r} with what "
                        f"it reads from it: the update would be applied once per thread. "
                        f"Bind a loop around it to {ax}, or move it under such a loop")

    def check_no_parallel(self, s: S.Stmt) -> None:
        for f in collect_stmts(s, S.For):
            if f.kind is S.ForKind.PARALLEL:
                raise self.refuse(f"loop {f.loop_var.name} is parallel: a CPU loop kind; in "
                                  "a GPU kernel bind it to a thread axis instead")


def _loads(s: Any) -> list:
    out = []
    pre_order_visit(s, lambda x: out.append(x) if type(x) is E.BufferLoad else None)
    return out


def _strip_wraps(s: S.Stmt, wrap_ids: set) -> S.Stmt:
    while type(s) is S.For and id(s.loop_var) in wrap_ids:
        s = s.body
    if any(id(v) in wrap_ids for v in collect_vars(_loop_vars_only(s))):
        raise BuildError("internal error: a thread variable's wrapping loop was rewritten")
    return s


def _loop_vars_only(s: S.Stmt) -> tuple:
    return tuple(f.loop_var for f in collect_stmts(s, S.For))


# ---------------------------------------------------------------------------
# 4. shared buffers: one per block, compacted to the box the block uses
# ---------------------------------------------------------------------------
class _SharedAccess:
    __slots__ = ("indices", "path", "guards")

    def __init__(self, indices, path, guards):
        self.indices, self.path, self.guards = indices, path, guards


def _collect_shared(body: S.Stmt, ids: set) -> dict:
    """``{buf id: [_SharedAccess]}`` with each access' enclosing loops (inside the thread
    wraps too) and guards ``(cond, negate)``."""
    out: dict = {}

    def expr(e, path, guards, lets):
        if e is None:
            return

        def fn(x):
            if type(x) is E.BufferLoad and id(x.buffer) in ids:
                idx = tuple(substitute(i, lets) if lets else i for i in x.indices)
                out.setdefault(id(x.buffer), []).append(
                    _SharedAccess(idx, tuple(path), tuple(guards)))
        pre_order_visit(e, fn)

    def stmt(s, path, guards, lets):
        if s is None:
            return
        t = type(s)
        if t is S.SeqStmt:
            for x in s.seq:
                stmt(x, path, guards, lets)
        elif t is S.BufferStore:
            for i in s.indices:
                expr(i, path, guards, lets)
            expr(s.value, path, guards, lets)
            if id(s.buffer) in ids:
                idx = tuple(substitute(i, lets) if lets else i for i in s.indices)
                out.setdefault(id(s.buffer), []).append(
                    _SharedAccess(idx, tuple(path), tuple(guards)))
        elif t is S.For:
            expr(s.min, path, guards, lets)
            expr(s.extent, path, guards, lets)
            stmt(s.body, path + [s], guards, lets)
        elif t is S.IfThenElse:
            expr(s.condition, path, guards, lets)
            c = substitute(s.condition, lets) if lets else s.condition
            stmt(s.then_case, path, guards + [(c, False)], lets)
            stmt(s.else_case, path, guards + [(c, True)], lets)
        elif t is S.LetStmt:
            expr(s.value, path, guards, lets)
            l2 = dict(lets)
            l2[s.var] = substitute(s.value, lets) if lets else s.value
            stmt(s.body, path, guards, l2)
        elif t is S.Allocate:
            stmt(s.body, path, guards, lets)
        elif t is S.Evaluate:
            expr(s.value, path, guards, lets)
        else:
            raise BuildError(f"internal error: unexpected {t.__name__} after blocks -> loops")
    stmt(body, [], [], {})
    return out


def _loop_range(f: S.For):
    lo, ext = E.as_const_int(f.min), E.as_const_int(f.extent)
    if lo is None or ext is None or ext < 1:
        return None
    return lo, lo + ext - 1


def _shared_box(buf: Buffer, accs: list, q: int, grid_ids: set, thread_ids: set):
    """Per dimension ``(min expression, extent)`` of what the accesses touch when the
    loops ``path[:q]`` (common to all) and the blockIdx variables are fixed and everything
    else (thread variables, inner loops) ranges; None when not expressible."""
    shape = buf.const_shape()
    fixed_ids = set(grid_ids) | {id(f.loop_var) for f in accs[0].path[:q]
                                 if id(f.loop_var) not in thread_ids}
    mins: list = [None] * len(shape)
    spans: list = [None] * len(shape)
    for a in accs:
        ranges = {}
        for f in a.path:
            r = _loop_range(f)
            if r is None:
                return None
            ranges[f.loop_var] = r
        an = GuardedBounds(ranges)
        for cond, neg in a.guards:
            an.assume(cond, neg)
        for d, idx in enumerate(a.indices):
            if not (idx.dtype.startswith("int") and "x" not in idx.dtype):
                return None
            lin_terms, const = an.linear(an.simplify(idx))
            fixed: E.PrimExpr = E.IntImm(idx.dtype, const)
            var: E.PrimExpr = E.IntImm(idx.dtype, 0)
            for atom, coef in lin_terms.values():
                ids = {id(v) for v in collect_vars(atom)}
                term = atom if coef == 1 else E.binary(E.Mul, atom, E.IntImm(idx.dtype, coef))
                if ids <= fixed_ids:
                    fixed = E.binary(E.Add, fixed, term)
                elif ids & fixed_ids:
                    return None   # a term mixing fixed and ranging variables
                else:
                    var = E.binary(E.Add, var, term)
            lo, hi = an.bound_tree(var)
            if lo is None or hi is None:
                return None
            base = Analyzer().simplify(E.binary(E.Add, fixed, E.IntImm(idx.dtype, lo)))
            if mins[d] is None:
                mins[d], spans[d] = base, (0, hi - lo)
                continue
            off = E.as_const_int(Analyzer().simplify(base - mins[d]))
            if off is None:
                return None
            spans[d] = (min(spans[d][0], off), max(spans[d][1], off + hi - lo))
    out = []
    for d, n in enumerate(shape):
        lo_off, hi_off = spans[d]
        ext = hi_off - lo_off + 1
        mn = Analyzer().simplify(mins[d] + lo_off) if lo_off else mins[d]
        if ext >= n:
            # the accesses were proven inside the buffer: the whole dimension covers them
            mn, ext = E.IntImm(mn.dtype, 0), n
        out.append((mn, ext))
    return out


def _disjoint(box: list, loops: tuple) -> bool:
    """Do different iterations of ``loops`` (fixed while the box is computed) get disjoint
    boxes? Each loop's variable in one dimension's minimum only, the coefficients of a
    dimension a mixed radix at least its extent (``k_0 * 8`` with extent 8)."""
    loop_ids = {id(f.loop_var): f for f in loops}
    seen: set = set()
    for mn, ext in box:
        an = Analyzer()
        terms, _ = an.linear(mn)
        coefs = []
        for atom, coef in terms.values():
            ids = {id(v) for v in collect_vars(atom)}
            if not ids & set(loop_ids):
                continue
            if not isinstance(atom, E.Var) or id(atom) in seen:
                return False
            seen.add(id(atom))
            r = _loop_range(loop_ids[id(atom)])
            if r is None:
                return False
            coefs.append((abs(coef), r[1] - r[0] + 1))
        need = ext
        for coef, n in sorted(coefs):
            if coef < need:
                return False
            need = coef * n
    return True


def _compact_shared(body: S.Stmt, shared: list, th: _Threads, kl: _KernelLowerer):
    """Shape each shared buffer to its per-block box and shift its indices (module
    docstring, 4.). Returns the new body and the new buffers (in ``shared``'s order)."""
    if not shared:
        return body, []
    thread_ids = {id(v) for v in th.vars.values()}
    grid_ids = {id(th.vars[a]) for a in GRID_AXES if a in th.vars}
    accs_of = _collect_shared(body, {id(b) for b in shared})
    plans: dict = {}
    new_bufs = []
    for buf in shared:
        accs = accs_of.get(id(buf), [])
        if not accs:
            continue
        if buf.strides or buf.elem_offset:
            new_bufs.append(buf)
            continue
        common = list(accs[0].path)
        for a in accs[1:]:
            n = 0
            while n < len(common) and n < len(a.path) and common[n] is a.path[n]:
                n += 1
            del common[n:]
        # the thread wraps are the first loops of every path; uniform loops after them
        q_wrap = 0
        while q_wrap < len(common) and id(common[q_wrap].loop_var) in thread_ids:
            q_wrap += 1
        q = q_wrap
        while q < len(common):
            f = common[q]
            if f.kind not in (S.ForKind.SERIAL, S.ForKind.UNROLLED) or any(
                    id(v) in thread_ids for v in collect_vars((f.min, f.extent))):
                break
            q += 1
        box = None
        if q > q_wrap:
            box = _shared_box(buf, accs, q, grid_ids, thread_ids)
            if box is not None and not _disjoint(box, tuple(common[q_wrap:q])):
                box = None
        if box is None:
            box = _shared_box(buf, accs, q_wrap, grid_ids, thread_ids)
        if box is None:
            new_bufs.append(buf)
            continue
        new = Buffer(buf.name, tuple(ext for _, ext in box), buf.dtype, buf.scope, (), 0,
                     buf.align)
        plans[id(buf)] = (new, tuple(mn for mn, _ in box))
        new_bufs.append(new)
    if not plans:
        return body, new_bufs
    return _Shift(plans).visit(body), new_bufs


class _Shift(Mutator):
    def __init__(self, plans: dict):
        self.plans = plans

    def index(self, buf, indices):
        new, offs = self.plans[id(buf)]
        out = []
        for i, o in zip(indices, offs):
            i = self.visit(i)
            if not E.is_const_int(o, 0):
                o = o if o.dtype == i.dtype else E.Cast(i.dtype, o)
                i = E.Sub(i, o)
            out.append(i)
        return new, tuple(out)

    def visit_BufferLoad(self, e):
        if id(e.buffer) in self.plans:
            return E.BufferLoad(*self.index(e.buffer, e.indices))
        return self.generic_visit(e)

    def visit_BufferStore(self, s):
        if id(s.buffer) in self.plans:
            new, idx = self.index(s.buffer, s.indices)
            return S.BufferStore(new, self.visit(s.value), idx)
        return self.generic_visit(s)


# ---------------------------------------------------------------------------
# 5. barriers
# ---------------------------------------------------------------------------
class _Barriers:
    """Inserts ``barrier()`` (module docstring, 5.) into a kernel body (flat, lowered)."""

    def __init__(self, kl: _KernelLowerer, thread_vars: set):
        self.kl = kl
        self.dep = {id(v) for v in thread_vars}   # variables that differ between threads

    def run(self, body: S.Stmt) -> S.Stmt:
        out, _, _ = self.stmt(body, True, "the kernel's body")
        return out

    # the shared buffers a statement reads and writes
    @staticmethod
    def rw(s: Any) -> tuple:
        reads, writes = set(), set()

        def fn(x):
            if type(x) is E.BufferLoad and base_scope(x.buffer.scope) == "shared":
                reads.add(id(x.buffer))
            elif type(x) is S.BufferStore and base_scope(x.buffer.scope) == "shared":
                writes.add(id(x.buffer))
        pre_order_visit(s, fn)
        return reads, writes

    def uniform(self, *exprs) -> bool:
        for e in exprs:
            if e is None:
                continue
            if any(id(v) in self.dep for v in collect_vars(e)):
                return False
            if _loads(e):
                return False
        return True

    def need(self, where: str, uniform: bool) -> S.Stmt:
        if not uniform:
            raise self.kl.refuse(
                f"a barrier is needed {where}, where not every thread of the block arrives "
                "(under a condition or in a loop that depends on a thread variable or on "
                "memory): __syncthreads() there would hang or be undefined. Move the shared "
                "buffer's producer and consumers out of that condition or loop")
        return barrier()

    def stmt(self, s: S.Stmt, uniform: bool, where: str):
        """-> (new stmt, ends_with_barrier, has_barrier)"""
        t = type(s)
        if t is S.SeqStmt:
            return self.seq(list(s.seq), uniform, where)
        if t is S.For:
            u = uniform and self.uniform(s.min, s.extent)
            if not u:
                self.dep.add(id(s.loop_var))
            body, ends, has = self.stmt(s.body, u, f"in loop {s.loop_var.name}")
            reads, writes = self.rw(body)
            if reads & writes and not ends:
                b = self.need(f"at the end of loop {s.loop_var.name}'s body (its next "
                              "iteration overwrites shared memory this one read)", u)
                body = S.seq(body, b)
                ends = has = True
            ext = E.as_const_int(s.extent)
            out = S.For(s.loop_var, s.min, s.extent, s.kind, body, s.annotations)
            return out, ends and ext is not None and ext > 0, has
        if t is S.IfThenElse:
            u = uniform and self.uniform(s.condition)
            then, e1, h1 = self.stmt(s.then_case, u, "under an if")
            if s.else_case is not None:
                els, e2, h2 = self.stmt(s.else_case, u, "under an if")
            else:
                els, e2, h2 = None, False, False
            return S.IfThenElse(s.condition, then, els), e1 and e2, h1 or h2
        if t is S.LetStmt:
            if not self.uniform(s.value):
                self.dep.add(id(s.var))
            body, ends, has = self.stmt(s.body, uniform, where)
            return S.LetStmt(s.var, s.value, body), ends, has
        if t is S.Allocate:
            body, ends, has = self.stmt(s.body, uniform, where)
            return S.Allocate(s.buffer, body), ends, has
        if is_barrier(s):
            return s, True, True
        return s, False, False

    def seq(self, items: list, uniform: bool, where: str):
        out = []
        pend_r: set = set()
        pend_w: set = set()
        ends = has = False
        for x in items:
            new, x_ends, x_has = self.stmt(x, uniform, where)
            reads, writes = self.rw(new)
            if ((reads | writes) & pend_w) or (writes & pend_r):
                out.append(self.need(f"before a statement {where} that uses shared memory "
                                     "another thread wrote (or read) just before", uniform))
                pend_r, pend_w = set(), set()
                has = True
            out.append(new)
            if x_ends:
                pend_r, pend_w = set(), set()
                # what the statement did before its last barrier is ordered; after it,
                # nothing (it ends with one)
            else:
                pend_r |= reads
                pend_w |= writes
            ends = x_ends
            has = has or x_has
        return S.seq(*out), ends, has

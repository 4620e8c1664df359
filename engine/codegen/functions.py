"""The function ABI: kernels as LLVM functions, and parallel loops outlined into tasks.

A lowered PrimFunc becomes ``i32 @engine_fn_<name>(ptr noalias align <elem> %A, ...)``
returning 0 on success: a pointer per buffer parameter and, in their places, the scalar
parameters by value (``i32 %n``, ``float %x``; a bool as a byte, a float16 as its bits),
then the symbolic sizes the runtime read from the arrays' shapes (the lowered function's
``size_vars``, known to be at least 0). A parallel loop's body becomes a task ``i32 task(i32 task,
i32 ntasks, ptr env)`` — ``env`` packs the loop bounds and the captured buffers and
variables — that computes its chunk of iterations and calls an always-inlined ``noalias``
worker; the loop itself becomes a call of ``engine_parallel_launch(task, env, extent)``.
"""
from __future__ import annotations

import llvmlite.ir as ir

from engine.ir import expr as E
from engine.ir import stmt as S
from engine.ir.buffer import Buffer
from engine.ir.dtype import bytes_of, element_of
from engine.ir.function import PrimFunc
from engine.ir.functor import pre_order_visit
from engine.lower.errors import BuildError

from .generator import FuncInfo
from .llvm_types import I8, I32, I64, PTR, sanitize, scalar_type


def scalar_arg_type(dtype: str) -> ir.Type:
    """The kernel argument type of a scalar parameter of ``dtype``: its register type, but
    a byte for a bool and 16 bits for a float16 (what a C caller can pass)."""
    if dtype == "bool":
        return I8
    if dtype == "float16":
        return ir.IntType(16)
    return scalar_type(dtype)

LAUNCH_SYMBOL = "engine_parallel_launch"


class FunctionABIMixin:
    """Kernel entry points and the outlining of parallel loops (see the module docstring)."""

    def add_function(self, func: PrimFunc, name: str | None = None) -> FuncInfo:
        if not func.attr("lowered", False):
            raise BuildError(f"function {func.name!r} is not lowered; call engine.lower.lower "
                             "first (or use engine.build, which lowers for you)")
        name = name or func.name
        self.func_name = name
        symbol = "engine_fn_" + sanitize(name)
        params = func.params
        orig = func.attr("lowered_params", params)
        fnty = ir.FunctionType(I32, [PTR if isinstance(p, Buffer) else scalar_arg_type(p.dtype)
                                     for p in params])
        fn = ir.Function(self.module, fnty, name=symbol)
        info = FuncInfo(name, symbol, tuple(params), tuple(orig), loop_lines=self.loop_lines)
        self.info = info
        self.vars, self.bufs, self.nonneg, self.wide = {}, {}, set(), {}
        bufs = [(a, p) for a, p in zip(fn.args, params) if isinstance(p, Buffer)]
        self._buffer_params([a for a, _ in bufs], [p for _, p in bufs], aligned=True)
        self.frame = self.new_frame(fn, 0)
        sizes = {id(v) for v in func.attr("size_vars", ())}
        for a, p in zip(fn.args, params):
            if not isinstance(p, Buffer):
                self._scalar_param(a, p, nonneg=id(p) in sizes)
        self.stmt(func.body)
        self.builder.ret(ir.Constant(I32, 0))
        self.infos[name] = info
        return info

    def _scalar_param(self, arg: ir.Argument, var: E.Var, nonneg: bool) -> None:
        """Bind a scalar parameter (or a symbolic size: ``nonneg``, read from an array's
        shape) to its argument, in its register type (a bool arrives as a byte, a float16
        as its 16 bits)."""
        arg.name = sanitize(var.name)
        value: ir.Value = arg
        if var.dtype == "bool":
            value = self.builder.icmp_unsigned("!=", arg, ir.Constant(arg.type, 0))
        elif var.dtype == "float16":
            value = self.builder.bitcast(arg, ir.HalfType())
        self.vars[id(var)] = value
        if nonneg:
            self.nonneg.add(id(var))

    def _buffer_params(self, args, bufs, aligned: bool = False) -> None:
        """Bind the pointer parameters ``args`` to the buffers ``bufs``: named after them,
        ``noalias`` and, if ``aligned``, declared aligned to the element size."""
        for arg, buf in zip(args, bufs):
            arg.name = sanitize(buf.name)
            arg.add_attribute("noalias")
            if aligned:
                arg.attributes.align = max(1, bytes_of(element_of(buf.dtype)))
            self.bufs[id(buf)] = arg

    def _captures(self, s: S.For) -> tuple[list[E.Var], list[Buffer]]:
        """The variables and buffers the body of parallel loop ``s`` takes from outside."""
        body = s.body
        # one walk of the body: the variables it defines and uses, the buffers it allocates
        # and accesses (an unrolled micro-kernel's body is large: four walks cost 5 ms)
        defined: set[int] = {id(s.loop_var)}
        used_vars: list[E.Var] = []
        allocated: set[int] = set()
        used_bufs: list[Buffer] = []
        seen_b: set[int] = set()
        visited: set[int] = set()

        def note(n):
            # a subtree shared by several parents (the unrolled copies of a micro-kernel
            # share every part that does not depend on the unrolled variable) is walked once
            key = id(n)
            if key in visited:
                return False
            visited.add(key)
            if isinstance(n, E.Var):
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
            return None
        pre_order_visit(body, note)
        free_vars = [v for v in used_vars if id(v) not in defined]
        bufs = [bb for bb in used_bufs if id(bb) not in allocated]
        for v in free_vars:
            if id(v) not in self.vars:
                raise self.err(f"variable {v.name!r} is used in parallel loop "
                               f"{s.loop_var.name!r} but never defined")
        for bb in bufs:
            if id(bb) not in self.bufs:
                raise self.err(f"buffer {bb.name!r} is used but never allocated")
        return free_vars, bufs

    def parallel_for(self, s: S.For) -> None:
        """Outline the parallel loop ``s``: pack its environment, launch its task."""
        free_vars, bufs = self._captures(s)
        b = self.builder
        lo = self.cast_int(self.expr(s.min), I64)
        ext = self.cast_int(self.expr(s.extent), I64)
        env, env_ty, captured_types = self._pack_env(lo, ext, bufs, free_vars)
        self.outline_count += 1
        base = f"{self.info.symbol}_par{self.outline_count}"
        # worker: i32 worker(ptr noalias bufs..., vars..., i64 begin, i64 end)
        wty = ir.FunctionType(I32, [PTR] * len(bufs) + [self.e_Var(v).type for v in free_vars]
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
        saved = (self.frame, self.vars, self.bufs, self.nonneg, self.wide)
        self.frame = self.new_frame(task, saved[0].parallel_depth + 1)
        self._task_body(task, worker, captured_types, env_ty)

        # --- worker function: the loop over [begin, end)
        self.frame = self.new_frame(worker, saved[0].parallel_depth + 1)
        self._worker_body(s, worker, unit, bufs, free_vars)
        self.frame, self.vars, self.bufs, self.nonneg, self.wide = saved

    def _pack_env(self, lo: ir.Value, ext: ir.Value, bufs: list, free_vars: list):
        """``env = {lo, ext, buffers..., vars...}`` on the stack: (env, its type, the
        types of its fields)."""
        b = self.builder
        captured_types = [I64, I64] + [PTR] * len(bufs) + [self.e_Var(v).type for v in free_vars]
        env_ty = ir.LiteralStructType(captured_types)
        env = self.frame.alloca(env_ty, "par_env", align=16)
        values = [lo, ext] + [self.bufs[id(bb)] for bb in bufs] + [self.e_Var(v) for v in free_vars]
        for i, v in enumerate(values):
            b.store(v, b.gep(env, [ir.Constant(I32, 0), ir.Constant(I32, i)], inbounds=True,
                             source_etype=env_ty))
        return env, env_ty, captured_types

    def _task_body(self, task: ir.Function, worker: ir.Function, captured_types: list,
                   env_ty: ir.Type) -> None:
        """The task: unpack the environment, compute this task's chunk of iterations
        (``ceil(extent / ntasks)`` each), call the worker on it."""
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

    def _worker_body(self, s: S.For, worker: ir.Function, unit: ir.Module, bufs: list,
                     free_vars: list) -> None:
        """The worker: the loop of ``s`` over ``[begin, end)``, its buffers and variables
        its parameters; its declarations and loop metadata go to ``unit``."""
        self.vars, self.bufs, self.wide = {}, {}, {}
        self.nonneg = set(self.nonneg)
        args = list(worker.args)
        self._buffer_params(args[:len(bufs)], bufs)
        for v, a in zip(free_vars, args[len(bufs):len(bufs) + len(free_vars)]):
            a.name = sanitize(v.name)
            self.vars[id(v)] = a
        wbegin, wend = args[-2], args[-1]
        parent_module = self.module
        self.module = unit  # declarations and loop metadata of the body go to its module
        try:
            self.serial_loop(s.loop_var, wbegin, None, s.body,
                             nonneg=self._nonneg_expr(s.min), hi=wend)
            self.builder.ret(ir.Constant(I32, 0))
        finally:
            self.module = parent_module

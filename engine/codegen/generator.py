"""The code generator's state and the helpers every part of it uses.

:class:`GeneratorBase` holds what the visitor methods share (the module being built, the
values of variables and buffers in scope, the current LLVM function's :class:`Frame`) and
dispatches statements and expressions to the ``s_<Node>`` / ``e_<Node>`` methods of the
mixins that :class:`engine.codegen.llvm.CodeGen` is assembled from.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import llvmlite.ir as ir

from engine.lower.errors import BuildError

from .llvm_types import I32, PTR, llvm_type, scalar_type
from .loop_lines import LoopLines


def restore(table: dict, key: int, old: Any) -> None:
    """Undo a binding in scope: ``table[key]`` becomes ``old`` again (None: unbound)."""
    if old is None:
        table.pop(key, None)
    else:
        table[key] = old


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
    #: innermost loops reading under a condition that LLVM's loop vectorizer is asked for
    #: (``llvm.loop.vectorize.enable``; see engine.codegen.loops.guarded_element_loop)
    num_guarded_vectorized: int = 0
    notes: list = field(default_factory=list)
    #: the serial loops' numbers of the code generation that made the function (shared by
    #: the functions of one generation; see engine.codegen.loop_lines)
    loop_lines: Any = None


class Frame:
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


class GeneratorBase:
    """Builds one llvmlite module from lowered PrimFuncs: state, dispatch and helpers."""

    def __init__(self, module_name: str = "engine", fast_math: bool = False,
                 split_parallel: bool = False):
        self.module = ir.Module(name=module_name)
        #: with split_parallel, each outlined parallel loop body is a module of its own
        #: (appended to ``units``), so that LLVM can compile them side by side
        self.split_parallel = split_parallel
        self.units: list[ir.Module] = []
        self.fast_math = fast_math
        # "contract" lets LLVM fuse a*b+c into one FMA (what C compilers do by default,
        # -ffp-contract=on); it only ever makes results more accurate.
        self.fflags = ("fast",) if fast_math else ("contract",)
        self.vars: dict[int, Any] = {}
        self.bufs: dict[int, Any] = {}
        self.nonneg: set[int] = set()
        #: the i64 values of int32 loop variables (see LoopMixin.serial_loop), for indices
        self.wide: dict[int, Any] = {}
        self.frame: Frame | None = None
        self.func_name = ""
        self.outline_count = 0
        #: structural key -> (basic block, value) of index arithmetic (see index())
        self.index_values: dict = {}
        #: loops emitted so far that LLVM will not unroll completely (see serial_loop)
        self.long_loops = 0
        #: copies of the innermost body that the short loops emitted inside the current
        #: loop would make when unrolled completely (see serial_loop)
        self.nest_copies = 0
        self.infos: dict[str, FuncInfo] = {}
        self.info: FuncInfo | None = None
        self.mask: ir.Value | None = None  # active lanes inside a vector-predicated region
        #: the serial loops' numbers, carried by their instructions' debug locations
        self.loop_lines = LoopLines()

    def new_frame(self, func: ir.Function, parallel_depth: int) -> Frame:
        """The frame of a new LLVM function; its instructions outside any loop carry the
        debug location of no loop (line 0: see :mod:`engine.codegen.loop_lines`)."""
        frame = Frame(func, parallel_depth)
        frame.builder.debug_metadata = self.loop_lines.location(func, 0)
        return frame

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

    def const_like(self, dtype: str, value) -> ir.Value:
        t = llvm_type(dtype)
        st = scalar_type(dtype)
        c = ir.Constant(st, value)
        if isinstance(t, ir.VectorType):
            return ir.Constant(t, [c.constant] * t.count)
        return c

    # ------------------------------------------------------------------ dispatch
    def stmt(self, s: Any) -> None:
        if s is None:
            return
        meth = getattr(self, "s_" + type(s).__name__, None)
        if meth is None:
            raise self.err(f"cannot generate code for statement {type(s).__name__}; "
                           "was the function lowered?")
        meth(s)

    def expr(self, e: Any) -> ir.Value:
        meth = getattr(self, "e_" + type(e).__name__, None)
        if meth is None:
            raise self.err(f"cannot generate code for expression {type(e).__name__}")
        return meth(e)

"""A build for another CPU (an ARM board): object code this process cannot run.

``engine.build(mod, target="llvm -mtriple=aarch64-linux-gnu")`` (or ``"raspberry-pi-5"``)
lowers and generates code exactly as for the host, then LLVM's O3 pipeline and the
target's backend (AArch64: NEON vectors, its own cost model) emit position-independent
object code, one object per module of the build (the kernels, each parallel loop body).
The result, a :class:`CrossModule`, has the host :class:`~engine.runtime.module.Module`'s
views — ``names()``, ``lowered``, ``get_source("ll" | "ll-opt" | "asm")`` (AArch64
assembly), ``compile_stats`` — and its kernels' parameters (``mod[name].specs``); its
kernels are not called in this process: export it (``rt.export_library("k.so")``) and run
the library on the board or under ``qemu-aarch64`` (``engine.deploy.run_under_qemu``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from engine.codegen.machine import Machine, emit_machine_assembly
from engine.ir.buffer import Buffer
from engine.lower.errors import BuildError

from .module import FunctionTable, ParamSpec, join_assembly, join_units, make_specs


@dataclass(frozen=True)
class CrossFunction:
    """A kernel of a :class:`CrossModule`: its name, LLVM symbol and parameters."""

    module: "CrossModule"
    name: str
    symbol: str
    specs: list[ParamSpec]
    scalar_params: tuple    # names of scalar (non-buffer) parameters, in order

    def __call__(self, *arrays: Any) -> None:
        m = self.module.machine
        raise BuildError(
            f"{self.name} was compiled for {m.name} ({m.triple}), which this machine cannot "
            "run: export it with rt.export_library('kernel.so') and run the library on the "
            "board, or under qemu-aarch64 with engine.deploy.run_under_qemu(path, "
            f"{self.name!r}, inputs)")


class CrossModule(FunctionTable):
    """Object code for :attr:`machine` (see the module docstring)."""

    def __init__(self, machine: Machine, objects: list[bytes], opt_texts: list[str],
                 ll_text: str, lowered: dict, infos: dict, options: dict,
                 compile_stats: dict):
        self.machine = machine
        #: the object files (ELF for the machine), the kernels' module first
        self.objects = list(objects)
        self._opt_texts = list(opt_texts)
        self._ll_text = ll_text
        self.lowered = lowered
        self.infos = infos
        self.options = options
        self.compile_stats = compile_stats
        self._asm: str | None = None
        self._functions = {}
        for name, info in infos.items():
            lf = lowered[name]
            scalars = tuple(p.name for p in info.orig_params if not isinstance(p, Buffer))
            self._functions[name] = CrossFunction(self, name, info.symbol,
                                                  make_specs(info.params, info.orig_params,
                                                             lf.body), scalars)

    @property
    def target(self) -> str:
        """The target string this module was built for."""
        return self.machine.target_string

    def _optimised_ir(self) -> str:
        return join_units(self._opt_texts)

    def _assembly(self) -> str:
        if self._asm is None:
            level = self.options.get("opt_level", 3)
            self._asm = join_assembly([emit_machine_assembly(t, self.machine, level)
                                       for t in self._opt_texts])
        return self._asm

    def export_library(self, path: Any, **options: Any) -> Any:
        """Write the kernels as a shared library for :attr:`machine` and its C header
        (:func:`engine.deploy.export_library`; ``prefix=``); returns what was written."""
        from engine.ir import deployment
        return deployment.call("export", self, path, **options)

    def time_evaluator(self, func_name: str, *args: Any, **kwargs: Any):
        """Not available: this machine cannot run the code (the sentence says what can)."""
        self[func_name](*args)   # raises the sentence

    def __repr__(self) -> str:
        return f"<engine.runtime.CrossModule for {self.machine.name}: " \
               f"{', '.join(self._functions)}>"


def compile_cross(lowered: list, opts: dict, machine: Machine) -> CrossModule:
    """Generate, optimise and emit ``lowered`` [(name, lowered PrimFunc)] for ``machine``."""
    from engine.codegen.llvm import codegen_units
    from engine.codegen.units import compile_units, unit_texts

    t0 = time.perf_counter()
    ir_mods, infos = codegen_units(lowered, fast_math=bool(opts["fast_math"]))
    texts = unit_texts(ir_mods, opts["opt_level"], machine=machine)
    t1 = time.perf_counter()
    try:
        units = compile_units(texts, opts["opt_level"],
                              auto_vectorize=bool(opts["auto_vectorize"]),
                              unroll_first=any(i.num_unrolled_loops for i in infos.values()),
                              machine=machine)
    except RuntimeError as exc:  # a codegen bug: say so clearly
        raise BuildError(f"internal error: generated LLVM IR is invalid: {exc}") from exc
    t2 = time.perf_counter()
    stats = {"codegen": t1 - t0, "llvm_opt": t2 - t1, "total": t2 - t0,
             "llvm_modules": len(units),
             "parallel_loops": sum(i.num_parallel for i in infos.values()),
             "vectorize_fallbacks": sum(i.num_vector_fallbacks for i in infos.values())}
    return CrossModule(machine, [u.obj for u in units], [u.opt_text for u in units],
                       join_units(texts), dict(lowered), infos,
                       {"fast_math": bool(opts["fast_math"]), "opt_level": opts["opt_level"],
                        "target": machine.target_string}, stats)

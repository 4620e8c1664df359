"""``export_library``: a built module as one shared library and its C header.

::

    rt = engine.build(mod)                      # a TensorIR build
    rt.export_library("kernel.so")              # kernel.so + kernel.h
    ex = engine.relax.build(mlp)                # a Relax executable (weights bound)
    lib = ex.export_library("mlp.so", prefix="mlp")   # int mlp_main(const float* x, float* out)

Steps: the :class:`~.plan.Plan` (what the library holds, refusals with a sentence), the
kernels through the engine's own code generator (:func:`engine.codegen.llvm.codegen`, on the
lowered functions the build kept), the entry points and weights as LLVM IR
(:mod:`.entry_points`), both compiled for the :class:`~.targets.DeployTarget`, linked with
the thread pool when a kernel has a parallel loop; the header next to the library.
"""
from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.codegen.intrinsics import IntrinsicMixin
from engine.codegen.llvm import LAUNCH_SYMBOL, codegen
from engine.relax.vm import Executable
from engine.runtime import Module
from engine.runtime.cross import CrossModule

from .entry_points import entry_module
from .metadata import (METADATA_SYMBOL, build_metadata, header_text, metadata_json,
                       symbol_of)
from .plan import Plan, plan_relax, plan_tir
from .targets import DeployError, DeployTarget, get_target

#: what a kernel may call besides LLVM's intrinsics: libc, libm, the thread pool
ALLOWED_EXTERNALS = frozenset(
    {"aligned_alloc", "free", "memset", "memcpy", "memmove", LAUNCH_SYMBOL,
     "engine_runtime_thread_index"}
    | {s for pair in IntrinsicMixin._LIBM.values() for s in pair})


@dataclass
class ExportedLibrary:
    """What :func:`export_library` wrote: the library, its header, its metadata."""

    path: Path
    header: Path
    metadata: dict
    prefix: str
    target: DeployTarget
    file_bytes: int
    constants_bytes: int
    seconds: dict = field(default_factory=dict)

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)


def normalize_prefix(prefix: str) -> str:
    """A C identifier ending in ``_``: ``"mlp"`` and ``"mlp_"`` give ``mlp_``."""
    p = re.sub(r"\W", "_", prefix)
    if not p:
        raise DeployError("the prefix of an exported library must have a letter or a digit "
                          f"in it, got {prefix!r}")
    if p[0].isdigit():
        p = "_" + p
    return p if p.endswith("_") else p + "_"


def _check_path(path: Any) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise DeployError(f"export_library needs a file path such as \"mlp.so\", got "
                          f"{type(path).__name__}")
    p = Path(path)
    if not p.name or p.name in (".", ".."):
        raise DeployError(f"export_library needs a file path such as \"mlp.so\", got "
                          f"{str(path)!r}")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise DeployError(f"cannot write {str(p)!r}: the directory {str(parent)!r} does not "
                          "exist; create it first (os.makedirs) or choose another path")
    if p.is_dir():
        raise DeployError(f"cannot write {str(p)!r}: it is a directory; give a file name "
                          "such as \"mlp.so\"")
    return p


def _built_for(built: Any) -> str | None:
    """The board a build or an executable was compiled for (its target string), None for
    this machine: a library is exported for it unless another target is given."""
    cross = built if isinstance(built, CrossModule) else getattr(built, "kernels", None)
    return cross.target if isinstance(cross, CrossModule) else None


def make_plan(built: Any) -> Plan:
    """The plan of a TensorIR build or a Relax executable (a sentence for anything else)."""
    if isinstance(built, (Module, CrossModule)):
        return plan_tir(built)
    if isinstance(built, Executable):
        return plan_relax(built)
    raise DeployError(f"export_library exports the module of engine.build or the executable "
                      f"of relax.build, got {type(built).__name__}")


def _check_externals(kmod: Any, plan: Plan) -> None:
    """Refuse a kernel that calls outside code (an extern function, imported LLVM IR)."""
    for fn in kmod.functions:
        if not fn.is_declaration or fn.name.startswith("llvm.") or \
                fn.name in ALLOWED_EXTERNALS or fn.name.startswith("engine_fn_"):
            continue
        raise DeployError(f"a kernel calls the extern function {fn.name!r} (opaque code "
                          "linked into the engine's process): an exported library holds only "
                          "code the engine generates; replace the call by TensorIR (for a "
                          "tensor intrinsic: build without tensorize) and export again")


def kernel_object(plan: Plan, target: DeployTarget, opt_level: int = 3
                  ) -> tuple[bytes, dict, int]:
    """The kernels compiled for ``target``: (object code, kernel name -> symbol, number of
    parallel loops)."""
    funcs = list(plan.kernels.items())
    if not funcs:
        return b"", {}, 0
    kmod, infos = codegen(funcs, module_name="kernels", fast_math=plan.fast_math)
    _check_externals(kmod, plan)
    target.set_target(kmod, opt_level)
    obj = target.emit_object(str(kmod), opt_level)
    return obj, {n: i.symbol for n, i in infos.items()}, \
        sum(i.num_parallel for i in infos.values())


def export_library(built: Any, path: Any, prefix: str | None = None, target: Any = None,
                   opt_level: int = 3) -> ExportedLibrary:
    """Write ``path`` (a shared library) and ``<stem>.h`` next to it; see the module
    docstring. ``prefix`` (default: the file's stem) names the C functions
    ``<prefix>_<function>``; ``target`` is where the library runs (None: this machine, or the board a
    :class:`~engine.runtime.cross.CrossModule` was built for)."""
    t0 = time.perf_counter()
    out = _check_path(path)
    tgt = get_target(target if target is not None else _built_for(built))
    plan = make_plan(built)
    prefix = normalize_prefix(prefix if prefix is not None else out.name.split(".")[0])
    meta = build_metadata(plan, prefix, tgt)
    t1 = time.perf_counter()
    kobj, symbols, n_parallel = kernel_object(plan, tgt, opt_level)
    t2 = time.perf_counter()
    emod = entry_module(plan, prefix, symbols, metadata_json(meta), tgt)
    eobj = tgt.emit_object(str(emod), opt_level)
    t3 = time.perf_counter()
    exports = [symbol_of(prefix, e.name) for e in plan.entries] + \
        [prefix + "metadata", METADATA_SYMBOL]
    with tempfile.TemporaryDirectory(prefix="engine-export-") as tmp:
        work = Path(tmp)
        objects = [work / "entry_points.o"]
        objects[0].write_bytes(eobj)
        if kobj:
            objects.append(work / "kernels.o")
            objects[1].write_bytes(kobj)
        if n_parallel:
            objects += tgt.runtime_objects(work)
        staged = work / ("lib" + tgt.library_suffix)
        tgt.link(objects, staged, exports, work)
        fd, part = tempfile.mkstemp(prefix=f".{out.name}.", dir=str(out.parent))
        os.close(fd)
        try:
            Path(part).write_bytes(staged.read_bytes())
            os.chmod(part, 0o755)
            os.replace(part, out)   # a library being loaded elsewhere is never half-written
        finally:
            if os.path.exists(part):
                os.unlink(part)
    header = out.with_name(out.name.split(".")[0] + ".h")
    header.write_text(header_text(meta, header.stem))
    t4 = time.perf_counter()
    return ExportedLibrary(out, header, meta, prefix, tgt, out.stat().st_size,
                           meta["constants_bytes"],
                           {"plan": t1 - t0, "kernels": t2 - t1, "entry_points": t3 - t2,
                            "link": t4 - t3, "total": t4 - t0})

"""The ARM board target of an exported library: aarch64 Linux, cross-linked here.

``rt.export_library("k.so", target="llvm -mtriple=aarch64-linux-gnu")`` (or
``"raspberry-pi-5"``, or an ``rt`` built for that target) emits the kernels and the entry
points with LLVM's AArch64 backend (the :class:`engine.codegen.machine.Machine` the target
string names: its CPU and features, NEON), compiles the thread pool
(``engine/runtime/parallel.c``) with Debian's cross compiler ``aarch64-linux-gnu-gcc`` and
links everything with it into one shared object that needs only the board's libc and libm.
:mod:`engine.deploy.qemu` runs such a library on this machine under ``qemu-aarch64``.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from engine.codegen.machine import Machine, TargetStringError, parse_machine, target_machine

from .qemu import cross_compiler
from .targets import PARALLEL_C, DeployError, DeployTarget, _cache_dir, register_target, \
    run_tool


@dataclass(frozen=True)
class Aarch64Target(DeployTarget):
    """An aarch64 Linux board: objects from LLVM's AArch64 backend, the thread pool and
    the link by ``aarch64-linux-gnu-gcc``."""

    def target_machine(self, opt_level: int = 3):
        """LLVM's AArch64 target machine (its backends initialised on first use)."""
        return target_machine(self.machine, opt_level)

    def runtime_objects(self, workdir: Path) -> list[Path]:
        """parallel.c cross-compiled (``-O2 -fPIC -pthread``), cached by its hash."""
        cc = cross_compiler()
        flags = ["-O2", "-fPIC", "-pthread", "-fvisibility=hidden", f"-mcpu={self._gcc_cpu()}",
                 *self.cflags]
        key = hashlib.sha256(PARALLEL_C.read_bytes() + " ".join([cc, *flags]).encode())
        cache = _cache_dir() / f"engine_parallel_aarch64_{key.hexdigest()[:16]}.o"
        if not cache.exists():
            fd, tmp = tempfile.mkstemp(suffix=".o", dir=str(cache.parent))
            os.close(fd)
            try:
                run_tool([cc, *flags, "-c", str(PARALLEL_C), "-o", tmp],
                         "cross-compiling the thread pool (parallel.c) for aarch64")
                os.replace(tmp, cache)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        return [cache]

    def _gcc_cpu(self) -> str:
        return self.cpu if self.cpu.startswith("cortex-") else "generic"

    def link(self, objects: list[Path], out: Path, exports: list[str],
             workdir: Path) -> None:
        """One shared object for the board, exporting only ``exports`` (libc, libm)."""
        script = workdir / "exports.map"
        names = "".join(f"    {n};\n" for n in exports)
        script.write_text(f"{{\n  global:\n{names}  local: *;\n}};\n")
        run_tool([cross_compiler(), "-shared", "-fPIC", "-pthread", "-o", str(out),
                  *map(str, objects), f"-Wl,--version-script={script}", "-Wl,--as-needed",
                  "-lm"], f"linking {out.name} for aarch64")

    @property
    def machine(self) -> Machine:
        return Machine(self.name, self.triple, self.cpu, self.features)


def link_kernels(rt, out: str | os.PathLike) -> Path:
    """Link a build for the board (:class:`engine.runtime.cross.CrossModule`) as it is —
    its kernels' own symbols (``engine_fn_<name>``), no entry points, no metadata — into
    the shared object ``out`` with the cross-compiled thread pool: what the explorer's
    workers run under qemu for a step (an export is ``rt.export_library``'s)."""
    machine = getattr(rt, "machine", None)
    if machine is None or machine.arch != "aarch64":
        raise DeployError("link_kernels takes a module built for aarch64 "
                          "(engine.build(mod, target='llvm -mtriple=aarch64-linux-gnu'))")
    target = target_of(machine)
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="engine-aarch64-") as tmp:
        work = Path(tmp)
        objects = []
        for k, obj in enumerate(rt.objects):
            f = work / f"unit{k}.o"
            f.write_bytes(obj)
            objects.append(f)
        target.link(objects + target.runtime_objects(work), out,
                    [rt[name].symbol for name in rt.names()], work)
    return out


def target_of(machine: Machine) -> Aarch64Target:
    """The deploy target of a board the engine builds for."""
    return Aarch64Target(machine.name, machine.triple, machine.cpu, machine.features)


def read_aarch64(text: str) -> Aarch64Target | None:
    """The :class:`Aarch64Target` a target string names, None when it names another
    machine (the host, wasm32)."""
    try:
        machine = parse_machine(text)
    except TargetStringError as exc:
        if "-mtriple=aarch64" in text or "-mtriple=arm64" in text:
            raise DeployError(str(exc)) from None
        return None
    if machine is None or machine.arch != "aarch64":
        return None
    return target_of(machine)


read_aarch64.target_names = "'llvm -mtriple=aarch64-linux-gnu' / 'raspberry-pi-5' (an ARM board)"
register_target(read_aarch64)

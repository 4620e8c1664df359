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

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from engine.codegen.machine import Machine, TargetStringError, parse_machine, target_machine

from .qemu import cross_compiler
from .targets import DeployError, DeployTarget, register_target


@dataclass(frozen=True)
class Aarch64Target(DeployTarget):
    """An aarch64 Linux board: objects from LLVM's AArch64 backend, the thread pool and
    the link by ``aarch64-linux-gnu-gcc``."""

    def target_machine(self, opt_level: int = 3):
        """LLVM's AArch64 target machine (its backends initialised on first use)."""
        return target_machine(self.machine, opt_level)

    def c_compiler(self) -> str:
        """Debian's cross compiler ``aarch64-linux-gnu-gcc`` (or the sentence to install it)."""
        return cross_compiler()

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
    gcc_cpu = machine.cpu if machine.cpu.startswith("cortex-") else "generic"
    return Aarch64Target(machine.name, machine.triple, machine.cpu, machine.features,
                         cflags=(f"-mcpu={gcc_cpu}",))


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

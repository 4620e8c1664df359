"""The machine a build emits code for: the host, or another CPU named by an LLVM triple.

``engine.build(mod, target=...)`` reads its target string here:

* ``"llvm"`` (or ``"llvm -mtriple=<the host's triple>"``) — the host CPU, JIT-compiled
  into the process (:data:`None` is returned for it: the host needs no description);
* ``"llvm -mtriple=aarch64-linux-gnu"`` (optionally ``-mcpu=cortex-a76``,
  ``-mattr=+neon``) — a 64-bit ARM board running Linux: LLVM's AArch64 backend emits
  position-independent object code that cannot run in this process; it is exported as a
  shared library (``rt.export_library``) and run on the board or under ``qemu-aarch64``;
* a named board (:data:`NAMED_MACHINES`): ``"raspberry-pi-5"`` (Cortex-A76, NEON).

A :class:`Machine` gives the LLVM target machine (:func:`target_machine`) the optimisation
pipeline and the code emission use, so the O3 pipeline's cost model, the SLP vectorizer and
instruction selection are the target's own.
"""
from __future__ import annotations

import shlex
import threading
from dataclasses import dataclass

import llvmlite.binding as llvm

from .target import init_llvm

_all_targets_lock = threading.Lock()
_all_targets_ready = False


@dataclass(frozen=True)
class Machine:
    """A CPU other than the host: LLVM triple, CPU name and feature string."""

    name: str          # what the learner sees: "aarch64-linux-gnu", "raspberry-pi-5"
    triple: str        # LLVM's target triple
    cpu: str           # LLVM's CPU name ("generic", "cortex-a76")
    features: str      # LLVM's feature string ("+neon,+fp-armv8")

    @property
    def arch(self) -> str:
        """The triple's architecture ("aarch64")."""
        return self.triple.split("-")[0]

    @property
    def target_string(self) -> str:
        """The ``target=`` string that names this machine."""
        if self.name in NAMED_MACHINES:
            return self.name
        parts = ["llvm", f"-mtriple={self.triple}"]
        if self.cpu != "generic":
            parts.append(f"-mcpu={self.cpu}")
        return " ".join(parts)


#: the default features of an architecture when the target string names none
_DEFAULT_FEATURES = {"aarch64": "+neon,+fp-armv8"}

#: boards named by a word (``target="raspberry-pi-5"``)
NAMED_MACHINES = {
    "raspberry-pi-5": Machine("raspberry-pi-5", "aarch64-linux-gnu", "cortex-a76",
                              "+neon,+fp-armv8,+crc,+crypto,+dotprod,+fullfp16,+rcpc"),
}

#: the architectures the engine compiles for besides the host (a triple of another one is
#: refused with a sentence: nothing here could link or run it)
CROSS_ARCHS = ("aarch64",)


class TargetStringError(ValueError):
    """A target string the engine cannot compile for (the sentence says what it accepts)."""


def _ensure_all_targets() -> None:
    """Initialise every LLVM backend llvmlite carries (once): the host's alone cannot emit
    code for another CPU."""
    global _all_targets_ready
    init_llvm()
    with _all_targets_lock:
        if _all_targets_ready:
            return
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _all_targets_ready = True


def host_triple() -> str:
    """The triple of the process's own CPU (``x86_64-unknown-linux-gnu``)."""
    init_llvm()
    return llvm.get_process_triple()


def _same_arch(triple: str, other: str) -> bool:
    return triple.split("-")[0] == other.split("-")[0]


def parse_machine(target: str) -> Machine | None:
    """The :class:`Machine` a target string names, or None for the host CPU.

    Raises :class:`TargetStringError` for a string that is not an ``llvm`` target, an
    option it does not know, or a triple of an architecture it does not compile for.
    """
    if not isinstance(target, str) or not target.strip():
        raise TargetStringError(f"a target must be a non-empty string, got {target!r}")
    text = target.strip()
    if text in NAMED_MACHINES:
        return NAMED_MACHINES[text]
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise TargetStringError(f"cannot read the target {target!r}: {exc}") from None
    if words[0] != "llvm":
        raise TargetStringError(
            f"unsupported target {target!r}: use 'llvm' (this CPU), "
            "'llvm -mtriple=aarch64-linux-gnu' (an ARM board) or one of "
            f"{sorted(NAMED_MACHINES)}")
    options = {}
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if key in ("-mtriple", "-mcpu", "-mattr"):
            if not eq or not value:
                raise TargetStringError(f"option {key} of target {target!r} needs a value "
                                        f"({key}=...)")
            options[key] = value
    triple = options.get("-mtriple")
    if triple is None or _same_arch(triple, host_triple()):
        # the host: its own CPU name and features, as every host build (other options —
        # TVM's -mcpu, -num-cores — change nothing here)
        return None
    arch = triple.split("-")[0]
    if arch not in CROSS_ARCHS:
        raise TargetStringError(
            f"target {target!r}: the engine compiles for this CPU and for "
            f"{', '.join(CROSS_ARCHS)} ('llvm -mtriple=aarch64-linux-gnu'), not {arch!r}")
    machine = Machine(name=triple, triple=triple, cpu=options.get("-mcpu", "generic"),
                      features=options.get("-mattr", _DEFAULT_FEATURES.get(arch, "")))
    _check_known(machine, target)
    return machine


def _check_known(machine: Machine, target: str) -> None:
    """LLVM knows the triple and the CPU (a misspelt CPU would otherwise only warn)."""
    _ensure_all_targets()
    try:
        llvm.Target.from_triple(machine.triple)
    except RuntimeError as exc:
        raise TargetStringError(f"target {target!r}: LLVM does not know the triple "
                                f"{machine.triple!r} ({str(exc).strip()})") from None


def is_cross(target: str) -> bool:
    """True when ``target`` names a machine other than the host (raises for a bad one)."""
    return parse_machine(target) is not None


def target_machine(machine: Machine, opt_level: int = 3):
    """A new LLVM TargetMachine for ``machine``: position-independent code (a shared
    library's), the default code model."""
    _ensure_all_targets()
    target = llvm.Target.from_triple(machine.triple)
    return target.create_target_machine(cpu=machine.cpu, features=machine.features,
                                        opt=min(max(opt_level, 0), 3), reloc="pic",
                                        codemodel="default")


def set_machine_target(module, machine: Machine, opt_level: int = 3) -> None:
    """Give ``module`` (llvmlite ``ir.Module`` or parsed) ``machine``'s triple and layout."""
    tm = target_machine(machine, opt_level)
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)


def emit_machine_assembly(ll_text: str, machine: Machine, opt_level: int = 3) -> str:
    """The assembly of an LLVM IR module for ``machine`` (AArch64 syntax for aarch64)."""
    tm = target_machine(machine, opt_level)
    mod = llvm.parse_assembly(ll_text)
    try:
        return tm.emit_assembly(mod)
    finally:
        mod.close()

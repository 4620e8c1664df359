"""Where an exported library runs: everything target-specific about making one.

A :class:`DeployTarget` says, for one kind of machine,

* what LLVM compiles for — ``triple``, ``cpu``, ``features`` and :meth:`target_machine`
  (position-independent code: a shared library's);
* how LLVM IR becomes an object file (:meth:`emit_object`: the engine's O3 pipeline, then
  llvmlite's ``emit_object``);
* how the thread pool (``engine/runtime/parallel.c``) is compiled for it
  (:meth:`runtime_objects`; a target without threads gives a serial launcher instead);
* how the objects are linked into the one file the user ships (:meth:`link`: for the host
  ``cc -shared`` with a version script that exports only the library's own entry points, so
  no symbol of ours can clash with another library's, and nothing but libc/libm needed).

:data:`HOST` is this machine (its CPU name and features, as ``engine.build`` compiles for).
Other targets (an ARM board, wasm32) are added with :func:`register_target`: a function that
reads a target string and returns a :class:`DeployTarget` for it, or None when the string
is not its own. :func:`get_target` turns what the user wrote (``None``, ``"llvm"``, a target
string, a :class:`DeployTarget`) into a target, or raises :class:`DeployError` with a
sentence.
"""
from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import llvmlite.binding as llvm

from engine.codegen.target import host_cpu, init_llvm, optimize
from engine.lower.errors import BuildError
from engine.runtime.native_files import build_once, cache_dir, find_c_compiler

#: the C source of the thread pool a library links statically
PARALLEL_C = Path(__file__).resolve().parent.parent / "runtime" / "parallel.c"


class DeployError(BuildError):
    """A module that cannot be exported (or a file that cannot be loaded back): the
    sentence says what was wrong and what to do."""


def _c_compiler() -> str:
    cc = find_c_compiler()
    if cc is None:
        raise DeployError("exporting a library needs a C compiler to link it, and none "
                          "(cc, gcc, clang) was found: install one (Debian: apt-get install "
                          "gcc)")
    return cc


def run_tool(argv: list[str], what: str, timeout: float = 120) -> None:
    """Run a compiler or linker; its failure becomes a :class:`DeployError` naming ``what``
    with the tool's own message."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise DeployError(f"{what} needs {argv[0]!r}, which is not installed") from None
    except subprocess.TimeoutExpired:
        raise DeployError(f"{what} did not finish in {timeout:.0f} s ({' '.join(argv)})") \
            from None
    if proc.returncode != 0:
        raise DeployError(f"{what} failed ({' '.join(argv)}):\n{proc.stderr.strip()}")


@dataclass(frozen=True)
class DeployTarget:
    """One kind of machine an exported library is made for (see the module docstring).

    The defaults are those of a Linux ELF target linked by the system C compiler; a target
    for another machine gives its own triple, CPU, features and :attr:`cflags` and overrides
    :meth:`c_compiler` (a cross compiler) or :meth:`link` and :meth:`runtime_objects` (a
    serial launcher, another linker).
    """

    name: str                 # what the user and the metadata see: "host", "aarch64-linux-gnu"
    triple: str               # LLVM's target triple
    cpu: str                  # LLVM's CPU name
    features: str             # LLVM's feature string
    library_suffix: str = ".so"
    #: True when parallel.c is compiled in (a target without threads links a serial
    #: ``engine_parallel_launch`` instead)
    threads: bool = True
    #: extra flags for the C compiler that builds parallel.c for this target
    cflags: tuple = field(default=())

    def target_machine(self, opt_level: int = 3):
        """A new LLVM TargetMachine for this target, emitting position-independent code."""
        init_llvm()
        target = llvm.Target.from_triple(self.triple)
        return target.create_target_machine(cpu=self.cpu, features=self.features,
                                            opt=min(max(opt_level, 0), 3), reloc="pic",
                                            codemodel="default")

    def set_target(self, module, opt_level: int = 3) -> None:
        """Give an llvmlite module this target's triple and data layout."""
        tm = self.target_machine(opt_level)
        module.triple = tm.triple
        module.data_layout = str(tm.target_data)

    def emit_object(self, ll_text: str, opt_level: int = 3, optimise: bool = True) -> bytes:
        """An object file of LLVM IR text: parsed, verified, optimised by the engine's
        pipeline (``optimise``) and emitted for this target."""
        init_llvm()
        ctx = llvm.create_context()
        try:
            mod = llvm.parse_assembly(ll_text, ctx)
            try:
                tm = self.target_machine(opt_level)
                mod.triple = tm.triple
                mod.data_layout = str(tm.target_data)
                mod.verify()
                if optimise:
                    optimize(mod, tm, opt_level)
                return tm.emit_object(mod)
            finally:
                mod.close()
        finally:
            ctx.close()

    def c_compiler(self) -> str:
        """The path of the C compiler that compiles and links for this target."""
        return _c_compiler()

    def runtime_objects(self, workdir: Path) -> list[Path]:
        """The thread pool compiled for this target (``cc -O2 -fPIC -pthread``, hidden
        symbols, plus :attr:`cflags`), cached by the hash of its source and flags; objects
        to link into every library."""
        cc = self.c_compiler()
        flags = ["-O2", "-fPIC", "-pthread", "-fvisibility=hidden", *self.cflags]
        key = hashlib.sha256(PARALLEL_C.read_bytes() + " ".join([cc, *flags]).encode())
        cached = cache_dir() / f"engine_parallel_{self.name}_{key.hexdigest()[:16]}.o"
        return [build_once(cached, lambda tmp: run_tool(
            [cc, *flags, "-c", str(PARALLEL_C), "-o", tmp],
            f"compiling the thread pool (parallel.c) for {self.name}"), suffix=".o")]

    def link(self, objects: list[Path], out: Path, exports: list[str],
             workdir: Path) -> None:
        """Link ``objects`` into the shared library ``out``, exporting only ``exports``
        (NEEDED: libc, libm)."""
        script = workdir / "exports.map"
        names = "".join(f"    {n};\n" for n in exports)
        script.write_text(f"{{\n  global:\n{names}  local: *;\n}};\n")
        run_tool([self.c_compiler(), "-shared", "-fPIC", "-pthread", "-o", str(out),
                  *map(str, objects), f"-Wl,--version-script={script}", "-Wl,--as-needed",
                  "-lm"], f"linking {out.name} for {self.name}")

    def describe(self) -> str:
        return f"{self.name} ({self.triple}, cpu {self.cpu})"


def host_target() -> DeployTarget:
    """This machine: its triple, CPU name and features (what ``engine.build`` uses)."""
    init_llvm()
    cpu, feats = host_cpu()
    return DeployTarget("host", llvm.get_process_triple(), cpu, feats)


#: readers of target strings for other machines, tried in order (``register_target``)
_READERS: list[Callable[[str], "DeployTarget | None"]] = []

_HOST_WORDS = {"llvm", "host", "native"}


def register_target(reader: Callable[[str], "DeployTarget | None"]) -> None:
    """Add a reader of target strings: ``reader(text)`` returns a :class:`DeployTarget`
    for a string it knows (``"llvm -mtriple=aarch64-linux-gnu"``, ``"wasm32"``), else None;
    it may raise :class:`DeployError` for a string of its own that is wrong."""
    if reader not in _READERS:
        _READERS.append(reader)


def get_target(target: "str | DeployTarget | None" = None) -> DeployTarget:
    """The :class:`DeployTarget` for what the user wrote: None, ``"llvm"`` (this machine,
    also ``"llvm -mcpu=..."`` options that name nothing else), a string a registered reader
    knows, or a :class:`DeployTarget`."""
    if target is None or isinstance(target, DeployTarget):
        return target or host_target()
    if not isinstance(target, str):
        target = str(getattr(target, "target_string", None) or target)
    text = target.strip()
    for reader in _READERS:
        got = reader(text)
        if got is not None:
            return got
    words = text.split()
    if words and words[0] in _HOST_WORDS and not any(w.startswith("-mtriple=") for w in words):
        return host_target()
    if words and words[0] == "llvm":
        triple = next(w.split("=", 1)[1] for w in words if w.startswith("-mtriple="))
        init_llvm()
        if triple.split("-")[0] == llvm.get_process_triple().split("-")[0]:
            return host_target()
    raise DeployError(f"cannot export for the target {target!r}: this engine exports for "
                      "'llvm' (this machine)" + _other_targets())


def _other_targets() -> str:
    names = [getattr(r, "target_names", None) for r in _READERS]
    names = [n for n in names if n]
    return ("" if not names else " and " + ", ".join(n for n in names)) + \
        "; pass target=None for this machine"

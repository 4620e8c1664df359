"""``tvm.contrib.clang``: C or C++ compiled to LLVM IR text with the system's ``clang`` —
what the course links into a program with ``sch.annotate(loop, "pragma_import_llvm",
ll_code)`` (see :func:`engine.runtime.build`'s ``link_extern``).

``create_llvm(code_or_paths, output=None, options=None, cc=None)`` runs
``clang -S -emit-llvm [options] -o output input.cc`` (a fixed argument list, no shell, with
a timeout; source code is written to a temporary file first) and returns the text. Two
differences from TVM's: without ``options`` it adds ``-O3`` (TVM adds nothing, so clang's
``-O0``: unoptimised code marked ``optnone``), and ``find_clang`` looks for the clang of
llvmlite's LLVM (``clang-22``) before Debian's ``clang``.

Debian 12's ``clang`` is clang 14, llvmlite's LLVM is 22: LLVM 22 reads clang 14's text as
it is (its typed pointers, ``float*``, become ``ptr``; ``readnone``/``argmemonly`` function
attributes are upgraded to ``memory(...)``), so the text is linked unchanged; a text LLVM 22
cannot read is refused by the build with LLVM's message.
"""
from __future__ import annotations

import subprocess

from . import utils

__all__ = ["find_clang", "create_llvm"]

#: how long one clang run may take (seconds)
TIMEOUT = 120


def _llvm_major() -> int | None:
    try:
        import llvmlite.binding as llvm
        return int(llvm.llvm_version_info[0])
    except Exception:  # noqa: BLE001 - no llvmlite: any clang
        return None


def find_clang(required: bool = True) -> list[str]:
    """The clang executables found: the one of llvmlite's LLVM version first, then
    ``clang``. RuntimeError naming the candidates when there is none and ``required``."""
    names = []
    major = _llvm_major()
    if major is not None:
        names += [f"clang-{major}.0", f"clang-{major}"]
    names += ["clang"]
    found = [p for p in (utils.which(n) for n in names) if p]
    if not found and required:
        raise RuntimeError(f"cannot find clang, candidates are: {names} (on Debian: "
                           "apt-get install clang; scripts/setup.sh installs it)")
    return found


def create_llvm(inputs, output: str | None = None, options: list | None = None,
                cc: str | None = None) -> str:
    """LLVM IR text of ``inputs`` (source code, a path, or a list of them), compiled by
    clang (``cc``, else :func:`find_clang`'s first) with ``options`` (default ``-O3``)."""
    cc = cc if cc else find_clang()[0]
    temp = utils.tempdir()
    output = output if output else temp.relpath("output.ll")
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    files = []
    for i, code in enumerate(inputs):
        if utils.is_source_path(code):
            files.append(code)
        else:
            path = temp.relpath(f"input{i}.cc")
            with open(path, "w", encoding="utf-8") as f:
                f.write(code)
            files.append(path)
    cmd = [cc, "-S", "-emit-llvm"]
    cmd += [str(o) for o in options] if options else ["-O3"]
    cmd += ["-o", output] + files
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"Compilation error:\nclang took more than {TIMEOUT} s") from exc
    if proc.returncode != 0:
        raise RuntimeError("Compilation error:\n" + proc.stdout.decode("utf-8", "replace"))
    with open(output, encoding="utf-8") as f:
        return f.read()

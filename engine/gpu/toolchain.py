"""NVIDIA's compilers from the CUDA 12 Python wheels: ptxas (PTX -> cubin) and NVRTC
(CUDA C++ -> PTX). No GPU is needed for either.

* :func:`start_assembly` — the same, started in the background: a :class:`PendingAssembly`
  whose ``result()`` waits for it (a build need not wait for ptxas before it runs the
  kernels);
* :func:`assemble_ptx` — ``ptxas -v`` on a PTX text for one arch: an :class:`AssemblyReport`
  (the cubin's bytes, and per kernel the registers, shared memory, stack and spills that
  ptxas reports).
* :func:`compile_cuda` — CUDA C++ source to PTX with NVRTC (``--gpu-architecture=compute_XX``).
* :func:`toolchain_status` — which tools are installed, where, and their versions.
* :func:`parse_ptxas_info` — ``ptxas -v``'s report read into :class:`KernelResources`.

Where the tools come from: ``ptxas`` is ``nvidia/cuda_nvcc/bin/ptxas`` of the package
``nvidia-cuda-nvcc-cu12``; NVRTC is ``nvidia/cuda_nvrtc/lib/libnvrtc.so.12`` of
``nvidia-cuda-nvrtc-cu12`` (both found through Python's import system, where pip put them).
``scripts/setup.sh`` installs both (the ``gpu`` extra of ``pyproject.toml``). A missing tool
is a :class:`ToolchainError` saying which package to install and how.

Both run in a subprocess with a timeout: ptxas is a program; NVRTC is a library, loaded by
ctypes in a Python subprocess (:mod:`engine.gpu.nvrtc_process`), so neither a crash nor a
hang reaches the caller.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import shutil
import tempfile
import time
from dataclasses import dataclass

from .specs import SUPPORTED_ARCHS

#: seconds a tool may run before it is killed
DEFAULT_TIMEOUT_S = 60.0

#: the wheels, as pyproject.toml's ``gpu`` extra pins them
PTXAS_PACKAGE = "nvidia-cuda-nvcc-cu12"
NVRTC_PACKAGE = "nvidia-cuda-nvrtc-cu12"
BINDINGS_PACKAGE = "cuda-bindings"
VERSION_PIN = ">=12.4,<13"

_NVRTC_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvrtc_process.py")


class ToolchainError(RuntimeError):
    """A CUDA tool is missing, failed, or refused its input (its own message included)."""


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one kernel (``.entry``) of a PTX text; sizes in bytes."""

    name: str
    arch: str
    registers: int
    shared_bytes: int = 0      # static shared memory ("smem")
    stack_bytes: int = 0       # "stack frame"
    spill_stores: int = 0      # bytes
    spill_loads: int = 0       # bytes
    constant_bytes: int = 0    # "cmem[0]": the kernel's parameters and constants
    barriers: int = 0


@dataclass(frozen=True)
class AssemblyReport:
    """ptxas's result: the cubin and every kernel's resources; the single-kernel shortcuts
    (``registers``, ...) give the largest (spills: the total) over the kernels."""

    arch: str
    cubin: bytes
    kernels: tuple[KernelResources, ...]
    log: str                   # ptxas's -v output, as printed

    def kernel(self, name: str) -> KernelResources:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(f"no kernel {name!r}; kernels: {[k.name for k in self.kernels]}")

    @property
    def registers(self) -> int:
        return max((k.registers for k in self.kernels), default=0)

    @property
    def shared_bytes(self) -> int:
        return max((k.shared_bytes for k in self.kernels), default=0)

    @property
    def spill_stores(self) -> int:
        return sum(k.spill_stores for k in self.kernels)

    @property
    def spill_loads(self) -> int:
        return sum(k.spill_loads for k in self.kernels)


@dataclass(frozen=True)
class ToolStatus:
    """One tool: where it is (``path``, None when missing), its version, and what to do
    when it is missing (``problem``)."""

    name: str
    package: str
    path: str | None
    version: str | None
    problem: str | None = None

    @property
    def available(self) -> bool:
        return self.path is not None and self.problem is None


@dataclass(frozen=True)
class ToolchainStatus:
    ptxas: ToolStatus
    nvrtc: ToolStatus
    cuda_bindings: ToolStatus

    @property
    def ready(self) -> bool:
        """ptxas and NVRTC both usable (the bindings are for running kernels, later)."""
        return self.ptxas.available and self.nvrtc.available

    def summary(self) -> str:
        return "; ".join(f"{t.name}: {t.version or 'missing'}"
                         for t in (self.ptxas, self.nvrtc, self.cuda_bindings))


# ---------------------------------------------------------------------------------------
# finding the tools

def install_hint(package: str) -> str:
    """The sentence telling how to install one of the wheels."""
    return (f"install the Python package {package} with: {sys.executable} -m pip install "
            f"'{package}{VERSION_PIN}' (./run-tests.sh and ./run-app.sh install it through "
            f"scripts/setup.sh)")


def _package_dir(module: str) -> str | None:
    """The folder of an installed (namespace) package such as ``nvidia.cuda_nvcc``."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _find_file(module: str, *parts: str) -> str | None:
    folder = _package_dir(module)
    if folder is None:
        return None
    path = os.path.join(folder, *parts)
    return path if os.path.isfile(path) else None


def ptxas_path() -> str:
    """The path of ptxas, or a :class:`ToolchainError` telling how to install it."""
    path = _find_file("nvidia.cuda_nvcc", "bin", "ptxas")
    if path is None:
        raise ToolchainError(f"ptxas was not found: {install_hint(PTXAS_PACKAGE)}")
    if not os.access(path, os.X_OK):
        raise ToolchainError(f"ptxas at {path} is not executable: reinstall "
                             f"{PTXAS_PACKAGE}, or chmod +x it")
    return path


def nvrtc_library_path() -> str:
    """The path of libnvrtc.so.12, or a :class:`ToolchainError` telling how to install it."""
    path = _find_file("nvidia.cuda_nvrtc", "lib", "libnvrtc.so.12")
    if path is None:
        raise ToolchainError(f"NVRTC (libnvrtc.so.12) was not found: "
                             f"{install_hint(NVRTC_PACKAGE)}")
    return path


def check_arch(arch: str) -> str:
    """``arch`` if it is one of :data:`SUPPORTED_ARCHS`, else a :class:`ToolchainError`."""
    if arch not in SUPPORTED_ARCHS:
        raise ToolchainError(f"unsupported arch {arch!r}; supported: "
                             f"{', '.join(SUPPORTED_ARCHS)}")
    return arch


# ---------------------------------------------------------------------------------------
# running them

def _run(argv: list[str], timeout: float, what: str, stdin: str | None = None,
         cwd: str | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, input=stdin, capture_output=True, text=True,
                              timeout=timeout, cwd=cwd, check=False)
    except subprocess.TimeoutExpired:
        raise ToolchainError(f"{what} did not finish within {timeout:g} s") from None
    except OSError as e:
        raise ToolchainError(f"{what} could not be started: {e}") from None


def assemble_ptx(ptx_text: str, arch: str = "sm_80", *, timeout: float = DEFAULT_TIMEOUT_S,
                 options: tuple[str, ...] = ()) -> AssemblyReport:
    """Assemble a PTX text for ``arch`` with ``ptxas -v``; ptxas's error lines in a
    :class:`ToolchainError` when it refuses the text (``kernel.ptx, line N; error ...``)."""
    check_arch(arch)
    exe = ptxas_path()
    with tempfile.TemporaryDirectory(prefix="engine-ptxas-") as tmp:
        src, out = os.path.join(tmp, "kernel.ptx"), os.path.join(tmp, "kernel.cubin")
        with open(src, "w", encoding="utf-8") as f:
            f.write(ptx_text)
        argv = [exe, f"-arch={arch}", "-v", *options, "-o", "kernel.cubin", "kernel.ptx"]
        done = _run(argv, timeout, "ptxas", cwd=tmp)
        log = (done.stdout + done.stderr).strip()
        if done.returncode != 0:
            raise ToolchainError(f"ptxas refused the PTX for {arch}:\n{log}")
        with open(out, "rb") as f:
            cubin = f.read()
    return AssemblyReport(arch=arch, cubin=cubin, kernels=parse_ptxas_info(log), log=log)


class PendingAssembly:
    """``ptxas -v`` running in the background (:func:`start_assembly`): a child process,
    started and left to run while the caller goes on (no thread of ours waits for it);
    ``result()`` waits for it and returns its :class:`AssemblyReport` or raises its
    :class:`ToolchainError`. ptxas's report is far below a pipe's buffer, so it never waits
    for us to read it."""

    def __init__(self, ptx_text: str, arch: str, timeout: float, options: tuple[str, ...]):
        self.arch = arch
        self._deadline = time.monotonic() + timeout
        self._timeout = timeout
        self._outcome: AssemblyReport | ToolchainError | None = None
        self._proc: subprocess.Popen | None = None
        self._tmp = tempfile.mkdtemp(prefix="engine-ptxas-")
        try:
            exe = ptxas_path()
            with open(os.path.join(self._tmp, "kernel.ptx"), "w", encoding="utf-8") as f:
                f.write(ptx_text)
            argv = [exe, f"-arch={arch}", "-v", *options, "-o", "kernel.cubin", "kernel.ptx"]
            try:
                self._proc = subprocess.Popen(argv, cwd=self._tmp, stdin=subprocess.DEVNULL,
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              text=True)
            except OSError as e:
                raise ToolchainError(f"ptxas could not be started: {e}") from None
        except ToolchainError as e:
            self._finish(e)

    def _finish(self, outcome) -> None:
        self._outcome = outcome
        self._proc = None
        shutil.rmtree(self._tmp, ignore_errors=True)

    def done(self) -> bool:
        return self._outcome is not None or (self._proc is not None
                                             and self._proc.poll() is not None)

    def result(self) -> AssemblyReport:
        if self._outcome is None:
            proc = self._proc
            assert proc is not None
            try:
                out, err = proc.communicate(timeout=max(0.0, self._deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                self._finish(ToolchainError(f"ptxas did not finish within {self._timeout:g} s"))
            else:
                log = (out + err).strip()
                if proc.returncode != 0:
                    self._finish(ToolchainError(f"ptxas refused the PTX for {self.arch}:\n{log}"))
                else:
                    with open(os.path.join(self._tmp, "kernel.cubin"), "rb") as f:
                        cubin = f.read()
                    self._finish(AssemblyReport(arch=self.arch, cubin=cubin,
                                                kernels=parse_ptxas_info(log), log=log))
        if isinstance(self._outcome, ToolchainError):
            raise self._outcome
        assert self._outcome is not None
        return self._outcome

    def __del__(self) -> None:   # never asked for: end ptxas and remove its folder
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            try:
                proc.communicate(timeout=5)
            except Exception:  # noqa: BLE001
                pass
        if getattr(self, "_tmp", None):
            shutil.rmtree(self._tmp, ignore_errors=True)


def start_assembly(ptx_text: str, arch: str = "sm_80", *, timeout: float = DEFAULT_TIMEOUT_S,
                   options: tuple[str, ...] = ()) -> PendingAssembly:
    """:func:`assemble_ptx` started in the background (ptxas is a process of its own, so it
    runs beside the caller's work); ``.result()`` is what :func:`assemble_ptx` returns or
    raises. An unsupported arch is refused at once."""
    check_arch(arch)
    return PendingAssembly(ptx_text, arch, timeout, options)


def compile_cuda(source: str, arch: str = "sm_80", name: str = "kernel.cu", *,
                 timeout: float = DEFAULT_TIMEOUT_S, options: tuple[str, ...] = ()) -> str:
    """Compile CUDA C++ ``source`` to PTX for ``arch`` with NVRTC; NVRTC's log (``kernel.cu(3):
    error: ...``) in a :class:`ToolchainError` when it refuses the source. Kernels meant to
    be found by name should be ``extern "C"`` (no C++ name mangling)."""
    check_arch(arch)
    request = {"library": nvrtc_library_path(), "op": "compile", "source": source,
               "name": name, "options": [f"--gpu-architecture=compute_{arch[3:]}", *options]}
    reply = _nvrtc(request, timeout)
    if not reply.get("ok"):
        log = reply.get("log", "").strip()
        raise ToolchainError(f"NVRTC could not compile {name} for {arch}: "
                             f"{reply.get('error', 'unknown error')}" + (f"\n{log}" if log else ""))
    return reply["ptx"]


def _nvrtc(request: dict, timeout: float) -> dict:
    done = _run([sys.executable, "-I", _NVRTC_SCRIPT], timeout, "NVRTC",
                stdin=json.dumps(request))
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise ToolchainError(f"NVRTC's process ended without a reply (exit status "
                             f"{done.returncode}): {done.stderr.strip()[-2000:]}") from None


# ---------------------------------------------------------------------------------------
# reading ptxas's report

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(.*)")
_USED_PARTS = {"barriers": re.compile(r"used (\d+) barriers"),
               "shared_bytes": re.compile(r"(\d+) bytes smem"),
               "constant_bytes": re.compile(r"(\d+) bytes cmem\[0\]")}


def parse_ptxas_info(log: str) -> tuple[KernelResources, ...]:
    """Every kernel of a ``ptxas -v`` report: the lines after ``Compiling entry function
    'name' for 'sm_XX'`` up to the next one give its stack, spills and ``Used ...`` line."""
    starts = list(_ENTRY.finditer(log))
    kernels = []
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(log)
        kernels.append(_kernel(m.group(1), m.group(2), log[m.end():end]))
    return tuple(kernels)


def _kernel(name: str, arch: str, text: str) -> KernelResources:
    fields: dict[str, int] = {}
    stack = _STACK.search(text)
    if stack:
        fields.update(stack_bytes=int(stack.group(1)), spill_stores=int(stack.group(2)),
                      spill_loads=int(stack.group(3)))
    used = _USED.search(text)
    registers = int(used.group(1)) if used else 0
    rest = used.group(2) if used else ""
    for key, pattern in _USED_PARTS.items():
        found = pattern.search(rest)
        if found:
            fields[key] = int(found.group(1))
    return KernelResources(name=name, arch=arch, registers=registers, **fields)


# ---------------------------------------------------------------------------------------
# what is installed

def _package_version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _ptxas_status(timeout: float) -> ToolStatus:
    try:
        path = ptxas_path()
    except ToolchainError as e:
        return ToolStatus("ptxas", PTXAS_PACKAGE, None, None, str(e))
    try:
        out = _run([path, "--version"], timeout, "ptxas --version").stdout
    except ToolchainError as e:
        return ToolStatus("ptxas", PTXAS_PACKAGE, path, None, str(e))
    found = re.search(r"release [\d.]+, V([\d.]+)", out)
    return ToolStatus("ptxas", PTXAS_PACKAGE, path, found.group(1) if found else out.strip())


def _nvrtc_status(timeout: float) -> ToolStatus:
    try:
        path = nvrtc_library_path()
        reply = _nvrtc({"library": path, "op": "version"}, timeout)
    except ToolchainError as e:
        return ToolStatus("nvrtc", NVRTC_PACKAGE, None, None, str(e))
    if not reply.get("ok"):
        return ToolStatus("nvrtc", NVRTC_PACKAGE, path, None, reply.get("error"))
    major, minor = reply["version"]
    return ToolStatus("nvrtc", NVRTC_PACKAGE, path, f"{major}.{minor}")


def _bindings_status() -> ToolStatus:
    version = _package_version(BINDINGS_PACKAGE)
    where = _package_dir("cuda.bindings") if version else None
    problem = None if where else f"cuda.bindings was not found: {install_hint(BINDINGS_PACKAGE)}"
    return ToolStatus("cuda-bindings", BINDINGS_PACKAGE, where, version, problem)


def toolchain_status(timeout: float = DEFAULT_TIMEOUT_S) -> ToolchainStatus:
    """Which of ptxas, NVRTC and cuda-bindings are installed, where, and their versions
    (runs ``ptxas --version`` and asks NVRTC its version)."""
    return ToolchainStatus(ptxas=_ptxas_status(timeout), nvrtc=_nvrtc_status(timeout),
                           cuda_bindings=_bindings_status())

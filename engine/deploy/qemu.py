"""Run an exported aarch64 library on this machine, under ``qemu-aarch64`` (qemu-user).

::

    outputs = run_under_qemu("mlp.so", "main", [x])          # numpy arrays in, out
    run = measure_under_qemu("k.so", "mm_relu", [a, b], repeat=20)   # + emulated time

A small C runner (``qemu_runner.c``) is cross-compiled once with ``aarch64-linux-gnu-gcc``
(cached by its hash). It ``dlopen``\\ s the library under the emulator
(``qemu-aarch64 -L /usr/aarch64-linux-gnu``: the board's libc from Debian's cross
sysroot), reads the library's metadata (``engine_deploy_metadata()``: functions, argument
order, shapes, dtypes), and calls a function on buffers read from raw files, writing its
outputs back; Python checks the inputs against the metadata and reads the outputs. Each
run has a wall-clock limit.

The time :func:`measure_under_qemu` reports is the emulator's: qemu translates AArch64
instructions to the host's, so it says little about a real board (NEON code is often
slower under emulation than the scalar code it replaces).

When qemu or the cross compiler is missing, :class:`DeployError` says to install Debian's
``qemu-user`` and ``gcc-aarch64-linux-gnu`` (``./run-tests.sh`` does).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.runtime.native_files import build_once, cache_dir

from .metadata import METADATA_SYMBOL
from .targets import DeployError

RUNNER_C = Path(__file__).resolve().with_name("qemu_runner.c")
#: the cross sysroot qemu-aarch64 reads the board's libc and loader from
SYSROOT = "/usr/aarch64-linux-gnu"
INSTALL_HINT = ("install Debian's qemu-user and gcc-aarch64-linux-gnu "
                "(./run-tests.sh does)")
#: the cross compiler and the emulator
CROSS_CC = "aarch64-linux-gnu-gcc"
QEMU = "qemu-aarch64"
#: default wall-clock limit of one emulated run, seconds
TIMEOUT_S = 60.0
#: the most array parameters the runner passes (qemu_runner.c's MAX_ARGS)
MAX_ARGS = 16


def _tool(name: str, what: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise DeployError(f"{what} needs {name}, which is not installed: {INSTALL_HINT}")
    return path


def cross_compiler() -> str:
    """The path of ``aarch64-linux-gnu-gcc``, or a DeployError with the sentence."""
    return _tool(CROSS_CC, "building for an ARM board")


def qemu() -> str:
    """The path of ``qemu-aarch64`` and a check of the sysroot, or a DeployError."""
    path = _tool(QEMU, "running aarch64 code on this machine")
    if not Path(SYSROOT, "lib").is_dir():
        raise DeployError(f"running aarch64 code needs the board's libc in {SYSROOT}, "
                          f"which is missing: {INSTALL_HINT}")
    return path


def available() -> str | None:
    """None when aarch64 code can be built and run here, else the sentence why not."""
    try:
        cross_compiler()
        qemu()
    except DeployError as exc:
        return str(exc)
    return None


def runner_path() -> Path:
    """The cross-compiled runner (built once, cached by the hash of its source)."""
    cc = cross_compiler()
    src = RUNNER_C.read_bytes()
    digest = hashlib.sha256(src + cc.encode()).hexdigest()[:16]

    def build(tmp: str) -> None:
        proc = subprocess.run([cc, "-O2", "-std=gnu11", "-o", tmp, str(RUNNER_C), "-ldl"],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise DeployError(f"cross-compiling the qemu runner failed:\n{proc.stderr.strip()}")
        os.chmod(tmp, 0o755)

    return build_once(cache_dir() / f"engine_qemu_runner_aarch64_{digest}", build)


def _emulate(argv: list[str], timeout: float, what: str) -> str:
    """Run the runner under qemu; its stdout, or a DeployError naming ``what``."""
    env = dict(os.environ, QEMU_LD_PREFIX=SYSROOT)
    try:
        proc = subprocess.run([qemu(), "-L", SYSROOT, str(runner_path()), *argv],
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise DeployError(f"{what} under qemu-aarch64 did not finish within {timeout:.0f} s "
                          "(emulation is slow: use smaller sizes)") from None
    if proc.returncode != 0:
        said = (proc.stderr.strip() or proc.stdout.strip() or
                f"exit status {proc.returncode}")
        if proc.returncode < 0:
            said = f"killed by signal {-proc.returncode}" + (f": {said}" if said else "")
        raise DeployError(f"{what} under qemu-aarch64 failed: {said}")
    return proc.stdout


def library_metadata(library_path: str | os.PathLike, timeout: float = TIMEOUT_S) -> dict:
    """The metadata document an exported aarch64 library carries (read under qemu)."""
    path = _library(library_path)
    text = _emulate([str(path), "--metadata", METADATA_SYMBOL], timeout,
                    f"reading the metadata of {path.name}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DeployError(f"{path.name} does not carry the engine's metadata ({exc})") \
            from None


def _library(library_path: str | os.PathLike) -> Path:
    path = Path(library_path).resolve()
    if not path.is_file():
        raise DeployError(f"no library at {library_path}: export one with "
                          "rt.export_library(path, target='llvm -mtriple=aarch64-linux-gnu')")
    with open(path, "rb") as f:
        head = f.read(20)
    if head[:4] != b"\x7fELF" or int.from_bytes(head[18:20], "little") != 183:
        raise DeployError(f"{path.name} is not an aarch64 ELF library: qemu-aarch64 runs "
                          "libraries exported for 'llvm -mtriple=aarch64-linux-gnu'")
    return path


@dataclass(frozen=True)
class QemuRun:
    """The outputs of one emulated call and, when timed, the emulated seconds per call."""

    outputs: list[np.ndarray]
    seconds_per_call: float | None


def _function_doc(meta: dict, function: str, path: Path) -> dict:
    funcs = meta.get("functions") or {}
    if function not in funcs:
        raise DeployError(f"{path.name} has no function {function!r} "
                          f"(it has: {', '.join(funcs) or 'none'})")
    return funcs[function]


def _checked_input(value: Any, arg: dict, function: str) -> np.ndarray:
    want = tuple(arg["shape"])
    try:
        a = np.asarray(value)
    except Exception:  # noqa: BLE001 - anything numpy cannot read
        raise DeployError(f"input {arg['name']} of {function} is not an array") from None
    if a.shape != want:
        raise DeployError(f"input {arg['name']} of {function} must have shape {want}, "
                          f"got {a.shape}")
    if a.dtype != np.dtype(arg["dtype"]):
        if not np.can_cast(a.dtype, arg["dtype"], casting="same_kind"):
            raise DeployError(f"input {arg['name']} of {function} must be {arg['dtype']}, "
                              f"got {a.dtype}")
        a = a.astype(arg["dtype"])
    return np.ascontiguousarray(a)


def call_under_qemu(library_path: str | os.PathLike, symbol: str, args: list,
                    written: list[bool], repeat: int = 0,
                    timeout: float = TIMEOUT_S) -> QemuRun:
    """Call ``int symbol(void *, ...)`` of an aarch64 library under qemu on ``args`` (numpy
    arrays, C-contiguous, in the order of its parameters); the arrays marked ``written``
    come back as the outputs (in order). With ``repeat`` > 0 the function is then called
    ``repeat`` more times and the emulated seconds per call reported."""
    path = _library(library_path)
    if not 1 <= len(args) <= MAX_ARGS:
        raise DeployError(f"the qemu runner calls functions of 1 to {MAX_ARGS} arrays, "
                          f"{symbol} has {len(args)}")
    with tempfile.TemporaryDirectory(prefix="engine-qemu-") as tmp:
        argv, outs = [str(path), symbol, str(max(int(repeat), 0))], []
        for k, (a, w) in enumerate(zip(args, written)):
            a = np.ascontiguousarray(a)
            f = Path(tmp, f"arg{k}.bin")
            f.write_bytes(a.tobytes())
            argv.append(f"{'o' if w else 'i'}:{f}")
            if w:
                outs.append((f, a.dtype, a.shape))
        text = _emulate(argv, timeout, f"{symbol} of {path.name}")
        outputs = [np.fromfile(f, dtype=dt).reshape(shape) for f, dt, shape in outs]
    seconds = None
    for line in text.splitlines():
        if line.startswith("seconds_per_call "):
            seconds = float(line.split()[1])
    return QemuRun(outputs, seconds)


def measure_under_qemu(library_path: str | os.PathLike, function: str, inputs: list,
                       repeat: int = 0, timeout: float = TIMEOUT_S,
                       metadata: dict | None = None) -> QemuRun:
    """Call ``function`` of an exported aarch64 library under qemu on ``inputs`` (numpy
    arrays, in the order of the metadata's inputs); then, with ``repeat`` > 0, call it
    ``repeat`` more times and report the emulated seconds per call."""
    path = _library(library_path)
    meta = metadata if metadata is not None else library_metadata(path, timeout)
    doc = _function_doc(meta, function, path)
    args = doc["args"]
    ins = [a for a in args if a["role"] == "input"]
    if len(inputs) != len(ins):
        raise DeployError(f"{function} takes {len(ins)} input(s) "
                          f"({', '.join(a['name'] for a in ins)}), got {len(inputs)}")
    given = iter([_checked_input(v, a, function) for v, a in zip(inputs, ins)])
    arrays = [next(given) if a["role"] == "input"
              else np.zeros(a["shape"], dtype=a["dtype"]) for a in args]
    return call_under_qemu(path, doc["symbol"], arrays,
                           [a["role"] != "input" for a in args], repeat, timeout)


def run_under_qemu(library_path: str | os.PathLike, function: str, inputs: list,
                   timeout: float = TIMEOUT_S) -> list[np.ndarray]:
    """The outputs of ``function`` of an exported aarch64 library called under qemu."""
    return measure_under_qemu(library_path, function, inputs, 0, timeout).outputs

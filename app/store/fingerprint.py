"""The machine fingerprint a measured result is stored under: the CPU, its cores, the engine's
and llvmlite's versions and a digest of the measuring code, so a result is only reused by the
same kind of machine running the very code that measured it."""
from __future__ import annotations

import os
import platform

#: the project's root folder (``app/store/`` is two levels below it)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown-cpu"


def _engine_version() -> str:
    try:
        from importlib.metadata import version
        return version("schedule-explorer")
    except Exception:  # noqa: BLE001
        pass
    try:
        import engine
        return str(getattr(engine, "__version__", "0"))
    except Exception:  # noqa: BLE001
        return "0"


_CODE_DIGEST: str | None = None


def code_digest() -> str:
    """A digest of the compiler's and the measurement service's source files (``engine/**``
    and ``app/service/**`` .py/.c): a stored result is only reused by the very code that
    measured it, so a fixed miscompile or a changed timing method never shows a stale figure
    (the package version alone does not change between commits)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        import hashlib
        h = hashlib.sha1()
        files = []
        for top in (os.path.join(ROOT, "engine"), os.path.join(ROOT, "app", "service")):
            for folder, dirs, names in os.walk(top):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                files += [os.path.join(folder, n) for n in sorted(names)
                          if n.endswith((".py", ".c"))]
        for path in files:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            h.update(os.path.relpath(path, ROOT).encode() + b"\0" + data + b"\0")
        _CODE_DIGEST = h.hexdigest()[:16]
    return _CODE_DIGEST


def machine_fingerprint(engine_version: str | None = None) -> str:
    """``cpu model | cores | engine version | llvmlite version | code digest`` — results are
    only reused on the same kind of machine with the same compiler and measuring code."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        import llvmlite
        llvm = llvmlite.__version__
    except Exception:  # noqa: BLE001
        llvm = "?"
    return (f"{_cpu_model()}|{cores} cores|engine {engine_version or _engine_version()}"
            f"|llvmlite {llvm}|code {code_digest()}")

"""Files the engine compiles with a C compiler, kept in its cache directory.

The cache directory is ``$ENGINE_CACHE_DIR``, else ``~/.cache/schedule-explorer`` (a
folder under the system's temporary directory when that cannot be made). A cached file's
name carries a hash of what made it, so it is built once; :func:`build_once` builds it
beside its place and renames it there, so processes building it at once agree on one file.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable


def cache_dir() -> Path:
    """The engine's cache directory (made if missing)."""
    d = os.environ.get("ENGINE_CACHE_DIR")
    p = Path(d) if d else Path.home() / ".cache" / "schedule-explorer"
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError:
        p = Path(tempfile.gettempdir()) / "schedule-explorer-cache"
        p.mkdir(parents=True, exist_ok=True)
    return p


def find_c_compiler() -> str | None:
    """``$CC``, else the first of cc, gcc, clang on the PATH; None when there is none."""
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or \
        shutil.which("clang")


def build_once(out: Path, build: Callable[[str], None], suffix: str = "") -> Path:
    """``out``, made by ``build(tmp)`` when it does not exist yet: ``build`` writes the
    temporary file ``tmp`` beside ``out``, which is then renamed to ``out`` atomically; the
    temporary file is removed when ``build`` raises."""
    if out.exists():
        return out
    fd, tmp = tempfile.mkstemp(suffix=suffix, dir=str(out.parent))
    os.close(fd)
    try:
        build(tmp)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out

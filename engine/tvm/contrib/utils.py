"""``tvm.contrib.utils``: ``tempdir()`` (a temporary directory removed when the object
goes), ``which``, ``is_source_path``, as TVM's."""
from __future__ import annotations

import os
import shutil
import tempfile

__all__ = ["TempDirectory", "tempdir", "which", "is_source_path"]


class TempDirectory:
    """A temporary directory: ``relpath(name)`` a path inside it, ``listdir()``,
    ``remove()`` (also when the object is collected)."""

    def __init__(self, custom_path: str | None = None, keep_for_debug: bool = False):
        if custom_path:
            os.makedirs(custom_path, exist_ok=True)
            self.temp_dir = os.path.abspath(custom_path)
        else:
            self.temp_dir = tempfile.mkdtemp(prefix="engine-tvm-")
        self._keep = keep_for_debug or bool(custom_path)

    def relpath(self, name: str) -> str:
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> list[str]:
        return os.listdir(self.temp_dir)

    def remove(self) -> None:
        if self.temp_dir and not self._keep:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
        self.temp_dir = None

    def __del__(self):
        try:
            self.remove()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def tempdir(custom_path: str | None = None, keep_for_debug: bool | None = None) -> TempDirectory:
    """A new :class:`TempDirectory`."""
    return TempDirectory(custom_path, bool(keep_for_debug))


def which(exec_name: str) -> str | None:
    """The full path of an executable on the PATH, or None."""
    return shutil.which(exec_name)


def is_source_path(path: str) -> bool:
    """Is ``path`` the name of an existing source file (rather than source code)?"""
    if not isinstance(path, str) or "\n" in path or len(path) > 4096:
        return False
    return os.path.isfile(path)

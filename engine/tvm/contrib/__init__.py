"""``tvm.contrib``: the helpers the course's code calls — :mod:`.utils` (``tempdir``) and
:mod:`.clang` (``create_llvm``: C or C++ compiled to LLVM IR text by Debian's ``clang``,
for ``sch.annotate(loop, "pragma_import_llvm", ll_text)``)."""
from __future__ import annotations

from . import clang, utils

__all__ = ["clang", "utils"]

"""Uploaded ONNX models kept in the instance folder, with a quota per learner and per
address: one learner's uploads never evict another's.

Each model is ``models/onnx-<hash>.onnx`` with a sidecar ``onnx-<hash>.json`` naming who
keeps it (``{"owners": {learner: {"address": ..., "time": ...}}}``; the same file uploaded by
two learners is kept once, for both). A learner keeps at most ``per_learner`` models: their
next upload lets go of *their own* oldest (the file goes when nobody keeps it any more).
Beyond ``per_address`` models kept from one address, or ``total`` in all, an upload is
refused with a sentence — never made room for by dropping someone else's. The sidecars are
read only within those bounds (at most ``total`` small files).
"""
from __future__ import annotations

import json
import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["Uploads", "UploadRefused", "NAME"]

NAME = re.compile(r"onnx-[0-9a-f]{16}")
_SIDECAR_BYTES = 64 * 1024


class UploadRefused(Exception):
    """An upload over a quota; ``str(e)`` is the sentence, ``status`` the HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class Uploads:
    """The uploaded models of one instance folder."""

    folder: str
    per_learner: int = 8
    per_address: int = 32
    total: int = 200

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ reading
    def path(self, name: str) -> str:
        if not NAME.fullmatch(name):
            raise ValueError(f"not an uploaded model's name: {name[:40]!r}")
        return os.path.join(self.folder, name + ".onnx")

    def read(self, name: str, max_bytes: int) -> bytes | None:
        """The model's bytes (at most ``max_bytes + 1`` read), or None when not kept."""
        try:
            with open(self.path(name), "rb") as f:
                return f.read(max_bytes + 1)
        except (OSError, ValueError):
            return None

    def owners(self, name: str) -> dict[str, dict[str, Any]]:
        try:
            with open(os.path.join(self.folder, name + ".json"), "rb") as f:
                doc = json.loads(f.read(_SIDECAR_BYTES))
            owners = doc.get("owners") if isinstance(doc, dict) else None
            return {k: v for k, v in owners.items() if isinstance(v, dict)} \
                if isinstance(owners, dict) else {}
        except (OSError, ValueError):
            return {}

    def names(self) -> list[str]:
        try:
            return sorted(n[:-5] for n in os.listdir(self.folder)
                          if n.endswith(".onnx") and NAME.fullmatch(n[:-5]))
        except OSError:
            return []

    # ------------------------------------------------------------------ keeping
    def keep(self, name: str, data: bytes, learner: str, address: str | None) -> None:
        """Keep ``data`` as ``name`` for ``learner`` (from ``address``): their own oldest
        upload goes beyond ``per_learner``; over ``per_address`` or ``total`` it is an
        :class:`UploadRefused`."""
        with self._lock:
            os.makedirs(self.folder, exist_ok=True)
            kept = {n: self.owners(n) for n in self.names()}
            mine = sorted((o[learner].get("time", 0), n) for n, o in kept.items()
                          if learner in o and n != name)
            if name in kept and learner in kept[name]:
                self._write_owners(name, {**kept[name], learner: self._entry(address)})
                return
            from_address = sum(1 for o in kept.values() for e in o.values()
                               if e.get("address") == address)
            if address is not None and from_address >= self.per_address and \
                    len(mine) < self.per_learner:
                raise UploadRefused(429, f"{self.per_address} uploaded models are already kept "
                                    "from your network address; open one of them, or ask "
                                    "whoever uploaded them to upload fewer.")
            if name not in kept and len(kept) >= self.total and len(mine) < self.per_learner:
                raise UploadRefused(503, f"The server keeps {self.total} uploaded models, its "
                                    "limit; try again later.")
            for _, old in mine[:max(0, len(mine) - self.per_learner + 1)]:
                self._let_go(old, learner, kept[old])
            if name not in kept:
                self._write_file(name + ".onnx", data)
            self._write_owners(name, {**kept.get(name, {}), learner: self._entry(address)})

    @staticmethod
    def _entry(address: str | None) -> dict[str, Any]:
        return {"address": address, "time": time.time()}

    def _let_go(self, name: str, learner: str, owners: dict[str, Any]) -> None:
        rest = {k: v for k, v in owners.items() if k != learner}
        if rest:
            self._write_owners(name, rest)
            return
        for suffix in (".onnx", ".json"):
            try:
                os.unlink(os.path.join(self.folder, name + suffix))
            except OSError:
                pass

    def _write_owners(self, name: str, owners: dict[str, Any]) -> None:
        self._write_file(name + ".json", json.dumps({"owners": owners}).encode())

    def _write_file(self, filename: str, data: bytes) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(self.folder, filename))

"""The embedded store: the results cache and the saved traces, each in its own SQLite file
(see :mod:`app.store.api`).  This package imports nothing else of the app."""
from __future__ import annotations

from .api import Store
from .fingerprint import code_digest, machine_fingerprint
from .results import DB_NAME, PRUNE_EVERY
from .sqlite_file import SCHEMA_VERSION
from .traces import TRACES_NAME, SavedTrace

__all__ = ["Store", "SavedTrace", "machine_fingerprint", "code_digest", "SCHEMA_VERSION",
           "DB_NAME", "TRACES_NAME", "PRUNE_EVERY"]

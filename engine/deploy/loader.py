"""Load a library exported by the engine with ctypes: no engine, only numpy.

This file imports nothing of the engine (ctypes, json, numpy only), so it can be copied
next to a library and used wherever numpy is installed::

    from loader import NativeLibrary
    lib = NativeLibrary("mlp.so")
    lib.functions                      # ["main"]
    out = lib["main"](x)               # a Relax export: the outputs, as numpy arrays
    lib["mm_relu"](a, b, c)            # a TensorIR export: destination passing, as built
    c = lib["mm_relu"](a, b)           # ... or the inputs only: the outputs are returned

Everything it needs is the library's own metadata (``engine_deploy_metadata()``, a JSON
document: each function's C symbol, its arguments in order with names, shapes, dtypes and
roles). Arguments are checked (count, dtype, shape) and a wrong one raises
:class:`LibraryError` with a sentence; inputs that are not C-contiguous are copied.
Calls are serialized per library file (the library keeps its intermediates in static
memory; two ``NativeLibrary`` objects of one path share the loaded code and one lock). A file
loaded in a process stays the loaded one even if it is written again at the same path (the
dynamic loader keeps it): load a new export under a new name.
"""
from __future__ import annotations

import ctypes
import json
import os
import threading
from typing import Any

import numpy as np

METADATA_SYMBOL = "engine_deploy_metadata"
FORMAT = "engine-deploy"


#: one lock per loaded file (its real path): calls of one library are serialized
_LOCKS: dict = {}
_LOCKS_LOCK = threading.Lock()


def _lock_of(path: str) -> threading.Lock:
    key = os.path.realpath(path)
    with _LOCKS_LOCK:
        return _LOCKS.setdefault(key, threading.Lock())


class LibraryError(ValueError):
    """A file that is not an exported library, or arguments that do not fit a function."""


class LibraryFunction:
    """One function of a :class:`NativeLibrary`, called with numpy arrays."""

    def __init__(self, library: "NativeLibrary", name: str, info: dict, cfunc: Any):
        self.library = library
        self.name = name
        self.info = info
        self.args = info["args"]
        self.inputs = [a for a in self.args if a["role"] == "input"]
        self.outputs = [a for a in self.args if a["role"] == "output"]
        self._cfunc = cfunc

    def __repr__(self) -> str:
        sig = ", ".join(f"{a['role']} {a['name']}: {a['dtype']}{a['shape']}" for a in self.args)
        return f"<{self.library.path} {self.name}({sig})>"

    def _check(self, a: Any, spec: dict, position: int) -> np.ndarray:
        what = f"{self.name}: argument {position} ({spec['name']})"
        if not isinstance(a, np.ndarray):
            numpy = getattr(a, "numpy", None)
            if callable(numpy):
                a = numpy()
            else:
                raise LibraryError(f"{what} must be a numpy array of {spec['dtype']} with "
                                   f"shape {tuple(spec['shape'])}, got {type(a).__name__}")
        if a.dtype != np.dtype(spec["dtype"]):
            raise LibraryError(f"{what} must be {spec['dtype']}, got {a.dtype} (convert "
                               f"with .astype(\"{spec['dtype']}\"))")
        if tuple(a.shape) != tuple(spec["shape"]):
            raise LibraryError(f"{what} must have shape {tuple(spec['shape'])}, got "
                               f"{tuple(a.shape)}")
        if spec["role"] == "output":
            if not (a.flags.c_contiguous and a.flags.writeable and a.flags.aligned):
                raise LibraryError(f"{what} is an output: it must be a writeable C-contiguous "
                                   "array (np.empty(shape, dtype) makes one)")
            return a
        return np.ascontiguousarray(a)

    def __call__(self, *arrays: Any) -> Any:
        n_in, n_all = len(self.inputs), len(self.args)
        if len(arrays) not in (n_in, n_all) or (self.library.kind == "relax" and
                                                len(arrays) != n_in):
            names = ", ".join(a["name"] for a in self.inputs)
            more = "" if self.library.kind == "relax" else \
                f" (or {n_all}: the outputs too, written in place)"
            raise LibraryError(f"{self.name} takes {n_in} input(s) ({names}){more}, got "
                               f"{len(arrays)}")
        given = len(arrays) == n_all and n_all != n_in
        if given:
            checked = [self._check(a, s, k) for k, (a, s) in enumerate(zip(arrays, self.args))]
            ptrs = [a.ctypes.data for a in checked]
            self._overlap(checked)
            self._run(ptrs)
            return None
        it = iter(arrays)
        checked, fresh = [], []
        for k, s in enumerate(self.args):
            if s["role"] == "input":
                checked.append(self._check(next(it), s, k))
            else:
                o = np.empty(tuple(s["shape"]), dtype=s["dtype"])
                checked.append(o)
                fresh.append(o)
        self._run([a.ctypes.data for a in checked])
        return fresh[0] if len(fresh) == 1 else tuple(fresh)

    def _overlap(self, arrays: list) -> None:
        for i, a in enumerate(arrays):
            for j in range(i + 1, len(arrays)):
                if "output" in (self.args[i]["role"], self.args[j]["role"]) and \
                        np.shares_memory(a, arrays[j]):
                    raise LibraryError(f"{self.name}: arguments {i} and {j} overlap; an "
                                       "output must not share memory with another argument")

    def _run(self, ptrs: list) -> None:
        with self.library._lock:
            rc = self._cfunc(*ptrs)
        if rc != 0:
            raise RuntimeError(f"{self.name} failed with code {rc} (a kernel could not "
                               "allocate memory or a parallel task failed)")


class NativeLibrary:
    """A library exported by the engine, loaded with ctypes (see the module docstring)."""

    def __init__(self, path: Any):
        self.path = os.fspath(path)
        if not os.path.isfile(self.path):
            raise LibraryError(f"no file {self.path!r}: give the path of a library written "
                               "by export_library")
        try:
            self._dll = ctypes.CDLL(os.path.abspath(self.path))
        except OSError as exc:
            raise LibraryError(f"{self.path!r} cannot be loaded as a shared library for this "
                               f"machine ({exc}); export it again with target=None") from None
        try:
            meta_fn = getattr(self._dll, METADATA_SYMBOL)
        except AttributeError:
            raise LibraryError(f"{self.path!r} is not a library exported by the engine (it "
                               f"has no {METADATA_SYMBOL} function); write one with "
                               "rt.export_library(path) or ex.export_library(path)") from None
        meta_fn.restype = ctypes.c_char_p
        meta_fn.argtypes = []
        self.metadata = json.loads(meta_fn().decode("utf-8"))
        if self.metadata.get("format") != FORMAT:
            raise LibraryError(f"{self.path!r} has metadata of an unknown format "
                               f"{self.metadata.get('format')!r}")
        self.kind = self.metadata["kind"]
        self.prefix = self.metadata["prefix"]
        self._lock = _lock_of(self.path)
        self._functions = {}
        for name, info in self.metadata["functions"].items():
            cfunc = getattr(self._dll, info["symbol"])
            cfunc.restype = ctypes.c_int32
            cfunc.argtypes = [ctypes.c_void_p] * len(info["args"])
            self._functions[name] = LibraryFunction(self, name, info, cfunc)

    @property
    def functions(self) -> list:
        return list(self._functions)

    def __getitem__(self, name: str) -> LibraryFunction:
        f = self._functions.get(name)
        if f is None:
            raise KeyError(f"{self.path!r} has no function {name!r} (it has: "
                           f"{', '.join(self._functions)})")
        return f

    def __contains__(self, name: str) -> bool:
        return name in self._functions

    def __repr__(self) -> str:
        return f"<NativeLibrary {self.path} {self.kind}: {', '.join(self._functions)}>"

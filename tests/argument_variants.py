"""Right and wrong arrays for an 8x8 float32 kernel argument, shared by the tests of the
per-call argument checks (the Python ones and the compiled ones)."""
from __future__ import annotations

import numpy as np

#: every kind of array :func:`variant` makes ("same_as_a" and "overlap_b" are made by
#: :func:`with_aliases` from the others)
VARIANTS = ["ok", "read_only", "strided", "float64", "big_endian", "shape", "same_as_a",
            "overlap_b", "list", "view", "fortran", "misaligned", "memmap", "matrix"]


def misaligned() -> np.ndarray:
    """An 8x8 float32 array whose data is not aligned to its element size."""
    raw = np.zeros(8 * 8 * 4 + 1, np.uint8)
    return np.frombuffer(raw.data, np.uint8, 8 * 8 * 4, offset=1).view("float32").reshape(8, 8)


def variant(kind: str, rng, tmp=None):
    """An argument of the given kind (``tmp``: a file for "memmap")."""
    base = rng.random((8, 8)).astype("float32")
    if kind == "read_only":
        base.flags.writeable = False
    elif kind == "strided":
        base = rng.random((8, 16)).astype("float32")[:, ::2]
    elif kind == "float64":
        base = base.astype("float64")
    elif kind == "big_endian":
        base = base.astype(">f4")
    elif kind == "shape":
        base = rng.random((8, 9)).astype("float32")
    elif kind == "list":
        base = base.tolist()
    elif kind == "view":
        base = rng.random((24, 8)).astype("float32")[8:16]
    elif kind == "fortran":
        base = np.asfortranarray(base)
    elif kind == "misaligned":
        base = misaligned()
    elif kind == "memmap" and tmp is not None:
        m = np.memmap(tmp, dtype="float32", mode="w+", shape=(8, 8))
        m[...] = base
        base = m
    elif kind == "matrix":
        base = np.asmatrix(base)
    return base


def arguments(kinds: list[str], rng, tmp=None) -> list:
    """One argument per kind; "same_as_a" is the first argument again, "overlap_b" (third
    place) the second. Each "memmap" maps a file of its own beside ``tmp`` (two on one file
    would be one array: the kernel would write into its own input)."""
    args = [variant(k, rng, None if tmp is None else tmp.with_name(f"{tmp.stem}{i}{tmp.suffix}"))
            for i, k in enumerate(kinds)]
    for i, k in enumerate(kinds):
        if k == "same_as_a" and i > 0 and isinstance(args[0], np.ndarray):
            args[i] = args[0]
        if k == "overlap_b" and i == 2 and isinstance(args[1], np.ndarray) \
                and args[1].shape == (8, 8):
            args[i] = args[1]
    return args

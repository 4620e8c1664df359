"""Tensor intrinsics: what ``Schedule.tensorize`` replaces a block with.

A :class:`TensorIntrin` is a pair of PrimFuncs over the same buffer parameters, as in TVM:

* ``desc`` — what the intrinsic computes, written as TensorIR (a root block with
  ``T.reads``/``T.writes`` of whole tiles, around the loops and block of the computation);
  tensorize matches a block of the program against it, structurally;
* ``impl`` — how it computes it: TensorIR again, here with vector loops that the LLVM
  backend turns into vector instructions (``T.vectorized`` loops of FMAs), since this
  engine has no external kernels to call.

``TensorIntrin.register(name, desc, impl)`` adds one (``desc``/``impl`` are PrimFuncs, or
TVMScript text, or modules of one function). Built-in intrinsics, registered on first use:

* ``"vfma_f32_16x16x16"`` — ``C[16, 16] += A[16, 16] @ B[16, 16]`` (B is k-major, as in
  the gallery's matmul), implemented as ``i, k`` loops around a 16-lane FMA over ``j``:
  ``C[i, 0:16] += broadcast(A[i, k]) * B[k, 0:16]`` (vfmadd on x86);
* ``"vfma_f32_8x8x8"`` — the same on 8x8 tiles (one 8-lane FMA per ``i, k``);
* ``"vdot_f32_16x16x16_bt"`` — ``C[16, 16] += A[16, 16] @ B[16, 16]^T`` (B is j-major, as
  in the course's tensorization example), 16-lane FMAs over ``j`` with B's column
  gathered.

Registration is process-wide (TVM's is too); a trace names an intrinsic by its name only,
so a trace that uses a user-registered one replays only where it is registered.
"""
from __future__ import annotations

import re
from typing import Any

from engine.ir import IRModule, PrimFunc
from engine.ir.stmt import BlockRealize

from .error import ScheduleError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")
_REGISTRY: dict[str, "TensorIntrin"] = {}


class TensorIntrin:
    """A tensor intrinsic: ``desc`` (what it computes) and ``impl`` (how), TVM's shape."""

    def __init__(self, desc: PrimFunc, impl: PrimFunc):
        self.desc = desc
        self.impl = impl

    @staticmethod
    def register(name: str, desc: Any, impl: Any, override: bool = False) -> None:
        """Register a tensor intrinsic under ``name``.

        It requires: 1) ``name`` is a short identifier-like string, not registered
        already (unless ``override``); 2) ``desc`` and ``impl`` are PrimFuncs (or TVMScript
        text, or modules of one function) with the same number of buffer parameters, in
        the same order, of the same shapes and dtypes; 3) each body is a root block whose
        ``T.reads``/``T.writes`` cover the tiles, and ``desc``'s body under it holds the
        loops and the block to match.
        """
        _builtins()
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ScheduleError("TensorIntrin.register", repr(name), "the name must be a "
                                "short string of letters, digits, '_', '.' or '-'",
                                'e.g. "tmm16"')
        if name in _REGISTRY and not override:
            raise ScheduleError("TensorIntrin.register", name, "a tensor intrinsic of this "
                                "name is registered already", "pass override=True to "
                                "replace it, or choose another name")
        d = _as_func(desc, "desc", name)
        m = _as_func(impl, "impl", name)
        _check_pair(name, d, m)
        _REGISTRY[name] = TensorIntrin(d, m)

    @staticmethod
    def get(name: str, allow_missing: bool = False) -> "TensorIntrin | None":
        """The intrinsic registered under ``name`` (None when missing and allowed)."""
        _builtins()
        got = _REGISTRY.get(name) if isinstance(name, str) else None
        if got is None and not allow_missing:
            raise ScheduleError("TensorIntrin.get", repr(name), "no tensor intrinsic is "
                                "registered under this name",
                                f"registered: {', '.join(sorted(_REGISTRY))}")
        return got


def names() -> list[str]:
    """The names of the registered tensor intrinsics, sorted."""
    _builtins()
    return sorted(_REGISTRY)


def _as_func(f: Any, what: str, name: str) -> PrimFunc:
    if isinstance(f, str):
        from engine.script import parse
        f = parse(f)
    if isinstance(f, IRModule):
        fns = f.names()
        if len(fns) != 1:
            raise ScheduleError("TensorIntrin.register", name, f"the {what} module must hold "
                                f"one function, it holds {len(fns)}", "")
        f = f[fns[0]]
    if not isinstance(f, PrimFunc):
        raise ScheduleError("TensorIntrin.register", name, f"{what} must be a PrimFunc "
                            f"(@T.prim_func) or TVMScript text, got {type(f).__name__}", "")
    if not isinstance(f.body, BlockRealize):
        raise ScheduleError("TensorIntrin.register", name, f"{what}'s body must be a root "
                            "block", 'wrap it in with T.block("root"): ...')
    return f


def _check_pair(name: str, desc: PrimFunc, impl: PrimFunc) -> None:
    dp, ip = list(desc.params), list(impl.params)
    if len(dp) != len(ip):
        raise ScheduleError("TensorIntrin.register", name, f"desc has {len(dp)} buffer "
                            f"parameter(s) but impl has {len(ip)}",
                            "give both the same buffers in the same order")
    for a, b in zip(dp, ip):
        if a.dtype != b.dtype or len(a.shape) != len(b.shape) or \
                any(str(x) != str(y) for x, y in zip(a.shape, b.shape)):
            raise ScheduleError("TensorIntrin.register", name, f"desc's buffer {a.name} and "
                                f"impl's buffer {b.name} differ in shape or dtype",
                                "give both the same buffers in the same order")
    for f, what in ((desc, "desc"), (impl, "impl")):
        blk = f.body.block
        declared = {id(r.buffer) for r in (*blk.reads, *blk.writes)}
        missing = [p.name for p in f.params if id(p) not in declared]
        if missing:
            raise ScheduleError("TensorIntrin.register", name, f"{what}'s root block does not "
                                f"declare the regions of {', '.join(missing)}",
                                "list every buffer in T.reads / T.writes of the root block")


def _fma_source(fname: str, m: int, n: int, k: int, transposed: bool, impl: bool) -> str:
    """TVMScript of a float32 matmul tile ``C += A @ B`` (``B^T`` when ``transposed``)."""
    bshape = (n, k) if transposed else (k, n)
    b_at = "B[{j}, {k}]" if transposed else "B[{k}, {j}]"
    head = (f"@T.prim_func\n"
            f"def {fname}(A: T.Buffer(({m}, {k}), \"float32\"), "
            f"B: T.Buffer({bshape}, \"float32\"), C: T.Buffer(({m}, {n}), \"float32\")):\n"
            f"    with T.block(\"root\"):\n"
            f"        T.reads(C[0:{m}, 0:{n}], A[0:{m}, 0:{k}], "
            f"B[0:{bshape[0]}, 0:{bshape[1]}])\n"
            f"        T.writes(C[0:{m}, 0:{n}])\n")
    if not impl:
        b = b_at.format(j="vj", k="vk")
        return head + (f"        for i, j, k in T.grid({m}, {n}, {k}):\n"
                       f"            with T.block(\"update\"):\n"
                       f"                vi, vj, vk = T.axis.remap(\"SSR\", [i, j, k])\n"
                       f"                C[vi, vj] = C[vi, vj] + A[vi, vk] * {b}\n")
    b = b_at.format(j="j", k="k")
    return head + (f"        for i, k in T.grid({m}, {k}):\n"
                   f"            for j in T.vectorized({n}):\n"
                   f"                C[i, j] = C[i, j] + A[i, k] * {b}\n")


_BUILTINS = {
    "vfma_f32_16x16x16": (16, 16, 16, False),
    "vfma_f32_8x8x8": (8, 8, 8, False),
    "vdot_f32_16x16x16_bt": (16, 16, 16, True),
}
_loaded: list[bool] = []


def _builtins() -> None:
    """Register the built-in intrinsics (once, on first use: parsing costs a little)."""
    if _loaded:
        return
    _loaded.append(True)
    from engine.script import parse
    for name, (m, n, k, tr) in _BUILTINS.items():
        fname = name.replace(".", "_")
        desc = parse(_fma_source(f"{fname}_desc", m, n, k, tr, impl=False))
        impl = parse(_fma_source(f"{fname}_impl", m, n, k, tr, impl=True))
        d, i = _as_func(desc, "desc", name), _as_func(impl, "impl", name)
        _check_pair(name, d, i)
        _REGISTRY[name] = TensorIntrin(d, i)


def builtin_names() -> list[str]:
    """The names of the built-in intrinsics (no parsing: the toolbar lists them)."""
    return list(_BUILTINS)


def builtin_source(name: str, part: str) -> str:
    """The TVMScript text of a built-in intrinsic's ``desc`` or ``impl`` (for docs/lessons)."""
    m, n, k, tr = _BUILTINS[name]
    return _fma_source(f"{name}_{part}", m, n, k, tr, impl=(part == "impl"))

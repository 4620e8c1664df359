"""Does a scheduled program compute what the original computed? (shared by the primitives'
semantic tests)

:func:`assert_same_meaning` runs the original program with the reference interpreter and
the scheduled one both with the interpreter and compiled, on the same random inputs (every
parameter filled: the outputs' initial contents are random too, so a store that is missing
or lands out of place shows), and compares every parameter afterwards.
"""
from __future__ import annotations

import numpy as np
import pytest

import engine


def random_args(func, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for p in func.params:
        shape = tuple(int(s) for s in p.const_shape())
        dtype = np.dtype(p.dtype)
        if dtype.kind == "f":
            out.append(rng.uniform(-4, 4, shape).astype(dtype))
        else:
            out.append(rng.integers(-8, 8, shape).astype(dtype))
    return out


def run_interpreted(mod, name: str, args: list[np.ndarray]) -> list[np.ndarray]:
    arrays = [a.copy() for a in args]
    engine.interpret(mod, name, *arrays)
    return arrays


def run_compiled(mod, name: str, args: list[np.ndarray]) -> list[np.ndarray]:
    arrays = [a.copy() for a in args]
    engine.build(mod)[name](*arrays)
    return arrays


def assert_same_meaning(before, after, name: str | None = None, seeds=(0, 1),
                        compiled: bool = True, rtol: float = 1e-5) -> None:
    """``after`` (a scheduled module) computes what ``before`` computed, by the interpreter
    and (``compiled``) by the compiled code, on random inputs of every ``seeds``."""
    name = name or before.prim_func_names()[0]
    func = before[name]
    for seed in seeds:
        args = random_args(func, seed)
        want = run_interpreted(before, name, args)
        got = run_interpreted(after, name, args)
        for p, w, g in zip(func.params, want, got):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-5,
                                       err_msg=f"{p.name} (interpreted) differs")
        if compiled:
            got = run_compiled(after, name, args)
            for p, w, g in zip(func.params, want, got):
                np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-5,
                                           err_msg=f"{p.name} (compiled) differs")


def small_integer_args(func, seed: int = 0, low: int = -4, high: int = 5) -> list[np.ndarray]:
    """Random integers in ``[low, high)`` for every parameter, in its dtype: held in float32
    their sums are exact whatever the order, so a reordered reduction compares bit for bit."""
    rng = np.random.default_rng(seed)
    return [rng.integers(low, high, tuple(int(s) for s in p.const_shape())).astype(p.dtype)
            for p in func.params]


def assert_computes_exactly(before, after, name: str | None = None, seeds=(0, 1),
                            compiled: bool = True, low: int = -4, high: int = 5,
                            reference=None) -> list[np.ndarray]:
    """``after`` computes exactly what ``before`` computes: the interpreter on ``before`` ==
    the interpreter on ``after`` == the compiled ``after`` (``compiled``), on every
    parameter, on small random integers of every ``seeds`` (see
    :func:`small_integer_args`); and the last parameter == ``reference(*inputs)`` when a
    numpy ``reference`` is given. Returns the original's results for the first seed."""
    name = name or before.prim_func_names()[0]
    func = before[name]
    first = None
    for seed in seeds:
        args = small_integer_args(func, seed, low, high)
        want = run_interpreted(before, name, args)
        first = want if first is None else first
        runs = [("interpreted", run_interpreted(after, name, args))]
        if compiled:
            runs.append(("compiled", run_compiled(after, name, args)))
        for how, got in runs:
            for p, w, g in zip(func.params, want, got):
                np.testing.assert_array_equal(g, w, err_msg=f"{p.name} ({how}) differs")
        if reference is not None:
            np.testing.assert_array_equal(want[-1], reference(*args[:-1]))
    return first


def assert_refused(sch, action, *needles, prefix: str = ""):
    """``action()`` raises a ScheduleError whose message starts with ``prefix`` and holds
    every one of ``needles``, and the schedule's program is unchanged. Returns the error."""
    before = sch.mod
    with pytest.raises(engine.ScheduleError) as info:
        action()
    assert sch.mod is before
    msg = str(info.value)
    assert msg.startswith(prefix), msg
    for needle in needles:
        assert needle in msg, msg
    return info.value

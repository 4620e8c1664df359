"""Helpers shared by the schedule/trace tests (and a few tests of the helpers).

``run_and_check(mod, workload, params)`` runs a scheduled module on the workload's random
arguments — compiled with ``engine.build`` when the backend is available, else with the
reference interpreter — and compares the output with the workload's numpy reference.
"""
from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest

import engine
from engine.ir import structural_equal
from engine.schedule import Schedule, ScheduleError, Trace

SMALL = {
    "mm_relu": {"n": 16},
    "matmul": {"n": 16},
    "batch_matmul": {"batch": 2, "m": 8, "n": 8, "k": 8},
    "conv2d": {"batch": 1, "in_channels": 2, "out_channels": 2, "size": 6, "kernel": 3,
               "pad": 1, "stride": 1},
    "conv2d_relu": {"batch": 1, "in_channels": 2, "out_channels": 2, "size": 6, "kernel": 3,
                    "pad": 1, "stride": 1},
    "depthwise_conv2d": {"batch": 1, "channels": 2, "size": 6, "kernel": 3, "pad": 1,
                         "stride": 1},
    "window_sum": {"n": 24},
    "softmax": {"m": 4, "n": 12},
    "layernorm": {"m": 4, "n": 12},
    "transpose": {"m": 12, "n": 8},
    "add": {"m": 12, "n": 8},
    "relu": {"m": 12, "n": 8},
    "mlp": {"batch": 2, "in_features": 12, "hidden": 8, "out_features": 4},
    "sum": {"m": 6, "n": 10},
}


def workload_names() -> list[str]:
    return [n for n in engine.workloads.names() if n in SMALL]


def fresh(name: str) -> Schedule:
    params = SMALL[name]
    return Schedule(engine.workloads.get(name, **params), workload=(name, params))


def assert_round_trips(sch: Schedule, make_target) -> None:
    """Replaying the trace of ``sch`` from its JSON document and from its URL token, and
    executing its Python text, each on a new schedule ``make_target()``, rebuilds the
    same program."""
    doc = sch.trace.as_json()
    for tr in (Trace.from_json(json.dumps(doc)), Trace.decode(sch.trace.encode())):
        target = make_target()
        tr.apply_to_schedule(target)
        assert structural_equal(target.mod, sch.mod)
    target = make_target()
    exec(sch.trace.as_python(), {"sch": target})  # our own generated text
    assert structural_equal(target.mod, sch.mod)


def try_step(sch: Schedule, op: str, step) -> bool:
    """Run ``step()``, a call of primitive ``op`` on ``sch``: True when it applies; when it is
    refused the message starts with "<op> refused" and ``sch`` (program, trace, handles)
    is unchanged, and the result is False."""
    mod, trace, handles = sch.mod, sch.trace, sch.handles()
    try:
        step()
    except ScheduleError as e:
        assert sch.mod is mod, f"{op} refused but changed the module: {e}"
        assert sch.trace == trace and len(sch.trace) == len(trace)
        assert sch.handles() == handles
        assert str(e).startswith(f"{op} refused")
        return False
    return True


def refused(sch, action, *needles) -> ScheduleError:
    """Run ``action()``, which must raise ScheduleError and leave ``sch`` (program and
    trace) unchanged; the message must contain every one of ``needles``."""
    mod, n = sch.mod, len(sch.trace)
    with pytest.raises(ScheduleError) as ei:
        action()
    assert sch.mod is mod and len(sch.trace) == n
    for needle in needles:
        assert needle in str(ei.value), str(ei.value)
    return ei.value


def apply_exported(text: str, target: Schedule, monkeypatch) -> Schedule:
    """Run exported TVM schedule code (``text`` defines ``apply_trace(sch)``) on ``target``,
    with stand-in ``tvm`` / ``tvm.s_tir`` / ``tvm.tir`` modules whose ``Schedule`` is ours;
    returns ``target``."""
    fake = types.ModuleType("tvm")
    fake.s_tir = types.SimpleNamespace(Schedule=Schedule)
    fake.tir = types.SimpleNamespace(Schedule=Schedule)
    monkeypatch.setitem(sys.modules, "tvm", fake)
    monkeypatch.setitem(sys.modules, "tvm.s_tir", fake.s_tir)
    monkeypatch.setitem(sys.modules, "tvm.tir", fake.tir)
    ns: dict = {}
    exec(text, ns)  # our own generated text
    ns["apply_trace"](target)
    return target


def _backend():
    try:
        return engine.build
    except Exception:  # noqa: BLE001 - backend not landed
        return None


def run(mod, name: str, params: dict, use_build: bool = True):
    info = engine.workloads.info(name)
    args = engine.workloads.random_args(name, seed=1, **params)
    build = _backend() if use_build else None
    if build is not None:
        rt = build(mod)
        rt[info.func_name](*args)
    else:
        engine.interpret(mod, info.func_name, *args)
    return args


def run_and_check(mod, name: str, params: dict, use_build: bool = True) -> None:
    info = engine.workloads.info(name)
    args = run(mod, name, params, use_build)
    ref = engine.workloads.reference(name, **params)(*args[:info.num_inputs])
    if not isinstance(ref, tuple):
        ref = (ref,)
    for got, want in zip(args[info.num_inputs:], ref):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", workload_names())
def test_unscheduled_workloads_match_numpy(name):
    sch = fresh(name)
    run_and_check(sch.mod, name, SMALL[name])


@pytest.mark.parametrize("use_build", [True, False])
def test_helper_detects_wrong_results(use_build):
    from engine.ir import expr as E
    from engine.ir.functor import Mutator

    class M(Mutator):  # turn the add into a subtraction: the checker must notice
        def visit_Add(self, e):
            return E.Sub(self.visit(e.a), self.visit(e.b))

    sch = fresh("add")
    mod = engine.IRModule(((sch.func_name, M().visit(sch.mod[sch.func_name])),))
    with pytest.raises(AssertionError):
        run_and_check(mod, "add", SMALL["add"], use_build=use_build)

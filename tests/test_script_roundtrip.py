"""Round trip: for every program P, parse(script(P)) is structurally equal to P and prints
the same text again (hand-built, workload registry, and hypothesis-generated programs)."""
from __future__ import annotations

import pytest
from hypothesis import given

import engine
from engine.ir import IRModule
from engine import workloads
from engine.script import parse, script

from test_script_irgen import mm_relu, programs


def check_roundtrip(mod: IRModule) -> str:
    text = script(mod)
    back = parse(text)
    assert engine.structural_equal(back, mod), text
    assert script(back) == text
    return text


def test_mm_relu_roundtrip():
    check_roundtrip(mm_relu())
    check_roundtrip(mm_relu(16))


@pytest.mark.parametrize("name", workloads.names())
def test_every_workload_roundtrips(name):
    mod = workloads.get(name)
    text = check_roundtrip(mod)
    assert "@T.prim_func" in text


@given(programs())
def test_random_programs_roundtrip(mod):
    check_roundtrip(mod)


@given(programs())
def test_random_primfunc_alone_roundtrips(mod):
    (name, func), = mod.functions
    text = script(func)
    back = parse(text)
    assert engine.structural_equal(back[name], func)
    assert script(back[name]) == text

"""engine.ir.functor.collect_stmts: the statements collect finds, without the expressions."""
from __future__ import annotations

import pytest

import engine
from engine import presets
from engine.ir import stmt as S
from engine.ir.functor import collect, collect_stmts
from engine.lower import lower

STMT_KINDS = [S.BufferStore, S.IfThenElse, (S.For, S.Allocate, S.Evaluate), S.SeqStmt]


def _lowered(name):
    info = presets.info(name)
    params = {"n": 64} if "n" in info.params else dict(info.params, size=14)
    sch = engine.Schedule(engine.workloads.get(info.workload, **params))
    info.trace(**params).apply_to_schedule(sch)
    (_, f), = list(sch.mod.functions)
    return lower(f)


@pytest.mark.parametrize("name", presets.names())
def test_collect_stmts_finds_what_collect_finds(name):
    f = _lowered(name)
    for kind in STMT_KINDS:
        full = collect(f.body, kind)
        fast = collect_stmts(f.body, kind)
        assert [id(s) for s in fast] == [id(s) for s in full], kind


def test_collect_stmts_finds_guarded_stores():
    """A store under a per-lane condition (a split that does not divide, vectorized)."""
    sch = engine.Schedule(engine.workloads.get("matmul", m=12, n=10, k=8))
    blk = sch.get_block("C", func_name="matmul")
    i, j, k = sch.get_loops(blk)
    _, j1 = sch.split(j, factors=[None, 4])
    sch.vectorize(j1)
    f = lower(sch.mod["matmul"])
    ifs = collect_stmts(f.body, S.IfThenElse)
    assert ifs and [id(s) for s in ifs] == [id(s) for s in collect(f.body, S.IfThenElse)]
    assert len(collect_stmts(f.body, S.BufferStore)) == len(collect(f.body, S.BufferStore)) > 0

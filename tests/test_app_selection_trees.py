"""A module's loop/block trees are walked once per module object and shared: a click walks
the program before it and its new one, the trace pane the program before every step."""
from __future__ import annotations

from app.web import selection
from engine import Schedule, workloads


def test_a_modules_trees_are_walked_once_and_shared(monkeypatch):
    sch = Schedule(workloads.get("mm_relu", n=16))
    sch.split(sch.get_loops(sch.get_block("Y"))[1], factors=[None, 4])
    mod = sch.mod
    walked = []
    real = selection.build_tree

    def counted(func, name=None):
        walked.append(name)
        return real(func, name)
    monkeypatch.setattr(selection, "build_tree", counted)
    first = selection.module_trees(mod)
    again = selection.module_trees(mod)
    assert walked == list(mod.names())
    assert again == first and again is not first        # the same trees, a list of its own
    assert "L/mm_relu/1/Y" in first[0].by_sel
    # the next program (a new module object) is walked for itself
    sch.reorder(*sch.get_loops(sch.get_block("Y"))[:2][::-1])
    nxt = selection.module_trees(sch.mod)
    assert walked == list(mod.names()) * 2
    assert nxt[0].roots[0].node is not first[0].roots[0].node

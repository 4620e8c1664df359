"""The program pane prints each program once per dialect: a click's diff reads the program
before it as the click before printed it (app.web.panes.program.printed)."""
from __future__ import annotations

from app.web.panes import program
from app.web.session import DIALECTS
from engine import Schedule, workloads


def split_mm_relu():
    sch = Schedule(workloads.get("mm_relu", n=16))
    j = sch.get_loops(sch.get_block("Y"))[1]
    sch.split(j, factors=[None, 4])
    return sch.mod


def test_a_program_is_printed_once_per_dialect_as_the_engine_prints_it(monkeypatch):
    mod = split_mm_relu()
    calls = []
    real = program.script_with_spans

    def counted(m, dialect, **kw):
        calls.append(dialect)
        return real(m, dialect=dialect, **kw)
    monkeypatch.setattr(program, "script_with_spans", counted)
    for dialect in DIALECTS:
        text, spans = program.printed(mod, dialect)
        assert text == mod.script(dialect=dialect)
        assert program.printed(mod, dialect) == (text, spans)
    assert calls == list(DIALECTS)
    # another module object of the same program is printed for itself
    other = split_mm_relu()
    first = next(iter(DIALECTS))
    assert program.printed(other, first)[0] == program.printed(mod, first)[0]
    assert calls == list(DIALECTS) + [first]

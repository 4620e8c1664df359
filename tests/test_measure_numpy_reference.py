"""The measurement pane shows one numpy time per thread count: the steps measured by
different workers (each times numpy once) must not show two numpy times side by side."""
from __future__ import annotations

import json

from app.web import plots
from app.web.panes.measurement import one_numpy_time


def _row(step, numpy_ms, threads=1, time_ms=1.0):
    return {"step": step, "time_ms": time_ms, "gflops": 1.0, "correct": True,
            "numpy_ms": numpy_ms, "numpy_threads": threads}


def test_every_step_gets_the_best_numpy_time_of_its_thread_count():
    rows = [_row(0, 0.085), _row(1, 0.061), _row(2, 0.085), _row(3, 0.4, threads=2),
            _row(4, 0.3, threads=2), {"step": 5, "time_ms": None}]
    out = one_numpy_time(rows)
    assert [r.get("numpy_ms") for r in out] == [0.061, 0.061, 0.061, 0.3, 0.3, None]
    assert rows[0]["numpy_ms"] == 0.085          # the rows given are not changed
    assert [r["step"] for r in out] == [0, 1, 2, 3, 4, 5]


def test_the_reference_line_and_the_current_step_say_the_same_numpy_time():
    rows = one_numpy_time([_row(0, 0.085), _row(1, 0.061)])
    fig = json.loads(plots.runtime_figure(rows, current=1))
    labels = [t["name"] for t in fig["data"] if t["name"].startswith("numpy")]
    assert labels == ["numpy 0.061 ms"]
    assert rows[1]["numpy_ms"] == 0.061          # the pane's line for step 1


def _line(speedup):
    """The measurement pane's line for step 1 with this speed-up over step 0."""
    import re
    import types

    from inline_service import make_test_app
    app = make_test_app()
    with app.test_request_context():
        html = app.jinja_env.get_template("panes/measure.html").render(
            s=types.SimpleNamespace(at=1), rows=[], fig=None, speedup=speedup,
            current={"time_ms": 1.0, "gflops": 2.0, "correct": True, "numpy_ms": None})
    line = re.search(r'id="measure-now">(.*?)</p>', html, re.S).group(1)
    return " ".join(re.sub(r"<[^>]+>", "", line).split())


def test_a_step_within_five_percent_of_step_0_is_about_as_fast():
    assert "about as fast as step 0" in _line(1.03)
    assert "about as fast as step 0" in _line(0.97)
    assert "1.3× faster than step 0" in _line(1.3)
    assert "2.0× slower than step 0" in _line(0.5)
    assert "1.0×" not in _line(1.049) + _line(0.951)

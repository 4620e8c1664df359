"""The engine's parses are safe from several threads at once (engine.script.pyast).

On the CPython this project runs on, a syntax-tree conversion that another one interleaves
(another thread's, let in while the collector runs a finalizer) fails a correct program with
"AST constructor recursion depth mismatch" — seen in the full test suite, where a live
server's threads parse beside the tests. ``parse_python`` serializes the engine's parses and
retries a conversion upset that way; these tests pin both, deterministically.
"""
from __future__ import annotations

import ast
import threading
import time

import pytest

from engine.script import pyast
from engine.script.pyast import parse_python


def test_the_engines_parses_never_overlap(monkeypatch):
    real = ast.parse
    inside, most = [0], [0]
    guard = threading.Lock()

    def slow_parse(text, filename="<unknown>", mode="exec"):
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.002)                       # a thread switch in the middle of a parse
        try:
            return real(text, filename=filename, mode=mode)
        finally:
            with guard:
                inside[0] -= 1

    monkeypatch.setattr(pyast, "_parse", slow_parse)
    trees = []
    threads = [threading.Thread(target=lambda: trees.append(parse_python("a + b", mode="eval")))
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(trees) == 6 and most[0] == 1


def test_a_conversion_upset_by_another_is_parsed_again(monkeypatch):
    real = ast.parse
    upsets = [2]

    def upset_twice(text, filename="<unknown>", mode="exec"):
        if upsets[0]:
            upsets[0] -= 1
            raise SystemError("AST constructor recursion depth mismatch (before=138, after=53)")
        return real(text, filename=filename, mode=mode)

    monkeypatch.setattr(pyast, "_parse", upset_twice)
    assert isinstance(parse_python("x = 1").body[0], ast.Assign)
    assert upsets == [0]


def test_other_errors_are_the_texts_own(monkeypatch):
    with pytest.raises(SyntaxError):
        parse_python("x = (")

    def other(text, filename="<unknown>", mode="exec"):
        raise SystemError("something else")

    monkeypatch.setattr(pyast, "_parse", other)
    with pytest.raises(SystemError, match="something else"):
        parse_python("x = 1")

"""The engine's parses are safe from several threads at once (engine.script.pyast).

On the CPython this project runs on, two syntax-tree conversions interleaved by a thread
switch (here: finalizers run by the garbage collector in the middle of a conversion, which
parse too) make ``ast.parse`` fail a correct program with "AST constructor recursion depth
mismatch"; the web server parses on several threads. ``parse_python`` must never fail so.
"""
from __future__ import annotations

import gc
import threading

from engine.script.pyast import parse_python

TEXT = "x = " + "(" * 50 + "1" + ")" * 50 + "\n" + \
    "\n".join(f"y{i} = [a + b * c for a in range(3)]" for i in range(200))


class _ParsesWhenCollected:
    def __del__(self):
        parse_python("z = " + "(" * 30 + "1" + ")" * 30)


def _parse_among_cyclic_garbage(errors: list) -> None:
    for _ in range(60):
        for _ in range(50):
            f = _ParsesWhenCollected()
            f.me = f          # a cycle: freed by the collector, at any allocation
            del f
        try:
            tree = parse_python(TEXT)
        except SystemError as e:  # the failure this module exists to prevent
            errors.append(str(e))
            return
        assert len(tree.body) == 201


def test_threads_and_finalizers_parsing_at_once_never_upset_a_parse():
    errors: list = []
    old = gc.get_threshold()
    gc.set_threshold(50)
    try:
        threads = [threading.Thread(target=_parse_among_cyclic_garbage, args=(errors,))
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        gc.set_threshold(*old)
        gc.collect()
    assert errors == []


def test_a_syntax_error_is_the_texts_own():
    import pytest
    with pytest.raises(SyntaxError):
        parse_python("x = (")
    assert parse_python("a[i] + 1", mode="eval").body is not None

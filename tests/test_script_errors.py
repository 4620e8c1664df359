"""Errors: every bad text gives a ScriptError with line/column and a plain message;
fuzzed text never gives anything else."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, strategies as st

from engine.script import ScriptError, parse

from engine.script import script
from test_script_irgen import MM_RELU_TEXT, programs

FUNC = '''@T.prim_func
def f(A: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("b"):
            vi, vj = T.axis.remap("SS", [i, j])
            A[vi, vj] = T.float32(0)
'''


def _error(text):
    with pytest.raises(ScriptError) as info:
        parse(text)
    return info.value


def _sub(old, new, text=MM_RELU_TEXT):
    assert old in text
    return text.replace(old, new, 1)


def _pos(text, needle, occurrence=0):
    """1-based (line, column) of the first character of ``needle`` in ``text``."""
    idx = -1
    for _ in range(occurrence + 1):
        idx = text.index(needle, idx + 1)
    line = text.count("\n", 0, idx) + 1
    col = idx - (text.rfind("\n", 0, idx) + 1) + 1
    return line, col


CASES = [
    # (name, text, where the error points (needle in text), message pattern)
    ("syntax", _sub("T.grid(128, 128, 128):", "T.grid(128, 128, 128)"), None,
     r"Python syntax error: expected ':'"),
    ("undefined name", _sub("A[vi, vk] * B[vk, vj]\n", "A[vi, vk] * Q[vk, vj]\n"), "Q[vk",
     r"undefined name 'Q'"),
    ("unknown T function", _sub("T.max(", "T.maxx("), "T.maxx",
     r"unknown function T.maxx; did you mean T.max\?"),
    ("wrong number of indices", _sub("C[vi, vj] = T.max", "C[vi] = T.max"), "C[vi] =",
     r"buffer 'C' has 2 dimension\(s\) but is indexed with 1 index\(es\)"),
    ("non-constant shape", _sub("Y = T.alloc_buffer((128, 128))", "Y = T.alloc_buffer((128, 1.5))"),
     "1.5", r"buffer shapes must be integers, got 1.5"),
    ("shape from a loop variable", _sub("                Y[vi, vj] = Y[vi, vj] + A",
                                        "                Z = T.alloc_buffer((vi,))\n"
                                        "                Y[vi, vj] = Y[vi, vj] + A"),
     "vi,))", r"buffer shapes must be constant"),
    ("unknown dtype", _sub('C: T.Buffer((128, 128), "float32")', 'C: T.Buffer((128, 128), "flaot32")'),
     '"flaot32"', r"unknown dtype 'flaot32' \(use float32, float64, int32, int64, \.\.\.\)"),
    ("unknown dtype constructor", _sub("T.max(Y[vi, vj], T.float32(0))", "T.max(Y[vi, vj], T.flaot32(0))"),
     "T.flaot32", r"unknown dtype 'flaot32'"),
    ("T.grid arity", _sub("T.grid(128, 128, 128)", "T.grid(128, 128)"), "T.grid(128, 128)",
     r"T.grid has 2 extent\(s\) but the loop defines 3 variable\(s\)"),
    ("T.grid float", _sub("T.grid(128, 128, 128)", "T.grid(128, 128, 1.5)"), "1.5",
     r"bad T.grid arguments: expected an integer, got 1.5"),
    ("T.grid string", _sub("T.grid(128, 128, 128)", 'T.grid(128, "n", 128)'), '"n"',
     r"bad T.grid arguments"),
    ("remap kinds", _sub('"SSR"', '"SSX"'), '"SSX"',
     r"T.axis.remap kinds must be 'S' \(spatial\) or 'R' \(reduce\), got 'SSX'"),
    ("remap arity", _sub('"SSR"', '"SS"'), 'T.axis.remap("SS"',
     r"T.axis.remap arity mismatch: 2 kind\(s\) 'SS', 3 loop variable\(s\)"),
    ("remap non-loop", _sub("[i, j, k]", "[i, j, k + 1]"), "k + 1",
     r"T.axis.remap binds loop variables only"),
    ("undeclared buffer", _sub("C[vi, vj] = T.max", "D[vi, vj] = T.max"), "D[vi, vj] =",
     r"assignment to undeclared buffer 'D'"),
    ("unsupported statement", _sub("for i, j in T.grid(128, 128):", "while True:"), "while",
     r"unsupported statement: while loops"),
    ("init outside a block", _sub("            with T.block(\"C\"):\n",
                                  "            with T.init():\n                pass\n"
                                  "            with T.block(\"C\"):\n"),
     "with T.init():\n                pass", r"with T.init\(\) must be inside"),
    ("range with a step", _sub("for i, j in T.grid(128, 128):\n            with T.block(\"C\"):",
                               "for i in range(0, 128, 2):\n          for j in T.serial(128):\n"
                               "            with T.block(\"C\"):"),
     "2):", r"range\(\) with a step other than 1 is not supported"),
    ("buffer as a value", _sub("T.max(Y[vi, vj], T.float32(0))", "T.max(Y, T.float32(0))"),
     "Y, T.float32", r"buffer 'Y' used as a value"),
    ("slice outside regions", _sub("C[vi, vj] = T.max(Y[vi, vj]", "C[vi, vj] = T.max(Y[vi, 0:2]"),
     "0:2", r"slices are only allowed in T.reads/T.writes"),
    ("parameter without T.Buffer", _sub('A: T.Buffer((128, 128), "float32")', "A: int"), "int",
     r"parameter 'A' must be annotated as T.Buffer"),
    ("unknown scope", _sub("Y = T.alloc_buffer((128, 128))", 'Y = T.alloc_buffer((128, 128), scope="texture")'),
     '"texture"', r"unknown storage scope 'texture'"),
    ("unknown keyword", _sub("Y = T.alloc_buffer((128, 128))", "Y = T.alloc_buffer((128, 128), colour=1)"),
     "colour", r"T.alloc_buffer has no argument 'colour'"),
    ("float index", _sub("C[vi, vj] = T.max", "C[vi, T.float32(1)] = T.max"), "T.float32(1)]",
     r"buffer indices must be integers"),
    ("axis outside a block", _sub("        for i, j in T.grid(128, 128):\n",
                                  "        vz = T.axis.spatial(4, 0)\n        for i, j in T.grid(128, 128):\n"),
     "vz =", r"T.axis.spatial must be inside a `with T.block"),
    ("relax function", "@R.function\ndef main(x):\n    pass\n", "def main",
     r"Relax function"),
]


@pytest.mark.parametrize("name,text,needle,pattern", CASES, ids=[c[0] for c in CASES])
def test_error_messages_have_position_and_plain_words(name, text, needle, pattern):
    err = _error(text)
    assert re.search(pattern, err.message), err.message
    assert err.line is not None and err.col is not None
    assert str(err) == f"line {err.line}, column {err.col}: {err.message}"
    if needle is not None:
        assert (err.line, err.col) == _pos(text, needle), str(err)


def test_syntax_error_position():
    text = _sub("T.grid(128, 128, 128):", "T.grid(128, 128, 128)")
    err = _error(text)
    line, _ = _pos(text, "T.grid(128, 128, 128)")
    assert err.line == line


def test_column_counts_characters_not_bytes():
    text = FUNC.replace("A[vi, vj] = T.float32(0)", "A[vi, vj] = T.float32(0) + é")
    err = _error(text)
    assert (err.line, err.col) == _pos(text, "é")
    assert err.message == "undefined name 'é'"


def test_brief_example_format():
    text = FUNC.replace('"float32"', '"flaot32"')
    err = _error(text)
    assert str(err).startswith(f"line 2, column {text.splitlines()[1].index('flaot32')}: "
                               "unknown dtype 'flaot32' (use float32, float64, int32, int64, ...)")


@pytest.mark.parametrize("text,pattern", [
    ("", r"no @T.prim_func function"),
    ("\x00", r"cannot contain null bytes|cannot parse"),
    ("x = 1\n", r"expected a @tvm.script.ir_module class"),
    ("@T.prim_func\ndef f(A: T.Buffer((4,), 'float32')):\n    A[0] = " + "+".join(["1.0"] * 20000),
     r"too deeply nested"),
], ids=["empty", "null byte", "not a module", "too deeply nested"])
def test_errors_without_single_position(text, pattern):
    err = _error(text)
    assert re.search(pattern, str(err))


def test_parse_rejects_non_text():
    with pytest.raises(ScriptError, match="needs the script text as a str"):
        parse(b"@T.prim_func")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- fuzzing
TOKENS = ["T.", "(", ")", "[", "]", ":", ",", " ", "\n", "    ", "0", "-1", "1.5", '"x"', "vi",
          "i", "A", "T.grid", "T.block", "T.axis.remap", "with", "for", "in", "if", "else",
          "=", "+", "*", "//", "%", "T.float32", "not", "and", "<", "T.Buffer", "None", "**",
          "'SSR'", "T.reads", "T.init()", "Y", "[()]", "T.int64", "T.Cast", "T.Ramp",
          "T.Broadcast", "T.Let", "T.where", "T.serial", "annotations={}", '"int8"', "1e400",
          "T.exp", "T.call_extern", "T.LetStmt", "as", "T.allocate", "T.match_buffer",
          "T.handle", "T.max_value", "range", "T.sblock", "dtype=", "scope=", "T.axis.S",
          "T.block_attr", "T.func_attr", "T.evaluate", "x: T.int32 = 1", "T.truncdiv"]

_mutation = st.tuples(st.integers(0, 6), st.floats(0, 1), st.floats(0, 1),
                      st.sampled_from(TOKENS))


def _apply(text: str, mutations) -> str:
    for op, a, b, tok in mutations:
        if not text:
            text = tok
        pos = int(a * len(text)) % max(len(text), 1)
        if op == 0:
            text = text[:pos] + text[pos + 1:]
        elif op == 1:
            text = text[:pos] + tok + text[pos:]
        elif op == 2:
            end = min(len(text), pos + 1 + int(b * 20))
            text = text[:pos] + tok + text[end:]
        elif op == 3:
            lines = text.split("\n")
            i, j = int(a * len(lines)) % len(lines), int(b * len(lines)) % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        elif op == 4:
            lines = text.split("\n")
            lines.insert(int(a * len(lines)), lines[int(b * len(lines)) % len(lines)])
            text = "\n".join(lines)
        elif op == 5:
            words = re.findall(r"[A-Za-z_][A-Za-z_0-9]*|\d+", text)
            if words:
                text = text.replace(words[int(a * len(words)) % len(words)], tok, 1 + int(b * 3))
        else:
            text = text[:pos]
    return text


def _parse_or_script_error(text):
    try:
        mod = parse(text)
    except ScriptError as e:
        assert str(e)
        assert e.line is None or e.line >= 1
        return None
    from engine.ir import IRModule
    assert isinstance(mod, IRModule)
    return mod


@given(st.sampled_from([MM_RELU_TEXT, FUNC]), st.lists(_mutation, min_size=1, max_size=4))
def test_fuzz_mutated_scripts_give_module_or_script_error(text, mutations):
    _parse_or_script_error(_apply(text, mutations))


@given(st.text(max_size=200))
def test_fuzz_random_text(text):
    _parse_or_script_error(text)


@given(st.lists(st.sampled_from(TOKENS), max_size=40))
def test_fuzz_token_soup(tokens):
    _parse_or_script_error("@T.prim_func\ndef f(A: T.Buffer((4, 4), 'float32')):\n    "
                           + "".join(tokens))


@given(programs(), st.lists(_mutation, min_size=1, max_size=3))
def test_fuzz_mutated_random_programs(mod, mutations):
    _parse_or_script_error(_apply(script(mod), mutations))


def test_a_block_with_axes_may_not_use_an_enclosing_loop_variable():
    """TVM's rule: the block sees its loops only through its axes' bindings. Accepting
    ``A[i]`` here let ``parallel(i)`` pass a block whose every iteration writes ``B[0]``."""
    text = '''@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((1,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(1, i // 1 % 1 + i % 1)
            T.reads(A[i])
            T.writes(B[vi])
            B[vi] = A[i]
'''
    e = _error(text)
    assert (e.line, e.col) == (4, 9)
    assert 'block "B" uses the loop variable i of an enclosing loop' in str(e)
    assert "T.axis.spatial(extent, i)" in str(e)
    # the bindings and T.where may use it, and a block without axes (opaque) may too
    parse(text.replace("T.reads(A[i])", "T.reads(A[vi])").replace("B[vi] = A[i]",
                                                                  "B[vi] = A[vi]"))
    parse('''@T.prim_func
def g(A: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("opaque"):
            A[i] = T.float32(0)
''')

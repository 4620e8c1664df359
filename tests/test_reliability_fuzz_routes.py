"""Hypothesis fuzzing of the web app's routes and parameters: no input gives a 500.

Drives ``create_app()`` with the Flask test client (no compile-heavy routes: the measurement
and code panes are exercised by the load test and the pool tests).  Inputs: workload names,
sizes, trace tokens (random, truncated, bit-flipped real ones), steps, selections, primitive
forms with random arguments, trace imports (random JSON and mutated real traces) and pasted
programs.
"""
from __future__ import annotations

import ast
import base64
import json
import random
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from export_safety import assert_safe_export
from inline_service import make_test_app


@pytest.fixture(scope="module")
def client():
    return make_test_app({"PREFETCH_MEASUREMENTS": False}).test_client()


WORKLOADS = ["mm_relu", "matmul", "softmax", "transpose", "conv2d", "relu", "sum"]
names = st.one_of(st.sampled_from(WORKLOADS + ["custom", "no_such", "mm_relu/../x"]),
                  st.text(min_size=1, max_size=20).filter(lambda s: "/" not in s and s.strip()))
sizes = st.one_of(st.integers(min_value=-5, max_value=64).map(str),
                  st.sampled_from(["", "abc", "1e3", "99999999", "0x10", "١٢", " 8 ", "8.0"]))
tokens = st.one_of(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=",
                           max_size=200),
                   st.text(max_size=50),
                   st.binary(max_size=120).map(lambda b: base64.urlsafe_b64encode(b).decode()))
FORM_KEYS = ["sel", "primitive", "factors", "order", "factor_axis", "loop", "buffer", "scope"]
PRIMS = ["split", "reorder", "fuse", "parallel", "vectorize", "unroll", "compute_at",
         "reverse_compute_at", "compute_inline", "cache_read", "cache_write",
         "decompose_reduction", "rfactor", "eval", ""]
form_values = st.one_of(st.text(max_size=30), st.sampled_from(
    ["None, 4", "4, None", "2, 2, 2", "L/mm_relu/0/Y", "L/mm_relu/1/Y", "B/mm_relu/Y",
     "B/mm_relu/C", "l0", "l1", "global", "local", "0", "1", "-1", "<script>x</script>"]))


def _real_token(client, workload="mm_relu", n="16"):
    """A real trace token: one legal split applied through the route."""
    r = client.post(f"/explore/{workload}/apply",
                    data={"n": n, "sel": f"L/{workload}/1/Y", "primitive": "split",
                          "factors": "None, 4"})
    loc = r.headers.get("HX-Push-Url", "")
    return dict(p.split("=", 1) for p in loc.split("?", 1)[1].split("&")).get("t") \
        if "?" in loc else None


def assert_no_500(r, what):
    event(f"status {r.status_code}")
    assert r.status_code < 500, f"{what} -> {r.status_code}: {r.get_data(as_text=True)[:500]}"
    if r.status_code >= 400:
        body = r.get_data(as_text=True)
        assert "Traceback" not in body


good_sizes = st.sampled_from(["8", "16", "32"])
maybe_tokens = st.one_of(st.none(), st.none(), tokens)
sels = st.one_of(st.sampled_from(["L/{w}/0/{b}", "L/{w}/1/{b}", "L/{w}/2/{b}", "B/{w}/{b}",
                                  "L/{w}/9/{b}", "B/{w}/nope"]), form_values)


def _fill(sel: str, workload: str) -> str:
    block = {"mm_relu": "Y", "matmul": "C", "softmax": "T_softmax_maxelem", "transpose": "B",
             "conv2d": "conv", "relu": "B", "sum": "B"}.get(workload, "B")
    return sel.replace("{w}", workload).replace("{b}", block)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=st.one_of(st.sampled_from(WORKLOADS), names), n=st.one_of(good_sizes, sizes),
       t=maybe_tokens, at=st.one_of(st.none(), sizes), sel=sels)
def test_explorer_get_never_500(client, name, n, t, at, sel):
    q = {"n": n, "sel": _fill(sel, name)}
    if t is not None:
        q["t"] = t
    if at is not None:
        q["at"] = at
    name = quote(name, safe="")
    for path in (f"/explore/{name}", f"/explore/{name}/toolbar"):
        r = client.get(path, query_string=q, headers={"HX-Request": "true"})
        assert_no_500(r, f"GET {path} {q}")
    fmt = random.Random(hash(str(t))).choice(["json", "python", "tvm", "course", "exe", ""])
    r = client.get(f"/explore/{name}/export/{fmt}", query_string=q)
    assert_no_500(r, f"export {fmt} {q}")
    assert_export_parses(r, fmt)


def assert_export_parses(r, fmt: str) -> None:
    """A 200 export is a download that parses: JSON, or a script of schedule calls only."""
    if r.status_code != 200:
        return
    assert "attachment" in r.headers.get("Content-Disposition", "")
    body = r.get_data(as_text=True)
    if fmt == "json":
        json.loads(body)
    else:
        ast.parse(body)
        assert_safe_export(body)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=st.sampled_from(WORKLOADS), n=st.one_of(good_sizes, good_sizes, sizes),
       prim=st.sampled_from(PRIMS), sel=sels,
       fields=st.dictionaries(st.sampled_from(FORM_KEYS[2:]), form_values, max_size=5),
       t=maybe_tokens, at=st.one_of(st.none(), st.none(), sizes))
def test_apply_never_500(client, name, n, prim, sel, fields, t, at):
    data = dict(fields)
    data["primitive"] = prim
    data["sel"] = _fill(sel, name)
    data["n"] = n
    if t is not None:
        data["t"] = t
    if at is not None:
        data["at"] = at
    r = client.post(f"/explore/{name}/apply", data=data, headers={"HX-Request": "true"})
    assert_no_500(r, f"apply {data}")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cut=st.integers(min_value=0, max_value=400), flip=st.integers(min_value=0, max_value=400),
       ch=st.sampled_from("A_-=!x~ "))
def test_mutated_real_tokens_never_500(client, cut, flip, ch):
    tok = _real_token(client)
    assert tok, "a legal split should give a trace token"
    variants = [tok[:cut], tok[:flip % len(tok)] + ch + tok[flip % len(tok) + 1:], tok + ch]
    for v in variants:
        r = client.get("/explore/mm_relu", query_string={"n": "16", "t": v})
        assert_no_500(r, f"token {v[:60]}")


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10),
                      st.floats(allow_nan=False, allow_infinity=False))
json_doc = st.recursive(json_leaf, lambda c: st.lists(c, max_size=4)
                        | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=25)


def _mutated_trace(doc, r: random.Random):
    doc = json.loads(json.dumps(doc))
    insts = doc.get("insts") or []
    if insts and r.random() < 0.7:
        inst = r.choice(insts)
        slot = r.randrange(4)
        inst[slot] = r.choice([None, [], ["l99"], "x", [1, 2, 3], {"a": 1}, inst[slot]])
    if r.random() < 0.3:
        doc["version"] = r.choice([0, 2, "1", None])
    if r.random() < 0.3:
        doc["workload"] = r.choice([None, {"name": "nope"}, {"name": "mm_relu", "params": {"n": -1}},
                                    "mm_relu", {"name": "mm_relu", "params": {"n": 10 ** 12}}])
    return doc


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(doc=json_doc, seed=st.integers(0, 10 ** 6), raw=st.text(max_size=200))
def test_import_never_500(client, doc, seed, raw):
    r = client.post("/import", data={"text": json.dumps(doc)})
    assert_no_500(r, f"import {json.dumps(doc)[:200]}")
    r = client.post("/import", data={"text": raw})
    assert_no_500(r, f"import raw {raw[:200]!r}")
    real = {"format": "schedule-explorer/trace", "version": 1,
            "workload": {"name": "mm_relu", "params": {"n": 16}},
            "insts": [["GetBlock", [], ["Y", "mm_relu"], ["b0"]],
                      ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
                      ["Split", ["l2", None, 4], [True, False], ["l4", "l5"]]]}
    mutated = _mutated_trace(real, random.Random(seed))
    r = client.post("/import", data={"text": json.dumps(mutated)})
    assert_no_500(r, f"import mutated {json.dumps(mutated)[:300]}")


def _token(doc) -> str:
    text = json.dumps(doc, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


attacks = st.sampled_from(
    ["__import__('os').system('x')", '"\\"); import os; (\\""', "lambda k, j: (j, k)",
     "lambda k, j: (__import__('os'), j)", "sch", "import", "l1", "b0", '"x"'])
hostile_values = st.one_of(st.just("__import__('os').system('x')"), attacks, json_leaf)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 10 ** 6), slot=st.integers(0, 50), value=hostile_values,
       fmt=st.sampled_from(["json", "python", "tvm", "course"]),
       at=st.one_of(st.none(), st.integers(-1, 4).map(str)))
def test_export_of_mutated_traces_never_500_and_parses(client, seed, slot, value, fmt, at):
    """Real traces (split, cache_read, transform_layout, rfactor), mutated and with a
    hostile value put into one of their input/attr slots: the export answers 4xx, or a
    download that parses and holds only schedule calls."""
    real = {"format": "schedule-explorer/trace", "version": 1,
            "workload": {"name": "matmul", "params": {"n": 16}},
            "insts": [["GetBlock", [], ["C", "matmul"], ["b0"]],
                      ["CacheRead", ["b0", []], [1, "global"], ["b1"]],
                      ["TransformLayout", ["b1"], [0, 1, "lambda k, j: (j // 4, k, j % 4)",
                                                   None], []],
                      ["GetLoops", ["b0"], [], ["l2", "l3", "l4"]],
                      ["Split", ["l4", None, 4], [True, False], ["l5", "l6"]],
                      ["RFactor", ["l6"], [0], ["b7"]]]}
    doc = _mutated_trace(real, random.Random(seed)) if seed % 4 == 0 else real
    slots = [(inst, part) for inst in doc.get("insts") or [] if isinstance(inst, list)
             and len(inst) == 4 for part in (1, 2, 2) if isinstance(inst[part], list)]
    if slots:
        inst, part = slots[slot % len(slots)]
        if inst[part] and slot % 2:
            inst[part][slot % len(inst[part])] = value
        else:
            inst[part].append(value)
    q = {"n": "16", "t": _token(doc)}
    if at is not None:
        q["at"] = at
    r = client.get(f"/explore/matmul/export/{fmt}", query_string=q)
    assert_no_500(r, f"export {fmt} {json.dumps(doc)[:300]}")
    assert_export_parses(r, fmt)


PROGRAM = '''@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    T.func_attr({"global_symbol": "f", "tir.noalias": True})
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + T.float32(1)
'''


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pos=st.integers(0, len(PROGRAM)), junk=st.text(max_size=12), cut=st.booleans())
def test_custom_program_never_500(client, pos, junk, cut):
    text = PROGRAM[:pos] + junk + ("" if cut else PROGRAM[pos:])
    r = client.post("/explore/custom", data={"program": text})
    assert_no_500(r, f"custom program {text!r}")
    if r.status_code in (302, 303):
        r2 = client.get(r.headers["Location"], headers={"HX-Request": "true"})
        assert_no_500(r2, f"custom program page {text!r}")


def test_deeply_nested_import_is_refused(client):
    r = client.post("/import", data={"text": "[" * 20_000 + "]" * 20_000})
    assert 400 <= r.status_code < 500
    assert "max_json_depth" in r.get_data(as_text=True)


def _deflated(data: bytes) -> str:
    import zlib
    return base64.urlsafe_b64encode(zlib.compress(data, 9)).decode().rstrip("=")


src_tokens = st.one_of(
    tokens,
    # the real program, whole or spliced with junk
    st.tuples(st.integers(0, len(PROGRAM)), st.text(max_size=12)).map(
        lambda t: _deflated((PROGRAM[:t[0]] + t[1] + PROGRAM[t[0]:]).encode())),
    st.just(_deflated(PROGRAM.encode())),
    # the real program followed by many comment lines (a small link, a long program)
    st.integers(1, 20_000).map(lambda k: _deflated((PROGRAM + "# x\n" * k).encode())),
    # deflated random bytes and deflated runs of one byte (a decompression bomb)
    st.binary(max_size=200).map(_deflated),
    st.tuples(st.sampled_from([b"\n", b" ", b"A", b"\x00"]), st.integers(1, 4_000_000)).map(
        lambda t: _deflated(t[0] * t[1])),
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(src=src_tokens, extra=st.sampled_from(["", "&at=1", "&sel=L/f/0/B", "&t=x"]))
def test_custom_program_link_never_500(client, src, extra):
    """``GET /explore/custom?src=``: any link is a page or a 4xx with a sentence, never a 500;
    a program over the script limits is refused (not rendered)."""
    from app.limits import DEFAULT_LIMITS
    from app.web.session import decode_src
    r = client.get(f"/explore/custom?src={quote(src)}{extra}")
    assert_no_500(r, f"custom program link {src[:80]!r}")
    if r.status_code == 200:
        text = decode_src(src)
        assert len(text) <= DEFAULT_LIMITS.max_script_chars
        assert text.count("\n") < DEFAULT_LIMITS.max_script_lines

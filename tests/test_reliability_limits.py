"""Input limits: every refusal names its limit; the JSON reader cannot be made to recurse."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.limits import InputError, LimitError, Limits, MeasurePlan, json_depth

L = Limits()


def test_defaults_and_overrides():
    assert L.step_time_limit_s == 5.0 and L.worker_memory_bytes == 2 << 30
    small = Limits.from_config({"EXPLORER_LIMITS": {"max_json_depth": 4}})
    assert small.max_json_depth == 4 and small.max_json_bytes == L.max_json_bytes
    assert Limits.from_config({}) == L and Limits.from_config(None) == L
    with pytest.raises(ValueError, match="Unknown limit.*max_jsn_depth"):
        Limits.from_config({"EXPLORER_LIMITS": {"max_jsn_depth": 4}})
    assert L.replace(max_dim=8).max_dim == 8


def test_json_size_limit_names_the_limit():
    lim = L.replace(max_json_bytes=100)
    with pytest.raises(LimitError) as e:
        lim.load_json("[" + "1," * 100 + "1]")
    assert e.value.limit == "max_json_bytes" and "max_json_bytes" in str(e.value)
    assert "100 bytes" in str(e.value)
    assert e.value.maximum == 100 and e.value.actual > 100


def test_json_depth_limit_names_the_limit():
    lim = L.replace(max_json_depth=3)
    assert lim.load_json("[[[1]]]") == [[[1]]]
    with pytest.raises(LimitError) as e:
        lim.load_json('{"a": [[[1]]]}')
    assert e.value.limit == "max_json_depth"
    assert "nested more than 3 levels deep (max_json_depth)" in str(e.value)


def test_very_deep_json_is_refused_without_recursion():
    text = "[" * 1_000_000 + "]" * 1_000_000
    lim = L.replace(max_json_bytes=4 << 20)
    with pytest.raises(LimitError) as e:
        lim.load_json(text)
    assert e.value.limit == "max_json_depth"
    assert json_depth(text) == 1_000_000          # the scan itself is iterative


def test_brackets_inside_strings_do_not_count():
    assert json_depth('{"a": "[[[[{{{{", "b": "\\"[[["}') == 1
    assert json_depth('["\\\\", [1]]') == 2          # an escaped backslash ends the escape


def test_malformed_json_is_an_input_error_not_a_limit():
    for bad in ["{", "[1,]", "nul", "", "\x00", '{"a": NaN}', "[Infinity]", "1" * 5000]:
        with pytest.raises(InputError) as e:
            L.load_json(bad)
        assert not isinstance(e.value, LimitError)
        assert "Traceback" not in str(e.value)
    with pytest.raises(InputError, match="not UTF-8"):
        L.load_json(b"\xff\xfe[1]")
    assert L.load_json(b'{"a": 1}') == {"a": 1}
    assert L.load_json("\ufeff[1]") == [1]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec="utf-8"), max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=30)


def reference_depth(v) -> int:
    if isinstance(v, list):
        return 1 + max((reference_depth(x) for x in v), default=0)
    if isinstance(v, dict):
        return 1 + max((reference_depth(x) for x in v.values()), default=0)
    return 0


@given(json_values)
def test_depth_scan_agrees_with_the_structure(v):
    text = json.dumps(v)
    assert json_depth(text) == reference_depth(v)
    assert json_depth(json.dumps(v, ensure_ascii=False, indent=1)) == reference_depth(v)


@given(json_values, st.integers(min_value=0, max_value=6))
def test_load_json_accepts_exactly_what_is_within_the_depth(v, depth):
    lim = L.replace(max_json_depth=depth)
    text = json.dumps(v)
    if reference_depth(v) <= depth:
        assert lim.load_json(text) == json.loads(text)
    else:
        with pytest.raises(LimitError):
            lim.load_json(text)


@given(st.one_of(st.text(max_size=300), st.binary(max_size=300),
                 st.text(alphabet='[]{}",:\\0123456789.eE+-tfnrulas \n', max_size=400)))
def test_load_json_only_ever_raises_input_errors(text):
    try:
        L.replace(max_json_depth=8, max_json_bytes=200).load_json(text)
    except InputError as e:
        assert str(e) and str(e)[0].isupper()


def test_token_trace_script_name_upload_limits():
    with pytest.raises(LimitError, match=r"8001 characters .* 8000 \(max_token_chars\)"):
        L.check_token("A" * 8001)
    L.check_token("A" * 8000)
    with pytest.raises(LimitError, match=r"301 steps.*300 \(max_trace_insts\)"):
        L.check_trace_length(301)
    L.check_trace_length(300)
    with pytest.raises(LimitError, match="max_script_chars"):
        L.check_script("x" * (L.max_script_chars + 1))
    with pytest.raises(LimitError, match="max_script_lines"):
        L.check_script("\n" * L.max_script_lines)
    L.check_script("@T.prim_func\ndef f(): pass\n")
    with pytest.raises(LimitError, match="max_upload_bytes") as e:
        L.check_upload(L.max_upload_bytes + 1)
    assert "1 MiB" in str(e.value)
    L.check_upload(None)
    assert L.check_name("  my tiling ") == "my tiling"
    with pytest.raises(LimitError, match="max_name_chars"):
        L.check_name("x" * 101)
    with pytest.raises(InputError, match="empty"):
        L.check_name("   ")
    with pytest.raises(InputError, match="control character"):
        L.check_name("a\nb")


def test_workload_params():
    assert L.check_params("mm_relu", {"n": "128"}) == {"n": 128}
    assert L.check_params("conv2d", {"h": 32, "w": 32.0}) == {"h": 32, "w": 32}
    with pytest.raises(LimitError) as e:
        L.check_params("mm_relu", {"n": "5000"})
    assert e.value.limit == "max_dim" and "n=5000 of mm_relu is over the limit of 4096" in str(e.value)
    with pytest.raises(LimitError, match=r"over the limit of 512 \(mm_relu.n\)"):
        L.check_params("mm_relu", {"n": 600}, bounds={"n": (1, 512)})
    with pytest.raises(InputError, match="at least 16"):
        L.check_params("mm_relu", {"n": 8}, bounds={"n": (16, 512)})
    for bad in ["-3", "12abc", "1e3", "", "٣", "9" * 40, True, None, [1], 1.5]:
        with pytest.raises(InputError) as e:
            L.check_params("mm_relu", {"n": bad})
        assert "n" in str(e.value)
    with pytest.raises(InputError, match="too small"):
        L.check_params("mm_relu", {"n": 0})
    with pytest.raises(LimitError, match="max_buffer_bytes"):
        L.check_buffer_bytes(L.max_buffer_bytes + 1)


def test_measure_plan_simulate_only_mode():
    p = L.measure_plan(2 * 128 ** 3)
    assert p == MeasurePlan(True, 2 * 128 ** 3, None) and p.mode == "measure"
    big = L.measure_plan(2 * 2048 ** 3)
    assert not big.measure and big.mode == "simulate-only"
    assert "Simulate only" in big.reason and "max_flops_measured" in big.reason
    assert "17.2 GFLOP" in big.reason and "4 GFLOP" in big.reason
    # between the cache budget and the measurement budget: timed, not cache-simulated
    large = L.measure_plan(2 * 1024 ** 3)
    assert large.measure and not large.simulate_cache and large.reason is None
    assert "max_flops_cache_simulated" in large.cache_reason and "2.15 GFLOP" in large.cache_reason
    assert "timed by that one run" in large.note
    assert L.measure_plan(2 * 512 ** 3).simulate_cache
    with pytest.raises(LimitError) as e:
        L.measure_plan(1e12)
    assert e.value.limit == "max_flops"
    with pytest.raises(InputError):
        L.measure_plan(float("nan"))

"""engine.presets: every preset applies, is correct at small sizes, and ships as a trace."""
import json

import pytest

import engine
from engine import presets
from engine.schedule.trace import replay


def _small(p):
    if p.target:
        # the course's GPU schedules tile by 64 (GEMM): sizes they divide (at 48 the shared
        # tiles' cooperative fetch would read past A, and the build refuses it)
        return [{"n": 64}, {"n": 128}]
    if "n" in p.params:
        # 48: not divisible by the tile sizes; 80: the best schedules' 64-wide packing of B
        # pads (the copy then runs over the packed layout, TVM's rule)
        return [{"n": 64}, {"n": 48}, {"n": 80}]
    return [dict(size=10, in_channels=8, out_channels=8)]


def test_names_and_required_presets():
    names = presets.names()
    assert len(names) == len(set(names))
    for required in ("matmul-best", "mm_relu-course", "matmul-tiled"):
        assert required in names


def test_matmul_best_is_a_1024_matmul_schedule():
    sch = presets.get("matmul-best")
    assert sch.workload == ("matmul", {"n": 1024})
    assert "C: T.Buffer((1024, 1024)" in sch.mod.script()
    kinds = [i.kind for i in sch.trace]
    # only toolbar primitives (plus the handle look-ups)
    toolbar = {"GetBlock", "GetLoops", "Split", "Reorder", "Fuse", "Parallel", "Vectorize",
               "Unroll", "ComputeAt", "ReverseComputeAt", "DecomposeReduction", "CacheRead",
               "CacheWrite", "TransformLayout"}
    assert set(kinds) <= toolbar, set(kinds) - toolbar
    for k in ("Split", "Reorder", "Vectorize", "Unroll", "Parallel", "DecomposeReduction"):
        assert k in kinds
    text = sch.mod.script()
    assert "T.parallel" in text and "T.vectorized" in text and "T.unroll" in text


@pytest.mark.parametrize("name", presets.names())
def test_preset_correct_at_small_sizes(name):
    p = presets.info(name)
    for params in _small(p):
        sch = presets.get(name, **params)
        assert sch.workload == (p.workload, {**p.params, **params})
        if p.target:     # a GPU preset: built for its GPU, run in the emulator (or on a GPU)
            _check_gpu(sch.mod, p, {**p.params, **params})
            continue
        rep = engine.runtime.check_correctness(sch.mod, p.workload)
        assert rep.ok, (name, params, rep.message)


def _check_gpu(mod, p, params):
    import numpy as np
    from engine import workloads
    from engine.gpu.build import build_gpu
    info = workloads.info(p.workload)
    args = [np.asarray(a) for a in workloads.random_args(p.workload, 0, **params)]
    want = workloads.reference(p.workload, **params)(*args[:info.num_inputs])
    build_gpu(mod, p.target)[info.func_name](*args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-4, atol=1e-4 * max(1.0, float(
        np.max(np.abs(want)))))


@pytest.mark.parametrize("name", presets.names())
def test_trace_json_round_trip_replays(name):
    p = presets.info(name)
    params = _small(p)[0]
    doc = presets.trace_json(name, **params)
    doc = json.loads(json.dumps(doc))                  # really JSON
    assert doc["format"] == "schedule-explorer/trace"
    assert doc["workload"] == {"name": p.workload, "params": {**p.params, **params}}
    sch = replay(doc["workload"]["name"], doc["workload"]["params"], doc)
    assert engine.structural_equal(sch.mod, presets.get(name, **params).mod)


def test_best_trace_recorded_at_1024_replays_correctly_at_128():
    """The shipped 1024 trace itself (fixed factors) is legal and correct on a smaller n."""
    doc = presets.trace_json("matmul-best")
    sch = replay("matmul", {"n": 128}, doc)
    rep = engine.runtime.check_correctness(sch.mod, "matmul")
    assert rep.ok, rep.message


def test_preset_metadata():
    for p in presets.all_presets():
        d = p.as_dict()
        assert d["workload"] in engine.workloads.names()
        assert d["title"] and d["description"]
        json.dumps(d)


def test_unknown_preset_and_parameter_are_explained():
    with pytest.raises(presets.PresetError, match="no preset called 'nope'.*matmul-best"):
        presets.get("nope")
    with pytest.raises(presets.PresetError, match="no parameter 'size'"):
        presets.get("matmul-best", size=3)


@pytest.mark.parametrize("name", presets.names())
def test_preset_exports_for_tvm_and_python(name):
    """The TVM 0.27 export (used by benchmarks/bench_vs_tvm.py) names every instruction."""
    tr = presets.info(name).trace(**_small(presets.info(name))[0])
    tvm = tr.export("tvm")
    assert tvm.startswith("import tvm") and "get_sblock" in tvm
    assert tvm.count("\n    ") >= len(tr)          # one line per instruction
    compile(tvm, f"<{name}>", "exec")              # valid Python
    py = tr.export("python")
    compile(py, f"<{name}>", "exec")


def test_explore_url_carries_the_trace():
    from urllib.parse import parse_qs, urlparse
    url = presets.info("mm_relu-course").explore_url(n=32)
    u = urlparse(url)
    assert u.path == "/explore/mm_relu"
    q = parse_qs(u.query)
    assert q["n"] == ["32"]
    tr = engine.Trace.decode(q["t"][0])
    assert tr == presets.info("mm_relu-course").trace(n=32)

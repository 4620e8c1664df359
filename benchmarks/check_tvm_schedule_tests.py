"""How many of Apache TVM's own schedule tests pass on this engine?

    python benchmarks/check_tvm_schedule_tests.py                  # /tmp/tvm-tests/...
    python benchmarks/check_tvm_schedule_tests.py --tests DIR [--timeout 60] [--top 25]
    python benchmarks/check_tvm_schedule_tests.py --files split_fuse reorder -k fuse
    python benchmarks/check_tvm_schedule_tests.py --json results.json

``DIR`` holds TVM's ``tests/python/s_tir/schedule/test_*.py`` (a TVM checkout's files: they
are read where they are, never copied into this project). Each file is run by pytest in a
subprocess of its own, one after the other, with ``tvm`` pointing at :mod:`engine.tvm`: a
small pytest plugin, written to a temporary directory and loaded with ``-p`` before
collection, puts every module of ``engine.tvm`` into ``sys.modules`` under TVM's name
(``tvm``, ``tvm.ir``, ``tvm.script``, ``tvm.script.tirx``, ``tvm.s_tir``,
``tvm.s_tir.schedule.testing``, ``tvm.tirx``, ``tvm.tirx.stmt_functor``, ``tvm.testing``,
``tvm.te``, ...). The run ignores TVM's conftest files and pytest configuration
(``--noconftest``, an empty ini file of its own) and gives each test ``--timeout`` seconds
(a SIGALRM in the test's call; a file whose process hangs or dies anyway counts its
unreported tests as errors). ``ENGINE_NUM_THREADS=1`` unless set: the run shares the
machine.

Deselected (not counted in the total; the rule is checked statically on the source of the
test function and of the module-level functions, classes and variables it names, directly
or through one another):

* a test that uses a name imported from a module of :data:`DESELECTED_MODULES` (GPU, ARM,
  x86, Hexagon and ROCm tensor intrinsics; ``tvm_ffi``; the ``ScheduleState`` module;
  meta-schedule's analyses, workloads and ``tile_with_tensor_intrin``; the GPU helpers of
  ``tvm.testing.tir``);
* a test whose source matches one of :data:`SOURCE_RULES` (a GPU device or target,
  ``ScheduleState``/``StmtSRef``/``get_sref`` internals, ``ScheduleDebugMask``,
  ``tvm_ffi``).

Those modules exist in the subprocess only as stubs so that a file importing them at its
top can be collected (their names are placeholders that raise ``DeselectedFeatureUsed`` when
used: a kept test using one would show as a failure group of its own). Everything else of
TVM that ``engine.tvm`` lacks stays absent: a test using it fails (or its file fails to
collect: then its kept tests count as errors, their number estimated from the source —
literal ``parametrize`` lists and ``tvm.testing.parameter`` fixtures).

One policy of the harness's own: a module-level ``@T.prim_func`` or ``@I.ir_module`` the
engine's parser refuses does not stop the file from being collected (in the subprocess the
decorators keep the ``ScriptError``); each test naming that program (directly or through
other module-level names) fails with that ``ScriptError``, the file's other tests run. A
program that is *used* at import (``TensorIntrin.register(..., program)``) still fails the
collection, reported with the parse error.

The output: per file, tests passed / failed / errors (+ skipped or xfailed, deselected);
the CPU tests passed of the total; and the failures grouped by their first error line
(exception type and message, numbers and addresses normalised), most frequent first, with
the tests of each group.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TESTS = Path("/tmp/tvm-tests/tests/python/s_tir/schedule")

#: TVM modules whose tests are deselected: module -> why
DESELECTED_MODULES = {
    "tvm.s_tir.tensor_intrin": "TVM's registered tensor intrinsics (GPU/CPU vendor tiles)",
    "tvm.s_tir.tensor_intrin.cuda": "CUDA tensor intrinsics",
    "tvm.s_tir.tensor_intrin.rocm": "ROCm tensor intrinsics",
    "tvm.s_tir.tensor_intrin.hexagon": "Hexagon tensor intrinsics",
    "tvm.s_tir.tensor_intrin.arm_cpu": "ARM tensor intrinsics",
    "tvm.s_tir.tensor_intrin.x86": "x86 tensor intrinsics",
    "tvm.s_tir.schedule.transform": "x86 tensor intrinsics (meta-schedule's "
                                    "tile_with_tensor_intrin)",
    "tvm.s_tir.schedule.analysis": "meta-schedule's internal analyses",
    "tvm.s_tir.meta_schedule": "meta-schedule's internals",
    "tvm.s_tir.meta_schedule.testing": "meta-schedule's internals",
    "tvm.s_tir.schedule.state": "ScheduleState internals",
    "tvm.testing.tir": "GPU schedules (CUDA mma / ROCm mfma helpers)",
    "tvm_ffi": "tvm_ffi (TVM's FFI layer)",
}

#: (regular expression, why): a test whose source matches is deselected
SOURCE_RULES = [
    (r"\btvm\.(cuda|rocm|vulkan|metal|opencl|hexagon)\(|target\s*=\s*[\"'](cuda|rocm|nvptx|"
     r"vulkan|metal|opencl|hexagon)|pytest\.mark\.gpu|requires_(cuda|gpu|rocm|hexagon|"
     r"tensorcore)|has_cuda_compute|has_matrixcore|run_with_gpu_lock", "GPU device or target"),
    (r"\bT\.(thread_binding|launch_thread|env_thread)\b|[\"'](threadIdx|blockIdx)\.[xyz]|"
     r"[\"']vthread",
     "GPU thread binding"),
    (r"\btvm_(fill_fragment|load_matrix_sync|store_matrix_sync|mma_sync|bmma_sync)\b",
     "CUDA tensor-core intrinsics"),
    (r"\b(ScheduleState|StmtSRef|get_sref|_get_cached_flags|CachedFlags)\b",
     "ScheduleState internals"),
    (r"\bScheduleDebugMask\b", "debug_mask internals"),
    (r"\btvm_ffi\b", "tvm_ffi (TVM's FFI layer)"),
]


# ---------------------------------------------------------------- static scan of a file
def _estimate_count(fn: ast.FunctionDef, fixtures: dict[str, int]) -> int:
    """How many tests pytest makes of ``fn``: literal parametrize lists x parameter fixtures."""
    n = 1
    for d in fn.decorator_list:
        if isinstance(d, ast.Call) and ast.unparse(d.func).endswith("mark.parametrize") \
                and len(d.args) >= 2 and isinstance(d.args[1], (ast.List, ast.Tuple)):
            n *= max(1, len(d.args[1].elts))
    for a in fn.args.args:
        n *= fixtures.get(a.arg, 1)
    return n


def _parameter_fixtures(tree: ast.Module) -> dict[str, int]:
    """Module variables made by ``tvm.testing.parameter(...)``: name -> number of values."""
    out = {}
    for st in tree.body:
        if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) and \
                ast.unparse(st.value.func).endswith("testing.parameter"):
            call = st.value
            count = len(call.args)
            for kw in call.keywords:
                if kw.arg == "by_dict" and isinstance(kw.value, ast.Dict):
                    count = len(kw.value.keys)
            for t in st.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = max(1, count)
    return out


def scan_file(path: Path) -> dict[str, dict]:
    """Each test function of the file: {"reason": why deselected or None, "estimate": n}."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, filename=str(path))
    defs: dict[str, list[ast.AST]] = defaultdict(list)
    imported: dict[str, str] = {}     # local name -> the module it was imported from
    for st in tree.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs[st.name].append(st)
        elif isinstance(st, (ast.Assign, ast.AnnAssign)):
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        defs[n.id].append(st)
        elif isinstance(st, ast.ImportFrom) and st.module:
            for a in st.names:
                imported[a.asname or a.name] = st.module
        elif isinstance(st, ast.Import):
            for a in st.names:
                if a.asname:
                    imported[a.asname] = a.name
                elif "." not in a.name:
                    imported[a.name] = a.name
    fixtures = _parameter_fixtures(tree)

    def closure(node: ast.AST) -> tuple[str, set[str]]:
        seen: set[int] = set()
        parts: list[str] = []
        names: set[str] = set()
        todo = [node]
        while todo:
            cur = todo.pop()
            if id(cur) in seen:
                continue
            seen.add(id(cur))
            parts.append(ast.get_source_segment(text, cur) or "")
            for n in ast.walk(cur):
                if isinstance(n, ast.Name):
                    names.add(n.id)
                    todo.extend(defs.get(n.id, ()))
        return "\n".join(parts), names

    out = {}
    for st in tree.body:
        if not (isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef))
                and st.name.startswith("test")):
            continue
        source, names = closure(st)
        reason = None
        for name in sorted(names):
            module = imported.get(name)
            if module in DESELECTED_MODULES:
                reason = f"{DESELECTED_MODULES[module]} (uses {name} from {module})"
                break
        if reason is None:
            for pattern, why in SOURCE_RULES:
                m = re.search(pattern, source)
                if m:
                    reason = f"{why} ({m.group(0)})"
                    break
        out[st.name] = {"reason": reason, "estimate": _estimate_count(st, fixtures),
                        "names": sorted(n for n in names if n in defs and n != st.name)}
    return out


# ---------------------------------------------------------------- the subprocess's plugin
PLUGIN = r'''
"""Loaded by check_tvm_schedule_tests.py with -p before collection: ``tvm`` is engine.tvm."""
import importlib
import json
import os
import pkgutil
import signal
import sys
import types

import pytest

import engine.tvm

DESELECTED_MODULES = json.loads(os.environ["TVM_SHIM_STUBS"])
DECISIONS = json.load(open(os.environ["TVM_SHIM_DECISIONS"]))
OUT = open(os.environ["TVM_SHIM_OUT"], "a", encoding="utf-8")
TIMEOUT = float(os.environ["TVM_SHIM_TIMEOUT"])


def _install_shim():
    sys.modules["tvm"] = engine.tvm
    todo = [("tvm", engine.tvm)]
    for info in pkgutil.walk_packages(engine.tvm.__path__, "engine.tvm."):
        mod = importlib.import_module(info.name)
        todo.append(("tvm" + info.name[len("engine.tvm"):], mod))
    while todo:   # and the engine's own modules they hold: tvm.te, tvm.script.tirx, ...
        name, mod = todo.pop()
        sys.modules.setdefault(name, mod)
        for attr, value in list(vars(mod).items()):
            if isinstance(value, types.ModuleType) and value.__name__.startswith("engine.") \
                    and f"{name}.{attr}" not in sys.modules:
                todo.append((f"{name}.{attr}", value))


class DeselectedFeatureUsed(RuntimeError):
    pass


class _Placeholder:
    def __init__(self, name):
        self._name = name

    def _refuse(self, *args, **kwargs):
        raise DeselectedFeatureUsed(f"{self._name} belongs to a deselected feature")

    __call__ = __getitem__ = __iter__ = __len__ = __bool__ = _refuse

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(f"{self._name}.{attr}")

    def __repr__(self):
        return f"<deselected {self._name}>"


def _stub_getattr(module_name):
    def getattr_(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(f"{module_name}.{attr}")
    return getattr_


def _install_stubs():
    for name in DESELECTED_MODULES:
        if name in sys.modules:
            continue
        stub = types.ModuleType(name, "a stub of a deselected TVM feature")
        stub.__getattr__ = _stub_getattr(name)
        stub.__path__ = []
        sys.modules[name] = stub


DEFERRED = []  # the ScriptErrors of module-level programs, in order


class UnparsedProgram:
    """A module-level @T.prim_func / @I.ir_module the engine could not read: the tests that
    name it fail with its error; the file's other tests still run."""

    def __init__(self, error):
        self.error = error

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __repr__(self):
        return f"<unparsed program: {self.error}>"


def _defer_module_level_parse_errors():
    import engine.script
    import engine.script.ir as I
    import engine.script.tir as T
    import engine.tvm.script

    prim_func, ir_module = T.prim_func, I.ir_module

    def deferring_prim_func(func=None, **options):
        if func is None:
            return lambda f: deferring_prim_func(f, **options)
        try:
            return prim_func(func, **options)
        except engine.script.ScriptError as e:
            if "<locals>" in getattr(func, "__qualname__", "<locals>"):
                raise
            DEFERRED.append(e)
            return UnparsedProgram(e)

    def deferring_ir_module(cls=None, **options):
        if cls is None:
            return lambda c: deferring_ir_module(c, **options)
        if isinstance(cls, type) and "<locals>" not in cls.__qualname__:
            for value in vars(cls).values():
                if isinstance(value, UnparsedProgram):
                    return value
        return ir_module(cls, **options)

    T.prim_func = deferring_prim_func
    I.ir_module = engine.script.ir_module = deferring_ir_module
    engine.tvm.script.ir_module = deferring_ir_module


_install_shim()
_install_stubs()
_defer_module_level_parse_errors()


def _write(**record):
    OUT.write(json.dumps(record) + "\n")
    OUT.flush()


def _first_line(report):
    longrepr = report.longrepr
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return crash.message.strip().splitlines()[0]
    text = str(longrepr)
    for line in text.splitlines():
        if line.startswith("E   ") and line[4:].strip():
            return line[4:].strip()
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[-1].strip() if lines else "(no message)"


def pytest_collection_modifyitems(session, config, items):
    keep, drop = [], []
    for item in items:
        base = os.path.basename(str(item.path))
        func = getattr(item, "originalname", None) or item.name.split("[")[0]
        reason = DECISIONS.get(base, {}).get(func, {}).get("reason")
        if reason:
            drop.append(item)
            _write(kind="deselected", file=base, test=item.name, reason=reason)
        else:
            keep.append(item)
    items[:] = keep
    if drop:
        config.hook.pytest_deselected(items=drop)


def pytest_collection_finish(session):
    for item in session.items:  # after every deselection (ours, -k)
        _write(kind="collected", file=os.path.basename(str(item.path)), test=item.name)


def pytest_collectreport(report):
    if report.failed:
        message = _first_line(report)
        if "UnparsedProgram" in message and DEFERRED:  # a module-level use of one
            first = str(DEFERRED[0]).strip().splitlines()[0]
            message = f"{type(DEFERRED[0]).__name__}: {first}"
        _write(kind="collect_error", nodeid=report.nodeid, message=message)


@pytest.hookimpl(tryfirst=True, specname="pytest_runtest_call")
def pytest_runtest_call_unparsed(item):
    """A test naming a module-level program the engine could not read fails with its error."""
    base = os.path.basename(str(item.path))
    func = getattr(item, "originalname", None) or item.name.split("[")[0]
    module = getattr(item, "module", None)
    for name in DECISIONS.get(base, {}).get(func, {}).get("names", []):
        value = getattr(module, name, None)
        if isinstance(value, UnparsedProgram):
            raise value.error


def _alarm(signum, frame):
    raise TimeoutError(f"the test ran longer than {TIMEOUT:g} s")


@pytest.hookimpl(hookwrapper=True, specname="pytest_runtest_call")
def pytest_runtest_call_time_limit(item):
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, TIMEOUT)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def pytest_runtest_logreport(report):
    if report.when != "call" and report.passed:
        return
    if hasattr(report, "wasxfail"):
        outcome = "xfailed" if report.skipped else "xpassed"
    elif report.skipped:
        outcome = "skipped"
    elif report.failed:
        outcome = "failed" if report.when == "call" else "error"
    else:
        outcome = "passed"
    _write(kind="result", file=os.path.basename(report.fspath),
           test=report.nodeid.split("::")[-1], when=report.when, outcome=outcome,
           message=_first_line(report) if report.failed else "")
'''


# ---------------------------------------------------------------- running and reporting
def run_file(path: Path, decisions: dict, tmp: Path, timeout: float, k: str | None,
             verbose: bool, extra: list[str]) -> list[dict]:
    out = tmp / f"{path.stem}.jsonl"
    out.unlink(missing_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp), str(ROOT)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("ENGINE_NUM_THREADS", "1")
    env["TVM_SHIM_STUBS"] = json.dumps(sorted(DESELECTED_MODULES))
    env["TVM_SHIM_DECISIONS"] = str(tmp / "decisions.json")
    env["TVM_SHIM_OUT"] = str(out)
    env["TVM_SHIM_TIMEOUT"] = str(timeout)
    cmd = [sys.executable, "-m", "pytest", str(path), "-p", "tvm_shim_plugin",
           "-p", "no:cacheprovider", "--noconftest", "-c", str(tmp / "pytest.ini"),
           "--rootdir", str(tmp), "--import-mode=importlib", "-q", "--tb=no",
           "-o", f"faulthandler_timeout={timeout + 30:g}", "-W", "ignore"]
    if k:
        cmd += ["-k", k]
    cmd += extra
    n_kept = sum(1 for d in decisions.values() if not d["reason"])
    budget = 120 + (timeout + 5) * max(1, n_kept) * 3
    note = None
    try:
        proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True,
                              timeout=budget)
        if verbose:
            print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
        if proc.returncode not in (0, 1, 5):
            note = f"pytest exited with status {proc.returncode}"
            tail = (proc.stderr or proc.stdout).strip().splitlines()
            if tail and len(tail[-1].strip()) > 3:
                note += f": {tail[-1][:200]}"
            elif proc.returncode < 0:
                note += " (killed by a signal)"
    except subprocess.TimeoutExpired:
        note = f"the file's run was killed after {budget:g} s"
    records = []
    if out.exists():
        for line in out.read_text(encoding="utf-8").splitlines():
            records.append(json.loads(line))
    if note:
        records.append({"kind": "file_note", "message": note})
    return records


def normalise(message: str) -> str:
    """The first error line with what varies between tests made uniform."""
    m = message.strip().splitlines()[0] if message.strip() else "(no message)"
    m = re.sub(r"^(?:[A-Za-z_]\w*\.)+(?=\w+(?:Error|Exception|Exit|Warning)\b)", "", m)
    m = re.sub(r"0x[0-9a-fA-F]+", "0x…", m)
    m = re.sub(r"(?<![A-Za-z_0-9])\d+(\.\d+)?", "N", m)
    m = re.sub(r"/[^\s'\"]+\.py", "<file>", m)
    return m[:200]


def summarise(path: Path, decisions: dict, records: list[dict]) -> dict:
    """Per-file counts and the failing tests with their messages."""
    results: dict[str, dict] = {}
    collected = [r["test"] for r in records if r["kind"] == "collected"]
    deselected = [r for r in records if r["kind"] == "deselected"]
    collect_errors = [r for r in records if r["kind"] == "collect_error"]
    notes = [r["message"] for r in records if r["kind"] == "file_note"]
    for r in records:
        if r["kind"] != "result":
            continue
        prev = results.get(r["test"])
        # a failing teardown after a passing call makes the test an error
        if prev is None or prev["outcome"] in ("passed",) and r["outcome"] == "error":
            results[r["test"]] = r
    counts = Counter()
    failures = []
    if collect_errors and not collected:
        # the file did not collect: its kept tests (estimated from the source) are errors
        message = collect_errors[0]["message"]
        n_desel = sum(d["estimate"] for d in decisions.values() if d["reason"])
        for name, d in decisions.items():
            if not d["reason"]:
                counts["error"] += d["estimate"]
                failures.append({"test": name + (f" (x{d['estimate']})"
                                                 if d["estimate"] > 1 else ""),
                                 "message": f"[collection] {message}",
                                 "weight": d["estimate"]})
        counts["deselected"] = n_desel
        return {"file": path.name, "counts": counts, "failures": failures,
                "collect_error": message, "notes": notes}
    for name in collected:
        r = results.get(name)
        if r is None:
            counts["error"] += 1
            failures.append({"test": name, "message": "no result (the run ended before it: "
                             + (notes[0] if notes else "crash") + ")", "weight": 1})
            continue
        outcome = r["outcome"]
        counts[{"xpassed": "passed"}.get(outcome, outcome)] += 1
        if outcome in ("failed", "error"):
            failures.append({"test": name, "message": r["message"], "weight": 1})
    counts["deselected"] = len(deselected)
    return {"file": path.name, "counts": counts, "failures": failures,
            "collect_error": collect_errors[0]["message"] if collect_errors else None,
            "notes": notes}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", type=Path, default=DEFAULT_TESTS,
                    help=f"the directory of TVM's schedule tests (default {DEFAULT_TESTS})")
    ap.add_argument("--files", nargs="*", default=None,
                    help="only the files whose name contains one of these words")
    ap.add_argument("-k", default=None, help="pytest's -k expression, for each file")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per test (60)")
    ap.add_argument("--top", type=int, default=25, help="failure groups listed with their "
                    "tests (25; the rest are counted)")
    ap.add_argument("--json", type=Path, default=None, help="write every result here")
    ap.add_argument("--show-deselected", action="store_true",
                    help="list every deselected test with its rule")
    ap.add_argument("--verbose", action="store_true", help="show pytest's own output")
    ap.add_argument("--with-thread-binding", action="store_true",
                    help="also run the tests that only bind GPU threads (T.thread_binding, "
                         "'threadIdx.x', ...; the engine has bind since the GPU work): they "
                         "are counted with the others")
    ap.add_argument("--pytest-args", default="", help="more pytest options, e.g. "
                    "\"--tb=short\" with --verbose to see the tracebacks")
    args = ap.parse_args()

    if not args.tests.is_dir():
        print(f"no such directory: {args.tests} (a TVM checkout's "
              "tests/python/s_tir/schedule)", file=sys.stderr)
        return 2
    files = sorted(args.tests.glob("test_*.py"))
    if args.files:
        files = [f for f in files if any(w in f.name for w in args.files)]
    if args.with_thread_binding:
        SOURCE_RULES[:] = [r for r in SOURCE_RULES if r[1] != "GPU thread binding"]
    decisions = {f.name: scan_file(f) for f in files}

    summaries = []
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="tvm-shim-") as tmpdir:
        tmp = Path(tmpdir)
        (tmp / "tvm_shim_plugin.py").write_text(PLUGIN, encoding="utf-8")
        (tmp / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        (tmp / "decisions.json").write_text(json.dumps(decisions), encoding="utf-8")
        for f in files:
            kept = [n for n, d in decisions[f.name].items() if not d["reason"]]
            if not kept:
                n = sum(d["estimate"] for d in decisions[f.name].values())
                summaries.append({"file": f.name, "counts": Counter(deselected=n),
                                  "failures": [], "collect_error": None,
                                  "notes": ["every test deselected; not run"]})
            else:
                t0 = time.time()
                records = run_file(f, decisions[f.name], tmp, args.timeout, args.k,
                                   args.verbose, args.pytest_args.split())
                s = summarise(f, decisions[f.name], records)
                s["seconds"] = round(time.time() - t0, 1)
                summaries.append(s)
            c = summaries[-1]["counts"]
            print(f"  ran {f.name}: {c['passed']} passed, {c['failed']} failed, "
                  f"{c['error']} errors", file=sys.stderr, flush=True)

    report(summaries, decisions, args.top, args.show_deselected)
    print(f"\n(total time {time.time() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps({"files": summaries, "decisions": decisions},
                                        indent=1, default=dict), encoding="utf-8")
    return 0


def report(summaries: list[dict], decisions: dict, top: int, show_deselected: bool) -> None:
    total = Counter()
    width = max(len(s["file"]) for s in summaries) if summaries else 10
    print(f"{'file':<{width}}  passed  failed  errors  skipped  deselected")
    for s in summaries:
        c = s["counts"]
        total.update(c)
        extra = ""
        if s.get("collect_error"):
            extra = f"  [collection error: {s['collect_error'][:90]}]"
        elif s["notes"]:
            extra = f"  [{s['notes'][0][:90]}]"
        skipped = c["skipped"] + c["xfailed"]
        print(f"{s['file']:<{width}}  {c['passed']:>6}  {c['failed']:>6}  {c['error']:>6}"
              f"  {skipped:>7}  {c['deselected']:>10}{extra}")
    counted = total["passed"] + total["failed"] + total["error"]
    skipped = total["skipped"] + total["xfailed"]
    print(f"\nCPU tests passed: {total['passed']} of {counted} "
          f"({total['failed']} failed, {total['error']} errors); "
          f"{skipped} skipped or xfailed (not counted); {total['deselected']} deselected")

    reasons = Counter()
    listed = []
    for fname, tests in decisions.items():
        for name, d in tests.items():
            if d["reason"]:
                rule = re.sub(r"\s*\(.*$", "", d["reason"])
                reasons[rule] += 1
                listed.append(f"  {fname}::{name}: {d['reason']}")
    if reasons:
        print("deselected test functions by rule: " + "; ".join(
            f"{r}: {n}" for r, n in reasons.most_common()))
    if show_deselected:
        print("\n".join(listed))

    groups: dict[str, list[str]] = defaultdict(list)
    weights = Counter()
    for s in summaries:
        for fl in s["failures"]:
            key = normalise(fl["message"])
            groups[key].append(f"{s['file'].removeprefix('test_tir_schedule_')}::{fl['test']}")
            weights[key] += fl.get("weight", 1)
    order = sorted(groups, key=lambda g: (-weights[g], g))
    print(f"\nfailures by first error line ({len(order)} groups, most frequent first):")
    for i, key in enumerate(order):
        if i == top:
            rest = sum(weights[g] for g in order[top:])
            print(f"\n... {len(order) - top} more groups ({rest} tests)")
            break
        print(f"\n{i + 1:>3}. [{weights[key]}] {key}")
        tests = groups[key]
        shown = ", ".join(tests[:12])
        more = f", ... (+{len(tests) - 12})" if len(tests) > 12 else ""
        print(f"     {shown}{more}")


if __name__ == "__main__":
    sys.exit(main())

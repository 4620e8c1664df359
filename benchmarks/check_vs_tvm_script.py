"""Does Apache TVM 0.27 read what we print, and does it schedule to the same program?

    python benchmarks/check_vs_tvm_script.py                # uses /tmp/tvm-venv if it exists
    python benchmarks/check_vs_tvm_script.py --tvm-python /path/to/python

For every workload (default and small parameters) and every preset (at its default and
at sizes that leave tails, where splits get a ``T.where``), and for a set of ``fuse``
schedules (unit loops at several positions, three-way fuses, fuses of split loops), it

1. prints the original and the scheduled program with ``mod.script(dialect="tvm-0.27")``
   and exports the trace with ``trace.export("tvm")``;
2. in a *separate Python* with ``apache-tvm==0.27.0.post1`` (a throwaway venv outside the
   repository, as ``bench_vs_tvm.py`` uses; TVM is never a dependency of this project)
   parses both texts with TVM's own TVMScript parser, applies the exported trace to the
   original with ``tvm.s_tir.Schedule`` and compares TVM's result with our scheduled
   program by ``tvm.ir.assert_structural_equal``;
3. prints one line per case: parsed (yes/no), same program as TVM's schedule (yes/no, and
   the first differing lines of the two scripts as TVM prints them), and a summary. The
   exit status is 1 when a printed text does not parse in TVM (the dialect's promise); a
   schedule that differs is reported, not fatal (a parity figure).

Set up the venv with ``python benchmarks/bench_vs_tvm.py --setup``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import engine  # noqa: E402
from engine import presets  # noqa: E402

DEFAULT_VENV = Path("/tmp/tvm-venv")

# Runs inside the TVM venv (never imported here): a JSON list of jobs on stdin, a JSON list
# of results on stdout.
DRIVER = r'''
import difflib, json, sys, traceback
import tvm
from tvm.script import tirx as T, ir as I


def parse(text):
    return tvm.script.from_source(text, extra_vars={"T": T, "I": I})


def first_error(e):
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return f"{type(e).__name__}: {(lines[-1] if lines else '').strip()[:300]}"


out = []
for job in json.load(sys.stdin):
    res = {"label": job["label"]}
    try:
        original = parse(job["original"])
        scheduled = parse(job["scheduled"])
        res["parsed"] = True
    except Exception as e:  # noqa: BLE001
        res.update(parsed=False, error=first_error(e))
        out.append(res)
        continue
    try:
        sch = tvm.s_tir.Schedule(original)
        ns = {}
        exec(job["trace"], ns)
        ns["apply_trace"](sch)
        try:
            tvm.ir.assert_structural_equal(sch.mod, scheduled)
            res["same"] = True
        except ValueError:
            res["same"] = False
        if not res["same"]:
            ours = scheduled.script().splitlines()
            theirs = sch.mod.script().splitlines()
            diff = [d for d in difflib.unified_diff(ours, theirs, "ours", "tvm", n=0, lineterm="")
                    if d[:1] in "+-" and d[:3] not in ("+++", "---")]
            res["diff"] = diff[:8]
    except Exception as e:  # noqa: BLE001
        res.update(same=None, error=first_error(e), traceback=traceback.format_exc()[-1500:])
    out.append(res)
json.dump(out, sys.stdout)
'''


def _fuse_cases() -> list[tuple[str, engine.Schedule]]:
    """fuse schedules whose bindings TVM simplifies: unit loops, 3-way fuses, split loops."""
    out = []

    def make(label, wl, params, steps):
        sch = engine.Schedule(engine.workloads.get(wl, **params))
        steps(sch)
        out.append((label, sch))

    def conv_n_co(s):
        n, co, *_ = s.get_loops(s.get_block("conv"))
        s.parallel(s.fuse(n, co))

    def conv_n_co_oh(s):
        n, co, oh, *_ = s.get_loops(s.get_block("conv"))
        s.fuse(n, co, oh)

    def conv_pad_all(s):
        s.fuse(*s.get_loops(s.get_block("pad")))

    def mm_three(s):
        i, j, k = s.get_loops(s.get_block("C"))
        s.fuse(i, j, k)

    def mm_split_fuse(s):
        i, j, _ = s.get_loops(s.get_block("C"))
        i0, i1 = s.split(i, [None, 4])
        j0, j1 = s.split(j, [None, 8])
        s.reorder(i0, j0, i1, j1)
        s.parallel(s.fuse(i0, j0))

    def mm_unit_split_fuse(s):
        i, j, _ = s.get_loops(s.get_block("C"))
        i0, i1 = s.split(i, [1, None])
        s.fuse(i0, i1)

    def mm_imperfect_parallel(s):
        i, _, _ = s.get_loops(s.get_block("C"))
        i0, i1 = s.split(i, [None, 7])
        s.split(i1, [None, 4])
        s.parallel(i0)

    def bmm_fuse(s):
        b, i, j, _ = s.get_loops(s.get_block("C"))
        s.fuse(b, i, j)

    make("fuse conv2d n(1),co + parallel", "conv2d", {"size": 8}, conv_n_co)
    make("fuse conv2d n(1),co,oh", "conv2d", {"size": 8}, conv_n_co_oh)
    make("fuse conv2d pad n,c,h,w", "conv2d", {"size": 8}, conv_pad_all)
    make("fuse matmul i,j,k", "matmul", {"n": 12}, mm_three)
    make("split+fuse matmul tiles + parallel", "matmul", {"n": 32}, mm_split_fuse)
    make("split(i,[1,None])+fuse", "matmul", {"n": 10}, mm_unit_split_fuse)
    make("matmul n=14 imperfect split + parallel", "matmul", {"n": 14}, mm_imperfect_parallel)
    make("fuse batch_matmul b(1),i,j", "batch_matmul", {"batch": 1, "n": 8}, bmm_fuse)
    return out


def cases() -> list[tuple[str, engine.Schedule]]:
    out = []
    for name in engine.workloads.names():
        out.append((f"workload {name}", engine.Schedule(engine.workloads.get(name))))
    for p in presets.all_presets():
        sizes = [{}]
        if "n" in p.resolved_params():
            sizes += [{"n": 7}, {"n": 13}]
        for params in sizes:
            label = f"preset {p.name}" + "".join(f" {k}={v}" for k, v in params.items())
            try:
                out.append((label, presets.get(p.name, **params)))
            except Exception as e:  # noqa: BLE001 - reported, not fatal
                print(f"{label}: our schedule fails: {e}")
    return out + _fuse_cases()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tvm-python", type=Path, default=DEFAULT_VENV / "bin" / "python")
    args = ap.parse_args()
    if not args.tvm_python.exists():
        print(f"no TVM python at {args.tvm_python}: create it with "
              "`python benchmarks/bench_vs_tvm.py --setup` or pass --tvm-python")
        return 2
    jobs = []
    for label, sch in cases():
        jobs.append({"label": label,
                     "original": sch.original_mod.script(dialect="tvm-0.27"),
                     "scheduled": sch.mod.script(dialect="tvm-0.27"),
                     "trace": sch.trace.export("tvm")})
    r = subprocess.run([str(args.tvm_python), "-c", DRIVER], input=json.dumps(jobs),
                       capture_output=True, text=True, timeout=1800)
    if r.returncode:
        print(f"the TVM driver failed: {r.stderr.strip()[-2000:]}")
        return 2
    results = json.loads(r.stdout)
    width = max(len(x["label"]) for x in results)
    print(f"{'case':<{width}}  parses in TVM 0.27  same program as TVM's schedule")
    unparsed = differ = 0
    for res in results:
        same = {True: "yes", False: "NO", None: "error"}[res.get("same")] \
            if res.get("parsed") else "-"
        print(f"{res['label']:<{width}}  {'yes' if res.get('parsed') else 'NO':<18} {same}")
        unparsed += not res.get("parsed")
        differ += bool(res.get("parsed")) and res.get("same") is not True
        if not res.get("parsed") or res.get("same") is not True:
            if res.get("error"):
                print(f"    {res['error']}")
            for line in res.get("diff", []):
                print(f"    {line}")
    n = len(results)
    print(f"\n{n - unparsed} of {n} printed programs parse in TVM 0.27 (required: all); "
          f"{n - unparsed - differ} of {n - unparsed} schedule to the same program as TVM's "
          "(a difference above is a program TVM would write differently, e.g. a binding it "
          "simplifies further)")
    return 1 if unparsed else 0

if __name__ == "__main__":
    sys.exit(main())

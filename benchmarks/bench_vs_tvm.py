"""Our generated code vs Apache TVM 0.27 on the same schedules, timed in one run.

    python benchmarks/bench_vs_tvm.py                 # uses /tmp/tvm-venv if it exists
    python benchmarks/bench_vs_tvm.py --setup         # first create it (pip, ~1 min)
    python benchmarks/bench_vs_tvm.py --tvm-python /path/to/python --quick

For each case (mm_relu: the course's schedule, the tiled preset, the best preset; conv2d:
unscheduled, the course's steps carried over, the tiled preset, the best preset; rectangular
matmuls whose column loop is split by a factor that does not divide it and vectorized, so the
last vector is a partial one; a matmul whose 56-column row is vectorized whole; conv2d with
its output column loop left unvectorized — split by 8 under the reduction or around it, or
whole under it —, where LLVM's loop vectorizer decides, as it does in TVM's pipeline) it

1. builds the schedule with this engine (``engine.presets``), checks it against numpy and
   times it;
2. exports the program text and the trace with ``trace.export('tvm')`` (TVM 0.27's
   ``tvm.s_tir`` API), and runs a small driver in a *separate Python* that has
   ``apache-tvm==0.27.0.post1`` installed (a throwaway venv outside the repository — TVM
   is never a dependency of this project). The driver parses the same program with TVM's
   TVMScript parser (after renaming the 2022 syntax to 0.27's: ``T.block`` ->
   ``T.sblock``, ...), applies the exported trace, compiles with ``tvm.compile`` for the
   host CPU, checks the result against the same numpy reference and times it;
3. prints both times, both GFLOP/s and the ratio (TVM time / our time: > 1 means ours is
   faster), with the spread of that ratio over interleaved rounds and a verdict, plus the
   number of FMA and vector load/store instructions in each side's assembly, and each
   side's compile time (best of 3; TVM's includes its first function lookup, where its JIT
   makes the machine code; ours includes the JIT link; ours is measured again right after
   TVM's, so that both sides' best is taken under the same load).

Both sides are timed the same way (each round: the mean of repeated calls from Python on
the same input arrays; rounds alternate which side goes first) on the same memory (the
arrays live in files under /dev/shm that both processes map, so both kernels touch the same
physical pages: see :func:`shared_copies`) and use all cores
(``TVM_NUM_THREADS`` = our pool size). On a shared 2-core machine one round can be 10-90%
off (parallel kernels most), so each side keeps its best round, and the even and the odd
rounds give two independent ratios: the verdict is "faster"/"slower" only when the ratio is
more than 3% from 1 and both halves agree, else "same" (within noise).
If TVM is missing or fails, the script says exactly why and still prints our figures.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import engine  # noqa: E402
from engine import presets, roofline  # noqa: E402
from engine.runtime import as_aligned, runtime_info  # noqa: E402

DEFAULT_VENV = Path("/tmp/tvm-venv")
ROUNDS = 7          # interleaved timing rounds per case (ours, TVM, ours, TVM, ...)
PARITY_BAND = 0.03  # a ratio within 3% of 1 (or halves that disagree) is "same speed"
TVM_REQUIREMENT = "apache-tvm==0.27.0.post1"

# ---------------------------------------------------------------------------- the driver
# Runs inside the TVM venv (never imported here). Input: a JSON job file; output: JSON.
DRIVER = r'''
import json, sys, time, traceback
import numpy as np


def to_027(text):
    """Our course-2022 TVMScript -> TVM 0.27 spelling (same program)."""
    text = text.replace("# from tvm.script import tir as T", "")
    text = text.replace("@tvm.script.ir_module", "@I.ir_module")
    text = text.replace("@T.prim_func", "@T.prim_func(s_tir=True)")
    text = text.replace("T.block(", "T.sblock(").replace("T.alloc_buffer(", "T.sblock_alloc_buffer(")
    return text.replace('"tir.noalias"', '"tirx.noalias"')


def timeit(fn, budget, rounds=5):
    fn()
    best = float("inf")
    for _ in range(rounds):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            t = time.perf_counter() - t0
            if t >= budget / rounds:
                break
        best = min(best, t / n)
    return best


ASM_PATTERNS = {"fma": ("vfmadd", "vfnmadd"), "vec_load_store": ("vmovups", "vmovaps"),
                "scalar_ins": ("vpinsr", "vinsert", "vpextr", "vextract")}


def asm_stats(asm):
    """Counts of a few instruction kinds in x86 assembly text (same code in both sides)."""
    out = {k: 0 for k in ASM_PATTERNS}
    for line in asm.splitlines():
        word = line.strip().split("\t", 1)[0]
        for k, prefixes in ASM_PATTERNS.items():
            if word.startswith(prefixes):
                out[k] += 1
    return out


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    """A line protocol on stdin/stdout, so the caller can interleave its own timings:
    {"op": "init", "target": {...}} -> {"tvm_version", "target"} or {"fatal"};
    {"op": "prepare", "job": {...}} -> {"label", "compile_s", "max_abs_err"} or {"error"};
    {"op": "time", "label": ..., "budget": s} -> {"seconds"}; {"op": "quit"}."""
    built = {}
    dev = target = None
    for line in sys.stdin:
        msg = json.loads(line)
        op = msg["op"]
        if op == "quit":
            return
        try:
            if op == "init":
                import tvm
                from tvm.script import tirx as T, ir as I
                globals().update(tvm=tvm, T=T, I=I)
                target = tvm.target.Target(msg["target"])
                dev = tvm.cpu()
                reply({"tvm_version": tvm.__version__, "target": str(target)})
            elif op == "prepare":
                job = msg["job"]
                res = {"label": job["label"]}
                mod = tvm.script.from_source(to_027(job["script"]), extra_vars={"T": T, "I": I})
                sch = tvm.s_tir.Schedule(mod)
                ns = {}
                exec(job["trace"], ns)
                ns["apply_trace"](sch)
                best = None
                for _ in range(3):   # best of 3, like ours (the first one warms caches)
                    t0 = time.perf_counter()
                    ex = tvm.compile(sch.mod, target=target)
                    fn = ex[job["func"]]  # TVM makes machine code here (its JIT), not above
                    t = time.perf_counter() - t0
                    best = t if best is None else min(best, t)
                res["compile_s"] = best
                arrays = [np.load(p) for p in job["inputs"]]
                args = [tvm.runtime.tensor(a, dev) for a in arrays]
                fn(*args)
                got = args[job["out_index"]].numpy()
                res["max_abs_err"] = float(np.abs(got - np.load(job["expected"])).max())
                # the timed calls use the arrays our side is timed on: the same pages of
                # physical memory (a file both processes map), so that where the pages
                # fall in the caches is the same for both compilers' code
                try:
                    shared = [np.lib.format.open_memmap(p, mode="r+") for p in job["shared"]]
                    timed = [tvm.runtime.from_dlpack(a) for a in shared]
                    fn(*timed)
                    res["memory"] = "shared"
                except Exception as e:  # noqa: BLE001 - TVM's own copies still time it
                    shared, timed = None, args
                    res["memory"] = f"own copies ({type(e).__name__}: {str(e)[:120]})"
                built[job["label"]] = (ex, fn, timed, shared)
                try:
                    asm = ex.mod.inspect_source("asm")
                    res["asm"] = asm_stats(asm)
                except Exception as e:  # noqa: BLE001 - the statistics are optional
                    res["asm_error"] = f"{type(e).__name__}: {e}"[:200]
                reply(res)
            elif op == "time":
                _, fn, args, _ = built[msg["label"]]
                reply({"seconds": timeit(lambda: fn(*args), msg["budget"])})
        except Exception as e:  # noqa: BLE001
            text = str(e).strip()
            first = [ln for ln in text.splitlines() if ln.strip()][-1:] or [""]
            reply({"fatal" if op == "init" else "error":
                   f"{type(e).__name__}: {first[0].strip()[:300]}",
                   "traceback": traceback.format_exc()[-3000:]})


main()
'''


# ---------------------------------------------------------------------------- cases
# the driver's helpers, for the same instruction counts on our side
_driver_ns: dict = {}
exec(DRIVER.split("def main():")[0], _driver_ns)


def course_mm_relu(n: int):
    return presets.get("mm_relu-course", n=n)


def split_vectorized_tail(m: int, n: int, k: int, lanes: int, parallel: bool):
    """A rectangular matmul whose column loop is split by a factor that does not divide it
    and vectorized: the last vector is partly outside C (its lanes guarded by the split's
    ``T.where``)."""
    def make():
        sch = engine.Schedule(engine.workloads.get("matmul", m=m, n=n, k=k),
                              workload=("matmul", {"m": m, "n": n, "k": k}))
        blk = sch.get_block("C", func_name="matmul")
        i, j, kk = sch.get_loops(blk)
        j0, j1 = sch.split(j, factors=[None, lanes])
        sch.reorder(i, j0, kk, j1)
        sch.vectorize(j1)
        if parallel:
            sch.parallel(i)
        sch.decompose_reduction(blk, kk)
        return sch
    return make


def vectorized_row(m: int, n: int, k: int):
    """A matmul whose whole output row (``n`` columns, not a power of two) is vectorized
    under the reduction loop: the row is kept in registers across k (as conv2d-tiled's
    56-wide output row is)."""
    def make():
        sch = engine.Schedule(engine.workloads.get("matmul", m=m, n=n, k=k),
                              workload=("matmul", {"m": m, "n": n, "k": k}))
        blk = sch.get_block("C", func_name="matmul")
        i, j, kk = sch.get_loops(blk)
        sch.reorder(i, kk, j)
        sch.vectorize(j)
        sch.decompose_reduction(blk, kk)
        return sch
    return make


def conv_split_unvectorized(order: tuple[str, ...], factor: int | None = 8):
    """conv2d with the output column loop ``ow`` split by ``factor`` (or whole, None) and
    left unvectorized, the loops in ``order`` (names: n co oh ow0 ow1 ow ci kh kw), batch
    and output channels fused and parallel: the loop LLVM's loop vectorizer may vectorize
    on its own (TVM's LLVM pipeline runs it on every loop)."""
    from engine.presets.library import CONV_PARAMS

    def make():
        sch = engine.Schedule(engine.workloads.get("conv2d", **CONV_PARAMS),
                              workload=("conv2d", dict(CONV_PARAMS)))
        conv = sch.get_block("conv", func_name="conv2d")
        n, co, oh, ow, ci, kh, kw = sch.get_loops(conv)
        loops = dict(n=n, co=co, oh=oh, ci=ci, kh=kh, kw=kw)
        if factor:
            loops["ow0"], loops["ow1"] = sch.split(ow, factors=[None, factor])
        else:
            loops["ow"] = ow
        sch.reorder(*[loops[name] for name in order])
        sch.parallel(sch.fuse(n, co))
        sch.decompose_reduction(conv, ci)
        return sch
    return make


def cases(quick: bool) -> list[dict]:
    """(label, workload, params, schedule factory) — the same schedule for both compilers."""
    from engine.presets.library import CONV_PARAMS
    big = 512 if quick else 1024
    out = [
        dict(label="mm_relu n=128 course", workload="mm_relu", params={"n": 128},
             make=lambda: presets.get("mm_relu-course", n=128)),
        dict(label=f"mm_relu n={big} course", workload="mm_relu", params={"n": big},
             make=lambda: presets.get("mm_relu-course", n=big)),
        dict(label=f"mm_relu n={big} tiled", workload="mm_relu", params={"n": big},
             make=lambda: presets.get("mm_relu-tiled", n=big)),
        dict(label=f"mm_relu n={big} best", workload="mm_relu", params={"n": big},
             make=lambda: presets.get("mm_relu-best", n=big)),
        dict(label="conv2d unscheduled", workload="conv2d", params=dict(CONV_PARAMS),
             make=lambda: engine.Schedule(engine.workloads.get("conv2d", **CONV_PARAMS),
                                          workload=("conv2d", dict(CONV_PARAMS)))),
        dict(label="conv2d course", workload="conv2d", params=dict(CONV_PARAMS),
             make=lambda: presets.get("conv2d-course")),
        dict(label="conv2d tiled", workload="conv2d", params=dict(CONV_PARAMS),
             make=lambda: presets.get("conv2d-tiled")),
        dict(label="conv2d best", workload="conv2d", params=dict(CONV_PARAMS),
             make=lambda: presets.get("conv2d-best")),
        # rectangular, non-divisible: the split's tail is a partial vector
        dict(label="matmul 96x100x128 j/16 vec", workload="matmul",
             params={"m": 96, "n": 100, "k": 128},
             make=split_vectorized_tail(96, 100, 128, 16, parallel=False)),
        dict(label="matmul 300x200x256 j/32 vec par", workload="matmul",
             params={"m": 300, "n": 200, "k": 256},
             make=split_vectorized_tail(300, 200, 256, 32, parallel=True)),
        dict(label="matmul 127x61x53 j/8 vec", workload="matmul",
             params={"m": 127, "n": 61, "k": 53},
             make=split_vectorized_tail(127, 61, 53, 8, parallel=False)),
        # a vectorized extent that is not a power of two (56 lanes)
        dict(label="matmul 64x56x256 row vec", workload="matmul",
             params={"m": 64, "n": 56, "k": 256},
             make=vectorized_row(64, 56, 256)),
        # loops the schedule leaves unvectorized: LLVM's loop vectorizer decides
        dict(label="conv2d ow/8 novec, red. outside", workload="conv2d",
             params=dict(CONV_PARAMS),
             make=conv_split_unvectorized(("n", "co", "oh", "ci", "kh", "kw", "ow0", "ow1"))),
        dict(label="conv2d ow/8 novec, red. between", workload="conv2d",
             params=dict(CONV_PARAMS),
             make=conv_split_unvectorized(("n", "co", "oh", "ow0", "ci", "kh", "kw", "ow1"))),
        dict(label="conv2d ow novec, red. outside", workload="conv2d",
             params=dict(CONV_PARAMS),
             make=conv_split_unvectorized(("n", "co", "oh", "ci", "kh", "kw", "ow"), None)),
    ]
    return out


def shared_memory_dir() -> str | None:
    """A memory-backed directory for the arrays both processes map (/dev/shm), else the
    default temporary directory."""
    d = Path("/dev/shm")
    return str(d) if d.is_dir() and os.access(d, os.W_OK) else None


def shared_copies(arrays: list, shm: Path, job: int) -> tuple[list, list[str]]:
    """Copies of ``arrays`` in files that the TVM driver maps too (.npy files opened as
    memory maps), and the files' paths.

    Both compilers' code is then timed on the same pages of physical memory. A kernel that
    walks B's columns (a 4 KiB stride at n=1024) touches one page per step of k, and where
    those pages fall in the physically indexed L2 cache moves its time by several percent
    from one allocation to the next (measured: 59.5-62 ms over five copies of the same
    arrays in one process, each copy consistently in its place): with separate arrays the
    ratio to TVM measured the two allocations as much as the two compilers.
    """
    out, paths = [], []
    for i, a in enumerate(arrays):
        p = shm / f"{job}_{i}.npy"
        m = np.lib.format.open_memmap(p, mode="w+", dtype=a.dtype, shape=a.shape)
        m[...] = a
        out.append(m.view(np.ndarray))   # a plain array on the same memory (a memmap
        # object would take the slower, detailed argument check on every call)
        paths.append(str(p))
    return out, paths


def timeit(fn, budget: float, rounds: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(rounds):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            t = time.perf_counter() - t0
            if t >= budget / rounds:
                break
        best = min(best, t / n)
    return best


def verdict_of(ratio: float, halves: list[float]) -> str:
    """'faster'/'slower' when the ratio is beyond the noise band and both halves agree."""
    if ratio > 1 + PARITY_BAND and min(halves) > 1.0:
        return "faster"
    if ratio < 1 - PARITY_BAND and max(halves) < 1.0:
        return "slower"
    return "same"


def host_target() -> dict:
    """TVM 0.27 target for this CPU (JSON-dict form, the only form 0.27 accepts)."""
    from engine.codegen import host_cpu
    return {"kind": "llvm", "mcpu": host_cpu()[0], "num-cores": int(runtime_info()["pool_size"])}


# ---------------------------------------------------------------------------- TVM venv
def setup_venv(venv: Path) -> str | None:
    """Create ``venv`` with TVM; returns None or the reason it failed."""
    print(f"creating {venv} and installing {TVM_REQUIREMENT} numpy (throwaway venv) ...",
          flush=True)
    r = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
    if r.returncode:
        return f"python -m venv failed: {r.stderr.strip()[-500:]}"
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", TVM_REQUIREMENT, "numpy"],
                       capture_output=True, text=True)
    if r.returncode:
        return f"pip install {TVM_REQUIREMENT} failed: {r.stderr.strip()[-800:]}"
    return None


def check_tvm(python: Path) -> str | None:
    """None if ``python`` can import TVM 0.27, else the reason."""
    if not python.exists():
        return (f"no Python at {python}; create the throwaway TVM environment with "
                f"`python benchmarks/bench_vs_tvm.py --setup` (or: python -m venv "
                f"{DEFAULT_VENV} && {DEFAULT_VENV}/bin/pip install {TVM_REQUIREMENT} numpy)")
    r = subprocess.run([str(python), "-c", "import tvm, tvm.s_tir; print(tvm.__version__)"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode:
        return f"`import tvm` fails in {python}: {r.stderr.strip().splitlines()[-1:]}"
    if not r.stdout.strip().startswith("0.27"):
        return f"{python} has TVM {r.stdout.strip()}, not 0.27"
    return None


# ---------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tvm-python", type=Path, default=DEFAULT_VENV / "bin" / "python")
    ap.add_argument("--setup", action="store_true",
                    help=f"create {DEFAULT_VENV} with {TVM_REQUIREMENT} first")
    ap.add_argument("--quick", action="store_true", help="n=512 instead of 1024, shorter timing")
    ap.add_argument("--rounds", type=int, default=ROUNDS,
                    help="interleaved timing rounds per case (default %(default)s)")
    ap.add_argument("--only", default="", help="run only cases whose label contains this text")
    args = ap.parse_args()
    budget = 0.3 if args.quick else 1.0
    rounds = 3 if args.quick else args.rounds
    threads = int(runtime_info()["pool_size"])
    print(f"engine: {threads} threads; load average {os.getloadavg()[0]:.2f}")

    reason = None
    if args.setup and not args.tvm_python.exists():
        reason = setup_venv(args.tvm_python.parent.parent)
    if reason is None:
        reason = check_tvm(args.tvm_python)

    work = Path(tempfile.mkdtemp(prefix="bench-vs-tvm-"))
    shm = Path(tempfile.mkdtemp(prefix="bench-vs-tvm-", dir=shared_memory_dir()))
    ours: dict[str, dict] = {}
    jobs = []
    for case in cases(args.quick):
        if args.only not in case["label"]:
            continue
        label, wl, params = case["label"], case["workload"], case["params"]
        sch = case["make"]()
        info = engine.workloads.info(wl)
        flops = roofline.flops_bytes(wl, params)[0]
        arrays = [as_aligned(a) for a in engine.workloads.random_args(wl, **params)]
        ref = engine.workloads.reference(wl, **params)
        n_in = info.num_inputs
        expected = ref(*arrays[:n_in])
        expected = expected[-1] if isinstance(expected, (tuple, list)) else expected
        out_index = len(arrays) - 1
        compile_s = None
        for _ in range(3):   # best of 3 uncached builds (the first one warms caches)
            rt = engine.build(sch.mod, cache=False)
            t_c = rt.compile_stats["total"]
            compile_s = t_c if compile_s is None else min(compile_s, t_c)
        fn = rt[info.func_name]
        fn(*arrays)
        err = float(np.abs(arrays[out_index] - expected).max())
        timed, shared_paths = shared_copies(arrays, shm, len(jobs))
        t = timeit(lambda: fn(*timed), budget)
        ours[label] = {"seconds": t, "err": err, "flops": flops, "mod": sch.mod,
                       "compile_s": compile_s, "call": (fn, timed),
                       "asm": _driver_ns["asm_stats"](rt.get_source("asm"))}
        paths = []
        for i, a in enumerate(arrays):
            p = work / f"{len(jobs)}_{i}.npy"
            np.save(p, np.ascontiguousarray(a))
            paths.append(str(p))
        exp_path = work / f"{len(jobs)}_expected.npy"
        np.save(exp_path, np.ascontiguousarray(expected))
        jobs.append({"label": label, "script": engine.workloads.get(wl, **params).script(),
                     "trace": sch.trace.export("tvm"), "func": info.func_name,
                     "inputs": paths, "expected": str(exp_path), "out_index": out_index,
                     "shared": shared_paths,
                     "budget": budget})
        print(f"  ours: {label:<31} {t * 1e3:9.3f} ms  (max err {err:.2g})", flush=True)

    tvm_results: dict[str, dict] = {}
    if reason is None:
        (work / "driver.py").write_text(DRIVER)
        env = dict(os.environ, TVM_NUM_THREADS=str(threads))
        env.pop("PYTHONPATH", None)
        proc = subprocess.Popen([str(args.tvm_python), str(work / "driver.py")], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

        def ask(msg: dict) -> dict:
            proc.stdin.write(json.dumps(msg) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the TVM driver exited (code {proc.wait()})")
            return json.loads(line)

        try:
            hello = ask({"op": "init", "target": host_target()})
            if "fatal" in hello:
                reason = hello["fatal"]
            else:
                print(f"TVM {hello['tvm_version']}, target {hello['target']}, "
                      f"TVM_NUM_THREADS={threads}", flush=True)
                for job in jobs:
                    res = ask({"op": "prepare", "job": job})
                    tvm_results[job["label"]] = res
                    # our compile again, right after TVM's: the same load for both sides
                    mod = ours[job["label"]].pop("mod")
                    for _ in range(3):
                        t_c = engine.build(mod, cache=False).compile_stats["total"]
                        ours[job["label"]]["compile_s"] = min(ours[job["label"]]["compile_s"], t_c)
                # interleaved timing: ours, TVM, ours, TVM, ... (which side goes first
                # alternates). Each side's time is its best round (noise on a shared machine
                # only ever adds time); the even and the odd rounds give two independent
                # estimates of the ratio, and their disagreement shows the noise.
                for job in jobs:
                    label = job["label"]
                    if "error" in tvm_results[label]:
                        continue
                    fn, arrays = ours[label].pop("call")
                    pairs = []
                    for r in range(rounds):
                        if r % 2 == 0:
                            t_tvm = ask({"op": "time", "label": label, "budget": budget})
                            t_ours = timeit(lambda: fn(*arrays), budget)
                        else:
                            t_ours = timeit(lambda: fn(*arrays), budget)
                            t_tvm = ask({"op": "time", "label": label, "budget": budget})
                        pairs.append((t_ours, t_tvm["seconds"]))
                    # only the interleaved rounds count, for both sides (our first,
                    # lone timing above would be one more chance at a good round)
                    ours[label]["seconds"] = min(p[0] for p in pairs)
                    tvm_results[label]["seconds"] = min(p[1] for p in pairs)
                    tvm_results[label]["halves"] = [
                        min(p[1] for p in pairs[h::2]) / min(p[0] for p in pairs[h::2])
                        for h in (0, 1) if pairs[h::2]]
            ask_quit = {"op": "quit"}
            proc.stdin.write(json.dumps(ask_quit) + "\n")
            proc.stdin.flush()
        except (RuntimeError, ValueError, BrokenPipeError) as e:
            reason = f"the TVM driver failed: {e}"
        finally:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()

    print()
    print("ratio = TVM time / our time (> 1: ours faster), from each side's best round; "
          "'halves': the same ratio from the even and from the odd rounds alone.")
    print("fma/vmov: FMA and vector load/store instructions in each side's assembly "
          "(ours/TVM; equal counts: the same hot loops).")
    print(f"  {'case':<31} {'ours ms':>9} {'TVM ms':>9} {'ours GF/s':>9} {'TVM GF/s':>9} "
          f"{'ratio':>5} {'halves':>11}  {'verdict':<7} {'fma':>7} {'vmov':>9}  notes")
    for label, o in ours.items():
        res = tvm_results.get(label)
        g = o["flops"] / o["seconds"] / 1e9
        if res is None or "seconds" not in res:
            note = res.get("error", "") if res else "TVM not run"
            o.pop("call", None)
            print(f"  {label:<31} {o['seconds'] * 1e3:9.3f} {'-':>9} {g:9.1f} {'-':>9} "
                  f"{'-':>5} {'-':>11}  {'-':<7} {'-':>7} {'-':>9}  {note}")
            continue
        tg = o["flops"] / res["seconds"] / 1e9
        ratio = res["seconds"] / o["seconds"]
        halves = res.get("halves") or [ratio]
        verdict = verdict_of(ratio, halves)
        ta = res.get("asm") or {}
        oa = o.get("asm") or {}
        fma = f"{oa.get('fma', '?')}/{ta.get('fma', '?')}"
        vmov = f"{oa.get('vec_load_store', '?')}/{ta.get('vec_load_store', '?')}"
        note = f"TVM err {res['max_abs_err']:.2g}, compile (best of 3) TVM " \
               f"{res['compile_s'] * 1e3:.0f} ms, ours {o['compile_s'] * 1e3:.0f} ms"
        if res.get("memory", "shared") != "shared":
            note += f"; TVM timed on its {res['memory']}"
        spread = " ".join(f"{h:.2f}" for h in halves)
        print(f"  {label:<31} {o['seconds'] * 1e3:9.3f} {res['seconds'] * 1e3:9.3f} {g:9.1f} "
              f"{tg:9.1f} {ratio:5.2f} {spread:>11}  {verdict:<7} "
              f"{fma:>7} {vmov:>9}  {note}")
    if reason is not None:
        print()
        print(f"TVM COMPARISON NOT RUN: {reason}")
    else:
        bad = [lb for lb, r in tvm_results.items() if "seconds" not in r]
        for lb in bad:
            print(f"\nTVM failed on {lb!r}: {tvm_results[lb].get('error')}\n"
                  f"{tvm_results[lb].get('traceback', '')}")
    for label, o in ours.items():
        o.pop("call", None)
    shutil.rmtree(shm, ignore_errors=True)
    print(f"(work files in {work})")


if __name__ == "__main__":
    main()

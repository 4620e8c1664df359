"""``python -m engine tune``: tune a gallery workload from the command line.

::

    python -m engine tune matmul --param n=512 --space auto --trials 64 \\
        [--strategy random|evolutionary] [--seed 0] [--dask tcp://scheduler:8786] \\
        [--database tuning.sqlite3] [--export best.json] [--target "cuda -model=a100"]

A progress bar (trials done / total, best so far, time left) while it runs, then a table of
the best candidates next to numpy's time. ``--export`` writes the best trace as the
explorer's trace document (open it with "import trace", or replay it with
``python -m engine replay best.json --measure``).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

__all__ = ["add_parser", "run", "progress_line", "result_table"]


def add_parser(sub: Any) -> None:
    t = sub.add_parser(
        "tune", help="search a space of schedules for the fastest correct one",
        description="Tune a workload: draw candidate schedules from a search space ('auto', "
                    "or a Python file defining a function of a schedule that uses the "
                    "sampling primitives), compile, check against numpy and time them, and "
                    "keep the fastest correct one. Exits with status 1 when no candidate "
                    "was correct.",
        epilog="example: python -m engine tune mm_relu --param n=512 --space auto "
               "--trials 64 --export best.json")
    t.add_argument("workload", help="a workload name (see 'python -m engine workloads')")
    t.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a workload parameter, e.g. --param n=512 (repeatable)")
    t.add_argument("--space", default="auto", metavar="auto|FILE.py",
                   help="'auto' (design-space rules) or a Python file with a function of a "
                        "schedule (default: auto)")
    t.add_argument("--trials", type=int, default=64, help="candidates to measure (default 64)")
    t.add_argument("--strategy", choices=("evolutionary", "random"), default="evolutionary",
                   help="evolutionary (cost model guided, default) or random")
    t.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    t.add_argument("--dask", metavar="ADDRESS",
                   help="measure on a Dask cluster, e.g. tcp://scheduler:8786")
    t.add_argument("--workers", type=int, default=None,
                   help="local worker processes compiling side by side (default: cores)")
    t.add_argument("--database", metavar="PATH",
                   help="an SQLite tuning database to reuse and extend across runs")
    t.add_argument("--export", metavar="OUT.json", help="write the best trace document here")
    t.add_argument("--top", type=int, default=10, help="rows of the final table (default 10)")
    t.add_argument("--target", default=None, metavar="TARGET",
                   help="'llvm' (this machine's CPU, the default) or a CUDA GPU such as "
                        "'cuda', 'cuda -model=a100', 'nvidia/nvidia-h100': candidates are "
                        "checked on the GPU or in its emulator and ranked by the GPU's time "
                        "(the analytic model's without a GPU)")


def progress_line(done: int, total: int, best: float | None, eta: float | None,
                  width: int = 30) -> str:
    """``[#######-------]  12/64 trials  best 45.2 GFLOP/s  ~31 s left``."""
    filled = int(width * done / max(1, total))
    bar = "#" * filled + "-" * (width - filled)
    best_s = f"best {best:.2f} GFLOP/s" if best is not None else "no correct candidate yet"
    eta_s = f"~{eta:.0f} s left" if eta is not None else ""
    return f"[{bar}] {done:>4}/{total} trials  {best_s}  {eta_s}".rstrip()


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def fmt(row: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()
    return "\n".join([fmt(headers), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows])


def _parse_params(items: list[str], fail) -> dict:
    out: dict = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise fail(f"--param needs KEY=VALUE, got {item!r}", 2)
        out[key.strip()] = value.strip()
    return out


def result_table(result: Any, top: int = 10) -> str:
    """The best candidates as a text table, with numpy's time for comparison."""
    numpy_s = result.numpy_seconds
    rows = []
    for rank, r in enumerate(result.top(top), 1):
        rows.append([str(rank), str(r.trial) if r.trial else "db", r.source,
                     f"{r.seconds * 1e3:.3f}" + (" *" if r.confirmed else ""),
                     f"{r.gflops:.2f}" if r.gflops else "-",
                     f"{numpy_s / r.seconds:.2f}x" if numpy_s else "-",
                     f"{r.compile_ms:.0f}" if r.compile_ms is not None else "-"])
    table = _table(["rank", "trial", "found by", "time (ms)", "GFLOP/s", "vs numpy",
                    "compile (ms)"], rows, {0, 1, 3, 4, 5, 6})
    failed = [r for r in result.records if not r.ok]
    lines = [table, ""]
    if getattr(result, "task", None) is not None and result.task.is_gpu:
        lines.append(f"target {result.task.target}: times {result.timing}")
    if any(r.confirmed for r in result.top(top)):
        lines.append("* timed again side by side with its closest rival (one measurement on "
                     "a shared machine can be off by a third)")
    if numpy_s:
        lines.append(f"numpy (float32): {numpy_s * 1e3:.3f} ms")
    lines.append(f"{len(result.records)} trials in {result.elapsed:.1f} s, "
                 f"{len(failed)} failed or wrong" + (", stopped early" if result.stopped
                                                      else ""))
    if failed:
        lines.append(f"first failure (trial {failed[0].trial}): {failed[0].error}")
    return "\n".join(lines)


def run(args: argparse.Namespace, out, err, fail: Callable[[str, int], Exception]) -> int:
    """The ``tune`` command (``fail(message, code)`` makes the CLI's error)."""
    from engine import workloads  # noqa: PLC0415

    from .database import Database  # noqa: PLC0415
    from .runner import LocalRunner  # noqa: PLC0415
    from .space import load_space_file, space_of  # noqa: PLC0415
    from .task import TuneError  # noqa: PLC0415
    from .tuner import cpu_target_of, gpu_target_of, tune  # noqa: PLC0415

    params = _parse_params(args.param, fail)
    if args.workload not in workloads.names():
        raise fail(f"unknown workload {args.workload!r}; available: "
                   f"{', '.join(workloads.names())}", 2)
    if args.trials < 1:
        raise fail("--trials must be at least 1", 2)
    if args.workers is not None and args.workers < 1:
        raise fail("--workers must be at least 1", 2)
    try:
        params = workloads.resolve_params(args.workload, **params)
        cpu_target = cpu_target_of(args.target)   # another CPU's: its sentence, if not here
        target = None if cpu_target is not None else gpu_target_of(args.target)
        space = space_of("auto", target or cpu_target) if args.space == "auto" else \
            load_space_file(args.space)
    except (workloads.WorkloadError, TuneError) as e:
        raise fail(str(e), 2) from None
    if args.dask:
        from .dask_runner import DaskRunner  # noqa: PLC0415
        try:
            runner = DaskRunner(args.dask)
        except TuneError as e:
            raise fail(str(e), 2) from None
    else:
        runner = LocalRunner(workers=args.workers)
    tty = hasattr(err, "isatty") and err.isatty()
    shown = {"last": -1}

    def on_progress(ev) -> None:
        best = ev.best.gflops if ev.best is not None else None
        line = progress_line(ev.done, ev.total, best, ev.eta)
        step = max(1, ev.total // 10)
        if tty:
            print("\r" + line, end="", file=err, flush=True)
        elif ev.done == ev.total or ev.done - shown["last"] >= step:
            shown["last"] = ev.done
            print(line, file=err, flush=True)

    db = None
    try:
        db = Database(args.database) if args.database else None
        print(f"tuning {args.workload} " + " ".join(f"{k}={v}" for k, v in params.items())
              + f" ({space.description}, {args.strategy}, {args.trials} trials"
              + (f", for {target}" if target else "") + ")", file=out)
        result = tune((args.workload, params), space=space, trials=args.trials,
                      strategy=args.strategy, seed=args.seed, runner=runner, database=db,
                      on_progress=on_progress, target=target)
    except TuneError as e:
        raise fail(str(e), 2) from None
    except KeyboardInterrupt:
        raise fail("interrupted", 1) from None
    finally:
        if tty:
            print(file=err)
        runner.close()
        if db is not None:
            db.close()
    print(result_table(result, args.top), file=out)
    best = result.best
    if best is None:
        raise fail("no candidate computed the right result; nothing to export", 1)
    if args.export:
        doc = result.best_trace.as_json()
        try:
            Path(args.export).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        except OSError as e:
            raise fail(f"cannot write {args.export}: {e.strerror}", 2) from None
        print(f"wrote the best trace to {args.export}", file=out)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run it as: python -m engine tune ...")

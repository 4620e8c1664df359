"""Command line: replay traces, list workloads, lessons and challenges, run a model.

    python -m engine replay TRACE.json [--measure] [--export tvm|course|python|json OUT]
    python -m engine workloads
    python -m engine lessons [LESSON_ID]
    python -m engine challenges
    python -m engine check CHALLENGE_ID TRACE.json
    python -m engine run-model mlp|MODEL.onnx [--batch N] [--stage S] [--cache DIR]
    python -m engine tune WORKLOAD [--param n=512] [--space auto|FILE.py] --trials 64
                                   [--strategy random|evolutionary] [--dask ADDRESS]
                                   [--export best.json]
    python -m engine gpu-check [--size 1024] [--gpu a100] [--program gemm_shared ...]
    python -m engine serve LIBRARY.so [--port 8080] [--host 127.0.0.1] [--max-batch 64]
                                      [--max-body-bytes N] [--threads 4]

Every failure is one plain sentence on stderr and a non-zero exit status (2 for bad
input such as an unreadable or invalid trace, 1 for a program that computes wrong
results or a challenge that is not solved, 3 for an unexpected engine failure); never a
Python traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3

EXPORTS = ("tvm", "course", "python", "json")


class CLIError(Exception):
    """A user-facing error: printed as ``error: <message>``, exit status ``code``."""

    def __init__(self, message: str, code: int = EXIT_BAD_INPUT):
        super().__init__(message)
        self.code = code


STAGES_CHOICES = ("unscheduled", "scheduled", "fused", "fused+scheduled")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m engine",
        description="Schedule Explorer's engine from the command line: replay and measure "
                    "schedule traces, export them as Python, list the preset workloads, "
                    "lessons and challenges.",
        epilog="Run 'python -m engine COMMAND --help' for the options of one command.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    r = sub.add_parser(
        "replay", help="replay a trace step by step (and measure it)",
        description="Replay a trace JSON file (as exported by the explorer) on its workload, "
                    "one instruction at a time. Prints a table with, per step, the "
                    "primitive, whether the compiled program matches numpy and (with "
                    "--measure) its time and GFLOP/s. Exits with status 2 if the trace "
                    "is invalid (naming the step that fails) and 1 if a step computes "
                    "wrong results.",
        epilog="example: python -m engine replay mm_relu.json --measure "
               "--export tvm mm_relu_tvm.py")
    r.add_argument("trace", metavar="TRACE.json",
                   help="trace file ('-' reads standard input); our JSON document, or TVM's "
                        "trace.as_json() list together with --workload")
    r.add_argument("--measure", action="store_true",
                   help="time every step (time_evaluator, minimum of the repeats)")
    r.add_argument("--no-check", action="store_true",
                   help="skip compiling and checking each step against numpy")
    r.add_argument("--export", nargs=2, metavar=("FORMAT", "OUT"),
                   help=f"also write the trace as FORMAT ({', '.join(EXPORTS)}) to the file "
                        "OUT ('-' for standard output)")
    r.add_argument("--workload", metavar="NAME",
                   help="the workload, when the trace does not name one (TVM's own traces)")
    r.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override a workload parameter, e.g. --param n=64 (repeatable)")
    r.add_argument("--number", type=int, default=5,
                   help="runs per timing repeat (default 5)")
    r.add_argument("--repeat", type=int, default=3, help="timing repeats (default 3)")

    sub.add_parser("workloads", help="list the preset workloads",
                   description="List the preset workloads with their descriptions and "
                               "default parameters.")

    le = sub.add_parser("lessons", help="list the lessons, or show one",
                        description="Without an id: list the guided lessons. With an id: "
                                    "print that lesson's steps and the code of each.")
    le.add_argument("lesson", nargs="?", help="a lesson id to show")
    le.add_argument("--play", action="store_true",
                    help="apply the lesson's steps one by one and print the loop nest after "
                         "each, checked against numpy")
    le.add_argument("--measure", action="store_true", help="with --play: time every step")
    le.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="with --play: override a workload parameter (repeatable)")

    sub.add_parser("challenges", help="list the challenges",
                   description="List the challenges (reach a loop nest / beat a time).")

    c = sub.add_parser("check", help="check a trace against a challenge",
                       description="Replay TRACE.json and judge it against a challenge. "
                                   "Exits 0 when solved, 1 when not, 2 on invalid input.")
    c.add_argument("challenge", help="challenge id (see 'python -m engine challenges')")
    c.add_argument("trace", metavar="TRACE.json", help="the learner's trace file")

    m = sub.add_parser(
        "run-model", help="run a model: accuracy, end-to-end time, per-operator table",
        description="Compile a model with the engine and run it in the Relax virtual "
                    "machine: its test accuracy (the MLP), then for each stage (unscheduled, "
                    "scheduled, fused, fused+scheduled) the end-to-end time next to numpy's "
                    "and the time of each TensorIR function.",
        epilog="example: python -m engine run-model mlp --batch 64 --cache instance")
    m.add_argument("model", help="'mlp' (the course's MLP, trained on first use) or a "
                                 "path to an .onnx file")
    m.add_argument("--batch", type=int, default=1, help="images per call (default 1; an "
                                                        "ONNX model keeps its own)")
    m.add_argument("--stage", action="append", choices=STAGES_CHOICES, default=None,
                   help="stages to time (repeatable; default: all)")
    m.add_argument("--cache", metavar="DIR", default=None,
                   help="folder keeping the trained weights (default: train in memory)")
    m.add_argument("--number", type=int, default=10, help="runs per timing repeat")
    m.add_argument("--repeat", type=int, default=3, help="timing repeats")
    from engine.tune import cli as tune_cli  # noqa: PLC0415
    tune_cli.add_parser(sub)
    g = sub.add_parser(
        "gpu-check", help="run the course's GPU chapter on this machine's GPU",
        description="Build the GPU chapter's programs (vector add, window sum, GEMM local "
                    "and shared blocking) for CUDA, check them against numpy and time them: "
                    "on the GPU when there is one (measured beside the model), else in the "
                    "emulator with the model's figures, saying there is no GPU. Exits 0 "
                    "when every result matches numpy.")
    g.add_argument("--size", type=int, default=1024, help="n (default 1024, the course's)")
    g.add_argument("--gpu", default=None, help="model the named GPU (h100-sxm, a100, "
                                               "rtx-4090, tesla-p100, ...)")
    g.add_argument("--program", action="append", default=None,
                   choices=("vector_add", "window_sum", "gemm_local", "gemm_shared"),
                   help="one program (repeatable; default: all four)")
    s = sub.add_parser(
        "serve", help="serve an exported library as an HTTP JSON inference endpoint",
        description="Serve a library written by export_library (its functions, as its "
                    "header describes them) over HTTP with waitress: POST /v1/<function> "
                    'with {"inputs": [...]} answers {"outputs": ..., "ms": ...}; GET / '
                    "describes the functions. Inputs are checked against the header's "
                    "shapes and dtypes; the library's calls run one at a time.",
        epilog="example: python -m engine serve mlp.so --port 8080")
    s.add_argument("library", metavar="LIBRARY.so",
                   help="a library written by export_library")
    s.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8080,
                   help="port (default 8080; 0 picks a free one, printed at start)")
    s.add_argument("--max-batch", type=int, default=None,
                   help="inputs one request may carry (default 64)")
    s.add_argument("--max-body-bytes", type=int, default=None,
                   help="largest request body in bytes (default 8388608)")
    s.add_argument("--threads", type=int, default=None,
                   help="waitress's request threads (default 4)")
    return p


# ---------------------------------------------------------------------------
def _read_trace_file(path: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CLIError(f"no such trace file: {path}") from None
    except IsADirectoryError:
        raise CLIError(f"{path} is a directory, not a trace file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read {path}: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CLIError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                       f"{exc.msg})") from None


def _parse_params(items: Sequence[str]) -> dict:
    out: dict = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CLIError(f"--param needs KEY=VALUE, got {item!r}")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def fmt(row: list[str]) -> str:
        cells = [c.rjust(w) if i in right else c.ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths))]
        return "  ".join(cells).rstrip()

    lines = [fmt(headers), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)


def cmd_replay(args: argparse.Namespace, out) -> int:
    from engine.lessons import runner  # noqa: PLC0415

    doc = _read_trace_file(args.trace)
    if args.number < 1 or args.repeat < 1:
        raise CLIError("--number and --repeat must be at least 1")
    overrides = _parse_params(args.param)
    try:
        trace = runner.load_trace(doc, workload=args.workload)
        name, params = runner.trace_workload(trace, args.workload)
    except runner.ReplayError as exc:
        raise CLIError(f"invalid trace {args.trace}: {exc}") from None
    params = {**params, **overrides}
    if args.export:
        fmt, dest = args.export
        if fmt not in EXPORTS:
            raise CLIError(f"unknown export format {fmt!r}; use one of {', '.join(EXPORTS)}")

    print(f"workload {name} " + " ".join(f"{k}={v}" for k, v in params.items()), file=out)
    headers = ["step", "primitive", "correct"]
    if args.measure:
        headers += ["time (ms)", "GFLOP/s"]
    rows: list[list[str]] = []
    failed_check = []
    flops = runner.flops(name, params) if args.measure else None
    try:
        for st in runner.replay_steps(trace, name, params):
            row = [str(st.index), st.label]
            if args.no_check:
                row.append("-")
            else:
                chk = runner.check_module(st.mod, name, params)
                row.append("yes" if chk.correct else "NO")
                if not chk.correct:
                    failed_check.append((st.index, st.label, chk.message))
            if args.measure:
                secs = runner.time_module(st.mod, name, params, number=args.number,
                                          repeat=args.repeat)
                row.append(f"{secs * 1e3:.3f}")
                row.append(f"{flops / secs / 1e9:.2f}" if flops and secs > 0 else "-")
            rows.append(row)
    except runner.ReplayError as exc:
        if rows:
            print(_table(headers, rows, {0, 3, 4}), file=out)
        raise CLIError(f"invalid trace {args.trace}: {exc}") from None
    except runner.BuildFailure as exc:
        if rows:
            print(_table(headers, rows, {0, 3, 4}), file=out)
        raise CLIError(str(exc), EXIT_FAIL) from None
    print(_table(headers, rows, {0, 3, 4}), file=out)
    if args.export:
        fmt, dest = args.export
        text = runner.export(trace, fmt)
        if dest == "-":
            out.write(text if text.endswith("\n") else text + "\n")
        else:
            try:
                Path(dest).write_text(text if text.endswith("\n") else text + "\n",
                                      encoding="utf-8")
            except OSError as exc:
                raise CLIError(f"cannot write {dest}: {exc.strerror}") from None
            print(f"wrote {fmt} export to {dest}", file=out)
    if failed_check:
        idx, label, msg = failed_check[0]
        raise CLIError(f"step {idx} ({label}) computes wrong results: {msg}", EXIT_FAIL)
    return EXIT_OK


def cmd_workloads(args: argparse.Namespace, out) -> int:
    from engine.lessons import runner  # noqa: PLC0415
    rows = []
    for name in runner.workload_names():
        desc, params = runner.workload_info(name)
        rows.append([name, " ".join(f"{k}={v}" for k, v in params.items()), desc])
    print(_table(["workload", "default params", "description"], rows, set()), file=out)
    return EXIT_OK


def cmd_lessons(args: argparse.Namespace, out) -> int:
    from engine import lessons  # noqa: PLC0415
    if args.lesson:
        try:
            les = lessons.get(args.lesson)
        except lessons.LessonError as exc:
            raise CLIError(str(exc)) from None
        print(f"{les.title}  [{les.workload} "
              + " ".join(f"{k}={v}" for k, v in les.params.items()) + "]", file=out)
        if les.summary:
            print(lessons.to_text(les.summary), file=out)
        if args.play:
            return _play_lesson(les, args, out)
        for st in les.steps:
            print(f"\n{st.index}. {st.title}  (look at: {st.look_at})", file=out)
            print("   " + lessons.to_text(st.text).replace("\n", "\n   "), file=out)
            if st.code:
                print(f"   >>> {st.code}", file=out)
            if st.question:
                print(f"   ? {st.question.text}", file=out)
        return EXIT_OK
    if args.play:
        raise CLIError("--play needs a lesson id, e.g. python -m engine lessons "
                       "01_tensorir_mm_relu --play")
    rows = [[les.id, str(len(les.steps)), les.workload, les.title]
            for les in lessons.all_lessons()]
    print(_table(["lesson", "steps", "workload", "title"], rows, {1}), file=out)
    return EXIT_OK


def _play_lesson(les, args: argparse.Namespace, out) -> int:
    from engine import lessons  # noqa: PLC0415
    from engine.lessons import runner  # noqa: PLC0415
    params = les._params(_parse_params(args.param))
    sch = les.new_schedule(params)
    env: dict = {}
    flops = runner.flops(les.workload, params) if args.measure else None
    bad = []
    for st in les.steps:
        print(f"\n== step {st.index}: {st.title}", file=out)
        print(lessons.to_text(st.text), file=out)
        if st.action is None:
            continue
        try:
            les.apply_step(sch, st.index, env)
        except lessons.LessonError as exc:
            raise CLIError(str(exc), EXIT_FAIL) from None
        print(f">>> {st.code}", file=out)
        print(lessons.nest_text(sch.mod, les.func), file=out)
        chk = runner.check_module(sch.mod, les.workload, params)
        line = "correct: " + ("yes" if chk.correct else f"NO ({chk.message})")
        if args.measure:
            secs = runner.time_module(sch.mod, les.workload, params)
            line += f"   time: {secs * 1e3:.3f} ms"
            if flops:
                line += f"   {flops / secs / 1e9:.2f} GFLOP/s"
        print(line, file=out)
        if not chk.correct:
            bad.append(st.index)
        if st.note:
            print(lessons.to_text(st.note), file=out)
    if bad:
        raise CLIError(f"steps {bad} of lesson {les.id} compute wrong results", EXIT_FAIL)
    return EXIT_OK


def cmd_challenges(args: argparse.Namespace, out) -> int:
    from engine import challenges  # noqa: PLC0415
    rows = [[c.id, c.kind, c.workload, c.title] for c in challenges.all_challenges()]
    print(_table(["challenge", "kind", "workload", "title"], rows, set()), file=out)
    return EXIT_OK


def cmd_check(args: argparse.Namespace, out) -> int:
    from engine import challenges  # noqa: PLC0415
    try:
        ch = challenges.get(args.challenge)
    except challenges.ChallengeError as exc:
        raise CLIError(str(exc)) from None
    doc = _read_trace_file(args.trace)
    res = ch.check(doc)
    print(("SOLVED " if res.ok else "NOT SOLVED ") + res.message, file=out)
    if res.link:
        print(f"link: {res.link}", file=out)
    return EXIT_OK if res.ok else EXIT_FAIL


def cmd_tune(args: argparse.Namespace, out) -> int:
    from engine.tune import cli as tune_cli  # noqa: PLC0415
    return tune_cli.run(args, out, getattr(args, "err_stream", sys.stderr), CLIError)


def cmd_run_model(args: argparse.Namespace, out) -> int:
    from engine.models import report, zoo
    from engine.relax.frontend import ImportError_

    if not 1 <= args.batch <= 4096:
        raise CLIError(f"--batch must be from 1 to 4096, got {args.batch}")
    if args.number < 1 or args.repeat < 1:
        raise CLIError("--number and --repeat must be at least 1")
    if args.model.endswith(".onnx"):
        try:
            with open(args.model, "rb") as f:
                data = f.read()
        except OSError as e:
            raise CLIError(f"cannot read {args.model}: {e.strerror}") from None
        try:
            model = zoo.from_onnx_bytes(data, title=args.model)
        except (ImportError_, ValueError) as e:
            raise CLIError(str(e)) from None
        batch = model.batch_fixed or 1
    else:
        try:
            model = zoo.get(args.model, args.cache)
        except KeyError as e:
            raise CLIError(e.args[0]) from None
        batch = args.batch
    report.report(model, batch, tuple(args.stage or STAGES_CHOICES), out, args.number,
                  args.repeat)
    return EXIT_OK


COMMANDS = {"run-model": cmd_run_model, "tune": cmd_tune, "replay": cmd_replay, "workloads": cmd_workloads, "lessons": cmd_lessons,
            "challenges": cmd_challenges, "check": cmd_check}


def cmd_gpu_check(args: argparse.Namespace, out) -> int:
    from engine import gpu_check  # noqa: PLC0415
    if not 1 <= args.size <= 8192:
        raise CLIError(f"--size must be from 1 to 8192, got {args.size}")
    if args.program and any(p.startswith("gemm") for p in args.program) or not args.program:
        if args.size % 64:
            raise CLIError(f"--size must be a multiple of 64 for the GEMMs (their tiles), "
                           f"got {args.size}")
    try:
        return gpu_check.run(args.size, args.gpu, args.program, out)
    except ValueError as e:    # a bad --gpu name: the target's sentence
        raise CLIError(str(e)) from None


COMMANDS["gpu-check"] = cmd_gpu_check


def cmd_serve(args: argparse.Namespace, out) -> int:
    from engine.deploy import serve_cli  # noqa: PLC0415
    return serve_cli.run(args, out, CLIError)


COMMANDS["serve"] = cmd_serve


def main(argv: Sequence[str] | None = None, out=None, err=None) -> int:
    """Run the CLI; returns the exit status (``python -m engine`` exits with it)."""
    out = out or sys.stdout
    err = err or sys.stderr
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage/help
        return int(exc.code or 0)
    args.err_stream = err
    try:
        return COMMANDS[args.command](args, out)
    except CLIError as exc:
        out.flush()
        print(f"error: {exc}", file=err)
        return exc.code
    except KeyboardInterrupt:
        print("error: interrupted", file=err)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - an engine bug must not show a traceback
        print(f"error: the engine failed unexpectedly ({type(exc).__name__}: {exc}); "
              "this is a bug, please report it with the trace file", file=err)
        return EXIT_INTERNAL

"""The Tune tab: search from this step (the trace so far is a fixed prefix).

:func:`form_context` lists what the learner can ask to be sampled (each loop's split
factors, each block's compute location); :func:`spec_from_form` checks a submitted form
into the tuning job's spec; :func:`progress_context` turns a running or finished tuning
job's partial results (one entry per trial, sent by the worker as each ends) into the live
view: progress, time left, the scatter plot and the table of the best candidates, each
linking to its trace in the explorer. The search itself runs in a measurement worker.

On a GPU target the search is the engine's GPU space (``engine.tune.auto_gpu``: tiles bound
to blockIdx/vthread/threadIdx, a local accumulator, cooperative fetches into shared
memory), every candidate built for the target, run in the emulator, checked against numpy
and ranked by the model's time for that GPU: the view says "modeled for <GPU>".
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from ...errors import AppError
from ...limits import whole_number
from .. import plots
from ..selection import module_trees, walk_tree
from ..targets import from_document as target_from_document
from ..targets import model_label

STRATEGIES = ("evolutionary", "random")
MAX_TRIALS = 256
DEFAULT_TRIALS = 32
TOP_ROWS = 10
#: the Tune tab of an ARM board session (run under qemu-aarch64)
NO_TUNING_ON_BOARD = ("Tuning is not available for an emulated target: it ranks hundreds of "
                      "candidates by their times, and under qemu-aarch64 those are the "
                      "emulator's, not the ARM board's. Tune on this machine's CPU (the "
                      "target menu), then switch back to check the result on the board.")


def form_context(s: Any) -> dict:
    """Loops and blocks of the program at the cursor, for the space built by clicking."""
    loops: list[dict] = []
    blocks: list[str] = []
    seen: set[str] = set()
    for tree in module_trees(s.mod_at(s.at)):
        for node in walk_tree(tree.roots):
            if node.is_loop:
                key = f"{node.name}@{node.block}"
                if node.block and key not in seen and (node.extent or 0) > 1 and \
                        node.kind == "serial":
                    seen.add(key)
                    loops.append({"name": node.name, "block": node.block, "key": key,
                                  "extent": node.extent})
            elif node.name not in blocks:
                blocks.append(node.name)
    names = [lp["name"] for lp in loops]
    for lp in loops:  # a name two loops share is told apart by its block
        lp["shared"] = names.count(lp["name"]) > 1
    gpu = s.target.gpu if s.target.is_gpu else None
    return {"tune_loops": loops, "tune_blocks": blocks, "strategies": STRATEGIES,
            "max_trials": MAX_TRIALS, "default_trials": DEFAULT_TRIALS,
            "tunable": s.workload_arg() is not None, "tune_gpu": gpu,
            "tune_modeled": model_label(gpu) if gpu else None,
            "default_trials_here": 16 if gpu else DEFAULT_TRIALS,
            "tune_board": NO_TUNING_ON_BOARD if s.target.is_board else None}


def spec_from_form(form: Any, s: Any) -> dict:
    """The tuning job's spec from the Tune form (400 with the reason when it is wrong)."""
    back = s.url()
    if s.target.is_board:
        raise AppError(400, "No tuning on an emulated target", NO_TUNING_ON_BOARD, back=back)
    if s.workload_arg() is None:
        raise AppError(400, "Cannot tune a pasted program",
                       "Tuning checks every candidate against the workload's numpy "
                       "reference, so it works on the gallery's workloads.", back=back)
    raw = str(form.get("trials", DEFAULT_TRIALS)).strip()
    trials = whole_number(raw)
    if trials is None or not 1 <= trials <= MAX_TRIALS:
        raise AppError(400, "Bad trial budget",
                       f"The number of trials must be a whole number from 1 to {MAX_TRIALS}, "
                       f"got “{raw[:12]}”.", back=back)
    strategy = form.get("strategy", "evolutionary")
    if strategy not in STRATEGIES:
        raise AppError(400, "Unknown strategy",
                       f"The strategy is evolutionary or random, got “{str(strategy)[:20]}”.",
                       back=back)
    ctx = form_context(s)
    loops = {lp["key"]: lp for lp in ctx["tune_loops"]}
    first_of_name: dict[str, dict] = {}
    for lp in ctx["tune_loops"]:
        first_of_name.setdefault(lp["name"], lp)
    blocks = set(ctx["tune_blocks"])
    space: Any = "auto"
    if form.get("space") == "clicks" and s.gpu:
        raise AppError(400, "Only the GPU space on a GPU",
                       "On a GPU target the search is the engine's GPU space (auto): it "
                       "binds the loops it tiles; your own choices of splits and locations "
                       "would leave the program unbound.", back=back)
    if form.get("space") == "clicks":
        directives = []
        for key in form.getlist("split"):
            # "j@Y": loop j above block Y (a bare "j": the first loop called j)
            lp = loops.get(key) or first_of_name.get(key)
            if lp is None:
                raise AppError(400, "Unknown loop", f"There is no loop “{key[:40]}” to split "
                               "at this step.", back=back)
            directives.append({"kind": "sample_split", "loop": lp["name"],
                               "block": lp["block"], "n": 2, "max_innermost_factor": 64})
        for name in form.getlist("location"):
            if name not in blocks:
                raise AppError(400, "Unknown block", f"There is no block “{name[:40]}” at "
                               "this step.", back=back)
            directives.append({"kind": "sample_compute_location", "block": name})
        if not directives:
            raise AppError(400, "Nothing to search",
                           "Tick at least one loop to split with sampled factors or one "
                           "block whose compute location is sampled — or choose auto.",
                           back=back)
        space = directives
    elif form.get("space", "auto") != "auto":
        raise AppError(400, "Unknown search space", "The space is auto or your choices.",
                       back=back)
    seed = str(form.get("seed", "0")).strip()
    seed_value = whole_number(seed)
    spec = {"space": space, "trials": trials, "strategy": strategy,
            "seed": seed_value if seed_value is not None and seed_value < 10 ** 9 else 0}
    if s.gpu:
        spec["target"] = s.gpu     # the engine's string of one of app.web.targets' GPUs
    return spec


def _trials(data: dict) -> list[dict]:
    out = []
    for key, value in data.items():
        if key.startswith("t") and key[1:].isdigit() and isinstance(value, dict):
            out.append(value)
    return sorted(out, key=lambda t: t.get("trial") or 0)


def candidate_url(workload: str, params: dict, token: str | None,
                  target_key: str | None = None) -> str | None:
    if not token:
        return None
    q = {**params, "t": token}
    if target_key:
        q["target"] = target_key
    return f"/explore/{workload}?" + urlencode(q)


def progress_context(ticket: Any) -> dict:
    """The live view of a tuning job (running, queued or finished)."""
    job = ticket.job
    data = ticket.partial()
    trials = _trials(data)
    prog = data.get("progress") or {}
    total = int(prog.get("total") or (job.tune or {}).get("trials") or 0)
    tgt = (job.tune or {}).get("target")
    choice = target_from_document(tgt) if tgt else None
    modeled = model_label(choice.gpu) if choice is not None and choice.is_gpu else None
    # numpy runs on this CPU: no yardstick for a GPU's modeled time
    numpy_s = None if modeled else prog.get("numpy_seconds")
    numpy_ms = numpy_s * 1e3 if numpy_s else None
    best = None
    curve = []
    for t in trials:
        if t.get("ok") and t.get("gflops") is not None and (best is None or
                                                             t["gflops"] > best["gflops"]):
            best = t
        curve.append(best["gflops"] if best else None)
    ok = sorted((t for t in trials if t.get("ok")), key=lambda t: t["seconds"])[:TOP_ROWS]
    for t in ok:
        t["url"] = candidate_url(job.workload, job.params, t.get("token"),
                                 choice.key if modeled else None)
        t["vs_numpy"] = (numpy_s / t["seconds"]) if numpy_s and t.get("seconds") else None
    flops_gf = None
    if numpy_s and best and best.get("gflops") and best.get("seconds"):
        flops_gf = best["gflops"] * best["seconds"]  # GFLOP of one run
    numpy_gflops = flops_gf / numpy_s if flops_gf and numpy_s else None
    state = ticket.state
    result = ticket.result(0) if ticket.done() else None
    status = None
    if result is not None and not result.ok:
        status = result.message
    return {"ticket": ticket, "state": state, "done": len(trials), "total": total,
            "eta": prog.get("eta"), "elapsed": prog.get("elapsed"), "numpy_ms": numpy_ms,
            "best": best, "top": ok, "failed": sum(1 for t in trials if not t.get("ok")),
            "status": status, "queue_position": ticket.position(), "modeled": modeled,
            "fig": plots.tune_figure(trials, curve, numpy_gflops) if trials else None}

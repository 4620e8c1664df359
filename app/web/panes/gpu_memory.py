"""The memory pane of a GPU session (the cache pane's place on a GPU target): what the
analytic model (``engine.gpu.model``, run by a measurement worker with the step) says about
the kernel's memory behaviour — per access site of a global or shared buffer: load or store,
the 32-byte sectors one warp request touches and the coalescing efficiency (global), the
n-way bank conflicts (shared), how many times a thread runs it — and the bytes moved from
DRAM, through L2 and in shared memory at every step, plotted over the steps; and the thread
block's resources (grid, block, shared memory per block against the GPU's limits, ptxas's
registers per thread, the occupancy they allow).

Everything here is read from the workers' step results (the same jobs as the measurement
pane's: :meth:`app.service.measurer.StepMeasurer.submit` with the target); the web process
compiles nothing. A worker's result is plain JSON from our own workers, read defensively:
every figure converted, a missing one shown as absent.
"""
from __future__ import annotations

import math
from typing import Any

from engine.gpu.specs import get_spec

from .. import measuring, plots
from ..session import Session
from ..targets import GPU_LABELS

#: bytes per warp-wide shared-memory wavefront (32 banks x 4 bytes)
WAVEFRONT_BYTES = 128


def fmt_bytes(n: Any) -> str:
    """Bytes in decimal units, as the model's summary writes them ("12.6 MB")."""
    v = _num(n)
    if v is None:
        return "–"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if v >= size:
            return f"{v / size:.3g} {unit}"
    return f"{v:.3g} B"


def fmt_kib(n: Any) -> str:
    """A size limit in KiB, as the specification sheets give them ("48 KiB")."""
    v = _num(n)
    if v is None:
        return "–"
    return f"{v / 1024:.3g} KiB" if v >= 1024 else f"{v:.0f} B"


def _num(v: Any) -> float | None:
    """A figure of a worker's result as a finite float (None when absent or not a number)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def _int(v: Any) -> int | None:
    f = _num(v)
    return int(f) if f is not None else None


def _dims(v: Any) -> list[int] | None:
    if isinstance(v, (list, tuple)) and len(v) == 3:
        out = [_int(x) for x in v]
        if all(x is not None and x > 0 for x in out):
            return out  # type: ignore[return-value]
    return None


def _prod(d: list[int] | None) -> int | None:
    return d[0] * d[1] * d[2] if d else None


# ------------------------------------------------------------------------- one step's result
def access_rows(kernel: dict) -> list[dict]:
    """The table's rows for one kernel of a worker's ``model``: one per access site, with
    what the page prints (``what``: "4 sectors/request, 100% coalesced" for a global
    access, "4-way bank conflict" for a shared one) and the bytes the site moves over the
    grid (``bytes``: sectors x 32 B for global, the warp's distinct bytes for shared)."""
    warps = _warps_in_grid(kernel)
    rows = []
    for a in kernel.get("accesses") or []:
        if not isinstance(a, dict):
            continue
        scope = "shared" if a.get("scope") == "shared" else "global"
        kind = "store" if a.get("kind") == "store" else "load"
        sectors = _num(a.get("sectors_per_request")) or 0.0
        eff = _num(a.get("efficiency"))
        ways = _num(a.get("conflict_ways")) or 1.0
        execs = _num(a.get("executions")) or 0.0
        per_req = _num(a.get("bytes_per_request")) or 0.0
        lanes = _int(a.get("vector_lanes")) or 1
        if scope == "global":
            what = f"{sectors:.3g} sectors · {(eff or 0) * 100:.0f}% coalesced"
            moved = sectors * 32 * execs * warps if warps else None
            bad = eff is not None and eff < 0.5
        else:
            what = ("no bank conflict" if ways <= 1.0001 else f"{ways:.3g}-way bank conflict")
            moved = per_req * execs * warps if warps else None
            bad = ways > 1.0001
        rows.append({
            "buffer": str(a.get("buffer") or "?")[:64], "scope": scope, "kind": kind,
            "sectors": sectors if scope == "global" else None,
            "efficiency": eff if scope == "global" else None,
            "conflict_ways": ways if scope == "shared" else None,
            "executions": execs, "vector_lanes": lanes, "what": what, "bad": bad,
            "bytes": moved, "index": str(a.get("index") or "")[:160],
            "guarded": bool(a.get("guarded")), "analysed": a.get("analysed") is not False})
    return rows


def _warps_in_grid(kernel: dict) -> int | None:
    blocks = _int(kernel.get("blocks"))
    threads = _int(kernel.get("threads_per_block"))
    if not blocks or not threads:
        return None
    return blocks * -(-threads // 32)


def traffic(res: dict) -> dict | None:
    """The bytes one step moves, from its worker result's ``model`` (None: no model):
    ``dram_bytes``, ``l2_bytes`` (the SMs' global loads and stores, in 32-byte sectors,
    through L2), ``shared_bytes`` (the distinct bytes of every shared request, over the
    grid) and ``shared_wavefronts``."""
    model = res.get("model") if isinstance(res, dict) else None
    if not isinstance(model, dict):
        return None
    shared = 0.0
    have_rows = False
    for k in model.get("kernels") or []:
        if isinstance(k, dict):
            for r in access_rows(k):
                have_rows = True
                if r["scope"] == "shared" and r["bytes"]:
                    shared += r["bytes"]
    wf = _num(model.get("shared_wavefronts"))
    return {"dram_bytes": _num(model.get("dram_bytes")), "l2_bytes": _num(model.get("l2_bytes")),
            "shared_bytes": shared if have_rows else None, "shared_wavefronts": wf,
            "bottleneck": str(model.get("bottleneck") or "")[:40]}


def resources(res: dict, gpu: str | None) -> list[dict]:
    """Per kernel of a worker's result: grid and block, threads per block, shared memory
    per block against the GPU's per-block and per-SM limits, registers per thread (ptxas)
    and the occupancy they allow."""
    spec = _spec(gpu)
    model = res.get("model") if isinstance(res.get("model"), dict) else {}
    by_name = {str(k.get("name")): k for k in (model.get("kernels") or []) if isinstance(k, dict)}
    out = []
    for r in res.get("resources") or []:
        if not isinstance(r, dict):
            continue
        name = str(r.get("kernel") or "")[:64]
        grid, block = _dims(r.get("grid")), _dims(r.get("block"))
        threads = _prod(block)
        k = by_name.get(name) or {}
        occ = k.get("occupancy") if isinstance(k.get("occupancy"), dict) else {}
        shared = _int(r.get("shared_bytes"))
        row = {"kernel": name, "grid": grid, "block": block, "blocks": _prod(grid),
               "threads": threads, "warps": -(-threads // 32) if threads else None,
               "shared_bytes": shared, "registers": _int(r.get("registers")),
               "registers_from": str(k.get("registers_from") or
                                     ("ptxas" if r.get("registers") is not None else "")),
               "spills": (_int(r.get("spill_stores")) or 0) + (_int(r.get("spill_loads")) or 0),
               "occupancy": _num(r.get("occupancy")),
               "limited_by": [str(x).replace("_", " ") for x in
                              (r.get("occupancy_limited_by") or [])][:6],
               "blocks_per_sm": _int(occ.get("blocks_per_sm")),
               "warps_per_sm": _int(occ.get("warps_per_sm")),
               "max_warps_per_sm": _int(occ.get("max_warps_per_sm")),
               "shared_allocated": _int(occ.get("shared_bytes_per_block"))}
        if spec is not None:
            row.update(max_threads=spec.max_threads_per_block,
                       shared_per_block=spec.shared_memory_per_block,
                       shared_per_block_optin=spec.shared_memory_per_block_optin,
                       shared_per_sm=spec.shared_memory_per_sm,
                       max_registers=spec.max_registers_per_thread)
            if shared is not None:
                row["shared_fraction"] = shared / spec.shared_memory_per_block
        out.append(row)
    return out


def _spec(gpu: str | None):
    try:
        return get_spec(gpu) if gpu else None
    except Exception:  # noqa: BLE001 - an unknown name: no limits shown
        return None


def memory_context(at: int, by_step: dict[int, dict], gpu: str | None) -> dict:
    """The pane's context from the steps' worker results (``by_step``: step -> step dict):
    the current step's access rows per kernel, its traffic and resources, every modeled
    step's traffic (``steps``) and the figure over the steps."""
    steps = []
    for k in sorted(by_step):
        t = traffic(by_step[k])
        if t is not None and t["dram_bytes"] is not None:
            steps.append(dict(t, step=k))
    cur = by_step.get(at)
    kernels = []
    if cur is not None and isinstance(cur.get("model"), dict):
        for k in cur["model"].get("kernels") or []:
            if isinstance(k, dict):
                total = _int(k.get("accesses_total"))
                rows = access_rows(k)
                kernels.append({"name": str(k.get("name") or "")[:64], "rows": rows,
                                "has_accesses": "accesses" in k,
                                "more": (total - len(rows)) if total and total > len(rows)
                                else 0,
                                "dram_per_buffer": {str(b)[:64]: _num(v) for b, v in
                                                    (k.get("dram_bytes_per_buffer") or {})
                                                    .items()}})
    fig = plots.gpu_memory_figure(steps, current=at) if steps else None
    return {"gpu_memory": True, "gpu_label": GPU_LABELS.get(gpu or "", gpu or "the GPU"),
            "current": cur, "kernels": kernels,
            "traffic": traffic(cur) if cur is not None else None,
            "resources": resources(cur, gpu) if cur is not None else [],
            "steps": steps, "fig": fig, "fig_legend": plots.legend(fig),
            "npoints": len(steps), "fmt_bytes": fmt_bytes, "fmt_kib": fmt_kib}


# ------------------------------------------------------------------------------ the pane
def context(session: Session, budget_s: float | None = None,
            stored_only: bool = False) -> dict | None:
    """The memory pane of a GPU session from the step jobs the measurement pane shares
    (stored results first, else the running or new job of each step); ``stored_only``:
    None when a step has no stored result yet."""
    budget = measuring.STEP_BUDGET_S if budget_s is None else budget_s
    got = measuring.step_results(session, budget, stored_only)
    if got is None:
        return None
    by_step, unavailable, queued, busy = got
    ctx = memory_context(session.at, by_step, session.target.gpu)
    ctx.update(unavailable=unavailable, pending=sorted(queued), busy=busy,
               queued={k: measuring.queued_text(p) for k, p in queued.items()},
               poll_delay=measuring.POOL_POLL, rows=[], per_buffer=[])
    return ctx

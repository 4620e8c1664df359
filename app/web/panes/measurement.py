"""The measurement pane: runtime and GFLOP/s of every step (compiled, checked against numpy
and timed by the measurement service's workers), numpy's time for the same computation as a
reference line, and the roofline tab (each step's place under this machine's roofs). An ARM
board's steps are timed under qemu-aarch64: their times are labelled so, and there is no
roofline for them.
"""
from __future__ import annotations

from engine.roofline import point

from ...service.protocol import PoolClosed, PoolUnavailable, QueueFull
from .. import measuring, plots
from ..services import measurer
from ..session import Session
from ..gpu_refusals import withdrawal
from ..targets import EMULATION_LABEL, NO_ROOFLINE_ON_BOARD, model_label


def context(session: Session, budget_s: float | None = None,
            stored_only: bool = False) -> dict | None:
    """The measurement pane: a row per measured step (time, GFLOP/s, correct, compile
    ms), the runtime figure, the current step's line, the steps still queued, and the
    roofline tab.

    ``stored_only``: the pane from stored results alone, or None when a step (or the
    machine's peaks) is not stored yet — nothing is submitted, nothing waited for (the page
    then shows the pane at once instead of asking for it)."""
    budget = measuring.STEP_BUDGET_S if budget_s is None else budget_s
    plan = measuring.measure_plan(session)
    if plan is not None and not plan.measure:
        # Simulate only: scheduled, printed and drawn, never compiled or run.
        return {"rows": [], "fig": None, "unavailable": None, "current": None,
                "speedup": None, "pending": [], "simulate_only": plan.reason}
    m = measurer()
    gpu = session.gpu
    got = measuring.step_results(session, budget, stored_only)
    if got is None or (stored_only and session.workload_arg() is not None and gpu is None
                       and not session.target.is_board and m.cached_roofline() is None):
        return None
    by_step, unavailable, queued, busy = got
    ctx = _rows_context(session, by_step, list(queued), unavailable)
    ctx.update(queued={k: measuring.queued_text(p) for k, p in queued.items()}, busy=busy,
               poll_delay=measuring.POOL_POLL, large_note=plan.note if plan is not None else None)
    if session.at in queued:
        ctx["current_queued"] = ctx["queued"][session.at]
    if session.target.is_board:
        ctx.update(board=session.target, roofline_note=NO_ROOFLINE_ON_BOARD)
    elif gpu is not None:
        ctx.update(gpu=session.target, withdraw=withdrawal(session, ctx.get("current")))
        ctx.update(gpu_roofline(session, ctx["rows"]))
    else:
        ctx.update(roofline(session, ctx["rows"], m))
    return ctx


def gpu_roofline_note(session: Session) -> str:
    return (f"The roofline tab shows this machine's CPU roofs, measured here; the steps of "
            f"this session are built for the {session.target.label} GPU (their bottleneck, "
            f"modeled, is in the Runtime tab's hover and the code pane's resources).")


def gpu_roofline(session: Session, rows: list[dict]) -> dict:
    """The roofline tab of a GPU session: the GPU's roofs from its specification sheet
    (``engine.gpu.specs``: FP32 peak, DRAM bandwidth) and one point per modeled step — its
    modeled GFLOP/s at its FLOPs per *modeled* DRAM byte (the model's traffic, so a schedule
    that moves less from DRAM moves right) — labelled as modeled. A step timed on a GPU
    (``time_kind`` "measured") is placed by its measured GFLOP/s, its label saying so."""
    from engine.gpu.specs import get_spec
    try:
        spec = get_spec(session.target.gpu or "")
    except Exception:  # noqa: BLE001
        return {"roofline_note": gpu_roofline_note(session)}
    peak, bw = float(spec.fp32_peak_gflops), float(spec.dram_bandwidth_gbs)
    points = []
    for r in rows:
        model = r.get("model") if isinstance(r.get("model"), dict) else None
        if not model or r.get("error") or r.get("not_gpu"):
            continue
        dram, gflops = model.get("dram_bytes"), r.get("gflops") or model.get("gflops")
        flops = sum(float(k.get("flops") or 0) for k in model.get("kernels") or []
                    if isinstance(k, dict))
        if not flops and gflops and r.get("time_ms"):
            flops = float(gflops) * 1e9 * float(r["time_ms"]) / 1e3
        if not (isinstance(dram, (int, float)) and dram > 0 and gflops and flops):
            continue
        intensity = flops / float(dram)
        attainable = min(peak, bw * intensity)
        points.append({"step": r["step"], "intensity": intensity, "gflops": float(gflops),
                       "correct": r.get("correct"), "attainable_gflops": attainable,
                       "fraction_of_roof": float(gflops) / attainable if attainable else None,
                       "bound": "memory" if bw * intensity < peak else "compute",
                       "bottleneck": model.get("bottleneck"), "time_kind": r.get("time_kind")})
    label = next((r.get("time_label") for r in rows if r.get("time_label")), None) or \
        model_label(session.target.gpu or "")
    peaks = {"peak_gflops": peak, "bandwidth_gbs": bw, "ridge_intensity": peak / bw,
             "threads": 1, "gpu": spec.display_name}
    if not points:
        return {"roofline_note": (f"No modeled point yet: the roofline of the "
                                  f"{session.target.label} (FP32 peak {peak:,.0f} GFLOP/s, "
                                  f"DRAM {bw:,.0f} GB/s) places each step once it is a GPU "
                                  f"program the workers have modeled."),
                "roofline_gpu": peaks}
    current = next((p for p in points if p["step"] == session.at), None)
    return {"roofline_fig": plots.roofline_figure(points, peaks, current=session.at,
                                                  modeled=label),
            "roofline_points": len(points), "roofline_current": current,
            "roofline_peaks": peaks, "roofline_gpu": peaks, "roofline_label": label}


def time_label(row: dict) -> str | None:
    """What a GPU step's time is: "modeled for H100 SXM (no GPU on this machine)" or
    "measured on <the GPU>"; an ARM board's: "under emulation (qemu-aarch64), not an ARM
    board's time"; None for a CPU step (measured on this machine)."""
    kind = row.get("time_kind")
    if kind == "emulated":
        return EMULATION_LABEL
    if kind == "modeled":
        return model_label(str(row.get("gpu") or ""))
    if kind == "measured":
        return model_label(str(row.get("gpu") or ""),
                           measured_on=str(row.get("device") or row.get("gpu_name") or "GPU"))
    return None


def one_numpy_time(rows: list[dict]) -> list[dict]:
    """``rows`` with one numpy time per thread count: the best any step measured.

    Each worker process times numpy once (per workload, sizes and thread count) and every
    step it measures carries that figure, so the steps a page shows can carry two or three
    slightly different numpy times; the pane would then say "numpy 0.078 ms" above a
    reference line labelled "numpy 0.061 ms". numpy's time is the best of its repeats; the
    best over the workers is the same estimate, taken over more repeats."""
    best: dict[int, float] = {}
    for r in rows:
        if r.get("numpy_ms"):
            t = int(r.get("numpy_threads") or 1)
            best[t] = min(best.get(t, r["numpy_ms"]), r["numpy_ms"])
    return [dict(r, numpy_ms=best[int(r.get("numpy_threads") or 1)]) if r.get("numpy_ms") else r
            for r in rows]


def _rows_context(session: Session, by_step: dict[int, dict], pending: list[int],
                  unavailable) -> dict:
    rows = one_numpy_time([by_step[k] for k in sorted(by_step)])
    rows = [dict(r, time_label=time_label(r)) if r.get("time_kind") else r for r in rows]
    by_step = {r["step"]: r for r in rows}
    fig = plots.runtime_figure(rows, current=session.at) if rows else None
    cur = by_step.get(session.at)
    base = by_step.get(0)
    speedup = None
    if cur is not None and session.at > 0 and base and base.get("time_ms") and cur.get("time_ms"):
        speedup = base["time_ms"] / cur["time_ms"]
    return {"rows": rows, "fig": fig, "fig_legend": plots.legend(fig),
            "unavailable": unavailable, "current": cur,
            "speedup": speedup, "pending": sorted(pending)}


# ---------------------------------------------------------------------------- the roofline tab
NO_ROOFLINE_CUSTOM = ("No roofline point for a pasted program: its place on the roofline "
                      "needs the number of floating-point operations and the bytes it must "
                      "move, which only the preset workloads declare.")


def _machine_peaks(m) -> tuple[dict | None, str | None]:
    """``(peaks, None)`` — the measured roofs or ``{"error": sentence}`` — or
    ``(None, "queued (position k)")`` while a worker is still measuring them."""
    try:
        got, ticket = m.submit_roofline()
    except QueueFull:
        return None, measuring.queued_text(None)
    except (PoolClosed, PoolUnavailable) as e:
        return {"error": str(e)}, None
    if got is not None:
        return got, None
    if ticket.done():
        return m.roofline_result_of(ticket), None
    return None, measuring.queued_text(ticket.position())


def roofline(session: Session, rows: list[dict], m) -> dict:
    """The roofline tab of the measurement pane: this machine's roofs (measured once by
    kernels the engine compiles, in a worker; ``m`` is the measurement service) and
    one point per measured step: its arithmetic intensity (the workload's flops / compulsory
    bytes, ``engine.workloads.info``) and its achieved GFLOP/s, placed by
    ``engine.roofline.point``; numpy's run of the same computation is a reference point.

    Returns ``roofline_fig`` (plotly JSON) and ``roofline_current`` (the current step's
    point), or ``roofline_pending`` (the peaks are being measured: the pane polls), or
    ``roofline_note`` (the sentence saying why there is no roofline).
    """
    wl = session.workload_arg()
    if wl is None:
        return {"roofline_note": NO_ROOFLINE_CUSTOM}
    name, params = wl
    peaks, pending = _machine_peaks(m)
    if pending is not None:
        return {"roofline_pending": pending}
    assert peaks is not None
    if "error" in peaks:
        return {"roofline_note": peaks["error"]}
    points: list[dict] = []
    reference = None
    try:
        for r in rows:
            if r.get("time_ms") and not r.get("error"):
                pt = point(name, params, r["time_ms"] / 1e3, peaks)
                pt.update(step=r["step"], correct=r.get("correct"))
                points.append(pt)
        # numpy on the current step's thread count (its own row), else the first one
        ref_row = next((r for r in rows if r.get("step") == session.at and r.get("numpy_ms")),
                       None) or next((r for r in rows if r.get("numpy_ms")), None)
        if ref_row is not None:
            reference = point(name, params, ref_row["numpy_ms"] / 1e3, peaks)
            if ref_row.get("numpy_note"):
                reference["note"] = ref_row["numpy_note"]
    except Exception as e:  # noqa: BLE001 - e.g. a workload without a byte count
        return {"roofline_note": f"No roofline point for {name}: {e}"}
    current = next((p for p in points if p["step"] == session.at), None)
    return {"roofline_fig": plots.roofline_figure(points, peaks, current=session.at,
                                                  reference=reference),
            "roofline_points": len(points), "roofline_current": current,
            "roofline_peaks": peaks, "roofline_numpy": reference}

"""The gallery page: the workloads (with their parameters and presets), every shipped preset,
and the newest saved traces.
"""
from __future__ import annotations

import time

from .panes.trace import presets
from .services import store
from .session import workload_info, workload_names


def context() -> dict:
    """The gallery: a card per workload (with its presets), every preset, the saved traces."""
    cards = []
    for n in workload_names():
        info = workload_info(n)
        cards.append({"name": n, "title": info["title"], "description": info["description"],
                      "params": info["defaults"], "limits": info["limits"]})
    by_workload: dict[str, list[dict]] = {}
    all_presets = presets()
    for p in all_presets:
        by_workload.setdefault(p["workload"], []).append(p)
    for c in cards:
        c["presets"] = by_workload.get(c["name"], [])
    return {"workloads": cards, "saved": saved_traces(), "presets": all_presets}


def saved_traces(limit: int = 20) -> list[dict]:
    """The newest saved traces (name, workload, sizes, steps, link) from the store."""
    saved = store()
    if saved is None:
        return []
    out = []
    for t in saved.list_traces(limit=limit):
        insts = t.trace.get("insts", []) if isinstance(t.trace, dict) else []
        out.append({"id": t.id, "name": t.name, "workload": t.workload,
                    "params": ", ".join(f"{k}={v}" for k, v in (t.params or {}).items()),
                    "insts": len(insts), "url": f"/saved/{t.id}",
                    "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(t.created))})
    return out

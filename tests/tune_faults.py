"""Faulty measuring hooks for the tuner's tests (imported by the runner's worker processes):
a candidate whose column tile is 2 crashes its worker, one whose tile is 4 hangs."""
import os
import time


def _inner_factor(trace: dict) -> int | None:
    for _, decision in trace.get("decisions", []):
        if isinstance(decision, list):
            return decision[-1]
    return None


def crash_or_hang(trace: dict) -> None:
    inner = _inner_factor(trace)
    if inner == 2:
        os._exit(77)
    if inner == 4:
        time.sleep(600)

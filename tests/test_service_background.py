"""A cache simulation runs at a lower CPU priority than the rest of its worker."""
from __future__ import annotations

import os
import sys
import threading

import pytest

from app.service.actions import BACKGROUND_NICE, in_background


def _nice_of_this_thread() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_the_work_runs_niced_and_the_caller_keeps_its_priority():
    before = _nice_of_this_thread()
    inside = in_background(_nice_of_this_thread)
    assert inside == min(19, before + BACKGROUND_NICE)
    assert _nice_of_this_thread() == before


def test_the_result_and_the_error_come_back_to_the_caller():
    assert in_background(lambda: 6 * 7) == 42
    with pytest.raises(ZeroDivisionError):
        in_background(lambda: 1 / 0)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity here")
def test_the_work_stays_on_the_caller_s_cores():
    mine = os.sched_getaffinity(0)
    assert in_background(lambda: os.sched_getaffinity(0)) == mine

"""The serving process lets a waiting thread have the interpreter's lock quickly: the
thread that hands a click's measurement to a worker must not wait behind the thread that
renders the click's answer (``app.web.serving.quick_thread_handoffs``)."""
from __future__ import annotations

import sys

import flask

import app as app_package
import app.__main__ as app_main
from app.web import serving


def test_quick_thread_handoffs_sets_the_switch_interval():
    old = sys.getswitchinterval()
    try:
        serving.quick_thread_handoffs()
        assert sys.getswitchinterval() == serving.SWITCH_INTERVAL_S
        assert serving.SWITCH_INTERVAL_S < old        # shorter than CPython's 5 ms
    finally:
        sys.setswitchinterval(old)


def test_python_m_app_serves_with_quick_handoffs(monkeypatch):
    seen = {}

    class NoWorkers:                 # the measurement service, not started in this test
        started = False

        @property
        def pool(self):
            raise RuntimeError("no measurement workers in this test")

    def create_app(config):
        a = flask.Flask("serving-test")
        a.extensions["measurer"] = NoWorkers()
        return a

    class Server:
        def run(self):
            seen["interval"] = sys.getswitchinterval()

    monkeypatch.setattr(app_package, "create_app", create_app)
    monkeypatch.setattr(serving, "make_server", lambda app, **kw: Server())
    old = sys.getswitchinterval()
    try:
        assert app_main.main(["--port", "8765"]) == 0
    finally:
        sys.setswitchinterval(old)
    assert seen["interval"] == serving.SWITCH_INTERVAL_S

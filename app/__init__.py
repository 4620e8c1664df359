"""Schedule Explorer's web app (Flask + htmx), in four parts:

* :mod:`app.web` — the web layer: routes, the request's state (the URL is the session), one
  view module per pane, the toolbar;
* :mod:`app.service` — the measurement service: worker processes that compile, check
  against numpy, time and simulate; the web layer talks to it through one interface
  (``app.extensions["measurer"]``, a :class:`~app.service.measurer.StepMeasurer`);
* :mod:`app.store` — the SQLite store: the results cache and the saved traces (two files);
* :mod:`app.teaching` — lessons, challenges, comparing two states, presenter mode;

plus :mod:`app.limits` (input and resource limits) and :mod:`app.errors` (``AppError``).
``create_app(config)`` builds the application; ``python -m app`` serves it with waitress on
127.0.0.1:5000 (see ``docs/ARCHITECTURE.md``).
"""
from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def format_ms(v) -> str:
    """Milliseconds for people: ``12.3 ms``, ``0.087 ms``, ``3.2 µs``."""
    if v is None:
        return "–"
    v = float(v)
    if v >= 100:
        return f"{v:.0f} ms"
    if v >= 1:
        return f"{v:.2f} ms"
    if v >= 0.01:
        return f"{v:.3f} ms"
    return f"{v * 1e3:.1f} µs"


def add_server_timing(app) -> None:
    """Every answer says how long the server worked on it: ``Server-Timing: app;dur=MS``
    (shown by the browser's developer tools next to the request; the latency benchmark
    splits a click into the server's part and the page's with it)."""
    from flask import g

    @app.before_request
    def _start_clock():
        g.request_started = time.perf_counter()

    @app.after_request
    def _server_timing(resp):
        started = g.get("request_started")
        if started is not None and "Server-Timing" not in resp.headers:
            resp.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1e3:.1f}"
        return resp


def create_app(config: dict[str, Any] | None = None):
    """Build the Flask app. ``config`` entries override the defaults (e.g. ``TESTING``).

    Configuration read here and by the parts it wires: ``EXPLORER_LIMITS`` (overrides of
    :class:`app.limits.Limits`), ``EXPLORER_INSTANCE`` (folder of the store; a fresh
    temporary folder for a ``TESTING`` app, so tests never share a store),
    ``EXPLORER_STORE`` (False: no store), ``EXPLORER_POOL`` (fields of
    :class:`app.service.PoolConfig`), ``MEASURE_POOL`` (what makes the pool; tests run jobs
    in their own process with it), ``PREFETCH_MEASUREMENTS`` (start measuring a step as soon
    as it is applied; default True), ``MEASURE_AHEAD`` (also measure the program of the
    toolbar form a learner is filling in, while the workers are idle; default True),
    ``SECURITY`` (default True); with ``SECURITY``:
    ``EXPLORER_ALLOWED_HOSTS`` (host names answered besides localhost, 127.0.0.1 and [::1];
    any other ``Host`` gets a 400), ``EXPLORER_CLASSROOM`` (any IP address is answered too),
    ``EXPLORER_ACCESS_TOKEN`` (the class link's token: asked once, then kept in a cookie).
    """
    from flask import Flask
    from htmx_flask import Htmx

    from . import service
    from .limits import Limits
    from .teaching import challenges, compare, graph_lessons, lessons, presenter
    from .web import budget, learner, model_routes, routes
    from .web.security import init_security

    app = Flask(
        __name__,
        template_folder=os.path.join(ROOT, "templates"),
        static_folder=os.path.join(ROOT, "static"),
        static_url_path="/static",
    )
    app.config.update(SEND_FILE_MAX_AGE_DEFAULT=3600, JSON_SORT_KEYS=False)
    app.config.update(config or {})
    if app.config.get("TESTING") and not app.config.get("EXPLORER_INSTANCE"):
        folder = tempfile.mkdtemp(prefix="explorer-test-")
        atexit.register(shutil.rmtree, folder, True)
        app.config["EXPLORER_INSTANCE"] = folder
    if "MAX_CONTENT_LENGTH" not in (config or {}):
        app.config["MAX_CONTENT_LENGTH"] = Limits.from_config(app.config).max_upload_bytes
    # Autoescape every template, whatever its extension (program text is user-controlled).
    app.jinja_env.autoescape = True
    app.jinja_env.trim_blocks = True
    app.jinja_env.lstrip_blocks = True
    Htmx(app)
    app.jinja_env.filters["ms"] = format_ms
    add_server_timing(app)
    budget.install(app)     # every request's replays draw on one bounded work budget
    learner.install(app, app.config.get("EXPLORER_INSTANCE") or app.instance_path)

    for blueprint in (routes.bp, model_routes.bp, lessons.bp, graph_lessons.bp, challenges.bp,
                      compare.bp, presenter.bp):
        app.register_blueprint(blueprint)
    routes.register_error_handlers(app)
    if app.config.get("SECURITY", True):
        # CSP that works with the locally served htmx/plotly, and same-origin POSTs
        init_security(app)
    # limits, store and the measurement service (worker processes started on first use):
    # the server process itself never compiles or runs generated code
    service.install(app)
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    return app

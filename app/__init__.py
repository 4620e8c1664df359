"""Schedule Explorer's web app (Flask + htmx).

``create_app(config)`` builds the application; ``python -m app`` serves it with waitress on
127.0.0.1:5000. Routes live in :mod:`app.routes` (thin), pane view-models in :mod:`app.views`,
URL state in :mod:`app.session`, the SVG loop diagram in :mod:`app.diagram`, the step diff in
:mod:`app.diffview`, plotly figures in :mod:`app.plots` and measurements in
:mod:`app.measure` (answered by the worker processes of :mod:`app.workers`).
"""
from __future__ import annotations

import logging
import os
from typing import Any

from flask import Flask

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


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """Build the Flask app. ``config`` entries override the defaults (e.g. ``TESTING``)."""
    from htmx_flask import Htmx

    app = Flask(
        __name__,
        template_folder=os.path.join(ROOT, "templates"),
        static_folder=os.path.join(ROOT, "static"),
        static_url_path="/static",
    )
    app.config.update(
        SEND_FILE_MAX_AGE_DEFAULT=3600,
        JSON_SORT_KEYS=False,
    )
    if config:
        app.config.update(config)
    _measurement_config(app, set(config or ()))
    # Autoescape every template, whatever its extension (program text is user-controlled).
    app.jinja_env.autoescape = True
    app.jinja_env.trim_blocks = True
    app.jinja_env.lstrip_blocks = True
    Htmx(app)
    app.jinja_env.filters["ms"] = format_ms

    from . import routes
    app.register_blueprint(routes.bp)
    from . import lessons_views; app.register_blueprint(lessons_views.bp)  # lessons, challenges, compare, presenter
    routes.register_error_handlers(app)
    # Security headers (CSP that works with locally served htmx/plotly) and the same-origin
    # check on POSTs, from app.security (the reliability work); skipped only if it is absent.
    if app.config.get("SECURITY", True):
        try:
            from .security import init_security
        except ImportError:  # pragma: no cover - the module ships with the app
            init_security = None
        if init_security is not None:
            init_security(app)
    # Measurements: worker processes (compile, check, time, cache simulation, code text)
    # behind a bounded queue, results in the SQLite store, input limits (app.workers.install).
    # The server process itself never compiles or runs generated code.
    from . import measure as _m
    from .workers import install
    measurer = install(app)
    if measurer is not None:
        _m.MEASURER = measurer
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    return app


def _measurement_config(app: Flask, given: set) -> None:
    """Defaults that depend on the configuration given to :func:`create_app`.

    * ``MEASURE_IN_PROCESS``: measure in the web process instead of worker processes. Only
      the Flask test-client unit tests use it (``TESTING`` without ``EXPLORER_POOL``), so that
      they can patch the engine and stay fast; ``python -m app`` and the browser tests always
      use the worker pool.
    * ``EXPLORER_INSTANCE``: the folder of the SQLite store (default: the Flask instance
      folder; a fresh temporary folder for test apps, so tests never share a store).
    * ``MAX_CONTENT_LENGTH``: the upload limit of :class:`app.limits.Limits`
      (``max_upload_bytes``) unless the config sets it.
    """
    from .limits import Limits
    testing = bool(app.config.get("TESTING"))
    app.config.setdefault("MEASURE_IN_PROCESS", testing and "EXPLORER_POOL" not in app.config)
    if testing and not app.config.get("EXPLORER_INSTANCE"):
        import atexit
        import shutil
        import tempfile
        folder = tempfile.mkdtemp(prefix="explorer-test-")
        atexit.register(shutil.rmtree, folder, True)
        app.config["EXPLORER_INSTANCE"] = folder
    lim = Limits.from_config(app.config)
    if "MAX_CONTENT_LENGTH" not in given:
        app.config["MAX_CONTENT_LENGTH"] = lim.max_upload_bytes

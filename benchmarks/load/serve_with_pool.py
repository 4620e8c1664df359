"""Serve the explorer with the reliability parts plugged in, for the load test.

``python benchmarks/load/serve_with_pool.py [--port P] [--classroom]`` builds the app with
``create_app()``, then — without editing the app's modules — routes its three measurement
seams through :class:`app.workers.StepMeasurer` (worker processes + the SQLite store):

* ``app.measure.measure_step`` -> ``measurer.measure``
* ``app.measure.cache_step``   -> ``measurer.cache``
* ``app.measure.prefetch``     -> ``measurer.prefetch`` (no waiting server thread)
* ``app.measure.build``        -> an object whose ``get_source(kind)`` asks ``measurer.source``
  (the code pane), so the server process never compiles;

adds ``init_security(app)`` and serves with waitress (``security.server_options``).  It exists
so the load test can compare the in-process server with the pooled one before the app wires
the seams itself (the same three replacements, done in ``app/measure.py``).
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


class RemoteSource:
    """Stands in for a built module in the code pane: its text comes from a worker."""

    def __init__(self, measurer, mod):
        self.measurer, self.mod = measurer, mod

    def get_source(self, kind: str = "ll-opt") -> str:
        text, err = self.measurer.source(self.mod, kind)
        if text is None:
            raise RuntimeError(err)
        return text


def build_app(config: dict | None = None):
    from app import create_app, measure
    from app.security import init_security
    from app.workers import install

    app = create_app(config)
    measurer = install(app)
    init_security(app)

    def measure_step(mod, workload, params, *, func_name=None, baseline=None):
        return measurer.measure(mod, workload, params, func_name=func_name, baseline=baseline)

    def cache_step(mod, func_name=None):
        return measurer.cache(mod, func_name)

    def build(mod, h=None):
        return RemoteSource(measurer, mod), 0.0

    def prefetch(mod, workload, params, *, func_name=None, baseline=None):
        measurer.prefetch(mod, workload, params, func_name=func_name, baseline=baseline)

    measure.measure_step = measure_step
    if hasattr(measure, "prefetch"):
        measure.prefetch = prefetch
    measure.cache_step = cache_step
    measure.build = build
    return app, measurer


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default=None)
    ap.add_argument("--port", type=int, default=5000)
    ap.add_argument("--classroom", action="store_true")
    args = ap.parse_args(argv)

    from waitress import serve

    from app.security import resolve_host, server_options

    host = resolve_host(args.host, args.classroom, args.port)
    app, measurer = build_app()
    print(f"Schedule Explorer (pooled measurements) on http://{host}:{args.port}/", flush=True)
    try:
        serve(app, host=host, port=args.port,
              **server_options(app.extensions["limits"], args.classroom))
    finally:
        if not callable(measurer._pool):
            measurer.pool.close(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())

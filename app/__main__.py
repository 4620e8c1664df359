"""``python -m app [--host H] [--port P] [--threads N] [--classroom] [--measure-workers N]
[--instance DIR] [--limit NAME=VALUE ...]``: serve the explorer with waitress (a production
WSGI server, never Flask's development server).

Binds 127.0.0.1:5000 by default (only this machine can connect). Listening on other
interfaces needs ``--classroom`` (or an explicit ``--host``) and prints a warning.

Compilation and measurement run in worker processes (:mod:`app.service`), started with the
server and shared by all its request threads; results and saved traces are kept in
``<instance>/explorer.sqlite3``. ``--limit step_time_limit_s=2`` (repeatable) overrides any
field of :class:`app.limits.Limits`.
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m app", description="Serve Schedule Explorer.")
    p.add_argument("--host", default=None, help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    p.add_argument("--threads", type=int, default=None,
                   help="request threads (default 8, 16 with --classroom)")
    p.add_argument("--classroom", action="store_true",
                   help="listen on every interface (0.0.0.0) so a class can connect; prints a warning")
    p.add_argument("--measure-workers", type=int, default=None, metavar="N",
                   help="measurement worker processes (default: one per core)")
    p.add_argument("--instance", default=None, metavar="DIR",
                   help="folder of the results/saved-traces store (default: ./instance)")
    p.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                   help="override an input/resource limit, e.g. step_time_limit_s=2 "
                        "(repeatable; see app/limits.py)")
    args = p.parse_args(argv)
    if not 0 < args.port < 65536:
        p.error(f"--port must be between 1 and 65535, got {args.port}")
    if args.threads is not None and args.threads < 1:
        p.error("--threads must be at least 1")
    if args.measure_workers is not None and not 1 <= args.measure_workers <= 64:
        p.error("--measure-workers must be between 1 and 64")
    config: dict = {}
    try:
        limits = _parse_limits(args.limit)
    except ValueError as e:
        p.error(str(e))
    if limits:
        config["EXPLORER_LIMITS"] = limits
    if args.measure_workers is not None:
        config["EXPLORER_POOL"] = {"workers": args.measure_workers}
    if args.instance:
        config["EXPLORER_INSTANCE"] = args.instance

    from waitress import serve

    from . import create_app
    from .web.security import resolve_host, server_options

    # 127.0.0.1 unless --classroom; a non-loopback --host without it is refused with a sentence
    host = resolve_host(args.host, args.classroom, args.port)
    options = server_options(classroom=args.classroom)
    if args.threads is not None:
        options["threads"] = args.threads
    app = create_app(config)
    measurer = app.extensions["measurer"]
    try:
        pool = measurer.pool           # start the workers now, not on the first click
        print(f"measurement workers: {len(pool.worker_pids())} "
              f"(time limit {pool.config.time_limit_s:g} s per step, "
              f"queue of {pool.config.queue_length})", flush=True)
        sandbox = pool.network_warning(timeout=pool.config.startup_timeout_s)
        if sandbox:
            print(f"warning: {sandbox}", file=sys.stderr, flush=True)
    except Exception as e:  # noqa: BLE001 - the pages say so; retried on first use
        print(f"warning: {e}", file=sys.stderr, flush=True)
    print(f"Schedule Explorer on http://{host}:{args.port}/  (Ctrl+C to stop)", flush=True)
    try:
        serve(app, host=host, port=args.port, **options)
    finally:
        if measurer.started:
            stats = measurer.pool.stats()
            measurer.pool.close(5)
            print("measurement pool: " + ", ".join(
                f"{k} {v}" for k, v in sorted(stats.items()) if k != "worker_pids") +
                f"; store hits {measurer.hits}, jobs {measurer.misses}", flush=True)
    return 0


def _parse_limits(items: list[str]) -> dict:
    """``["step_time_limit_s=2", "queue_length=64"]`` -> typed overrides of ``Limits``."""
    import dataclasses

    from .limits import Limits
    fields = {f.name: f for f in dataclasses.fields(Limits)}
    out: dict = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or name not in fields:
            raise ValueError(f"--limit takes NAME=VALUE with NAME one of: "
                             f"{', '.join(sorted(fields))}; got {item!r}")
        default = getattr(Limits(), name)
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"--limit {name} must be a number, got {raw!r}") from None
        if isinstance(default, int):
            if not value.is_integer():
                raise ValueError(f"--limit {name} must be a whole number, got {raw!r}")
            value = int(value)
        out[name] = value
    return out


if __name__ == "__main__":
    sys.exit(main())

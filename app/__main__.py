"""``python -m app [--host H] [--port P] [--threads N] [--classroom] [--measure-workers N]
[--instance DIR] [--limit NAME=VALUE ...] [--allow-host NAME ...] [--token T]
[--per-client-connections N] [--client-timeout S]``: serve the explorer with waitress (a
production WSGI server, never Flask's development server).

Binds 127.0.0.1:5000 by default (only this machine can connect). Listening on other
interfaces needs ``--classroom`` (or an explicit ``--host``) and prints a warning.  The server
answers only to its own names (loopback ones; in classroom mode also the machine's names and
addresses and each ``--allow-host``).  In classroom mode it asks for an access token: random
per start unless ``--token`` gives one, printed once in the class link (``?token=...``).
Slow clients are cut off (``--client-timeout``) and one client address may hold at most
``--per-client-connections`` connections (classroom mode; see :mod:`app.web.serving`).

Compilation and measurement run in worker processes (:mod:`app.service`), started with the
server and shared by all its request threads; measured results are cached in
``<instance>/explorer.sqlite3`` and saved traces kept in ``<instance>/saved-traces.sqlite3``. ``--limit step_time_limit_s=2`` (repeatable) overrides any
field of :class:`app.limits.Limits`.
"""
from __future__ import annotations

import argparse
import logging
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
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="with --classroom: one more host name the server answers to, e.g. "
                        "the name learners type (repeatable)")
    p.add_argument("--token", default=None,
                   help="the class's access token (default with --classroom: a random one, "
                        "printed in the class link); given without --classroom, asked too")
    p.add_argument("--per-client-connections", type=int, default=None, metavar="N",
                   help="open connections one client address may hold (default 16 with "
                        "--classroom, no cap otherwise; 0: no cap)")
    p.add_argument("--client-timeout", type=float, default=None, metavar="S",
                   help="seconds a client has to send a request's headers (default 15; "
                        "the whole request: at least 60)")
    args = p.parse_args(argv)
    if args.allow_host and not args.classroom:
        p.error("--allow-host needs --classroom: without it only this machine can connect, "
                "by the names localhost, 127.0.0.1 and [::1]")
    if args.token is not None and not args.token.strip():
        p.error("--token must not be empty")
    if args.per_client_connections is not None and args.per_client_connections < 0:
        p.error("--per-client-connections must be 0 (no cap) or more")
    if args.client_timeout is not None and not 0 < args.client_timeout <= 3600:
        p.error("--client-timeout must be between 0 and 3600 seconds")
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

    from . import create_app
    from .web.security import (allowed_host_names, class_link, is_loopback, new_access_token,
                               resolve_host, server_options)
    from .web.serving import make_server, quick_thread_handoffs

    token = args.token or (new_access_token() if args.classroom else None)
    names = allowed_host_names(args.host, args.allow_host, classroom=args.classroom)
    config["EXPLORER_ALLOWED_HOSTS"] = names
    config["EXPLORER_CLASSROOM"] = args.classroom
    if token:
        config["EXPLORER_ACCESS_TOKEN"] = token
    # 127.0.0.1 unless --classroom; a non-loopback --host without it is refused with a sentence
    host = resolve_host(args.host, args.classroom, args.port, token=token, names=names)
    options = server_options(classroom=args.classroom)
    if args.threads is not None:
        options["threads"] = args.threads
    guards = _guards(args)
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
    compile_templates(app)
    print(f"Schedule Explorer on http://{host}:{args.port}/  (Ctrl+C to stop)", flush=True)
    if token and is_loopback(host):
        # on loopback no classroom banner is printed: the link with its token is printed here
        print(f"class link: {class_link(host, args.port, token)}", flush=True)
    quick_thread_handoffs()
    try:
        logging.basicConfig()           # waitress's warnings, as waitress.serve would
        make_server(app, host=host, port=args.port, **guards, **options).run()
    finally:
        if measurer.started:
            stats = measurer.pool.stats()
            measurer.pool.close(5)
            print("measurement pool: " + ", ".join(
                f"{k} {v}" for k, v in sorted(stats.items()) if k != "worker_pids") +
                f"; store hits {measurer.hits}, jobs {measurer.misses}", flush=True)
    return 0


def compile_templates(app) -> int:
    """Compile every page template now, not on the first request that renders it (the
    first click's answer took 37 ms longer: its panes' templates were compiled then).
    Returns how many were compiled; one that does not compile is left to its request."""
    env = app.jinja_env
    done = 0
    for name in env.list_templates(extensions=["html"]):
        try:
            env.get_template(name)
            done += 1
        except Exception:  # noqa: BLE001 - its request reports the error as usual
            pass
    return done


def _guards(args: argparse.Namespace) -> dict:
    """The slow-client guards of :func:`app.web.serving.make_server` from the command line."""
    from .web.serving import HEADER_TIMEOUT_S, PER_CLIENT_CONNECTIONS, REQUEST_TIMEOUT_S
    per_client = args.per_client_connections
    if per_client is None:
        per_client = PER_CLIENT_CONNECTIONS if args.classroom else 0
    header = args.client_timeout if args.client_timeout is not None else HEADER_TIMEOUT_S
    return {"per_client": per_client, "header_timeout": header,
            "request_timeout": max(REQUEST_TIMEOUT_S, header)}


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

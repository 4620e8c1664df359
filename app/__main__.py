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

SIGTERM, SIGINT (Ctrl+C) and SIGHUP stop the server cleanly (exit status 0): the measurement
pool is closed first — its workers killed at once, even in the middle of a job, and the
requests waiting for one answered — then waitress (:func:`app.web.serving.stop_server`). A
second signal while it stops ends the process at once. Should the server die without
stopping (SIGKILL, a crash), its workers notice and die too (:mod:`app.service.worker`).
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Any

#: the signals that stop the server cleanly (see the module docstring)
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")


class StopSignal(BaseException):
    """A stop signal arrived; raised in the main thread to interrupt serving.

    Neither SystemExit nor KeyboardInterrupt: waitress's ``run()`` catches those and then
    waits up to 5 s for the requests being answered (some wait for a measurement) before
    this module could close the measurement pool; nor an Exception, which the start-up's
    ``except Exception`` would take for a failure."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


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
    from .web.serving import make_server, quick_thread_handoffs, stop_server

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
    previous_handlers = install_stop_handlers()
    measurer = server = None
    try:
        app = create_app(config)
        measurer = app.extensions["measurer"]
        _start_workers(measurer)
        compile_templates(app)
        print(f"Schedule Explorer on http://{host}:{args.port}/  (Ctrl+C to stop)", flush=True)
        if token and is_loopback(host):
            # on loopback no classroom banner is printed: the link with its token is printed here
            print(f"class link: {class_link(host, args.port, token)}", flush=True)
        quick_thread_handoffs()
        logging.basicConfig()           # waitress's warnings, as waitress.serve would
        server = make_server(app, host=host, port=args.port, **guards, **options)
        server.run()
    except StopSignal as stop:
        print(f"stopping ({stop.name})", flush=True)
    finally:
        # the pool first: its workers are killed now, and the requests waiting for them end
        if measurer is not None:
            _close_pool(measurer)
        if server is not None:
            stop_server(server)
        restore_handlers(previous_handlers)
    return 0


def _start_workers(measurer) -> None:
    """Start the measurement workers now, not on the first click, and say how many."""
    try:
        pool = measurer.pool
        print(f"measurement workers: {len(pool.worker_pids())} "
              f"(time limit {pool.config.time_limit_s:g} s per step, "
              f"queue of {pool.config.queue_length})", flush=True)
        sandbox = pool.network_warning(timeout=pool.config.startup_timeout_s)
        if sandbox:
            print(f"warning: {sandbox}", file=sys.stderr, flush=True)
    except Exception as e:  # noqa: BLE001 - the pages say so; retried on first use
        print(f"warning: {e}", file=sys.stderr, flush=True)


def _close_pool(measurer) -> None:
    """Close the measurement pool (its workers killed at once) and print its counts."""
    if not measurer.started:
        return
    stats = measurer.pool.stats()
    measurer.pool.close(5)
    print("measurement pool: " + ", ".join(
        f"{k} {v}" for k, v in sorted(stats.items()) if k != "worker_pids") +
        f"; store hits {measurer.hits}, jobs {measurer.misses}", flush=True)


def _raise_stop(signum: int, frame: Any) -> None:
    """The stop signals' handler: the first one interrupts the main thread (StopSignal);
    from then on they have their default action (a second Ctrl+C ends the process now)."""
    for sig in _stop_signals():
        signal.signal(sig, signal.SIG_DFL)
    raise StopSignal(signum)


def _stop_signals() -> list[int]:
    return [getattr(signal, name) for name in STOP_SIGNALS if hasattr(signal, name)]


def install_stop_handlers() -> dict[int, Any]:
    """Make the stop signals raise :class:`StopSignal` in the main thread; returns the
    handlers they had (for :func:`restore_handlers`). Outside the main thread nothing is
    installed (Python runs signal handlers there only)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, _raise_stop) for sig in _stop_signals()}


def restore_handlers(previous: dict[int, Any]) -> None:
    """Put back the handlers :func:`install_stop_handlers` replaced."""
    for sig, handler in previous.items():
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


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

"""``python -m app [--host H] [--port P] [--threads N] [--classroom]``: serve the explorer
with waitress (a production WSGI server, never Flask's development server).

Binds 127.0.0.1:5000 by default (only this machine can connect). Listening on other
interfaces needs ``--classroom`` (or an explicit ``--host``) and prints a warning.
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
    args = p.parse_args(argv)
    if not 0 < args.port < 65536:
        p.error(f"--port must be between 1 and 65535, got {args.port}")
    if args.threads is not None and args.threads < 1:
        p.error("--threads must be at least 1")

    from waitress import serve

    from . import create_app
    from .security import resolve_host, server_options

    # 127.0.0.1 unless --classroom; a non-loopback --host without it is refused with a sentence
    host = resolve_host(args.host, args.classroom, args.port)
    options = server_options(classroom=args.classroom)
    if args.threads is not None:
        options["threads"] = args.threads
    app = create_app()
    print(f"Schedule Explorer on http://{host}:{args.port}/  (Ctrl+C to stop)", flush=True)
    serve(app, host=host, port=args.port, **options)
    return 0


if __name__ == "__main__":
    sys.exit(main())

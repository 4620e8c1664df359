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
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    p.add_argument("--threads", type=int, default=6, help="request threads (default 6)")
    p.add_argument("--classroom", action="store_true",
                   help="listen on every interface (0.0.0.0) so a class can connect; prints a warning")
    args = p.parse_args(argv)
    if args.classroom and args.host == "127.0.0.1":
        args.host = "0.0.0.0"
    if not 0 < args.port < 65536:
        p.error(f"--port must be between 1 and 65535, got {args.port}")
    if args.threads < 1:
        p.error("--threads must be at least 1")

    from waitress import serve

    from . import create_app

    app = create_app()
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"WARNING: listening on {args.host}: other machines on this network can reach "
              "the explorer.", file=sys.stderr)
    print(f"Schedule Explorer on http://{args.host}:{args.port}/  (Ctrl+C to stop)", flush=True)
    serve(app, host=args.host, port=args.port, threads=args.threads, ident="schedule-explorer")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The ``serve`` command of ``python -m engine`` (see :mod:`engine.deploy.serve`): its
options checked and the endpoint started.  The parser is in :mod:`engine.cli` (so the other
commands do not import the deployment package); options left out get the defaults of
:mod:`engine.deploy.serve`::

    python -m engine serve mlp.so [--port 8080] [--host 127.0.0.1] [--max-batch 64]
                                  [--max-body-bytes 8388608] [--threads 4]
"""
from __future__ import annotations

import argparse
from typing import Any

from .serve import (DEFAULT_MAX_BATCH, DEFAULT_MAX_BODY_BYTES, DEFAULT_THREADS,
                    LibraryError, serve)

__all__ = ["run"]


def _check(args: argparse.Namespace, error: type) -> None:
    if args.max_batch is None:
        args.max_batch = DEFAULT_MAX_BATCH
    if args.max_body_bytes is None:
        args.max_body_bytes = DEFAULT_MAX_BODY_BYTES
    if args.threads is None:
        args.threads = DEFAULT_THREADS
    if not 0 <= args.port <= 65535:
        raise error(f"--port must be from 0 to 65535, got {args.port}")
    if not 1 <= args.max_batch <= 4096:
        raise error(f"--max-batch must be from 1 to 4096, got {args.max_batch}")
    if not 64 <= args.max_body_bytes <= 2**30:
        raise error(f"--max-body-bytes must be from 64 to {2**30}, got "
                    f"{args.max_body_bytes}")
    if not 1 <= args.threads <= 256:
        raise error(f"--threads must be from 1 to 256, got {args.threads}")


def run(args: argparse.Namespace, out: Any, error: type) -> int:
    """Serve until interrupted; ``error`` is the command line's error class (a sentence
    and an exit status)."""
    _check(args, error)
    try:
        serve(args.library, args.host, args.port, max_batch=args.max_batch,
              max_body_bytes=args.max_body_bytes, threads=args.threads, out=out)
    except LibraryError as e:
        raise error(str(e)) from None
    except OSError as e:     # the address is taken or not ours
        raise error(f"cannot listen on {args.host}:{args.port}: "
                    f"{e.strerror or e}") from None
    return 0

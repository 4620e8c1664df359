"""The waitress server the explorer runs on, guarded against clients that hold connections.

waitress reads requests asynchronously, so a slow client costs no thread, but it holds one of
the server's ``connection_limit`` connections; once they are all held the server stops
accepting and is unreachable for everyone.  Its ``channel_timeout`` closes only *idle*
connections: a client trickling a request's headers a line at a time is never idle.  Two
guards close that gap:

* **a request-read deadline** (:class:`GuardedChannel`): a request's headers must arrive
  within ``header_timeout`` seconds of its first byte (of the connection's opening, for the
  first request), and the whole request within ``request_timeout``; a connection past its
  deadline is closed (no request of it is running then, so nothing is lost);
* **a cap per client address** (:class:`GuardedServer`): a connection beyond
  ``per_client`` open ones from the same address is answered "503, too many connections"
  and closed at once, so one machine cannot take the class's connections.  A browser opens
  about 6 connections to a server, far below the default cap of 16.

:func:`make_server` builds the server (what ``waitress.create_server`` does, with these
classes); ``python -m app`` runs it, after :func:`quick_thread_handoffs`, and ends it with
:func:`stop_server` once its ``run()`` has been interrupted (a stop signal).
"""
from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import Any

from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import MultiSocketServer, TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

__all__ = ["GuardedChannel", "GuardedServer", "make_server", "stop_server",
           "PER_CLIENT_CONNECTIONS", "HEADER_TIMEOUT_S", "REQUEST_TIMEOUT_S",
           "SWITCH_INTERVAL_S", "STOP_TIMEOUT_S", "quick_thread_handoffs"]

log = logging.getLogger("app.serving")

#: open connections one client address may hold (a browser uses about 6)
PER_CLIENT_CONNECTIONS = 16
#: seconds a client has to send a request's headers, from its first byte
HEADER_TIMEOUT_S = 15.0
#: seconds a client has to send a whole request (headers and body)
REQUEST_TIMEOUT_S = 60.0

#: how long a thread of the server process may keep the interpreter's lock while another
#: thread waits for it (CPython's default is 5 ms). A click's answer is rendered by one
#: thread while others hand its measurement to a worker (the pool's supervisor threads) and
#: answer the worker's messages; each of those hand-offs waited up to the whole interval:
#: from the apply sending the step to the worker starting to compile took 12.1 ms (median
#: of 20 clicks in ``benchmarks/bench_latency.py``), 6.6 ms with 1 ms.
SWITCH_INTERVAL_S = 0.001


def quick_thread_handoffs() -> None:
    """Let a waiting thread of this process have the interpreter's lock after
    :data:`SWITCH_INTERVAL_S` (for the serving process; a process-wide setting)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)


_TOO_MANY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
             b"Connection: close\r\nContent-Length: %d\r\n\r\n%s")
_TOO_MANY_TEXT = (b"Too many connections from your address: close some of the explorer's tabs "
                  b"(or wait a little) and reload.\n")


class GuardedChannel(HTTPChannel):
    """A waitress connection that remembers since when it waits for a request to arrive.

    ``waiting_since``: the time the request now being received began (its first byte, or the
    connection's opening before any request); None between requests (an idle keep-alive
    connection is waitress's ``channel_timeout`` business).
    """

    def __init__(self, server, sock, addr, adj, map=None):
        super().__init__(server, sock, addr, adj, map=map)
        self.waiting_since: float | None = self.creation_time

    def received(self, data: bytes) -> bool:
        if data and self.request is None and self.waiting_since is None:
            self.waiting_since = time.time()
        done = super().received(data)
        if self.request is None:        # every request received so far is complete
            self.waiting_since = None
        return done

    def overdue(self, now: float, header_timeout: float, request_timeout: float) -> bool:
        """Whether this connection has taken too long to send the request it is sending."""
        if self.waiting_since is None or self.requests:
            return False
        headers_done = self.request is not None and self.request.headers_finished
        limit = request_timeout if headers_done else header_timeout
        return now - self.waiting_since > limit


class GuardedServer(TcpWSGIServer):
    """waitress's TCP server with :class:`GuardedChannel` deadlines and a per-address cap."""

    channel_class = GuardedChannel

    def __init__(self, *args: Any, per_client: int = PER_CLIENT_CONNECTIONS,
                 header_timeout: float = HEADER_TIMEOUT_S,
                 request_timeout: float = REQUEST_TIMEOUT_S, **kw: Any):
        self.per_client = per_client
        self.header_timeout = header_timeout
        self.request_timeout = max(request_timeout, header_timeout)
        self.refused = 0
        self.timed_out = 0
        super().__init__(*args, **kw)

    def open_from(self, address: str) -> int:
        """Open connections from one client address."""
        return sum(1 for ch in list(self.active_channels.values())
                   if ch.addr and ch.addr[0] == address)

    def handle_accept(self) -> None:
        try:
            pair = self.accept()
        except OSError:
            return
        if pair is None:
            return
        conn, addr = pair
        if self.per_client and addr and self.open_from(addr[0]) >= self.per_client:
            self.refused += 1
            if self.refused == 1 or self.refused % 100 == 0:
                log.warning("refused a connection from %s: it already has %d open "
                            "(%d refused so far)", addr[0], self.per_client, self.refused)
            _refuse(conn)
            return
        try:
            self.set_socket_options(conn)
        except OSError:
            conn.close()
            return
        self.channel_class(self, conn, self.fix_addr(addr), self.adj, map=self._map)

    def maintenance(self, now: float) -> None:
        super().maintenance(now)
        for channel in list(self.active_channels.values()):
            if isinstance(channel, GuardedChannel) and not channel.will_close and \
                    channel.overdue(now, self.header_timeout, self.request_timeout):
                self.timed_out += 1
                channel.will_close = True


def _refuse(conn) -> None:
    """Say "503, too many connections" (best effort, never blocking) and close."""
    try:
        conn.setblocking(False)
        conn.send(_TOO_MANY % (len(_TOO_MANY_TEXT), _TOO_MANY_TEXT))
    except OSError:
        pass
    finally:
        conn.close()


def make_server(app: Any, *, host: str, port: int, per_client: int = PER_CLIENT_CONNECTIONS,
                header_timeout: float = HEADER_TIMEOUT_S,
                request_timeout: float = REQUEST_TIMEOUT_S, **options: Any):
    """A waitress server for ``app`` on ``host:port`` with the guards above.

    ``options``: waitress's adjustments (:func:`app.web.security.server_options`);
    ``per_client`` 0 lifts the per-address cap.  Deadlines are checked every
    ``cleanup_interval`` seconds (a third of ``header_timeout``, at least 1).  Returns an object
    with ``run()`` and ``print_listen(format)``, like ``waitress.create_server``.
    """
    options.setdefault("cleanup_interval", int(max(1, min(30, header_timeout // 3))))
    adj = Adjustments(host=host, port=port, **options)
    dispatcher = ThreadedTaskDispatcher()
    dispatcher.set_thread_count(adj.threads)
    socket_map: dict = {}
    servers = [GuardedServer(app, socket_map, dispatcher=dispatcher, adj=adj, sockinfo=info,
                             per_client=per_client, header_timeout=header_timeout,
                             request_timeout=request_timeout)
               for info in adj.listen]
    if len(servers) == 1:
        return servers[0]
    return MultiSocketServer(socket_map, adj,
                             [(s.effective_host, s.effective_port) for s in servers],
                             dispatcher, servers[-1].log_info)


#: seconds :func:`stop_server` gives the requests being answered to finish
STOP_TIMEOUT_S = 2.0


def stop_server(server: Any, timeout: float = STOP_TIMEOUT_S) -> bool:
    """End a server made by :func:`make_server` whose ``run()`` was interrupted: queued
    requests are cancelled, the ones being answered get up to ``timeout`` seconds (their
    threads are daemons: past it they are left to the process's exit), and every socket is
    closed. True if every request thread ended in time.

    (waitress's own ``run()`` does the first part when interrupted by SystemExit or
    KeyboardInterrupt, waiting up to 5 s; ``python -m app`` interrupts it otherwise, to
    close the measurement pool first: a request waiting for a measurement then ends at once.)
    """
    dispatcher = getattr(server, "task_dispatcher", None)
    if dispatcher is None:              # not a waitress server (a test's stand-in)
        return True
    dispatcher.shutdown(cancel_pending=True, timeout=timeout)
    socket_map = getattr(server, "map", None)            # MultiSocketServer
    if socket_map is None:
        socket_map = getattr(server, "_map", None)       # one listening socket
    if socket_map:
        with contextlib.suppress(OSError):
            wasyncore.close_all(socket_map)
    return not dispatcher.threads

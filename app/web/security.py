"""HTTP hardening for the explorer: security headers, a same-origin check, classroom binding.

``init_security(app)`` registers

* an ``after_request`` hook adding the security headers below (a header a view already set
  is left alone);
* a ``before_request`` hook refusing state-changing requests (POST, PUT, PATCH, DELETE) that
  come from another origin (403 with a sentence; see :func:`same_origin_problem`).

Content-Security-Policy, and why each part is what it is:

* ``script-src 'self'`` — scripts only from our own ``static/`` (htmx and plotly.js are served
  locally).  No ``'unsafe-inline'``: inline ``<script>`` and ``on*=`` attributes do not run,
  so injected markup cannot run script even if autoescaping were bypassed.
  No ``'unsafe-eval'``:
    - **htmx** evaluates code with ``Function()`` only for ``hx-on*`` attributes, ``hx-vals``/
      ``hx-vars`` with ``js:`` values and event filters (``hx-trigger="click[ctrlKey]"``).
      The templates must not use those, and should set
      ``<meta name="htmx-config" content='{"allowEval": false, "allowScriptTags": false}'>``
      so htmx does not even try (it then skips them with an ``htmx:evalDisallowedError``
      event instead of a CSP violation).  Everything else in htmx (hx-get/post, hx-target,
      hx-swap, out-of-band swaps, hx-push-url, hx-indicator) needs no eval.
    - **plotly.js** (4.x, as bundled by the plotly package): its only ``Function(...)`` uses
      are a ``globalThis`` fallback and a ``Function.prototype.bind`` polyfill, neither
      reached in a current browser; ``Plotly.newPlot`` / ``react`` of scatter and bar charts
      run under this policy (checked in Chromium by ``tests/test_reliability_csp_browser.py``).
      The WebGL trace types (``scattergl``) are not used.
* ``style-src 'self' 'unsafe-inline'`` — plotly and htmx insert ``<style>`` elements
  (plotly's rules, htmx's indicator style), and the server-rendered SVG diagram uses
  ``style`` attributes.  Style injection cannot run script.
* ``img-src 'self' data: blob:`` — plotly's "download as PNG" and its icons.
* ``connect-src 'self'`` — htmx's requests go to this server only.
* ``object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'`` —
  no plugins, no ``<base>`` hijack, forms post only here, and no framing (clickjacking);
  ``X-Frame-Options: DENY`` says the same to old browsers.

Override per app with ``app.config["CONTENT_SECURITY_POLICY"]`` (a dict directive -> list).
"""
from __future__ import annotations

import ipaddress
import socket
import sys
from typing import Any, Iterable, TextIO
from urllib.parse import urlsplit

__all__ = ["init_security", "DEFAULT_CSP", "csp_header", "same_origin_problem",
           "resolve_host", "classroom_warning", "server_options", "is_loopback",
           "SECURITY_HEADERS"]

DEFAULT_CSP: dict[str, list[str]] = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'", "'unsafe-inline'"],
    "img-src": ["'self'", "data:", "blob:"],
    "font-src": ["'self'", "data:"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}

SECURITY_HEADERS: dict[str, str] = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
}

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def csp_header(policy: dict[str, Iterable[str]] | None = None) -> str:
    """Serialise a CSP dict (directive -> sources) to the header value."""
    policy = DEFAULT_CSP if policy is None else policy
    return "; ".join(f"{k} {' '.join(v)}".strip() for k, v in policy.items())


def _netloc(scheme: str, host: str | None, port: int | None) -> str:
    host = (host or "").lower().rstrip(".")
    default = {"http": 80, "https": 443}.get(scheme)
    if port is None or port == default:
        return host
    return f"{host}:{port}"


def _host_of_request(request: Any) -> tuple[str, str]:
    """(scheme, normalised host[:port]) of the request as the browser addressed it."""
    scheme = request.scheme
    parts = urlsplit(f"{scheme}://{request.host}")
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, _netloc(scheme, parts.hostname, port)


def same_origin_problem(request: Any) -> str | None:
    """Why this state-changing request must be refused, or None if it may proceed.

    Rules (browsers send ``Origin`` on every POST from fetch/XHR — htmx — and forms):

    1. ``Sec-Fetch-Site`` present and not ``same-origin``/``none`` -> refused;
    2. ``Origin`` present: must be this server's scheme://host:port (``null`` is refused);
    3. else ``Referer`` present: must be on this server;
    4. neither header (curl, scripts, the test client): allowed — a cross-site forgery needs a
       victim's browser, and browsers send ``Origin``.
    """
    scheme, here = _host_of_request(request)
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site not in ("same-origin", "none"):
        return (f"This request came from another site (Sec-Fetch-Site: {site[:40]}), so it was "
                f"refused: changes can only be made from the explorer's own pages.")
    origin = request.headers.get("Origin")
    source, label = (origin, "Origin") if origin is not None else (
        request.headers.get("Referer"), "Referer")
    if source is None:
        return None
    if source == "null":
        return ("This request came from a page with no origin (Origin: null), so it was "
                "refused: changes can only be made from the explorer's own pages.")
    try:
        parts = urlsplit(source)
        port = parts.port
        there = _netloc(parts.scheme, parts.hostname, port)
    except ValueError:
        there = None
        parts = None
    if there is None or parts is None or parts.scheme != scheme or there != here:
        shown = source[:80]
        return (f"This request came from another site ({label}: {shown}), so it was refused: "
                f"changes can only be made from the explorer's own pages at {scheme}://{here}. "
                f"Open the explorer there and try again.")
    return None


def init_security(app: Any, *, exempt_endpoints: Iterable[str] = ()) -> None:
    """Register the security headers and the same-origin check on a Flask ``app``.

    ``exempt_endpoints``: endpoint names that skip the same-origin check (none by default;
    also ``app.config["SAME_ORIGIN_EXEMPT"]``).  Refusals call ``flask.abort(403, sentence)``,
    so the app's own 403 error page shows the sentence (``error.description``).
    """
    from flask import abort, request

    policy = app.config.get("CONTENT_SECURITY_POLICY") or DEFAULT_CSP
    csp = csp_header(policy)
    exempt = set(exempt_endpoints) | set(app.config.get("SAME_ORIGIN_EXEMPT", ()))

    @app.before_request
    def _same_origin_check():
        if request.method not in UNSAFE_METHODS or request.endpoint in exempt:
            return None
        problem = same_origin_problem(request)
        if problem is not None:
            app.logger.warning("refused a cross-origin %s %s: %s", request.method,
                               request.path, problem)
            abort(403, description=problem)
        return None

    @app.after_request
    def _security_headers(response):
        h = response.headers
        h.setdefault("Content-Security-Policy", csp)
        for k, v in SECURITY_HEADERS.items():
            h.setdefault(k, v)
        return response

    app.extensions["schedule_explorer_security"] = {"csp": csp, "exempt": exempt}


# --------------------------------------------------------------------------- binding
def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _lan_addresses() -> list[str]:
    out: list[str] = []
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            addr = info[4][0]
            if addr not in out and not is_loopback(addr):
                out.append(addr)
    except OSError:
        pass
    return out


def classroom_warning(host: str, port: int) -> str:
    """The banner printed when the server listens beyond this machine."""
    where = ", ".join(f"http://{a}:{port}" for a in _lan_addresses()) or f"http://<this machine>:{port}"
    return (
        "WARNING: classroom mode — the explorer listens on "
        f"{host}:{port}, reachable by every machine that can reach this one.\n"
        "  Anyone who opens it can compile and run tensor programs on this machine (in worker\n"
        "  processes with time and memory limits) and save traces to its store.\n"
        "  Use it only on a network you trust (a classroom), and stop it (Ctrl-C) after class.\n"
        f"  Learners open: {where}\n")


def resolve_host(host: str | None, classroom: bool, port: int = 5000,
                 out: TextIO | None = None) -> str:
    """The address to bind: 127.0.0.1 unless ``classroom`` (then 0.0.0.0 by default).

    Refuses (``SystemExit`` with a sentence) a non-loopback ``host`` without ``classroom``;
    prints :func:`classroom_warning` to ``out`` (stderr) when listening beyond loopback.
    """
    if classroom:
        host = host or "0.0.0.0"
    else:
        host = host or "127.0.0.1"
        if not is_loopback(host):
            raise SystemExit(
                f"Refusing to listen on {host}: that would let other machines use the explorer. "
                f"Add --classroom to do that on purpose, or leave --host out to stay on "
                f"127.0.0.1.")
    if not is_loopback(host):
        print(classroom_warning(host, port), file=out or sys.stderr, flush=True)
    return host


def server_options(limits: Any = None, classroom: bool = False) -> dict[str, Any]:
    """Keyword arguments for ``waitress.serve`` sized for one user or a classroom."""
    max_upload = getattr(limits, "max_upload_bytes", 1 << 20)
    return {
        "threads": 16 if classroom else 8,
        "connection_limit": 200 if classroom else 100,
        "channel_timeout": 60,
        "max_request_body_size": max(int(max_upload) * 2, 64 * 1024),
        "max_request_header_size": 64 * 1024,
        "ident": "schedule-explorer",
        "clear_untrusted_proxy_headers": True,
    }

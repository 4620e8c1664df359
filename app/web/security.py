"""HTTP hardening for the explorer: security headers, a same-origin check, classroom binding.

``init_security(app)`` registers, in this order,

* a ``before_request`` hook answering only to the names this server was started for (every
  route, static files too): the ``Host`` a request names must be a loopback name
  (``localhost``, ``127.0.0.1``, ``[::1]``) or one of ``app.config["EXPLORER_ALLOWED_HOSTS"]``
  (classroom mode: the machine's names, ``--allow-host``, and any IP address); any other is
  refused with 400 and a sentence naming the accepted ones (see :func:`host_problem`).  This
  stops DNS rebinding (a hostile page whose name is made to resolve to this machine) and
  keeps a foreign name out of the links the pages print;
* a ``before_request`` hook asking for the class's access token when
  ``app.config["EXPLORER_ACCESS_TOKEN"]`` is set (classroom mode): ``?token=...`` in the URL
  once, then an HttpOnly, SameSite=Strict cookie; without either, 403 and a sentence
  (see :func:`access_problem`);
* a ``before_request`` hook refusing state-changing requests (POST, PUT, PATCH, DELETE) that
  come from another origin (403 with a sentence; see :func:`same_origin_problem`);
* an ``after_request`` hook adding the security headers below (a header a view already set
  is left alone) and the access cookie after a visit with the right token.

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
* ``'wasm-unsafe-eval'`` in ``script-src`` — the model page's "Run in your browser" compiles
  the model's ``.wasm`` (made by a worker, served by this app) with
  ``WebAssembly.instantiate``, which a ``script-src`` without it forbids. It allows compiling
  WebAssembly and nothing else: no ``eval``, no ``Function()``, no inline script.
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

import hmac
import ipaddress
import re
import socket
import sys
from typing import Any, Iterable, TextIO
from urllib.parse import urlsplit

__all__ = ["init_security", "DEFAULT_CSP", "csp_header", "same_origin_problem",
           "resolve_host", "classroom_warning", "server_options", "is_loopback",
           "SECURITY_HEADERS", "host_problem", "access_problem", "allowed_host_names",
           "LOOPBACK_NAMES", "ACCESS_COOKIE", "new_access_token", "class_link"]

DEFAULT_CSP: dict[str, list[str]] = {
    "default-src": ["'self'"],
    "script-src": ["'self'", "'wasm-unsafe-eval'"],
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


# --------------------------------------------------------------------------- Host names
#: the names every server answers to: this machine, as its own browser names it
LOOPBACK_NAMES: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")
_WILDCARDS = ("", "0.0.0.0", "::")
# a Host header: a DNS name or IPv4 address, or a bracketed IPv6 address; an optional port
_HOST_RE = re.compile(r"(?P<name>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::(?P<port>[0-9]{1,5}))?")


def _normal_name(name: str) -> str:
    """A host name as compared: lower case, no trailing dot, an IPv6 address without []."""
    return name.strip().lower().rstrip(".").strip("[]")


def _shown_name(name: str) -> str:
    return f"[{name}]" if ":" in name else name


def allowed_host_names(bind: str | None = None, extra: Iterable[str] = (),
                       classroom: bool = False) -> list[str]:
    """The host names a server bound to ``bind`` answers to (normalised, in a stable order).

    Always the loopback names; plus the bound address when it is a specific one; plus, in
    ``classroom`` mode, this machine's host name, its fully qualified name and its network
    addresses; plus ``extra`` (``--allow-host``).  Ports are not compared: a hostile page
    needs a *name* of its own to reach this server, and that name is what is refused.
    """
    names: list[str] = []
    candidates = list(LOOPBACK_NAMES)
    if bind and _normal_name(bind) not in _WILDCARDS:
        candidates.append(bind)
    if classroom:
        candidates += [socket.gethostname(), socket.getfqdn(), *_lan_addresses()]
    candidates += list(extra)
    for c in candidates:
        n = _normal_name(c or "")
        if n and n not in names:
            names.append(n)
    return names


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def host_problem(host_header: str | None, allowed: Iterable[str],
                 any_address: bool = False) -> str | None:
    """Why a request naming ``host_header`` must be refused, or None if this server is it.

    ``any_address`` (classroom mode): any IP address is accepted too — DNS rebinding needs a
    *name* the attacker controls, and a page opened by address is served by that address.
    A request without a ``Host`` (HTTP/1.0 tools) is let through: browsers always send one,
    and the pages then name the server by its own configured name.
    """
    if host_header is None:
        return None
    allowed = list(allowed)
    m = _HOST_RE.fullmatch(host_header.strip())
    name = _normal_name(m.group("name")) if m is not None else None
    if name is not None and (name in allowed or (any_address and _is_address(name))):
        return None
    shown = host_header[:80]
    names = ", ".join(_shown_name(n) for n in allowed)
    if any_address:
        names += " and its IP addresses"
    return (f"This server does not answer to the name {shown!r}: it answers only to {names}. "
            f"Open it by one of those names (the address printed when it started), "
            f"e.g. http://{_shown_name(allowed[0])}:<port>/.")


# --------------------------------------------------------------------------- access token
#: the cookie that remembers a class's access token after the first visit
ACCESS_COOKIE = "explorer_access"
ACCESS_COOKIE_AGE_S = 24 * 3600
NO_ACCESS = ("This explorer is open only to its class: ask your teacher for the class link "
             "(the address printed when the server started, ending in ?token=...) and open it "
             "once in this browser.")


def new_access_token() -> str:
    """A fresh random access token (printed once, in the class link)."""
    import secrets
    return secrets.token_urlsafe(18)


def _same_secret(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode("utf-8", "replace"),
                                                     token.encode("utf-8"))


def access_problem(request: Any, token: str) -> tuple[str | None, bool]:
    """(why this request may not see the class's explorer or None, whether to set the cookie).

    The right ``?token=`` lets the request through and asks for the cookie; else the cookie
    must hold the token.  A wrong ``?token=`` does not undo a valid cookie.
    """
    if _same_secret(request.args.get("token"), token):
        return None, True
    if _same_secret(request.cookies.get(ACCESS_COOKIE), token):
        return None, False
    return NO_ACCESS, False


def init_security(app: Any, *, exempt_endpoints: Iterable[str] = ()) -> None:
    """Register the security headers and the same-origin check on a Flask ``app``.

    ``exempt_endpoints``: endpoint names that skip the same-origin check (none by default;
    also ``app.config["SAME_ORIGIN_EXEMPT"]``).  ``app.config["EXPLORER_ALLOWED_HOSTS"]``:
    host names answered besides the loopback ones; ``app.config["EXPLORER_CLASSROOM"]``: any
    IP address is answered too; ``app.config["EXPLORER_ACCESS_TOKEN"]``:
    the class's access token (none: no token asked).  Refusals call ``flask.abort(403, sentence)``,
    so the app's own 403 error page shows the sentence (``error.description``).
    """
    from flask import abort, g, request

    policy = app.config.get("CONTENT_SECURITY_POLICY") or DEFAULT_CSP
    csp = csp_header(policy)
    exempt = set(exempt_endpoints) | set(app.config.get("SAME_ORIGIN_EXEMPT", ()))
    hosts = allowed_host_names(extra=app.config.get("EXPLORER_ALLOWED_HOSTS") or ())
    any_address = bool(app.config.get("EXPLORER_CLASSROOM"))
    token = app.config.get("EXPLORER_ACCESS_TOKEN") or None

    @app.before_request
    def _known_host_check():
        problem = host_problem(request.environ.get("HTTP_HOST"), hosts, any_address)
        if problem is not None:
            app.logger.warning("refused a request for an unknown host name: %s",
                               request.environ.get("HTTP_HOST", "")[:80])
            abort(400, description=problem)
        return None

    @app.before_request
    def _access_token_check():
        if token is None:
            return None
        problem, remember = access_problem(request, token)
        if problem is not None:
            abort(403, description=problem)
        g.set_access_cookie = remember
        if "token" in request.args:
            # the class's token is the server's business: the pages never see it
            args = request.args.copy()
            args.poplist("token")
            request.args = type(request.args)(args)
        return None

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
        if token is not None and g.get("set_access_cookie"):
            response.set_cookie(ACCESS_COOKIE, token, max_age=ACCESS_COOKIE_AGE_S, path="/",
                                httponly=True, samesite="Strict")
        return response

    app.extensions["schedule_explorer_security"] = {"csp": csp, "exempt": exempt,
                                                    "hosts": hosts}


# --------------------------------------------------------------------------- binding
def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _primary_address() -> str | None:
    """The address this machine reaches other networks from (no packet is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))          # TEST-NET-1: routing only, nothing is sent
            return s.getsockname()[0]
    except OSError:
        return None


def _lan_addresses() -> list[str]:
    """This machine's non-loopback IPv4 addresses: its primary one and its host name's."""
    out: list[str] = []
    candidates = [_primary_address()]
    try:
        candidates += [info[4][0] for info in
                       socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)]
    except OSError:
        pass
    for addr in candidates:
        if addr and addr not in out and not is_loopback(addr):
            out.append(addr)
    return out


def class_link(address: str, port: int, token: str | None = None) -> str:
    """The URL a learner opens: ``http://address:port/`` plus ``?token=...`` if one is asked."""
    base = f"http://{_shown_name(_normal_name(address))}:{port}/"
    return base + (f"?token={token}" if token else "")


def classroom_warning(host: str, port: int, *, token: str | None = None,
                      names: Iterable[str] = ()) -> str:
    """The banner printed when the server listens beyond this machine.

    ``token``: the class's access token, printed (only here) in the learners' links;
    ``names``: the host names the server answers to.
    """
    where = ", ".join(class_link(a, port, token) for a in _lan_addresses()) or \
        class_link("<this machine>", port, token)
    answers = ", ".join(n for n in names if not _is_address(n))
    return (
        "WARNING: classroom mode — the explorer listens on "
        f"{host}:{port}, reachable by every machine that can reach this one.\n"
        "  Anyone who opens it can compile and run tensor programs on this machine (in worker\n"
        "  processes with time and memory limits) and save traces to its store.\n"
        "  Use it only on a network you trust (a classroom), and stop it (Ctrl-C) after class.\n"
        f"  Learners open: {where}\n"
        + (f"  It answers to its IP addresses and to the names {answers} only (add others\n"
           f"  with --allow-host NAME).\n"
           if answers else "")
        + ("  The link's token is asked once per browser, then kept in a cookie; without it a\n"
           "  visitor is told to ask the teacher for the class link.\n" if token else ""))


def resolve_host(host: str | None, classroom: bool, port: int = 5000,
                 out: TextIO | None = None, *, token: str | None = None,
                 names: Iterable[str] = ()) -> str:
    """The address to bind: 127.0.0.1 unless ``classroom`` (then 0.0.0.0 by default).

    Refuses (``SystemExit`` with a sentence) a non-loopback ``host`` without ``classroom``;
    prints :func:`classroom_warning` (with ``token`` and ``names``) to ``out`` (stderr) when
    listening beyond loopback.
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
        print(classroom_warning(host, port, token=token, names=names), file=out or sys.stderr,
              flush=True)
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

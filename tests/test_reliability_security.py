"""Security headers, the same-origin check for POSTs, and the classroom binding helper."""
from __future__ import annotations

import io

import pytest
from flask import Flask

from app.web.security import (DEFAULT_CSP, csp_header, init_security, is_loopback, resolve_host,
                          server_options)


@pytest.fixture()
def client():
    app = Flask("sec-test")
    app.config["TESTING"] = True

    @app.get("/")
    def index():
        return "<p>hi</p>"

    @app.post("/apply")
    def apply():
        return "applied"

    @app.post("/hook")
    def hook():
        return "hooked"

    @app.get("/framed")
    def framed():
        return "ok", 200, {"X-Frame-Options": "SAMEORIGIN"}

    init_security(app, exempt_endpoints={"hook"})
    return app.test_client()


def test_security_headers_on_every_response(client):
    for r in (client.get("/"), client.get("/missing"), client.post("/apply")):
        h = r.headers
        csp = h["Content-Security-Policy"]
        assert "script-src 'self'" in csp
        # eval stays forbidden; compiling WebAssembly (the model page's .wasm) is allowed
        assert "'unsafe-eval'" not in csp
        script_src = csp.split("script-src")[1].split(";")[0].split()
        assert script_src == ["'self'", "'wasm-unsafe-eval'"]
        assert "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]
        assert "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
        assert h["X-Content-Type-Options"] == "nosniff"
        assert h["X-Frame-Options"] == "DENY"
        assert h["Referrer-Policy"] == "same-origin"


def test_a_view_can_override_a_header(client):
    assert client.get("/framed").headers["X-Frame-Options"] == "SAMEORIGIN"


def test_csp_serialisation():
    assert csp_header({"default-src": ["'self'"], "img-src": ["'self'", "data:"]}) == \
        "default-src 'self'; img-src 'self' data:"
    assert csp_header().startswith("default-src 'self'; script-src 'self'")
    assert set(DEFAULT_CSP) >= {"default-src", "script-src", "style-src", "frame-ancestors"}


def test_same_origin_posts_pass(client):
    assert client.post("/apply").status_code == 200                 # no Origin: not a browser
    assert client.post("/apply", headers={"Origin": "http://localhost"}).status_code == 200
    assert client.post("/apply", headers={"Origin": "http://localhost:80"}).status_code == 200
    assert client.post("/apply", headers={"Referer": "http://localhost/explore/mm_relu?n=8"}
                       ).status_code == 200
    r = client.post("/apply", headers={"Origin": "http://127.0.0.1:5000", "HX-Request": "true",
                                       "Sec-Fetch-Site": "same-origin"},
                    base_url="http://127.0.0.1:5000")
    assert r.status_code == 200


@pytest.mark.parametrize("headers", [
    {"Origin": "http://evil.example"},
    {"Origin": "http://localhost:5001"},
    {"Origin": "https://localhost"},
    {"Origin": "null"},
    {"Origin": "http://localhost.evil.example"},
    {"Referer": "http://evil.example/page"},
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site", "Origin": "http://localhost"},
    {"Origin": "http://[::1"},
])
def test_cross_origin_posts_are_refused(client, headers):
    r = client.post("/apply", headers=headers)
    assert r.status_code == 403
    body = r.get_data(as_text=True)
    assert "refused" in body and "explorer&#39;s own pages" in body
    assert "Traceback" not in body


def test_get_is_never_blocked_and_exempt_endpoints_pass(client):
    assert client.get("/", headers={"Origin": "http://evil.example"}).status_code == 200
    assert client.post("/hook", headers={"Origin": "http://evil.example"}).status_code == 200


def test_default_bind_is_loopback_and_other_hosts_need_classroom():
    out = io.StringIO()
    assert resolve_host(None, False, 5000, out) == "127.0.0.1"
    assert resolve_host("localhost", False, 5000, out) == "localhost"
    assert resolve_host("::1", False, 5000, out) == "::1"
    assert out.getvalue() == ""
    with pytest.raises(SystemExit, match="--classroom"):
        resolve_host("0.0.0.0", False, 5000, out)
    with pytest.raises(SystemExit):
        resolve_host("192.168.1.5", False, 5000, out)


def test_classroom_mode_binds_everywhere_with_a_warning():
    out = io.StringIO()
    assert resolve_host(None, True, 8000, out) == "0.0.0.0"
    text = out.getvalue()
    assert text.startswith("WARNING: classroom mode") and "0.0.0.0:8000" in text
    assert "time and memory limits" in text


def test_loopback_detection():
    assert is_loopback("127.0.0.1") and is_loopback("127.3.4.5") and is_loopback("[::1]")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1")
    assert not is_loopback("example.org")


def test_server_options_are_bounded():
    from app.limits import Limits
    one = server_options(Limits())
    many = server_options(Limits(), classroom=True)
    assert many["threads"] > one["threads"] >= 4
    assert one["max_request_body_size"] >= Limits().max_upload_bytes
    assert one["ident"] == "schedule-explorer"
    from waitress.adjustments import Adjustments
    Adjustments(**one)                                     # every option is one waitress knows
    Adjustments(**many)

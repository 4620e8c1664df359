"""The explorer answers only to its own names (DNS rebinding), and in classroom mode only to
visitors who came with the class link's token (then kept in an HttpOnly, SameSite=Strict
cookie).  Flask test-client tests; the real server is in test_reliability_connections.py."""
from __future__ import annotations

import re
from html import unescape

import pytest

import engine
from app.web.security import ACCESS_COOKIE, allowed_host_names, host_problem
from inline_service import make_test_app

N = 16
APPLY = {"n": str(N), "sel": "L/mm_relu/0/Y", "primitive": "parallel"}
TOKEN = "class-token-42"


@pytest.fixture(scope="module")
def app():
    return make_test_app({"PREFETCH_MEASUREMENTS": False})


@pytest.fixture(scope="module")
def class_app():
    return make_test_app({"PREFETCH_MEASUREMENTS": False, "EXPLORER_CLASSROOM": True,
                          "EXPLORER_ALLOWED_HOSTS": ["explorer.lan"],
                          "EXPLORER_ACCESS_TOKEN": TOKEN})


def text(resp) -> str:
    return resp.get_data(as_text=True)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:5000", "localhost.evil.example",
                                  "127.0.0.1.nip.io:5000", "10.0.0.7:5000"])
@pytest.mark.parametrize("origin", [False, True])
def test_a_foreign_host_name_is_refused_everywhere(app, host, origin):
    client = app.test_client()
    base = f"http://{host}"
    headers = {"Origin": base} if origin else {}
    r = client.get("/", base_url=base, headers=headers)
    assert r.status_code == 400
    page = text(r)
    assert "does not answer to the name" in page and "localhost" in page
    assert "href=\"http://" + host not in page
    r = client.post("/explore/mm_relu/apply", data=APPLY, base_url=base,
                    headers={**headers, "HX-Request": "true"})
    assert r.status_code == 400 and "HX-Push-Url" not in r.headers
    assert client.get("/static/favicon.svg", base_url=base).status_code == 400
    assert client.get(f"/explore/mm_relu?n={N}", base_url=base).status_code == 400


@pytest.mark.parametrize("host", ["localhost", "localhost:5000", "127.0.0.1:5000", "[::1]:5000",
                                  "LOCALHOST.:8080"])
def test_the_loopback_names_are_answered(app, host):
    client = app.test_client()
    base = f"http://{host}"
    assert client.get("/", base_url=base).status_code == 200
    assert client.get("/static/favicon.svg", base_url=base).status_code == 200
    r = client.post("/explore/mm_relu/apply", data=APPLY, base_url=base,
                    headers={"Origin": base, "HX-Request": "true"})
    assert r.status_code == 200 and r.headers.get("HX-Push-Url")


def test_share_and_fork_links_carry_only_an_answered_name(app):
    client = app.test_client()
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=N), workload=("mm_relu", {"n": N}))
    sch.split(sch.get_loops(sch.get_block("Y"))[1], factors=[None, 4])
    a = f"http://localhost/explore/mm_relu?n={N}&t={sch.trace.encode()}"
    r = client.get("/compare", query_string={"a": a}, base_url="http://127.0.0.1:5000")
    assert r.status_code == 200
    forks = [unescape(u) for u in re.findall(r'<a href="([^"]+)" class="fork-compare"', text(r))]
    assert forks and all("127.0.0.1%3A5000" in u or "127.0.0.1:5000" in u for u in forks)
    r = client.get("/compare", query_string={"a": a}, base_url="http://evil.example")
    assert r.status_code == 400 and "fork-compare" not in text(r)
    r = client.get(f"/explore/mm_relu?n={N}", base_url="http://evil.example",
                   headers={"HX-Request": "true"})
    assert r.status_code == 400 and "share-url" not in text(r)


def test_classroom_names_and_addresses_are_answered(class_app):
    client = class_app.test_client()
    for host in ("explorer.lan:5000", "192.168.1.20:5000", "[fe80::1]:5000", "localhost"):
        r = client.get("/", base_url=f"http://{host}", query_string={"token": TOKEN})
        assert r.status_code == 200, host
    r = client.get("/", base_url="http://evil.example:5000", query_string={"token": TOKEN})
    assert r.status_code == 400 and "explorer.lan" in text(r)


def test_host_names_are_compared_strictly():
    allowed = allowed_host_names("127.0.0.1", ["Explorer.LAN."])
    assert "explorer.lan" in allowed and "localhost" in allowed and "::1" in allowed
    assert host_problem(None, allowed) is None            # HTTP/1.0: no Host, not a browser
    assert host_problem("explorer.lan:80", allowed) is None
    for bad in ("explorer.lan.evil.example", "user@localhost", "localhost:5000/x", "[::1",
                "localhost:abc", "", "10.1.2.3"):
        assert host_problem(bad, allowed) is not None, bad
    assert host_problem("10.1.2.3:5000", allowed, any_address=True) is None
    assert host_problem("10.1.2.3.evil.example", allowed, any_address=True) is not None


def test_the_class_link_token_is_asked_then_remembered(class_app):
    client = class_app.test_client()
    r = client.get("/")
    assert r.status_code == 403 and "ask your teacher for the class link" in text(r)
    assert client.get("/static/favicon.svg").status_code == 403
    assert client.post("/explore/mm_relu/apply", data=APPLY).status_code == 403
    assert client.get("/", query_string={"token": "wrong"}).status_code == 403
    assert client.get_cookie(ACCESS_COOKIE) is None

    r = client.get("/", query_string={"token": TOKEN})
    assert r.status_code == 200
    cookie = r.headers["Set-Cookie"]
    assert cookie.startswith(f"{ACCESS_COOKIE}={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    # the token is the server's: a page given it does not take it for one of its parameters
    r = client.get(f"/explore/mm_relu?n={N}&token={TOKEN}")
    assert r.status_code == 200 and "token" not in text(r).split("share-url")[-1][:300]
    # the cookie alone opens every page after that, static files too
    assert client.get(f"/explore/mm_relu?n={N}").status_code == 200
    assert client.get("/static/favicon.svg").status_code == 200
    r = client.post("/explore/mm_relu/apply", data=APPLY, headers={"HX-Request": "true"})
    assert r.status_code == 200 and r.headers.get("HX-Push-Url")


def test_a_wrong_cookie_or_token_is_refused(class_app):
    client = class_app.test_client()
    client.set_cookie(ACCESS_COOKIE, TOKEN + "x")
    assert client.get("/").status_code == 403
    assert client.get("/", query_string={"token": TOKEN[:-1]}).status_code == 403
    assert client.get("/", query_string={"token": "é" * 20}).status_code == 403


def test_allow_host_needs_classroom(capsys):
    from app.__main__ import main
    with pytest.raises(SystemExit) as e:
        main(["--allow-host", "explorer.lan"])
    assert e.value.code == 2 and "--allow-host needs --classroom" in capsys.readouterr().err

"""Trust, round two: a learner is their browser (a signed cookie), not their address.

In a classroom several learners share one address (a NAT): learner B, with another cookie
but A's address, was refused their own search and could stop A's. Ownership is now by
the signed learner cookie; fairness (the queue's turns, the cap on searches) stays by
address.
"""
from __future__ import annotations

import re

import pytest

from inline_service import make_test_app

HX = {"HX-Request": "true"}
FORM = {"trials": "4", "space": "auto", "strategy": "random"}


@pytest.fixture()
def app():
    return make_test_app()


def start_search(client) -> tuple[int, str | None]:
    r = client.post("/explore/mm_relu/tune?n=16", data=FORM, headers=HX)
    m = re.search(r"/tune/([A-Za-z0-9_-]+)", r.get_data(as_text=True))
    return r.status_code, (m.group(1) if m else None)


def test_two_learners_behind_one_address_each_own_their_search(app):
    a, b = app.test_client(), app.test_client()
    pool = app.extensions["measurer"].pool
    with pool.held():                                  # both searches stay running
        status_a, tid_a = start_search(a)
        assert status_a == 200 and tid_a
        status_b, tid_b = start_search(b)              # same address, another learner
        assert status_b == 200 and tid_b and tid_b != tid_a, "B was refused their own search"
        again, _ = start_search(a)                     # one at a time per learner
        assert again == 503
        assert b.post(f"/tune/{tid_a}/stop", headers=HX).status_code == 403
        assert a.post(f"/tune/{tid_b}/stop", headers=HX).status_code == 403
        assert app.test_client().post(f"/tune/{tid_a}/stop",   # no cookie: nobody's search
                                      headers=HX).status_code == 403
        assert a.post(f"/tune/{tid_a}/stop", headers=HX).status_code == 200
    tickets = app.extensions["measurer"]
    assert tickets.tune_ticket(tid_a).stop_requested
    assert not tickets.tune_ticket(tid_b).stop_requested


def test_new_cookies_buy_no_more_searches_than_the_address_may_run(app):
    pool = app.extensions["measurer"].pool
    cap = app.extensions["measurer"].TUNES_PER_ADDRESS
    with pool.held():
        statuses = [start_search(app.test_client())[0] for _ in range(cap + 3)]
    assert statuses == [200] * cap + [503] * 3


def test_the_learner_cookie_is_signed_httponly_and_kept_across_requests(app):
    a = app.test_client()
    with app.extensions["measurer"].pool.held():
        _, tid = start_search(a)
        cookie = a.get_cookie("explorer_learner")
        assert cookie is not None and cookie.http_only and cookie.same_site == "Lax"
        forged = app.test_client()
        forged.set_cookie("explorer_learner", cookie.value[:-4] + "AAAA")   # a bad signature
        assert forged.post(f"/tune/{tid}/stop", headers=HX).status_code == 403
        assert a.post(f"/tune/{tid}/stop", headers=HX).status_code == 200

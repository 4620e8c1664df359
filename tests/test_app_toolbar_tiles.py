"""The toolbar's blockize / tensorize / add_unit_loop: offered on a selected loop (tensorize on
a blockized block too), applied through the apply endpoint, refused with a sentence."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from inline_service import make_test_app

HX = {"HX-Request": "true"}


@pytest.fixture(scope="module")
def client():
    return make_test_app().test_client()


def _apply(client, q: dict, sel: str, primitive: str, **args):
    data = dict(q, sel=sel, primitive=primitive, **args)
    return client.post("/explore/matmul/apply", data=data, headers=HX)


def _state(r) -> dict:
    return {k: v[0] for k, v in parse_qs(urlsplit(r.headers["HX-Push-Url"]).query).items()}


def _tiles(client):
    q = {"n": "32"}
    for sel, prim, args in [("L/matmul/0/C", "split", {"factors": "None, 16"}),
                            ("L/matmul/2/C", "split", {"factors": "None, 16"}),
                            ("L/matmul/4/C", "split", {"factors": "None, 16"}),
                            ("L/matmul/0/C", "reorder",
                             {"order": "i_0, j_0, k_0, i_1, j_1, k_1"}),
                            ("B/matmul/C", "decompose_reduction", {"loop": "L/matmul/2/C"})]:
        r = _apply(client, q, sel, prim, **args)
        assert r.status_code == 200, r.get_data(as_text=True)
        q = _state(r)
    return q


def test_toolbar_offers_blockize_and_tensorize_on_a_loop(client):
    page = client.get("/explore/matmul/toolbar?n=32&sel=L/matmul/0/C").get_data(as_text=True)
    for prim in ("blockize", "tensorize", "add_unit_loop"):
        assert f'data-prim="{prim}"' in page
    assert "vfma_f32_16x16x16" in page


def test_tensorize_a_tile_from_the_toolbar(client):
    q = _tiles(client)
    r = _apply(client, q, "L/matmul/3/C_update", "tensorize", intrin="vfma_f32_16x16x16")
    assert r.status_code == 200, r.get_data(as_text=True)
    assert "T.vectorized(16)" in r.get_data(as_text=True)
    r = _apply(client, q, "L/matmul/3/C_update", "tensorize", intrin="vfma_f32_8x8x8")
    assert r.status_code == 422 and "does not match" in r.get_data(as_text=True)
    r = _apply(client, q, "L/matmul/3/C_update", "tensorize", intrin="nope")
    assert r.status_code == 422 and "Unknown tensor intrinsic" in r.get_data(as_text=True)


def test_blockize_then_tensorize_the_block(client):
    q = _tiles(client)
    r = _apply(client, q, "L/matmul/3/C_update", "blockize")
    assert r.status_code == 200, r.get_data(as_text=True)
    q = _state(r)
    page = client.get(f"/explore/matmul/toolbar?n=32&t={q['t']}&sel=B/matmul/C_update_o")
    assert 'data-prim="tensorize"' in page.get_data(as_text=True)
    r = _apply(client, q, "B/matmul/C_update_o", "tensorize", intrin="vfma_f32_16x16x16")
    assert r.status_code == 200, r.get_data(as_text=True)

"""The shipped presets are offered in the gallery and in the explorer, and open replayed."""
from __future__ import annotations

import html as htmlmod
import re

import pytest

from inline_service import make_test_app
from engine import presets


@pytest.fixture(scope="module")
def client():
    return make_test_app({"PREFETCH_MEASUREMENTS": False}).test_client()


def links(page: str) -> list[str]:
    return [htmlmod.unescape(h) for h in re.findall(r'href="([^"]+)"', page)]


def test_gallery_lists_every_preset_with_its_replay_link(client):
    page = client.get("/").get_data(as_text=True)
    hrefs = links(page)
    for name in presets.names():
        assert f'id="preset-{name}"' in page
        assert presets.info(name).explore_url() in hrefs
    # and each workload card names its own presets
    card = page.split('id="card-matmul"', 1)[1].split("</li>", 1)[0]
    assert "matmul-best" in card and "mm_relu-best" not in card


def test_explorer_offers_the_presets_of_its_workload_at_its_sizes(client):
    page = client.get("/explore/matmul?n=64").get_data(as_text=True)
    box = page.split('id="trace-presets"', 1)[1].split("</details>", 1)[0]
    hrefs = links(box)
    assert presets.info("matmul-best").explore_url(n=64) in hrefs      # at these sizes
    assert presets.info("matmul-best").explore_url() in hrefs          # at its own
    assert "conv2d" not in box


def test_a_preset_link_opens_the_whole_trace(client):
    url = presets.info("matmul-best").explore_url(n=64)
    r = client.get(url)
    assert r.status_code == 200
    page = r.get_data(as_text=True)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    m = re.search(r"step (\d+) of (\d+)", text)
    assert m and m.group(1) == m.group(2) and int(m.group(2)) >= 10   # at its last step
    assert "T.parallel" in page and "T.vectorized" in page and "T.unroll" in page

"""``python -m app`` compiles the page templates before it serves the first request."""
from __future__ import annotations

from inline_service import make_test_app

from app.__main__ import compile_templates


def test_every_page_template_is_compiled_before_the_first_request(tmp_path):
    app = make_test_app({"EXPLORER_INSTANCE": str(tmp_path)})
    names = app.jinja_env.list_templates(extensions=["html"])
    assert "panes/all_oob.html" in names and "base.html" in names
    read = []
    loader = app.jinja_env.loader
    original = loader.get_source

    def get_source(env, name):
        read.append(name)
        return original(env, name)
    loader.get_source = get_source
    assert compile_templates(app) == len(names)
    assert set(read) == set(names)
    # the first click's answer finds its templates compiled: none is read again
    read.clear()
    client = app.test_client()
    assert client.get("/").status_code == 200
    assert client.get("/explore/mm_relu?n=16").status_code == 200
    assert read == []

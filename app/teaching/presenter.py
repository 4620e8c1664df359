"""Presenter mode: large fonts, pane selection, arrow keys step through the lesson or the
trace (static/present.js adds the bar). Every teaching page takes ``present=1``.

=========================================  ==================================================
``GET  /explore/<w>/present?<state>``      the explorer in presenter mode
``GET  /explore/<w>?<state>&present=1``    redirects there (``present=0``: back to the explorer)
=========================================  ==================================================
"""
from __future__ import annotations

import re
from urllib.parse import urlencode

from flask import Blueprint, redirect, render_template, request

from ..web import explorer
from ..web.session import Session

bp = Blueprint("presenter", __name__)


def is_on() -> bool:
    """True when the request asks for presenter mode (``present=1``)."""
    return request.values.get("present", "") in ("1", "true", "on")


_EXPLORE_PATH = re.compile(r"^/explore/([^/]+)$")


@bp.before_app_request
def _present_flag_on_the_explorer():
    """``/explore/<w>?…&present=1`` -> ``/explore/<w>/present?…`` (the explorer's own route
    takes only workload parameters; ``present=0`` leads back to the plain explorer)."""
    if request.method != "GET" or "present" not in request.args:
        return None
    m = _EXPLORE_PATH.match(request.path)
    if m is None:
        return None
    args = [(k, v) for k, v in request.args.items(multi=True) if k != "present"]
    on = request.args.get("present", "") in ("1", "true", "on")
    path = f"/explore/{m.group(1)}" + ("/present" if on else "")
    return redirect(path + ("?" + urlencode(args) if args else ""), code=302)


@bp.get("/explore/<workload>/present")
def present_explore(workload: str):
    """The explorer page in presenter mode (the same panes; static/present.js adds the
    presenter bar, and keeps ``/present`` in the address bar as the state changes)."""
    s = Session.from_request(workload, request.args, frozenset({"present"}))
    ctx = explorer.context(s, request.args.get("sel") or None)
    return render_template("lessons/present_explore.html", **ctx, message=None, present=True)

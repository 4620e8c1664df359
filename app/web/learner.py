"""Who a request comes from: the *learner* (a browser) for ownership, the *address* for
fairness.

* :func:`learner_key` — the learner: a random id in a signed cookie (Flask's session:
  ``explorer_learner``, HttpOnly, SameSite=Lax), made on first use. What a learner starts
  is theirs: only they may stop their search, their uploads are evicted only by their own.
  The cookie's signing key is kept in the instance folder (``learner-secret.key``, mode
  0600), so learners stay themselves across server restarts.
* :func:`app.web.measuring.client_key` — the address: the queue takes turns between
  addresses and caps each one's share, so new cookies (a script that sends none) buy no
  more of the workers than one browser has. Two learners behind one address (a classroom's
  NAT) are two owners sharing one address's turns.
"""
from __future__ import annotations

import os
import re
import secrets
from datetime import timedelta
from typing import Any

from flask import has_request_context, session

__all__ = ["learner_key", "install", "COOKIE"]

COOKIE = "explorer_learner"
_ID = re.compile(r"[A-Za-z0-9_-]{16,43}")
_SECRET_FILE = "learner-secret.key"


def learner_key() -> str | None:
    """The request's learner id (made and set in the signed cookie on first use); None
    outside a request."""
    if not has_request_context():
        return None
    lid = session.get("learner")
    if not isinstance(lid, str) or not _ID.fullmatch(lid):
        lid = secrets.token_urlsafe(16)
        session["learner"] = lid
        session.permanent = True
    return lid


def _instance_secret(folder: str) -> bytes:
    """The signing key kept in ``folder`` (made on first start, readable by this user
    only); a fresh one when the folder cannot hold it."""
    path = os.path.join(folder, _SECRET_FILE)
    try:
        with open(path, "rb") as f:
            key = f.read(64)
        if len(key) >= 32:
            return key
    except OSError:
        pass
    key = secrets.token_bytes(32)
    try:
        os.makedirs(folder, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
    except OSError:
        pass
    return key


def install(app: Any, folder: str | None) -> None:
    """Sign ``app``'s learner cookie with a key from ``folder`` (or ``SECRET_KEY`` when
    configured) and set the cookie's attributes."""
    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = (_instance_secret(folder) if folder
                                    else secrets.token_bytes(32))
    app.config.update(SESSION_COOKIE_NAME=COOKIE, SESSION_COOKIE_HTTPONLY=True,
                      SESSION_COOKIE_SAMESITE="Lax",
                      PERMANENT_SESSION_LIFETIME=timedelta(days=30))

"""What a toolbar answer's primitive form sends, read from the HTML (for the tests that post
it): the form's own hidden fields plus the session's state, written once in the toolbar
(``#toolbar-state``) and included by every form (``hx-include``)."""
from __future__ import annotations

import re

HIDDEN = r'<input type="hidden" name="([^"]+)" value="([^"]*)"'


def toolbar_state(page: str) -> dict:
    """The session's state every form of the toolbar ``page`` sends along."""
    block = re.search(r'<div id="toolbar-state" hidden>(.*?)</div>', page, re.S).group(1)
    return dict(re.findall(HIDDEN, block))


def primitive_forms(page: str) -> list[str]:
    """The HTML of every primitive's form in the toolbar ``page``."""
    return re.findall(r'<form class="prim".*?</form>', page, re.S)


def primitive_fields(page: str, prim: str) -> dict:
    """What the form of primitive ``prim`` sends: the session's state and its hidden fields."""
    form = next(f for f in primitive_forms(page) if f'name="primitive" value="{prim}"' in f)
    return {**toolbar_state(page), **dict(re.findall(HIDDEN, form))}

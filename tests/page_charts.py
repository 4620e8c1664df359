"""Reading the measurement pane's server-drawn charts (app.web.charts) out of a page."""
from __future__ import annotations

import html
import json
import re


def chart(page: str, plot_id: str) -> tuple[dict[str, dict], int]:
    """``({trace name: {"x": [...], "y": [...]}}, data-points)`` of the chart ``plot_id``."""
    m = re.search(rf'<div class="plot small chart" id="{plot_id}" data-drawn="server" '
                  rf'data-points="(\d+)">(.*?)</svg></div>', page, re.S)
    assert m, f"no chart {plot_id} in the page"
    traces = {html.unescape(name): json.loads(html.unescape(values))
              for name, values in re.findall(r'<g class="trace" data-name="([^"]*)" '
                                             r'data-values="([^"]*)">', m.group(2))}
    return traces, int(m.group(1))

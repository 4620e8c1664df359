"""Markdown-light for lesson narrative: safe HTML from a tiny, predictable subset.

Supported: paragraphs (blank line), ``- `` bullet lists, ```` `code` ````, ``**bold**``,
``*emphasis*`` and fenced code blocks (```` ``` ````). Everything else is text: the input
is HTML-escaped first, so lesson files can never inject markup or script.
"""
from __future__ import annotations

import html
import re

__all__ = ["to_html", "to_text"]

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_EM = re.compile(r"(?<![*\w])\*([^*\s][^*]*)\*(?![*\w])")


def _inline(text: str) -> str:
    # protect code spans first so ** inside code stays literal
    spans: list[str] = []

    def keep(m: re.Match) -> str:
        spans.append(f"<code>{m.group(1)}</code>")
        return f"\x00{len(spans) - 1}\x00"

    out = _CODE.sub(keep, html.escape(text, quote=False))
    out = _BOLD.sub(r"<strong>\1</strong>", out)
    out = _EM.sub(r"<em>\1</em>", out)
    return re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m.group(1))], out)


def to_html(text: str) -> str:
    """Render lesson narrative (markdown-light) to HTML."""
    blocks: list[str] = []
    para: list[str] = []
    items: list[str] = []
    code: list[str] | None = None

    def flush() -> None:
        if para:
            blocks.append("<p>" + _inline(" ".join(para)) + "</p>")
            para.clear()
        if items:
            blocks.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
            items.clear()

    for raw in text.splitlines():
        line = raw.rstrip()
        if code is not None:
            if line.strip().startswith("```"):
                blocks.append("<pre><code>" + html.escape("\n".join(code), quote=False)
                              + "</code></pre>")
                code = None
            else:
                code.append(raw)
            continue
        if line.strip().startswith("```"):
            flush()
            code = []
        elif not line.strip():
            flush()
        elif line.lstrip().startswith("- "):
            if para:
                flush()
            items.append(line.lstrip()[2:])
        else:
            if items:
                flush()
            para.append(line.strip())
    if code is not None:  # unterminated fence: still show it
        blocks.append("<pre><code>" + html.escape("\n".join(code), quote=False) + "</code></pre>")
    flush()
    return "\n".join(blocks)


def to_text(text: str) -> str:
    """Plain-text rendering for terminals: markers removed, paragraphs kept."""
    out = _BOLD.sub(r"\1", text)
    out = _CODE.sub(r"\1", out)
    return _EM.sub(r"\1", out)

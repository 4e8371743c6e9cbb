"""``study.html``: ``study.md`` as one self-contained page, the sweep's figures embedded.

The Markdown is rendered by markdown-it-py (CommonMark plus tables, raw HTML escaped), so
the page says exactly what ``study.md`` says; each image whose target names one of the
sweep's figures is replaced by that PNG as a ``data:`` URI, and an image naming anything
else is refused. The page shell (inline CSS, a Content-Security-Policy that forbids any
fetch, no script) is the run report's (:mod:`fedpriv.audit.html_page`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from fedpriv.atomic import atomic_write_bytes
from fedpriv.audit.html_page import data_uri, esc, page

__all__ = ["study_html", "write_study_html"]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


def study_html(markdown: str, figures: Sequence[str | Path]) -> str:
    """The page of a study's Markdown; ``figures`` are the PNG files its images name.

    Raises
    ------
    ValueError
        An image of the Markdown names no file of ``figures``.
    """
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(markdown)
    files = {Path(f).name: Path(f) for f in figures}
    nav, title = [], "fedpriv sweep study"
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            text = tokens[i + 1].content
            if token.tag == "h1":
                title = text
            elif token.tag == "h2":
                token.attrSet("id", _slug(text))
                nav.append((_slug(text), text))
        for child in token.children or []:
            if child.type == "image":
                name = Path(str(child.attrGet("src"))).name
                if name not in files:
                    raise ValueError(f"the study shows {name!r}, which is not a sweep figure")
                child.attrSet("src", data_uri(files[name].read_bytes(), "image/png"))
    body = md.renderer.render(tokens, md.options, {})
    header = f'<p class="sub">{esc(title)} — the same text as study.md, figures embedded</p>'
    return page(title, header, nav, body)


def write_study_html(path: Path, markdown: str, figures: Sequence[str | Path]) -> str:
    """Write ``study.html`` atomically; return its path."""
    atomic_write_bytes(path, study_html(markdown, figures).encode())
    return str(path)

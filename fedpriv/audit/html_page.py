"""Building blocks of fedpriv's self-contained HTML pages (run reports, sweep studies).

A page carries its CSS inline and its figures as ``data:`` URIs; its Content-Security-Policy
forbids the browser any fetch (``default-src 'none'``, images from ``data:`` only), so it reads
the same offline, prints, and never calls out. No script.
"""

from __future__ import annotations

import base64
import html
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from fedpriv.jsonio import json_number

__all__ = [
    "CSP",
    "Embeddable",
    "Markup",
    "Section",
    "cell",
    "data_uri",
    "docs_prefix",
    "embed",
    "esc",
    "figure",
    "page",
    "table",
]

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
_CSS = """
:root { --ink: #1a1a1a; --muted: #555; --rule: #d0d0d0; --band: #f3f5f7; --warn: #D55E00; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color: var(--ink); margin: 0 auto; max-width: 1320px; padding: 0 1.2rem 3rem; }
header { border-bottom: 2px solid var(--ink); padding: 1.2rem 0 .6rem; }
h1 { font-size: 1.55rem; margin: 0 0 .3rem; } h2 { font-size: 1.25rem; margin: 2rem 0 .6rem;
  border-bottom: 1px solid var(--rule); padding-bottom: .2rem; } h3 { font-size: 1.05rem; }
nav { font-size: .9rem; margin: .6rem 0; } nav a { margin-right: .9rem; }
a { color: #0b5cad; }
.sub, .note, figcaption { color: var(--muted); font-size: .9rem; }
.badge { display: inline-block; padding: .05rem .5rem; border: 1px solid currentColor;
  border-radius: .6rem; font-size: .85rem; font-weight: 600; }
.badge.bad { color: var(--warn); } .badge.good { color: #00704f; }
.box { background: var(--band); border-left: 4px solid #0072B2; padding: .6rem 1rem;
  margin: 1rem 0; } .box dt { font-weight: 600; margin-top: .5rem; } .box dd { margin: 0; }
.warn { border-left-color: var(--warn); }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: .78rem; margin: .4rem 0 1rem; }
th, td { border-bottom: 1px solid var(--rule); padding: .18rem .35rem; text-align: left;
  vertical-align: top; } th { background: var(--band); position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: .4rem 0; }
dl.kv dt { color: var(--muted); } dl.kv dd { margin: 0; }
ul.config { columns: 3 18rem; font-size: .82rem; padding-left: 1rem; }
figure { margin: 1rem 0; } main img { max-width: 100%; height: auto; }
main p > img { max-width: min(100%, 900px); }
.gallery { display: flex; flex-wrap: wrap; gap: 1rem; }
.gallery figure { margin: 0; border: 1px solid var(--rule); padding: .4rem; max-width: 100%;
  width: min-content; min-width: 18rem; }
.gallery img { image-rendering: pixelated; display: block; }
code { font-size: .9em; } .nw { white-space: nowrap; }
@media print {
  body { max-width: none; font-size: 11px; } nav { display: none; }
  h2 { break-after: avoid; } figure, tr, .box { break-inside: avoid; }
  th { position: static; } a { color: inherit; } .scroll { overflow: visible; }
  table { font-size: 8px; }
}
"""


#: A page section: its anchor, its title and its HTML.
Section = tuple[str, str, str]


class Markup(str):
    """Text that is HTML already: :func:`table` inserts it as is."""


def esc(text: Any) -> str:
    """``text`` as HTML-escaped text (quotes too)."""
    return html.escape(str(text), quote=True)


def cell(value: Any, digits: int = 4) -> str:
    """A value as table text: None → "–", infinities → "∞", floats to ``digits``
    significant figures, booleans as yes/no; escaped (:class:`Markup` is HTML already)."""
    if value is None:
        return "–"
    if isinstance(value, Markup):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) or value in ("inf", "-inf", "nan"):
        x = json_number(value)
        if math.isnan(x):
            return "–"
        return ("∞" if x > 0 else "−∞") if math.isinf(x) else f"{x:.{digits}g}"
    return esc(value)


def data_uri(data: bytes, mime: str) -> str:
    """``data:<mime>;base64,...``."""
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def figure(uri: str, alt: str, caption: str = "", anchor: str = "") -> str:
    """An ``<img>`` of an embedded image with an optional caption."""
    ident = f' id="{esc(anchor)}"' if anchor else ""
    cap = f"<figcaption>{caption}</figcaption>" if caption else ""
    return f'<figure{ident}><img src="{uri}" alt="{esc(alt)}">{cap}</figure>'


class Embeddable(Protocol):
    """A figure to embed: SVG bytes (None: only its note is shown), alt text, a note."""

    @property
    def name(self) -> str: ...
    @property
    def alt(self) -> str: ...
    @property
    def svg(self) -> bytes | None: ...
    @property
    def note(self) -> str: ...


def embed(fig: Embeddable | None) -> str:
    """An SVG figure with its note as caption; the note alone when there is no SVG."""
    if fig is None:
        return ""
    if fig.svg is None:
        return f'<p class="note" id="{esc(fig.name)}">{esc(fig.note)}</p>'
    return figure(data_uri(fig.svg, "image/svg+xml"), fig.alt, esc(fig.note), fig.name)


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        or value in ("inf", "-inf", "nan")
    )


def table(headers: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]]) -> str:
    """An HTML table; ``headers`` are ``(label, tooltip)`` pairs; numeric cells right-aligned.
    Cell values are formatted by :func:`cell` unless they are :class:`Markup`."""
    head = "".join(
        f'<th title="{esc(tip)}">{esc(label)}</th>' if tip else f"<th>{esc(label)}</th>"
        for label, tip in headers
    )
    body = []
    for row in rows:
        cells = []
        for value in row:
            if isinstance(value, Markup):
                cells.append(f"<td>{value}</td>")
            elif _is_number(value):
                cells.append(f'<td class="num">{cell(value)}</td>')
            else:
                cells.append(f"<td>{cell(value)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def docs_prefix(out_dir: Path | str) -> str:
    """The path from ``out_dir`` to the repository's ``docs/`` when this fedpriv runs from a
    checkout holding it (links then open offline), else ``docs`` (the name in the repository)."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    if not docs.is_dir():
        return "docs"
    return Path(os.path.relpath(docs, Path(out_dir).resolve())).as_posix()


def page(title: str, header: str, nav: Sequence[tuple[str, str]], body: str) -> str:
    """A whole HTML document: ``header`` (HTML) above a navigation bar of ``(anchor, label)``
    links and ``body`` (HTML)."""
    links = "".join(f'<a href="#{esc(anchor)}">{esc(label)}</a>' for anchor, label in nav)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>"
        f"<header>{header}</header><nav>{links}</nav><main>{body}</main></body></html>\n"
    )

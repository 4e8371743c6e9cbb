"""report.html from synthetic report objects: structure, self-containment, optional fields,
bands for many clients. Expected values come from the synthetic data (tests/report_support.py),
parsed back out of the page with the standard library's HTML parser."""

from __future__ import annotations

import base64
import math
import re
from html.parser import HTMLParser

import matplotlib
import numpy as np
import pytest
from report_support import BUDGET, STATUSES, synthetic_report

from fedpriv.audit.html_report import render_report_html
from fedpriv.audit.plot_style import line_style
from fedpriv.audit.round_figures import MAX_LINES, per_client_figure
from fedpriv.audit.series import band, client_series, status_counts, worst_first

SECTIONS = ("run", "meaning", "utility", "privacy", "clients", "verification", "attacks",
            "failures")  # fmt: skip
OPTIONAL_WORDS = ("ε lower", "PAC", "ε budget", "exhausted", "Verification")


class _Tables(HTMLParser):
    """Cell texts of every table, by the id of the section holding it."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[list[str]]]] = {}
        self.section = ""
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            self.section = dict(attrs)["id"]
        elif tag == "table":
            self.tables.setdefault(self.section, []).append([])
        elif tag == "tr":
            self.tables[self.section][-1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.tables[self.section][-1][-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def tables(page: str) -> dict[str, list[list[list[str]]]]:
    parser = _Tables()
    parser.feed(page)
    return parser.tables


def svgs(page: str) -> dict[str, str]:
    """Embedded SVG figures by anchor, decoded."""
    found = re.findall(r'<figure id="([^"]+)"><img src="data:image/svg\+xml;base64,([^"]+)"', page)
    return {name: base64.b64decode(data).decode() for name, data in found}


def svg_text(svg: str) -> list[str]:
    """Text drawn in a matplotlib SVG (its glyphs are paths; the text is kept in comments)."""
    return re.findall(r"<!-- (.*?) -->", svg)


@pytest.fixture(scope="module")
def full():
    report, truth = synthetic_report(12, 5, optional=True, seed=1)
    return render_report_html(report), report, truth


@pytest.fixture(scope="module")
def plain():
    report, truth = synthetic_report(12, 5, optional=False, seed=1)
    return render_report_html(report), report, truth


@pytest.fixture(scope="module")
def big():
    report, truth = synthetic_report(1000, 8, optional=True, seed=2)
    return render_report_html(report), report, truth


def test_every_section_is_present_and_linked(full):
    page = full[0]
    for anchor in SECTIONS:
        assert f'<section id="{anchor}">' in page
        assert f'<a href="#{anchor}">' in page


@pytest.mark.parametrize("name", ["full", "plain", "big"])
def test_page_is_self_contained(name, request):
    page = request.getfixturevalue(name)[0]
    assert "<script" not in page.lower() and "url(" not in page and "@import" not in page
    assert "default-src 'none'; img-src data:" in page  # the browser may fetch nothing
    for attr, value in re.findall(r'\b(src|href)="([^"]*)"', page):
        if attr == "src":
            assert value.startswith(("data:image/svg+xml;base64,", "data:image/png;base64,"))
        else:
            assert value.startswith("#") or re.fullmatch(r"docs/[\w.-]+\.md", value), value


def test_absent_optional_fields_leave_no_trace(plain):
    page = plain[0]
    assert '<section id="verification">' not in page
    for word in OPTIONAL_WORDS:
        assert word not in page, word
    assert [row[0] for row in tables(page)["failures"][0][1:]] == ["failure"]  # no rejections
    figures = svgs(page)
    assert "epsilon-bounds" not in figures and "verification" not in figures
    assert not any(t.startswith("budget") for t in svg_text(figures["epsilon"]))


def test_optional_fields_are_rendered(full):
    page, report, truth = full
    found = tables(page)
    header, *rows = found["clients"][0]
    col = {name: header.index(name)
           for name in ("client", "ε lower", "verification", "exhausted", "guarantee")}  # fmt: skip
    by_id = {int(r[col["client"]]): r for r in rows}
    for c in report["clients"]:
        row, cid = by_id[c["client_id"]], c["client_id"]
        over = np.flatnonzero(truth.epsilon[cid] > BUDGET)
        assert row[col["exhausted"]] == (str(over[0] + 1) if over.size else "–")
        assert row[col["verification"]].startswith(str(truth.statuses[cid, -1]))
        assert float(row[col["ε lower"]]) == pytest.approx(truth.epsilon[cid, -1] / 4, rel=1e-3)
        assert row[col["guarantee"]] == ("declared", "verified", "none")[cid % 3]
    # the same for every client: said once, not in a column
    for shared in ("ε budget <b>6</b>", "method <b>canary</b>", "confidence <b>0.95</b>",
                   "PAC accuracy <b>0.9</b>", "mechanism <b>gaussian</b>"):  # fmt: skip
        assert shared in page
    assert not {"ε budget", "method", "mechanism"} & set(header)
    listed = found["verification"][0][1:]
    flagged = truth.statuses[:, -1] != "consistent"
    assert sorted(int(r[0]) for r in listed) == list(np.flatnonzero(flagged))
    assert [r[2] for r in listed] == sorted((r[2] for r in listed), key=STATUSES.index)
    assert any("declared σ inconsistent" in cell for r in found["failures"][0] for cell in r)
    assert "budget 6" in svg_text(svgs(page)["epsilon"])
    assert "lower (audit)" in svg_text(svgs(page)["epsilon-bounds"])


def test_clients_are_listed_worst_first(full):
    page, _, truth = full
    listed = [int(r[0]) for r in tables(page)["clients"][0][1:]]
    assert listed == list(np.argsort(-truth.epsilon[:, -1], kind="stable"))


def test_few_clients_get_one_labelled_line_each(full):
    page, report, _ = full
    labels = svg_text(svgs(page)["epsilon"])
    assert all(f"client {c['client_id']} (gaussian)" in labels for c in report["clients"])
    assert "median" not in labels


def test_many_clients_are_drawn_as_a_band_with_the_worst_named(big):
    page, _, truth = big
    worst = int(np.argmax(truth.epsilon[:, -1]))
    svg = svgs(page)["epsilon"]
    labels = svg_text(svg)
    assert {"median", "quartiles", f"worst: client {worst}"} <= set(labels)
    assert "range of 1000 clients" in labels
    assert len(re.findall(r'id="line2d_', svg)) < 60  # axes ticks and 2 lines, not 1000
    bounds = svgs(page)["epsilon-bounds"]
    assert "gap" in svg_text(bounds) and len(bounds) < 100_000  # traced, not 2,000 markers
    assert len(page.encode()) < 5 * 2**20


def test_band_is_the_per_round_quartiles(big):
    _, report, truth = big
    b = band(client_series(report["clients"], "epsilon", cumulative=True))
    expected = np.percentile(truth.epsilon, [0, 25, 50, 75, 100], axis=0)
    np.testing.assert_allclose([b.low, b.q25, b.median, b.q75, b.high], expected, rtol=1e-12)
    assert b.worst_id == int(np.argmax(truth.epsilon[:, -1]))
    np.testing.assert_array_equal(b.counts, np.full(8, 1000))


def test_cumulative_series_carry_a_skipped_round():
    clients = [{"client_id": 0, "per_round": [{"round": 1, "epsilon": 1.0},
                                              {"round": 3, "epsilon": 2.0}]},
               {"client_id": 1, "per_round": [{"round": 2, "epsilon": "inf"}]}]  # fmt: skip
    cumulative = client_series(clients, "epsilon", cumulative=True)
    np.testing.assert_array_equal(cumulative.rounds, [1, 2, 3])
    np.testing.assert_array_equal(cumulative.values[0], [1.0, 1.0, 2.0])
    assert np.isnan(client_series(clients, "epsilon").values[0, 1])
    assert cumulative.unbounded() == [1] and cumulative.bounded().client_ids == [0]


def test_infinite_clients_are_named_not_drawn():
    report, _ = synthetic_report(3, 2, optional=False)
    for entry in report["clients"][2]["per_round"]:
        entry["epsilon"] = "inf"
    fig = per_client_figure(report["clients"], "epsilon", "ε", "t", cumulative=True)
    assert fig.note == "∞ (not drawn) for client 2."
    assert {"client 0 (gaussian)", "client 1 (gaussian)"} <= set(svg_text(fig.svg.decode()))
    assert "client 2 (gaussian)" not in svg_text(fig.svg.decode())
    for c in report["clients"]:
        for entry in c["per_round"]:
            entry["epsilon"] = math.inf
    only_note = per_client_figure(report["clients"], "epsilon", "ε", "t", cumulative=True)
    assert only_note.svg is None and only_note.note == "t: ∞ (not drawn) for all 3 clients."


def test_verification_counts_per_round(full):
    _, report, truth = full
    rounds, counts = status_counts(report["clients"])
    np.testing.assert_array_equal(rounds, np.arange(1, 6))
    for status in STATUSES:
        np.testing.assert_array_equal(counts[status], (truth.statuses == status).sum(axis=0))


def test_worst_first_puts_infinite_first_and_unmeasured_last():
    clients = [
        {"client_id": 0, "epsilon": 1.0},
        {"client_id": 1, "epsilon": None},
        {"client_id": 2, "epsilon": "inf"},
        {"client_id": 3, "epsilon": 5.0},
    ]
    assert [c["client_id"] for c in worst_first(clients)] == [2, 3, 0, 1]


def test_lines_differ_in_grey_too():
    styles = [line_style(i) for i in range(MAX_LINES)]
    assert len({(s["color"], s["linestyle"], s["marker"]) for s in styles}) == MAX_LINES
    assert len({(s["linestyle"], s["marker"]) for s in styles}) == MAX_LINES  # without colour


def test_rendering_leaves_matplotlib_settings_alone(plain):
    before = dict(matplotlib.rcParams)
    render_report_html(plain[1])
    assert dict(matplotlib.rcParams) == before

"""What the page draws beside the values: mechanism-named legends, identical clients as one
line with their count, no entry for a client without data, the attacks' prior line, and bounds
beyond their quantity's range marked vacuous (fedpriv.audit.vacuity)."""

from __future__ import annotations

import math

from report_support import synthetic_report
from test_report_html import svg_text, svgs, tables

from fedpriv.audit.html_report import render_report_html
from fedpriv.audit.round_figures import bayes_figure, per_client_figure
from fedpriv.audit.vacuity import ABP_MAX, log_secret_space, vacuous_bounds

CONFIG = {"data": {"name": "digits"}, "audit": {"threat_model": "record"},
          "train": {"batch_size": 16}}


def _labels(fig) -> list[str]:
    return svg_text(fig.svg.decode())


def test_identical_clients_are_one_line_with_their_count_and_empty_clients_have_no_entry():
    report, _ = synthetic_report(4, 3, optional=False)
    clients = report["clients"]
    for c in clients[1:3]:  # clients 1 and 2: client 0's values
        for mine, first in zip(c["per_round"], clients[0]["per_round"], strict=True):
            mine["epsilon"] = first["epsilon"]
    for entry in clients[3]["per_round"]:
        entry["epsilon"] = None
    labels = _labels(per_client_figure(clients, "epsilon", "ε", "t", cumulative=True))
    assert "clients 0, 1, 2 (gaussian), 3 identical" in labels
    assert not any(label.startswith("client 3") for label in labels)


def test_the_attack_figure_draws_the_prior_line():
    report, _ = synthetic_report(3, 2, optional=False)
    for c in report["clients"]:
        for entry in c["per_round"]:
            entry["prior_ssim"] = 0.6
    page = render_report_html(report)
    assert "label prior (mean over clients)" in svg_text(svgs(page)["ssim"])


def test_abp_bounds_above_sqrt_log_2_are_vacuous_not_drawn():
    report, _ = synthetic_report(2, 2, optional=False)
    for c in report["clients"]:
        c["abp_bound"] = 1.5e18
        for entry in c["per_round"]:
            entry["abp_bound"], entry["abp_estimate"] = 1.5e18, 0.2
    fig = bayes_figure(report["clients"])
    assert "vacuous (above √log 2 ≈ 0.833" in fig.note and "clients 0, 1" in fig.note
    assert "√log 2: largest ABP value" in _labels(fig)
    reason = vacuous_bounds(report["clients"][0], CONFIG)["abp_bound"]
    assert "at most √log 2" in reason and "1.5e+18" in reason
    assert "abp_bound" not in vacuous_bounds({"abp_bound": 0.5}, CONFIG)
    unbounded = vacuous_bounds({"abp_bound": "inf", "log_bayes_capacity": math.inf}, CONFIG)
    assert unbounded == {}  # ∞ is no bound at all, which the page says apart
    assert math.isclose(ABP_MAX**2, math.log(2))


def test_log_capacity_beyond_the_secret_space_is_vacuous_on_the_page():
    space, what = log_secret_space(CONFIG)
    assert math.isclose(space, 256 * math.log(256) + math.log(10))  # 16×16 8-bit and a label
    assert "one record" in what
    batch = log_secret_space({**CONFIG, "audit": {"threat_model": "batch"}})[0]
    assert math.isclose(batch, 16 * space)
    assert log_secret_space({"data": {"name": "unknown"}}) is None
    report, _ = synthetic_report(2, 2, optional=False)
    report["config"] = CONFIG
    report["clients"][0]["log_bayes_capacity"] = 23_360.0
    for c in report["clients"]:
        c["vacuous"] = vacuous_bounds(c, CONFIG)
    assert "log_bayes_capacity" in report["clients"][0]["vacuous"]
    assert "log_bayes_capacity" not in report["clients"][1]["vacuous"]
    page = render_report_html(report)
    cells = [cell for row in tables(page)["clients"][0] for cell in row]
    assert any(cell.startswith("vacuous") for cell in cells)
    ceiling = [t for t in svg_text(svgs(page)["log_capacity_cumulative"])
               if t.startswith("log |secret space|")]
    assert ceiling == ["log |secret space| ≤ 1,422 nats (above: vacuous)"]

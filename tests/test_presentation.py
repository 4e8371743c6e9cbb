"""What the terminal and report.html show follows what was found (issue 41, item 4): a failure
that repeats every round is logged once and summarised in one line with its rounds; the
verification figure draws green only for verified client-rounds; the identification game's
trials have their own column; a pooled canary bound over its threshold is marked; a legend
wider than the figure's margin is kept whole; one final chain head; attacked clients that were
not scored, or not attacked as scheduled, are said so, and a reconstruction with no stored true
batch is drawn alone."""

from __future__ import annotations

import logging
import re
from types import SimpleNamespace

import numpy as np

from fedpriv.audit.check_figures import NOT_VERIFIED, shown_status, verification_figure
from fedpriv.audit.gallery import AttackView, attack_views
from fedpriv.audit.html_attacks import attacks_section
from fedpriv.audit.plot_style import new_figure, svg_bytes
from fedpriv.audit.summary import chain_lines, failure_lines
from fedpriv.failures import FirstSeen, collapse_failures, log_first, round_ranges
from workflows.cli.audit import _canary_lines


def _failure(rnd: int, client: int, norm: float, kind: str = "inconsistent") -> dict:
    return {"round": rnd, "client_id": client, "node_id": str(100 + client), "kind": kind,
            "message": f"gaussian-norm: ‖u‖₂ = {norm} is too small (p = {norm / 1e4:.3g})"}


def test_a_failure_repeated_every_round_is_one_line_with_its_rounds():
    failures = [_failure(r, 4, 185.0 + r) for r in (1, 2, 3, 5)]
    failures += [_failure(2, 9, 1.0, kind="malformed"), _failure(1, 5, 14.0)]
    lines = failure_lines(failures)
    assert len(lines) == 3, lines
    assert lines[0].startswith("client 4 (node 104) inconsistent in rounds 1–3, 5 (4×): ")
    assert "‖u‖₂ = 186.0" in lines[0]  # the first round's message
    assert lines[1].startswith("client 9 (node 109) malformed in round 2: ")
    assert [f["rounds"] for f in collapse_failures(failures)] == [[1, 2, 3, 5], [2], [1]]
    assert round_ranges([7, 1, 2, 2, 4, 5]) == "1–2, 4–5, 7"


def test_a_repeated_warning_is_logged_once(caplog):
    log, seen = logging.getLogger("fedpriv.test_presentation"), FirstSeen()
    with caplog.at_level(logging.DEBUG, logger=log.name):
        for rnd in (1, 2, 3):
            message = f"aggregation weight {60 + rnd} for num-examples = 1e9"
            log_first(log, seen, 2, "weight", message, "round %d client 2: %s", rnd, message)
        log_first(log, seen, 3, "weight", "num-examples = 1e9", "round 1 client 3")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2 and warned[0].startswith("round 1 client 2: ")
    assert "repeats" in warned[0]
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 2


def _entry(rnd: int, status: str, guarantee: str) -> dict:
    return {"round": rnd, "guarantee": guarantee, "verification": {"status": status}}


def test_green_only_where_verified():
    clients = [
        {"client_id": 0, "per_round": [_entry(1, "consistent", "verified")]},
        {"client_id": 1, "per_round": [_entry(1, "consistent", "declared")]},
        {"client_id": 2, "per_round": [_entry(1, "consistent", "unbounded")]},
        {"client_id": 3, "per_round": [_entry(1, "inconsistent", "unbounded")]},
    ]
    shown = [shown_status(c["per_round"][0]) for c in clients]
    assert shown == ["consistent", NOT_VERIFIED, NOT_VERIFIED, "inconsistent"]
    svg = verification_figure(clients).svg.decode()
    drawn = re.findall(r"<!-- (.*?) -->", svg)
    assert "consistent, verified" in drawn and NOT_VERIFIED in drawn
    assert "#009e73" in svg.lower() and "#56b4e9" in svg.lower()
    only_declared = verification_figure(clients[1:]).svg.decode().lower()
    assert "#009e73" not in only_declared  # no green bar without a verified client-round


def test_game_trials_have_their_own_column():
    rows = [
        {"attack_id": 1, "round": 1, "client_id": 0, "attack": "game", "restarts": 1000,
         "tensor_id": None},
        {"attack_id": 2, "round": 1, "client_id": 0, "attack": "dlg", "restarts": 3,
         "tensor_id": None, "ssim": 0.2},
    ]
    no_tallies = SimpleNamespace(query=lambda sql, *args: [])
    views = {v.attack: v for v in attack_views(no_tallies, rows, limit=0)}
    assert views["game"].scores["trials"] == 1000 and views["game"].scores["restarts"] is None
    assert views["dlg"].scores["restarts"] == 3 and views["dlg"].scores["trials"] is None
    html = attacks_section([], list(views.values()))[2]
    headers = re.findall(r"<th[^>]*>(.*?)</th>", html)
    assert "trials" in headers and headers.index("trials") == headers.index("restarts") + 1


def test_unscored_attacks_are_said_to_be_unscored_not_least_leaking():
    views = [AttackView(1, 0, "strongest", {"ssim": None}, stored=True),
             AttackView(6, 1, "strongest", {"ssim": None}, stored=True),
             AttackView(1, 0, "game", {"ssim": None}, stored=False)]
    html = attacks_section([], views)[2]
    assert "2 attacked client-round(s) are unscored" in html
    assert "most leaking of" not in html  # none of them is ranked as leaking least
    scored = [AttackView(1, 2, "iga", {"ssim": 0.4}, stored=True)]
    assert "unscored" not in attacks_section([], scored)[2]


def test_the_summary_says_what_unscored_means_and_who_was_not_attacked():
    from fedpriv.audit.summary import UNSCORED_NOTE, attack_lines

    clients = [{"client_id": 0, "attack": {"ssim": None}}, {"client_id": 1, "attack": None}]
    lines = attack_lines({"clients": clients, "completed_rounds": [1, 2],
                          "attacks_skipped": [[], [1, 3]]})
    assert lines[0] == UNSCORED_NOTE and lines[1].endswith("round 2: client(s) 1, 3")
    assert attack_lines({"clients": clients[1:], "completed_rounds": [1],
                         "attacks_skipped": [[]]}) == []


def test_a_reconstruction_without_a_stored_true_batch_is_drawn_alone():
    from fedpriv.audit.gallery import load_pairing, strip_png
    from fedpriv.audit.pairing import NO_TRUTH

    recon = np.random.default_rng(0).random((3, 1, 16, 16))

    def no_truth(rnd, client_id):
        raise KeyError(client_id)

    store = SimpleNamespace(load_reconstruction=lambda attack_id: {"images": recon},
                            load_ground_truth=no_truth)
    pairing = load_pairing(store, {"attack_id": 1, "round": 1, "client_id": 0, "mse": None})
    assert pairing.status == NO_TRUTH and not pairing.paired
    assert pairing.originals.shape == (0, 16, 16) and pairing.reconstructions.shape == (3, 16, 16)
    assert strip_png(pairing).startswith(b"\x89PNG")
    view = AttackView(1, 0, "strongest", {"ssim": None}, png=b"png", pairing=NO_TRUTH,
                      images=3, stored=True)
    assert "top row empty" in attacks_section([], [view])[2]


def test_clients_a_spent_round_budget_left_out_are_named():
    views = [AttackView(2, 0, "iga", {"ssim": 0.4}, stored=True)]
    html = attacks_section([], views, [1, 2, 3], [[], [1, 2], []])[2]
    assert html.count("attack budget") == 1 and "Round 2: client(s) 1, 2 scheduled" in html
    assert "attack budget" not in attacks_section([], views, [1, 2, 3], [[], [], []])[2]


def test_a_pooled_canary_bound_over_its_threshold_is_marked():
    rows = [{"round": 2, "client_id": 4, "epsilon_lower": 3.1, "epsilon_formal": 4.01,
             "status": "consistent", "pooled": 5.27, "pooled_formal": 4.01},
            {"round": 2, "client_id": 0, "epsilon_lower": 1.0, "epsilon_formal": 4.01,
             "status": "consistent", "pooled": 2.0, "pooled_formal": 4.01}]
    lines = _canary_lines(rows)
    assert "5.270!" in lines[1] and "pooled 5.27 > 4.01" in lines[1]
    assert "!" not in lines[2] and lines[-1].startswith("! the pooled lower bound exceeds")
    assert not any(line.startswith("!") for line in _canary_lines(rows[1:]))


def test_a_legend_wider_than_the_margin_is_kept_whole():
    fig, (ax,) = new_figure()
    ax.plot([1, 2], [1, 2], label="a legend label far wider than the figure's right margin " * 2)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    width = float(re.search(r'<svg[^>]* width="([\d.]+)pt"', svg_bytes(fig).decode()).group(1))
    assert width > 9 * 72  # grown past the 9-inch figure to hold the legend


def test_one_chain_head_line_for_the_run():
    chain = {"rounds": {"1": "a" * 64, "2": "b" * 64, "3": "c" * 64}, "head": "d" * 64,
             "entries": 122, "signature": None}
    assert chain_lines(chain) == [f"chain head: {'d' * 64} (122 entries, rounds 1–3)"]

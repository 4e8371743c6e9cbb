"""The run report's attack section: best SSIM per client over rounds, true images beside
their reconstructions (paired as the scorer paired them), and every attack's scores."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from fedpriv.audit.figures import MAX_COLUMNS
from fedpriv.audit.gallery import SCORE_KEYS, AttackView
from fedpriv.audit.html_page import Section, cell, data_uri, embed, esc, figure, table
from fedpriv.audit.pairing import NO_TRUTH, PAIRED_AS_STORED, REMATCHED
from fedpriv.audit.round_figures import per_client_figure
from fedpriv.audit.series import field_value
from fedpriv.audit.summary import SKIPPED_WHY, UNSCORED_WHY, skipped_rounds
from fedpriv.leakage.game import GAME_ATTACK

__all__ = ["MAX_ATTACK_ROWS", "attacks_section"]

#: Attack rows listed in the score table (the rest stay in the audit store).
MAX_ATTACK_ROWS = 500
Row = Mapping[str, Any]
_PAIRED = {
    PAIRED_AS_STORED: "paired as scored (stored order)",
    REMATCHED: "paired as scored (re-matched)",
    NO_TRUTH: "reconstructions only: no true batch stored (top row empty)",
}
_HEADERS = [
    ("round", ""), ("client", ""), ("attack", ""), ("iterations", ""), ("restarts", ""),
    ("trials", "identification game: games played, each with fresh noise"),
    ("MSE", ""), ("PSNR dB", "mean of per-image PSNRs"), ("SSIM", ""),
    ("best MSE", "best restart, judged with the truth (an oracle)"), ("best PSNR", ""),
    ("best SSIM", ""), ("label acc.", "labels recovered"),
    ("rel. leakage", "(SSIM − label prior SSIM) / label prior SSIM"),
    ("support SSIM", "SSIM on the digit's support only (pixels where the true image differs "
                     "from its background): an empty background no longer inflates it"),
    ("label prior SSIM", "the label prior: the public class means of the labels the update "
                         "gives away"),
    ("gain SSIM", "SSIM − label prior SSIM: leakage beyond the labels; every true image "
                  "counts, unmatched ones at the label prior"),
    ("gain PSNR", "PSNR − label prior PSNR, dB"),
    ("no-update prior SSIM", "the no-update prior: the public mean image, what the attacker "
                             "has before any update"),
    ("no-update gain SSIM", "SSIM − no-update prior SSIM: the update's total leakage"),
    ("log(M·P̂)", "within-class identification: each true image among M − 1 public look-alikes "
                 "of its class; log of the attacker's rate over chance 1/M"),
    ("lower", "lower end of the 95% Clopper–Pearson interval on log(M·P̂)"),
    ("bound", "min(log C, log M): the round's Bayes-capacity bound (record level); an honest "
              "client's lower end lies under it"),
    ("images", "how the drawn images were paired"),
]  # fmt: skip
_PAIRING_NOTE = (
    '<p class="note">Each column shows a true image (top) above the reconstruction scored '
    "against it (bottom). The store keeps the true batch in record-id order; the report "
    "pairs columns as the scorer did — keeping the stored order, or re-matching by minimum "
    "MSE — and accepts a pairing only if it reproduces the stored MSE. Where the server holds "
    "no true batch the top row is empty.</p>"
)


def _caption(v: AttackView) -> str:
    s = v.scores
    paired = _PAIRED.get(v.pairing or "")
    pairing = (
        esc(paired) if paired else (f'<span class="badge bad">not paired</span> {esc(v.note)}')
    )
    return (
        f"round {v.round} · client {v.client_id} · {esc(v.attack)} — MSE "
        f"{cell(s.get('mse'), 3)}, PSNR {cell(s.get('psnr'), 3)} dB, SSIM "
        f"{cell(s.get('ssim'), 3)} (label prior {cell(s.get('prior_ssim'), 3)}, gain "
        f"{cell(s.get('gain_ssim'), 3)}; no-update prior {cell(s.get('no_update_prior_ssim'), 3)}"
        f", gain {cell(s.get('no_update_gain_ssim'), 3)}), support SSIM "
        f"{cell(s.get('support_ssim'), 3)}<br>{min(v.images, MAX_COLUMNS)} of {v.images} "
        "image(s); "
        f"{pairing}"
    )


def _gallery(views: Sequence[AttackView]) -> str:
    drawn = sorted((v for v in views if v.png is not None), key=lambda v: (v.round, v.client_id))
    items = [
        figure(data_uri(v.png, "image/png"),
               f"client {v.client_id}, round {v.round}: true and reconstructed images",
               _caption(v))
        for v in drawn if v.png is not None
    ]  # fmt: skip
    return _PAIRING_NOTE + f'<div class="gallery">{"".join(items)}</div>' if items else ""


def _leak_order(view: AttackView) -> tuple[bool, float]:
    ssim = field_value(view.scores, "ssim")
    return math.isnan(ssim), -ssim


def _scores(views: Sequence[AttackView]) -> str:
    listed = sorted(views, key=_leak_order)
    rows = [
        [v.round, v.client_id, v.attack, *(v.scores.get(k) for k in SCORE_KEYS),
         v.pairing or "–"]
        for v in listed[:MAX_ATTACK_ROWS]
    ]  # fmt: skip
    more = (
        f'<p class="note">{MAX_ATTACK_ROWS} of {len(listed)} attacks listed (highest SSIM '
        "first); all are in the audit store.</p>"
        if len(listed) > MAX_ATTACK_ROWS
        else ""
    )
    return "<h3>Scores, most leaking first</h3>" + table(_HEADERS, rows) + more


def attacks_section(clients: Sequence[Row], views: Sequence[AttackView],
                    rounds: Sequence[int] = (), skipped: Sequence[Sequence[int]] = ()) -> Section:
    """Attacks: SSIM over rounds, the drawn reconstructions, the score table; ``skipped``
    (report.json's ``attacks_skipped``, one list per completed round in ``rounds``) names the
    clients a spent round budget left unattacked."""
    ssim = per_client_figure(
        clients, "ssim", "best attack SSIM",
        "Best attack SSIM per client and round (higher = more leaked)",
        cumulative=False, log=False, unit_range=True,
        reference=("prior_ssim", "label prior (mean over clients)"),
    )  # fmt: skip
    budget = "".join(
        f'<p class="note">Round {r}: client(s) {", ".join(map(str, ids))} scheduled but not '
        f"attacked ({esc(SKIPPED_WHY)}; the run's log says which).</p>"
        for r, ids in skipped_rounds(rounds, skipped))
    if not views and ssim is None:
        return "attacks", "Attacks", "<p>No attacks were run in the completed rounds.</p>" + budget
    unscored = {(v.round, v.client_id) for v in views
                if v.stored and v.attack != GAME_ATTACK and v.scores.get("ssim") is None}
    stored = {(v.round, v.client_id) for v in views if v.stored} - unscored
    drawn = sum(v.png is not None for v in views if (v.round, v.client_id) not in unscored)
    note = (
        f'<p class="note">Images drawn for the {drawn} most leaking of {len(stored)} '
        "scored attacked client-rounds.</p>"
        if drawn < len(stored)
        else ""
    )
    if unscored:
        note += (f'<p class="note">{len(unscored)} attacked client-round(s) are unscored: '
                 f"{esc(UNSCORED_WHY)}. Their reconstructions are drawn below, where drawn, "
                 "without scores; unscored is not evidence of safety.</p>")
    return "attacks", "Attacks", embed(ssim) + budget + note + _gallery(views) + _scores(views)

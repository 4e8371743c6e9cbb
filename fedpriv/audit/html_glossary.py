"""The run report's "What these numbers mean" box, in plain words, with links to the docs.

Entries for optional fields (an ε lower bound, verification, budgets, PAC figures) appear
only when the report carries them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fedpriv.audit.html_page import esc

__all__ = ["PSNR_CONVENTION", "glossary"]

#: How the stored PSNR is computed (attacks.scoring, privacy-math.md §7).
PSNR_CONVENTION = (
    "PSNR = 10·log₁₀(1/MSE) dB per image, pixels in [0, 1] (scikit-image's "
    "peak_signal_noise_ratio with data_range = 1), then averaged over the batch's matched "
    "images: the mean of per-image PSNRs, not the PSNR of the mean MSE; ∞ for an exact "
    "reconstruction."
)
Row = Mapping[str, Any]


def _link(docs: str, name: str) -> str:
    return f'<a href="{esc(docs)}/{esc(name)}">docs/{esc(name)}</a>'


def _present(clients: Sequence[Row], key: str) -> bool:
    return any(
        c.get(key) is not None or any(e.get(key) is not None for e in c.get("per_round", []))
        for c in clients
    )


def _core(docs: str) -> list[tuple[str, str]]:
    return [
        (
            "ε at δ (per client, cumulative)",
            "An upper bound from the accountant: how much any one training record (added or "
            "removed) can change what the client released, over every noisy release it made so "
            "far (rounds × local steps). Smaller is safer; δ is the small probability the bound "
            "may fail. Sampling amplifies it only at a local size the server verified (the "
            "simulation's partition, [[strategy.nodes]]); where it could not, the client's "
            "releases are accounted at q = 1 (every record in every release, named in its "
            "sampling) and the ε at its claimed size is kept as ε declared. ∞ means no formal "
            "guarantee: no noise (or σ = 0), clipping alone, or "
            "VMF releasing the true norm, or an undeclared client (a stock Flower client that "
            f"sent no report, so nothing bounds what it released). See "
            f"{_link(docs, 'accounting.md')} and {_link(docs, 'protocol.md')}.",
        ),
        (
            "log Bayes capacity (nats)",
            "A bound on reconstruction: no attacker, whatever it knew beforehand, can be more "
            "than e^(log C) times as likely to guess the secret after seeing the updates as "
            "before. Cumulative values add the rounds (an upper bound). Record-level means one "
            "example is unknown; batch-level the whole batch. See "
            f"{_link(docs, 'leakage.md')}.",
        ),
        (
            "MBP and ABP (Bayesian privacy)",
            "How far an attacker's belief about which record was used can move from its prior: "
            "MBP ξ is the largest log-ratio, ABP the Jensen–Shannon distance. Bounds follow "
            "from the mechanism (∞ for Gaussian noise, which has no finite pure bound); "
            "estimates come from repeated attacks against a pool of candidate records.",
        ),
        (
            "Attack scores",
            "MSE is the mean squared pixel error with pixels in [0, 1] (0 = exact copy). "
            f"{PSNR_CONVENTION} SSIM is scikit-image's structural similarity (7×7 window, "
            "data range 1): 1 = identical. Lower MSE, higher PSNR and SSIM mean more leaked. "
            "Reconstructions are paired with the true images by a minimum-MSE assignment before "
            "scoring; best_* is the best restart judged against the truth (an oracle). With "
            "several local steps the attacked update is only a pseudo-gradient.",
        ),
        (
            "Rounds",
            "Only completed rounds count; a round the server did not finish is listed and "
            f"otherwise ignored. See {_link(docs, 'audit-store.md')} and "
            f"{_link(docs, 'privacy-math.md')} for every formula.",
        ),
    ]


def _optional(clients: Sequence[Row], docs: str) -> list[tuple[str, str]]:
    entries = []
    if _present(clients, "epsilon_lower"):
        entries.append(
            (
                "ε lower bound",
                "A statistical lower bound from auditing the updates, at the stated "
                "confidence: the true ε is at least this. It is set against the "
                "accountant's ε it bounds (column “ε bounded”): for canaries, the ε of "
                "one canary — an extra record in every step of its round, so without the "
                "amplification by sampling that the client's own ε enjoys. A lower bound "
                "above it means a declaration or the accounting is wrong; a small one "
                "proves nothing. See "
                f"{_link(docs, 'canaries.md')}.",
            )
        )
    if _present(clients, "epsilon_observed"):
        entries.append(
            (
                "ε observed",
                "An upper confidence bound from what the server saw: every release of the "
                "client accounted at the least noise scale its own updates show (a lower "
                "confidence bound on σ or λ, at the stated confidence over all its rounds), "
                "at the sampling rate and steps the server instructed — at q = 1 where it did "
                "not verify the client's local size, as ε. It is an upper bound given "
                "per-record sensitivity: each example's gradient clipped to the declared C, "
                "the one thing no server can observe; noise reused across rounds is excluded "
                "where the replay and fresh-noise tests ran (report.json → epsilon_bounds). "
                "Infinite where the noise cannot be seen (VMF, an adaptive "
                "optimiser, or a clipped signal C·B large enough to explain the whole update, "
                "as with many local steps). So each client reads [ε lower, ε, ε observed]. "
                f"See {_link(docs, 'trust.md')}.",
            )
        )
    if _present(clients, "verification"):
        entries.append(
            (
                "Verification",
                "The server tests each declared mechanism against the update it sees: "
                "consistent (no evidence against it), inconsistent (rejected at the "
                "stated p-value), unverifiable (nothing the update can show) or undeclared "
                "(the client sent no report to test: a stock Flower client; no guarantee).",
            )
        )
    if _present(clients, "properties"):
        entries.append(
            (
                "Guarantee: verified, noise-verified or declared",
                "verified: in every round, every ε-relevant property of the release (noise "
                "scale, noise law, fresh noise, signal bound, settings, size and sampling, "
                "identity, and per-record sensitivity by replay with the simulation oracle) "
                "passed a test of useful power; noise-verified: all of them but sensitivity, "
                "which could not be replayed (per-record sensitivity assumed); declared: at "
                "least one other was not "
                "tested, or tested with too little power to matter — the ε is then what the "
                "client declared, not what the server could check (the reasons are listed "
                "per client).",
            )
        )
    if _present(clients, "budget"):
        entries.append(
            (
                "Budget",
                "The ε at δ a client may spend, and the first round it declined to "
                "train because that round would have taken its cumulative ε over it; it "
                "is sent no training after that, so its ε never exceeds the budget.",
            )
        )
    if _present(clients, "pac_accuracy") or _present(clients, "pac_robust_confidence"):
        entries.append(
            (
                "PAC accuracy and robust confidence",
                "PAC accuracy α: the radius within which one release of the declared "
                "mechanism lies of the value it perturbs, with probability 1 − β "
                "(audit.pac_beta), read from its noise law, not measured. Robust "
                "confidence: 1 − (1 + 4ξ)β at the cumulative MBP bound ξ (Zhang & Chen, "
                "Thm 4.3); vacuous when that is ≤ 0, always so for Gaussian noise.",
            )
        )
    return entries


def glossary(clients: Sequence[Row], docs: str = "docs") -> str:
    """The box as HTML; ``docs`` is the path (relative to the page) of the docs folder."""
    entries = [*_core(docs), *_optional(clients, docs)]
    items = "".join(f"<dt>{esc(term)}</dt><dd>{text}</dd>" for term, text in entries)
    return f'<div class="box"><dl>{items}</dl></div>'

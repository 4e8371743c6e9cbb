"""What the audit pipeline concludes of one accepted reply: its verdict against the declaration
(:func:`verify_reply`, guarded by :func:`verified_or_inconsistent`), its fresh-noise test's
scale (:func:`fresh_noise_scale`), what its update shows of its noise (:func:`observe_reply`), the
forms the store keeps of them (:func:`verdict_summary`, :func:`verdict_line`, :func:`update_row`)
and what the privacy ledger reads back of a summary (:func:`fold_verdicts`).
Pure functions of the reply, its report and the sketches: :mod:`strategies.pipeline` calls them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedpriv.accounting import Release
from fedpriv.mechanisms.gaussian import GaussianMechanism
from fedpriv.protocol import ClientReport
from fedpriv.verification import ClientUpdate, Verdict, verify_update
from fedpriv.verification.client_round import recover_update, recover_updates, verify_updates
from fedpriv.verification.observed import NoiseObservation
from fedpriv.verification.properties import labelled, property_verdicts

__all__ = [
    "fold_verdicts",
    "fresh_noise_scale",
    "observe_reply",
    "observed_together",
    "recovered_reply",
    "recovered_together",
    "update_row",
    "verdict_line",
    "verdict_summary",
    "verified_or_inconsistent",
    "verified_together",
    "verify_reply",
]


def _untestable(exc: Exception) -> Verdict:
    return Verdict("declaration", "inconsistent", "the update cannot be tested against its "
                   f"declaration: {type(exc).__name__}: {exc}", p_value=0.0)


def recovered_reply(
    report: ClientReport, broadcast: np.ndarray | Sequence[np.ndarray],
    arrays: Sequence[np.ndarray],
) -> ClientUpdate | Verdict:
    """The reply's update recovered once (:func:`fedpriv.verification.client_round.
    recover_update`) for :func:`verified_or_inconsistent` and :func:`observe_reply`; never
    raises: what a hostile declaration makes recovery raise is the verdict why not."""
    theta = broadcast if isinstance(broadcast, np.ndarray) else list(broadcast)
    try:
        return recover_update(report.declaration(), theta, list(arrays))
    except Exception as exc:  # noqa: BLE001 - whatever a hostile declaration makes it raise
        return _untestable(exc)


def recovered_together(
    report: ClientReport, broadcast: np.ndarray, arrays: Sequence[Sequence[np.ndarray]],
) -> list[ClientUpdate | Verdict]:
    """:func:`recovered_reply` of replies whose reports share ``report``'s declaration, each
    with its parameters, recovered together (:func:`fedpriv.verification.client_round.
    recover_updates`): a reply whose recovery raises gets the verdict why, as it would alone,
    the others their updates; where the shared part raises (a hostile declaration), each
    alone."""
    try:
        return recover_updates(report.declaration(), broadcast, arrays, _untestable)
    except Exception:  # noqa: BLE001 - whatever a hostile declaration makes it raise
        return [recovered_reply(report, broadcast, a) for a in arrays]


def verify_reply(
    report: ClientReport, broadcast: np.ndarray | Sequence[np.ndarray],
    arrays: Sequence[np.ndarray], alpha: float,
    recovered: ClientUpdate | Verdict | None = None,
) -> Verdict:
    """The client-round's verdict: its update tested against its report — the generic part
    (:meth:`~fedpriv.protocol.ClientReport.declaration`) and its declared mechanism's own
    checks (``Mechanism.verify``) — by :func:`fedpriv.verification.verify_update`
    (privacy-math.md §9). ``broadcast`` is θ as arrays or already flattened (float64);
    ``recovered`` the reply's :func:`recovered_reply`, when the caller has it."""
    theta = broadcast if isinstance(broadcast, np.ndarray) else list(broadcast)
    return verify_update(report.declaration(), theta, list(arrays), report.mechanism.verify,
                         alpha=alpha, recovered=recovered)


def verified_or_inconsistent(
    report: ClientReport, broadcast: np.ndarray | Sequence[np.ndarray],
    arrays: Sequence[np.ndarray], alpha: float,
    recovered: ClientUpdate | Verdict | None = None,
) -> Verdict:
    """:func:`verify_reply`, where a declaration the tests cannot even evaluate (e.g. ``lr =
    1e-300``: the update over ``lr`` overflows) is ``inconsistent`` with the update — a claim
    the server cannot believe is that client's failure, never an exception out of the server."""
    try:
        return verify_reply(report, broadcast, arrays, alpha, recovered)
    except Exception as exc:  # noqa: BLE001 - whatever a hostile declaration makes them raise
        return _untestable(exc)


def verified_together(
    report: ClientReport, recovered: Sequence[ClientUpdate | Verdict], alpha: float
) -> list[Verdict]:
    """:func:`verified_or_inconsistent` of replies whose reports share ``report``'s declaration
    and mechanism, each with its :func:`recovered_reply`, verified together
    (:func:`fedpriv.verification.client_round.verify_updates`): a reply whose check raises
    gets the verdict why, as it would alone, the others theirs; where the shared part raises
    (a hostile declaration), each alone."""
    try:
        return verify_updates(report.declaration(), recovered, report.mechanism.verify_many,
                              alpha=alpha, failed=_untestable)
    except Exception:  # noqa: BLE001 - whatever a hostile declaration makes them raise
        return [verified_or_inconsistent(report, (), (), alpha, r) for r in recovered]


def observe_reply(
    report: ClientReport, recovered: ClientUpdate | Verdict
) -> NoiseObservation | str:
    """What the client-round's update (its :func:`recovered_reply`) shows of its noise
    (``epsilon_observed``, :mod:`fedpriv.verification.observed`), or why nothing; never
    raises."""
    if isinstance(recovered, Verdict):
        return f"not observable: {recovered.reason}"
    try:
        return report.mechanism.observe(recovered)
    except (ValueError, ArithmeticError) as err:  # InputError is a ValueError
        return f"not observable: {err}"


def observed_together(
    report: ClientReport, recovered: Sequence[ClientUpdate | Verdict]
) -> list[NoiseObservation | str]:
    """:func:`observe_reply` of replies whose reports share ``report``'s declaration and
    mechanism (``Mechanism.observe_many`` of the recovered updates); where that raises, each
    alone, as :func:`observe_reply` says why."""
    try:
        observed = iter(report.mechanism.observe_many(
            [r for r in recovered if not isinstance(r, Verdict)]))
        return [observe_reply(report, r) if isinstance(r, Verdict) else next(observed)
                for r in recovered]
    except (ValueError, ArithmeticError):  # InputError is a ValueError
        return [observe_reply(report, r) for r in recovered]


def verdict_summary(verdict: Verdict, unit: str | None = None) -> dict:
    """What the report keeps of a verdict: status, reason, p-value, level and the failing or
    deciding parts (one line each); with the round's ``unit`` also its per-property verdicts,
    the label they earn (``verified``, ``noise-verified`` or ``declared``:
    :func:`fedpriv.verification.properties.label_of`) and the reasons it is not ``verified``
    (:mod:`fedpriv.verification.properties`)."""
    parts = [{"test": p.test, "status": p.status, "p_value": p.p_value, "reason": p.reason}
             for p in verdict.parts]
    out = {"status": verdict.status, "reason": verdict.reason, "p_value": verdict.p_value,
           "alpha": verdict.alpha, "parts": parts}
    if unit is None:
        return out
    props = property_verdicts(verdict)
    label, reasons = labelled(verdict.status, props, unit)  # verified / noise-verified / declared
    return {**out, "properties": {name: p.to_dict() for name, p in props.items()},
            "label": label, "declared_reasons": reasons}


def fold_verdicts(summary: Mapping[str, Any]) -> dict[str, Any]:
    """What :meth:`fedpriv.ledger.PrivacyLedger.fold` takes of a client-round's verdict, read
    from its :func:`verdict_summary` (live, and as the store keeps it on ``--resume``).

    Parameters
    ----------
    summary
        The round's verdict summary; empty where none was stored.

    Returns
    -------
    dict
        ``verification`` (the verdict's status), ``verified`` (the label is ``verified``; None
        for a summary without per-property verdicts), ``noise_verified`` (the label is
        ``noise-verified``: sensitivity assumed) and ``size_verified``: the round's
        ``size-sampling`` property passed — the server verified the local size its sampling
        rate rests on (the simulation engine's partition or ``[[strategy.nodes]]``); a summary
        that does not say is taken as unverified (accounted at q = 1, never less ε).
    """
    label = summary.get("label")
    size = (summary.get("properties") or {}).get("size-sampling") or {}
    return {"verification": summary.get("status"),
            "verified": None if label is None else label == "verified",
            "noise_verified": label == "noise-verified",  # issue 42
            "size_verified": size.get("status") == "passed"}


def verdict_line(verdict: Verdict) -> str:
    p = "" if verdict.p_value is None else f" (p = {verdict.p_value:.3g})"
    what = ("reply inconsistent with what the server knows" if verdict.p_value == 0.0 and any(
        p.test in ("settings", "size-sampling") and p.status == "inconsistent"
        for p in verdict.parts) else "update inconsistent with its declared mechanism")
    return f"{what}: {verdict.reason}{p}"


def update_row(report: ClientReport, node: int, release: Release) -> dict:
    """The store's ``updates`` row for a report: the report itself, which ``--resume`` and
    offline audit read back, and the columns the run's report pages query, derived from it
    (``release``: one of its declared mechanism's releases)."""
    return {
        "report": report.to_config(), "node_id": node, "num_examples": report.local_examples,
        "local_steps": report.local_steps, "lr": report.lr, "batch_size": report.batch_size,
        "sample_rate": report.sample_rate, "mechanism": report.mechanism.name,
        "mechanism_params": report.mechanism.params(),
        "formal_guarantee": release.formal_guarantee,
    }  # fmt: skip


def fresh_noise_scale(report: ClientReport, flat: np.ndarray,
                      theta_norm: float) -> tuple[float, float] | None:
    """``(noise_std, slack)`` of the ``fresh-noise`` test of a Gaussian release: the last
    step's noise enters Δ with std at least ``η·σC/L`` under SGD (momentum and weight decay
    included), and Δ's float32 round-off is bounded from ``theta_norm`` (the broadcast's ℓ2
    norm) and ‖Δ‖; None for other mechanisms and adaptive optimisers (not testable)."""
    mechanism, d = report.mechanism, report.declaration()
    if not isinstance(mechanism, GaussianMechanism) or d.optimizer.name != "sgd":
        return None
    std = d.lr * mechanism.noise_std / d.batch_size
    unit = 2.0**-24  # float32: the client's round trip and the server's subtraction
    step = float(np.linalg.norm(flat))
    return std, unit * (d.steps + 1) * (2 * theta_norm + (8 * d.steps + 1) * step)

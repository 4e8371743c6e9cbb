"""The ``epsilon_observed`` document of a client's tally (:mod:`fedpriv.ledger`'s module
docstring, privacy-math.md §8): every release of the client's history accounted at the least
noise scale its updates show (:func:`fedpriv.accounting.at_noise.epsilon_at_noise`). Built per
client from its shared history (:class:`~fedpriv.ledger.ClientLedger`) and its own observed
noise (:class:`~fedpriv.verification.observed.ObservedNoise`): apart from the ledger, which
imports it, so as to stay within its size."""

from __future__ import annotations

import math
from typing import Any

from fedpriv.accounting import AccountingResult, ClientAccountant
from fedpriv.accounting.at_noise import epsilon_at_noise, noise_grid
from fedpriv.verification.observed import ASSUMPTION, ObservedNoise

__all__ = ["NOT_OBSERVED", "observed_document"]

NOT_OBSERVED = "a round's update was not observed"
"""``epsilon_observed``'s reason when a fold carried no observation (a caller that does not
measure: no column at all while no round of the client was measured)."""


def observed_document(history: ClientAccountant, broken: bool, acct: AccountingResult,
                      seen: ObservedNoise, delta: float) -> dict[str, Any] | None:
    """The ``epsilon_observed`` document of a client's releases ``history`` (``acct``: its
    result at ``delta``; ``broken``: an update contradicted its declaration or came without
    one) and its observed noise ``seen``; None before any round was observed or said why not."""
    accountant, declared = acct.accountant, acct.epsilon
    if seen.rounds == 0 and seen.reason in (None, NOT_OBSERVED):
        return None
    events = history.events
    declared_noise = events[-1].release.parameter if events else None
    doc: dict[str, Any] = {
        "value": math.inf, "noise_lower": seen.bound if seen.rounds else None,
        "noise_declared": declared_noise, "ratio": None, "noise_accounted": None,
        "parameter": events[-1].release.parameter_name if events else None,
        "confidence": seen.confidence, "assumption": ASSUMPTION, "rounds": seen.rounds,
        "accountant": accountant, "reason": None,
    }
    if broken:
        return {**doc, "reason": "an update contradicted its declaration or came without one"}
    if seen.reason is not None:
        return {**doc, "reason": seen.reason}
    value = epsilon_at_noise(events, seen.bound, delta, history.accountant, history.route,
                             history.neighbouring)
    ratio = value / declared if declared > 0 and math.isfinite(declared) else None
    reason = None if math.isfinite(value) else (
        "no noise shown: the clipped signal alone (C·B) can make the releases' norms"
        if seen.bound == 0.0 else
        f"the noise bound {seen.bound:.3g} is below what can be accounted")
    return {**doc, "value": value, "ratio": ratio, "reason": reason,
            "noise_accounted": noise_grid(seen.bound) if seen.bound > 0 else None}

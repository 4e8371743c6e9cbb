"""An attack row's scores in report.json, tallies.csv and report.html: the two priors, the gains
over each, the support SSIM and the within-class identification score (docs/leakage.md).

* The **label prior** (``attack.prior``, ``attack.gain``): the public class means of the labels
  the update gives away; the gain over it is the leakage beyond the labels.
* The **no-update prior** (``attack.no_update_prior``, ``attack.no_update_gain``): the public
  mean image, what the attacker has before any update; the gain over it is the total leakage.
* ``attack.support_ssim``: SSIM on the digit's support only (:func:`attacks.scoring.support_ssim`).
* ``attack.identification``: ``log(M·P̂)`` with its Clopper–Pearson interval beside the
  client-round's Bayes-capacity bound ``min(log C, log M)`` (privacy-math.md §13).

Stores written before the priors were named for what they are hold the stronger of the public
mean (``mean``) and the class means (``class_mean``) as ``prior``; those names read as
``no_update`` and ``label`` here, the no-update prior comes from the stored baselines, and the
scores those stores never kept (support SSIM, identification) read as None.
"""

from __future__ import annotations

import math
from typing import Any

from fedpriv.audit.schema import NO_UPDATE_PRIOR as NO_UPDATE
from fedpriv.audit.schema import OLD_PRIOR_NAMES as OLD_NAMES
from fedpriv.jsonio import optional_loads
from fedpriv.leakage.game import identification_leakage

__all__ = ["FLAT_SCORE_KEYS", "attack_scores_summary", "flat_scores", "identification_summary"]

Row = dict[str, Any]
#: The keys of :func:`flat_scores`, in tallies.csv's column order.
FLAT_SCORE_KEYS = (
    "support_ssim", "prior_baseline", "prior_ssim", "prior_psnr", "gain_ssim", "gain_psnr",
    "no_update_prior_ssim", "no_update_prior_psnr", "no_update_gain_ssim", "no_update_gain_psnr",
    "identification_candidates", "identification_log_value", "identification_log_lower",
    "identification_log_upper", "identification_log_bound",
)  # fmt: skip


def _named(prior: Row | None) -> Row | None:
    """The stored ``prior`` with any old baseline names read as today's."""
    if prior is None:
        return None
    out = {**prior, "baseline": OLD_NAMES.get(prior.get("baseline"), prior.get("baseline"))}
    if isinstance(prior.get("baselines"), dict):
        out["baselines"] = {OLD_NAMES.get(k, k): v for k, v in prior["baselines"].items()}
    return out


def _difference(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return 0.0 if a == b else a - b  # an exact image twice: inf − inf is no gain


def identification_summary(stored: Row | None, tally: Row | None) -> Row | None:
    """The ``identification`` record: the stored counts with ``log(M·P̂)``, its interval and the
    bound ``min(log C, log M)``. ``log C`` is the one stored with the score (the round's releases
    on its candidates, record level) or, where none was stored, the client-round's
    ``log_capacity_round`` from ``tally`` (a looser bound for the Gaussian: in all ``p``
    dimensions); ``inf`` where neither is finite (then the bound is ``log M``)."""
    if not stored:
        return None
    log_c = stored.get("log_capacity")
    source = "the round's releases on the candidates (record level)"
    if log_c is None:
        log_c = (tally or {}).get("log_capacity_round")
        source = f"the round's log C ({(tally or {}).get('threat_model') or 'unknown'} level)"
    log_c = math.inf if log_c is None else float(log_c)
    leak = identification_leakage(stored["successes"], stored["trials"], stored["candidates"],
                                  log_c)
    return {**stored, **leak.summary(), "log_capacity": None if math.isinf(log_c) else log_c,
            "bound_from": source if math.isfinite(log_c) else "log M (no finite log C)",
            "note": "the batch's images are the trials; they share one release"}


def attack_scores_summary(attack: Row, tally: Row | None = None) -> Row:
    """``prior``, ``gain``, ``no_update_prior``, ``no_update_gain``, ``support_ssim`` and
    ``identification`` of a stored attack row (None where not scored), ``tally`` its
    client-round's tally row (for the identification bound)."""
    prior = _named(optional_loads(attack.get("prior_json")))
    scores = optional_loads(attack.get("estimate_json")) or {}
    if prior is None:
        return {"prior": None, "gain": None, "no_update_prior": None, "no_update_gain": None,
                "support_ssim": scores.get("support_ssim"),
                "identification": identification_summary(scores.get("identification"), tally)}
    no_update = (prior.get("no_update") or (prior.get("baselines") or {}).get(NO_UPDATE)
                 or ({k: prior.get(k) for k in ("mse", "psnr", "ssim")}
                     if prior["baseline"] == NO_UPDATE else None))
    gain = {"ssim": attack.get("gain_ssim"), "psnr": attack.get("gain_psnr"),
            "support_ssim": prior.get("gain_support_ssim")}
    no_update_gain = prior.get("no_update_gain")
    if no_update_gain is None and no_update is not None:  # an older store: from the means
        no_update_gain = {"ssim": _difference(attack.get("ssim"), no_update.get("ssim")),
                          "psnr": _difference(attack.get("psnr"), no_update.get("psnr")),
                          "support_ssim": None}
    return {"prior": prior, "gain": gain,
            "no_update_prior": None if no_update is None else {"baseline": NO_UPDATE,
                                                               **no_update},
            "no_update_gain": no_update_gain, "support_ssim": scores.get("support_ssim"),
            "identification": identification_summary(scores.get("identification"), tally)}


def flat_scores(attack: Row | None, tally: Row | None = None) -> Row:
    """:func:`attack_scores_summary` of ``attack`` flattened to one level (keys
    :data:`FLAT_SCORE_KEYS`: ``prior_ssim``, ``identification_log_lower``, ...), as tables show
    it; None throughout for no attack. The gains are the attack row's own columns."""
    if attack is None:
        return dict.fromkeys(FLAT_SCORE_KEYS)
    scores = attack_scores_summary(attack, tally)
    prior, found = scores["prior"] or {}, scores["identification"] or {}
    no_update, no_update_gain = scores["no_update_prior"] or {}, scores["no_update_gain"] or {}
    return {"support_ssim": scores["support_ssim"], "prior_baseline": prior.get("baseline"),
            "prior_ssim": prior.get("ssim"), "prior_psnr": prior.get("psnr"),
            "gain_ssim": attack.get("gain_ssim"), "gain_psnr": attack.get("gain_psnr"),
            "no_update_prior_ssim": no_update.get("ssim"),
            "no_update_prior_psnr": no_update.get("psnr"),
            "no_update_gain_ssim": no_update_gain.get("ssim"),
            "no_update_gain_psnr": no_update_gain.get("psnr"),
            "identification_candidates": found.get("candidates"),
            **{f"identification_{k}": found.get(k)
               for k in ("log_value", "log_lower", "log_upper", "log_bound")}}

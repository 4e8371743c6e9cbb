"""``clip`` (and ``none``): what an update without noise can be checked for (privacy-math.md §9.5).

``clip`` releases ``Σ_i ḡ_i / L`` per step, so ``‖u‖₂ = ‖Σ_t S_t‖₂ ≤ C·B`` exactly. With ``B``
known the check is deterministic; with ``B ~ Binomial(k·n, q)`` it rejects at level ``α`` when
``‖u‖ > C·B(α)``, whose p-value is ``P(B ≥ ⌈‖u‖/C⌉)``. ``none`` claims nothing: unverifiable.
"""

from __future__ import annotations

import math

from fedpriv.validate import check_nonnegative, check_positive, check_probability
from fedpriv.verification.records import RecordCount
from fedpriv.verification.roundoff import ROUNDOFF_RISK, norm_tolerance
from fedpriv.verification.update import ClientUpdate
from fedpriv.verification.verdict import DEFAULT_ALPHA, Verdict, decide, unverifiable

__all__ = ["clip_norm_test", "verify_clip", "verify_none"]


def clip_norm_test(
    norm: float,
    *,
    clip_bound: float,
    records: RecordCount,
    alpha: float = DEFAULT_ALPHA,
    slack: float = 0.0,
) -> Verdict:
    """Check ``‖u‖ ≤ C·B`` for an update with no noise.

    Parameters
    ----------
    norm
        The observed ``‖u‖`` (ℓ2), ``u = L·Σ_t r_t``.
    clip_bound
        ``C`` per record (including any float tolerance).
    records
        The law of ``B``.
    alpha
        False-alarm rate (only spent when ``B`` is random).
    slack
        Rounding tolerance on ``norm``.
    """
    x = check_nonnegative("norm", norm)
    c = check_positive("clip_bound", clip_bound)
    a = check_probability("alpha", alpha)
    needed = (x - check_nonnegative("slack", slack)) / c
    least = max(0, math.ceil(needed))  # records the norm needs: B ≥ least
    p = records.exceed_probability(least - 1) if least > 0 else 1.0
    statistic = {"norm": x, "clip_bound": c, "records_needed": needed, "slack": slack}
    return decide(
        "clip-norm",
        p,
        a,
        statistic,
        passed=f"‖u‖ = {x:.6g} needs at least {needed:.4g} clipped records",
        failed=(
            f"‖u‖ = {x:.6g} needs at least {needed:.4g} records of norm C = {c:.4g}, more "
            f"than {records.source} allows"
        ),
        speaks_to=("signal-bound",),
    )


def verify_clip(
    update: ClientUpdate, *, clip_bound: float, alpha: float = DEFAULT_ALPHA
) -> Verdict:
    """The ``clip`` mechanism's check on a recovered update (ℓ2 clipping to ``C``)."""
    c = check_positive("clip_bound", clip_bound)
    records = update.records
    most = records.upper_quantile(ROUNDOFF_RISK)
    c_float = c * (1.0 + norm_tolerance(update.dim, most, update.unit_roundoff))
    step = c_float * most / update.batch_size  # every ‖r_t‖ ≤ C·B_t/L ≤ C·B/L
    slack = update.batch_size * update.summed_error(2, step)
    norm = float(update.batch_size * math.sqrt(float(update.summed @ update.summed)))
    return clip_norm_test(norm, clip_bound=c_float, records=records, alpha=alpha, slack=slack)


def verify_none(update: ClientUpdate) -> Verdict:
    """``none`` declares no clipping and no noise: nothing to check."""
    return unverifiable("none", "mechanism none claims nothing that the update could contradict")

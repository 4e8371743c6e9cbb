"""``vmf``: is the update a sum of ``k`` releases of norm ``s``? (privacy-math.md §9.4)

Each step releases ``r_t = s·y_t`` with ``‖y_t‖ = 1``, so ``‖Σ_t r_t‖ = s`` for ``k = 1`` and
``≤ k·s`` for ``k > 1`` — deterministic checks (p-value 0 or 1) up to float32 rounding:
``ŷ`` has ``|‖ŷ‖ − 1| ≤ ρ`` (:func:`~fedpriv.verification.roundoff.norm_tolerance`),
``fl(s·ŷ)`` one more rounding, and the parameter round trip
:func:`~fedpriv.verification.roundoff.roundoff_bound`. ``vmf_keep_norm`` releases
``(‖S_t‖/L)·y_t`` instead: ``‖u‖ ≤ Σ_t ‖S_t‖ ≤ C·B``, the ``clip`` check.

**κ is not observable** (issue 25 item 4), so the noise is reported *not tested*
(:data:`KAPPA_NOT_OBSERVABLE`, a part ``vmf-kappa`` with status ``unverifiable``): the norm check
sees only the public scale ``s``, and ε depends on κ alone. At one release ``y ~ VMF(μ, κ)``
with the mean direction ``μ`` (the normalised clipped gradient) unknown to the server, no test
of κ has power above its level at every ``μ``: a level-α test rejects with probability ≤ α
under every ``μ`` at the declared κ, hence ≤ α on average over a uniform ``μ``; but with
``μ`` uniform, ``y`` is uniform on the sphere *whatever κ is*, so the same average under any
other κ is ≤ α too, and some ``μ`` leaves the power ≤ α. Over ``k`` steps ``‖Σ_t y_t‖``
depends on κ only through how aligned the unknown ``μ_t`` are: again no bound on κ.

The per-layer VMF (privacy-math.md §12) releases ``s_r·y_r`` in every block ``r``: the same
check on each block's norm at its own scale (:func:`verify_vmf_layers`). Neither tests ``κ``
(above): the verdict carries the same ``vmf-kappa`` part, not tested.
"""

from __future__ import annotations

import math
from dataclasses import replace

from fedpriv.validate import check_dim, check_nonnegative, check_positive
from fedpriv.verification.clip import verify_clip
from fedpriv.verification.roundoff import norm_tolerance
from fedpriv.verification.update import ClientUpdate
from fedpriv.verification.verdict import DEFAULT_ALPHA, Verdict, combine_verdicts, unverifiable

__all__ = ["KAPPA_NOT_OBSERVABLE", "verify_vmf", "verify_vmf_layers", "vmf_norm_test"]

KAPPA_NOT_OBSERVABLE = (
    "κ (the noise) is not observable from a release: the update shows only the public scale "
    "s, and one direction drawn around an unknown mean fits every κ (no test of κ has power "
    "above its level at every mean direction)"
)


def vmf_norm_test(norm: float, *, scale: float, steps: int, tolerance: float) -> Verdict:
    """Check ``‖Σ_t r_t‖ = s`` (``k = 1``) or ``≤ k·s`` (``k > 1``) within ``tolerance``.

    Parameters
    ----------
    norm
        ``‖Σ_t r_t‖₂ = ‖u‖₂/L``.
    scale
        The declared public scale ``s``.
    steps
        ``k``.
    tolerance
        Absolute float tolerance on ``norm``.
    """
    x, s = check_nonnegative("norm", norm), check_positive("scale", scale)
    k, tol = check_dim("steps", steps), check_nonnegative("tolerance", tolerance)
    if k == 1:
        ok, claim = abs(x - s) <= tol, f"= s = {s:.6g}"
    else:
        ok, claim = x <= k * s + tol, f"≤ k·s = {k * s:.6g}"
    statistic = {"norm": x, "scale": s, "deviation": x - s, "tolerance": tol}
    reason = f"‖Σ r_t‖ = {x:.9g} {'' if ok else 'not '}{claim} within {tol:.3g}"
    return Verdict(
        test="vmf-norm",
        status="consistent" if ok else "inconsistent",
        reason=reason,
        p_value=1.0 if ok else 0.0,
        statistic=statistic,
        speaks_to=("signal-bound",),
    )


def verify_vmf(
    update: ClientUpdate,
    *,
    scale: float,
    clip_bound: float,
    keep_norm: bool = False,
    alpha: float = DEFAULT_ALPHA,
) -> Verdict:
    """The ``vmf`` mechanism's check on a recovered update: the released norm, and κ reported
    not tested (module docstring).

    Tolerance: ``k·s·(ρ + u + ρu)`` for the releases' norms plus the round-trip bound with
    every ``‖r_t‖ ≤ s(1 + ρ)(1 + u)``. With ``keep_norm`` the ``clip`` check at ``C`` (ℓ2).
    """
    if keep_norm:
        return verify_clip(update, clip_bound=clip_bound, alpha=alpha)
    s, k, unit = check_positive("scale", scale), update.steps, update.unit_roundoff
    rho = norm_tolerance(update.dim, 0, unit)
    release = s * (1.0 + rho) * (1.0 + unit)
    tolerance = k * s * (rho + unit + rho * unit) + update.summed_error(2, release)
    norm = math.sqrt(float(update.summed @ update.summed))
    return _with_kappa(vmf_norm_test(norm, scale=s, steps=k, tolerance=tolerance))


def _with_kappa(checked: Verdict) -> Verdict:
    """A VMF norm verdict with the part saying κ was not tested."""
    return combine_verdicts([checked, unverifiable("vmf-kappa", KAPPA_NOT_OBSERVABLE,
                                                        speaks_to=("noise-scale",))],
                            test="vmf")


def verify_vmf_layers(
    update: ClientUpdate,
    *,
    scales: tuple[float, ...],
    dims: tuple[int, ...],
    alpha: float = DEFAULT_ALPHA,
) -> Verdict:
    """The per-layer ``vmf`` check: block ``r`` of ``Σ_t r_t`` has norm ``s_r`` (``k = 1``) or
    at most ``k·s_r``, each within :func:`verify_vmf`'s tolerance at its own ``p_r`` and ``s_r``
    plus the whole update's round-trip bound (conservative). The first failing block's verdict
    (its reason naming the block), else the verdict of the block with the least slack."""
    if len(scales) != len(dims) or sum(dims) != update.dim:
        return Verdict(test="vmf-norm", status="inconsistent", p_value=0.0, statistic={},
                       speaks_to=("signal-bound",),
                       reason=f"update of dimension {update.dim} does not split into the "
                              f"declared blocks {list(dims)}")
    k, unit = update.steps, update.unit_roundoff
    total = math.sqrt(sum(s * s for s in scales)) * (1.0 + unit) ** 2
    shared = update.summed_error(2, total * (1.0 + norm_tolerance(max(dims), 0, unit)))
    worst: tuple[float, Verdict] | None = None
    start = 0
    for r, (s, p) in enumerate(zip(scales, dims, strict=True)):
        block = update.summed[start:start + p]
        start += p
        rho = norm_tolerance(p, 0, unit)
        tol = k * s * (rho + unit + rho * unit) + shared
        verdict = vmf_norm_test(math.sqrt(float(block @ block)), scale=s, steps=k, tolerance=tol)
        verdict = replace(verdict, reason=f"block {r} (p = {p}): {verdict.reason}")
        if verdict.status != "consistent":
            return _with_kappa(verdict)
        slack = tol - abs(verdict.statistic["deviation"]) if k == 1 else \
            k * s + tol - verdict.statistic["norm"]
        if worst is None or slack < worst[0]:
            worst = (slack, verdict)
    assert worst is not None
    return _with_kappa(worst[1])

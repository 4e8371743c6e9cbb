"""Steps mode (``audit.release = "steps"``): the update checked against the releases of its
local steps, and every step's release tested alone (privacy-math.md §9; docs/trust.md §2).

A client in steps mode sends, beside its new parameters ``θ_k``, every step's release ``r_t``
(what the mechanism output at step t, in float32, as the local optimiser received it). The
server then

1. recomposes the update: it runs the declared local optimiser (``torch.optim.SGD`` semantics,
   state created afresh each round: plain SGD, momentum, Nesterov, coupled weight decay) on
   the received releases from the broadcast ``θ_0``, in float64, and requires the client's
   ``θ_k`` to agree coordinate by coordinate within a float32 round-off bound
   (:func:`compose_sgd`, :func:`check_composition`); a disagreement is ``inconsistent``
   (p = 0: the update is not the composition of the releases);
2. tests each step's release by the declared mechanism's ``verify`` as a one-step update
   (:func:`step_updates`): the test of one release has the power of §9 at ``k = 1`` — noise
   scaled by 0.3 at 20 steps, which the multi-step norm test cannot see, fails every step.

Each step is tested at ``α/k`` (Bonferroni within the client-round), so a client-round's
false-alarm rate is that of one update-mode verification, ``Σ`` over the mechanism's tests of
their ``α``, whatever ``k``; :func:`~fedpriv.verification.verdict.combine_verdicts` states it.

Round-off of the composition (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd
ed., §2.2: ``fl(a ∘ b) = (a ∘ b)(1 + δ)``, ``|δ| ≤ u``), per coordinate, to first order in
``u``, with magnitudes ``A`` taken before cancellation (``A_g = |r_t| + λ|θ_t|``,
``A_b = μA_b' + A_g``, ``A_d = A_g + μA_b`` with Nesterov, else ``A_b``):

* ``g = fl(r + fl(λθ))``: ``e_g ≤ λe_θ + 2u·A_g``;
* ``b = fl(fl(μb') + g)``: ``e_b ≤ μe_b' + e_g + 2u·A_b`` (the first step copies ``g``);
* Nesterov ``d = fl(g + fl(μb))``: ``e_d ≤ e_g + μe_b + 2u·A_d``;
* ``θ' = fl(θ − fl(fl(η)·d))``: ``e_θ' ≤ e_θ + η·e_d + 3u·η·A_d + u·(|θ| + η·A_d)``.

The check allows ``2·e_θ`` after ``k`` steps (the factor 2 covers the second-order terms,
``k·u ≪ 1``, and the float64 simulation's own rounding) plus ``8k`` subnormal spacings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from fedpriv.optimizer_settings import OptimizerSettings
from fedpriv.validate import check_probability
from fedpriv.verification.client_round import Verifier
from fedpriv.verification.declaration import Declaration, declaration_checks
from fedpriv.verification.records import record_count
from fedpriv.verification.roundoff import FLOAT32_UNIT_ROUNDOFF
from fedpriv.verification.update import ClientUpdate, flatten
from fedpriv.verification.verdict import (
    DEFAULT_ALPHA,
    Verdict,
    combine_verdicts,
    unverifiable,
)

__all__ = [
    "Composition",
    "check_composition",
    "compose_sgd",
    "step_updates",
    "verify_steps",
]

# Smallest positive float32 (subnormal): the absolute error of one rounding near zero.
_FLOAT32_TINY = 2.0**-149


@dataclass(frozen=True)
class Composition:
    """The declared optimiser run on the releases: the exact ``θ_k`` and its round-off bound.

    Attributes
    ----------
    theta
        ``θ_k`` in exact arithmetic (float64) from the client's float32 releases.
    error
        Per coordinate, a bound on ``|θ_k(client's float32) − theta|``.
    """

    theta: np.ndarray
    error: np.ndarray


def _unsupported(optimizer: OptimizerSettings, fresh_state: bool) -> str | None:
    if optimizer.name != "sgd":
        return (f"optimizer {optimizer.name!r}: its steps are not recomposed (adaptive methods "
                "rescale each coordinate by running moments), so the update cannot be checked "
                "against its releases")
    if optimizer.momentum > 0 and not fresh_state:
        return "SGD momentum with a buffer kept across rounds mixes earlier rounds' releases in"
    return None


def compose_sgd(
    theta: np.ndarray,
    releases: np.ndarray,
    *,
    lr: float,
    optimizer: OptimizerSettings,
    unit_roundoff: float = FLOAT32_UNIT_ROUNDOFF,
) -> Composition:
    """``torch.optim.SGD`` (dampening 0, fresh state) applied to ``releases`` from ``theta``.

    Parameters
    ----------
    theta
        ``θ_0``, flat (float64 copy of the float32 broadcast).
    releases
        ``(k, p)``: step t's release ``r_t``, what the optimiser received as ``p.grad``.
    lr, optimizer
        ``η`` and the declared optimiser (``sgd`` only; see :func:`check_composition`).
    unit_roundoff
        ``u`` of the client's arithmetic.
    """
    mu, decay, eta, u = optimizer.momentum, optimizer.weight_decay, float(lr), unit_roundoff
    th = np.asarray(theta, np.float64).copy()
    e_th = np.zeros_like(th)
    buf = e_buf = a_buf = None
    for row in releases:  # row by row: never a float64 copy of all k steps
        r = np.asarray(row, np.float64)
        g, a_g = r + decay * th, np.abs(r) + decay * np.abs(th)
        e_g = decay * e_th + 2 * u * a_g
        d, e_d, a_d = g, e_g, a_g
        if mu > 0:
            if buf is None:
                buf, e_buf, a_buf = g.copy(), e_g.copy(), a_g.copy()
            else:
                a_buf = mu * a_buf + a_g
                buf, e_buf = mu * buf + g, mu * e_buf + e_g + 2 * u * a_buf
            if optimizer.nesterov:
                a_d = a_g + mu * a_buf
                d, e_d = g + mu * buf, e_g + mu * e_buf + 2 * u * a_d
            else:
                d, e_d, a_d = buf, e_buf, a_buf
        e_th = e_th + eta * e_d + 3 * u * eta * a_d + u * (np.abs(th) + eta * a_d)
        th = th - eta * d
    steps = len(releases)
    return Composition(th, 2.0 * e_th + 8 * steps * _FLOAT32_TINY)


def check_composition(
    theta: np.ndarray | Sequence[np.ndarray],
    theta_client: np.ndarray | Sequence[np.ndarray],
    releases: np.ndarray,
    *,
    lr: float,
    optimizer: OptimizerSettings,
    fresh_state: bool = True,
    unit_roundoff: float = FLOAT32_UNIT_ROUNDOFF,
) -> Verdict:
    """Whether ``θ_client`` is the declared optimiser's composition of ``releases`` from
    ``θ``: test ``"composition"``, deterministic (p = 0 when it is not, no p-value when it
    is); ``unverifiable`` for an optimiser this module does not recompose.

    Parameters
    ----------
    theta, theta_client
        The broadcast and the client's parameters (arrays in the same order, or flat).
    releases
        ``(k, p)`` releases, flat per step in the same order.
    lr, optimizer, fresh_state
        As declared (:class:`~fedpriv.verification.declaration.Declaration`).
    """
    reason = _unsupported(optimizer, fresh_state)
    if reason is not None:
        return unverifiable("composition", reason)
    start, end = flatten(theta), flatten(theta_client)
    composed = compose_sgd(start, releases, lr=lr, optimizer=optimizer,
                           unit_roundoff=unit_roundoff)
    gap = np.abs(end - composed.theta)
    allowed = composed.error + 2.0**-52 * np.abs(end - start)  # the server's own Δ
    ratio = float(np.max(gap / np.maximum(allowed, np.finfo(np.float64).tiny)))
    statistic = {"steps": float(len(releases)), "max_gap": float(np.max(gap)),
                 "gap_over_bound": ratio}
    k = len(releases)
    if not np.all(gap <= allowed):
        worst = int(np.argmax(gap - allowed))
        return Verdict("composition", "inconsistent",
                       f"the update is not the {optimizer.name} composition of its {k} step "
                       f"releases: coordinate {worst} differs by {gap[worst]:.3g}, beyond the "
                       f"float32 round-off bound {allowed[worst]:.3g}", p_value=0.0,
                       statistic=statistic)
    return Verdict("composition", "consistent",
                   f"the update is the {optimizer.name} composition of its {k} step releases "
                   f"(largest gap {gap.max():.3g}, {ratio:.2g} of the round-off bound)",
                   statistic=statistic)


def step_updates(declaration: Declaration, releases: np.ndarray,
                 offset: np.ndarray | None = None) -> Iterator[ClientUpdate]:
    """Each step's release as a one-step :class:`ClientUpdate` (``Σ r = r_t − offset``, the
    offset being a known, data-independent share of every step such as the canaries'
    ``c/L``). The release is received exactly, so its rounding slack is only the release's
    own arithmetic (``θ``'s norms enter as 0). One at a time: never all ``k`` in float64."""
    d = declaration
    sizes = d.batch_sizes
    for t, row in enumerate(releases):
        r = np.array(row, np.float64)  # owned: fast BLAS norms
        records = record_count(1, batch_sizes=None if sizes is None else (sizes[t],),
                               sampling=d.sampling, local_size=d.local_size,
                               sample_rate=d.sample_rate)
        summed = r if offset is None else r - offset
        yield ClientUpdate(summed=summed, step_scale=d.lr, weight_decay=0.0, steps=1,
                           batch_size=d.batch_size, records=records,
                           start_norms=(0.0, 0.0), delta_norms=(0.0, 0.0))


def _steps_verdict(verdicts: list[Verdict], alpha: float) -> Verdict:
    """The per-step verdicts as one part ``"steps"``: its reason counts the steps of the
    combined status and quotes the first (short whatever ``k``: the report keeps it per
    client-round); the steps' own verdicts are its parts."""
    combined = combine_verdicts(verdicts, test="steps")
    k, status = len(verdicts), combined.status
    which = [t + 1 for t, v in enumerate(verdicts) if v.status == status]
    failed = [t + 1 for t, v in enumerate(verdicts) if v.status == "inconsistent"]
    listed = "" if len(which) == k else " (steps " + ", ".join(map(str, which[:5])) + (
        ", …" if len(which) > 5 else "") + ")"
    first = verdicts[which[0] - 1]
    reason = f"{len(which)} of {k} steps {status}{listed}; step {which[0]}: {first.reason}"
    statistic = {"steps": float(k), "tested": float(sum(v.status == "consistent"
                                                          for v in verdicts)),
                 "failed": float(len(failed)), "alpha_per_step": alpha}
    if failed:
        statistic["first_failed"] = float(failed[0])
    return dataclasses.replace(combined, reason=reason, statistic=statistic)


def verify_steps(
    declaration: Declaration,
    theta: np.ndarray | Sequence[np.ndarray],
    theta_client: np.ndarray | Sequence[np.ndarray],
    releases: np.ndarray,
    verifier: Verifier,
    *,
    alpha: float = DEFAULT_ALPHA,
    offset: np.ndarray | None = None,
) -> Verdict:
    """Check one client-round in steps mode: declaration, composition, every step.

    Parameters
    ----------
    declaration
        What the client declared.
    theta, theta_client
        The broadcast trainable parameters and the client's.
    releases
        ``(k, p)`` float32 releases, one flat row per step, in the parameters' order.
    verifier
        The declared mechanism's check (``mechanism.verify``), called once per step at
        ``alpha / k``.
    alpha
        ``audit.verify_alpha``: the false-alarm rate of each of the mechanism's tests over
        the client-round.
    offset
        A known share of every step's release to remove before its test (the canaries').

    Returns
    -------
    Verdict
        Test ``"client-round"``; its parts: the preconditions (the declaration, the batch
        sizes, ``"composition"``, which can refute the round but not verify it) and
        ``"steps"`` (whose parts are every step's verdict).
    """
    a = check_probability("alpha", alpha)
    d = declaration
    preconditions = declaration_checks(d, a)
    if preconditions[0].status == "inconsistent":
        return combine_verdicts([], preconditions=preconditions)
    releases = np.asarray(releases)
    if releases.ndim != 2 or releases.shape[0] != d.steps:
        bad = Verdict("composition", "inconsistent", f"{releases.shape[0]} step releases for "
                      f"k = {d.steps} declared steps", p_value=0.0)
        return combine_verdicts([], preconditions=[*preconditions, bad])
    if not np.all(np.isfinite(releases)):
        return combine_verdicts([unverifiable(
            "steps", "a step release is not finite (training diverged?)")],
            preconditions=preconditions)
    composed = check_composition(theta, theta_client, releases, lr=d.lr,
                                 optimizer=d.optimizer, fresh_state=d.fresh_state)
    if composed.status != "consistent":  # step tests say nothing about another update
        return combine_verdicts([composed], preconditions=preconditions)
    per_step = a / d.steps
    verdicts = [verifier(update, per_step) for update in step_updates(d, releases, offset)]
    # the composition can refute the round, not verify it: a precondition of the steps' tests
    return combine_verdicts([_steps_verdict(verdicts, per_step)],
                            preconditions=[*preconditions, composed])

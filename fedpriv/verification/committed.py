"""Committed noise, re-drawn exactly: the simulation oracle's deterministic sensitivity check
(test ``"committed-noise"``, issue 42).

fedpriv's client, where its side opts in to the run seed's stream (fedpriv's simulations do; by
default its noise is its secret: :func:`fedpriv.seeding.client_noise_seed`), draws every batch
and every noise vector of a round from one seeded CPU stream
(:func:`fedpriv.seeding.make_generator` ``(run seed, partition id, round, "noise")``: each
step's batch by :func:`fedpriv.training.sample_batch`, then its mechanism's noise; a
client-level update's noise from :func:`fedpriv.seeding.update_generator`) and, with the
labelled simulation oracle on, says so in its report (``noise-stream`` =
:data:`~fedpriv.seeding.SEEDED_NOISE`; :class:`fedpriv.protocol.GroundTruthOracle`). In
simulation the server knows the run seed and the client's partition, so it re-draws those
streams (:func:`strategies.committed_redraw.redraw`, on the server side: it draws with the
mechanism, which this layer does not import) — the batches with the client's own sampling
function, the noise with the mechanism's own draw
(:meth:`fedpriv.mechanisms.base.ClippedMechanism.draw_noise`,
:meth:`fedpriv.mechanisms.client_gaussian.ClientGaussianMechanism.privatize_update`) — and
holds the client to them (:func:`committed_test`):

* the oracle's record ids of every step must be the batch the stream samples (order kept);
* each release ``r_t`` less its replayed clipped signal ``S_t``
  (:mod:`fedpriv.verification.sensitivity`) less the re-drawn noise ``N_t/L`` must be within
  the rounding bound: ``‖r_t − S_t − N_t/L‖₂ ≤ e_t + 3u·‖r_t‖₂``, ``e_t`` the replay's own
  slack (the client's float32 clipped sum and update against the server's float64, the update's
  round-off bound) and ``3u·‖r_t‖₂`` the float32 rounding of ``(Σḡ + N)/L`` itself, ``u`` the
  unit round-off of the client's dtype (two roundings of at most ``u`` relative each, per
  coordinate: ``(2u + u²)(1 + u)|r_{t,i}| ≤ 3u|r_{t,i}|``).

Under the declaration (fedpriv's own client, honest) the remainder *is* rounding, so the check
never fails: its false-alarm rate is 0 given the round-off bound (no α is spent; the verdict
is deterministic, ``alpha = None``). Its power: any deviation of the release from the declared
clipped signal plus the committed noise with an ℓ2 norm above the bound — about
``10⁻⁴·B·C/L``, i.e. ``10⁻⁴·B/(σ√p)`` of the noise's norm — is caught with probability 1:
a signal × (1 + bound/‖S‖), one hidden step, one record unclipped by more than the bound, a
noise drawn otherwise.

The bound's ``REPLAY_TOLERANCE`` part is a measured allowance for the client's float32
arithmetic against the server's float64 (:mod:`strategies.sensitivity_replay`), not a proof:
it holds for models smooth in their inputs, as fedpriv's built-in ones are (sigmoid). A model
with ReLUs or max-pooling can flip one record's activation pattern between the two precisions,
and that record's gradient then differs by far more — a false refutation, rare (one
pre-activation within float32 rounding of 0) but possible with such a user-registered model.

The statistical replay (:func:`fedpriv.verification.sensitivity.sensitivity_test`) still runs
and states the power in ε; this check speaks to the same property (``sensitivity``).

Where no seeded noise is declared (a user's own client, a CUDA generator, no oracle), nothing
is re-drawn and the statistical replay stands alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedpriv.verification.roundoff import FLOAT32_UNIT_ROUNDOFF
from fedpriv.verification.verdict import Verdict

__all__ = ["COMMITTED_TEST", "ROUNDING_FACTOR", "Redrawn", "committed_test"]

COMMITTED_TEST = "committed-noise"
"""The verdict's test name (it speaks to ``sensitivity``)."""
ROUNDING_FACTOR = 3.0
"""``(Σḡ + N)/L`` rounded twice in the client's dtype: at most ``3u·|r_i|`` per coordinate."""


@dataclass(frozen=True)
class Redrawn:
    """A client-round's committed draws as the server re-drew them.

    Attributes
    ----------
    batches
        Each local step's sampled positions in the client's partition (int64 arrays).
    noises
        Each release's noise over its divisor, ``N_t/L`` (float64, flat): one per local step,
        or the update's one at the client level.
    """

    batches: tuple[np.ndarray, ...]
    noises: tuple[np.ndarray, ...]


def committed_test(residuals: Sequence[tuple[np.ndarray, float]], releases: Sequence[np.ndarray],
                   redrawn: Redrawn, partition: np.ndarray,
                   record_ids: Sequence[Sequence[int]], noise_std: float, *,
                   unit_roundoff: float = FLOAT32_UNIT_ROUNDOFF) -> Verdict:
    """Test ``"committed-noise"`` of one client-round (module docstring): deterministic.

    Parameters
    ----------
    residuals
        Each release's ``(r_t − S_t, e_t)``: less its replayed clipped signal, with the
        replay's ℓ2 rounding slack (:mod:`fedpriv.verification.sensitivity`).
    releases
        Each release ``r_t`` as the server recovered it (float64), for the rounding bound.
    redrawn
        The committed draws (:func:`strategies.committed_redraw.redraw`).
    partition
        The client's record ids in its partition's order (positions → ids).
    record_ids
        The oracle's record ids of each local step.
    noise_std
        The declared noise's scale per coordinate of one release (``σC/L``; Laplace ``λC/L``;
        client level ``σS``), to state the bound in noise stds.
    """
    from fedpriv.verification.sensitivity import SPEAKS_TO

    for t, (positions, ids) in enumerate(zip(redrawn.batches, record_ids, strict=True)):
        if np.asarray(partition)[positions].tolist() != list(ids):
            return Verdict(COMMITTED_TEST, "inconsistent",
                           f"the oracle's records of step {t + 1} are not the batch the "
                           "seeded stream samples", p_value=0.0, speaks_to=SPEAKS_TO)
    excess, worst, bound_worst = -math.inf, 0, 0.0
    for t, ((residual, slack), release, noise) in enumerate(
            zip(residuals, releases, redrawn.noises, strict=True)):
        remainder = float(np.linalg.norm(np.asarray(residual, np.float64) - noise))
        bound = slack + ROUNDING_FACTOR * unit_roundoff * float(np.linalg.norm(release))
        if remainder - bound > excess:
            excess, worst, bound_worst = remainder - bound, t, bound
    remainder = excess + bound_worst
    k = len(redrawn.noises)
    stat = {"remainder_in_noise": remainder / noise_std,
            "bound_in_noise": bound_worst / noise_std, "releases": float(k)}
    where = f" (release {worst + 1} of {k})" if k > 1 else ""
    if excess > 0:
        return Verdict(COMMITTED_TEST, "inconsistent",
                       f"release − replayed signal − committed noise = "
                       f"{remainder / noise_std:.3g} noise stds > rounding "
                       f"{bound_worst / noise_std:.3g}{where}", p_value=0.0, statistic=stat,
                       speaks_to=SPEAKS_TO)
    within = f"{remainder / noise_std:.3g} ≤ {bound_worst / noise_std:.3g} noise stds{where}"
    return Verdict(COMMITTED_TEST, "consistent",
                   f"release − replayed signal − committed noise within rounding ({within})",
                   p_value=1.0, statistic=stat,
                   speaks_to=SPEAKS_TO)

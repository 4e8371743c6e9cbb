"""One call for the server's reply check: :func:`verify_update` (privacy-math.md §9).

The steps, in order: the declaration must be possible (:func:`check_declaration`); declared
Poisson batch sizes must fit ``Binomial(k·n, q)`` (:func:`check_batch_sizes`); the optimiser
must leave the releases recoverable (:func:`client_update`); then the mechanism's own checks,
found by name in :data:`VERIFIERS`. The parts combine into one verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from fedpriv.validate import check_probability
from fedpriv.verification.clip import verify_clip, verify_none
from fedpriv.verification.declaration import Declaration, check_batch_sizes, check_declaration
from fedpriv.verification.gaussian import verify_gaussian
from fedpriv.verification.laplace import verify_laplace
from fedpriv.verification.records import record_count
from fedpriv.verification.update import ClientUpdate, client_update
from fedpriv.verification.verdict import DEFAULT_ALPHA, Verdict, combine_verdicts
from fedpriv.verification.vmf import verify_vmf

__all__ = ["VERIFIERS", "verify_update"]

Verifier = Callable[[ClientUpdate, Declaration, float], Verdict]

VERIFIERS: Mapping[str, Verifier] = {
    "gaussian": lambda u, d, a: verify_gaussian(
        u, noise_multiplier=d.noise_multiplier, clip_bound=d.clip_bound, alpha=a
    ),
    "laplace": lambda u, d, a: verify_laplace(
        u, laplace_scale=d.laplace_scale, clip_bound=d.clip_bound, alpha=a
    ),
    "vmf": lambda u, d, a: verify_vmf(
        u, scale=d.vmf_scale, clip_bound=d.clip_bound, keep_norm=d.vmf_keep_norm, alpha=a
    ),
    "clip": lambda u, d, a: verify_clip(u, clip_bound=d.clip_bound, alpha=a),
    "none": lambda u, d, a: verify_none(u),
}


def verify_update(
    declaration: Declaration,
    theta: np.ndarray | Sequence[np.ndarray],
    theta_client: np.ndarray | Sequence[np.ndarray],
    *,
    alpha: float = DEFAULT_ALPHA,
) -> Verdict:
    """Check one client-round's update against its declaration.

    Parameters
    ----------
    declaration
        What the client declared.
    theta, theta_client
        The broadcast trainable parameters and the client's, as arrays in the same order.
    alpha
        False-alarm rate of each statistical test (``audit.verify_alpha``).

    Returns
    -------
    Verdict
        Test ``"client-round"``, its parts the individual checks.
    """
    a = check_probability("alpha", alpha)
    d = declaration
    plausible = check_declaration(d)
    if plausible.status == "inconsistent":
        return combine_verdicts([], preconditions=[plausible])
    preconditions = [plausible]
    if d.batch_sizes is not None and d.sampling == "poisson":
        preconditions.append(
            check_batch_sizes(
                d.batch_sizes, local_size=d.local_size, sample_rate=d.sample_rate, alpha=a
            )
        )
    records = record_count(
        d.steps,
        batch_sizes=d.batch_sizes,
        sampling=d.sampling,
        local_size=d.local_size,
        sample_rate=d.sample_rate,
    )
    update = client_update(
        theta,
        theta_client,
        lr=d.lr,
        steps=d.steps,
        batch_size=d.batch_size,
        records=records,
        optimizer=d.optimizer,
        momentum=d.momentum,
        nesterov=d.nesterov,
        weight_decay=d.weight_decay,
        fresh_state=d.fresh_state,
    )
    checked = update if isinstance(update, Verdict) else VERIFIERS[d.mechanism](update, d, a)
    return combine_verdicts([checked], preconditions=preconditions)

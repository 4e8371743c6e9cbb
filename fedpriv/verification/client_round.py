"""One call for the server's reply check: :func:`verify_update` (privacy-math.md §9).

The steps, in order: the declaration must be possible (:func:`check_declaration`); declared
Poisson batch sizes must fit ``Binomial(k·n, q)`` (:func:`check_batch_sizes`); the optimiser
must leave the releases recoverable (:func:`client_update`); then the mechanism's own checks —
its ``verify`` method (``fedpriv/mechanisms/<name>.py``), which calls the test functions of this
package. The parts combine into one verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from fedpriv.validate import check_probability
from fedpriv.verification.declaration import Declaration, declaration_checks
from fedpriv.verification.records import record_count
from fedpriv.verification.update import ClientUpdate, client_update, client_updates
from fedpriv.verification.verdict import DEFAULT_ALPHA, Checked, Verdict, combine_verdicts

__all__ = ["Verifier", "recover_update", "recover_updates", "verify_update", "verify_updates"]

Verifier = Callable[[ClientUpdate, float], Verdict]
"""A mechanism's own check of a recovered update at level α (``Mechanism.verify``)."""

Verifiers = Callable[[Sequence[ClientUpdate], float], list[Checked]]
"""A mechanism's own check of many updates recovered under one declaration, each verdict the
one :data:`Verifier` gives, or what that raised (``Mechanism.verify_many``)."""

Failed = Callable[[Exception], Verdict]
"""The verdict a client-round gets when recovering or checking it alone raised."""


def recover_update(
    declaration: Declaration, theta: np.ndarray | Sequence[np.ndarray],
    theta_client: np.ndarray | Sequence[np.ndarray],
) -> ClientUpdate | Verdict:
    """The declared releases' sum recovered from θ and the client's parameters
    (:func:`client_update` at the declaration's records law), or the verdict why the optimiser
    or a non-finite update defeats recovery: one pass per reply, which the verification and
    the noise observation (a mechanism's ``observe``,
    :mod:`fedpriv.verification.observed`) share."""
    d = declaration
    records = record_count(d.steps, batch_sizes=d.batch_sizes, sampling=d.sampling,
                           local_size=d.local_size, sample_rate=d.sample_rate)
    return client_update(theta, theta_client, lr=d.lr, steps=d.steps, batch_size=d.batch_size,
                         records=records, optimizer=d.optimizer, fresh_state=d.fresh_state)


def recover_updates(
    declaration: Declaration, theta: np.ndarray | Sequence[np.ndarray],
    theta_clients: Sequence[Sequence[np.ndarray]], failed: Failed | None = None,
) -> list[ClientUpdate | Verdict]:
    """:func:`recover_update` of each client's parameters under one declaration, in order
    (:func:`~fedpriv.verification.update.client_updates`: the same updates, recovered a block
    at a time); a client whose recovery alone raises gets ``failed`` of the exception (which
    is raised where ``failed`` is None)."""
    d = declaration
    records = record_count(d.steps, batch_sizes=d.batch_sizes, sampling=d.sampling,
                           local_size=d.local_size, sample_rate=d.sample_rate)
    return client_updates(theta, theta_clients, lr=d.lr, steps=d.steps,
                          batch_size=d.batch_size, records=records, optimizer=d.optimizer,
                          fresh_state=d.fresh_state, failed=failed)


def verify_update(
    declaration: Declaration,
    theta: np.ndarray | Sequence[np.ndarray],
    theta_client: np.ndarray | Sequence[np.ndarray],
    verifier: Verifier,
    *,
    alpha: float = DEFAULT_ALPHA,
    recovered: ClientUpdate | Verdict | None = None,
) -> Verdict:
    """Check one client-round's update against its declaration.

    Parameters
    ----------
    declaration
        What the client declared.
    theta, theta_client
        The broadcast trainable parameters and the client's, as arrays in the same order.
    verifier
        The declared mechanism's check (``mechanism.verify``).
    alpha
        False-alarm rate of each statistical test (``audit.verify_alpha``).
    recovered
        :func:`recover_update` of the same arguments, when the caller has it already.

    Returns
    -------
    Verdict
        Test ``"client-round"``, its parts the individual checks.
    """
    a = check_probability("alpha", alpha)
    d = declaration
    preconditions = declaration_checks(d, a)
    if preconditions[0].status == "inconsistent":
        return combine_verdicts([], preconditions=preconditions)
    update = recover_update(d, theta, theta_client) if recovered is None else recovered
    checked = update if isinstance(update, Verdict) else verifier(update, a)
    return combine_verdicts([checked], preconditions=preconditions)


def verify_updates(
    declaration: Declaration,
    recovered: Sequence[ClientUpdate | Verdict],
    verifier: Verifiers,
    *,
    alpha: float = DEFAULT_ALPHA,
    failed: Failed | None = None,
) -> list[Verdict]:
    """:func:`verify_update` of client-rounds that share one declaration, each recovered
    already (:func:`recover_update`): the declaration's checks made once, the mechanism's for
    all the recovered updates in one call (``Mechanism.verify_many``); verdicts in order. An
    update whose check alone raised gets ``failed`` of the exception (raised where ``failed``
    is None): the others keep their verdicts."""
    a = check_probability("alpha", alpha)
    preconditions = declaration_checks(declaration, a)
    if preconditions[0].status == "inconsistent":
        return [combine_verdicts([], preconditions=preconditions) for _ in recovered]
    checked = iter(verifier([u for u in recovered if not isinstance(u, Verdict)], a))
    return [_combined(u if isinstance(u, Verdict) else next(checked), preconditions, failed)
            for u in recovered]


def _combined(checked: Checked, preconditions: list[Verdict], failed: Failed | None) -> Verdict:
    """One client-round's verdict from its mechanism's (:func:`verify_update`), or ``failed``
    of what the mechanism's check raised."""
    if isinstance(checked, Exception):
        if failed is None:
            raise checked
        return failed(checked)
    return combine_verdicts([checked], preconditions=preconditions)

"""What the server recovers from a client's update: the summed release ``Σ_t r_t``.

With ``k`` steps of plain SGD, ``θ_k = θ_0 − η Σ_t r_t``, so ``Σ_t r_t = −Δ/η`` and the
noisy clipped sum of privacy-math.md §9 is ``u = L·Σ_t r_t``. Other optimisers
(``torch.optim.SGD`` semantics, state created afresh each round):

* **momentum μ, k = 1:** the first step sets the buffer to the gradient, so the step is plain
  SGD; with Nesterov it is ``(1 + μ)·`` the gradient — ``Σ r = −Δ/(η(1+μ))``.
* **weight decay λ, k = 1:** the step direction is ``r + λθ_0`` — ``Σ r = −Δ/η − λθ_0``.
* **momentum or weight decay with k > 1, a buffer kept across rounds, Adam and any other
  adaptive method:** the update is not a known linear map of the releases (Adam divides each
  coordinate by its own running scale), so no test here holds: ``unverifiable``.

(Plain SGD with weight decay and k > 1 weights step t's noise by ``(1−ηλ)^{k−1−t}``: the
Gaussian test would hold with ``k`` replaced by ``Σ_t (1−ηλ)^{2t}``. Not offered: fedpriv's
clients use plain SGD.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedpriv.errors import InputError
from fedpriv.optimizer_settings import PLAIN_SGD, OptimizerSettings
from fedpriv.validate import check_dim, check_nonnegative, check_positive
from fedpriv.verification.records import RecordCount
from fedpriv.verification.roundoff import FLOAT32_UNIT_ROUNDOFF, roundoff_bound
from fedpriv.verification.verdict import Verdict, unverifiable

__all__ = ["BLOCK", "ClientUpdate", "client_update", "client_updates", "flatten", "row_norms"]

BLOCK = 8
"""Updates recovered (:func:`client_updates`) or measured
(:mod:`~fedpriv.verification.gaussian_batch`) together: 8 × 13,700 float64 (0.9 MB) and their
magnitudes stay in a core's L2 cache."""


def row_norms(rows: np.ndarray) -> np.ndarray:
    """The ℓ2 norm of each row, ``√(r·r)``: what ``np.linalg.norm`` of the row gives, bit for
    bit (it is that expression for a vector)."""
    return np.sqrt([row.dot(row) for row in rows])


def flatten(arrays: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
    """Concatenate parameter arrays (in order, each row-major) into one float64 vector."""
    if isinstance(arrays, np.ndarray):  # a flat float64 vector is returned as it is
        flat = np.asarray(arrays, dtype=np.float64)
        return flat if flat.ndim == 1 else flat.ravel()
    return np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays])


@dataclass(frozen=True)
class ClientUpdate:
    """One client-round as the tests see it.

    Attributes
    ----------
    summed
        ``Σ_t r_t`` recovered from the update (float64, shape ``(p,)``).
    step_scale
        What the optimiser multiplies a release by: ``η`` (``η(1+μ)`` with Nesterov).
    weight_decay
        ``λ`` (k = 1 only).
    steps, batch_size
        ``k`` and the divisor ``L`` of the release.
    records
        The law of the records used, ``B``.
    start_norms, delta_norms
        ``(ℓ1, ℓ2)`` norms of ``θ_0`` and of ``Δ`` (for the rounding slack).
    unit_roundoff
        ``u`` of the client's arithmetic (float32).
    """

    summed: np.ndarray
    step_scale: float
    weight_decay: float
    steps: int
    batch_size: float
    records: RecordCount
    start_norms: tuple[float, float]
    delta_norms: tuple[float, float]
    unit_roundoff: float = FLOAT32_UNIT_ROUNDOFF

    @property
    def dim(self) -> int:
        """The model dimension ``p``."""
        return int(self.summed.size)

    @property
    def noisy_sum(self) -> np.ndarray:
        """``u = L·Σ_t r_t``: the clipped sums plus the noise, summed over steps."""
        return self.batch_size * self.summed

    def summed_error(self, norm_ord: int, release_norm: float) -> float:
        """Bound on the rounding error of :attr:`summed` in the ℓ1 (``norm_ord = 1``) or ℓ2
        norm, given a bound ``release_norm`` on every step's ``‖r_t‖`` in that norm (taken
        before cancellation: for a noisy sum, ``(‖S_t‖ + ‖N_t‖)/L``)."""
        i = 0 if norm_ord == 1 else 1
        start = self.start_norms[i]
        step = self.step_scale * (release_norm + self.weight_decay * start)
        bound = roundoff_bound(start, step, self.steps, self.delta_norms[i], self.unit_roundoff)
        return bound / self.step_scale


def client_update(
    theta: np.ndarray | Sequence[np.ndarray],
    theta_client: np.ndarray | Sequence[np.ndarray],
    *,
    lr: float,
    steps: int,
    batch_size: float,
    records: RecordCount,
    optimizer: OptimizerSettings = PLAIN_SGD,
    fresh_state: bool = True,
    unit_roundoff: float = FLOAT32_UNIT_ROUNDOFF,
) -> ClientUpdate | Verdict:
    """Recover ``Σ_t r_t`` from the broadcast ``θ`` and the returned ``θ_client``.

    Returns an ``unverifiable`` :class:`Verdict` (test ``"optimizer"`` or ``"update"``) when
    the optimiser defeats the tests or the update is not finite (an honest client whose
    training diverged sends NaN, so that is not evidence against its declaration).

    Parameters
    ----------
    theta, theta_client
        Trainable parameters before and after, as one array or a list of arrays in the same
        order (the dtype the client trained in).
    lr, steps, batch_size, records
        ``η``, ``k``, ``L`` and the law of ``B``.
    optimizer, fresh_state
        The declared optimiser (``torch.optim.SGD`` semantics for ``sgd``); ``fresh_state``
        says whether its state (the momentum buffer) is created afresh each round.
    unit_roundoff
        ``u`` of the client's arithmetic.
    """
    eta = check_positive("lr", lr)
    k = check_dim("steps", steps)
    mu = check_nonnegative("momentum", optimizer.momentum)
    decay = check_nonnegative("weight_decay", optimizer.weight_decay)
    start, end = flatten(theta), flatten(theta_client)
    if start.shape != end.shape:
        raise InputError("theta_client", end.shape, f"parameters of the shape {start.shape}")
    reason = _unsupported(optimizer.name, k, mu, decay, fresh_state)
    if reason is not None:
        return unverifiable("optimizer", reason)
    delta = end - start
    if not np.all(np.isfinite(delta)):
        return _NOT_FINITE
    step_scale = eta * (1.0 + mu if optimizer.nesterov and mu > 0 else 1.0)
    with np.errstate(over="ignore"):  # Δ over a hostile lr past float64 is inf: refuted later
        summed = -delta / step_scale
    if decay:  # λθ_0 is 0 otherwise (subtracting ±0.0 leaves every value as it is)
        summed -= decay * start
    return ClientUpdate(
        summed=summed,
        step_scale=step_scale,
        weight_decay=decay,
        steps=k,
        batch_size=check_positive("batch_size", batch_size),
        records=records,
        start_norms=_start_norms(start),
        delta_norms=_norms(delta),
        unit_roundoff=unit_roundoff,
    )


def client_updates(
    theta: np.ndarray | Sequence[np.ndarray],
    theta_clients: Sequence[Sequence[np.ndarray]],
    failed: Callable[[Exception], Verdict] | None = None,
    **kwargs: Any,
) -> list[ClientUpdate | Verdict]:
    """:func:`client_update` of each client's parameters (a list of float32 or float64 arrays)
    against one ``θ`` under one declaration (``kwargs``: :func:`client_update`'s), in order:
    the arguments checked once, the updates recovered :data:`BLOCK` at a time (a dozen numpy
    calls per block instead of per update), each one's ``summed`` a row of its block. The
    arithmetic per element and each row's reductions are :func:`client_update`'s, so every
    update is its, bit for bit; a client whose arrays are of another kind or size is
    recovered by :func:`client_update` alone, and where that raises gets ``failed`` of the
    exception (which is raised where ``failed`` is None): the others keep their updates."""
    start = flatten(theta)
    template = client_update(start, [start], **kwargs)  # Δ = 0: the arguments checked once
    out: list[ClientUpdate | Verdict] = []
    for begin in range(0, len(theta_clients), BLOCK):
        part = theta_clients[begin:begin + BLOCK]
        fits = [_fits(arrays, start.size) for arrays in part]
        if isinstance(template, Verdict):  # the optimiser defeats recovery of every update
            together = [template] * sum(fits)
        else:
            together = _block_updates(
                start, [a for a, fit in zip(part, fits, strict=True) if fit], template)
        rows = iter(together)
        out += [next(rows) if fit else _alone(theta, arrays, failed, kwargs)
                for fit, arrays in zip(fits, part, strict=True)]
    return out


def _alone(
    theta: np.ndarray | Sequence[np.ndarray], arrays: Sequence[np.ndarray],
    failed: Callable[[Exception], Verdict] | None, kwargs: dict[str, Any],
) -> ClientUpdate | Verdict:
    """:func:`client_update` of one client's parameters, or ``failed`` of what it raised."""
    try:
        return client_update(theta, arrays, **kwargs)
    except Exception as exc:  # noqa: BLE001 - whatever a hostile reply makes it raise
        if failed is None:
            raise
        return failed(exc)


_NOT_FINITE = unverifiable("update", "the update is not finite (training diverged?)")
"""An honest client whose training diverged sends NaN: not evidence against its declaration."""


def _fits(arrays: Sequence[np.ndarray], size: int) -> bool:
    """Whether :func:`client_updates` recovers these parameters in a block: a list of float32
    or float64 arrays of ``size`` values in all (what :func:`flatten` converts exactly)."""
    return (not isinstance(arrays, np.ndarray)
            and all(isinstance(a, np.ndarray) and a.dtype in _FLOATS for a in arrays)
            and sum(a.size for a in arrays) == size)


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _block_updates(
    start: np.ndarray, theta_clients: Sequence[Sequence[np.ndarray]], template: ClientUpdate,
) -> list[ClientUpdate | Verdict]:
    """One block of :func:`client_updates`; ``template`` carries what the declaration fixes
    (an update recovered under it)."""
    if not theta_clients:
        return []
    delta = np.empty((len(theta_clients), start.size))
    for row, arrays in zip(delta, theta_clients, strict=True):
        np.concatenate([a.ravel() for a in arrays], out=row)  # flatten: exact float64 values
    delta -= start
    with np.errstate(over="ignore", invalid="ignore"):  # a hostile lr: inf, refuted later
        l1 = np.add.reduce(np.abs(delta), axis=1)  # _norms, row by row
        # a finite ℓ1 norm means every entry is finite; only the others are looked at
        finite = np.isfinite(l1)
        for i in np.flatnonzero(~finite).tolist():
            finite[i] = np.isfinite(delta[i]).all()
        l2 = row_norms(delta)
        summed = np.negative(delta, out=delta)
        summed /= template.step_scale
        if template.weight_decay:
            summed -= template.weight_decay * start
    t = template
    return [ClientUpdate(row, t.step_scale, t.weight_decay, t.steps, t.batch_size, t.records,
                         t.start_norms, (one, two), t.unit_roundoff) if ok else _NOT_FINITE
            for row, one, two, ok in zip(summed, l1.tolist(), l2.tolist(), finite.tolist(),
                                         strict=True)]


def _norms(x: np.ndarray) -> tuple[float, float]:
    return float(np.sum(np.abs(x))), float(np.linalg.norm(x))


_KEPT_NORMS: list[tuple[np.ndarray, tuple[float, float]]] = []


def _start_norms(start: np.ndarray) -> tuple[float, float]:
    """:func:`_norms` of ``θ_0``, kept for the last read-only θ seen: the server verifies every
    reply of a round against one broadcast, which it flattens once and marks read-only
    (``flags.writeable = False``), so the norms cannot go stale; any other array is measured
    afresh."""
    if start.flags.writeable:
        return _norms(start)
    if _KEPT_NORMS and _KEPT_NORMS[0][0] is start:
        return _KEPT_NORMS[0][1]
    _KEPT_NORMS[:] = [(start, _norms(start))]
    return _KEPT_NORMS[0][1]


def _unsupported(optimizer: str, steps: int, momentum: float, decay: float, fresh: bool) -> (
    str | None
):
    """Why the tests do not hold for this optimiser, or None when they do."""
    if optimizer != "sgd":
        return (
            f"optimizer {optimizer!r}: not a known linear map of the releases (adaptive methods "
            "rescale each coordinate), so the noise cannot be checked"
        )
    if momentum > 0 and not fresh:
        return "SGD momentum with a buffer kept across rounds mixes earlier rounds' releases in"
    if steps > 1 and (momentum > 0 or decay > 0):
        what = "momentum" if momentum > 0 else "weight decay"
        return f"SGD with {what} over k = {steps} steps weights the releases unequally"
    return None

"""Steps mode on the server (``audit.release = "steps"``): a reply's step releases read at the
boundary, checked against its update, tested one step at a time, and offered to the attacks.

* :func:`read_steps` conforms the reply's ``step-releases`` ArrayRecord
  (:data:`fedpriv.protocol.STEPS_RECORD`, written by :mod:`clients.step_releases`) to the
  broadcast before reading it: the update's names, shapes ``(k, *tensor shape)`` for the ``k``
  steps the report declares, the broadcast's dtypes, at most
  :data:`~fedpriv.audit.config.MAX_STEP_RELEASE_BYTES`, finite. Whatever fails is that client's
  ``malformed`` (or ``non-finite``) failure, never an exception.
* :func:`strip_steps` removes the record from an accepted reply: the inner strategy aggregates
  the update alone, as in update mode.
* :func:`verify_step_reply` is the client-round's verdict
  (:func:`fedpriv.verification.steps.verify_steps`): the update must be the declared
  optimiser's composition of the releases, then each release is tested by the declared
  mechanism's ``verify`` as one step (less the canaries' share of every step, when inserted).
* :func:`first_step_view` is the attack's view of the first step's release alone — the single
  noisy gradient of the published algorithm's threat model, where update mode offers only the
  pseudo-gradient of ``k`` steps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from flwr.app import ArrayRecord, Message

from attacks.view import ServerView
from fedpriv.audit.config import MAX_STEP_RELEASE_BYTES
from fedpriv.canaries import CanaryDesign, canary_sum
from fedpriv.protocol import STEPS_RECORD, ClientReport
from fedpriv.verification import Verdict
from fedpriv.verification.steps import verify_steps
from strategies.attack_views import declared_view

__all__ = [
    "canary_step_share",
    "first_step_truth",
    "first_step_view",
    "read_steps",
    "strip_steps",
    "verify_step_reply",
]


def _bad(reason: str) -> tuple[str, str]:
    return "malformed", f"malformed reply: {STEPS_RECORD}: {reason}"


def read_steps(
    record: ArrayRecord, names: Sequence[str], broadcast: Sequence[np.ndarray], steps: int,
) -> np.ndarray | tuple[str, str]:
    """The ``(k, p)`` releases of a conforming record (flat per step, in the broadcast's order
    and dtype), else ``(kind, reason)`` of the failure. Shapes, dtypes and the size are checked
    from the record's metadata before anything is read, and again on what was read."""
    keys = list(record.keys())
    if keys != list(names):
        return _bad(f"array names {keys} are not the update's {list(names)}")
    size = steps * sum(b.nbytes for b in broadcast)
    if size > MAX_STEP_RELEASE_BYTES:
        return _bad(f"{steps} steps of the model are {size} bytes, over the limit of "
                    f"{MAX_STEP_RELEASE_BYTES} (audit.release)")
    expected = [((steps, *b.shape), str(b.dtype)) for b in broadcast]
    declared = [(tuple(a.shape), str(a.dtype)) for a in record.values()]
    if declared != expected:
        return _bad(f"shapes and dtypes {declared} are not (steps = {steps}) x the "
                    f"broadcast's {expected}")
    try:
        arrays = [a.numpy() for a in record.values()]
    except Exception as exc:  # noqa: BLE001 - whatever a foreign record holds is its failure
        return _bad(f"unreadable ({type(exc).__name__})")
    if [(a.shape, str(a.dtype)) for a in arrays] != expected:
        return _bad("the arrays read are not the shapes and dtypes their metadata declare")
    if not all(np.isfinite(a).all() for a in arrays):
        return "non-finite", f"{STEPS_RECORD} holds NaN/inf"
    return np.concatenate([a.reshape(steps, -1) for a in arrays], axis=1)


def strip_steps(message: Message) -> None:
    """Remove the step releases from a reply before the inner strategy aggregates it."""
    if STEPS_RECORD in message.content.array_records:
        del message.content[STEPS_RECORD]


def canary_step_share(design: CanaryDesign | None, report: ClientReport) -> np.ndarray | None:
    """The canaries' share of every step's release, ``Σ_in c_j / L`` (None without canaries)."""
    return None if design is None else canary_sum(design) / report.divisor


def verify_step_reply(
    report: ClientReport, broadcast: Sequence[np.ndarray], arrays: Sequence[np.ndarray],
    releases: np.ndarray, alpha: float, offset: np.ndarray | None = None,
) -> Verdict:
    """The client-round's verdict in steps mode (privacy-math.md §9 at ``k = 1`` per step)."""
    return verify_steps(report.declaration(), list(broadcast), list(arrays), releases,
                        report.mechanism.verify, alpha=alpha, offset=offset)


def first_step_view(
    model: tuple[str, tuple[int, ...], int], broadcast: Sequence[np.ndarray],
    releases: np.ndarray, report: ClientReport, offset: np.ndarray | None = None,
) -> ServerView:
    """The attack's view of step 1 alone: the update ``−η·r_1`` of one local step from the
    broadcast θ (``r_1`` less the canaries' share), so ``ServerView.gradient()`` is the first
    step's release itself, not a pseudo-gradient."""
    first = np.asarray(releases[0], np.float64)
    if offset is not None:
        first = first - offset
    bounds = np.cumsum([0, *(b.size for b in broadcast)])
    update = [(-report.lr * first[lo:hi]).reshape(b.shape)
              for b, lo, hi in zip(broadcast, bounds[:-1], bounds[1:], strict=True)]
    one_step = dataclasses.replace(report, local_steps=1)
    return declared_view(model, broadcast, update, one_step)


def first_step_truth(report: ClientReport) -> list[int]:
    """The records of step 1 (the oracle's, for scoring its attack), in order of first use."""
    if report.oracle is None or not report.oracle.record_ids:
        return []
    return list(dict.fromkeys(report.oracle.record_ids[0]))


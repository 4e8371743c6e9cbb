"""The server's canary audit of each client-round (privacy-math.md §10, docs/canaries.md).

With ``[audit.canaries]`` on, every client whose mechanism is additive adds the round's
in-canaries to each step's clipped sum (:func:`fedpriv.canaries.round_design`: a design from
the run's seed, the client and the round, which the server derives too). For each reply the
:class:`CanaryAuditor`

1. removes the canaries' share of the update, ``−η·k·Σ_{in} c_j / L``
   (:func:`fedpriv.canaries.canary_displacement`), so that the verification, the attacks and
   the aggregate see the update of the client's own records — exactly with one local step,
   up to a term of second order in ``η`` with more (the audit store keeps the update as
   received);
2. scores the canaries in ``−Δ/η`` under the *declared* mechanism (``Mechanism.canary_scores``)
   and pools the in/out scores with the client's earlier rounds;
3. states ε lower bounds (``audit.canaries.method`` at ``confidence``) for the round and for
   the pool, against the canary's formal ε (:func:`fedpriv.canaries.canary_epsilon`: the
   round's releases without subsampling — a canary is in every step);
4. gives a verdict: ``inconsistent`` when the round's bound exceeds the round's canary ε.

Fresh canaries per round, pooled, bound the largest per-round ε of a canary, so the pooled
bound is compared with the largest per-round canary ε. The pool holds the client's most recent
rounds up to :data:`POOLED_CANARIES` canaries: beyond about that many the one-run bound's
``2mδ`` term lowers it at δ = 10⁻⁵ (docs/canaries.md), and the cost of a bound, linear in the
canaries, stays bounded in long runs. The real records' ε (the ledger's) is untouched: to them
the canary sum is a constant shift of the released sum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, Message

from fedpriv.accounting import ReleaseEvent
from fedpriv.accounting.accountable import unaccountable
from fedpriv.audit.config import AuditConfig
from fedpriv.canaries import (
    CanaryDesign,
    EpsilonLowerBound,
    canary_displacement,
    canary_epsilon,
    canary_events,
    estimate,
    inclusion,
    one_run_test,
    round_design,
)
from fedpriv.jsonio import jsonable
from fedpriv.mechanisms import Mechanism
from fedpriv.protocol import ClientReport
from fedpriv.verification import Verdict

__all__ = ["POOLED_CANARIES", "CanaryAuditor", "CanaryRound", "with_arrays"]

#: Most canaries in a client's pooled bound (at least its latest round's).
POOLED_CANARIES = 10_000


@dataclass(frozen=True)
class CanaryRound:
    """One client-round's canary audit: the tally's ``epsilon_lower`` and the verdict."""

    lower: dict[str, Any]
    verdict: Verdict
    memory: dict[str, np.ndarray] = field(default_factory=dict)  # the pool entry (resume)


@dataclass
class _Pool:
    """A client's most recent audited rounds: their in/out scores and canary ε."""

    rounds: list[int] = field(default_factory=list)
    ins: list[np.ndarray] = field(default_factory=list)
    outs: list[np.ndarray] = field(default_factory=list)
    formal: list[float] = field(default_factory=list)

    def add(self, rnd: int, ins: np.ndarray, outs: np.ndarray, formal: float) -> None:
        """Append a round, then drop the oldest while more than :data:`POOLED_CANARIES`."""
        self.rounds.append(rnd)
        self.ins.append(ins)
        self.outs.append(outs)
        self.formal.append(formal)
        while len(self.rounds) > 1 and self.canaries > POOLED_CANARIES:
            for column in (self.rounds, self.ins, self.outs, self.formal):
                del column[0]

    @property
    def canaries(self) -> int:
        return sum(i.size + o.size for i, o in zip(self.ins, self.outs, strict=True))


def _ratio(value: float, formal: float) -> float | None:
    """``ε_lower / ε_formal``; None where the formal ε is infinite or zero."""
    return value / formal if 0.0 < formal < math.inf else None


class CanaryAuditor:
    """Removes, scores and bounds the canaries of a run's client-rounds (module docstring).

    Parameters
    ----------
    audit
        The run's ``[audit]`` section (its ``canaries``, ``delta`` and ``accountant``).
    seed
        The run's seed (the canaries' designs derive from it).
    """

    def __init__(self, audit: AuditConfig, seed: int) -> None:
        self.settings = audit.canaries
        self.seed = seed
        self.delta = audit.delta
        self.accountant = audit.accountant
        self._pools: dict[int, _Pool] = {}

    def design(self, rnd: int, client: int, mechanism: Mechanism, dim: int) -> CanaryDesign | None:
        """The canaries the client inserted this round under its declared mechanism, or None."""
        s = self.settings
        return round_design(self.seed, client, rnd, dim, enabled=s.enabled, count=s.count,
                            kind=s.kind, sensitivity=mechanism.sensitivity,
                            norm_ord=mechanism.norm_ord, additive=mechanism.additive)

    def unaccountable(self, rnd: int, client: int, report: ClientReport, dim: int) -> str | None:
        """Why the canary ε of this client-round (:func:`fedpriv.canaries.canary_epsilon`: the
        round's releases without subsampling) cannot be accounted by the run's accountant;
        None when it can, or when the client inserted no canaries."""
        if self.design(rnd, client, report.mechanism, dim) is None:
            return None
        events = canary_events([ReleaseEvent(report.mechanism.release(dim), 1.0,
                                             report.local_steps)])
        reason = unaccountable(events, self.delta, accountant=self.accountant)
        return None if reason is None else f"the round's canary epsilon: {reason}"

    def without_canaries(
        self, rnd: int, client: int, report: ClientReport, arrays: Sequence[np.ndarray],
    ) -> list[np.ndarray] | None:
        """``arrays`` — the client's parameters or its update, as received — less the
        canaries' share under its ``report`` (its mechanism, ``η``, ``k`` and the expected
        batch size ``L = q·n`` it divided by); None where the client inserted none."""
        dim = sum(a.size for a in arrays)
        design = self.design(rnd, client, report.mechanism, dim)
        if design is None:
            return None
        share = canary_displacement(design, lr=report.lr, steps=report.local_steps,
                                    batch_size=report.divisor)
        bounds = np.cumsum([0, *(a.size for a in arrays)])
        return [(a - share[lo:hi].reshape(a.shape)).astype(a.dtype)
                for a, lo, hi in zip(arrays, bounds[:-1], bounds[1:], strict=True)]

    def score(
        self, rnd: int, client: int, report: ClientReport, update: np.ndarray,
    ) -> CanaryRound | None:
        """Score the canaries of one flat update ``Δ`` as received under the client's
        ``report``, add them to the client's pool (rounds in increasing order) and bound ε;
        None without canaries or scores."""
        mechanism, steps = report.mechanism, report.local_steps
        design = self.design(rnd, client, mechanism, update.size)
        if design is None:
            return None
        scores = mechanism.canary_scores(design, -np.asarray(update, np.float64) / report.lr,
                                         batch_size=report.divisor, steps=steps)
        if scores is None:
            return None
        bits = inclusion(design)
        formal = canary_epsilon(mechanism.release(design.dim), steps, self.delta, self.accountant)
        entry = {"ins": scores[bits], "outs": scores[~bits], "formal": np.array([formal])}
        pool = self.remember(rnd, client, entry)
        own = self._bound(scores[bits], scores[~bits])
        pooled = own if len(pool.rounds) == 1 else self._bound(np.concatenate(pool.ins),
                                                               np.concatenate(pool.outs))
        verdict = self._verdict(own, formal, scores[bits], scores[~bits])
        return CanaryRound(self._lower(rnd, pool, own, pooled, formal, verdict), verdict, entry)

    def remember(self, rnd: int, client: int, entry: dict[str, np.ndarray]) -> _Pool:
        """Add a scored round to the client's pool from its entry (:attr:`CanaryRound.memory`:
        the in and out scores and the canary ε; ``--resume`` rebuilds the pools from them)."""
        ins, outs, formal = (np.asarray(entry.get(k)) for k in ("ins", "outs", "formal"))
        if ins.ndim != 1 or outs.ndim != 1 or formal.shape != (1,) or not all(
                a.dtype.kind == "f" for a in (ins, outs, formal)) or not (
                np.isfinite(ins).all() and np.isfinite(outs).all()):
            raise ValueError("a canary entry holds finite 'ins' and 'outs' scores and one "
                             f"'formal' ε, not shapes {list(ins.shape)}, {list(outs.shape)} "
                             f"and {list(formal.shape)}")
        pool = self._pools.setdefault(client, _Pool())
        pool.add(rnd, ins, outs, float(formal[0]))
        return pool

    def _bound(self, ins: np.ndarray, outs: np.ndarray) -> EpsilonLowerBound:
        return estimate(self.settings.method, ins, outs, delta=self.delta,
                        confidence=self.settings.confidence)

    def _verdict(
        self, bound: EpsilonLowerBound, formal: float, ins: np.ndarray, outs: np.ndarray
    ) -> Verdict:
        """``inconsistent`` when the round's bound exceeds the canary's formal ε."""
        stats = {"epsilon_lower": bound.epsilon, "epsilon_formal": formal,
                 "canaries": bound.canaries}
        if not math.isfinite(formal):
            return Verdict("canaries", "unverifiable", "the declared mechanism gives a canary no "
                           "formal epsilon to compare its lower bound with", statistic=stats,
                           refutes_only=True)  # a lower bound that refutes nothing
        p_value = None
        if bound.method == "one-run":
            p_value = one_run_test(ins, outs, epsilon=formal, delta=self.delta)
        exceeds = bound.epsilon > formal
        relation = "exceeds" if exceeds else "does not exceed"
        reason = (f"{bound.canaries} canaries: the {bound.method} lower bound epsilon >= "
                  f"{bound.epsilon:.3g} at {bound.confidence:.0%} confidence {relation} the "
                  f"declared mechanism's epsilon {formal:.3g} for a canary")
        return Verdict("canaries", "inconsistent" if exceeds else "consistent", reason,
                       p_value=p_value, alpha=1.0 - bound.confidence, statistic=stats,
                       speaks_to=("noise-scale",) if exceeds else (), refutes_only=True)

    def _lower(
        self, rnd: int, pool: _Pool, own: EpsilonLowerBound, pooled: EpsilonLowerBound,
        formal: float, verdict: Verdict,
    ) -> dict[str, Any]:
        """The tally's ``epsilon_lower``: the bound pooled over the client's recent rounds
        (beside their largest canary ε), and this round's own in ``round``."""
        largest = max(pool.formal)
        return jsonable({
            "value": pooled.epsilon, "confidence": pooled.confidence, "method": pooled.method,
            "rigorous": pooled.rigorous, "canaries": pooled.canaries, "delta": self.delta,
            "epsilon_formal": largest, "ratio": _ratio(pooled.epsilon, largest),
            "accountant": self.accountant, "rounds": list(pool.rounds),
            "kind": self.settings.kind,
            "assumption": pooled.assumption,
            "round": {
                "round": rnd, "value": own.epsilon, "canaries": own.canaries,
                "epsilon_formal": formal, "ratio": _ratio(own.epsilon, formal),
                "status": verdict.status, "p_value": verdict.p_value, "detail": dict(own.detail),
            },
        })  # fmt: skip


def with_arrays(message: Message, arrays: Sequence[np.ndarray]) -> None:
    """Replace the parameters a reply carries (its one ArrayRecord, names and order kept)."""
    (key, record), = message.content.array_records.items()
    message.content[key] = ArrayRecord(
        {name: Array(np.ascontiguousarray(a)) for name, a in zip(record, arrays, strict=True)})

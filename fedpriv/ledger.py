"""The privacy ledger: every client's releases folded into its cumulative tallies.

Flower-free and store-free: the auditing server folds each accepted round of a client into the
ledger and writes the returned tally; ``--resume`` rebuilds the ledger by folding the stored
rounds again, in the same order, which gives the same tallies. A fold is all or nothing, and the
server first asks :meth:`PrivacyLedger.unaccountable` whether the round's declared releases can
be folded at all (the run's accountant over the client's history: a reply's claim the
accountant cannot account is that client's failure, never the run's end). Per client it keeps

* the accountant's ledger of :class:`~fedpriv.accounting.events.ReleaseEvent` — cumulative ε at
  δ over every release (privacy-math.md §3);
* the cumulative log Bayes capacity, summed over releases (an upper bound, §5);
* the cumulative MBP bound ξ (pure LDP parameters add) and the ABP bound it implies (§6);
* whether the server could check its declarations (privacy-math.md §9): the ``guarantee`` is
  ``verified`` while every round's update was consistent with the declared mechanism and
  every ε-relevant property of it passed a test of useful power
  (:mod:`fedpriv.verification.properties`), per-record sensitivity included (a replay with the
  simulation oracle), ``noise-verified`` while every round is that or passed all but a
  sensitivity that could not be replayed (sensitivity assumed),
  ``declared`` once a round could not be checked, ``none`` for a mechanism without a formal
  guarantee, and ``unbounded`` from the first round whose update contradicted its declaration —
  from then on ε and log C are infinite, with the declared values kept beside them
  (``epsilon_declared``, ``log_capacity_declared``); ``undeclared`` from the first round the
  client released an update without declaring anything (a stock Flower client,
  :meth:`PrivacyLedger.fold_undeclared`): nothing bounds what it released, so ε, log C and the
  MBP bound are infinite from then on.

Secrets are measured in sensitivities: record level ``r = 1`` (one example, ``r = C``), batch
level ``r = L`` (§5, "Which r and s").

Each row also carries Theorem 4.3 of Zhang & Chen (:mod:`fedpriv.leakage.robustness`) at the
ledger's ``pac_beta``: ``pac_accuracy``, the accuracy α of one release of the declared mechanism
(its noise law, :meth:`~fedpriv.mechanisms.base.Mechanism.pac_accuracy`; given by the caller),
and ``pac_robust_confidence = 1 − (1 + 4ξ)β`` with ξ the client's cumulative MBP bound — stored
as 0 when the theorem is vacuous (``(1 + 4ξ)β ≥ 1``, or ξ = ∞ as for the Gaussian): a
probability of at least 0 is the vacuous statement. ξ of everything the client released bounds
the MBP of each single release too (a marginal's posterior is an average of the joint's), so
the confidence holds for each release, conservatively, and never grows over rounds.

The unit of privacy is part of every ε (``unit``, ``neighbouring``): record-level mechanisms
(DP-SGD) protect one record against add/remove; a client-level release (privacy-math.md §11,
``fedpriv/mechanisms/client_gaussian.py``) protects the client's whole data, and its ``epsilon``
is the guarantee against the server (replace-one neighbours, one release per round the client
took part in, no amplification by the server's client sampling). Beside it,
``epsilon_central`` is the guarantee against a third party that sees only the aggregate
(a client under the run's neighbouring relation, composed over every round so far), accounted
as the server sampled: a fixed number ``m`` of the ``N`` clients each round, without
replacement (:meth:`PrivacyLedger.sampled`; privacy-math.md §14, docs/client-level.md).
Record-level releases are accounted as they were sampled too: Poisson batches at rate ``q``, or
fixed-size batches of ``m`` of the client's ``n`` records (``train.sampling = "fixed"``), under
the run's relation (``audit.neighbouring``: add/remove or replace-one) — amplified only at a
local size the server verified (the simulation engine's partition, ``[[strategy.nodes]]``): a
record-level round whose size it did not verify is accounted at ``q = 1``, every record in every
release, in ``epsilon`` and ``epsilon_observed`` alike (a claimed n = 10⁹ would otherwise buy
any ε), its ``sampling`` saying so (:data:`UNVERIFIED_SIZE`). Every row names its ``sampling``
and ``neighbouring``. ``epsilon_declared`` is always the ε of the releases as the client
declared them, at its claimed sampling too: above ``epsilon`` never, equal to it while every
update was consistent and every size verified.

Beside the declared ε and the canary lower bound, ``epsilon_observed`` is an upper confidence
bound from what the server saw (:mod:`fedpriv.verification.observed`): every release accounted,
by the run's accountant, at the least noise scale the client's updates show at confidence
:data:`~fedpriv.verification.observed.OBSERVED_CONFIDENCE` (rounded down to a 1 % grid, so
clients share accountings), assuming per-example clipping at the declared C. It is infinite
once a round's noise could not be observed (VMF, an adaptive optimiser), an update contradicted
its declaration, or the bound is below what an accountant can take (σ, λ < 10⁻⁴).

Clients with the same history of releases have the same ε and capacities: a round's fold is
computed once per distinct history (the clients' shared :class:`ClientLedger`) and round, its
ledger and row shared (the accountant keeps each ledger's ε too:
:func:`fedpriv.accounting.epsilon`), so folding a round of N clients costs O(distinct
histories) accounting and O(N) lookups (issues #16, #37); each client's observed noise is its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from fedpriv.accounting import (
    AccountingResult,
    ClientAccountant,
    Release,
    ReleaseEvent,
    accountable,
)
from fedpriv.accounting.central import central_epsilon, central_sampling
from fedpriv.accounting.sampling import check_neighbouring, level_relation
from fedpriv.errors import InputError
from fedpriv.kept import KeptAnswers
from fedpriv.leakage.bayesian import abp_bound
from fedpriv.leakage.capacity import THREAT_MODELS
from fedpriv.leakage.robustness import pac_robust_confidence
from fedpriv.ledger_observed import NOT_OBSERVED, observed_document
from fedpriv.validate import check_dim
from fedpriv.verification.observed import NoiseObservation, ObservedNoise

__all__ = ["NEIGHBOURS", "NOT_OBSERVED", "UNVERIFIED_SIZE", "ClientLedger", "PrivacyLedger",
           "accounted_sampling", "secret_radius_units"]

NEIGHBOURS = {"record": "{relation} one record",
              "client": "replace one client's data (against the server)"}
"""The neighbouring relation behind ``epsilon`` for each unit of privacy (``{relation}``: the
run's ``audit.neighbouring`` for a record)."""


def secret_radius_units(threat_model: str, batch_size: float) -> float:
    """The secret radius in sensitivities: 1 (record level) or ``L`` (batch level)."""
    if threat_model not in THREAT_MODELS:
        raise ValueError(f"threat model {threat_model!r} not in {THREAT_MODELS}")
    return 1.0 if threat_model == "record" else float(batch_size)


@lru_cache(maxsize=1024)
def _log_capacity(release: Release, dim: int, radius: float) -> float:
    return release.log_bayes_capacity(dim, radius)


@dataclass
class ClientLedger:
    """One client's running totals (cumulative over every release it made), its observed noise
    aside (:attr:`PrivacyLedger.observed`): clients with the same history share one, so it is
    never changed in place — a fold or an undeclared round makes a new one."""

    accountant: ClientAccountant
    releases: int = 0
    log_capacity: float = 0.0
    mbp_bound: float = 0.0
    rounds: list[int] = field(default_factory=list)
    inconsistent: bool = False
    unverified: bool = False
    noise_only: bool = False  # a round noise-verified: per-record sensitivity assumed (issue 42)
    unit: str = "record"
    central: Release | None = None  # client level: the release against the aggregate
    undeclared: bool = False
    #: the releases at the sampling the client claimed, kept from its first round whose local
    #: size the server did not verify (None: every round's size was verified, and the
    #: accountant's releases are the claimed ones)
    claimed: ClientAccountant | None = None
    unamplified: int = 0  # rounds accounted at q = 1 for want of a verified local size


UNVERIFIED_SIZE = "local size not verified by the server"
"""Why a record-level round is accounted at sample rate 1 (the tally's ``sampling`` says so)."""
_KEPT_ANSWERS = 4096
"""Most :meth:`PrivacyLedger.unaccountable` answers, and :class:`_Folded` histories, kept
(distinct histories and rounds; the least recently used dropped first)."""


@dataclass(frozen=True)
class _Folded:
    """One round folded into one history: the new ledger, its accountant's result and its row
    but ``epsilon_observed`` and ``pac_accuracy`` — shared by the clients with that previous
    ledger (one object) and round. ``previous`` is held so that its ``id`` in
    :meth:`PrivacyLedger.fold`'s key stays its own."""

    previous: ClientLedger | None
    ledger: ClientLedger
    result: AccountingResult  # the accountant's result of ``ledger``
    row: dict[str, Any]


def accounted_sampling(unit: str, size_verified: bool, sample_rate: float,
                       population: int | None) -> tuple[float, int | None, bool]:
    """``(q, population, unamplified)`` of a round, for :meth:`~PrivacyLedger.fold` and
    :meth:`~PrivacyLedger.unaccountable` alike: as claimed at the client level or a verified
    size, else every record in every release (fixed-size ``m`` of ``n``: ``m`` of ``m``)."""
    if unit != "record" or size_verified or not sample_rate < 1.0:
        return sample_rate, population, False
    return 1.0, (None if population is None else round(sample_rate * population)), True


class PrivacyLedger:
    """Per-client tallies of a run.

    Parameters
    ----------
    delta
        δ of the reported ε.
    accountant
        ``"tightest"``, ``"rdp"`` or ``"pld"`` (:class:`~fedpriv.accounting.ClientAccountant`).
    threat_model
        ``"record"`` or ``"batch"``: the secret the capacity and ξ are about.
    pac_beta
        β of the PAC fields (``audit.pac_beta``).
    neighbouring
        ``"add-remove"`` or ``"replace-one"`` (``audit.neighbouring``): the relation of the
        record-level ``epsilon`` and of ``epsilon_central``.
    """

    def __init__(self, delta: float, accountant: str = "rdp", threat_model: str = "record",
                 pac_beta: float = 0.01, neighbouring: str = "add-remove"):
        self.delta, self.accountant, self.threat_model = delta, accountant, threat_model
        self.pac_beta, self.neighbouring = pac_beta, check_neighbouring(neighbouring)
        self.clients: dict[int, ClientLedger] = {}
        self.client_samples: dict[int, tuple[int, int]] = {}  # round -> (m sampled, of N)
        self._accountable: KeptAnswers[str | None] = KeptAnswers(_KEPT_ANSWERS)
        self._folded: KeptAnswers[_Folded] = KeptAnswers(_KEPT_ANSWERS)  # fold()'s histories
        #: Each client's observed noise so far (``epsilon_observed``): its own, not its history's.
        self.observed: dict[int, ObservedNoise] = {}
        #: The largest ``epsilon`` any fold has returned: the worst client's ε so far.
        self.worst_epsilon = 0.0

    def sampled(self, rnd: int, count: int, population: int) -> None:
        """The server sampled ``count`` of its ``population`` clients in round ``rnd``, without
        replacement (``epsilon_central``; a count above the population is the population)."""
        population = check_dim("population", population)
        self.client_samples[rnd] = (min(check_dim("count", count), population), population)
        self._folded.clear()  # epsilon_central of a kept row reads the client samples

    def __iter__(self) -> Iterator[int]:
        return iter(self.clients)

    def fold(
        self, rnd: int, client_id: int, release: Release, *, steps: int, sample_rate: float,
        batch_size: float, dim: int, verification: str | None = None,
        accuracy: float | None = None, unit: str = "record", verified: bool | None = None,
        observation: NoiseObservation | str | None = None, population: int | None = None,
        size_verified: bool = True, noise_verified: bool = False,
        observed_bound: float | None = None,
    ) -> dict[str, Any]:
        """Add one round's ``steps`` releases, sampled at ``sample_rate`` (Poisson, or fixed-size
        from ``population`` records); return the cumulative tally row (the audit store's
        ``tallies`` columns).

        ``verification`` is the round's verdict on the update against its declaration
        (``"consistent"``, ``"inconsistent"``, ``"unverifiable"``; ``None``: not checked);
        ``accuracy`` the PAC accuracy α of one release at :attr:`pac_beta` (None: not stated);
        ``unit`` the unit of privacy (``"record"`` or ``"client"``, :data:`NEIGHBOURS`);
        ``observation`` what the update showed of its noise
        (:class:`~fedpriv.verification.observed.NoiseObservation`, or why nothing; None: not
        observed), folded into ``epsilon_observed`` (its bound ``observed_bound`` if found already);
        ``verified`` whether every ε-relevant property of the round passed with useful power
        (:mod:`fedpriv.verification.properties`; None: a consistent verdict is taken as
        verified, the rule before per-property verdicts);
        ``noise_verified`` whether the round's label is ``noise-verified`` (every property but
        ``sensitivity``, which was not replayed: the client's guarantee is then at best
        ``noise-verified``);
        ``size_verified`` whether the server verified the local size ``sample_rate`` and
        ``population`` rest on (the round's ``size-sampling`` property passed: the engine's
        partition or ``[[strategy.nodes]]``). A record-level round whose size it did not verify
        is accounted without amplification by sampling (``q = 1``: every record in every
        release) in ``epsilon`` and ``epsilon_observed``; the claimed sampling is kept in
        ``epsilon_declared``.

        The fold is all or nothing: it is computed on a copy of the client's ledger, which
        replaces it only once the row is complete, so a release the accounting fails on
        (:meth:`unaccountable` says why beforehand) leaves the client's tallies as they were."""
        steps = check_dim("steps", steps)
        if unit not in NEIGHBOURS:
            raise ValueError(f"unit {unit!r} not in {list(NEIGHBOURS)}")
        previous = self.clients.get(client_id)
        args = (rnd, release, steps, sample_rate, batch_size, dim, verification, unit, verified,
                population, size_verified, noise_verified)
        folded = self._folded.get((id(previous), *args),
                                  lambda: self._fold_history(previous, *args))
        seen = replace(self.observed.get(client_id) or ObservedNoise())
        bound = seen.add(NOT_OBSERVED if observation is None else observation, observed_bound)
        row = {**folded.row, "pac_accuracy": accuracy if folded.ledger.releases else None,
               "epsilon_observed": self._observed(folded.ledger, folded.result, seen)}
        if row["epsilon_observed"] is not None and observation is not None:
            this = (observation.as_dict() if isinstance(observation, NoiseObservation)
                    else observation)
            row["epsilon_observed"] = {**row["epsilon_observed"], "round_bound": bound,
                                       "round_observation": this}
        self.clients[client_id], self.observed[client_id] = folded.ledger, seen
        self.worst_epsilon = max(self.worst_epsilon, row["epsilon"])
        return row

    def _fold_history(
        self, previous: ClientLedger | None, rnd: int, release: Release, steps: int,
        sample_rate: float, batch_size: float, dim: int, verification: str | None, unit: str,
        verified: bool | None, population: int | None, size_verified: bool,
        noise_verified: bool,
    ) -> _Folded:
        """:meth:`fold`'s part that the client's history and round decide (its arguments, in
        order): a new ledger from a copy of ``previous`` (a new one for a new client), and
        its row but the client's own ``epsilon_observed`` and ``pac_accuracy`` — kept by
        :meth:`fold` for every client of that history and round."""
        ledger = self._new() if previous is None else self._copy(previous)
        ledger.unit = unit
        if unit == "client":  # its release class is the pair against the server, as it is
            ledger.central = release.central()
            ledger.accountant.neighbouring = level_relation(unit, self.neighbouring)
        rate, size, unamplified = accounted_sampling(unit, size_verified, sample_rate, population)
        if unamplified and ledger.claimed is None:
            ledger.claimed = ledger.accountant.copy()
        if ledger.claimed is not None:
            ledger.claimed.record(release, sample_rate, steps, population)
        ledger.unamplified += unamplified
        ledger.accountant.record(release, rate, steps, size)
        radius = secret_radius_units(self.threat_model, batch_size)
        round_capacity = steps * _log_capacity(release, dim, radius)
        ledger.releases += steps
        ledger.log_capacity += round_capacity
        ledger.mbp_bound += steps * release.pure_ldp_epsilon(radius)
        ledger.rounds.append(rnd)
        ledger.inconsistent |= verification == "inconsistent"
        ledger.unverified |= verification != "consistent" or (verified is False
                                                              and not noise_verified)
        ledger.noise_only |= noise_verified
        result = ledger.accountant.result(self.delta)
        row = self._history_row(ledger, result, None)
        row["log_capacity_round"] = (math.inf if verification == "inconsistent"
                                     else round_capacity)
        return _Folded(previous, ledger, result, row)

    def unaccountable(
        self, client_id: int, release: Release, *, steps: int, sample_rate: float,
        batch_size: float, dim: int, unit: str = "record", population: int | None = None,
        size_verified: bool = True,
    ) -> str | None:
        """Why this round's releases cannot be folded into the client's tallies, in one line
        (None: they can): the run's accountant cannot account the client's ledger with them
        (:func:`fedpriv.accounting.accountable.unaccountable`), or another part of the tally
        fails on them (capacity, MBP bound, client-level ε). Asked before :meth:`fold`, with
        the same arguments (``size_verified`` too: :func:`accounted_sampling`); the ledger is
        left as it was. The server records a reason as the client's failure (kind
        ``unaccountable``, docs/trust.md §1)."""
        previous = self.clients.get(client_id)
        history = () if previous is None else previous.accountant.events
        try:
            rate, size, _ = accounted_sampling(unit, size_verified, sample_rate, population)
            events = [*history, ReleaseEvent(release, rate, steps, size)]
        except InputError as exc:
            return f"{exc.key} = {exc.value!r}: expected {exc.allowed}"
        # the answer depends on the history and the round alone, which a round's clients
        # share: computed once per distinct key, not once per reply
        key = (tuple(events), batch_size, dim, unit, size_verified, sample_rate, population,
               tuple(self.client_samples.items()))
        return self._accountable.get(key, lambda: self._unaccountable(
            client_id, previous, events, release, steps=steps, sample_rate=sample_rate,
            batch_size=batch_size, dim=dim, unit=unit, population=population,
            size_verified=size_verified))

    def _unaccountable(
        self, client_id: int, previous: ClientLedger | None, events: list[ReleaseEvent],
        release: Release, *, steps: int, sample_rate: float, batch_size: float, dim: int,
        unit: str, population: int | None, size_verified: bool,
    ) -> str | None:
        """:meth:`unaccountable`, computed: the accountant, then a trial fold."""
        relation = level_relation(unit, self.neighbouring)
        reason = accountable.unaccountable(events, self.delta, accountant=self.accountant,
                                           neighbouring=relation)
        if reason is not None:
            return reason
        trial = PrivacyLedger(self.delta, self.accountant, self.threat_model, self.pac_beta,
                              self.neighbouring)
        trial.client_samples = dict(self.client_samples)
        if previous is not None:
            trial.clients[client_id] = previous
        try:  # on a ledger of its own: fold replaces the client's entry only when it succeeds
            trial.fold(0, client_id, release, steps=steps, sample_rate=sample_rate,
                       batch_size=batch_size, dim=dim, unit=unit, population=population,
                       size_verified=size_verified)
        except Exception as exc:  # noqa: BLE001 - any failure to tally a claim is the claim's
            return f"the tally of this declaration fails: {type(exc).__name__}: {exc}"
        return None

    def fold_undeclared(self, rnd: int, client_id: int) -> dict[str, Any]:
        """Record a round in which the client released an update without a report (a stock
        Flower client): its number of releases and their mechanism are unknown, so no
        accountant can bound them — ε, log C (cumulative and this round's) and the MBP bound
        are infinite from now on, the guarantee ``undeclared``. The declared releases before
        it, if any, stay in ``epsilon_declared`` and ``log_capacity_declared``."""
        ledger = self._ledger(client_id)  # shared with its history's clients: a new one
        self.clients[client_id] = replace(ledger, rounds=[*ledger.rounds, rnd], undeclared=True)
        return {**self.tally(client_id), "log_capacity_round": math.inf}

    def tally(self, client_id: int, *, accuracy: float | None = None) -> dict[str, Any]:
        """The client's cumulative tally row as it stands, with no release this round
        (``log_capacity_round = 0``): what a round the client sat out, e.g. declining for its
        budget, leaves. A client without releases has ε = 0 and no ``guarantee`` or PAC
        fields (no release to state them of)."""
        ledger = self._ledger(client_id)
        result = ledger.accountant.result(self.delta)
        seen = self.observed.get(client_id) or ObservedNoise()
        return {**self._history_row(ledger, result, accuracy),
                "epsilon_observed": self._observed(ledger, result, seen)}

    def _observed(self, ledger: ClientLedger, result: AccountingResult,
                  seen: ObservedNoise) -> dict[str, Any] | None:
        """The ``epsilon_observed`` document of a client's ledger (``result``: its
        accountant's) and its observed noise (:func:`fedpriv.ledger_observed.observed_document`)."""
        return observed_document(ledger.accountant, ledger.inconsistent or ledger.undeclared,
                                 result, seen, self.delta)

    def _history_row(self, ledger: ClientLedger, acct: AccountingResult,
                     accuracy: float | None) -> dict[str, Any]:
        """:meth:`tally` of one client's ledger (``acct``: its accountant's result), but for
        ``epsilon_observed`` (None here), which is the client's own (:attr:`observed`)."""
        claimed = acct if ledger.claimed is None else ledger.claimed.result(self.delta)
        broken = ledger.inconsistent or ledger.undeclared
        mbp = math.inf if broken else ledger.mbp_bound
        released = ledger.releases > 0 or ledger.undeclared
        # nothing declared at all (a stock client's rounds only): no declared value to keep
        declared = None if ledger.undeclared and not ledger.releases else claimed.epsilon
        sampling = acct.sampling if not ledger.unamplified else (
            f"{acct.sampling} (q = 1 in {ledger.unamplified} of {len(ledger.rounds)} rounds: "
            f"{UNVERIFIED_SIZE})")
        confidence = pac_robust_confidence(mbp, self.pac_beta).confidence
        pac = (confidence or 0.0) if released else None  # 0: vacuous
        return {
            "epsilon": math.inf if broken else acct.epsilon, "epsilon_declared": declared,
            "delta": self.delta, "accountant": acct.accountant, "route": acct.route,
            "optimal_order": acct.optimal_order, "sampling": sampling,
            "compose": "per-round" if ledger.unit == "client" else "per-step",
            "releases": ledger.releases, "log_capacity_round": 0.0,
            "log_capacity_cumulative": math.inf if broken else ledger.log_capacity,
            "log_capacity_declared": None if declared is None else ledger.log_capacity,
            "threat_model": self.threat_model,
            "mbp_bound": mbp, "abp_bound": abp_bound(mbp),
            "guarantee": self._guarantee(ledger, acct.epsilon) if released else None,
            "pac_accuracy": accuracy if ledger.releases else None, "pac_robust_confidence": pac,
            "epsilon_observed": None,
            **self._units(ledger),
        }  # fmt: skip

    def _units(self, ledger: ClientLedger) -> dict[str, Any]:
        """The unit columns; at the client level ``epsilon_central``, how clients were sampled
        for it and the last round's client sampling rate too (module docstring)."""
        relation = NEIGHBOURS[ledger.unit].format(relation=self.neighbouring)
        out: dict[str, Any] = {"unit": ledger.unit, "neighbouring": relation,
                               "epsilon_central": None, "client_rate": None}
        if ledger.unit != "client" or not self.client_samples:
            return out
        m, n = self.client_samples[max(self.client_samples)]
        out.update(client_rate=m / n, central_neighbouring=f"{self.neighbouring} one client",
                   central_sampling=central_sampling(m, n))
        if ledger.inconsistent or ledger.central is None:
            return {**out, "epsilon_central": math.inf}
        central = ledger.central
        rounds = ((central, m, n) for m, n in self.client_samples.values())
        return {**out, "epsilon_central": central_epsilon(
            rounds, self.delta, accountant=self.accountant,
            neighbouring=self.neighbouring).epsilon}

    def _ledger(self, client_id: int) -> ClientLedger:
        return self.clients.setdefault(client_id, self._new())

    def _new(self) -> ClientLedger:
        return ClientLedger(ClientAccountant(self.accountant, neighbouring=self.neighbouring))

    @staticmethod
    def _copy(ledger: ClientLedger) -> ClientLedger:
        """A copy of a ledger that :meth:`fold` may change without touching the ledger (shared
        by the clients of its history) until it succeeds."""
        claimed = None if ledger.claimed is None else ledger.claimed.copy()
        return replace(ledger, accountant=ledger.accountant.copy(), rounds=list(ledger.rounds),
                       claimed=claimed)

    @staticmethod
    def _guarantee(ledger: ClientLedger, declared_epsilon: float) -> str:
        if ledger.inconsistent:
            return "unbounded"
        if ledger.undeclared:
            return "undeclared"
        if math.isinf(declared_epsilon):
            return "none"
        if ledger.unverified:
            return "declared"
        return "noise-verified" if ledger.noise_only else "verified"

    def mbp_bound(self, client_id: int) -> float:
        """The client's cumulative MBP bound ξ so far (``0`` before any release; ``inf`` once an
        update contradicted its declaration or one came without a declaration)."""
        ledger = self.clients.get(client_id)
        if ledger is None:
            return 0.0
        return math.inf if ledger.inconsistent or ledger.undeclared else ledger.mbp_bound

"""The server's replay of a release's clipped signal, with the simulation oracle (issue 42).

:class:`SensitivityReplay` adds to a client-round's verdict

* ``"sensitivity"`` (:func:`fedpriv.verification.sensitivity.sensitivity_test`): with the
  labelled simulation oracle (``audit.ground_truth``) the reply names the records of each step;
  the server rebuilds the model at ``θ`` (the broadcast; in steps mode ``θ_t`` composed from the
  earlier step releases by the declared optimiser), recomputes the clipped sum of those records
  with the library's per-example gradients (:func:`fedpriv.gradients.gradient_source`, the
  declared mechanism's ``clip_bounds`` and norm, divided by the declared ``L``) and tests the
  release less that signal as the declared noise. Replayed: the Gaussian and the Laplace
  record-level mechanisms (the residual tested as the declared law: χ² and normal projections,
  or Gamma and Chernoff-bounded Laplace projections), one local step in update mode, every step
  in steps mode; and a client-level Gaussian release, whose sensitivity is its clip bound
  ``S``: the ``k`` plain local steps recomputed on the oracle's batches, their update clipped
  to ``S``, the rest tested as ``N(0, (σS)² I)`` (:meth:`SensitivityReplay._client_update`).
  Not replayed (``unverifiable``, saying why, so the label says "per-record sensitivity
  assumed"): no oracle, several local steps in update mode (``θ_1 … θ_{k−1}`` are not sent),
  the vMF mechanism (its release is a direction drawn around the clipped signal's: no
  additive residual has a law free of the signal), an optimiser whose release is not
  recovered (client level: FedProx's proximal term over several steps), a model whose arrays
  are not its parameters in order;
* the noise law's sides on the replayed residual, at full power
  (:func:`fedpriv.verification.sensitivity.residual_law_test`, speaking to ``noise-law``);
* ``"step-freshness"`` in steps mode (:func:`fedpriv.verification.sensitivity.
  step_freshness_test`), with or without the oracle;
* ``"committed-noise"`` where the replay ran and the client declares its noise drawn from the
  run's seeded stream (``noise-stream``; fedpriv's own client where it opted in to that stream,
  as in fedpriv's simulations; its noise is otherwise its secret): the batches and the noise
  re-drawn exactly and the release held to its replayed signal plus that noise within rounding
  (:mod:`fedpriv.verification.committed`: deterministic, speaking to ``sensitivity``).

All enter as preconditions (:func:`fedpriv.verification.with_preconditions`): they can refute a
round, and the labels read them (``fedpriv/verification/properties.py``). Never raises: what a
hostile reply makes the replay raise is ``unverifiable`` with the reason.

Rounding: the client computes in float32 and the server in float64; the slack on the
residual's ℓ2 norm is the update's own round-off bound
(:meth:`~fedpriv.verification.update.ClientUpdate.summed_error`, update mode) plus
``REPLAY_TOLERANCE·B·C/L`` for the client's float32 clipped sum of ``B`` records (measured
differences are ~10⁻⁶ of it).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np

from fedpriv.data import Dataset
from fedpriv.mechanisms.gaussian import GaussianMechanism
from fedpriv.mechanisms.laplace import LaplaceMechanism
from fedpriv.protocol import ClientReport
from fedpriv.seeding import SEEDED_NOISE
from fedpriv.verification import ClientUpdate, Verdict, unverifiable, with_preconditions
from fedpriv.verification.committed import committed_test
from fedpriv.verification.sensitivity import (
    SPEAKS_TO,
    ReplayedRelease,
    cumulative_test,
    residual_law_test,
    sensitivity_test,
    step_freshness_test,
    steps_sensitivity,
)
from fedpriv.verification.steps import compose_sgd
from fedpriv.verification.update import flatten
from strategies.committed_redraw import redraw

__all__ = ["MEMORY_KIND", "PARTITION_RECORDS", "REPLAY_TOLERANCE", "SensitivityReplay"]

log = logging.getLogger(__name__)

REPLAY_TOLERANCE = 1e-4
"""Relative allowance for the client's float32 clipped sum against the float64 replay."""
PARTITION_RECORDS = 512
"""Records of the client's partition (its first ones) whose mean clipped gradient is the
hidden-steps direction."""
ASSUMED = "per-record sensitivity assumed"
_NO_ORACLE = ("not replayed: the server knows the records a release used only from the "
              "labelled simulation oracle (audit.ground_truth = true)")
MEMORY_KIND = "sensitivity-rounds"
"""The kind of the store's ``memory`` row holding a client's cross-round evidence."""


class SensitivityReplay:
    """The replay of one run (module docstring).

    Parameters
    ----------
    dataset
        The run's data set (the records the oracle names).
    model
        ``(name, input_shape, num_classes)`` of the run's model.
    partitions
        Each client's record ids (the simulation's partition), or None when unknown.
    seed
        The run's seed (:mod:`fedpriv.seeding`), to re-draw committed noise; None: not
        re-drawn.
    delta, accountant
        The run's δ and accountant. The power is stated in ε through the RDP accountant
        whatever ``accountant`` is (the ratio of RDP ε's at the run's δ; ~10⁻⁴ s against
        ~0.3–1.5 s per client-round for a PLD route, measured).
    """

    def __init__(self, dataset: Dataset, model: tuple[str, tuple[int, ...], int],
                 partitions: Sequence[np.ndarray] | None = None, *, delta: float = 1e-5,
                 accountant: str = "rdp", proximal: float = 0.0,
                 seed: int | None = None) -> None:
        self.dataset, self.model = dataset, model
        self.partitions, self.seed = partitions, seed
        self.delta, self.accountant = delta, accountant
        self.proximal = proximal  # FedProx's μ (strategy.proximal_mu), which clients add
        # per client: direction -> (Σ z, Σ z², n) of its replayed releases, and its looks; kept
        # in the store as the client's "sensitivity-rounds" memory row (memory, remember)
        self._evidence: dict[int, dict[str, tuple[float, float, int]]] = {}
        self._looks: dict[int, int] = {}
        self._module = None  # the run's model in float64, built at the first replay

    @classmethod
    def for_run(cls, audit, dataset: Dataset, model: tuple, config) -> SensitivityReplay:  # noqa: ANN001
        """The replay of a run: its partition from ``config`` (None: unknown)."""
        partitions, strategy = None, getattr(config, "strategy", None)
        if config is not None:
            from fedpriv.data.partition import client_partitions

            partitions = client_partitions(config.data, dataset.train_y.numpy(), config.seed)
        return cls(dataset, model, partitions, delta=audit.delta, accountant=audit.accountant,
                   proximal=float(getattr(strategy, "proximal_mu", None) or 0.0),
                   seed=None if config is None else config.seed)

    # -- the pipeline's one call -----------------------------------------------------------

    def joined(self, verdict: Verdict, client_id: int, report: ClientReport,
               broadcast: Sequence[np.ndarray], recovered: ClientUpdate | Verdict,
               releases: np.ndarray | None, offset: np.ndarray | None = None, *,
               alpha: float) -> Verdict:
        """``verdict`` with this round's ``sensitivity`` (and, in steps mode,
        ``step-freshness``) as preconditions, each at ``alpha`` (``audit.verify_alpha``)."""
        refuted = verdict.status == "inconsistent"  # the law's sides would add nothing new
        checks = self.sensitivity(client_id, report, broadcast, recovered, releases, offset,
                                  alpha, law_tests=not refuted)
        if releases is not None and _law(report) == "gaussian" and not refuted:
            s = _scale(report)
            if s > 0 and math.isfinite(s):
                checks.append(step_freshness_test(np.asarray(releases), s, alpha))
        return with_preconditions(verdict, checks)

    def sensitivity(self, client_id: int, report: ClientReport,
                    broadcast: Sequence[np.ndarray], recovered: ClientUpdate | Verdict,
                    releases: np.ndarray | None, offset: np.ndarray | None = None,
                    alpha: float = 1e-6, *, law_tests: bool = True) -> list[Verdict]:
        """The ``sensitivity`` verdict of one client-round (at ``α/2``) and, once replayed,
        the noise law's sides on the residual (at ``α``, with ``law_tests``), the committed
        noise re-drawn where the client declares it (deterministic) and, Gaussian, the
        client's ``sensitivity-rounds`` (at ``α/2`` over the run); never raises."""
        why = self._not_replayed(report, recovered, releases)
        if why is not None:
            return [unverifiable("sensitivity", f"{ASSUMED}: {why}", speaks_to=SPEAKS_TO)]
        law = _law(report)
        try:
            verdict, tested, residuals, released = self._replay(
                client_id, report, broadcast, recovered, releases, offset, alpha / 2.0)
            shape = residual_law_test(residuals, _scale(report), law, alpha) if law_tests else []
        except Exception as exc:  # noqa: BLE001 - a hostile reply's replay is its failure
            log.warning("replay of client %d failed: %s: %s", client_id, type(exc).__name__, exc)
            return [unverifiable("sensitivity", f"{ASSUMED}: the replay failed "
                                 f"({type(exc).__name__}: {exc})", speaks_to=SPEAKS_TO)]
        try:  # on its own: a failed re-draw must not discard the replay's verdicts
            shape += self._committed(client_id, report, broadcast, residuals, released)
        except Exception as exc:  # noqa: BLE001
            log.warning("re-draw of client %d failed: %s: %s", client_id, type(exc).__name__,
                        exc)
            shape.append(unverifiable("committed-noise", f"the re-draw failed "
                                      f"({type(exc).__name__}: {exc})", speaks_to=SPEAKS_TO))
        evidence = self._evidence.setdefault(client_id, {})
        for release in tested:
            for name in ("signal", "unclipped", "partition"):
                z = release.statistic.get(f"z_{name}")
                if z is not None:
                    total, squares, n = evidence.get(name, (0.0, 0.0, 0))
                    evidence[name] = (total + z, squares + z * z, n + 1)
        if law != "gaussian":  # the cross-round test's normal law is the Gaussian's
            return [verdict, *shape]
        look = self._looks[client_id] = self._looks.get(client_id, 0) + 1
        return [verdict, *shape, cumulative_test(evidence, look, alpha / 2.0)]

    def _committed(self, client_id: int, report: ClientReport, broadcast: Sequence[np.ndarray],
                   residuals: list[tuple[np.ndarray, float]],
                   released: list[np.ndarray]) -> list[Verdict]:
        """``[committed-noise]`` where the client declares its noise drawn from the run's
        seeded stream and the server knows the seed and its partition, else ``[]``."""
        oracle = report.oracle
        if oracle is None or oracle.noise_stream != SEEDED_NOISE or self.seed is None \
                or self.partitions is None or not 0 <= client_id < len(self.partitions):
            return []
        partition = np.asarray(self.partitions[client_id])
        redrawn = redraw(report.mechanism, seed=self.seed, client_id=client_id,
                         server_round=report.server_round, local_size=len(partition),
                         batch_size=report.batch_size, sampling=report.sampling,
                         steps=report.local_steps, shapes=[np.shape(a) for a in broadcast],
                         # fedpriv's client trains in float32 (build_model's dtype), whatever
                         # the broadcast's (a server optimiser may send float64)
                         dtype=np.dtype(np.float32),
                         divisor=1.0 if report.client_level
                         else report.declaration().batch_size)
        return [committed_test(residuals, released, redrawn, partition,
                               oracle.record_ids, _scale(report))]

    # -- memory (--resume) ---------------------------------------------------------------------

    def memory(self, client_id: int) -> dict[str, np.ndarray] | None:
        """The client's cross-round evidence so far as named arrays (the store's ``memory`` row
        of kind :data:`MEMORY_KIND`): ``look`` and, per direction, ``(Σ z, Σ z², n)``; None
        before its first replay. Cumulative: the latest row is the whole evidence."""
        if client_id not in self._looks:
            return None
        state = {"look": np.array([self._looks[client_id]], np.int64)}
        for name, (total, squares, n) in self._evidence.get(client_id, {}).items():
            state[f"z_{name}"] = np.array([total, squares, float(n)], np.float64)
        return state

    def remember(self, client_id: int, state: dict[str, np.ndarray]) -> None:
        """Rebuild the client's evidence from a :meth:`memory` row (``--resume``; rows read in
        round order, so the last is the latest). ValueError when the row is not one."""
        look = np.asarray(state.get("look", ()))
        if look.shape != (1,) or not np.issubdtype(look.dtype, np.integer) or look[0] < 1:
            raise ValueError("sensitivity-rounds must hold one positive integer 'look'")
        evidence: dict[str, tuple[float, float, int]] = {}
        for key, value in state.items():
            if key == "look":
                continue
            row = np.asarray(value, np.float64)
            if not key.startswith("z_") or row.shape != (3,) or not np.isfinite(row).all() \
                    or row[2] < 0 or row[2] != int(row[2]):
                raise ValueError(f"sensitivity-rounds member {key!r} must be (Σ z, Σ z², n)")
            evidence[key[2:]] = (float(row[0]), float(row[1]), int(row[2]))
        self._looks[client_id], self._evidence[client_id] = int(look[0]), evidence

    # -- internals --------------------------------------------------------------------------

    def _not_replayed(self, report: ClientReport, recovered: ClientUpdate | Verdict,
                      releases: np.ndarray | None) -> str | None:
        mechanism = report.mechanism
        if report.client_level:
            return self._client_not_replayed(report, recovered)
        if mechanism.name == "vmf":
            return ("the vMF release is not replayed: its noise is the law of a direction "
                    "given the clipped signal, not an additive residual the server can test "
                    "apart from it")
        if _law(report) is None or not _scale(report) > 0:
            return ("replay tests the Gaussian and Laplace mechanisms only, not "
                    f"{mechanism.name!r}")
        if report.oracle is None:
            return _NO_ORACLE
        if releases is None and report.local_steps > 1:
            return (f"not replayed: {report.local_steps} local steps in update mode — the "
                    "parameters θ_1 … θ_{k−1} the later steps were computed at are not sent "
                    "(audit.release = 'steps' replays every step)")
        if releases is None and isinstance(recovered, Verdict):
            return f"not replayed: {recovered.reason}"
        if releases is not None and report.optimizer.name != "sgd":
            return f"not replayed: optimizer {report.optimizer.name!r} is not recomposed"
        return None

    def _client_not_replayed(self, report: ClientReport,
                             recovered: ClientUpdate | Verdict) -> str | None:
        """Why a client-level release is not replayed (None: it is, :meth:`_client_update`)."""
        if _law(report) is None or not _scale(report) > 0:
            return f"a client-level {report.mechanism.name!r} release is not replayed"
        if report.oracle is None:
            return _NO_ORACLE
        if len(report.oracle.record_ids) != report.local_steps:
            return (f"not replayed: the oracle names {len(report.oracle.record_ids)} batches "
                    f"for {report.local_steps} declared local steps")
        if report.optimizer.name != "sgd":
            return f"not replayed: optimizer {report.optimizer.name!r} is not recomposed"
        if self.proximal and report.local_steps > 1:
            return "not replayed: FedProx's proximal term is not recomposed"
        if isinstance(recovered, Verdict):
            return f"not replayed: {recovered.reason}"
        return None

    def _client_update(self, report: ClientReport, theta: np.ndarray,
                       recovered: ClientUpdate) -> tuple[np.ndarray, ReplayedRelease]:
        """A client-level release and its replay: the ``k`` plain local steps recomputed from
        ``θ`` on the oracle's batches (the mean raw gradient over the declared divisor ``L``,
        the declared SGD), their update ``Δ`` clipped to ``S`` as the client clips it
        (:func:`fedpriv.mechanisms.client_gaussian.clip_update`): the release less it is
        ``N(0, (σS)² I)``. Directions: the clipped update (a scaled one) and its excess over
        ``S`` (no clipping). Slack: the update's round-off plus ``REPLAY_TOLERANCE·k`` of
        ``S + ‖Δ‖`` for the client's float32 steps."""
        d, divisor = report.optimizer, float(report.divisor)
        if report.sampling == "fixed":
            divisor = float(round(divisor))
        rows: list[np.ndarray] = []
        current = theta
        for ids in report.oracle.record_ids:
            if rows:
                current = compose_sgd(theta, np.stack(rows), lr=report.lr, optimizer=d).theta
            rows.append(self._source(current, ids).gradient_sum().detach().numpy() / divisor)
        raw = compose_sgd(theta, np.stack(rows), lr=report.lr, optimizer=d).theta - theta
        bound, norm = report.mechanism.sensitivity, float(np.linalg.norm(raw))
        clipped = raw if norm <= bound else raw * (bound / norm)
        release = -recovered.summed  # the update Δ: its declaration is one step of lr 1
        slack = (recovered.summed_error(2, 2.0 * float(np.linalg.norm(release)) + 1.0)
                 + REPLAY_TOLERANCE * len(rows) * (bound + norm))
        return release, ReplayedRelease(clipped, {"signal": clipped, "unclipped": raw - clipped},
                                        slack)

    def _source(self, theta: np.ndarray, ids: Sequence[int]):  # noqa: ANN202
        """The per-example gradients of records ``ids`` at ``θ`` (float64)."""
        import torch

        from fedpriv.gradients import gradient_source

        if self._module is None:  # one per run: its parameters are overwritten per replay
            from fedpriv.models import build_model

            self._module = build_model(*self.model).to(torch.float64)
        model = self._module
        params = list(model.parameters())
        if sum(p.numel() for p in params) != theta.size:
            raise ValueError(f"the model has {sum(p.numel() for p in params)} parameters, the "
                             f"update {theta.size}")
        torch.nn.utils.vector_to_parameters(torch.from_numpy(np.ascontiguousarray(theta)), params)
        x = self.dataset.train_x[list(ids)].to(torch.float64)
        return gradient_source(model, x, self.dataset.train_y[list(ids)])

    def _signal(self, client_id: int, report: ClientReport, theta: np.ndarray,
                ids: Sequence[int]) -> ReplayedRelease:
        """The clipped signal of records ``ids`` at ``θ`` over the declared ``L``, with the
        alternative directions."""
        import torch

        from fedpriv.gradients import gradient_source

        mechanism = report.mechanism
        bounds, order = mechanism.clip_bounds, mechanism.norm_ord
        source = self._source(theta, ids)
        model = self._module
        clipped = source.clipped_sum(bounds, order).detach().numpy()
        excess = source.gradient_sum().detach().numpy() - clipped
        directions = {"signal": clipped, "unclipped": excess}
        if self.partitions is not None and 0 <= client_id < len(self.partitions):
            own = np.asarray(self.partitions[client_id])[:PARTITION_RECORDS].tolist()
            whole = gradient_source(model, self.dataset.train_x[own].to(torch.float64),
                                    self.dataset.train_y[own])
            directions["partition"] = whole.clipped_sum(bounds, order).detach().numpy()
        L = report.declaration().batch_size
        slack = REPLAY_TOLERANCE * max(len(ids), 1) * mechanism.sensitivity / L
        return ReplayedRelease(clipped / L, directions, slack)

    def _epsilon_at(self, report: ClientReport):  # noqa: ANN202
        from fedpriv.accounting import ReleaseEvent, epsilon

        sampling = report.release_sampling
        release = report.mechanism.release(1)  # σ or λ: its noise parameter, whatever p

        def at(sigma: float) -> float:
            event = ReleaseEvent(release.with_parameter(sigma), sampling["sample_rate"],
                                 report.releases, sampling["population"])
            return epsilon([event], self.delta, accountant="rdp").epsilon

        return at

    def _replay(self, client_id: int, report: ClientReport, broadcast: Sequence[np.ndarray],
                recovered: ClientUpdate | Verdict, releases: np.ndarray | None,
                offset: np.ndarray | None, alpha: float,
                ) -> tuple[Verdict, list[Verdict], list[tuple[np.ndarray, float]],
                           list[np.ndarray]]:
        """The round's ``sensitivity`` verdict at ``alpha``, every replayed release's, each
        release's residual with its rounding slack (ℓ2), and each release."""
        mechanism = report.mechanism
        d = report.declaration()
        s, law = _scale(report), _law(report)
        theta = flatten(broadcast)
        batches = report.oracle.record_ids
        at = self._epsilon_at(report)
        sigma = mechanism.release(1).parameter
        if report.client_level:  # the update is the release
            assert isinstance(recovered, ClientUpdate)
            release, replayed = self._client_update(report, theta, recovered)
            one = sensitivity_test(release, replayed, noise_std=s, noise_multiplier=sigma,
                                   alpha=alpha, epsilon_at=at)
            return one, [one], [(release - replayed.signal, replayed.slack)], [release]
        if releases is None:  # update mode, one step: the recovered release
            assert isinstance(recovered, ClientUpdate)
            replayed = self._signal(client_id, report, theta, batches[0])
            release = recovered.summed
            bound = 2.0 * float(np.linalg.norm(release)) + 1.0
            slack = replayed.slack + recovered.summed_error(2, bound)
            one = sensitivity_test(release, ReplayedRelease(replayed.signal, replayed.directions,
                                                            slack),
                                   noise_std=s, noise_multiplier=sigma, alpha=alpha,
                                   epsilon_at=at, law=law)
            return one, [one], [(release - replayed.signal, slack)], [release]
        rows = np.asarray(releases)
        k = rows.shape[0]
        plain = d.optimizer.momentum == 0 and d.optimizer.weight_decay == 0
        verdicts, residuals, released, current = [], [], [], theta
        for t in range(k):
            if t > 0:  # θ_t from the earlier step releases (the declared optimiser)
                current = (current - d.lr * np.asarray(rows[t - 1], np.float64) if plain else
                           compose_sgd(theta, rows[:t], lr=d.lr, optimizer=d.optimizer).theta)
            replayed = self._signal(client_id, report, current, batches[t])
            release = np.asarray(rows[t], np.float64)
            if offset is not None:
                release = release - offset
            verdicts.append(sensitivity_test(release, replayed, noise_std=s,
                                             noise_multiplier=sigma, alpha=alpha / k,
                                             epsilon_at=at, law=law))
            residuals.append((release - replayed.signal, replayed.slack))
            released.append(release)
        return steps_sensitivity(verdicts, alpha), verdicts, residuals, released


def _law(report: ClientReport) -> str | None:
    """The replayed noise law of the report's mechanism (None: not replayed)."""
    mechanism = report.mechanism
    if isinstance(mechanism, LaplaceMechanism):
        return "laplace"
    if isinstance(mechanism, GaussianMechanism):  # record or client level
        return "gaussian"
    return None


def _scale(report: ClientReport) -> float:
    """The declared noise's scale per coordinate of one release: ``σC/L`` (Gaussian std; the
    client level: ``σS``, its declared divisor 1) or ``λC/L`` (Laplace scale); 0 for a
    mechanism not replayed."""
    mechanism, law = report.mechanism, _law(report)
    noise = {"gaussian": getattr(mechanism, "noise_std", 0.0),
             "laplace": getattr(mechanism, "noise_scale", 0.0)}.get(law, 0.0)
    return noise / report.declaration().batch_size

"""The identification game's attacker: likelihood-optimal guesses from a client's release.

privacy-math.md §13. The secret is one record of the client's batch (the first), hidden among
``M − 1`` public look-alikes (the candidate pool), the rest of the batch known to the attacker
(the informed adversary of the record-level threat model). For an additive release
``u = Σ_i ḡ_i + n`` (``u = L·g̃``, one local step) the attacker computes each candidate's
clipped gradient at the broadcast parameters and names the candidate whose clipped gradient,
added to the known rest, is nearest to the release: ℓ2 for Gaussian noise (maximum likelihood
for isotropic Gaussian noise, whatever σ), ℓ1 for Laplace noise (maximum likelihood for i.i.d.
Laplace coordinates), exact match without noise.

Trials. Each trial draws the secret uniformly and **fresh noise from the declared mechanism's
law** (Gaussian ``N(0, s²I)``, Laplace ``Lap(b)^p``; none for ``none``/``clip``), from a
generator seeded by the run's seed, round and client, so the ``n`` trials are independent
Bernoulli draws of one success probability and the Clopper–Pearson interval on it holds
(Clopper & Pearson 1934). The earlier design re-used the client's one noise vector under signed
permutations; those trials share that draw, and the interval's coverage failed (an honest client
at ``p = 100`` flagged ≈ 10 % of the time at a nominal 2.5 %; docs/leakage.md).

Scale. The client's actual noise ``n = u − Σ_i ḡ_i`` is known in simulation (ground truth). The
trials use ``s = min(s_declared, s_U)``, ``s_U`` the ``1 − β`` upper confidence bound on the
scale of ``n`` under the declared law (``‖n‖₂/s ~ χ_p``; ``‖n‖₁/b ~ Gamma(p, 1)``), at
``β =`` :data:`SCALE_BETA`. For an honest client ``s_U ≥ s_declared`` except with probability
``β``, so the game is the declared mechanism's; a client that added less noise than it declared
is played at a scale its own noise supports, so its release's leakage shows. A noise vector
shaped unlike the declared law but of the declared size is not detected here (the noise-law
tests of docs/trust.md are). Nearest-candidate success is non-increasing in ``s`` (a Voronoi
cell is star-shaped about its site), so under an honest client's null the success probability
is at most the declared mechanism's except with probability ``β``: the game's p-value
(:func:`fedpriv.leakage.game.identification_leakage`) adds ``β``.

Cost: the trials run in chunks of at most :data:`CHUNK_ELEMENTS` doubles of
``trials × candidates × coordinates`` (one trial at least: then the working array is the
candidates' own size), ``O(trials · M · p)`` time.

The bound ``log_bound`` is the declared release's Bayes capacity on the candidates (§5, secret
radius ``C``: record level). For the Gaussian, noise orthogonal to the candidates' affine span
carries no information and that span has dimension at most ``M − 1``, so §5's formula is taken
in ``min(p, M − 1)`` dimensions (the secret set lies in a ball of radius ``C`` there); for the
Laplace (not rotation invariant) in ``p``. Either way at most ``log M``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from attacks.view import ServerView
from fedpriv.errors import InputError

if TYPE_CHECKING:
    from fedpriv.leakage.game import IdentificationLeakage
    from fedpriv.mechanisms import Mechanism

__all__ = ["CHUNK_ELEMENTS", "LAW_NORMS", "SCALE_BETA", "GameSettings", "PlayedGame",
           "candidates_log_capacity", "game_noise_scale",
           "identification_game", "play_identification"]

#: Doubles of one chunk of trials (``trials × candidates × coordinates``): 2²⁴, 128 MiB.
CHUNK_ELEMENTS = 1 << 24

#: The level of the upper confidence bound on the client's noise scale (module docstring).
SCALE_BETA = 1e-9

#: Noise law → the norm of the likelihood-optimal (nearest-candidate) guess under it.
LAW_NORMS = {"gaussian": 2, "laplace": 1, "none": 2}


@dataclass(frozen=True)
class PlayedGame:
    """One client-round's game: its leakage and the noise its trials drew."""

    leakage: IdentificationLeakage
    law: str
    declared_scale: float
    scale: float

    def noise(self) -> dict[str, float | str]:
        """The ``noise`` record of the game's report row (module docstring)."""
        return {"law": self.law, "declared_scale": self.declared_scale, "scale": self.scale,
                "scale_beta": SCALE_BETA, "trials": "fresh noise of the declared law"}


@dataclass(frozen=True)
class GameSettings:
    """Trials, confidence and seed of one game (``[audit]`` ``game_trials``, …)."""

    trials: int = 1000
    confidence: float = 0.95
    seed: int = 0


def game_noise_scale(law: str, declared: float, noise: np.ndarray,
                     beta: float = SCALE_BETA) -> float:
    """The scale the trials draw noise at: ``min(declared, s_U)``.

    Parameters
    ----------
    law
        ``"gaussian"`` (``declared`` the std ``σC`` of each coordinate), ``"laplace"`` (the
        scale ``b = λC``) or ``"none"`` (no noise: 0).
    declared
        The declared mechanism's scale.
    noise
        ``(p,)``: the client's actual noise ``u − Σ_i ḡ_i``.
    beta
        ``s_U`` is the ``1 − β`` upper confidence bound on the scale of ``noise`` under
        ``law``: ``‖n‖₂ / sqrt(χ²_p⁻¹(β))`` (``‖n‖₂²/s² ~ χ²_p``) or ``‖n‖₁ / Γ_p⁻¹(β)``
        (``‖n‖₁/b ~ Gamma(p, 1)``).
    """
    from scipy import stats

    if law not in LAW_NORMS:
        raise InputError("game.law", law, f"one of {sorted(LAW_NORMS)}")
    if law == "none" or declared == 0.0:
        return 0.0
    n = np.asarray(noise, dtype=np.float64).ravel()
    if law == "gaussian":
        upper = float(np.linalg.norm(n)) / float(np.sqrt(stats.chi2.ppf(beta, n.size)))
    else:
        upper = float(np.abs(n).sum()) / float(stats.gamma.ppf(beta, n.size))
    return min(float(declared), upper)


def _draw(law: str, scale: float, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    if law == "none" or scale == 0.0:
        return np.zeros(shape)
    if law == "gaussian":
        return rng.normal(0.0, scale, size=shape)
    return rng.laplace(0.0, scale, size=shape)


def play_identification(
    candidates: np.ndarray, trials: int, rng: np.random.Generator, law: str = "gaussian",
    scale: float = 1.0,
) -> int:
    """Successes of the nearest-candidate attacker over ``trials`` independent games.

    Each trial draws the secret uniformly and fresh noise of ``law`` at ``scale``; the attacker
    names the candidate nearest the release in the law's likelihood norm (:data:`LAW_NORMS`),
    ties broken at random. The successes are ``Binomial(trials, P)``, so the Clopper–Pearson
    interval (C. J. Clopper, E. S. Pearson, Biometrika 26(4), 1934) covers ``P``.

    Parameters
    ----------
    candidates
        ``(M, p)``: each candidate's clipped gradient; the secret is one of them, uniformly.
        The release minus the known rest of the batch is ``candidates[secret] + noise``.
    trials
        The number of games, at most 10⁶ (``audit.game_trials``).
    rng
        The game's seeded generator.
    law, scale
        The noise law (a key of :data:`LAW_NORMS`) and its scale (:func:`game_noise_scale`).
    """
    cands = np.asarray(candidates, dtype=np.float64)
    if cands.ndim != 2 or cands.shape[0] < 2 or cands.shape[1] < 1:
        raise InputError("game.candidates", cands.shape, "(M >= 2, p >= 1)")
    if law not in LAW_NORMS:
        raise InputError("game.law", law, f"one of {sorted(LAW_NORMS)}")
    if not (np.isfinite(scale) and scale >= 0):
        raise InputError("game.scale", scale, "a finite number >= 0")
    m, p = cands.shape
    chunk = max(1, CHUNK_ELEMENTS // (m * p))  # bounded before any trial allocates
    wins, left = 0, int(trials)
    while left > 0:
        k = min(chunk, left)
        left -= k
        secrets = rng.integers(m, size=k)
        released = cands[secrets] + _draw(law, scale, (k, p), rng)
        dist = np.linalg.norm(released[:, None, :] - cands[None, :, :], ord=LAW_NORMS[law],
                              axis=2)
        ties = dist == dist.min(axis=1, keepdims=True)
        guess = np.argmax(np.where(ties, rng.random((k, m)), -1.0), axis=1)  # random tie-break
        wins += int(np.count_nonzero(guess == secrets))
    return wins


def _clipped(model, images: np.ndarray, labels: np.ndarray, mechanism: Mechanism) -> np.ndarray:
    import torch

    from fedpriv.gradients import per_example_gradients
    from fedpriv.gradients.clipping import clip_flat, clip_per_layer

    x = torch.as_tensor(np.asarray(images, dtype=np.float32))
    y = torch.as_tensor(np.asarray(labels, dtype=np.int64))
    grads, _ = per_example_gradients(model, x, y)
    bounds = getattr(mechanism, "clip_bounds", None)
    if bounds is not None:
        sizes = [p.numel() for p in model.parameters()]
        grads = (clip_per_layer(grads, sizes, bounds, mechanism.norm_ord) if len(bounds) > 1
                 else clip_flat(grads, bounds[0], mechanism.norm_ord))
    return grads.detach().double().numpy()


def _declared_law(mechanism: Mechanism, dim: int) -> tuple[str, float] | None:
    """``(law, scale)`` of the declared release's noise on the sum (its law's scale in
    sensitivity units times ``C``); ``("none", 0)`` without a guarantee (``none``, ``clip``,
    σ = 0); None for a release that states no law."""
    from fedpriv.accounting.events import NoGuarantee

    release = mechanism.release(dim)
    law = release.noise_law
    if law is None:
        return ("none", 0.0) if isinstance(release, NoGuarantee) else None
    name, multiplier = law
    return (name, multiplier * mechanism.sensitivity) if name in LAW_NORMS else None


def candidates_log_capacity(mechanism: Mechanism, dim: int, candidates: int,
                            releases: int = 1) -> float:
    """``log C`` of ``releases`` releases of ``mechanism`` (model dimension ``dim``) about one
    record among ``candidates``, the rest of the batch fixed: record level (``r = C``), the
    Gaussian's in the candidates' span (``min(p, M − 1)`` dimensions, module docstring); the
    releases' ``log C`` add (privacy-math.md §5). ``inf`` for an update-level mechanism (no
    record-level bound here) and where the mechanism gives none."""
    if mechanism.level != "record":
        return math.inf
    release = mechanism.release(dim)
    if mechanism.name == "gaussian":  # isotropic: only the candidates' span informs (doc)
        dim = min(dim, candidates - 1)
    one = float(release.log_bayes_capacity(dim, 1.0))
    return one * releases


def identification_game(
    view: ServerView, mechanism: Mechanism, batch: tuple[np.ndarray, np.ndarray],
    pool: tuple[np.ndarray, np.ndarray], settings: GameSettings,
) -> PlayedGame | None:
    """Play the game on one client-round; ``None`` where it does not apply.

    Parameters
    ----------
    view
        The server's view of the update (one local step: ``u = L·g̃``).
    mechanism
        The mechanism the client *declared* (its bound is checked).
    batch
        The records the round used (images, labels): the secret is the first, the rest known.
    pool
        The distractors (images, labels), ``M − 1 ≥ 1`` of them.
    settings
        Trials, confidence, seed.

    Returns ``None`` for several local steps (the update is not one release), for non-additive
    or update-level mechanisms (VMF directions, client-level Gaussian), and for a mechanism
    whose release states no noise law (:attr:`fedpriv.accounting.events.Release.noise_law`):
    the trials need one to draw from.
    """
    from fedpriv.leakage.game import identification_leakage
    from fedpriv.verification.update import flatten

    if view.local_steps != 1 or mechanism.level != "record":
        return None
    if getattr(mechanism, "clip_bounds", None) is not None and not mechanism.additive:
        return None
    if _declared_law(mechanism, 1) is None:
        return None
    images, labels = batch
    others, other_labels = pool
    if len(images) < 1 or len(others) < 1:
        raise InputError("game.pool", len(others), "a true record and >= 1 distractor")
    model = view.build_model()
    truth = _clipped(model, images, labels, mechanism)
    cands = np.concatenate([truth[:1], _clipped(model, others, other_labels, mechanism)])
    release = view.batch_size * flatten(view.gradient())
    noise = release - truth.sum(axis=0)
    law, declared = _declared_law(mechanism, noise.size)
    scale = game_noise_scale(law, declared, noise)
    rng = np.random.default_rng(settings.seed)
    wins = play_identification(cands, settings.trials, rng, law, scale)
    leakage = identification_leakage(wins, settings.trials, len(cands),
                                     candidates_log_capacity(mechanism, noise.size, len(cands)),
                                     settings.confidence, scale_beta=SCALE_BETA)
    return PlayedGame(leakage, law, declared, scale)

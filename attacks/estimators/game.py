"""The identification game's attacker: likelihood-optimal guesses from a client's release.

privacy-math.md §13. The secret is one record of the client's batch (the first), hidden among
``M − 1`` public look-alikes (the candidate pool), the rest of the batch known to the attacker
(the informed adversary of the record-level threat model). For an additive release
``u = Σ_i ḡ_i + n`` (``u = L·g̃``, one local step) the attacker computes each candidate's
clipped gradient at the broadcast parameters and names the candidate whose clipped gradient,
added to the known rest, is nearest to the release: ℓ2 for Gaussian noise (maximum likelihood
for isotropic Gaussian noise, whatever σ), ℓ1 for Laplace noise (maximum likelihood for i.i.d.
Laplace coordinates), exact match without noise.

Trials. The client released one ``u``; its noise ``n = u − Σ_i ḡ_i`` is known in simulation
(ground truth) and is the client's *actual* noise, whatever it declared. Each trial draws the
secret uniformly and a fresh noise vector by permuting ``n``'s coordinates and flipping their
signs at random: for i.i.d. symmetric noise coordinates (Gaussian, Laplace) this resamples
from the empirical law of the client's own noise, so a client that adds less noise than it
declares is measured with the noise it used. The success count is turned into
``log(M·P̂)`` with its interval by :func:`fedpriv.leakage.game.identification_leakage`.

The bound ``log_bound`` is the declared release's Bayes capacity on the candidates (§5, secret
radius ``C``: record level). For the Gaussian, noise orthogonal to the candidates' affine span
carries no information and that span has dimension at most ``M − 1``, so §5's formula is taken
in ``min(p, M − 1)`` dimensions (the secret set lies in a ball of radius ``C`` there); for the
Laplace (not rotation invariant) in ``p``. Either way at most ``log M``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from attacks.view import ServerView
from fedpriv.errors import InputError

if TYPE_CHECKING:
    from fedpriv.leakage.game import IdentificationLeakage
    from fedpriv.mechanisms import Mechanism

__all__ = ["GameSettings", "identification_game", "play_identification"]


@dataclass(frozen=True)
class GameSettings:
    """Trials, confidence and seed of one game (``[audit]`` ``game_trials``, …)."""

    trials: int = 1000
    confidence: float = 0.95
    seed: int = 0


def play_identification(
    candidates: np.ndarray, noise: np.ndarray, trials: int,
    rng: np.random.Generator, norm_ord: int = 2,
) -> int:
    """Successes of the nearest-candidate attacker over ``trials`` games.

    Parameters
    ----------
    candidates
        ``(M, p)``: each candidate's clipped gradient; the secret is one of them, uniformly.
        The release minus the known rest of the batch is ``candidates[secret] + noise``.
    noise
        ``(p,)``: one realisation of the release's noise; each trial uses a random signed
        permutation of it.
    norm_ord
        ``2`` (Gaussian likelihood) or ``1`` (Laplace likelihood).
    """
    cands = np.asarray(candidates, dtype=np.float64)
    noise = np.asarray(noise, dtype=np.float64)
    if cands.ndim != 2 or cands.shape[0] < 2 or noise.shape != (cands.shape[1],):
        raise InputError("game.candidates", cands.shape, "(M >= 2, p) with noise of shape (p,)")
    wins = 0
    for _ in range(int(trials)):
        secret = int(rng.integers(len(cands)))
        n = noise[rng.permutation(noise.size)] * rng.choice((-1.0, 1.0), size=noise.size)
        dist = np.linalg.norm(cands[secret] + n - cands, ord=norm_ord, axis=1)
        best = np.flatnonzero(dist == dist.min())
        wins += int(rng.choice(best) == secret)  # ties (equal candidates) broken at random
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


def _log_bound(mechanism: Mechanism, dim: int, candidates: int) -> float:
    release = mechanism.release(dim)
    if mechanism.name == "gaussian":  # isotropic: only the candidates' span informs (doc)
        dim = min(dim, candidates - 1)
    return float(release.log_bayes_capacity(dim, 1.0))


def identification_game(
    view: ServerView, mechanism: Mechanism, batch: tuple[np.ndarray, np.ndarray],
    pool: tuple[np.ndarray, np.ndarray], settings: GameSettings,
) -> IdentificationLeakage | None:
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
    or update-level mechanisms (VMF directions, client-level Gaussian).
    """
    from fedpriv.leakage.game import identification_leakage
    from fedpriv.verification.update import flatten

    if view.local_steps != 1 or mechanism.level != "record":
        return None
    if getattr(mechanism, "clip_bounds", None) is not None and not mechanism.additive:
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
    rng = np.random.default_rng(settings.seed)
    wins = play_identification(cands, noise, settings.trials, rng,
                               norm_ord=getattr(mechanism, "norm_ord", 2))
    return identification_leakage(wins, settings.trials, len(cands),
                                  _log_bound(mechanism, noise.size, len(cands)),
                                  settings.confidence)

"""Canary audits of simulated clients at p = 13,700: validity, tightness, catching a cheat.

Releases are simulated in NumPy (tests/canary_support.py): aligned clipped gradients of
Poisson-sampled records, the canary sum, and the mechanism's noise, exactly as the server
sees ``u = L'·(−Δ/η)``. The formal ε a canary bound is compared with is the *canary's*:
with every-step insertion its releases are unsubsampled (sampling rate 1 in the ledger,
:func:`fedpriv.canaries.canary_events`); with Poisson insertion at the records' rate it is the
records' own ledger. ε comes from the accountant (PLD) at δ = 1e-5.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from fedpriv.accounting import ReleaseEvent, epsilon
from fedpriv.canaries import (
    CanaryDesign,
    canary_events,
    epsilon_clopper_pearson,
    epsilon_gdp_fit,
    epsilon_gdp_thresholds,
    epsilon_one_run,
    gaussian_scores,
    gdp_epsilon,
    inclusion,
    laplace_scores,
    vmf_scores,
)
from fedpriv.errors import InputError
from fedpriv.mechanisms import make_release
from tests.canary_support import DIM, client_releases

DELTA = 1e-5
RIGOROUS = (epsilon_clopper_pearson, epsilon_one_run)
GAUSSIAN_ONLY = (epsilon_gdp_thresholds,)


@functools.cache
def formal_epsilon(mechanism: str, noise: float, releases: int, record_rate: float,
                   canary_rate: float = 1.0) -> float:
    """The canary's ε: the records' ledger with the canary's inclusion rate (PLD)."""
    events = [ReleaseEvent(make_release(mechanism, noise), record_rate, releases)]
    return epsilon(canary_events(events, canary_rate), DELTA, accountant="pld").epsilon


def scores(design: CanaryDesign, mechanism: str, releases: np.ndarray, noise: float,
           steps: int) -> np.ndarray:
    """Per-round scores ``(rounds, m)`` with the declared noise."""
    if mechanism == "gaussian":
        return gaussian_scores(design, releases, noise_std=noise * design.clip, steps=steps)
    return laplace_scores(design, releases, noise_scale=noise * design.clip, steps=steps)


def split(design: CanaryDesign, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    bits = inclusion(design)
    return values[bits], values[~bits]


# ------------------------------------------------------- (i) validity on honest clients

ROUNDS, STEPS, RATE, RECORDS, CANARIES = 3, 2, 0.1, 100, 500
CLIENTS = {
    # name: (mechanism, noise, design options, canary rate)
    "gaussian": ("gaussian", 1.0, {}, 1.0),
    "gaussian-random": ("gaussian", 2.0, {"kind": "random"}, 1.0),
    "laplace": ("laplace", 2.0, {"norm": 1}, 1.0),
    "gaussian-poisson": ("gaussian", 1.0, {}, RATE),
}


def audit_ratios(seeds: range) -> dict[tuple[str, str], list[float]]:
    """ε_lower / formal ε for every client, round (cumulative) and estimator, at 95%.

    Each client keeps its canaries for all rounds, so after round r the summed scores bound
    the ε of its ``STEPS·r`` releases so far. The key ``(client, "naive")`` holds the
    uncorrected ``max log((TPR − δ)/FPR)``, the control that shows the check can fail.
    """
    ratios: dict[tuple[str, str], list[float]] = {}
    for seed in seeds:
        for c, (name, (mech, noise, options, canary_rate)) in enumerate(CLIENTS.items()):
            design = CanaryDesign(seed=1_000 * seed + c, count=CANARIES, dim=DIM, clip=1.0,
                                  **options)
            rng = np.random.default_rng([seed, c])
            u = client_releases(design, mechanism=mech, noise=noise, rounds=ROUNDS,
                                steps=STEPS, rate=RATE, records=RECORDS, rng=rng,
                                canary_rate=canary_rate)
            cumulative = np.cumsum(scores(design, mech, u, noise, STEPS), axis=0)
            estimators = RIGOROUS + (GAUSSIAN_ONLY if mech == "gaussian" else ())
            for r in range(ROUNDS):
                ins, outs = split(design, cumulative[r])
                formal = formal_epsilon(mech, noise, STEPS * (r + 1), RATE, canary_rate)
                for estimate in estimators:
                    bound = estimate(ins, outs, delta=DELTA).epsilon
                    ratios.setdefault((name, estimate.__name__), []).append(bound / formal)
                ratios.setdefault((name, "naive"), []).append(_naive(ins, outs) / formal)
    return ratios


def _naive(ins: np.ndarray, outs: np.ndarray) -> float:
    t = np.union1d(ins, outs)
    tpr, fpr = (ins[:, None] >= t).mean(axis=0), (outs[:, None] >= t).mean(axis=0)
    ok = (fpr > 0) & (tpr > DELTA)
    return float(np.max(np.log(tpr[ok] - DELTA) - np.log(fpr[ok]), initial=0.0))


def _check_validity(seeds: range) -> dict[tuple[str, str], list[float]]:
    ratios = audit_ratios(seeds)
    for (client, method), values in ratios.items():
        if method != "naive":
            assert max(values) <= 1.0, (client, method, max(values))
    return ratios


@pytest.mark.slow
def test_honest_clients_never_exceed_their_formal_epsilon() -> None:
    """20 seeds × 4 clients × 3 rounds: every 95% bound ≤ the canary's formal ε.

    Clients: Gaussian σ = 1 and σ = 2 (coordinate and random canaries), Laplace λ = 2 (ℓ1
    coordinate canaries), and Gaussian σ = 1 with Poisson-inserted canaries (compared with
    the records' own ε); 500 canaries each, 2 local steps per round, q = 0.1, 100 records.
    A correct estimator fails one check with probability ≤ 5% (its confidence), and far less
    where it is not tight. Measured over 200 seeds (600 checks per client and estimator):
    no check failed; the largest ratios were 0.39 (Clopper–Pearson), 0.84 (one run) and 0.89
    (GDP thresholds). Per client, estimator and round the nearest miss is the Laplace
    client's one-run bound in round 1 (mean 0.39, sd 0.14): 1 lies 4.3 sd above it, every
    other cell ≥ 5.3 sd. With normal tails this test fails a correct implementation with
    probability ≈ 2e-4. The uncorrected estimate exceeds the Laplace client's ε in half of
    its client-rounds (304 of 600): the check can fail.
    """
    naive = _check_validity(range(20))[("laplace", "naive")]
    assert sum(v > 1.0 for v in naive) >= 12  # measured rate ½: P[Binomial(60, ½) < 12] < 1e-6


def test_honest_clients_never_exceed_their_formal_epsilon_quick() -> None:
    """One seed of the slow test above (12 checks per estimator), for the default suite."""
    _check_validity(range(1))


def test_ledger_for_every_step_canaries_drops_subsampling() -> None:
    """Every-step canaries are unsubsampled: their ε is the q = 1 ε of the same releases,
    larger than the records'; Poisson canaries at the records' rate share the records' ε."""
    records = epsilon([ReleaseEvent(make_release("gaussian", 1.0), RATE, 6)], DELTA,
                      accountant="pld").epsilon
    assert formal_epsilon("gaussian", 1.0, 6, RATE) == pytest.approx(
        gdp_epsilon(math.sqrt(6), DELTA), abs=2e-3)
    assert formal_epsilon("gaussian", 1.0, 6, RATE, RATE) == pytest.approx(records)
    assert records < formal_epsilon("gaussian", 1.0, 6, RATE)
    with pytest.raises(InputError):
        canary_events([ReleaseEvent(make_release("gaussian", 1.0), RATE, 6)], 0.5)


# ------------------------------------------------------- (ii) tightness, (iii) a cheat

PER_ROUND = 1_000  # the default number of canaries per client and round
POOLED_ROUNDS = 10  # rounds pooled for the tightness claim: 10,000 canaries


def pooled_scores(noise_added: float, noise_declared: float, rounds: int, seed: int,
                  rate: float = RATE, records: int = RECORDS) -> tuple[np.ndarray, np.ndarray]:
    """One Gaussian release per round with fresh canaries each round; in/out scores pooled.

    Every canary is in exactly one release, so the pooled scores bound the ε of a *single*
    release (the largest over the rounds).
    """
    ins, outs = [], []
    for r in range(rounds):
        design = CanaryDesign(seed=10_000 * seed + r, count=PER_ROUND, dim=DIM, clip=1.0)
        rng = np.random.default_rng([seed, r])
        u = client_releases(design, mechanism="gaussian", noise=noise_added, rounds=1,
                            steps=1, rate=rate, records=records, rng=rng)
        i, o = split(design, scores(design, "gaussian", u, noise_declared, 1)[0])
        ins.append(i)
        outs.append(o)
    return np.concatenate(ins), np.concatenate(outs)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0])
def test_white_box_canaries_reach_half_the_per_release_epsilon(sigma: float) -> None:
    """Fresh coordinate canaries, 1,000 per round, 10 rounds pooled: the GDP estimates reach
    ≥ ½ of the per-release formal ε; every other estimate stays below it.

    Ratio to the per-release ε (1.99, 4.38, 10.0 for σ = 2, 1, 0.5), mean over 20 seeds:
    GDP thresholds 0.89, 0.84, 0.72 (σ = 0.5, 1, 2); GDP fit 0.96, 0.96, 0.93;
    Clopper–Pearson 0.35, 0.37, 0.29; one run 0.34, 0.41, 0.41 — the rigorous bounds are
    capped by the canary count and, for one run, by its 2mδ term. The weakest case, GDP
    thresholds at σ = 2, had mean 0.72 and sd 0.046 (smallest 0.64): falling below ½ is a
    4.7-sd event, so a correct implementation fails this test with probability ≈ 1e-6.
    """
    per_release = formal_epsilon("gaussian", sigma, 1, RATE)
    ins, outs = pooled_scores(sigma, sigma, POOLED_ROUNDS, seed=0)
    assert epsilon_gdp_thresholds(ins, outs, delta=DELTA).epsilon >= per_release / 2
    assert epsilon_gdp_fit(ins, outs, delta=DELTA).epsilon >= per_release / 2
    for estimate in RIGOROUS + GAUSSIAN_ONLY:
        assert estimate(ins, outs, delta=DELTA).epsilon <= per_release


def test_summed_scores_bound_the_composed_epsilon_not_the_per_release_one() -> None:
    """The same 1,000 canaries in 10 releases, scores summed: the bound is about the composed
    mechanism (√10/σ-GDP) and lies far above the per-release ε — comparing it with the
    per-release ε would accuse an honest client."""
    sigma, rounds = 2.0, POOLED_ROUNDS
    design = CanaryDesign(seed=77, count=PER_ROUND, dim=DIM, clip=1.0)
    u = client_releases(design, mechanism="gaussian", noise=sigma, rounds=rounds, steps=1,
                        rate=RATE, records=RECORDS, rng=np.random.default_rng(77))
    ins, outs = split(design, scores(design, "gaussian", u, sigma, 1).sum(axis=0))
    bound = epsilon_gdp_thresholds(ins, outs, delta=DELTA).epsilon
    assert formal_epsilon("gaussian", sigma, 1, RATE) < bound
    assert bound <= formal_epsilon("gaussian", sigma, rounds, RATE)


def test_a_client_that_under_noises_is_caught_in_one_round() -> None:
    """Declares σ = 2 (canary ε 1.99 per release at δ = 1e-5) but adds σ = 0.5 noise: one
    round of 1,000 canaries gives a rigorous one-run bound above the declared ε.

    Over 20 seeds the one-run bound had mean 2.97, sd 0.21, smallest 2.52 (a miss is a
    4.7-sd event, probability ≈ 1e-6); GDP thresholds mean 7.5. Clopper–Pearson (mean 2.20,
    sd 0.15) misses it in about one round in ten, so it is not asserted here. The honest
    σ = 2 client with the same seed stays below the declared ε.
    """
    declared = formal_epsilon("gaussian", 2.0, 1, RATE)
    ins, outs = pooled_scores(0.5, 2.0, 1, seed=0)
    for estimate in (epsilon_one_run, epsilon_gdp_thresholds):
        assert estimate(ins, outs, delta=DELTA).epsilon > declared, estimate.__name__
    honest_in, honest_out = pooled_scores(2.0, 2.0, 1, seed=0)
    for estimate in RIGOROUS + GAUSSIAN_ONLY:
        assert estimate(honest_in, honest_out, delta=DELTA).epsilon <= declared


def test_honest_canary_bounds_can_exceed_the_records_epsilon() -> None:
    """Every-step canaries are not subsampled: an honest client's canary bound may exceed the
    records' ε (here q = 0.01: 1,000 records, batches of 10) and falsifies nothing — the
    comparison must use the canary's ε."""
    ins, outs = pooled_scores(1.0, 1.0, 1, seed=5, rate=0.01, records=1_000)
    bound = epsilon_one_run(ins, outs, delta=DELTA).epsilon
    records = epsilon([ReleaseEvent(make_release("gaussian", 1.0), 0.01, 1)], DELTA,
                      accountant="pld").epsilon
    assert records < bound <= formal_epsilon("gaussian", 1.0, 1, 0.01)


def test_vmf_canaries_are_detected_far_below_the_formal_epsilon() -> None:
    """One VMF release (κ = 3,000, p = 13,700), 500 random canaries in the augmented sum: the
    cosine scores separate in from out (fitted μ ≈ 1.4 over three seeds; 0.5 would already be
    a ~5.5-sd excess over μ = 0 with 500 canaries), yet the one-run bound (≈ 2) stays orders of
    magnitude below the formal ε (≈ 1,481): the VMF guarantee covers any change of direction,
    while a canary moves the direction of a ~250-canary sum by about 1/√250."""
    kappa = 3_000.0
    design = CanaryDesign(seed=0, count=500, dim=DIM, clip=1.0, kind="random")
    u = client_releases(design, mechanism="vmf", noise=kappa, rounds=1, steps=1, rate=RATE,
                        records=RECORDS, rng=np.random.default_rng(0))
    ins, outs = split(design, vmf_scores(design, u[0], kappa=kappa, scale=design.clip))
    formal = epsilon([ReleaseEvent(make_release("vmf", kappa, DIM), 1.0, 1)], DELTA).epsilon
    assert epsilon_gdp_fit(ins, outs, delta=DELTA).detail["mu_hat"] > 0.5
    assert 0.0 < epsilon_one_run(ins, outs, delta=DELTA).epsilon < formal / 100

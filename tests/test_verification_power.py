"""Power of the Gaussian norm test (privacy-math.md §9.7): the thresholds are the test's own,
the independent-signal power agrees with Monte Carlo, and the spec's claims at p = 13,700 hold
in the form derived from the χ quantiles directly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedpriv.errors import InputError
from fedpriv.verification import (
    gaussian_detectable_records,
    gaussian_norm_power,
    gaussian_norm_test,
    gaussian_norm_thresholds,
    record_count,
)

P = 13_700
A = math.sqrt(stats.chi2.ppf(5e-7, P))  # the α/2 quantile of χ_p at α = 1e-6


def _rejects(x: float, sigma: float, dim: int, records: int, steps: int, alpha: float) -> bool:
    verdict = gaussian_norm_test(
        x, dim=dim, noise_std=sigma, steps=steps, clip_bound=1.0,
        records=record_count(steps, batch_sizes=[records] + [0] * (steps - 1)), alpha=alpha,
    )  # fmt: skip
    return verdict.status == "inconsistent"


@pytest.mark.parametrize(("records", "steps"), [(0, 1), (40, 1), (40, 3), (400, 3)])
def test_thresholds_are_where_the_test_flips(records, steps):
    dim, sigma, alpha = 300, 1.5, 1e-3
    low, high = gaussian_norm_thresholds(
        sigma, dim=dim, records=records, steps=steps, alpha=alpha
    )
    for x, expected in [(low * (1 - 1e-9), True), (low * (1 + 1e-9), False),
                        (high * (1 - 1e-9), False), (high * (1 + 1e-9), True)]:  # fmt: skip
        assert _rejects(x, sigma, dim, records, steps, alpha) is expected


def test_independent_power_matches_monte_carlo():
    dim, records, alpha, draws = 300, 12, 0.01, 20_000
    rng = np.random.default_rng(9)
    u = rng.standard_normal((draws, dim)) * 1.0
    u[:, 0] += records  # all clipped gradients aligned, independent of the noise
    low, high = gaussian_norm_thresholds(1.4, dim=dim, records=records, alpha=alpha)
    norms = np.linalg.norm(u, axis=1)
    rate = float(np.mean((norms < low) | (norms > high)))
    power = gaussian_norm_power(1.4, 1.0, dim=dim, records=records, alpha=alpha)
    assert 0.05 < power < 0.95  # a regime where the comparison means something
    assert abs(rate - power) < 5 * math.sqrt(power * (1 - power) / draws)


def test_adversarial_power_never_exceeds_the_independent_power():
    for actual in (0.0, 0.5, 1.5, 1.9):
        for records in (0, 20, 100, 300):
            for steps in (1, 4):
                kwargs = {"dim": 2000, "records": records, "steps": steps}
                worst = gaussian_norm_power(2.0, actual, signal="adversarial", **kwargs)
                assert worst <= gaussian_norm_power(2.0, actual, **kwargs) + 1e-12


def test_no_noise_declared_as_sigma_100_is_detected_below_a_records_bound():
    """With no noise, ‖u‖ = B (aligned); the test rejects while B < 100·a, a = χ_p(5e-7):
    B ≤ 11,360 at p = 13,700 (the spec's plain sandwich, threshold 100a − B: B ≤ 5,680)."""
    assert gaussian_detectable_records(100.0, 0.0, dim=P) == math.floor(100 * A) == 11_360
    plain = gaussian_detectable_records(100.0, 0.0, dim=P, last_step=False)
    assert plain == math.floor(50 * A) == 5_680


def test_the_specs_sigma_two_against_half_claim():
    """Spec: the plain sandwich separates σ = 2 from 0.5 while 2B < 1.5·√p, B ≲ 88 (adversarial
    signal). At α = 1e-6 with the χ quantiles: 0.5·χ + B ≤ 2a − B half the time while
    B ≤ (2a − 0.5·median χ_p)/2 = 84; the last-step bound and an independent signal raise it."""
    median = math.sqrt(stats.chi2.median(P))
    plain = gaussian_detectable_records(
        2.0, 0.5, dim=P, power=0.5, signal="adversarial", last_step=False
    )
    assert plain == math.floor((2 * A - 0.5 * median) / 2) == 84
    assert abs(plain - 1.5 * math.sqrt(P) / 2) / plain < 0.05
    guaranteed = gaussian_detectable_records(2.0, 0.5, dim=P, power=0.5, signal="adversarial")
    assert guaranteed == math.floor(2 * A - 0.5 * median) == 168
    typical = gaussian_detectable_records(2.0, 0.5, dim=P, power=0.5)
    # independent signal: sqrt(0.25·p + B²) ≈ 2a at the median
    assert abs(typical - math.sqrt(4 * A**2 - 0.25 * P)) < 2


def test_power_falls_with_the_records_and_rises_with_the_gap():
    powers = [gaussian_norm_power(1.0, 0.7, dim=P, records=b) for b in (0, 20, 40, 60, 80)]
    assert powers == sorted(powers, reverse=True) and powers[0] > 0.99 > powers[-1]
    gaps = [gaussian_norm_power(1.0, a, dim=P, records=40) for a in (0.95, 0.9, 0.8, 0.5)]
    assert gaps == sorted(gaps)


def test_power_argument_checks():
    assert gaussian_detectable_records(1.0, 0.999, dim=P) == -1
    with pytest.raises(InputError):
        gaussian_detectable_records(1.0, 1.0, dim=P)
    with pytest.raises(InputError):
        gaussian_norm_power(1.0, 0.5, dim=P, records=3, signal="aligned")
    with pytest.raises(InputError):
        gaussian_norm_thresholds(0.0, dim=P, records=3)

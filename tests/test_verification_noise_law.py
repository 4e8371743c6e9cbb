"""The two-sided noise-law test and the quadrature signal bound (issue 25 item 4), by Monte Carlo.

* The light-tail test (``gaussian_light_tail_test``) rejects bounded noise of the declared
  variance (Rademacher, uniform), the ℓ1 shape test heavy tails (Student-t); neither rejects
  honest Gaussian noise more often than α at the signals the declaration allows (none; spread;
  every unit of C·B in one coordinate, the light side's worst case).
* The norm test's high side at k = 1 adds the signal in quadrature: its false-alarm rate at the
  worst independent signal (‖S‖ = C·B exactly) stays ≤ α/2, and a signal 10× its clipped bound,
  or an unclipped one, is caught.

Each ``rejections ≤ LIMIT`` fails with probability ≤ 1e-9 when the true rate is ≤ α.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedpriv.verification import record_count
from fedpriv.verification.gaussian import (
    gaussian_light_tail_test,
    gaussian_norm_test,
    gaussian_shape_test,
)
from fedpriv.verification.laws import gaussian_excess_law, mean_normal_excess

ALPHA = 0.01
DRAWS = 2_000
LIMIT = int(stats.binom.isf(1e-9, DRAWS, ALPHA))
DIM = 2_000
ONE = record_count(1, batch_sizes=[2])


def _signal(rng: np.random.Generator, kind: str, norm: float) -> np.ndarray:
    s = np.zeros(DIM)
    if kind == "spread":
        s = rng.standard_normal(DIM)
        s *= norm / np.linalg.norm(s)
    elif kind == "one-coordinate":
        s[0] = norm
    return s


def _light(u: np.ndarray, records=ONE, alpha: float = ALPHA):
    return gaussian_light_tail_test(u, noise_std=1.0, steps=1, clip_bound=1.0, records=records,
                                    alpha=alpha)


def test_excess_law_matches_its_moments() -> None:
    """The log-MGF's derivative at 0 is the closed-form mean, checked against quadrature."""
    from scipy import integrate

    tau = 2.0
    numeric, _ = integrate.quad(lambda z: 2 * (z - tau) * stats.norm.pdf(z), tau, np.inf)
    assert mean_normal_excess(tau) == pytest.approx(numeric, rel=1e-10)
    law = gaussian_excess_law(10, tau)
    h = 1e-6
    slope = (law.log_mgf(h) - law.log_mgf(-h)) / (2 * h)
    assert slope == pytest.approx(numeric, rel=1e-6)
    for lam in (-3.0, -0.5, 0.7):
        mgf, _ = integrate.quad(lambda z, lam=lam: math.exp(lam * max(abs(z) - tau, 0.0)
                                                            - 0.5 * z * z) / math.sqrt(2 * math.pi),
                                -40, 40, points=[-tau, tau], limit=200)
        assert law.log_mgf(lam) == pytest.approx(math.log(mgf), rel=1e-8)


@pytest.mark.parametrize("kind", ["none", "spread", "one-coordinate"])
def test_light_tail_false_alarms_at_most_alpha(kind: str) -> None:
    rng = np.random.default_rng(11)
    rejections = 0
    for _ in range(DRAWS):
        u = _signal(rng, kind, 2.0) + rng.standard_normal(DIM)
        rejections += _light(u).status == "inconsistent"
    assert rejections <= LIMIT


def test_light_tail_bound_is_not_loose_by_orders() -> None:
    """The Chernoff threshold sits below the Gaussian mean but not absurdly: at α = 0.01 the
    observed false-alarm rate without signal is above 1e-4 (the test can reject honest noise:
    it is a test, not a constant)."""
    rng = np.random.default_rng(12)
    p_values = [_light(rng.standard_normal(DIM)).p_value for _ in range(400)]
    assert min(p_values) < 0.5


@pytest.mark.parametrize("law", ["rademacher", "uniform"])
def test_light_tail_catches_bounded_noise(law: str) -> None:
    rng = np.random.default_rng(13)
    for _ in range(50):
        z = (rng.choice([-1.0, 1.0], DIM) if law == "rademacher"
             else rng.uniform(-math.sqrt(3), math.sqrt(3), DIM))
        u = _signal(rng, "spread", 2.0) + z
        verdict = _light(u, alpha=1e-6)
        assert verdict.status == "inconsistent", verdict.reason
        # and the norm test alone would not have seen it: the variance is right
        norm = gaussian_norm_test(float(np.linalg.norm(u)), dim=DIM, noise_std=1.0, steps=1,
                                  clip_bound=1.0, records=ONE, alpha=1e-6)
        assert norm.status == "consistent"


def test_shape_side_catches_student_t() -> None:
    rng = np.random.default_rng(14)
    for _ in range(20):
        z = rng.standard_t(3, DIM * 7) / math.sqrt(3.0)
        verdict = gaussian_shape_test(z, noise_std=1.0, steps=1, clip_bound=1.0, records=ONE,
                                      alpha=1e-6)
        assert verdict.status == "inconsistent"
        assert _light(z, alpha=1e-6).status == "consistent"  # heavy tails: the other side


def test_light_tail_applicability_is_the_worst_case_bound() -> None:
    """Applicable while (C·B/σC)² < 4(τ − √3)·Q; a bounded noise hidden by a one-coordinate
    signal past that bound passes (which is why it is then reported not applicable)."""
    rng = np.random.default_rng(15)
    many = record_count(1, batch_sizes=[400])
    z = rng.uniform(-math.sqrt(3), math.sqrt(3), DIM)
    assert _light(z, records=many, alpha=1e-6).status == "inconsistent"  # caught anyway
    hidden = z.copy()
    hidden[0] = 400.0  # all of C·B in one coordinate
    verdict = _light(hidden, records=many, alpha=1e-6)
    assert verdict.status == "unverifiable" and "not applicable" in verdict.reason
    steps = gaussian_light_tail_test(rng.standard_normal(DIM) * 3, noise_std=1.0, steps=9,
                                     clip_bound=1.0, records=record_count(9, batch_sizes=[1] * 9))
    assert steps.status == "unverifiable"


def _high_rejects(x: float, records) -> bool:
    verdict = gaussian_norm_test(x, dim=DIM, noise_std=1.0, steps=1, clip_bound=1.0,
                                 records=records, alpha=ALPHA)
    return verdict.status == "inconsistent" and verdict.statistic["p_high"] < 1.0


def test_quadrature_high_side_false_alarms_at_worst_signal() -> None:
    """At ‖S‖ = C·B exactly, independent of the noise, the high side rejects ≤ α/2 of the
    time; the threshold is well below the linear one σC·b + C·B."""
    rng = np.random.default_rng(16)
    b = 30
    records = record_count(1, batch_sizes=[b])
    rejections = 0
    for _ in range(DRAWS):
        u = _signal(rng, "spread", float(b)) + rng.standard_normal(DIM)
        verdict = gaussian_norm_test(float(np.linalg.norm(u)), dim=DIM, noise_std=1.0, steps=1,
                                     clip_bound=1.0, records=records, alpha=ALPHA)
        rejections += verdict.statistic["p_high"] <= ALPHA / 2
    assert rejections <= int(stats.binom.isf(1e-9, DRAWS, ALPHA / 2))
    linear = math.sqrt(stats.chi2.isf(ALPHA / 2, DIM)) + b
    quadrature = math.sqrt(stats.ncx2.isf(ALPHA / 2, DIM, b * b))
    assert quadrature < linear - 10
    assert _high_rejects(quadrature * 1.001, records)
    assert not _high_rejects(quadrature * 0.999, records)


@pytest.mark.parametrize("factor", [10.0, 12.0])
def test_quadrature_catches_unclipped_signal(factor: float) -> None:
    """Signal ×10 after clipping, or no clipping (4 records' gradients of norm 12 each,
    aligned), with the declared noise at p = 13,700: caught at k = 1, where the linear bound
    σC·χ_p(1 − α/2) + C·B let every one pass."""
    rng = np.random.default_rng(17)
    dim, b = 13_700, 4
    records = record_count(1, batch_sizes=[b])
    linear = math.sqrt(stats.chi2.isf(5e-7, dim)) + b
    passed_linear = 0
    for _ in range(20):
        s = rng.standard_normal(dim)
        u = s * (factor * b / np.linalg.norm(s)) + rng.standard_normal(dim)
        verdict = gaussian_norm_test(float(np.linalg.norm(u)), dim=dim, noise_std=1.0, steps=1,
                                     clip_bound=1.0, records=records, alpha=1e-6)
        assert verdict.status == "inconsistent"
        passed_linear += np.linalg.norm(u) < linear
    if factor == 10.0:
        assert passed_linear >= 10  # the old bound let most of them pass


def test_light_tail_at_many_steps_uses_one_steps_noise() -> None:
    """k = 3 with a signal that cancels the first two steps' noise (allowed: ‖S‖ ≤ C·B with a
    large B): u is one step's noise, so the test must compare with one step's law, not
    √k·σC's. False alarms ≤ α."""
    rng = np.random.default_rng(18)
    records = record_count(3, batch_sizes=[40, 40, 40])
    rejections = 0
    for _ in range(DRAWS):
        earlier = rng.standard_normal(DIM) + rng.standard_normal(DIM)
        signal = -earlier  # ‖earlier‖ ≈ 63 ≤ C·B = 120
        u = signal + earlier + rng.standard_normal(DIM)
        verdict = gaussian_light_tail_test(u, noise_std=1.0, steps=3, clip_bound=1.0,
                                           records=records, alpha=ALPHA)
        rejections += verdict.status == "inconsistent"
    assert rejections <= LIMIT
    scaled = gaussian_light_tail_test(np.sqrt(3) * rng.standard_normal(DIM) * 0.5, noise_std=1.0,
                                      steps=3, clip_bound=1.0, records=records, alpha=1e-6)
    assert scaled.status == "inconsistent"  # 0.87 of one step's noise: too little beyond 2σC

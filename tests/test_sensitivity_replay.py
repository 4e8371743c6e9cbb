"""Replay of a release's clipped signal and the freshness of a round's step noises (issue 42,
fedpriv/verification/sensitivity.py): the tests' levels hold by Monte Carlo, and the cheats
they exist for are caught.

Levels: each Monte Carlo runs N honest draws at level α and requires the false-alarm count to be
at most the 1 − 10⁻⁴ quantile of Binomial(N, α) (a test of the level that itself fails falsely
once in 10⁴ runs; the draws are seeded, so the outcome is fixed).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedpriv.verification.sensitivity import (
    ReplayedRelease,
    cumulative_test,
    detectable_ratios,
    sensitivity_test,
    step_freshness_test,
)

P, S = 2000, 0.125  # dimension, noise std per coordinate of the release (σC/L)


def _allowed(n: int, alpha: float) -> int:
    return int(stats.binom.ppf(1 - 1e-4, n, alpha))


def _replayed(rng: np.random.Generator, signal_norm: float = 2.0) -> ReplayedRelease:
    signal = rng.standard_normal(P)
    signal *= signal_norm * S / np.linalg.norm(signal)
    excess = 0.7 * signal + 0.3 * np.linalg.norm(signal) * rng.standard_normal(P) / np.sqrt(P)
    return ReplayedRelease(signal, {"signal": signal, "unclipped": excess,
                                    "partition": rng.standard_normal(P)})


def test_an_honest_release_passes_at_its_level() -> None:
    """False alarms of the replay test at α = 0.02 over 3000 honest releases."""
    rng, alpha, n = np.random.default_rng(42), 0.02, 3000
    alarms = 0
    for _ in range(n):
        replayed = _replayed(rng)
        release = replayed.signal + S * rng.standard_normal(P)
        v = sensitivity_test(release, replayed, noise_std=S, noise_multiplier=2.0, alpha=alpha)
        alarms += v.status == "inconsistent"
    assert alarms <= _allowed(n, alpha), alarms


@pytest.mark.parametrize(("cheat", "direction"), [("signal x 10", "signal"),
                                                   ("no clipping", "unclipped"),
                                                   ("less noise", "norm")])
def test_the_cheats_leave_a_residual_the_test_sees(cheat: str, direction: str) -> None:
    rng = np.random.default_rng(7)
    replayed = _replayed(rng, signal_norm=4.0)  # ‖S‖ = 4 noise stds (issue 42's ×10 probe: ~2)
    noise = S * rng.standard_normal(P)
    release = {"signal x 10": 10 * replayed.signal + noise,
               "no clipping": replayed.signal + 3.0 * replayed.directions["unclipped"] + noise,
               "less noise": replayed.signal + 0.8 * noise}[cheat]
    v = sensitivity_test(release, replayed, noise_std=S, noise_multiplier=2.0, alpha=1e-6)
    assert v.status == "inconsistent", v.reason
    assert f"({direction}:" in v.reason, v.reason


def test_power_is_stated_in_epsilon() -> None:
    """ε-ratios through an accountant: ε(σ') ∝ 1/σ' here, so the ratios are σ/σ'."""
    rng = np.random.default_rng(3)
    replayed = _replayed(rng, signal_norm=4.0)
    release = replayed.signal + S * rng.standard_normal(P)
    v = sensitivity_test(release, replayed, noise_std=S, noise_multiplier=2.0, alpha=1e-6,
                         epsilon_at=lambda sigma: 1.0 / sigma)
    a, f = detectable_ratios(4.0 * S, S, P, 1e-6 / 4)
    assert v.statistic["detectable_signal_factor"] == pytest.approx(a)
    # the ratios are taken on a 5 % grid, rounded against the client (never smaller)
    assert 1.0 / f <= v.statistic["detectable_epsilon_ratio"] <= 1.05 / f
    assert a <= v.statistic["signal_epsilon_ratio"] <= 1.05 * a
    # p = 2000: noise at 0.83 × declared is caught with probability 0.99 (ε × 1.2)
    assert 1.1 < 1.0 / f < 1.3
    # with the signal a* × its size the projection fires with probability ≈ 0.99
    hits = sum(sensitivity_test(a * replayed.signal + S * rng.standard_normal(P), replayed,
                                noise_std=S, noise_multiplier=2.0, alpha=1e-6).status
               == "inconsistent" for _ in range(200))
    assert hits >= 190, hits


def test_the_cumulative_test_holds_its_level_and_adds_up_small_pushes() -> None:
    rng, alpha, n, looks = np.random.default_rng(11), 0.05, 400, 10
    alarms = 0
    for _ in range(n):
        evidence: dict[str, tuple[float, float, int]] = {}
        caught = False
        for look in range(1, looks + 1):
            for name in ("signal", "unclipped", "partition"):
                z = rng.standard_normal()
                t, q, m = evidence.get(name, (0.0, 0.0, 0))
                evidence[name] = (t + z, q + z * z, m + 1)
            caught |= cumulative_test(evidence, look, alpha).status == "inconsistent"
        alarms += caught
    assert alarms <= _allowed(n, alpha), alarms  # over all 10 looks: the run's level
    # a push of 3 stds per release along the unclipped excess: caught within 5 looks
    evidence = {}
    for look in range(1, 6):
        t, q, m = evidence.get("unclipped", (0.0, 0.0, 0))
        evidence["unclipped"] = (t + 3.0, q + 9.0, m + 1)
        last = cumulative_test(evidence, look, 1e-6)
    assert last.status == "inconsistent", last.reason


def test_step_freshness_holds_its_level_and_catches_cancelled_noise() -> None:
    rng, alpha, n, k = np.random.default_rng(5), 0.05, 400, 4
    alarms = 0
    for _ in range(n):
        signal = 0.5 * S * rng.standard_normal((k, P)) / np.sqrt(P)
        releases = signal + S * rng.standard_normal((k, P))
        alarms += step_freshness_test(releases, S, alpha).status == "inconsistent"
    assert alarms <= _allowed(n, alpha), alarms
    z = S * rng.standard_normal(P)
    signal = 4 * S * rng.standard_normal((k, P)) / np.sqrt(P)  # ‖S_t‖ = 4 noise stds
    cancelled = signal + np.stack([z, -z, z, -z])
    v = step_freshness_test(cancelled, S, 1e-6)
    assert v.status == "inconsistent" and "not fresh" in v.reason, v.reason
    reused = signal + np.stack([z, z, z, z])
    assert step_freshness_test(reused, S, 1e-6).status == "inconsistent"
    assert step_freshness_test(cancelled[:1], S, 1e-6).status == "consistent"


def test_an_honest_laplace_release_passes_at_its_level_and_a_scaled_signal_fails() -> None:
    """The Laplace residual's tests (Gamma ℓ1 norm, Chernoff-bounded projections): false
    alarms at α = 0.02 over 1000 honest releases within the binomial allowance; the clipped
    signal × 10 caught, named."""
    rng, alpha, n = np.random.default_rng(11), 0.02, 1000
    alarms = 0
    for _ in range(n):
        replayed = _replayed(rng)
        release = replayed.signal + S * rng.laplace(size=P)
        v = sensitivity_test(release, replayed, noise_std=S, noise_multiplier=2.0, alpha=alpha,
                             law="laplace")
        alarms += v.status == "inconsistent"
    assert alarms <= _allowed(n, alpha), alarms
    replayed = _replayed(rng, signal_norm=4.0)
    cheat = 10 * replayed.signal + S * rng.laplace(size=P)
    v = sensitivity_test(cheat, replayed, noise_std=S, noise_multiplier=2.0, alpha=1e-6,
                         law="laplace")
    assert v.status == "inconsistent" and "(signal:" in v.reason, v.reason
    assert "z_signal" not in v.statistic  # not the Gaussian cross-round evidence


@pytest.mark.parametrize("law", ["gaussian", "laplace"])
def test_the_residuals_law_holds_its_level_and_catches_the_other_tails(law: str) -> None:
    """On the replayed residual (no signal) the law's sides at α = 0.02: honest noise within
    the allowance over 1000 draws; uniform noise (Gaussian's light side), Laplace noise of the
    declared variance (its heavy side) and Gaussian noise of the Laplace's E|N_i| caught — at
    the paper MLP's p (at p = 2000 the Laplace side is not applicable at α = 10⁻⁶: it says so)."""
    from fedpriv.verification.sensitivity import residual_law_test

    rng, alpha, n, P = np.random.default_rng(5), 0.02, 1000, 13_700  # noqa: N806
    draw = {"gaussian": lambda: S * rng.standard_normal(P),
            "laplace": lambda: S * rng.laplace(size=P)}[law]
    alarms = sum(any(v.status == "inconsistent" for v in
                     residual_law_test([(draw(), 1e-9)], S, law, alpha)) for _ in range(n))
    assert alarms <= _allowed(n, alpha), alarms
    others = {"gaussian": {"gaussian-light-tail": np.sqrt(3) * S * rng.uniform(-1, 1, P),
                           "gaussian-shape": S / np.sqrt(2) * rng.laplace(size=P)},
              "laplace": {"laplace-shape": np.sqrt(np.pi / 2) * S * rng.standard_normal(P)}}
    for name, noise in others[law].items():
        verdicts = {v.test: v for v in residual_law_test([(noise, 1e-9)], S, law, 1e-6)}
        assert verdicts[name].status == "inconsistent", verdicts[name].reason


def test_laplace_signal_factor_is_caught_by_the_chernoff_test_it_states():
    """a* of a Laplace release is found at the projection's own (Chernoff) threshold — never
    below the normal-quantile factor — and a signal scaled by a* is refuted by that test in
    ≥ 0.99 of releases (Monte Carlo, up to the binomial spread of 400 trials)."""
    from fedpriv.verification.sensitivity import _laplace_signal_factor, _laplace_tail

    rng = np.random.default_rng(3)
    p, level, signal = 400, 1e-4, 8.0
    u = rng.standard_normal(p)
    u /= np.linalg.norm(u)
    a = _laplace_signal_factor(u, level, 0.0, signal)
    normal = 1.0 + (stats.norm.isf(level / 2) + stats.norm.ppf(0.99)) * math.sqrt(2.0) / signal
    assert a > normal
    caught = 0
    for _ in range(400):
        t = (a - 1.0) * signal + float(rng.laplace(size=p) @ u)
        caught += _laplace_tail(abs(t), u) <= level
    assert caught >= 392, caught

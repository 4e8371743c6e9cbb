"""verify_update on simulated client-rounds at p = 13,700 (privacy-math.md §9): honest rounds of
the five mechanisms are never called inconsistent at α = 10⁻⁶, and the misdeclarations of
issue #14 are caught. Releases are built as §2 says, in float32, and applied to float32
parameters (tests/verification_support.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from verification_support import simulate_round, verify

from fedpriv.mechanisms import mechanism_class, mechanism_names
from fedpriv.verification import Verdict

# DP-SGD releases, as simulate_round makes them; client-level releases (the whole update clipped
# and noised) are verified in tests/test_client_level_dp.py
MECHANISMS = tuple(m for m in mechanism_names() if mechanism_class(m).level == "record")


def _tests(verdict: Verdict) -> dict[str, Verdict]:
    """Every leaf check of a combined verdict, by test name."""
    leaves = {}
    for part in verdict.parts:
        leaves.update(_tests(part) if part.parts else {part.test: part})
    return leaves


# (mechanism, steps, aligned, sampling, report batch sizes): 20 honest configurations
CONFIGS = [
    (m, k, aligned, sampling, report)
    for m in MECHANISMS
    for k, aligned, sampling, report in [
        (1, False, "poisson", False),
        (1, True, "poisson", True),
        (3, True, "poisson", False),
        (2, False, "fixed", False),
    ]
]


def _honest_rounds(repeats: int, seed: int) -> list[Verdict]:
    rng = np.random.default_rng(seed)
    verdicts = []
    for _ in range(repeats):
        for mechanism, k, aligned, sampling, report in CONFIGS:
            d, theta, theta_client = simulate_round(
                mechanism, rng, steps=k, aligned=aligned, sampling=sampling,
                report_batches=report, lr=float(rng.choice([0.01, 0.1, 1.0])),
            )  # fmt: skip
            verdicts.append(verify(d, theta, theta_client))
    return verdicts


def _check_honest(verdicts: list[Verdict]) -> None:
    assert not [v.reason for v in verdicts if v.status == "inconsistent"]
    by_status = {v.status for v in verdicts}
    assert by_status == {"consistent", "unverifiable"}
    # only `none` is unverifiable; every other round was verified
    assert sum(v.status == "unverifiable" for v in verdicts) == len(verdicts) // len(MECHANISMS)


def test_honest_rounds_are_never_inconsistent():
    _check_honest(_honest_rounds(1, seed=7))


@pytest.mark.slow
def test_two_hundred_honest_rounds_are_never_inconsistent():
    """10 × 20 configurations; under the declarations the chance of any false alarm here is
    at most 200 · 4 · 10⁻⁶ < 10⁻³."""
    _check_honest(_honest_rounds(10, seed=8))


def _verdict(**kwargs) -> Verdict:
    rng = np.random.default_rng(kwargs.pop("seed", 11))
    d, theta, theta_client = simulate_round(rng=rng, **kwargs)
    return verify(d, theta, theta_client)


@pytest.mark.parametrize("records", [16, 64, 640])
def test_no_noise_declared_as_sigma_100_is_caught(records):
    verdict = _verdict(
        mechanism="gaussian", noise_multiplier=100.0, released="clip", aligned=True,
        batch_size=records, local_size=10 * records,
    )  # fmt: skip
    assert verdict.status == "inconsistent"
    assert _tests(verdict)["gaussian-norm"].p_value == 0.0


def test_sigma_half_added_while_two_declared_is_caught_at_small_batches():
    verdict = _verdict(
        mechanism="gaussian", noise_multiplier=2.0, actual={"noise_multiplier": 0.5},
        batch_size=16, local_size=160, aligned=True,
    )  # fmt: skip
    assert verdict.status == "inconsistent"
    assert _tests(verdict)["gaussian-norm"].statistic["p_low"] < 1e-100


def test_an_update_scaled_by_a_million_is_caught():
    for mechanism in ("gaussian", "laplace", "clip", "vmf"):
        verdict = _verdict(mechanism=mechanism, update_factor=1e6)
        assert verdict.status == "inconsistent", mechanism
        assert verdict.p_value == 0.0


def test_a_vmf_release_with_the_wrong_norm_is_caught():
    for scale in (0.99, 1.01):
        verdict = _verdict(mechanism="vmf", actual={"vmf_scale": scale})
        assert verdict.status == "inconsistent"
    honest = _tests(_verdict(mechanism="vmf"))["vmf-norm"]
    assert honest.status == "consistent"
    assert abs(honest.statistic["deviation"]) < 1e-3 * honest.statistic["tolerance"]


def test_laplace_noise_declared_as_gaussian_is_caught_by_its_shape():
    """Variance-matched Laplace noise (λ = σ/√2) passes the norm test — the ℓ2 norm has the
    right size — and fails the shape test: ‖u‖₁ ≈ 0.707·p·σC against ≥ 0.77·p·σC."""
    verdict = _verdict(
        mechanism="gaussian", released="laplace", actual={"laplace_scale": 1 / math.sqrt(2)}
    )
    tests = _tests(verdict)
    assert tests["gaussian-norm"].status == "consistent"
    assert tests["gaussian-shape"].status == "inconsistent"
    assert tests["gaussian-shape"].statistic["excess_kurtosis"] > 2.0  # descriptive: 3 expected


def test_gaussian_noise_declared_as_laplace_is_caught_by_its_shape():
    """Gaussian noise with the same E|N| = b (σC = b·sqrt(π/2)) passes the ℓ1 test and fails
    the ℓ2 one."""
    verdict = _verdict(
        mechanism="laplace", released="gaussian",
        actual={"noise_multiplier": math.sqrt(math.pi / 2)},
    )  # fmt: skip
    tests = _tests(verdict)
    assert tests["laplace-norm"].status == "consistent"
    assert tests["laplace-shape"].status == "inconsistent"


def test_clipping_declared_but_noise_added_is_caught():
    verdict = _verdict(mechanism="clip", released="gaussian")
    assert verdict.status == "inconsistent"
    assert "records" in _tests(verdict)["clip-norm"].reason

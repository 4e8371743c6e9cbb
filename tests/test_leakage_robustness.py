"""PAC robustness (Zhang & Chen Thm 4.3), one-release accuracy by Monte Carlo, Thm 5.5, the CLI.

Monte Carlo checks draw n = 20,000 seeded samples and require the empirical coverage of alpha
within 6 standard errors of 1 - beta: false-failure probability below 2e-9 per check (normal
approximation of the binomial), and the seeds are fixed.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import special

from fedpriv.commands.robustness import ASSUMPTIONS
from fedpriv.errors import InputError
from fedpriv.leakage.robustness import (
    gaussian_accuracy,
    input_robustness,
    laplace_accuracy,
    pac_robust_confidence,
    vmf_accuracy,
)
from fedpriv.leakage.vmf_curve import vmf_angle_quantile
from fedpriv.mechanisms import build_mechanism
from fedpriv.special.vmf_sampler import sample_vmf_cosine
from workflows.cli.main import main

DRAWS = 20_000


def _coverage_ok(distances: np.ndarray, alpha: float, beta: float) -> bool:
    covered = float(np.mean(distances <= alpha))
    return abs(covered - (1 - beta)) <= 6 * math.sqrt(beta * (1 - beta) / distances.size)


def test_pac_confidence_formula_and_vacuous_marker() -> None:
    result = pac_robust_confidence(0.5, 0.01)  # gamma = (1 + 2) * 0.01
    assert result.gamma == pytest.approx(0.03) and result.confidence == pytest.approx(0.97)
    assert not result.vacuous and result.as_dict()["vacuous"] is False
    assert pac_robust_confidence(0.0, 0.2).confidence == pytest.approx(0.8)  # LDP 0: 1 - beta
    assert pac_robust_confidence(1.0, 0.2).vacuous  # gamma = 1
    assert pac_robust_confidence(math.inf, 0.0).vacuous  # no finite MBP: no statement
    for eps, beta, key in ((-1.0, 0.1, "eps_mbp"), (math.nan, 0.1, "eps_mbp"), (0.1, 1.5, "beta")):
        with pytest.raises(InputError, match=key):
            pac_robust_confidence(eps, beta)


@pytest.mark.parametrize(("dim", "beta"), [(1, 0.05), (50, 0.05), (2_000, 0.2)])
def test_gaussian_accuracy_monte_carlo(dim: int, beta: float) -> None:
    std, batch = 2.0, 8.0  # s = sigma * C
    mechanism = build_mechanism("gaussian", {"clip": 0.5, "noise_multiplier": 4.0})
    alpha = mechanism.pac_accuracy(beta, dim, batch)
    assert alpha == gaussian_accuracy(beta, dim, std, batch)
    if dim == 1:  # |N(0, s^2)|/L at its (1 - beta)-quantile
        assert alpha == pytest.approx(std * special.ndtri(1 - beta / 2) / batch, rel=1e-10)
    rng = np.random.default_rng(18)
    chunks = [rng.normal(0, std, (DRAWS // 10, dim)) for _ in range(10)]
    norms = np.concatenate([np.linalg.norm(c, axis=1) for c in chunks]) / batch
    assert _coverage_ok(norms, alpha, beta)


@pytest.mark.parametrize(("dim", "beta"), [(1, 0.05), (50, 0.1)])
def test_laplace_l1_accuracy_monte_carlo(dim: int, beta: float) -> None:
    scale, batch = 0.5, 4.0  # b = lambda * C
    mechanism = build_mechanism("laplace", {"clip": 2.0, "laplace_scale": 0.25})
    alpha = mechanism.pac_accuracy(beta, dim, batch)
    assert alpha == laplace_accuracy(beta, dim, scale, batch)
    if dim == 1:  # |Lap(b)| ~ Exp(b): quantile b log(1/beta)
        assert alpha == pytest.approx(scale * math.log(1 / beta) / batch, rel=1e-10)
    rng = np.random.default_rng(19)
    norms = np.abs(rng.laplace(0, scale, (DRAWS, dim))).sum(axis=1) / batch
    assert _coverage_ok(norms, alpha, beta)
    l2 = np.linalg.norm(rng.laplace(0, scale, (DRAWS, dim)), axis=1) / batch
    assert np.mean(l2 <= alpha) >= 1 - beta  # the l1 radius also covers the l2 distance


@pytest.mark.parametrize(("kappa", "dim"), [(5.0, 3), (100.0, 13_700)])
def test_vmf_accuracy_monte_carlo(kappa: float, dim: int) -> None:
    beta, scale = 0.05, 3.0
    mechanism = build_mechanism("vmf", {"kappa": kappa, "vmf_scale": scale})
    alpha = mechanism.pac_accuracy(beta, dim, 8.0)  # the batch size does not enter
    assert alpha == vmf_accuracy(beta, dim, kappa, scale)
    t = sample_vmf_cosine(kappa, dim, DRAWS, np.random.default_rng(20))
    assert _coverage_ok(scale * np.sqrt(2 - 2 * t), alpha, beta)


@pytest.mark.parametrize("kappa", [0.5, 5.0, 50.0])
def test_vmf_angle_quantile_closed_form_p3(kappa: float) -> None:
    """p = 3: t = cos(theta) has density ∝ e^{kappa t} on [-1, 1], so P(theta <= theta_q) =
    P(t >= cos theta_q) = prob gives cos theta_q = log(e^-k + (1 - prob)(e^k - e^-k))/k."""
    for prob in (1e-6, 0.05, 0.5, 0.95, 1 - 1e-6):
        expected = math.log(math.exp(-kappa) + (1 - prob) * 2 * math.sinh(kappa)) / kappa
        assert math.cos(vmf_angle_quantile(prob, kappa, 3)) == pytest.approx(expected, rel=1e-7)
    with pytest.raises(InputError, match="prob"):
        vmf_angle_quantile(1.0, kappa, 3)


def test_clip_none_and_refusals() -> None:
    assert build_mechanism("clip", {}).pac_accuracy(0.1, 10, 4.0) == 0.0
    assert build_mechanism("none", {}).pac_accuracy(0.1, 10, 4.0) is None
    assert build_mechanism("vmf", {"vmf_keep_norm": True}).pac_accuracy(0.1, 10, 4.0) is None
    assert build_mechanism("gaussian", {"noise_multiplier": 0.0}).pac_accuracy(0.1, 10, 4.0) == 0
    bad = [
        (lambda: gaussian_accuracy(0.1, 5, -1.0, 2.0), "noise_std"),
        (lambda: gaussian_accuracy(0.1, 5, 1.0, 0.0), "batch_size"),
        (lambda: vmf_accuracy(0.1, 1, 1.0, 1.0), "dim"),
        (lambda: laplace_accuracy(0.0, 5, 1.0, 1.0), "beta"),
        (lambda: laplace_accuracy(0.1, 5, 0.0, 1.0), "laplace_scale"),
        (lambda: vmf_accuracy(0.1, 5, 0.0, 1.0), "kappa"),
    ]
    for call, key in bad:
        with pytest.raises(InputError, match=key):
            call()


CONSTANTS = {"lipschitz": 2.0, "radius": 0.5, "diameter": 3.0, "leakage": 0.25, "c_a": 4.0,
             "c_b": 0.5, "c_2": 2.0, "i_const": 0.5, "p_const": 3.0}  # fmt: skip


def test_input_robustness_by_hand() -> None:
    """2*0.5/2 = 0.5; 4*3*(1 - 0.25)/(2*4) = 1.125; 2*0.5*0.5^2/(2*4) = 0.03125."""
    result = input_robustness(**CONSTANTS)
    assert (result.lipschitz_term, result.leakage_term) == (0.5, 1.125)
    assert result.algorithm_term == pytest.approx(0.03125, rel=1e-14)
    assert result.alpha == pytest.approx(0.5 + 1.125 - 0.03125, rel=1e-14)
    assert input_robustness(**{**CONSTANTS, "c_b": 0.0}).algorithm_term == 0.0
    huge = input_robustness(**{**CONSTANTS, "i_const": 10.0, "p_const": 1e4})
    assert huge.algorithm_term == math.inf and huge.alpha == -math.inf
    for key, value in (("leakage", 1.5), ("c_a", 0.0), ("radius", -1.0), ("p_const", math.inf)):
        with pytest.raises(InputError, match=key):
            input_robustness(**{**CONSTANTS, key: value})


def _cli(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    argv = ["robustness"]
    for key, value in CONSTANTS.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    try:
        code = main([*argv, *extra])
    except SystemExit as exc:
        code = int(exc.code)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_and_human(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "--mbp", "0.5", "--beta", "0.01", "--json")
    result = json.loads(out)
    assert code == 0 and result["alpha"] == pytest.approx(1.59375)
    assert result["pac"]["confidence"] == pytest.approx(0.97)
    assert set(result["assumptions"]) == set(ASSUMPTIONS) == set(CONSTANTS)
    code, out, _ = _cli(capsys)
    assert code == 0 and "Assumptions you must justify" in out and "--i-const = 0.5" in out


@pytest.mark.parametrize(
    ("extra", "flag"),
    [(["--leakage", "2"], "--leakage"), (["--c-a", "0"], "--c-a"), (["--mbp", "0.1"], "--beta"),
     (["--beta", "0.1"], "--mbp"), (["--mbp", "-1", "--beta", "0.1"], "--mbp")],
)  # fmt: skip
def test_cli_bad_flags_exit_2(
    capsys: pytest.CaptureFixture[str], extra: list[str], flag: str
) -> None:
    code, _, err = _cli(capsys, *extra, "--json")
    assert code == 2 and f"{flag} = " in err

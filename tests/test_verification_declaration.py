"""Declarations, record counts, the recovered update and verdicts (privacy-math.md §9): the
plausibility checks, the Binomial law of the records against direct sums of its pmf, the
optimiser reductions against torch.optim.SGD, and the combination rules."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch
from scipy import stats

import fedpriv.verification as verification
from fedpriv.errors import InputError
from fedpriv.optimizer_settings import OptimizerSettings
from fedpriv.verification import (
    Declaration,
    Verdict,
    check_batch_sizes,
    check_declaration,
    client_update,
    combine_verdicts,
    record_count,
    unverifiable,
)

BASE = Declaration(
    sensitivity=1.0, lr=0.1, steps=2, batch_size=64.0, local_size=640, sample_rate=0.1,
)  # fmt: skip


def test_a_plausible_declaration_is_consistent_without_a_p_value():
    verdict = check_declaration(BASE)
    assert verdict.status == "consistent" and verdict.p_value is None
    fixed = dataclasses.replace(BASE, sampling="fixed", batch_sizes=(64, 64))
    assert check_declaration(fixed).status == "consistent"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"steps": 2.5}, "steps"),
        ({"steps": 0}, "steps"),
        ({"local_size": 0}, "local size"),
        ({"sample_rate": 1.5}, "q ="),
        ({"sample_rate": "abc"}, "q ="),
        ({"lr": float("nan")}, "learning rate"),
        ({"lr": None}, "learning rate"),
        ({"batch_size": 60.0}, "q·n"),
        ({"sensitivity": 0.0}, "C ="),
        ({"sensitivity": float("nan")}, "C ="),
        ({"optimizer": OptimizerSettings(momentum=1.0)}, "momentum"),
        ({"optimizer": OptimizerSettings(weight_decay=-0.1)}, "weight decay"),
        ({"sampling": "shuffle"}, "sampling"),
        ({"sampling": "fixed", "local_size": 1000, "sample_rate": 0.0645, "batch_size": 64.5},
         "integer L"),
        ({"batch_sizes": (64,)}, "1 batch sizes"),
        ({"batch_sizes": (64, 641)}, "not integers"),
        ({"batch_sizes": (64, 3.5)}, "not integers"),
        ({"sampling": "fixed", "batch_sizes": (64, 63)}, "fixed-size"),
    ],
)  # fmt: skip
def test_impossible_declarations_are_inconsistent_not_errors(change, words):
    verdict = check_declaration(dataclasses.replace(BASE, **change))
    assert verdict.status == "inconsistent" and verdict.p_value == 0.0
    assert words in verdict.reason


def test_an_unbounded_sensitivity_is_plausible():
    """``none`` bounds nothing: its sensitivity is infinite, and that is no contradiction."""
    assert check_declaration(dataclasses.replace(BASE, sensitivity=math.inf)).status == (
        "consistent")


@pytest.mark.parametrize(
    ("mechanism", "params", "field"),
    [
        ("gaussian", {"noise_multiplier": -1.0}, "mechanism-params.noise_multiplier"),
        ("laplace", {"laplace_scale": 0.0}, "mechanism-params.laplace_scale"),
        ("vmf", {"vmf_scale": -1.0}, "mechanism-params.vmf_scale"),
    ],
)
def test_a_mechanism_parameter_out_of_range_is_refused_by_its_mechanism(mechanism, params, field):
    """Each mechanism checks its own parameters (``param`` in its file) when the report is
    read: the verification's declaration knows no mechanism parameter."""
    from fedpriv.protocol import ClientReport, ReplyError

    report = {"partition-id": 0, "server-round": 1, "local-examples": 640, "steps": 2,
              "lr": 0.1, "batch-size": 64.0, "sampling": "poisson", "sample-rate": 0.1,
              "mechanism": mechanism, "mechanism-params": json.dumps(params)}
    with pytest.raises(ReplyError) as err:
        ClientReport.from_config(report)
    assert err.value.field == field


def test_batch_size_test_p_value_is_the_doubled_smaller_binomial_tail():
    n_trials, q = 2 * 640, 0.1
    pmf = stats.binom.pmf(np.arange(n_trials + 1), n_trials, q)
    for total in (100, 128, 160, 190):
        verdict = check_batch_sizes([total // 2, total - total // 2], local_size=640,
                                    sample_rate=q, alpha=1e-6)  # fmt: skip
        expected = min(1.0, 2 * min(pmf[: total + 1].sum(), pmf[total:].sum()))
        assert verdict.p_value == pytest.approx(expected, rel=1e-9, abs=1e-300)
    assert verdict.status == "inconsistent"  # 190 records where 128 ± 11 are expected


def test_record_count_prefers_declared_batches_then_fixed_then_poisson():
    assert record_count(2, batch_sizes=[3, 4], local_size=10, sample_rate=0.5).trials == 7
    fixed = record_count(3, sampling="fixed", local_size=640, sample_rate=0.1)
    assert (fixed.trials, fixed.known) == (192, True)
    poisson = record_count(3, local_size=640, sample_rate=0.1)
    assert (poisson.trials, poisson.rate, poisson.known) == (1920, 0.1, False)
    assert "Binomial" in poisson.source


def test_record_quantiles_against_the_pmf():
    law = record_count(2, local_size=300, sample_rate=0.07)
    pmf = stats.binom.pmf(np.arange(601), 600, 0.07)
    tail_above = pmf[::-1].cumsum()[::-1]  # tail_above[b] = P(B ≥ b)
    for beta in (0.3, 1e-3, 1e-9):
        b = law.upper_quantile(beta)
        assert tail_above[b + 1] <= beta * (1 + 1e-9) < tail_above[b]
        assert law.exceed_probability(b) == pytest.approx(tail_above[b + 1], rel=1e-6)
    known = record_count(1, batch_sizes=[5])
    assert known.upper_quantile(1e-12) == 5
    assert (known.exceed_probability(4), known.exceed_probability(5)) == (1.0, 0.0)


def test_record_count_refuses_malformed_arguments():
    with pytest.raises(InputError):
        record_count(2, batch_sizes=[3])
    with pytest.raises(InputError):
        record_count(1, sampling="fixed", local_size=1000, sample_rate=0.0645)
    with pytest.raises(InputError):
        record_count(1, sampling="bootstrap", local_size=10, sample_rate=0.5)
    with pytest.raises(InputError):
        record_count(0, local_size=10, sample_rate=0.5)


RECORDS = record_count(1, batch_sizes=[8])


def _update(**kwargs):
    theta = [np.ones((3, 4), np.float32), np.zeros(5, np.float32)]
    after = [a - np.float32(0.1) for a in theta]
    options = {"lr": 0.1, "steps": 1, "batch_size": 8.0, "records": RECORDS, **kwargs}
    return client_update(theta, after, **options)


def test_optimisers_that_defeat_the_tests_are_unverifiable():
    for kwargs, words in [
        ({"optimizer": OptimizerSettings("adam")}, "adaptive"),
        ({"optimizer": OptimizerSettings(momentum=0.9), "fresh_state": False}, "buffer"),
        ({"optimizer": OptimizerSettings(momentum=0.9), "steps": 2}, "momentum over k = 2"),
        ({"optimizer": OptimizerSettings(weight_decay=1e-4), "steps": 3},
         "weight decay over k = 3"),
    ]:
        verdict = _update(**kwargs)
        assert isinstance(verdict, Verdict) and verdict.status == "unverifiable"
        assert words in verdict.reason
    plain = _update()
    assert plain.dim == 17 and np.allclose(plain.summed, 1.0, rtol=1e-6)


def test_a_non_finite_update_is_unverifiable_and_shapes_must_match():
    theta = np.zeros(4, np.float32)
    verdict = client_update(theta, np.array([0, np.nan, 0, 0], np.float32), lr=0.1, steps=1,
                            batch_size=8.0, records=RECORDS)  # fmt: skip
    assert verdict.status == "unverifiable" and verdict.test == "update"
    with pytest.raises(InputError):
        client_update(theta, np.zeros(5, np.float32), lr=0.1, steps=1, batch_size=8.0,
                      records=RECORDS)  # fmt: skip


@pytest.mark.parametrize(
    ("momentum", "nesterov", "weight_decay"),
    [(0.9, False, 0.0), (0.9, True, 0.0), (0.5, True, 0.01)],
)
def test_one_torch_sgd_step_is_recovered(momentum, nesterov, weight_decay):
    """torch.optim.SGD with a fresh state, the release as the gradient: Σ r comes back within
    the rounding bound."""
    gen = torch.Generator().manual_seed(6)
    param = torch.nn.Parameter(torch.randn(2000, generator=gen))
    release = torch.randn(2000, generator=gen)
    theta = param.detach().numpy().copy()
    opt = torch.optim.SGD([param], lr=0.05, momentum=momentum, nesterov=nesterov,
                          weight_decay=weight_decay)  # fmt: skip
    param.grad = release.clone()
    opt.step()
    update = client_update(
        theta, param.detach().numpy(), lr=0.05, steps=1, batch_size=8.0, records=RECORDS,
        optimizer=OptimizerSettings("sgd", momentum, nesterov, weight_decay),
    )  # fmt: skip
    error = np.linalg.norm(update.summed - release.numpy().astype(np.float64))
    assert error <= update.summed_error(2, float(np.linalg.norm(release.numpy())))


def test_combining_verdicts():
    ok = Verdict("a", "consistent", "fine", 0.4, 1e-6)
    bad = Verdict("b", "inconsistent", "off", 1e-9, 1e-6)
    exact = Verdict("c", "consistent", "exact", 1.0)  # deterministic: not counted by Bonferroni
    both = combine_verdicts([ok, bad, exact])
    assert both.status == "inconsistent" and both.reason == "b: off"
    assert both.p_value == pytest.approx(2e-9) and both.alpha == pytest.approx(2e-6)
    assert combine_verdicts([ok, unverifiable("d", "why")]).status == "consistent"
    assert combine_verdicts([unverifiable("d", "why")], preconditions=[exact]).status == (
        "unverifiable"
    )
    assert combine_verdicts([ok], preconditions=[bad]).status == "inconsistent"
    assert json.loads(json.dumps(both.to_dict()))["parts"][1]["test"] == "b"
    with pytest.raises(ValueError):
        combine_verdicts([])


def test_public_api_resolves_sorted_and_loads_neither_torch_nor_flower():
    names = verification.__all__
    assert names == sorted(names, key=lambda n: (not n.isupper(), n))
    assert all(hasattr(verification, name) for name in names)
    code = "import sys, fedpriv.verification; print('torch' in sys.modules, 'flwr' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    assert math.isclose(verification.DEFAULT_ALPHA, 1e-6)

"""Issue 39, cost: the optimisation attacks' early stop on the float64 matching residual."""

from __future__ import annotations

import pytest
import torch
from attacks_support import digits

from attacks import run_attack, simulate_view
from attacks.inversion.optimisers import CHECK_EVERY, LBFGS, SignedAdam
from fedpriv.errors import InputError


def _count(optimiser, iterations, converged):
    x = torch.ones(3, requires_grad=True)
    steps: list[int] = []

    def objective():
        steps.append(1)
        return (x ** 2).sum()

    optimiser.minimise(objective, [x], iterations, lambda: None, converged)
    return len(steps), x


def test_signed_adam_without_a_test_keeps_the_published_schedule():
    """Same iterates as Adam + MultiStepLR(3/8, 5/8, 7/8; ×0.1), the reference schedule."""
    n, ours = _count(SignedAdam(0.1), 80, None)
    x = torch.ones(3, requires_grad=True)
    opt = torch.optim.Adam([x], lr=0.1)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [30, 50, 70], gamma=0.1)
    for _ in range(80):
        x.grad = torch.autograd.grad((x ** 2).sum(), [x])[0].sign()
        opt.step()
        sched.step()
    assert n == 80 and torch.equal(ours, x)


def test_signed_adam_brings_each_decay_forward_then_stops():
    asks = []
    n, _ = _count(SignedAdam(0.1), 2000, lambda: asks.append(1) or True)
    assert n == 4 * CHECK_EVERY and len(asks) == 4  # three decays brought forward, then stop


def test_lbfgs_stops_when_converged_and_runs_on_otherwise():
    assert _count(LBFGS(), 1000, lambda: True)[0] == CHECK_EVERY
    assert _count(LBFGS(), 250, lambda: False)[0] == 250


def test_early_stop_keeps_the_reconstruction_and_is_validated():
    x, y = digits([0])
    view = simulate_view("paper-mlp", x, y)
    full = run_attack("iga", view, iterations=400, init="analytic")
    early = run_attack("iga", view, iterations=400, init="analytic", early_stop=0.01)
    assert early.loss <= 1.05 * full.loss
    with pytest.raises(InputError, match="attack.early_stop"):
        run_attack("iga", view, iterations=5, early_stop=0.9)


def test_the_audit_passes_its_early_stop_to_the_attacks_that_take_it():
    from fedpriv.audit.config import AuditConfig
    from strategies.attack_schedule import attack_job

    x, y = digits([0, 1])
    view = simulate_view("paper-mlp", x, y)
    audit = AuditConfig(early_stop=0.05)
    assert attack_job(audit, "dlg", view, 1, 0).options == {"early_stop": 0.05}
    assert attack_job(audit, "iga", view, 1, 0).options == {"tv_weight": 1e-4, "early_stop": 0.05}
    assert attack_job(audit, "strongest", view, 1, 0).options == {"tv_weight": 1e-4,
                                                                   "early_stop": 0.05}
    assert attack_job(audit, "analytic", view, 1, 0).options == {}

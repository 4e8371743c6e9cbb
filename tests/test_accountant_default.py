"""One default accountant: ``fedpriv account`` uses the run's (``audit.accountant``), so a noise
calibrated with ``--target-epsilon`` gives the run the ε asked for."""

import pytest

from fedpriv.audit.config import DEFAULT_ACCOUNTANT, AuditConfig
from fedpriv.commands.account import account
from fedpriv.ledger import PrivacyLedger
from fedpriv.mechanisms.gaussian import GaussianRelease

# the quickstart: 143 records, batches of 32, 10 rounds of 20 steps
Q, STEPS, DELTA = 32 / 143, 200, 1e-5


def test_the_command_defaults_to_the_runs_accountant():
    out = account("gaussian", noise_multiplier=1.0, sample_rate=Q, steps=STEPS, delta=DELTA)
    assert out["accountant"] == AuditConfig().accountant == DEFAULT_ACCOUNTANT


@pytest.mark.parametrize("target", [5.0, 24.5])
def test_a_calibrated_noise_gives_the_run_the_target_epsilon(target):
    cal = account("gaussian", target_epsilon=target, sample_rate=Q, steps=STEPS, delta=DELTA)
    ledger = PrivacyLedger(DELTA, AuditConfig().accountant)
    release = GaussianRelease(cal["noise_multiplier"])
    for rnd in range(1, 11):
        row = ledger.fold(rnd, 0, release, steps=20, sample_rate=Q, batch_size=32, dim=100)
    assert row["epsilon"] == pytest.approx(cal["epsilon"], rel=1e-9)
    assert target * (1 - 2e-3) <= row["epsilon"] <= target

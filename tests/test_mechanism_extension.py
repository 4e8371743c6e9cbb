"""Adding a mechanism is adding one file: tests/toy_mechanism.py, imported before the registry
is first read, is offered by the configuration, the accountant, ``fedpriv account``, the
spec parser of ``fedpriv compare``, the capacity and the ledger — and every number it gets
there equals the Gaussian's at σ = √v (an independent route)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import json, math, sys
sys.path.insert(0, sys.argv[1])
import toy_mechanism  # the one new file

from fedpriv.accounting import ReleaseEvent, epsilon
from fedpriv.commands.account import account
from workflows.config import load_config
from fedpriv.commands.specs import parse_spec
from fedpriv.ledger import PrivacyLedger
from fedpriv.mechanisms import accountable, build_mechanism, make_release

cfg = load_config(None, ["mechanism.name=variance-gaussian", "mechanism.noise_variance=2.25"])
mech = build_mechanism(cfg.mechanism.name, cfg.mechanism.params)
toy = account("variance-gaussian", noise_variance=2.25, sample_rate=0.01, steps=100,
              delta=1e-5, accountant="pld")
gauss = account("gaussian", noise_multiplier=1.5, sample_rate=0.01, steps=100, delta=1e-5,
                accountant="pld")
toy_full = account("variance-gaussian", noise_variance=2.25, sample_rate=1.0, steps=10,
                   delta=1e-5, accountant="rdp", route="rdp")
gauss_full = account("gaussian", noise_multiplier=1.5, sample_rate=1.0, steps=10, delta=1e-5,
                     accountant="rdp", route="rdp")
calibrated = account("variance-gaussian", target_epsilon=2.0, sample_rate=0.01, steps=100,
                     delta=1e-5)
from fedpriv.calibration import calibrated as run_calibrated
from fedpriv.config_reference import explain
target = load_config(None, ["mechanism.name=variance-gaussian", "mechanism.target_epsilon=2.0",
                            "rounds=10", "train.local_steps=10", "train.batch_size=1",
                            "data.num_clients=1"])
run_noise = run_calibrated(target, [100], 100).mechanism.params["noise_variance"]
spec = parse_spec("variance-gaussian:noise_variance=2.25", "--a")
ledger = PrivacyLedger(1e-5)
tally = ledger.fold(1, 0, mech.release(100), steps=3, sample_rate=0.01, batch_size=8, dim=100)
gauss_tally = PrivacyLedger(1e-5).fold(1, 0, make_release("gaussian", 1.5), steps=3,
                                       sample_rate=0.01, batch_size=8, dim=100)
print(json.dumps({
    "accountable": accountable(),
    "eps_toy": toy["epsilon"], "eps_gauss": gauss["epsilon"],
    "eps_toy_full": toy_full["epsilon"], "eps_gauss_full": gauss_full["epsilon"],
    "calibrated": calibrated["noise_variance"], "calibrated_eps": calibrated["epsilon"],
    "run_calibrated": run_noise, "reference": explain("mechanism.noise_variance").allowed,
    "tradeoff": float(spec.tradeoff()(0.3)),
    "tradeoff_gauss": float(parse_spec("gaussian:sigma=1.5", "--b").tradeoff()(0.3)),
    "capacity": tally["log_capacity_cumulative"],
    "capacity_gauss": gauss_tally["log_capacity_cumulative"],
}))
"""


def test_a_mechanism_in_one_file_reaches_every_consumer(tmp_path: Path) -> None:
    here = str(Path(__file__).parent)
    out = subprocess.run([sys.executable, "-c", SCRIPT, here], capture_output=True, text=True,
                         check=True)
    got = json.loads(out.stdout)
    assert "variance-gaussian" in got["accountable"]
    assert abs(got["eps_toy"] - got["eps_gauss"]) <= 1e-9 * got["eps_gauss"]  # same PLD
    # unsubsampled RDP: the toy's own closed form against dp-accounting's Gaussian
    assert abs(got["eps_toy_full"] - got["eps_gauss_full"]) <= 1e-6 * got["eps_gauss_full"]
    assert got["calibrated_eps"] <= 2.0 and got["calibrated"] > 0
    assert got["run_calibrated"] == got["calibrated"]  # mechanism.target_epsilon: the same
    assert got["reference"]  # the config reference lists its parameter
    assert abs(got["tradeoff"] - got["tradeoff_gauss"]) < 1e-12
    assert abs(got["capacity"] - got["capacity_gauss"]) < 1e-9 * got["capacity_gauss"]

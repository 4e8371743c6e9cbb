"""The ServerApp: Flower's FedAvg inside Flower's client-side fixed-clipping DP wrapper, with
Flower's own accountant, the whole wrapped by fedpriv's auditor (docs/flower-dp.md)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import DifferentialPrivacyClientSideFixedClipping, FedAvg
from flwr.supercore.privacy_accounting import (
    NeighboringRelation,
    PrivacyConfig,
    SamplingMethod,
)
from flwr.supercore.privacy_accounting.rdp_accountant import RdpAccountant

from flower_dp_app.task import INPUTS, make_model
from strategies import audit_strategy

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Every client every round, noise on the server, clipping on the clients; the audit
    report goes to ``run-dir/audit``."""
    cfg = context.run_config
    clients, delta = int(cfg.get("num-clients", 2)), float(cfg.get("delta", 1e-5))
    accountant = RdpAccountant(PrivacyConfig(
        target_delta=delta, population_size=clients,
        neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
        sampling_method=SamplingMethod.NO_AMPLIFICATION))
    dp = DifferentialPrivacyClientSideFixedClipping(
        FedAvg(fraction_train=1.0, fraction_evaluate=0.0),
        noise_multiplier=float(cfg.get("noise-multiplier", 1.0)),
        clipping_norm=float(cfg.get("clipping-norm", 1.0)), num_sampled_clients=clients,
        accountant=accountant)
    out = Path(str(cfg.get("run-dir", "")) or tempfile.mkdtemp(prefix="flower-dp-app-"))
    audited = audit_strategy(dp, run_dir=out / "audit", num_clients=clients,
                             audit={"delta": delta}, model_factory=make_model,
                             input_shape=(INPUTS,), num_classes=2)
    audited.start(grid=grid, initial_arrays=ArrayRecord(make_model().state_dict()),
                  num_rounds=int(cfg.get("num-server-rounds", 3)))
    print(f"audit report: {out / 'audit' / 'report.json'}")

"""Synthetic run reports shaped like ``fedpriv.audit.build_report``'s, for the HTML tests.

Every value is drawn here from a seeded generator and kept beside the report (``Truth``) so
that tests compare what the page shows with what was put in, not with the renderer's own
arithmetic. ``optional=True`` adds the fields other engineers are adding to report.json:
``verification``, ``guarantee`` as declared/verified/none, ``epsilon_lower``,
``pac_accuracy``, ``pac_robust_confidence``, ``budget`` and run-level ``rejections``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

STATUSES = ("consistent", "inconsistent", "unverifiable")
BUDGET = 6.0


@dataclass
class Truth:
    """What the synthetic report holds: ``epsilon[i, j]`` of client ``i`` after round
    ``j + 1`` (cumulative), the per-round verification statuses, and the rejections."""

    epsilon: np.ndarray
    statuses: np.ndarray
    rejections: list[dict[str, Any]]


def _entry(rnd: int, eps: float, status: str | None, rng: np.random.Generator) -> dict:
    entry = {
        "round": rnd, "update_status": "ok", "epsilon": eps, "log_capacity_round": 50.0,
        "log_capacity_cumulative": 50.0 * rnd, "mbp_bound": math.inf, "abp_bound": math.inf,
        "mbp_estimate": float(rng.uniform(0, 1)), "abp_estimate": None,
        "ssim": float(rng.uniform(0, 1)),
    }  # fmt: skip
    if status is not None:
        entry["verification"] = {"status": status, "reason": f"norm test r{rnd}",
                                 "p_value": float(rng.uniform(0, 1))}  # fmt: skip
        entry["epsilon_lower"] = {"value": eps / 4, "confidence": 0.95, "method": "canary"}
    return entry


def _client(cid: int, eps: np.ndarray, statuses: np.ndarray | None, rng) -> dict[str, Any]:
    rounds = range(1, len(eps) + 1)
    per_round = [_entry(r, float(e), None if statuses is None else str(statuses[r - 1]), rng)
                 for r, e in zip(rounds, eps, strict=True)]  # fmt: skip
    client = {
        "client_id": cid, "mechanism": "gaussian",
        "mechanism_params": {"clip": 1.0, "noise_multiplier": 1.0}, "formal_guarantee": True,
        "guarantee": "formal", "pseudo_gradient": True, "rounds_participated": len(eps),
        "epsilon": float(eps[-1]), "delta": 1e-5, "accountant": "rdp", "route": "rdp",
        "optimal_order": 8.0, "compose": "per-step", "releases": 20 * len(eps),
        "log_bayes_capacity": 50.0 * len(eps), "threat_model": "record",
        "mbp_bound": math.inf, "abp_bound": math.inf,
        "mbp_estimate": max(e["mbp_estimate"] for e in per_round), "abp_estimate": None,
        "attack": None, "failures": [], "per_round": per_round,
    }  # fmt: skip
    if statuses is not None:
        over = np.nonzero(eps > BUDGET)[0]
        client.update({
            "verification": {**per_round[-1]["verification"]},
            "guarantee": ("declared", "verified", "none")[cid % 3],
            "epsilon_lower": {**per_round[-1]["epsilon_lower"]},
            "pac_accuracy": 0.9, "pac_robust_confidence": 0.8,
            "budget": {"epsilon_budget": BUDGET,
                       "exhausted_round": int(over[0]) + 1 if over.size else None},
        })  # fmt: skip
    return client


def synthetic_report(
    clients: int, rounds: int, *, optional: bool, seed: int = 0
) -> tuple[dict[str, Any], Truth]:
    """A completed run of ``clients`` Gaussian clients over ``rounds`` rounds; client ε grows
    by a random positive step each round (so it is cumulative), one client failed once."""
    rng = np.random.default_rng(seed)
    epsilon = np.cumsum(rng.uniform(0.5, 2.0, size=(clients, rounds)), axis=1)
    statuses = rng.choice(STATUSES, size=(clients, rounds))
    report_clients = [
        _client(c, epsilon[c], statuses[c] if optional else None, rng) for c in range(clients)
    ]
    failures = [{"failure_id": 1, "round": 1, "client_id": 0, "node_id": "42",
                 "kind": "timeout", "message": "no reply in 60 s"}]  # fmt: skip
    rejections = [{"round": 2, "client_id": 1, "reason": "declared σ inconsistent"}]
    report = {
        "run_dir": "/runs/synthetic", "run_id": "0123456789abcdef", "status": "completed",
        "error": None, "fedpriv_version": "0.1.0", "seed": seed, "rounds": rounds,
        "completed_rounds": list(range(1, rounds + 1)), "incomplete_rounds": [],
        "accuracy": np.linspace(0.1, 0.9, rounds).tolist(),
        "loss": np.linspace(2.3, 0.4, rounds).tolist(), "clients": report_clients,
        "failures": failures, "wall_seconds": 12.5,
        "config": {"seed": seed, "rounds": rounds, "mechanism": {"name": "gaussian"}},
    }  # fmt: skip
    if optional:
        report["rejections"] = rejections
    return report, Truth(epsilon, statuses, rejections if optional else [])

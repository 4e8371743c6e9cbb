"""``fedpriv account``: ε at δ of T Poisson-sampled releases, or calibrate the noise to a target ε.

A thin layer over :func:`fedpriv.commands.account.account`, which validates every flag.
"""

from __future__ import annotations

import argparse
from typing import Any

from fedpriv.commands.account import flag
from fedpriv.mechanisms import accountable, release_class

__all__ = ["register", "render", "run"]


def register(subparsers: Any) -> None:
    """Add the ``account`` parser."""
    p = subparsers.add_parser(
        "account",
        help="epsilon at delta for a mechanism, or calibrate its noise to a target epsilon",
        description="Privacy accounting of T Poisson-sampled noisy releases (add/remove "
        "neighbours, one training example). Default accountant: rdp with the best route, "
        "as in runs (audit.accountant).",
    )
    p.add_argument("--mechanism", required=True, choices=accountable())
    for name, release in _noise_parameters().items():
        p.add_argument(flag(name), type=float, metavar="V",
                       help=release.parameter_help)
    p.add_argument("--dim", type=float, metavar="P", help="model dimension (required for vmf)")
    p.add_argument("--layer-dims", metavar="P1,P2,...",
                   help="vmf only: the multi-variate (per-layer) VMF over parameter tensors of "
                   "these sizes, one common kappa (RDP summed over layers)")
    p.add_argument("--sample-rate", type=float, metavar="Q", help="Poisson sampling rate q")
    p.add_argument("--steps", type=float, metavar="T", help="number of noisy releases")
    p.add_argument("--epochs", type=float, metavar="E",
                   help="epochs: T = ceil(E / q) under per-step composition")
    p.add_argument("--delta", type=float, metavar="D", help="target delta")
    p.add_argument("--compose", default="per-step", choices=["per-step", "per-epoch"],
                   help="per-step (default, correct) or per-epoch (compatibility: understates)")
    p.add_argument("--accountant", choices=["rdp", "pld"],
                   help="default rdp, the accountant of runs (audit.accountant)")
    p.add_argument("--route", choices=["best", "rdp", "approach1"],
                   help="RDP route (default best: the least epsilon of rdp and approach1)")
    p.add_argument("--target-epsilon", type=float, metavar="E",
                   help="calibrate the noise parameter to this epsilon instead")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _noise_parameters() -> dict[str, type]:
    """Each accountable mechanism's noise parameter → its release class (from the registry)."""
    return {cls.parameter_name: cls for cls in map(release_class, accountable())}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Account (or calibrate) as the flags say; returns the JSON object."""
    from fedpriv.commands.account import account

    return account(
        args.mechanism,
        sample_rate=args.sample_rate,
        delta=args.delta,
        steps=args.steps,
        epochs=args.epochs,
        dim=args.dim,
        layer_dims=args.layer_dims,
        compose=args.compose,
        accountant=args.accountant,
        route=args.route,
        target_epsilon=args.target_epsilon,
        **{name: getattr(args, name) for name in _noise_parameters()},
    )


def render(result: dict[str, Any]) -> str:
    """One-paragraph human summary."""
    name = release_class(result["mechanism"]).parameter_name
    how = f"{result['accountant']} accountant, route {result['route']}"
    if result["optimal_order"] is not None:
        how += f", order {result['optimal_order']:g}"
    lines = [
        f"epsilon = {result['epsilon']:.6g} at delta = {result['delta']:.3g} ({how})",
        f"{result['mechanism']} {name} = {result[name]:.6g}"
        + (" (calibrated)" if result["calibrated"] else "")
        + f", q = {result['sample_rate']:.6g}, T = {result['steps']} ({result['compose']}), "
        f"{result['neighbouring_relation']}, {result['unit']}",
    ]
    lines += [f"warning: {w}" for w in result["warnings"]]
    return "\n".join(lines)

"""``fedpriv account``: ε at δ of T sampled releases, or calibrate the noise to a target ε.

A thin layer over :func:`fedpriv.commands.account.account`, which validates every flag.
"""

from __future__ import annotations

import argparse
from typing import Any

from fedpriv.audit.config import DEFAULT_DELTA
from fedpriv.commands.flags import flag
from fedpriv.mechanisms import accountable, release_class

__all__ = ["register", "render", "run"]


def register(subparsers: Any) -> None:
    """Add the ``account`` parser."""
    p = subparsers.add_parser(
        "account",
        help="epsilon at delta for a mechanism, or calibrate its noise to a target epsilon",
        description="Privacy accounting of T sampled noisy releases (one training example; "
        "Poisson or fixed-size sampling; add/remove or replace-one neighbours). Default "
        "accountant: tightest, the least epsilon of every valid route, as in runs "
        "(audit.accountant).",
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
    p.add_argument("--sampling", default="poisson", choices=["poisson", "fixed-size"],
                   help="poisson (default: --sample-rate) or fixed-size (m of N without "
                   "replacement: --sample-size and --population)")
    p.add_argument("--population", type=float, metavar="N",
                   help="fixed-size sampling: the records (or clients) sampled from")
    p.add_argument("--sample-size", type=float, metavar="M",
                   help="fixed-size sampling: the records (or clients) in each sample")
    p.add_argument("--neighbouring", default="add-remove", choices=["add-remove", "replace-one"],
                   help="add or remove one example (default), or replace one")
    p.add_argument("--steps", type=float, metavar="T", help="number of noisy releases")
    p.add_argument("--epochs", type=float, metavar="E",
                   help="epochs: T = ceil(E / q) under per-step composition")
    p.add_argument("--delta", type=float, metavar="D", default=DEFAULT_DELTA,
                   help=f"target delta (default {DEFAULT_DELTA:g}, as in runs)")
    p.add_argument("--compose", default="per-step", choices=["per-step", "per-epoch"],
                   help="per-step (default, correct) or per-epoch (compatibility: understates)")
    p.add_argument("--accountant", choices=["tightest", "pld", "rdp"],
                   help="default tightest (the least of pld and rdp), the accountant of runs "
                   "(audit.accountant)")
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
        sampling=args.sampling,
        population=args.population,
        sample_size=args.sample_size,
        neighbouring=args.neighbouring,
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
        + f", {_sampled(result)}, T = {result['steps']} ({result['compose']}), "
        f"{result['neighbouring']} neighbours, {result['unit']}",
    ]
    lines += [f"warning: {w}" for w in result["warnings"]]
    return "\n".join(lines)


def _sampled(result: dict[str, Any]) -> str:
    """How the releases were sampled, in a few words."""
    if result["population"] is not None:
        return (f"fixed-size samples of {result['sample_size']:,} of {result['population']:,} "
                f"(q = {result['sample_rate']:.6g})")
    return f"Poisson q = {result['sample_rate']:.6g}"

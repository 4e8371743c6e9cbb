"""``fedpriv compare``: two mechanisms by Bayes error — Δ both ways, Δ↔, TV, R*.

A thin layer over :func:`fedpriv.leakage.comparison.compare_specs`, which checks every flag.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "render", "run"]

_SPEC_HELP = (
    "MECH:PARAM=V[,..]: gaussian:mu=M | gaussian:sigma=S | laplace:mu=M | laplace:scale=B | "
    "vmf:kappa=K,dim=P | subsampled-gaussian:sigma=S,q=Q,steps=T | "
    "subsampled-laplace:scale=B,q=Q,steps=T | subsampled-vmf:kappa=K,dim=P,q=Q,steps=T | pp | bnp"
)


def register(subparsers: Any) -> None:
    """Add the ``compare`` parser."""
    p = subparsers.add_parser(
        "compare",
        help="compare two mechanisms by Bayes error (Delta-divergence, TV, R*)",
        description="Delta(A||B) = max over priors of R_A - R_B, the worst-case excess "
        "vulnerability of choosing B over A (Kaissis et al., ICML 2025); its symmetrisation is "
        "a metric. Accuracy 1e-4 absolute.",
    )
    p.add_argument("--a", required=True, metavar="SPEC", help=_SPEC_HELP)
    p.add_argument("--b", required=True, metavar="SPEC", help="as --a")
    p.add_argument("--plot", metavar="PATH", help="write the Bayes-error figure here")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Compare the two specs; returns the JSON object."""
    from fedpriv.leakage.comparison import compare_specs

    return compare_specs(args.a, args.b, plot=args.plot)


def render(result: dict[str, Any]) -> str:
    """Short human summary."""
    lines = [
        f"A = {result['a']['spec']}, B = {result['b']['spec']}",
        f"Delta(A||B) = {result['delta_ab']:.6f} at prior {result['prior_ab']:.4f}",
        f"Delta(B||A) = {result['delta_ba']:.6f} at prior {result['prior_ba']:.4f}",
        f"Delta_sym   = {result['delta_sym']:.6f}",
        f"TV: A {result['tv_a']:.6f}, B {result['tv_b']:.6f};  "
        f"R*: A {result['rstar_a']:.6f}, B {result['rstar_b']:.6f}",
    ]
    if result["plot"]:
        lines.append(f"figure: {result['plot']}")
    return "\n".join(lines)

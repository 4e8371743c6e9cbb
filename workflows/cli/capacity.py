"""``fedpriv capacity``: Bayes capacity of one noisy release, with its threat model.

A thin layer over :func:`fedpriv.leakage.capacity.capacity_report`; library keys in its
errors are renamed to the flags that carry them.
"""

from __future__ import annotations

import argparse
from typing import Any

from fedpriv.errors import InputError

__all__ = ["register", "render", "run"]

FLAGS = {
    "mechanism": "--mechanism",
    "dim": "--dim",
    "radius": "--radius",
    "clip": "--radius",
    "noise_std": "--noise-std",
    "kappa": "--kappa",
    "laplace_scale": "--laplace-scale",
    "scale": "--laplace-scale",
    "threat_model": "--threat-model",
    "batch_size": "--batch-size",
}
"""Library input keys → the flags that carry them."""


def register(subparsers: Any) -> None:
    """Add the ``capacity`` parser."""
    p = subparsers.add_parser(
        "capacity",
        help="Bayes capacity (log C) of one noisy release",
        description="Bayes capacity C = ∫ sup_x f(x)(y) dy of one release: log C bounds the "
        "multiplicative leakage to any adversary (privacy-math.md §5). Reported as log C "
        "(C overflows for realistic dimensions) with its threat model.",
    )
    p.add_argument("--mechanism", required=True, choices=["gaussian", "laplace", "vmf"])
    p.add_argument("--dim", required=True, type=float, metavar="P", help="model dimension p")
    p.add_argument(
        "--radius",
        type=float,
        metavar="R",
        help="per-record secret radius, the clip bound C (default 1; not used by vmf)",
    )
    noise = p.add_mutually_exclusive_group()
    noise.add_argument(
        "--noise-std", type=float, metavar="S", help="Gaussian noise std s = sigma*C on the sum"
    )
    noise.add_argument("--kappa", type=float, metavar="K", help="VMF concentration")
    noise.add_argument(
        "--laplace-scale", type=float, metavar="B", help="Laplace scale b = lambda*C on the sum"
    )
    p.add_argument(
        "--threat-model",
        default="record",
        choices=["record", "batch"],
        help="record: r = C (default); batch: r = L*C",
    )
    p.add_argument("--batch-size", type=float, metavar="L", help="batch size L (batch level)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Compute the capacity the flags describe; returns the JSON object."""
    from fedpriv.leakage.capacity import capacity_report

    try:
        return capacity_report(
            args.mechanism,
            args.dim,
            noise={
                "noise_std": args.noise_std,
                "kappa": args.kappa,
                "laplace_scale": args.laplace_scale,
            },
            radius=args.radius,
            threat_model=args.threat_model,
            batch_size=args.batch_size,
        )
    except InputError as exc:
        raise InputError(FLAGS.get(exc.key, exc.key), exc.value, exc.allowed) from None


def render(result: dict[str, Any]) -> str:
    """Two-line human summary."""
    noise = next(k for k in ("noise_std", "kappa", "laplace_scale") if k in result)
    where = "" if result["radius"] is None else f", radius r = {result['radius']:g}"
    capacity = result["capacity"]
    shown = f"{capacity:.6g}" if capacity != float("inf") else "overflows (inf)"
    return (
        f"log C = {result['log_capacity']:.6g} nats (C = {shown})\n"
        f"{result['mechanism']} {noise} = {result[noise]:g}, p = {result['dim']}, "
        f"{result['threat_model']}-level secret{where}"
    )

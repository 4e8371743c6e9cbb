"""``fedpriv capacity``: Bayes capacity of one noisy release, with its threat model.

A thin layer over :func:`fedpriv.commands.capacity.capacity_report`; library keys in its
errors are renamed to the flags that carry them.
"""

from __future__ import annotations

import argparse
from typing import Any

from fedpriv.commands.flags import flag
from fedpriv.errors import InputError
from fedpriv.mechanisms import accountable, release_class

__all__ = ["register", "render", "run"]

_RENAMED = {"clip": "--radius"}  # library keys whose flag is not the key with dashes


def _noise_inputs() -> dict[str, type]:
    """The noise input of each accountable mechanism (absolute scale, else its parameter)."""
    classes = [release_class(name) for name in accountable()]
    return {cls.absolute_noise or cls.parameter_name: cls for cls in classes}


def register(subparsers: Any) -> None:
    """Add the ``capacity`` parser."""
    p = subparsers.add_parser(
        "capacity",
        help="Bayes capacity (log C) of one noisy release",
        description="Bayes capacity C = ∫ sup_x f(x)(y) dy of one release: log C bounds the "
        "multiplicative leakage to any adversary (privacy-math.md §5). Reported as log C "
        "(C overflows for realistic dimensions) with its threat model.",
    )
    p.add_argument("--mechanism", required=True, choices=accountable())
    p.add_argument("--dim", required=True, type=float, metavar="P", help="model dimension p")
    p.add_argument(
        "--radius",
        type=float,
        metavar="R",
        help="per-record secret radius, the clip bound C (default 1; not used by vmf)",
    )
    noise = p.add_mutually_exclusive_group()
    for name, release in _noise_inputs().items():
        what = "noise scale on the sum" if release.absolute_noise else release.parameter_help
        noise.add_argument(flag(name), type=float, metavar="V", help=f"{release.mechanism}: {what}")
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
    from fedpriv.commands.capacity import capacity_report

    try:
        return capacity_report(
            args.mechanism,
            args.dim,
            noise={name: getattr(args, name) for name in _noise_inputs()},
            radius=args.radius,
            threat_model=args.threat_model,
            batch_size=args.batch_size,
        )
    except InputError as exc:
        raise InputError(_RENAMED.get(exc.key, flag(exc.key)), exc.value, exc.allowed) from None


def render(result: dict[str, Any]) -> str:
    """Two-line human summary."""
    noise = next(k for k in _noise_inputs() if k in result)
    where = "" if result["radius"] is None else f", radius r = {result['radius']:g}"
    capacity = result["capacity"]
    shown = f"{capacity:.6g}" if capacity != float("inf") else "overflows (inf)"
    return (
        f"log C = {result['log_capacity']:.6g} nats (C = {shown})\n"
        f"{result['mechanism']} {noise} = {result[noise]:g}, p = {result['dim']}, "
        f"{result['threat_model']}-level secret{where}"
    )

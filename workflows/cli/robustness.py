"""``fedpriv robustness``: input robustness α from privacy leakage (Zhang & Chen, Theorem 5.5),
optionally with the PAC-robustness confidence of Theorem 4.3.

A thin layer over :func:`fedpriv.commands.robustness.robustness_report`; library keys in its
errors are renamed to the flags that carry them.
"""

from __future__ import annotations

import argparse
from typing import Any

from fedpriv.errors import InputError

__all__ = ["register", "render", "run"]

FLAGS = {
    "lipschitz": "--lipschitz",
    "radius": "--radius",
    "diameter": "--diameter",
    "leakage": "--leakage",
    "c_a": "--c-a",
    "c_b": "--c-b",
    "c_2": "--c-2",
    "i_const": "--i-const",
    "p_const": "--p-const",
    "eps_mbp": "--mbp",
    "beta": "--beta",
}
"""Library input keys → the flags that carry them."""

_HELP = {
    "lipschitz": "Lipschitz constant C (> 0)",
    "radius": "perturbation radius r (>= 0)",
    "diameter": "parameter-space bound D (> 0)",
    "leakage": "privacy leakage eps_p in [0, 1]",
    "c_a": "algorithm constant c_a (> 0)",
    "c_b": "algorithm constant c_b (>= 0)",
    "c_2": "algorithm constant c_2 (>= 0)",
    "i_const": "the constant I of the term c_2*c_b*I^(p-1) (> 0)",
    "p_const": "the constant p of the term c_2*c_b*I^(p-1) (finite)",
}


def register(subparsers: Any) -> None:
    """Add the ``robustness`` parser."""
    p = subparsers.add_parser(
        "robustness",
        help="input robustness alpha from privacy leakage (Zhang & Chen, Thm 5.5)",
        description="alpha = C*r/2 + (4*D*(1 - eps_p) - c_2*c_b*I^(p-1)) / (2*c_a) (Zhang & "
        "Chen, arXiv 2403.16591, Theorem 5.5). Every constant is an assumption that fedpriv "
        "cannot check; the output lists them. With --mbp and --beta, also Theorem 4.3: an "
        "(eps, beta, alpha)-MBP mechanism is alpha-PAC-robust with probability 1 - (1+4 eps) beta.",
    )
    for key, flag in FLAGS.items():
        if key in _HELP:
            p.add_argument(flag, dest=key, required=True, type=float, help=_HELP[key])
    p.add_argument("--mbp", dest="eps_mbp", type=float, help="maximum Bayesian privacy eps (>= 0)")
    p.add_argument("--beta", type=float, help="failure probability of the accuracy, in [0, 1]")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Compute α (and the PAC confidence); returns the JSON object."""
    from fedpriv.commands.robustness import robustness_report

    constants = {key: getattr(args, key) for key in _HELP}
    try:
        return robustness_report(constants, eps_mbp=args.eps_mbp, beta=args.beta)
    except InputError as exc:
        raise InputError(FLAGS.get(exc.key, exc.key), exc.value, exc.allowed) from None


def render(result: dict[str, Any]) -> str:
    """Human summary with the assumptions."""
    lines = [
        f"alpha = {result['alpha']:.6g}  ({result['theorem']})",
        f"  = C*r/2 {result['lipschitz_term']:.6g} + 4D(1-eps_p)/(2c_a) "
        f"{result['leakage_term']:.6g} - c_2*c_b*I^(p-1)/(2c_a) {result['algorithm_term']:.6g}",
    ]
    if result["alpha_negative"]:
        lines.append("  alpha < 0: these constants give no meaningful radius; check them")
    pac = result["pac"]
    if pac is not None:
        state = "vacuous" if pac["vacuous"] else f"probability {pac['confidence']:.6g}"
        lines.append(f"Theorem 4.3: gamma = (1+4 eps) beta = {pac['gamma']:.6g} -> {state}")
    lines.append("Assumptions you must justify (fedpriv checks none of them):")
    for key, text in result["assumptions"].items():
        lines.append(f"  {FLAGS[key]} = {result['inputs'][key]:g}: {text}")
    return "\n".join(lines)

"""``fedpriv compare``: two mechanisms by Bayes error — Δ both ways, Δ↔, TV, R* — optionally
composed, with the emergent-Blackwell-dominance bound (Theorem 3 of Kaissis et al.).

A thin layer over :func:`fedpriv.commands.compare.compare_specs`, which checks every flag.
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
        "a metric. Accuracy 1e-4 absolute. With --compose N each spec is ONE release (a "
        "subsampled spec must say steps=1), A is composed N times and B N~ times; the output "
        "adds each release's privacy-loss moments v1..v4, eta and the Theorem 3 bound on "
        "Delta(A^N||B^N~), which holds when N/N~ >= eta_B^2/eta_A^2.",
    )
    p.add_argument("--a", required=True, metavar="SPEC", help=_SPEC_HELP)
    p.add_argument("--b", required=True, metavar="SPEC", help="as --a")
    p.add_argument(
        "--compose", type=float, metavar="N", help="compose A N times (and B, unless --compose-b)"
    )
    p.add_argument("--compose-b", type=float, metavar="N", help="compose B this many times")
    p.add_argument(
        "--plot",
        metavar="PATH",
        help="write the figure here: Bayes-error curves, or with --compose the exact Delta of "
        "the compositions against n with the Theorem 3 bound",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Compare the two specs; returns the JSON object."""
    from fedpriv.commands.compare import compare_specs

    return compare_specs(
        args.a, args.b, compose=args.compose, compose_b=args.compose_b, plot=args.plot
    )


def _render_theorem(result: dict[str, Any]) -> list[str]:
    lines = []
    for side in ("a", "b"):
        r, f = result[side], result[side]["functionals"]
        lines.append(
            f"{side.upper()}: v1 {f['v1']:.6g}, v2 {f['v2']:.6g}, v3 {f['v3']:.6g}, "
            f"v4 {f['v4']:.6g}, eta {f['eta']:.6g}  (N = {r['compose']})"
        )
    theorem = result["theorem3"]
    if not theorem["applies"]:
        return [*lines, f"Theorem 3: not applicable: {theorem['reason']}"]
    for way, name in (("ab", "Delta(A^N||B^N~)"), ("ba", "Delta(B^N~||A^N)")):
        t = theorem[way]
        state = "holds" if t["holds"] else "fails"
        bound = f"bound {t['bound']:.6g}" if t["bound"] is not None else "no bound"
        lines.append(
            f"Theorem 3 for {name}: ratio {t['ratio']:.6g} vs eta^2 ratio {t['threshold']:.6g} "
            f"-> {state}; {bound}; exact {t['exact_delta']:.6g}"
        )
    return lines


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
    if "theorem3" in result:
        lines = [lines[0], *_render_theorem(result), *lines[1:]]
    if result["plot"]:
        lines.append(f"figure: {result['plot']}")
    return "\n".join(lines)

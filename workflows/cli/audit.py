"""``fedpriv audit RUN_DIR [--attack NAME] [--rounds A:B] [--clients IDS] [--iterations N]
[--canaries [--canary-method M] [--canary-confidence C]]``: re-attack a run's stored updates
offline, or recompute their canary ε lower bounds (:func:`workflows.offline_audit.audit_run`)."""

from __future__ import annotations

import argparse
import math
import re
from typing import Any

from fedpriv.errors import InputError
from fedpriv.jsonio import json_number

__all__ = ["parse_clients", "parse_rounds", "register", "render", "run"]

_ROUNDS = re.compile(r"(0*[0-9]{0,7}):(0*[0-9]{0,7})|(0*[0-9]{1,7})")  # ASCII, bounded


def register(subparsers: Any) -> None:
    """Add the ``audit`` subcommand."""
    p = subparsers.add_parser(
        "audit",
        help="re-attack a run's stored updates offline and rebuild its report",
        description="Rebuild the server's view of each stored update (θ, Δ, public metadata), "
        "run gradient-inversion attacks on it with the run's settings and seeds, score them "
        "against the stored ground truth where there is one, store the results and rebuild "
        "the report. Works on a finished, killed or running run (completed rounds only).",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run directory (holds audit.sqlite)")
    p.add_argument("--attack", action="append", metavar="NAME",
                   help="attack to run (repeatable; default: the run's audit.attacks, else iga)")
    p.add_argument("--rounds", metavar="A:B",
                   help="rounds A to B inclusive (A:, :B and a single round N work too)")
    p.add_argument("--clients", metavar="IDS", help="comma-separated client ids, e.g. 0,3,7")
    p.add_argument("--iterations", type=int, metavar="N",
                   help="optimiser iterations per restart (default: the run's audit.iterations)")
    p.add_argument("--executor", choices=["inline", "ray"], default="inline",
                   help="run attacks in this process or as Ray tasks (default inline)")
    p.add_argument("--canaries", action="store_true",
                   help="recompute the canary epsilon lower bounds from the stored updates "
                   "(then attacks run only with --attack)")
    p.add_argument("--canary-method", metavar="METHOD",
                   help="estimator for --canaries: one-run, clopper-pearson, gdp-thresholds or "
                   "gdp-fit (default: the run's audit.canaries.method)")
    p.add_argument("--canary-confidence", type=float, metavar="C",
                   help="confidence in (0, 1) for --canaries (default: the run's)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")


def parse_rounds(text: str | None) -> tuple[int | None, int | None]:
    """``"A:B"`` → ``(A, B)`` inclusive; ``"A:"``, ``":B"``, ``"N"``; None → all rounds."""
    if text is None:
        return None, None
    match = _ROUNDS.fullmatch(text.strip())
    from fedpriv.config import MAX_ROUNDS

    allowed = (f"A:B (inclusive), A:, :B or N, with round numbers in [1, {MAX_ROUNDS:,}] and "
               "A <= B")
    if match is None:
        raise InputError("--rounds", text, allowed)
    if match.group(3) is not None:
        low = high = int(match.group(3))
    else:
        low, high = (int(g) if g else None for g in match.group(1, 2))
    if any(r is not None and not 1 <= r <= MAX_ROUNDS for r in (low, high)) or (
            low is not None and high is not None and low > high):
        raise InputError("--rounds", text, allowed)
    return low, high


def parse_clients(text: str | None) -> list[int] | None:
    """``"0,3,7"`` → ``[0, 3, 7]``; None → all clients."""
    if text is None:
        return None
    from fedpriv.data.config import MAX_CLIENTS

    parts = [p.strip() for p in text.split(",")]
    # ASCII digits only: str.isdigit also accepts "²" and other digits int() refuses
    if not all(re.fullmatch(r"0*[0-9]{1,7}", p) and int(p) < MAX_CLIENTS for p in parts):
        raise InputError("--clients", text, f"comma-separated client ids in [0, "
                         f"{MAX_CLIENTS - 1:,}], e.g. 0,3,7")
    return sorted({int(p) for p in parts})


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Validate the flags, then run the offline audit."""
    from fedpriv.audit.config import CANARY_METHODS, MAX_ITERATIONS
    from fedpriv.validate import check_choice, check_int_range, check_probability

    if args.iterations is not None:  # replaces audit.iterations: the same bound
        check_int_range("--iterations", args.iterations, 1, MAX_ITERATIONS)
    if (args.canary_method or args.canary_confidence is not None) and not args.canaries:
        raise InputError("--canary-method/--canary-confidence", True, "used with --canaries")
    if args.canary_confidence is not None:
        check_probability("--canary-confidence", args.canary_confidence)
    if args.canary_method is not None:
        check_choice("--canary-method", args.canary_method, CANARY_METHODS)
    rounds, clients = parse_rounds(args.rounds), parse_clients(args.clients)
    from attacks.registry import check_attack_names

    check_attack_names(args.attack or [], "--attack")
    from workflows.offline_audit import audit_run

    return audit_run(args.run_dir, attacks=args.attack, rounds=rounds, clients=clients,
                     iterations=args.iterations, executor=args.executor, canaries=args.canaries,
                     canary_method=args.canary_method,
                     canary_confidence=args.canary_confidence)


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _canary_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per client-round: the round's own bound against its canary's ε (the status),
    and the bound pooled over the client's rounds, marked ``!`` where it exceeds the largest
    canary ε of those rounds (the client is then inconsistent even where each round alone
    was not)."""
    lines = [f"{'round':>5} {'client':>6} {'eps lower':>9} {'eps canary':>10} {'pooled':>8} "
             "status"]
    exceeded = False
    for r in rows:
        formal = json_number(r.get("pooled_formal", math.inf))
        over = r["pooled"] > formal
        exceeded |= over
        status = r["status"] + (f"; pooled {r['pooled']:.3g} > {formal:.3g}" if over else "")
        lines.append(f"{r['round']:>5} {r['client_id']:>6} {r['epsilon_lower']:>9.3f} "
                     f"{json_number(r['epsilon_formal']):>10.3f} "
                     f"{r['pooled']:>7.3f}{'!' if over else ' '} {status}")
    if exceeded:
        lines.append("! the pooled lower bound exceeds the largest canary epsilon of the "
                     "client's rounds: more leaks than declared")
    return lines


def render(result: dict[str, Any]) -> str:
    """One line per canary bound and per attack run, then the files written."""
    lines = _canary_lines(result["canaries"]) if "canaries" in result else []
    if not result["attacks"]:
        return "\n".join([*lines, f"wrote {result['files']['report']}"])
    lines.append(f"{'round':>5} {'client':>6} {'attack':<6} {'SSIM':>6} {'MSE':>8} {'PSNR':>6}")
    for a in result["attacks"]:
        lines.append(
            f"{a['round']:>5} {a['client_id']:>6} {a['attack']:<6} {_fmt(a.get('ssim'), '6.3f')} "
            f"{_fmt(a.get('mse'), '8.4f')} {_fmt(a.get('psnr'), '6.2f')}"
        )
    skipped = result.get("not_stored", [])
    if skipped:
        listed = ", ".join(f"{u['round']}/{u['client_id']}" for u in skipped[:10])
        lines.append(f"not stored (the run's audit.store_updates), not attacked: {len(skipped)} "
                     f"updates (round/client {listed}{', ...' if len(skipped) > 10 else ''})")
    lines.append(f"wrote {result['files']['report']}")
    return "\n".join(lines)

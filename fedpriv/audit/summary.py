"""What ``fedpriv simulate`` prints at the end of a run, and the ServerApp of ``flwr run .``
logs: the run directory, accuracy and wall time, one line per client (ε, log C with the vacuous
mark of :mod:`fedpriv.audit.vacuity`, best SSIM), one line per distinct failure with its rounds,
and the final chain head."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fedpriv.audit.vacuity import terminal_marks
from fedpriv.failures import collapse_failures, round_ranges

__all__ = ["SKIPPED_WHY", "UNSCORED", "UNSCORED_NOTE", "UNSCORED_WHY", "attack_lines",
           "chain_lines", "failure_lines", "skipped_rounds", "ssim_cell", "summary_lines"]


def summary_lines(result: dict[str, Any]) -> list[str]:
    """The summary of a run's report (``report.json``), line by line."""
    acc = result["accuracy"]
    lines = [
        f"run directory: {result['run_dir']}",
        f"rounds: {result['rounds']}   final accuracy: {acc[-1]:.4f}" if acc else "no rounds",
        f"wall time: {_num(result['wall_seconds'])} s",
        f"{'client':>6} {'mechanism':>9} {'rounds':>6} {'epsilon':>9} {'log C':>10} {'SSIM':>8}",
    ]
    marks, footnote = terminal_marks(result["clients"], "log_bayes_capacity")
    for c, mark in zip(result["clients"], marks, strict=True):
        eps, cap = c["epsilon"], c["log_bayes_capacity"]
        lines.append(
            f"{c['client_id']:>6} {c['mechanism'] or '-':>9} {c['rounds_participated']:>6} "
            f"{_num(eps):>9} {_num(cap) + mark:>10} {ssim_cell(c):>8}"
        )
    lines += footnote + attack_lines(result)
    if result["epsilon_bounds"]["note"]:
        lines.append(result["epsilon_bounds"]["note"])
    return lines + failure_lines(result.get("failures", [])) + chain_lines(result["chain"])


#: The SSIM cell of a client attacked whose reconstructions were not scored.
UNSCORED = "unscored"
#: Why an attacked client-round goes :data:`UNSCORED` (here and in report.html).
UNSCORED_WHY = ("no true batch to score it against (the simulation-only oracle "
                "audit.ground_truth is off, or the update is a stock client's), or too many "
                "images to match")
#: What :data:`UNSCORED` means, printed once under a table that shows it.
UNSCORED_NOTE = (f"unscored: attacked, but the reconstruction was not scored: {UNSCORED_WHY}; "
                 "it is kept in the audit store (report.html draws it)")
#: Why a client scheduled in a round was not attacked (report.json ``attacks_skipped``).
SKIPPED_WHY = ("the round's attack budget, audit.round_seconds, was spent, or the declared "
               "batch × local steps is over the attacks' bound")


def skipped_rounds(rounds: Sequence[int], skipped: Sequence[Sequence[int]]
                   ) -> list[tuple[int, Sequence[int]]]:
    """``(round, clients)`` of the completed ``rounds`` whose scheduled clients were not all
    attacked (report.json ``completed_rounds`` and ``attacks_skipped``)."""
    return [(r, ids) for r, ids in zip(rounds, skipped, strict=False) if ids]


def ssim_cell(client: dict[str, Any], spec: str = ".3g") -> str:
    """A client's best-SSIM cell: the SSIM in ``spec``, :data:`UNSCORED` where it was
    attacked but not scored, ``-`` where it was not attacked."""
    attack = client.get("attack")
    if attack is None:
        return "-"
    return UNSCORED if attack.get("ssim") is None else format(attack["ssim"], spec)


def attack_lines(result: dict[str, Any]) -> list[str]:
    """Under a per-client table: what :data:`UNSCORED` means, where a client shows it, and the
    rounds whose scheduled clients were not attacked (report.json ``attacks_skipped``)."""
    lines = [UNSCORED_NOTE] if any(ssim_cell(c) == UNSCORED for c in result["clients"]) else []
    left = skipped_rounds(result.get("completed_rounds", []), result.get("attacks_skipped", []))
    if left:
        lines.append(f"scheduled but not attacked ({SKIPPED_WHY}; report.json attacks_skipped): "
                     + "; ".join(f"round {r}: client(s) {', '.join(map(str, ids))}"
                                 for r, ids in left))
    return lines


def failure_lines(failures: list[dict[str, Any]]) -> list[str]:
    """One line per distinct failure (:func:`fedpriv.failures.collapse_failures`) with the
    rounds it occurred in, its first round's message cut to 120 characters."""
    lines = []
    for f in collapse_failures(failures):
        rounds = f["rounds"]
        when = (f"round {rounds[0]}" if len(rounds) == 1
                else f"rounds {round_ranges(rounds)} ({len(rounds)}×)")
        lines.append(f"client {_num(f['client_id'])} (node {f['node_id']}) {f['kind']} in "
                     f"{when}: {f['message'][:120]}")
    return lines


def chain_lines(chain: dict[str, Any]) -> list[str]:
    """The final chain head: keep it outside the run directory (``fedpriv verify RUN_DIR
    --head H`` checks every round's entries against it); each round's head is in
    ``--json``'s and report.json's ``chain.rounds``."""
    done = [int(r) for r in chain["rounds"]]
    after = f", rounds {round_ranges(done)}" if done else ""
    lines = [f"chain head: {chain['head']} ({chain['entries']} entries{after})"]
    if chain["signature"] is not None:
        lines.append(f"signed: entry {chain['signature']['seq']} by Ed25519 key "
                     f"{chain['signature']['public_key']}")
    return lines


def _num(x: Any) -> str:
    if x is None:
        return "-"
    return x if isinstance(x, str) else f"{x:.3g}"

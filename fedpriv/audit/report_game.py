"""The identification game in report.json (privacy-math.md §13; docs/leakage.md).

Each attacked client-round's game carries the p-value of ``P ≤ exp(log_bound)/M`` (its release
leaks no more than its declared mechanism's bound; :mod:`fedpriv.leakage.game`). A run plays
many games, so a flag is decided here, over all of them at once: Holm's step-down at
``audit.game_alpha`` (S. Holm, Scand. J. Statist. 6(2), 65–70, 1979;
:func:`fedpriv.verification.multiple.flag_inconsistent`), valid under any dependence between
the games. With probability at least ``1 − α`` no honest client-round of the run is flagged.
"""

from __future__ import annotations

from typing import Any

from fedpriv.jsonio import optional_loads
from fedpriv.leakage.game import GAME_ATTACK
from fedpriv.verification.multiple import flag_inconsistent, holm

__all__ = ["GAME_METHOD", "client_game", "game_family"]

Row = dict[str, Any]

#: The multiple-testing method named in report.json.
GAME_METHOD = "holm"


def _games(attacks: list[Row]) -> list[tuple[Row, Row]]:
    return [(a, optional_loads(a["estimate_json"])) for a in attacks if a["attack"] == GAME_ATTACK]


def game_family(attacks: dict[int, list[Row]], config: Row) -> tuple[Row, set[tuple[int, int]]]:
    """The run's ``identification_game`` record and the flagged ``(client, round)`` pairs.

    Parameters
    ----------
    attacks
        The completed ``attacks`` rows by client.
    config
        The run's config (``audit.game_alpha``; 0.05 where a store predates it).

    Notes
    -----
    Games stored without a p-value (before fresh-noise trials) are counted but not tested.
    """
    alpha = float(config.get("audit", {}).get("game_alpha", 0.05))
    tested = [(cid, row["round"], est["empirical_leakage"]["p_value"])
              for cid, rows in sorted(attacks.items()) for row, est in _games(rows)
              if est["empirical_leakage"].get("p_value") is not None]
    p_values = [p for _, _, p in tested]
    flags = flag_inconsistent(p_values, alpha, GAME_METHOD) if tested else []
    adjusted = holm(p_values) if tested else []
    flagged = [{"client_id": cid, "round": rnd, "p_value": p, "adjusted_p_value": float(adj)}
               for (cid, rnd, p), flag, adj in zip(tested, flags, adjusted, strict=True) if flag]
    record = {
        "method": "Holm step-down (1979) over the run's client-round games", "adjustment":
        GAME_METHOD, "alpha": alpha,
        "client_rounds": sum(len(_games(rows)) for rows in attacks.values()),
        "tested": len(tested), "flagged": flagged,
        "claim": f"with probability >= {1 - alpha:g} no honest client-round is flagged",
    }  # fmt: skip
    return record, {(f["client_id"], f["round"]) for f in flagged}


def client_game(client_id: int, attacks: list[Row], flagged: set[tuple[int, int]]) -> Row:
    """``empirical_leakage`` of one client (or one client-round): its game with the highest
    lower end, ``exceeds_bound`` when any of its games is flagged by :func:`game_family`, and
    the intervals of the game with the largest MBP estimate. Nones without a game."""
    games = _games(attacks)
    if not games:
        return {"empirical_leakage": None, "mbp_interval": None, "abp_interval": None}
    row, est = max(games, key=lambda g: _lower_or_inf(g[1]["empirical_leakage"]))
    exceeds = any((client_id, g["round"]) in flagged for g, _ in games)
    _, worst = max(games, key=lambda g: g[0]["mbp_estimate"] or 0.0)
    return {"empirical_leakage": {**est["empirical_leakage"], "round": row["round"],
                                  "exceeds_bound": exceeds},
            "mbp_interval": worst["mbp_interval"], "abp_interval": worst["abp_interval"]}


def _lower_or_inf(leakage: Row) -> float:
    return -float("inf") if leakage["log_lower"] is None else leakage["log_lower"]

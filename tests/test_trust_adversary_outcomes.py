"""Every ``[[adversary]]`` behaviour, beside four honest clients, through the real server code in
process: the auditor catches it (not aggregated, ε unbounded, or refused at the boundary),
neutralises it, or — where the cheat is not observable from the update — never labels it
``verified`` (each such expectation says why in :data:`adversary_outcomes.SCENARIOS`); and
every honest client's reply of every round is aggregated (no client can veto a round or take
another's identity).
``python tests/adversary_outcomes.py`` prints the table of outcomes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from adversary_outcomes import SCENARIOS, run_behaviour


@pytest.mark.parametrize("behaviour", list(SCENARIOS))
def test_each_cheat_is_caught_or_neutralised_and_honest_clients_aggregate(
    behaviour: str, tmp_path: Path
) -> None:
    outcome = run_behaviour(behaviour, tmp_path / "run")
    assert outcome.status == "completed", outcome
    assert outcome.outcome in SCENARIOS[behaviour].expected, outcome
    assert outcome.honest_aggregated, outcome


def _generated(name: str) -> list[str]:
    """The rows of docs/trust.md's generated table ``name`` (header and rule included)."""
    from adversary_outcomes import DOC, markers

    start, end = markers(name)
    text = DOC.read_text(encoding="utf-8")
    return text.split(start)[1].split(end)[0].strip().splitlines()


def test_the_pages_generated_tables_name_every_behaviour_and_sigma() -> None:
    """Fast: docs/trust.md holds both generated tables, one row per behaviour of
    :data:`adversary_outcomes.SCENARIOS` and per σ of :data:`adversary_outcomes.SIGMAS`."""
    from adversary_outcomes import SIGMAS, TABLES

    rows = _generated("adversary-outcomes")[2:]
    assert [r.split("|")[1].strip() for r in rows] == list(SCENARIOS)
    sigmas = [float(r.split("|")[1].split()[0]) for r in _generated(
        "sensitivity-cheats-by-sigma")[2:]]
    assert sigmas == list(SIGMAS) and set(TABLES) == {"adversary-outcomes",
                                                      "sensitivity-cheats-by-sigma"}


@pytest.mark.slow
def test_the_pages_generated_tables_are_what_the_code_gives_now() -> None:
    """docs/trust.md's tables of cheats and outcomes are regenerated from the code (issue 42):
    running every behaviour again gives the page's text (else run ``python
    tests/adversary_outcomes.py --markdown``)."""
    from adversary_outcomes import DOC, TABLES, regenerate

    text = DOC.read_text(encoding="utf-8")
    assert regenerate(text, {name: make() for name, make in TABLES.items()}) == text

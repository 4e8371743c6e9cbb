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

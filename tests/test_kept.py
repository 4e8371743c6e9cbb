"""fedpriv.kept: answers kept per key, the least recently used dropped first, an unhashable
key's answer computed every time."""

from __future__ import annotations

from fedpriv.kept import KeptAnswers


def test_an_answer_is_computed_once_per_key_and_none_is_an_answer():
    calls: list[str] = []
    kept: KeptAnswers[str | None] = KeptAnswers(4)
    for key in ("a", "a", "b", "a"):
        assert kept.get(key, lambda key=key: calls.append(key)) is None
    assert calls == ["a", "b"] and len(kept) == 2


def test_the_least_recently_used_answer_is_dropped_when_full():
    calls: list[int] = []
    kept: KeptAnswers[int] = KeptAnswers(2)

    def answer(key: int) -> int:
        return kept.get(key, lambda: calls.append(key) or key * 10)

    assert [answer(k) for k in (1, 2, 1, 3, 1, 2)] == [10, 20, 10, 30, 10, 20]
    assert calls == [1, 2, 3, 2]  # 3 dropped 2 (1 was used since); 2 then dropped 3
    assert len(kept) == 2


def test_an_unhashable_key_is_computed_every_time():
    calls: list[int] = []
    kept: KeptAnswers[int] = KeptAnswers(2)
    for _ in range(3):
        assert kept.get(("mechanism", {"sigma": [1.0]}), lambda: calls.append(1) or 7) == 7
    assert calls == [1, 1, 1] and len(kept) == 0


def test_a_failing_computation_keeps_nothing():
    kept: KeptAnswers[int] = KeptAnswers(2)

    def fails() -> int:
        raise TypeError("inside the computation: not a key's")

    try:
        kept.get("a", fails)
    except TypeError:
        pass
    else:
        raise AssertionError("the computation's error is the caller's")
    assert len(kept) == 0 and kept.get("a", lambda: 1) == 1

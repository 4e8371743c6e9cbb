"""Kept answers: what a round's replies share, computed once per distinct key (issue 37).

A round's clients mostly share their history and declaration, so the audit computes a fold, an
accountability answer, a settings verdict or a PAC accuracy once per distinct key and looks the
rest up. A key holds the declared mechanism, which a hostile client may give unhashable
parameters: its answer is then computed every time, never an error. At most ``size`` answers
are kept, the least recently used dropped first: more distinct keys than that cost the
evicted ones a recomputation, not the whole store."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["KeptAnswers"]

V = TypeVar("V")
_MISSING = object()


class KeptAnswers(Generic[V]):
    """Answers by key, at most ``size`` of them (least recently used dropped first)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: OrderedDict[Hashable, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The answer kept under ``key``, else ``compute()`` (then kept); computed every time
        when ``key`` cannot be hashed (a mechanism with unhashable parameters)."""
        try:
            found = self._kept.get(key, _MISSING)
        except TypeError:
            return compute()
        if found is _MISSING:
            answer = self._kept[key] = compute()
            if len(self._kept) > self.size:
                self._kept.popitem(last=False)
            return answer
        self._kept.move_to_end(key)
        return found  # type: ignore[return-value]  # not _MISSING: a kept V

    def clear(self) -> None:
        """Forget every answer (what they read has changed)."""
        self._kept.clear()

"""The error an unusable audit store raises: bad input, so the CLI exits with code 2."""

from __future__ import annotations

from pathlib import Path

from fedpriv.errors import InputError

__all__ = ["StoreError"]


class StoreError(InputError):
    """An audit store (or one of its tensor files) is missing, foreign, outdated or corrupt.

    Parameters
    ----------
    path
        The file at fault (the database or a tensor file); it is the error's ``key``.
    problem
        What is wrong with it, in words (the error's ``value``).
    allowed
        What would have been accepted.
    """

    def __init__(
        self, path: Path | str, problem: str, allowed: str = "an intact fedpriv audit store"
    ) -> None:
        super().__init__(str(path), problem, allowed)
        self.args = (f"{path}: {problem} (expected {allowed})",)

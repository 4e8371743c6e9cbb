"""Errors that the command line turns into exit codes.

`InputError` is raised for any bad input — a config value, a CLI flag, a mechanism
parameter, a corrupted audit store — *before* work starts. The CLI prints its message and
exits with code 2. Every message names the key, the value and what is allowed.
"""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(ValueError):
    """Bad user input: exit code 2.

    Parameters
    ----------
    key
        The config key, CLI flag or file the bad value came from (e.g. ``"mechanism.kappa"``).
    value
        The offending value.
    allowed
        What would have been accepted (e.g. ``"a number > 0"``).
    """

    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        super().__init__(f"{key} = {value!r} is not allowed: expected {allowed}")

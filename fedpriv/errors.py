"""Errors that the command line turns into exit codes.

`InputError` is raised for any bad input — a config value, a CLI flag, a mechanism
parameter, a corrupted audit store — *before* work starts. The CLI prints its message and
exits with code 2. Every message names the key, the value and what is allowed, on one line
of bounded length: the value is shown through :mod:`reprlib` (long strings, long numbers,
long or deeply nested lists and tables are abridged), so a hostile value cannot make the
message itself fail (a recursion too deep to print) or flood the terminal.
"""

from __future__ import annotations

import reprlib

__all__ = ["InputError"]

_REPR = reprlib.Repr()
_REPR.maxlevel = 4
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 20
_REPR.maxstring = _REPR.maxother = 300
_REPR.maxlong = 60
#: Every character ``str.splitlines`` breaks at, shown escaped: the message stays one line.
_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}
_MAX_KEY = 300


def _one_line(text: str, limit: int | None = None) -> str:
    """``text`` with its line breaks escaped, abridged in the middle beyond ``limit``."""
    if limit is not None and len(text) > limit:
        text = f"{text[: limit // 2]}...{text[-limit // 2:]}"
    return text.translate(_LINE_BREAKS)


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
        super().__init__(f"{_one_line(str(key), _MAX_KEY)} = {_REPR.repr(value)} is not "
                         f"allowed: expected {_one_line(str(allowed))}")

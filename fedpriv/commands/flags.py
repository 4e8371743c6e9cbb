"""The command-line flag of a library input key: what the light commands' parsers and errors
name. Its own module, importing nothing, so that building ``fedpriv --help`` loads no math."""

from __future__ import annotations

__all__ = ["flag"]


def flag(key: str) -> str:
    """The command-line flag that carries a library input key (``sample_rate`` →
    ``--sample-rate``); keys that already are flags pass through."""
    return key if key.startswith("--") else "--" + key.replace("_", "-")

"""How each mechanism is drawn: its label from the registry, colour and marker by its place.

Colours are the Okabe–Ito palette (distinguishable by colour-blind readers), and every
mechanism also has its own marker, so the figures read in grey too.
"""

from __future__ import annotations

from functools import cache

__all__ = ["style"]

_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


@cache
def _styles() -> dict[str, tuple[str, str, str]]:
    from fedpriv.mechanisms import accountable, mechanism_class

    names = accountable()
    return {name: (mechanism_class(name).label, _COLOURS[i % len(_COLOURS)],
                   _MARKERS[i % len(_MARKERS)]) for i, name in enumerate(names)}


def style(mechanism: str) -> tuple[str, str, str]:
    """``(label, colour, marker)`` of a mechanism with a formal guarantee."""
    return _styles()[mechanism]

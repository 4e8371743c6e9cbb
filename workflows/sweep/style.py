"""How each mechanism is drawn: its label from the registry, colour and marker by its place.

Colours are the Okabe–Ito palette (distinguishable by colour-blind readers), and every
mechanism also has its own marker, so the figures read in grey too. Mechanisms without a
formal guarantee (``none``, ``clip``) are drawn as horizontal reference lines in grey.
"""

from __future__ import annotations

from functools import cache

__all__ = ["label", "style"]

_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_REFERENCE = ("#555555", "#999999")


@cache
def _styles() -> dict[str, tuple[str, str, str]]:
    from fedpriv.mechanisms import accountable, mechanism_class, mechanism_names

    names = accountable()
    out = {name: (mechanism_class(name).label, _COLOURS[i % len(_COLOURS)],
                  _MARKERS[i % len(_MARKERS)]) for i, name in enumerate(names)}
    others = [n for n in mechanism_names() if n not in out]
    out.update({name: (mechanism_class(name).label, _REFERENCE[i % len(_REFERENCE)], "")
                for i, name in enumerate(others)})
    return out


def style(mechanism: str) -> tuple[str, str, str]:
    """``(label, colour, marker)`` of a registered mechanism (no marker without a guarantee)."""
    return _styles()[mechanism]


def label(mechanism: str) -> str:
    """The mechanism's display name (its class's ``label``)."""
    return style(mechanism)[0]

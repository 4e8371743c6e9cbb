"""Noise mechanisms: one file per mechanism, found by the registry.

``build_mechanism("gaussian", {"clip": 1.0, "noise_multiplier": 1.1})`` validates the
parameters (raising :class:`fedpriv.errors.InputError` on ``mechanism.<param>``) and returns a
:class:`Mechanism`; ``mechanism.release(dim)`` is what it releases, for accounting. Importing
this package does not import torch.
"""

from __future__ import annotations

from fedpriv.mechanisms.base import ClippedMechanism, Mechanism
from fedpriv.mechanisms.registry import (
    accountable,
    build_mechanism,
    make_release,
    mechanism_class,
    mechanism_names,
    release_class,
)
from fedpriv.seeding import make_generator

__all__ = [
    "ClippedMechanism",
    "Mechanism",
    "accountable",
    "build_mechanism",
    "make_generator",
    "make_release",
    "mechanism_class",
    "mechanism_names",
    "release_class",
]

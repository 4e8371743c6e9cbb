"""Noise mechanisms: one class per mechanism, built by name from the config.

``build_mechanism("gaussian", {"clip": 1.0, "noise_multiplier": 1.1})`` validates the
parameters (raising :class:`fedpriv.errors.InputError` on ``mechanism.<param>``) and returns a
:class:`Mechanism`. Importing this package does not import torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedpriv.errors import InputError
from fedpriv.mechanisms.base import ClippedMechanism, Mechanism
from fedpriv.mechanisms.clip import ClipMechanism
from fedpriv.mechanisms.gaussian import GaussianMechanism
from fedpriv.mechanisms.laplace import LaplaceMechanism
from fedpriv.mechanisms.none import NoMechanism
from fedpriv.mechanisms.seeding import make_generator
from fedpriv.mechanisms.vmf import VMFMechanism

__all__ = [
    "MECHANISMS",
    "ClipMechanism",
    "ClippedMechanism",
    "GaussianMechanism",
    "LaplaceMechanism",
    "Mechanism",
    "NoMechanism",
    "VMFMechanism",
    "build_mechanism",
    "make_generator",
]

MECHANISMS: dict[str, type[Mechanism]] = {
    cls.name: cls
    for cls in (NoMechanism, ClipMechanism, GaussianMechanism, LaplaceMechanism, VMFMechanism)
}


def build_mechanism(
    name: str, params: Mapping[str, Any], key_prefix: str = "mechanism"
) -> Mechanism:
    """Build the mechanism ``name`` from its config parameters.

    Parameters
    ----------
    name
        One of ``MECHANISMS``: ``"none"``, ``"clip"``, ``"gaussian"``, ``"laplace"``, ``"vmf"``.
    params
        Parameter mapping (``clip``, ``clip_per_layer``, ``noise_multiplier``,
        ``laplace_scale``, ``kappa``, ``vmf_scale``, ``vmf_keep_norm``); keys the mechanism
        does not use are ignored.
    key_prefix
        Prefix of the config keys, used in error messages.

    Raises
    ------
    InputError
        On an unknown name (key ``f"{key_prefix}.name"``) or a bad parameter
        (key ``f"{key_prefix}.<param>"``).
    """
    if not isinstance(name, str) or name not in MECHANISMS:
        raise InputError(f"{key_prefix}.name", name, f"one of {sorted(MECHANISMS)}")
    return MECHANISMS[name].from_params(params, key_prefix)

"""The library function behind ``fedpriv capacity``: Bayes capacity of one noisy release, with
its threat model (privacy-math.md §5, "Which r and s").

The mechanism is looked up in the registry (:func:`fedpriv.mechanisms.release_class`); its
release class says which noise input it takes — its noise scale in absolute units where it has
one (``noise_std``, ``laplace_scale``), else its parameter (``kappa``) — and computes
``log C`` (:meth:`~fedpriv.accounting.events.Release.log_bayes_capacity`); the secret radius is
:func:`fedpriv.leakage.capacity.secret_radius`. Every bad input raises
:class:`~fedpriv.errors.InputError` naming the library key (the command line renames it to its
flag).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedpriv.errors import InputError
from fedpriv.leakage.capacity import secret_radius
from fedpriv.mechanisms.registry import release_class
from fedpriv.validate import check_dim, check_nonnegative, check_positive

__all__ = ["capacity_report"]

_LOG_MAX_FLOAT = math.log(np.finfo(float).max)


def capacity_report(
    mechanism: str,
    dim: int,
    *,
    noise: Mapping[str, float | None],
    radius: float | None = None,
    threat_model: str = "record",
    batch_size: float | None = None,
) -> dict[str, Any]:
    """Bayes capacity of one release with its threat model, as ``fedpriv capacity`` reports it.

    Parameters
    ----------
    mechanism
        An accountable mechanism of the registry (``"gaussian"``, ``"laplace"``, ``"vmf"``).
    dim
        Model dimension ``p``.
    noise
        The noise parameters given, by name; exactly the mechanism's own must be set: its noise
        scale in absolute units where it has one (``noise_std`` = ``s``, ``laplace_scale`` =
        ``b``), else its parameter (``kappa``).
    radius
        Per-record radius ``C`` (default 1); the secret radius is ``C`` (record) or ``L·C``
        (batch). Not used by the VMF (its secrets are directions).
    threat_model, batch_size
        See :func:`secret_radius`.
    """
    release_type = release_class(mechanism, "mechanism")
    own = release_type.absolute_noise or release_type.parameter_name
    given = {k: v for k, v in noise.items() if v is not None}
    if own not in given:
        raise InputError(own, None, f"a value (the {mechanism} mechanism's noise parameter)")
    for other, value in given.items():
        if other != own:
            raise InputError(other, value, f"no value (not a parameter of {mechanism})")
    p = check_dim("dim", dim)
    value = check_positive(own, given[own])
    clip = 1.0 if radius is None else check_nonnegative("radius", radius)
    r = secret_radius(clip, threat_model, batch_size)
    if release_type.absolute_noise:  # capacity depends on r / (noise scale): measure r in it
        release, units = release_type.calibration_start(p).with_parameter(1.0), r / value
    else:
        release, units = release_type.calibration_start(p).with_parameter(value), 1.0
    log_c = release.log_bayes_capacity(p, units)
    return {
        "mechanism": mechanism,
        "dim": p,
        own: value,
        "threat_model": threat_model,
        "radius": r if release_type.absolute_noise else None,
        "record_radius": clip,
        "batch_size": batch_size,
        "log_capacity": log_c,
        "capacity": math.exp(log_c) if log_c < _LOG_MAX_FLOAT else math.inf,
    }

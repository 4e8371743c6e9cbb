"""Flower's own client-side DP mods, declared to fedpriv's server (docs/flower-dp.md).

:func:`declare_local_dp` wraps Flower's ``LocalDpMod`` and :func:`declare_fixed_clipping`
Flower's ``fixedclipping_mod``: each runs Flower's mod unchanged — the same clipping, the same
noise from the same random source — and then attaches fedpriv's report (the ``meta``
ConfigRecord, :class:`fedpriv.protocol.ClientReport`) declaring what the mod did, as
:func:`clients.client_dp.fedpriv_client_dp_mod` declares its own release::

    from flwr.clientapp.mod import LocalDpMod
    from clients.flower_dp import declare_local_dp

    app = ClientApp(mods=[declare_local_dp(LocalDpMod(1.0, 1.0, 1.0, 1e-5))])

* ``LocalDpMod(clipping_norm, sensitivity, epsilon, delta)`` clips the update to
  ``S = clipping_norm`` and adds Gaussian noise of std ``s = sensitivity·√(2 ln(1.25/δ))/ε``
  (Flower's own formula): a client-level Gaussian release ``client-gaussian`` with clip ``S``
  and noise multiplier ``σ = s/S``. The server verifies it at full power and accounts it against
  itself (replace-one: the update moves by up to ``2S``), over every round the client took part
  in — not Flower's per-round ε, which holds only when ``sensitivity`` bounds the update, i.e.
  ``sensitivity ≥ 2·clipping_norm`` against the server.
* ``fixedclipping_mod`` clips the update to the ``clipping_norm`` that
  ``DifferentialPrivacyClientSideFixedClipping`` sends and adds no noise: ``client-gaussian``
  with noise multiplier 0, a clip-only release with no guarantee against the server (ε ∞), its
  clipping verified all the same.

Beside the report each reply carries the mod's own parameters in the ``flower-dp`` ConfigRecord
(:data:`fedpriv.protocol.FLOWER_DP_RECORD`): the report then warns where ``sensitivity`` is not
``clipping_norm``, naming both, the noise multiplier they imply and the ε that follows. Put the
adapter where the mod would go: last among mods that change the parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

from flwr.app import ConfigRecord, Context, Message

from clients.client_dp import declare_release, is_train
from fedpriv.errors import InputError
from fedpriv.mechanisms import build_mechanism
from fedpriv.mechanisms.client_gaussian import ClientGaussianMechanism
from fedpriv.protocol import FLOWER_DP_RECORD

__all__ = ["declare_fixed_clipping", "declare_local_dp", "local_dp_noise_std"]

Mod = Callable[[Message, Context, Callable[[Message, Context], Message]], Message]


def local_dp_noise_std(sensitivity: float, epsilon: float, delta: float) -> float:
    """The noise std ``LocalDpMod`` adds: ``sensitivity·√(2 ln(1.25/δ))/ε`` (Flower 1.42,
    ``flwr/clientapp/mod/localdp_mod.py``)."""
    return float(sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon)


def _client_gaussian(clip: float, noise_multiplier: float) -> ClientGaussianMechanism:
    """fedpriv's ``client-gaussian`` mechanism, its parameters checked (InputError)."""
    params = {"clip": clip, "noise_multiplier": noise_multiplier}
    return cast(ClientGaussianMechanism, build_mechanism("client-gaussian", params))


def _declared(msg: Message, reply: Message, context: Context,
              mechanism: ClientGaussianMechanism, stated: dict[str, Any], name: str) -> Message:
    """``reply`` with the report of ``mechanism`` (``client-gaussian``) and the mod's
    parameters."""
    if reply.has_error():
        return reply
    out = declare_release(msg, reply, context, mechanism, name=name)
    if not out.has_error():
        out.content[FLOWER_DP_RECORD] = ConfigRecord(stated)
    return out


def declare_local_dp(local_dp: Any) -> Mod:
    """A mod that runs Flower's ``LocalDpMod`` instance ``local_dp`` unchanged and declares
    its release (module docstring).

    Raises
    ------
    fedpriv.errors.InputError
        When ``local_dp`` is not a ``LocalDpMod``, or its parameters give no finite noise
        (``epsilon`` or ``delta`` 0), when the adapter is made.
    """
    from flwr.clientapp.mod import LocalDpMod

    if not isinstance(local_dp, LocalDpMod):
        raise InputError("local_dp", type(local_dp).__name__, "an instance of Flower's LocalDpMod")
    clip, sensitivity = float(local_dp.clipping_norm), float(local_dp.sensitivity)
    epsilon, delta = float(local_dp.epsilon), float(local_dp.delta)
    if not (epsilon > 0 and 0 < delta < 1.25):
        raise InputError("local_dp", f"epsilon={epsilon}, delta={delta}",
                         "epsilon > 0 and 0 < delta < 1.25: Flower's noise std is then finite")
    std = local_dp_noise_std(sensitivity, epsilon, delta)
    # checked now, and built once for every reply
    mechanism = _client_gaussian(clip, std / clip)
    stated = {"mod": "LocalDpMod", "clipping_norm": clip, "sensitivity": sensitivity,
              "epsilon": epsilon, "delta": delta, "noise_std": std}

    def mod(msg: Message, context: Context,
            call_next: Callable[[Message, Context], Message]) -> Message:
        if not is_train(msg):
            return call_next(msg, context)
        reply = local_dp(msg, context, call_next)
        return _declared(msg, reply, context, mechanism, stated, "declare_local_dp")

    return mod


def declare_fixed_clipping(fixed_clipping: Mod | None = None) -> Mod:
    """A mod that runs Flower's ``fixedclipping_mod`` (default: Flower's own) unchanged and
    declares a clip-only release at the ``clipping_norm`` the server sent (module docstring)."""
    from flwr.clientapp.mod import fixedclipping_mod
    from flwr.supercore.differential_privacy import KEY_CLIPPING_NORM

    inner = fixedclipping_mod if fixed_clipping is None else fixed_clipping

    def mod(msg: Message, context: Context,
            call_next: Callable[[Message, Context], Message]) -> Message:
        if not is_train(msg):
            return call_next(msg, context)
        reply = inner(msg, context, call_next)
        if reply.has_error():
            return reply
        config = next(iter(msg.content.config_records.values()))
        clip = float(config[KEY_CLIPPING_NORM])  # fixedclipping_mod refused a message without
        stated = {"mod": "fixedclipping_mod", "clipping_norm": clip}
        mechanism = _client_gaussian(clip, 0.0)
        return _declared(msg, reply, context, mechanism, stated, "declare_fixed_clipping")

    return mod

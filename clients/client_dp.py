"""Client-level DP as a Flower client mod for any ClientApp: :func:`fedpriv_client_dp_mod`.

Flower's ``LocalDpMod`` clips a client's whole update and adds Gaussian noise on the client;
this mod does the same with fedpriv's ``client-gaussian`` mechanism (privacy-math.md §11,
``fedpriv/mechanisms/client_gaussian.py``) — ``Δ̄ + N(0, σ²S² I)`` with ``Δ = θ_client − θ``
clipped to ``S`` in ℓ2 — and attaches fedpriv's report (the ``meta`` ConfigRecord,
:class:`fedpriv.protocol.ClientReport`) declaring it, so that fedpriv's server verifies the
release and accounts it with the client as the unit::

    from clients.client_dp import fedpriv_client_dp_mod

    app = ClientApp()

    @app.train(mods=[fedpriv_client_dp_mod(clip=1.0, noise_multiplier=1.0)])
    def train(msg, context): ...   # the user's own model and training, unchanged

The user's train reply must hold one ArrayRecord with the keys it received and one
MetricRecord with ``num-examples`` (as Flower's quickstarts reply); the node config must give
``partition-id`` (Flower's simulation does) and the train config ``server-round`` (Flower's
strategies and fedpriv's server send it). Other messages pass through untouched. Put the mod
last among mods that change the parameters: what it releases is what the server sees.

The report's training fields describe the release, not the user's training, which the mod
does not see: one step of scale 1 (``steps = 1``, ``lr = 1``) over the ``num-examples``
records, no record sampling (``sample-rate = 1``). The server tests the update at the client
level whatever they say (:meth:`fedpriv.protocol.ClientReport.declaration`). fedpriv's server
believes its own instructions (docs/trust.md §6): its ``[mechanism]`` must name the same
``client-gaussian`` (clip and noise multiplier) for the client, or the reply is
``inconsistent`` on test ``settings``.

``seed`` makes the noise reproducible (tests, audits of a simulation): anyone who knows the
seed, the node's partition id and the round can subtract the noise, so leave it unset in a
deployment — the noise then draws fresh entropy from the operating system.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Error, Message, MessageType

from fedpriv.mechanisms import build_mechanism
from fedpriv.mechanisms.client_gaussian import ClientGaussianMechanism
from fedpriv.protocol import REPORT_RECORD, ClientReport
from fedpriv.seeding import update_generator

__all__ = ["declare_release", "fedpriv_client_dp_mod", "is_train", "privatize_arrays"]

_ERROR_CODE = 0  # Flower's simulation answers a failed ClientApp with code 0 too

Mod = Callable[[Message, Context, Callable[[Message, Context], Message]], Message]


def is_train(msg: Message) -> bool:
    """Whether ``msg`` is a train message (``train`` or ``train.<action>``): the only kind a DP
    mod privatises or declares."""
    return msg.metadata.message_type.split(".")[0] == MessageType.TRAIN


def privatize_arrays(
    mechanism: ClientGaussianMechanism, received: ArrayRecord, trained: ArrayRecord,
    generator: np.random.Generator,
) -> ArrayRecord:
    """``θ + Δ̄ + N`` with the keys and dtypes of ``received`` (``θ``); ``trained`` is
    ``θ_client``. Raises ValueError when the keys or shapes differ."""
    if list(received.keys()) != list(trained.keys()):
        raise ValueError("the reply's ArrayRecord keys differ from those the client received")
    before, after = received.to_numpy_ndarrays(), trained.to_numpy_ndarrays()
    if [a.shape for a in before] != [a.shape for a in after]:
        raise ValueError("the reply's array shapes differ from those the client received")
    delta = [np.asarray(a, np.float64) - np.asarray(b, np.float64)
             for a, b in zip(after, before, strict=True)]
    released = mechanism.privatize_update(delta, generator)
    return ArrayRecord({key: Array(np.asarray(b + r).astype(b.dtype))
                        for key, b, r in zip(received.keys(), before, released, strict=True)})


def _fail(msg: Message, reason: str, name: str = "fedpriv_client_dp_mod") -> Message:
    return Message(Error(code=_ERROR_CODE, reason=f"{name}: {reason}"), reply_to=msg)


def declare_release(
    msg: Message, reply: Message, context: Context, mechanism: ClientGaussianMechanism, *,
    privatize: tuple[ArrayRecord, int | None] | None = None, name: str = "fedpriv_client_dp_mod",
) -> Message:
    """Attach to the train ``reply`` to ``msg`` fedpriv's report declaring ``mechanism`` (the
    whole update as one client-level release); with ``privatize = (received, seed)`` first
    privatise the reply's arrays against ``received`` (θ). A reply that is not one ArrayRecord
    and one MetricRecord with ``num-examples``, or a context without ``partition-id`` or a
    train config without ``server-round``, becomes an error reply naming ``name``."""
    arrays, metrics = reply.content.array_records, reply.content.metric_records
    if len(arrays) != 1 or len(metrics) != 1:
        return _fail(msg, "the train reply must hold one ArrayRecord and one MetricRecord", name)
    n = next(iter(metrics.values())).get("num-examples")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        return _fail(msg, f"the reply's MetricRecord needs num-examples >= 1, got {n!r}", name)
    try:
        pid = int(context.node_config["partition-id"])
        server_round = int(msg.content.config_records["config"]["server-round"])
    except (KeyError, TypeError, ValueError) as exc:
        return _fail(msg, f"missing {exc} (node config partition-id, train config "
                     "server-round)", name)
    if privatize is not None:
        key, (received, seed) = next(iter(arrays)), privatize
        try:
            reply.content[key] = privatize_arrays(
                mechanism, received, arrays[key], update_generator(seed, pid, server_round))
        except ValueError as exc:
            return _fail(msg, str(exc), name)
    report = ClientReport(
        partition_id=pid, server_round=server_round, local_examples=n, local_steps=1,
        lr=1.0, batch_size=float(n), sampling="fixed", sample_rate=1.0,
        mechanism=mechanism,
    )
    reply.content[REPORT_RECORD] = ConfigRecord(report.to_config())
    return reply


def fedpriv_client_dp_mod(clip: float, noise_multiplier: float, seed: int | None = None) -> Mod:
    """A Flower client mod that privatises a ClientApp's train reply at the client level and
    declares it to fedpriv's server (module docstring).

    Parameters
    ----------
    clip
        ``S``, the ℓ2 bound of the update (> 0).
    noise_multiplier
        ``σ``: the noise std is ``σ·S`` per coordinate (≥ 0; 0 releases the clipped update
        with no guarantee, like Flower's ``fixedclipping_mod`` alone).
    seed
        Seed of the noise (reproducible); None (default): fresh entropy. A seed the server
        knows (the run config's, say) gives it the noise to subtract: keep one only in
        simulation.

    Raises
    ------
    fedpriv.errors.InputError
        On a bad ``clip`` or ``noise_multiplier`` (named ``mechanism.<param>``), when the mod
        is made, before any message.
    """
    mechanism = build_mechanism("client-gaussian",
                                {"clip": clip, "noise_multiplier": noise_multiplier})
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        from fedpriv.errors import InputError

        raise InputError("seed", seed, "an integer >= 0, or None")

    def mod(msg: Message, context: Context,
            call_next: Callable[[Message, Context], Message]) -> Message:
        if not is_train(msg):
            return call_next(msg, context)
        records = msg.content.array_records
        if len(records) != 1:
            return _fail(msg, f"expects one ArrayRecord in the train message, found {len(records)}")
        received = next(iter(records.values()))
        reply = call_next(msg, context)
        if reply.has_error():
            return reply
        return declare_release(msg, reply, context, mechanism, privatize=(received, seed))

    return mod

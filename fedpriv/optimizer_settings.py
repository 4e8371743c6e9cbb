"""The local optimiser's settings as one value: what a client trains with and declares.

One frozen :class:`OptimizerSettings` travels from the configuration into training
(:class:`fedpriv.training.LocalOptimizer` adds Adam's betas to it), into the client's report
(:class:`fedpriv.protocol.ClientReport`) and into the server's check of the update
(:func:`fedpriv.verification.client_update`, privacy-math.md §9: which optimisers leave the
releases recoverable). :func:`optimizer_conflict` is the one rule for which settings fit
together; the config, the reply check and the training code each word their own error.

Plain data, no dependency: the verification (math) and the training both import it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OPTIMIZERS", "PLAIN_SGD", "OptimizerSettings", "optimizer_conflict"]

OPTIMIZERS = ("sgd", "adam", "adamw")
"""The local optimisers a client may declare (``train.optimizer``)."""


def optimizer_conflict(name: str, momentum: float, nesterov: bool) -> str | None:
    """The setting that does not fit optimiser ``name`` — SGD's ``momentum`` or ``nesterov``
    with Adam(W), or ``nesterov`` without momentum — or None when they fit. The config, the
    reply check and :class:`fedpriv.training.LocalOptimizer` each word their own error."""
    if name != "sgd" and (momentum or nesterov):
        return "momentum" if momentum else "nesterov"
    if nesterov and not momentum > 0:
        return "nesterov"
    return None


@dataclass(frozen=True)
class OptimizerSettings:
    """The local optimiser that steps on each release, created afresh every round.

    Not validated here: a client's claim is validated where it is read
    (:meth:`fedpriv.protocol.ClientReport.from_config`), a value that cannot be true is
    evidence to the verification, and training refuses it
    (:class:`fedpriv.training.LocalOptimizer`).

    Attributes
    ----------
    name
        ``"sgd"`` (``torch.optim.SGD``), ``"adam"`` or ``"adamw"``.
    momentum, nesterov
        SGD's momentum ``μ ∈ [0, 1)`` (dampening 0) and Nesterov's variant (needs ``μ > 0``).
    weight_decay
        ``λ ≥ 0``: ``λθ`` added to the released gradient (``sgd``, ``adam``: coupled L2), or
        ``θ ← θ(1 − ηλ)`` before the step (``adamw``: decoupled).
    """

    name: str = "sgd"
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0

    def conflict(self) -> str | None:
        """The setting that does not fit :attr:`name` (:func:`optimizer_conflict`), or None."""
        return optimizer_conflict(self.name, self.momentum, self.nesterov)


PLAIN_SGD = OptimizerSettings()
"""Plain SGD: what a client that declares no optimiser used."""

"""The server's tuning of attack settings on its public data, kept per round or per run
(``audit.tune``, ``audit.tune_scope``; the tuning itself is :mod:`attacks.tuning`)."""

from __future__ import annotations

import logging
from typing import Any

from attacks.estimators.prior import PublicPrior
from attacks.tuning import tunable, tune
from attacks.view import ServerView
from fedpriv.audit.config import AuditConfig

__all__ = ["Tuner"]

log = logging.getLogger(__name__)


class Tuner:
    """The server's tuning of attack settings on its public data (``audit.tune``;
    :mod:`attacks.tuning`), once per attacked round, attack and declaration (``audit.tune_scope
    = "round"``, the shadow trains from each round's θ) or once per attack and declaration in
    the run (``"run"``, at the first round that declaration is attacked): clients that declare
    the same settings share one shadow. It sees views (public protocol state) and the public data,
    never a client's records."""

    def __init__(self, audit: AuditConfig, public: PublicPrior | None, device: str = "cpu"
                 ) -> None:
        self.audit, self.public, self.device = audit, public, device
        self._done: dict[tuple[Any, ...], dict[str, Any]] = {}

    def __call__(self, name: str, view: ServerView, rnd: int) -> dict[str, Any] | None:
        """The tuning record of attack ``name`` on ``view`` in round ``rnd`` (None where the
        attack has nothing to tune)."""
        if not tunable(name):
            return None
        if self.audit.tune == "off":
            return {"mode": "off", "chosen": None}
        if self.public is None:
            return {"mode": "public", "chosen": None,
                    "why": "the server holds no public data: fixed settings"}
        when = rnd if self.audit.tune_scope == "round" else None
        key = (when, name, view.model_name, view.batch_size, view.local_steps,
               view.learning_rate, view.optimizer, view.mechanism,
               tuple(sorted((k, repr(v)) for k, v in view.mechanism_params.items())))
        if key not in self._done:
            seed = self.audit.seed + 1000 * rnd
            found = tune(name, view, self.public, iterations=self.audit.iterations, seed=seed,
                         device=self.device, early_stop=self.audit.early_stop)
            self._done[key] = {**found.record(), "scope": self.audit.tune_scope, "round": rnd}
            log.info("round %d %s tuned on a public shadow: %s (SSIM by TV weight %s)", rnd,
                     name, found.options, dict(zip(found.grid, found.shadow_ssim, strict=True)))
        return self._done[key]

"""The Flower-facing server: the ServerApp (``server_app``) and its run (``server_run``), the
auditing wrapper around any Flower strategy (``auditing``; for your own app
:func:`audit_strategy`, ``audited``), the reply check (``replies``), the audit pipeline
(``pipeline``), the canary audit, evaluation, aggregation and attack scheduling
(``attack_schedule``). It never imports the ClientApp: Flower loads that by its import string.
Names are imported on first use (:mod:`fedpriv.lazy`): ``strategies.config`` stays light."""

from typing import TYPE_CHECKING

from fedpriv.lazy import lazy_exports

if TYPE_CHECKING:
    from strategies.audited import AuditedStrategy, audit_strategy

__all__ = ["AuditedStrategy", "audit_strategy"]

__getattr__ = lazy_exports(__name__, {"AuditedStrategy": "audited", "audit_strategy": "audited"})

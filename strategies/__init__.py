"""The Flower-facing server: the ServerApp (``server_app``) and its run (``server_run``), the
auditing wrapper around any Flower strategy (``auditing``), the reply check (``replies``), the
audit pipeline (``pipeline``), the canary audit, evaluation, aggregation and attack scheduling
(``attack_schedule``). It never imports the ClientApp: Flower loads that by its import string."""

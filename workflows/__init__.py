"""The application layer: what composes the library (``fedpriv``), the ClientApp (``clients``),
the ServerApp and auditing strategy (``strategies``) and the attacks (``attacks``) into the
things a user runs — the ``fedpriv`` command line (``workflows.cli``), a run as a Flower
simulation (``workflows.simulation``), the offline audit of a stored run
(``workflows.offline_audit``), the matched-ε sweep (``workflows.sweep``), the local
deployment launcher (``workflows.deploy``) and the in-process Grid that runs the ServerApp
body without Ray (``workflows.local_grid``, for benchmarks and tests).

Dependencies point one way: ``workflows`` may import everything; nothing imports ``workflows``.
"""

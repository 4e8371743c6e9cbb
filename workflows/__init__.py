"""The application layer: what composes the library (``fedpriv``), the ClientApp (``clients``),
the ServerApp and auditing strategy (``strategies``) and the attacks (``attacks``) into the
things a user runs — the ``fedpriv`` command line (``workflows.cli``), a run as a Flower
simulation (``workflows.simulation``), the offline audit of a stored run
(``workflows.offline_audit``), the matched-ε sweep (``workflows.sweep``) and the local
deployment launcher (``workflows.deploy``).

Dependencies point one way: ``workflows`` may import everything; nothing imports ``workflows``.
"""

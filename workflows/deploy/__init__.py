"""Real Flower deployments on one machine: SuperLink + SuperNodes on 127.0.0.1.

``processes`` starts and stops process trees, ``ports`` finds free loopback ports, ``tls``
makes throwaway certificates and SuperNode keys, ``flwr_cli`` drives the ``flwr`` command
line, ``federation`` runs a :class:`LocalFederation`, and ``local`` runs one fedpriv
experiment on it (``fedpriv deploy-local``).
"""

from workflows.deploy.federation import LocalFederation
from workflows.deploy.local import deploy_local, plan_deployment

__all__ = ["LocalFederation", "deploy_local", "plan_deployment"]

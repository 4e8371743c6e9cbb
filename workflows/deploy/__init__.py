"""Real Flower deployments: SuperLink + SuperNodes on 127.0.0.1, or on hosts of their own.

``processes`` starts and stops process trees, ``ports`` finds free loopback ports, ``tls``
makes throwaway certificates and SuperNode keys, ``flwr_cli`` drives the ``flwr`` command
line, ``hosts`` says where a process runs, ``netns`` makes hosts out of network namespaces,
``federation`` runs a :class:`Federation`, and ``local`` runs one fedpriv experiment on it
(``fedpriv deploy-local``).
"""

from workflows.deploy.federation import Federation
from workflows.deploy.local import deploy_local, plan_deployment

__all__ = ["Federation", "deploy_local", "plan_deployment"]

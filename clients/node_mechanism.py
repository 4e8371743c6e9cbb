"""Which mechanism a client uses: the config's (with per-client overrides), then the node's own.

In a deployment a SuperNode can set its mechanism in ``--node-config``, e.g.
``partition-id=0 num-partitions=2 mechanism='vmf' kappa=100``; those keys win over the run
config. Node-config keys use dashes (``noise-multiplier``); they map to the mechanism keys
(:func:`fedpriv.mechanisms.config.node_config_keys`), and the mechanism validates their values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedpriv.mechanisms.config import MechanismConfig, node_config_keys

__all__ = ["mechanism_for"]


def mechanism_for(
    mechanism: MechanismConfig, partition_id: int, node_config: Mapping[str, Any]
) -> tuple[str, dict[str, Any]]:
    """``(name, params)`` for this client: ``[mechanism]``, then its overrides, then the node's
    config."""
    name, params = mechanism.for_client(partition_id)
    for node_key, key in node_config_keys().items():
        if node_key in node_config:
            value = node_config[node_key]
            if key == "name":
                name = str(value)
            else:
                params[key] = value
    return name, params

"""Run on a Ray cluster's head host by :class:`ray_cluster_support.RayCluster`:

* ``nodes ADDRESS COUNT TIMEOUT [GONE-ID...]`` — wait until COUNT nodes with CPUs are alive
  and the GONE ones are not; print them as one JSON line
  (:func:`ray_cluster_support.alive_nodes`);
* ``join ADDRESS`` — print as JSON where "auto" leads and what ``ray.init(ADDRESS,
  num_cpus=1)`` says (:func:`ray_cluster_support.join_checks`);
* ``simulate TRACE HOLD_ROUND FEDPRIV-ARGS...`` — ``fedpriv FEDPRIV-ARGS`` (the command
  line's own ``main``) with the ClientApp of :func:`ray_cluster_support.traced_client_app`
  (writing to TRACE, holding round HOLD_ROUND's train messages) in place of fedpriv's; its exit
  code is this script's.

A script, not a module: the trace mod must live in an importable module
(``ray_cluster_support``, on the actors' ``PYTHONPATH`` because Flower ships the driver's
``sys.path`` to them), not in ``__main__``.
"""

import json
import sys

from ray_cluster_support import alive_nodes, join_checks, traced_client_app


def main(argv: list[str]) -> int:
    if argv[0] == "nodes":
        print(json.dumps(alive_nodes(argv[1], int(argv[2]), float(argv[3]), tuple(argv[4:]))))
        return 0
    if argv[0] == "join":
        print(json.dumps(join_checks(argv[1])))
        return 0
    if argv[0] == "simulate":
        import workflows.simulation
        from workflows.cli.main import main as fedpriv

        app = traced_client_app(argv[1], int(argv[2]))
        workflows.simulation.load_client_app = lambda ref=None: app
        return fedpriv(argv[3:])
    raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
